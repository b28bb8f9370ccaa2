//===- MoEReference.cpp - Plain C++ reference of the moe ops --------------===//
//
// See MoEReference.h for the contract and the precision choices.
//
//===----------------------------------------------------------------------===//

#include "test/reference/MoEReference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>

namespace moe {
namespace ref {

namespace {

[[noreturn]] void fail(const std::string &msg) {
  std::fprintf(stderr, "moe::ref error: %s\n", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

void check(bool cond, const std::string &msg) {
  if (!cond)
    fail(msg);
}

std::string sizeMsg(const char *what, size_t got, int64_t want) {
  return std::string(what) + " has " + std::to_string(got) +
         " elements, expected " + std::to_string(want);
}

constexpr double kInf = std::numeric_limits<double>::infinity();

} // namespace

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

const char *elementTypeName(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return "f32";
  case ElementType::BF16:
    return "bf16";
  case ElementType::F16:
    return "f16";
  }
  return "?";
}

bool parseElementType(const std::string &name, ElementType &type) {
  for (ElementType t : {ElementType::F32, ElementType::BF16, ElementType::F16})
    if (name == elementTypeName(t)) {
      type = t;
      return true;
    }
  return false;
}

double roundTo(ElementType type, double v) {
  if (type == ElementType::F32)
    return double(float(v));
  if (!std::isfinite(v) || v == 0.0)
    return v;
  // p significand bits (with the implicit one), the smallest normal
  // exponent, the largest finite value.
  const bool bf16 = type == ElementType::BF16;
  const int p = bf16 ? 8 : 11;
  const int emin = bf16 ? -126 : -14;
  const double maxFinite = bf16 ? std::ldexp(255.0, 120) : 65504.0;
  // The quantum (weight of the last kept bit) is 2^(e - (p - 1)) with e
  // the exponent of v, or emin for subnormals of T. v / quantum is exact
  // (a power-of-two scaling well inside double's range), and nearbyint
  // rounds it to nearest, ties to even.
  const int e = std::max(std::ilogb(v), emin);
  const double quantum = std::ldexp(1.0, e - (p - 1));
  const double r = std::nearbyint(v / quantum) * quantum;
  if (std::fabs(r) > maxFinite)
    return std::copysign(std::numeric_limits<double>::infinity(), v);
  return r;
}

void roundAll(ElementType type, std::vector<float> &v) {
  if (type == ElementType::F32)
    return;
  for (float &f : v)
    f = float(roundTo(type, double(f)));
}

double unitRoundoff(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return 0x1.0p-24;
  case ElementType::BF16:
    return 0x1.0p-8;
  case ElementType::F16:
    return 0x1.0p-11;
  }
  return 0;
}

Tolerance tolerance(ElementType type) {
  const double u = unitRoundoff(type);
  return Tolerance{4 * u, 2 * u};
}

//===----------------------------------------------------------------------===//
// Activations and experts
//===----------------------------------------------------------------------===//

bool isGated(Activation act) {
  return act == Activation::SwiGLU || act == Activation::GeGLU;
}

double gelu(double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }

double geluTanh(double v) {
  const double c = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * v * (1.0 + std::tanh(c * (v + 0.044715 * v * v * v)));
}

double relu(double v) { return v > 0.0 ? v : 0.0; }

double silu(double v) { return v / (1.0 + std::exp(-v)); }

double activate(Activation act, double v) {
  switch (act) {
  case Activation::Gelu:
  case Activation::GeGLU:
    return gelu(v);
  case Activation::GeluTanh:
    return geluTanh(v);
  case Activation::Relu:
    return relu(v);
  case Activation::Silu:
  case Activation::SwiGLU:
    return silu(v);
  }
  fail("unknown activation");
}

const char *activationName(Activation act) {
  switch (act) {
  case Activation::Gelu:
    return "gelu";
  case Activation::GeluTanh:
    return "gelu_tanh";
  case Activation::Relu:
    return "relu";
  case Activation::Silu:
    return "silu";
  case Activation::SwiGLU:
    return "swiglu";
  case Activation::GeGLU:
    return "geglu";
  }
  return "?";
}

bool parseActivation(const std::string &name, Activation &act) {
  static const Activation all[] = {Activation::Gelu,   Activation::GeluTanh,
                                   Activation::Relu,   Activation::Silu,
                                   Activation::SwiGLU, Activation::GeGLU};
  for (Activation a : all) {
    if (name == activationName(a)) {
      act = a;
      return true;
    }
  }
  return false;
}

void Experts::verify() const {
  check(numExperts >= 1 && modelDim >= 1 && hiddenDim >= 1,
        "experts: E, D and H must be >= 1");
  const int64_t E = numExperts, D = modelDim, H = hiddenDim, C = w1Cols();
  check(int64_t(w1.size()) == E * D * C, sizeMsg("W1", w1.size(), E * D * C));
  check(int64_t(w2.size()) == E * H * D, sizeMsg("W2", w2.size(), E * H * D));
  check(b1.empty() || int64_t(b1.size()) == E * C,
        sizeMsg("b1", b1.size(), E * C));
  check(b2.empty() || int64_t(b2.size()) == E * D,
        sizeMsg("b2", b2.size(), E * D));
}

double fp8E4M3Value(uint8_t code) {
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  const int exponent = (code >> 3) & 0xF, mantissa = code & 0x7;
  if (exponent == 0xF && mantissa == 0x7)
    return std::numeric_limits<double>::quiet_NaN();
  if (exponent == 0)
    return sign * std::ldexp(double(mantissa) / 8.0, -6);
  return sign * std::ldexp(1.0 + double(mantissa) / 8.0, exponent - 7);
}

void quantizeFp8Block(std::vector<float> &w, int64_t E, int64_t K, int64_t N,
                      int64_t blockK, int64_t blockN, uint8_t (*encode)(float),
                      std::vector<uint8_t> &codes, std::vector<float> &scales,
                      float (*roundScale)(float)) {
  check(int64_t(w.size()) == E * K * N && blockK >= 1 && blockN >= 1,
        "quantizeFp8Block: sizes");
  const int64_t KB = (K + blockK - 1) / blockK, NB = (N + blockN - 1) / blockN;
  codes.assign(w.size(), 0);
  scales.assign(size_t(E * KB * NB), 1.0f);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t kb = 0; kb < KB; ++kb)
      for (int64_t nb = 0; nb < NB; ++nb) {
        const int64_t k0 = kb * blockK, k1 = std::min(K, k0 + blockK);
        const int64_t n0 = nb * blockN, n1 = std::min(N, n0 + blockN);
        double amax = 0;
        for (int64_t k = k0; k < k1; ++k)
          for (int64_t n = n0; n < n1; ++n)
            if (std::isfinite(w[size_t((e * K + k) * N + n)]))
              amax = std::max(amax, std::fabs(double(w[size_t((e * K + k) * N + n)])));
        float s = amax > 0 ? float(amax / 448.0) : 1.0f;
        if (roundScale)
          s = roundScale(s);
        scales[size_t((e * KB + kb) * NB + nb)] = s;
        for (int64_t k = k0; k < k1; ++k)
          for (int64_t n = n0; n < n1; ++n) {
            const size_t i = size_t((e * K + k) * N + n);
            codes[i] = encode(w[i] / s);
            w[i] = float(fp8E4M3Value(codes[i]) * double(s));
          }
      }
}

void quantizeInt4Group(std::vector<float> &w, int64_t E, int64_t K, int64_t N,
                       int64_t group, bool zeroPoint, std::vector<uint8_t> &codes,
                       std::vector<float> &scales, std::vector<uint8_t> &zeros,
                       float (*roundScale)(float)) {
  check(int64_t(w.size()) == E * K * N && group >= 1, "quantizeInt4Group: sizes");
  const int64_t G = (K + group - 1) / group;
  codes.assign(w.size(), 0);
  scales.assign(size_t(E * G * N), 1.0f);
  zeros.assign(zeroPoint ? size_t(E * G * N) : 0, 0);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t g = 0; g < G; ++g)
      for (int64_t n = 0; n < N; ++n) {
        const int64_t k0 = g * group, k1 = std::min(K, k0 + group);
        double lo = 0, hi = 0;
        for (int64_t k = k0; k < k1; ++k) {
          const double v = w[size_t((e * K + k) * N + n)];
          if (std::isfinite(v)) {
            lo = std::min(lo, v);
            hi = std::max(hi, v);
          }
        }
        double range = zeroPoint ? hi - lo : std::max(-lo, hi);
        float s = range > 0 ? float(range / (zeroPoint ? 15.0 : 7.0)) : 1.0f;
        if (roundScale)
          s = roundScale(s);
        const double z = zeroPoint ? std::clamp(std::nearbyint(-lo / double(s)), 0.0, 15.0) : 8.0;
        const size_t at = size_t((e * G + g) * N + n);
        scales[at] = s;
        if (zeroPoint)
          zeros[at] = uint8_t(z);
        for (int64_t k = k0; k < k1; ++k) {
          const size_t i = size_t((e * K + k) * N + n);
          const double v = std::isnan(w[i]) ? 0.0 : double(w[i]);
          const double q = std::clamp(std::nearbyint(v / double(s)) + z, 0.0, 15.0);
          codes[i] = uint8_t(q);
          w[i] = float((q - z) * double(s));
        }
      }
}

void quantizeActivationsInt8(double *a, int64_t n, int64_t group) {
  check(group >= 1, "the activation group must be >= 1");
  for (int64_t g0 = 0; g0 < n; g0 += group) {
    const int64_t g1 = std::min(n, g0 + group);
    float amax = 0.0f;
    for (int64_t i = g0; i < g1; ++i) {
      const float v = std::fabs(static_cast<float>(a[i]));
      amax = (std::isnan(v) || std::isnan(amax)) ? std::numeric_limits<float>::quiet_NaN()
                                                 : std::max(amax, v);
    }
    const float s = amax / 127.0f;
    for (int64_t i = g0; i < g1; ++i) {
      if (s == 0.0f) {
        a[i] = 0.0;
        continue;
      }
      // Round half to even (the default rounding mode's nearbyint).
      const float q = std::nearbyint(static_cast<float>(a[i]) / s);
      a[i] = double(q) * double(s);
    }
  }
}

void expertForward(const Experts &ex, int64_t e, const double *xIn,
                   double *out) {
  check(e >= 0 && e < ex.numExperts, "expert index out of range");
  const int64_t D = ex.modelDim, H = ex.hiddenDim, C = ex.w1Cols();
  // The int8-activation mode: x as its int8 quantization.
  std::vector<double> xq;
  const double *x = xIn;
  if (ex.int8ActivationGroup > 0) {
    xq.assign(xIn, xIn + D);
    quantizeActivationsInt8(xq.data(), D, ex.int8ActivationGroup);
    x = xq.data();
  }
  // u = x W1[e] + b1[e]
  std::vector<double> u(static_cast<size_t>(C), 0.0);
  const float *w1 = ex.w1.data() + e * D * C;
  for (int64_t c = 0; c < C; ++c) {
    double acc = ex.b1.empty() ? 0.0 : double(ex.b1[size_t(e * C + c)]);
    for (int64_t d = 0; d < D; ++d)
      acc += x[d] * double(w1[d * C + c]);
    u[size_t(c)] = acc;
  }
  // h = act(u) or act(u[:H]) * u[H:]
  std::vector<double> h(static_cast<size_t>(H));
  if (isGated(ex.activation)) {
    for (int64_t i = 0; i < H; ++i)
      h[size_t(i)] = activate(ex.activation, u[size_t(i)]) * u[size_t(H + i)];
  } else {
    for (int64_t i = 0; i < H; ++i)
      h[size_t(i)] = activate(ex.activation, u[size_t(i)]);
  }
  // For T = bf16/f16, h is rounded to T before GEMM2 (docs/spec.md §2-§3).
  if (ex.elementType != ElementType::F32)
    for (double &v : h)
      v = roundTo(ex.elementType, v);
  // The int8-activation mode: h rounded to T (f32 too), then quantized.
  if (ex.int8ActivationGroup > 0) {
    for (double &v : h)
      v = roundTo(ex.elementType, static_cast<float>(v));
    quantizeActivationsInt8(h.data(), H, ex.int8ActivationGroup);
  }
  // out = h W2[e] + b2[e]
  const float *w2 = ex.w2.data() + e * H * D;
  for (int64_t d = 0; d < D; ++d) {
    double acc = ex.b2.empty() ? 0.0 : double(ex.b2[size_t(e * D + d)]);
    for (int64_t i = 0; i < H; ++i)
      acc += h[size_t(i)] * double(w2[i * D + d]);
    out[d] = acc;
  }
}

std::vector<double> expertForward(const Experts &ex, int64_t e,
                                  const float *x) {
  std::vector<double> xd(x, x + ex.modelDim);
  std::vector<double> out(static_cast<size_t>(ex.modelDim));
  expertForward(ex, e, xd.data(), out.data());
  return out;
}

//===----------------------------------------------------------------------===//
// Routing
//===----------------------------------------------------------------------===//

const char *adjustName(Adjust adjust) {
  switch (adjust) {
  case Adjust::SmallRandom:
    return "small_random";
  case Adjust::Zero:
    return "zero";
  case Adjust::Large:
    return "large";
  }
  return "?";
}

bool parseAdjust(const std::string &name, Adjust &adjust) {
  static const Adjust all[] = {Adjust::SmallRandom, Adjust::Zero,
                               Adjust::Large};
  for (Adjust a : all) {
    if (name == adjustName(a)) {
      adjust = a;
      return true;
    }
  }
  return false;
}

std::vector<double> softmax(const double *v, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  if (n == 0)
    return out;
  double m = v[0];
  for (int64_t i = 1; i < n; ++i)
    m = std::max(m, v[i]);
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    out[size_t(i)] = std::exp(v[i] - m);
    s += out[size_t(i)];
  }
  for (int64_t i = 0; i < n; ++i)
    out[size_t(i)] /= s;
  return out;
}

bool rankedAbove(double a, double b) {
  if (std::isnan(a))
    return false;
  return std::isnan(b) || a > b;
}

std::vector<int64_t> topKIndices(const double *v, int64_t n, int64_t k) {
  check(k >= 0 && k <= n, "top-k: k out of range");
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), int64_t(0));
  // Larger value first; equal values: lower index first (a strict weak
  // order, so the result is fully determined).
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int64_t a, int64_t b) {
                      if (rankedAbove(v[a], v[b]) || rankedAbove(v[b], v[a]))
                        return rankedAbove(v[a], v[b]);
                      return a < b;
                    });
  idx.resize(size_t(k));
  return idx;
}

namespace {

/// The sequential sampling of docs/spec.md §3.1 in arithmetic type T. p is the
/// starting distribution (g) in T.
template <typename T>
std::vector<int64_t> sampleImpl(std::vector<T> p, int64_t k, uint64_t seed,
                                uint32_t token, double *margin) {
  const int64_t n = int64_t(p.size());
  check(k >= 1 && k <= n, "sampling: k out of range");
  std::vector<int64_t> chosen;
  std::vector<bool> taken(static_cast<size_t>(n), false);
  double minDist = kInf;
  for (int64_t r = 0; r < k; ++r) {
    const T u = T(philoxUniform(seed, token, uint32_t(r)));
    int64_t pick = -1;
    T c = T(0);
    for (int64_t i = 0; i < n; ++i) {
      c += p[size_t(i)];
      minDist = std::min(minDist, std::fabs(double(u) - double(c)));
      if (pick < 0 && u < c)
        pick = i;
    }
    if (pick < 0) {
      // Rounding left no i with u < c_i: the last i with p_i > 0.
      for (int64_t i = n - 1; i >= 0; --i) {
        if (p[size_t(i)] > T(0)) {
          pick = i;
          break;
        }
      }
    }
    if (pick < 0) {
      // Degenerate: nothing left with p_i > 0 (see the header).
      for (int64_t i = 0; i < n; ++i) {
        if (!taken[size_t(i)]) {
          pick = i;
          break;
        }
      }
    }
    chosen.push_back(pick);
    taken[size_t(pick)] = true;
    p[size_t(pick)] = T(0);
    T s = T(0);
    for (int64_t i = 0; i < n; ++i)
      s += p[size_t(i)];
    const T denom = s + T(1e-10);
    for (int64_t i = 0; i < n; ++i)
      p[size_t(i)] = p[size_t(i)] / denom;
  }
  if (margin)
    *margin = minDist;
  return chosen;
}

} // namespace

std::vector<int64_t> sampleWithoutReplacement(const double *g, int64_t n,
                                              int64_t k, uint64_t seed,
                                              uint32_t token,
                                              SamplingPrecision precision,
                                              double *margin) {
  if (precision == SamplingPrecision::F32) {
    std::vector<float> p(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      p[size_t(i)] = float(g[i]);
    return sampleImpl<float>(std::move(p), k, seed, token, margin);
  }
  return sampleImpl<double>(std::vector<double>(g, g + n), k, seed, token,
                            margin);
}

std::vector<int64_t> sampleWithoutReplacementF32(const float *g, int64_t n,
                                                 int64_t k, uint64_t seed,
                                                 uint32_t token,
                                                 double *margin) {
  return sampleImpl<float>(std::vector<float>(g, g + n), k, seed, token,
                           margin);
}

int64_t smallRandomPick(const std::vector<int64_t> &selected, uint64_t seed,
                        uint32_t token) {
  const int64_t K = int64_t(selected.size());
  check(K >= 1, "small_random: empty expert set");
  const double u = double(philoxUniform(seed, token, uint32_t(K)));
  int64_t pos = int64_t(std::floor(u * double(K)));
  pos = std::min(std::max(pos, int64_t(0)), K - 1);
  std::vector<int64_t> sorted = selected;
  std::sort(sorted.begin(), sorted.end());
  return sorted[size_t(pos)];
}

namespace {

/// softmax over S of the adjusted logits õ.
std::vector<double> softmaxOver(const std::vector<double> &adjusted) {
  return softmax(adjusted.data(), int64_t(adjusted.size()));
}

/// o_i - log(max(c * (g_i + 1e-10), 1e-10)).
double adjustLogit(double o, double g, double c) {
  return o - std::log(std::max(c * (g + 1e-10), 1e-10));
}

/// #moe.top_k's scores s (docs/spec.md §3.1.1 step 1): softmax(o) or
/// sigmoid(o).
std::vector<double> topKScores(const double *o, int64_t E, Score score) {
  if (score == Score::Softmax)
    return softmax(o, E);
  std::vector<double> s(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e)
    s[size_t(e)] = 1.0 / (1.0 + std::exp(-o[e]));
  return s;
}

/// #moe.top_k with production parameters or a selection bias (docs/spec.md §3.1.1).
TokenRouting routeProduction(const double *o, int64_t E, const Routing &routing,
                             const double *bias) {
  const int64_t K = routing.k, G = routing.groups;
  const int64_t GK = routing.groupK > 0 ? routing.groupK : G;
  check(G >= 1 && E % G == 0, "routing: groups must divide E");
  check(GK >= 1 && GK <= G, "routing: group_k out of range");
  check(K >= 1 && K <= GK * (E / G), "routing: k exceeds the choosable experts");
  const std::vector<double> s = topKScores(o, E, routing.score);
  std::vector<double> c(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e)
    c[size_t(e)] = s[size_t(e)] + (bias ? bias[e] : 0.0);

  // Ordering: larger value first, ties to the lower index.
  auto ranked = [](const std::vector<double> &v, const std::vector<bool> &allowed) {
    std::vector<int64_t> idx;
    for (size_t i = 0; i < v.size(); ++i)
      if (allowed[i])
        idx.push_back(int64_t(i));
    std::stable_sort(idx.begin(), idx.end(),
                     [&](int64_t a, int64_t b) { return rankedAbove(v[size_t(a)], v[size_t(b)]); });
    return idx;
  };
  // A gap with a NaN on either side is decided by the NaN rule, exactly:
  // no margin.
  double margin = kInf;
  auto tighten = [&](double gap) {
    if (gap < margin)
      margin = gap;
  };
  std::vector<bool> choosable(static_cast<size_t>(E), true);
  if (G > 1) {
    const int64_t size = E / G;
    std::vector<double> groupScore(static_cast<size_t>(G));
    for (int64_t g = 0; g < G; ++g) {
      std::vector<double> members(c.begin() + g * size, c.begin() + (g + 1) * size);
      std::sort(members.begin(), members.end(), rankedAbove);
      groupScore[size_t(g)] = members[0] + (size >= 2 ? members[1] : 0.0);
    }
    std::vector<int64_t> order = ranked(groupScore, std::vector<bool>(size_t(G), true));
    if (GK < G)
      tighten(groupScore[size_t(order[size_t(GK - 1)])] - groupScore[size_t(order[size_t(GK)])]);
    std::vector<bool> kept(static_cast<size_t>(G), false);
    for (int64_t i = 0; i < GK; ++i)
      kept[size_t(order[size_t(i)])] = true;
    for (int64_t e = 0; e < E; ++e)
      choosable[size_t(e)] = kept[size_t(e / size)];
  }
  std::vector<int64_t> order = ranked(c, choosable);
  if (int64_t(order.size()) > K)
    tighten(c[size_t(order[size_t(K - 1)])] - c[size_t(order[size_t(K)])]);
  TokenRouting res;
  res.selected.assign(order.begin(), order.begin() + K);
  res.weights =
      routingWeights(o, E, routing, /*training=*/false, res.selected,
                     /*pickedJ=*/-1, /*withSelectionBias=*/bias != nullptr);
  res.decisionMargin = margin;
  return res;
}

} // namespace

std::vector<double> routingWeights(const double *o, int64_t E,
                                   const Routing &routing, bool training,
                                   const std::vector<int64_t> &selected,
                                   int64_t pickedJ, bool withSelectionBias) {
  for (int64_t i : selected)
    check(i >= 0 && i < E, "routing: expert index out of range");
  std::vector<double> weights;
  if (routing.kind == RoutingKind::TopK &&
      (!routing.isClassicTopK() || withSelectionBias)) {
    // w_i = s_i, divided by (sum_S s + 1e-20) with normalize, times scale.
    const std::vector<double> s = topKScores(o, E, routing.score);
    double sum = 0.0;
    for (int64_t e : selected)
      sum += s[size_t(e)];
    for (int64_t e : selected) {
      double w = s[size_t(e)];
      if (routing.normalize)
        w /= (sum + 1e-20);
      weights.push_back(w * routing.scale);
    }
    return weights;
  }
  const std::vector<double> g = softmax(o, E);
  if (routing.kind == RoutingKind::Dense) {
    for (int64_t i : selected)
      weights.push_back(g[size_t(i)]);
    return weights;
  }
  const int64_t K = routing.k;
  check(int64_t(selected.size()) == K, "routing: S_t must have k experts");
  std::vector<double> adjusted;
  if (routing.kind == RoutingKind::TopK || !training) {
    // top_k: softmax_S(o); MOESART inference: softmax_S(o - log(K g)).
    for (int64_t i : selected) {
      if (routing.kind == RoutingKind::TopK)
        adjusted.push_back(o[i]);
      else
        adjusted.push_back(adjustLogit(o[i], g[size_t(i)], double(K)));
    }
    return softmaxOver(adjusted);
  }
  switch (routing.adjust) {
  case Adjust::SmallRandom:
    check(std::find(selected.begin(), selected.end(), pickedJ) !=
              selected.end(),
          "small_random: j is not in S_t");
    for (int64_t i : selected) {
      if (i == pickedJ)
        adjusted.push_back(o[i]);
      else
        adjusted.push_back(adjustLogit(o[i], g[size_t(i)], double(K - 1)));
    }
    return softmaxOver(adjusted);
  case Adjust::Zero:
    for (int64_t i : selected)
      adjusted.push_back(adjustLogit(o[i], g[size_t(i)], double(K)));
    return softmaxOver(adjusted);
  case Adjust::Large: {
    double s = 0.0;
    for (int64_t i : selected)
      s += g[size_t(i)];
    for (int64_t i : selected)
      weights.push_back(g[size_t(i)] / s);
    return weights;
  }
  }
  fail("unknown adjust");
}

TokenRouting routeToken(const double *o, int64_t E, const Routing &routing,
                        bool training, uint64_t seed, uint32_t token,
                        SamplingPrecision precision, const double *selectionBias) {
  check(E >= 1, "routing: E must be >= 1");
  if (routing.kind == RoutingKind::TopK && (!routing.isClassicTopK() || selectionBias))
    return routeProduction(o, E, routing, selectionBias);
  check(!selectionBias, "routing: a selection bias needs top_k routing");
  TokenRouting res;
  if (routing.kind == RoutingKind::Dense) {
    res.selected.resize(size_t(E));
    std::iota(res.selected.begin(), res.selected.end(), int64_t(0));
    res.weights = routingWeights(o, E, routing, training, res.selected, -1,
                                 /*withSelectionBias=*/false);
    res.decisionMargin = kInf;
    return res;
  }
  const int64_t K = routing.k;
  check(K >= 1 && K <= E, "routing: k = " + std::to_string(K) +
                              " must be in [1, E = " + std::to_string(E) +
                              "]");

  const bool sampled = routing.kind == RoutingKind::MoESART && training;
  if (!sampled) {
    // Top-K of o (top_k at inference and training, MOESART inference).
    std::vector<int64_t> ranked = topKIndices(o, E, std::min(K + 1, E));
    res.decisionMargin = K < E ? o[ranked[size_t(K - 1)]] - o[ranked[size_t(K)]]
                               : kInf;
    ranked.resize(size_t(K));
    res.selected = ranked;
  } else {
    check(K >= 2, "MOESART training needs k >= 2");
    const std::vector<double> g = softmax(o, E);
    res.selected = sampleWithoutReplacement(g.data(), E, K, seed, token,
                                            precision, &res.decisionMargin);
    if (routing.adjust == Adjust::SmallRandom)
      res.pickedJ = smallRandomPick(res.selected, seed, token);
  }
  res.weights = routingWeights(o, E, routing, training, res.selected,
                               res.pickedJ, /*withSelectionBias=*/false);
  return res;
}

double trimmedLassoLoss(const std::vector<double> &g, int64_t T, int64_t E,
                        int64_t k, double lambda) {
  check(int64_t(g.size()) == T * E, sizeMsg("g", g.size(), T * E));
  check(k >= 1 && k <= E, "trimmed lasso: k out of range");
  if (T == 0)
    return 0.0;
  double total = 0.0;
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> row(g.begin() + t * E, g.begin() + (t + 1) * E);
    std::sort(row.begin(), row.end(), rankedAbove);
    double top = 0.0;
    for (int64_t i = 0; i < k; ++i)
      top += row[size_t(i)];
    total += 1.0 - top;
  }
  return lambda * (total / double(T));
}

//===----------------------------------------------------------------------===//
// moe.layer
//===----------------------------------------------------------------------===//

namespace {

/// The experts with every weight rounded to their element type.
Experts roundedExperts(const Experts &ex) {
  Experts r = ex;
  if (!r.quantizedWeights) {
    roundAll(r.elementType, r.w1);
    roundAll(r.elementType, r.w2);
  }
  roundAll(r.elementType, r.b1);
  roundAll(r.elementType, r.b2);
  return r;
}

/// Checks the sizes of the layer's operands and the routing parameters.
void verifyLayer(const LayerInputs &in, const LayerOptions &opt) {
  in.experts.verify();
  const int64_t T = in.numTokens, D = in.experts.modelDim,
                E = in.experts.numExperts;
  check(T >= 0, "T must be >= 0");
  check(int64_t(in.x.size()) == T * D, sizeMsg("x", in.x.size(), T * D));
  check(int64_t(in.wr.size()) == D * E, sizeMsg("Wr", in.wr.size(), D * E));
  check(in.br.empty() || int64_t(in.br.size()) == E,
        sizeMsg("br", in.br.size(), E));
  const Routing &routing = opt.routing;
  if (routing.kind != RoutingKind::Dense)
    check(routing.k >= 1 && routing.k <= E,
          "k = " + std::to_string(routing.k) + " must be in [1, E = " +
              std::to_string(E) + "]");
  if (routing.kind == RoutingKind::MoESART && opt.training)
    check(routing.k >= 2, "MOESART training needs k >= 2");
  check(T <= int64_t(0xFFFFFFFFll), "T does not fit the Philox counter");
  check(in.selectionBias.empty() || int64_t(in.selectionBias.size()) == E,
        sizeMsg("selection_bias", in.selectionBias.size(), E));
}

/// The shared expert of `in` as a one-expert FFN of the layer's activation,
/// with its weights as given (numExperts = 0 when the layer has none).
Experts sharedExpert(const LayerInputs &in) {
  Experts shared;
  const bool hasShared = in.sharedHidden > 0;
  if (hasShared) {
    shared.numExperts = 1;
    shared.modelDim = in.experts.modelDim;
    shared.hiddenDim = in.sharedHidden;
    shared.activation = in.experts.activation;
    shared.elementType = in.experts.elementType;
    shared.w1 = in.sharedW1;
    shared.w2 = in.sharedW2;
    shared.verify();
  }
  check(in.sharedGate.empty() ||
            (hasShared && int64_t(in.sharedGate.size()) == in.experts.modelDim),
        "shared gate: needs a shared expert and D values");
  return shared;
}

/// The router logits o = x Wr + br, [T, E].
std::vector<double> routerLogits(const LayerInputs &in) {
  const int64_t T = in.numTokens, D = in.experts.modelDim,
                E = in.experts.numExperts;
  std::vector<double> logits(size_t(T * E), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) {
      double acc = in.br.empty() ? 0.0 : double(in.br[size_t(e)]);
      for (int64_t d = 0; d < D; ++d)
        acc +=
            double(in.x[size_t(t * D + d)]) * double(in.wr[size_t(d * E + e)]);
      logits[size_t(t * E + e)] = acc;
    }
  }
  return logits;
}

/// y_t = sum over the kept i of w_t,i f_i(x_t), plus gate_t times the
/// shared expert (numExperts = 0: none), in double before the rounding to
/// T: [T, D].
std::vector<double>
combineExperts(const LayerInputs &in, const Experts &shared,
               const std::vector<std::vector<int64_t>> &selected,
               const std::vector<std::vector<double>> &weights,
               const std::vector<std::vector<bool>> &dropped) {
  const Experts &ex = in.experts;
  const int64_t T = in.numTokens, D = ex.modelDim;
  std::vector<double> y(size_t(T * D), 0.0);
  std::vector<double> xd(static_cast<size_t>(D)), fx(static_cast<size_t>(D));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t d = 0; d < D; ++d)
      xd[size_t(d)] = double(in.x[size_t(t * D + d)]);
    double *acc = y.data() + t * D;
    const std::vector<int64_t> &sel = selected[size_t(t)];
    for (size_t i = 0; i < sel.size(); ++i) {
      if (dropped[size_t(t)][i])
        continue;
      expertForward(ex, sel[i], xd.data(), fx.data());
      const double w = weights[size_t(t)][i];
      for (int64_t d = 0; d < D; ++d)
        acc[d] += w * fx[size_t(d)];
    }
    if (shared.numExperts > 0) {
      double gate = 1.0;
      if (!in.sharedGate.empty()) {
        double z = 0.0;
        for (int64_t d = 0; d < D; ++d)
          z += xd[size_t(d)] * double(in.sharedGate[size_t(d)]);
        gate = 1.0 / (1.0 + std::exp(-z));
      }
      expertForward(shared, 0, xd.data(), fx.data());
      for (int64_t d = 0; d < D; ++d)
        acc[d] += gate * fx[size_t(d)];
    }
  }
  return y;
}

} // namespace

LayerResult moeLayer(const LayerInputs &input, const LayerOptions &opt) {
  input.experts.verify();
  // The inputs as values of T (a copy only when T is not f32).
  const ElementType type = input.experts.elementType;
  LayerInputs roundedInput;
  if (type != ElementType::F32) {
    roundedInput = input;
    roundAll(type, roundedInput.x);
    roundAll(type, roundedInput.wr);
    roundAll(type, roundedInput.br);
    roundedInput.experts = roundedExperts(input.experts);
    roundAll(type, roundedInput.sharedW1);
    roundAll(type, roundedInput.sharedW2);
    roundAll(type, roundedInput.sharedGate);
  }
  const LayerInputs &in = type == ElementType::F32 ? input : roundedInput;
  verifyLayer(in, opt);
  const Experts shared = sharedExpert(in);
  const int64_t T = in.numTokens, E = in.experts.numExperts;
  const Routing &routing = opt.routing;
  const std::vector<double> bias(in.selectionBias.begin(),
                                 in.selectionBias.end());

  LayerResult res;
  res.logits = routerLogits(in);
  res.probs.assign(size_t(T * E), 0.0);
  res.selected.resize(size_t(T));
  res.weights.resize(size_t(T));
  res.dropped.resize(size_t(T));
  res.pickedJ.assign(size_t(T), -1);
  res.decisionMargin.assign(size_t(T), kInf);

  // Routing.
  for (int64_t t = 0; t < T; ++t) {
    const double *o = res.logits.data() + t * E;
    std::vector<double> g = softmax(o, E);
    std::copy(g.begin(), g.end(), res.probs.begin() + t * E);
    TokenRouting tr = routeToken(o, E, routing, opt.training, opt.seed,
                                 uint32_t(t), opt.samplingPrecision,
                                 bias.empty() ? nullptr : bias.data());
    res.selected[size_t(t)] = std::move(tr.selected);
    res.weights[size_t(t)] = std::move(tr.weights);
    res.dropped[size_t(t)].assign(res.selected[size_t(t)].size(), false);
    res.pickedJ[size_t(t)] = tr.pickedJ;
    res.decisionMargin[size_t(t)] = tr.decisionMargin;
  }

  // GShard capacity: assignments in token order, then in S_t's order.
  if (opt.capacityFactor > 0) {
    const int64_t kk = routing.expertsPerToken(E);
    const double c =
        std::ceil(opt.capacityFactor * double(T) * double(kk) / double(E));
    res.capacity = int64_t(c);
    std::vector<int64_t> count(static_cast<size_t>(E), 0);
    for (int64_t t = 0; t < T; ++t) {
      const std::vector<int64_t> &sel = res.selected[size_t(t)];
      for (size_t i = 0; i < sel.size(); ++i) {
        if (count[size_t(sel[i])] >= res.capacity)
          res.dropped[size_t(t)][i] = true;
        else
          ++count[size_t(sel[i])];
      }
    }
  }

  // Experts and combine; y rounded to T once (to f32 for T = f32).
  const std::vector<double> y =
      combineExperts(in, shared, res.selected, res.weights, res.dropped);
  res.y.resize(y.size());
  for (size_t i = 0; i < y.size(); ++i)
    res.y[i] = float(roundTo(type, y[i]));

  if (opt.training && routing.kind == RoutingKind::MoESART)
    res.auxLoss =
        trimmedLassoLoss(res.probs, T, E, routing.k, routing.trimmedLasso);
  return res;
}

LayerDecisions layerDecisions(const LayerResult &res, const LayerOptions &opt) {
  LayerDecisions dec;
  dec.selected = res.selected;
  dec.dropped = res.dropped;
  dec.pickedJ = res.pickedJ;
  const int64_t T = int64_t(res.selected.size());
  if (opt.training && opt.routing.kind == RoutingKind::MoESART && T > 0) {
    const int64_t E = int64_t(res.probs.size()) / T;
    for (int64_t t = 0; t < T; ++t)
      dec.lassoTopK.push_back(
          topKIndices(res.probs.data() + t * E, E, opt.routing.k));
  }
  return dec;
}

LayerValues moeLayerWithDecisions(const LayerInputs &in,
                                  const LayerOptions &opt,
                                  const LayerDecisions &dec) {
  verifyLayer(in, opt);
  const Experts shared = sharedExpert(in);
  const int64_t T = in.numTokens, E = in.experts.numExperts;
  const Routing &routing = opt.routing;
  const bool lasso = opt.training && routing.kind == RoutingKind::MoESART;
  check(int64_t(dec.selected.size()) == T && int64_t(dec.dropped.size()) == T &&
            int64_t(dec.pickedJ.size()) == T &&
            int64_t(dec.lassoTopK.size()) == (lasso ? T : 0),
        "decisions: need one entry per token");
  const std::vector<double> logits = routerLogits(in);
  std::vector<std::vector<double>> weights(static_cast<size_t>(T));
  double total = 0.0;
  for (int64_t t = 0; t < T; ++t) {
    const double *o = logits.data() + t * E;
    check(dec.dropped[size_t(t)].size() == dec.selected[size_t(t)].size(),
          "decisions: dropped must be parallel to selected");
    weights[size_t(t)] =
        routingWeights(o, E, routing, opt.training, dec.selected[size_t(t)],
                       dec.pickedJ[size_t(t)], !in.selectionBias.empty());
    if (lasso) {
      const std::vector<double> g = softmax(o, E);
      double top = 0.0;
      for (int64_t i : dec.lassoTopK[size_t(t)])
        top += g[size_t(i)];
      total += 1.0 - top;
    }
  }
  LayerValues res;
  res.y = combineExperts(in, shared, dec.selected, weights, dec.dropped);
  if (lasso && T > 0)
    res.auxLoss = routing.trimmedLasso * (total / double(T));
  return res;
}

//===----------------------------------------------------------------------===//
// moe.soft_layer
//===----------------------------------------------------------------------===//

SoftLayerResult softMoELayer(const SoftLayerInputs &input) {
  input.experts.verify();
  const ElementType type = input.experts.elementType;
  SoftLayerInputs roundedInput;
  if (type != ElementType::F32) {
    roundedInput = input;
    roundAll(type, roundedInput.x);
    roundAll(type, roundedInput.phi);
    roundedInput.experts = roundedExperts(input.experts);
  }
  const SoftLayerInputs &in = type == ElementType::F32 ? input : roundedInput;
  const Experts &ex = in.experts;
  const int64_t G = in.numGroups, M = in.groupSize, S = in.slotsPerExpert;
  const int64_t D = ex.modelDim, E = ex.numExperts, ES = E * S;
  check(G >= 0 && M >= 1 && S >= 1, "soft layer: need G >= 0, M >= 1, S >= 1");
  check(int64_t(in.x.size()) == G * M * D,
        sizeMsg("x", in.x.size(), G * M * D));
  check(int64_t(in.phi.size()) == D * ES, sizeMsg("Phi", in.phi.size(), D * ES));

  // Phin[d, (e,s)], normalised over d per (e, s) when requested.
  std::vector<double> phin(static_cast<size_t>(D * ES));
  for (int64_t j = 0; j < ES; ++j) {
    double r = 1.0;
    if (in.normalize) {
      double ss = 0.0;
      for (int64_t d = 0; d < D; ++d) {
        double v = double(in.phi[size_t(d * ES + j)]);
        ss += v * v;
      }
      r = 1.0 / std::sqrt(ss + 1e-6);
    }
    for (int64_t d = 0; d < D; ++d)
      phin[size_t(d * ES + j)] = double(in.phi[size_t(d * ES + j)]) * r;
  }

  SoftLayerResult res;
  res.logits.assign(size_t(G * M * ES), 0.0);
  res.dispatch.assign(size_t(G * M * ES), 0.0);
  res.combine.assign(size_t(G * M * ES), 0.0);
  res.slots.assign(size_t(G * ES * D), 0.0);
  res.slotOutputs.assign(size_t(G * ES * D), 0.0);
  res.y.assign(size_t(G * M * D), 0.0f);

  std::vector<double> xn(static_cast<size_t>(D));
  for (int64_t g = 0; g < G; ++g) {
    // Logits.
    for (int64_t m = 0; m < M; ++m) {
      const float *x = in.x.data() + (g * M + m) * D;
      double r = 1.0;
      if (in.normalize) {
        double ss = 0.0;
        for (int64_t d = 0; d < D; ++d)
          ss += double(x[d]) * double(x[d]);
        r = 1.0 / std::sqrt(ss + 1e-6);
      }
      for (int64_t d = 0; d < D; ++d)
        xn[size_t(d)] = double(x[d]) * r;
      for (int64_t j = 0; j < ES; ++j) {
        double acc = 0.0;
        for (int64_t d = 0; d < D; ++d)
          acc += xn[size_t(d)] * phin[size_t(d * ES + j)];
        res.logits[size_t((g * M + m) * ES + j)] = acc * in.scale;
      }
    }
    // Dispatch: softmax over m for each (e, s).
    std::vector<double> col(static_cast<size_t>(M));
    for (int64_t j = 0; j < ES; ++j) {
      for (int64_t m = 0; m < M; ++m)
        col[size_t(m)] = res.logits[size_t((g * M + m) * ES + j)];
      std::vector<double> sm = softmax(col.data(), M);
      for (int64_t m = 0; m < M; ++m)
        res.dispatch[size_t((g * M + m) * ES + j)] = sm[size_t(m)];
    }
    // Combine: softmax over (e, s) jointly for each m.
    for (int64_t m = 0; m < M; ++m) {
      std::vector<double> sm =
          softmax(res.logits.data() + (g * M + m) * ES, ES);
      std::copy(sm.begin(), sm.end(), res.combine.begin() + (g * M + m) * ES);
    }
    // Slots from the raw x, and the expert outputs.
    for (int64_t j = 0; j < ES; ++j) {
      double *slot = res.slots.data() + (g * ES + j) * D;
      for (int64_t m = 0; m < M; ++m) {
        const double w = res.dispatch[size_t((g * M + m) * ES + j)];
        const float *x = in.x.data() + (g * M + m) * D;
        for (int64_t d = 0; d < D; ++d)
          slot[d] += w * double(x[d]);
      }
      // Slot inputs are rounded to T before the experts (not for f32).
      if (type != ElementType::F32)
        for (int64_t d = 0; d < D; ++d)
          slot[d] = roundTo(type, slot[d]);
      expertForward(ex, j / S, slot, res.slotOutputs.data() + (g * ES + j) * D);
    }
    // Outputs.
    std::vector<double> acc(static_cast<size_t>(D));
    for (int64_t m = 0; m < M; ++m) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < ES; ++j) {
        const double w = res.combine[size_t((g * M + m) * ES + j)];
        const double *yt = res.slotOutputs.data() + (g * ES + j) * D;
        for (int64_t d = 0; d < D; ++d)
          acc[size_t(d)] += w * yt[d];
      }
      for (int64_t d = 0; d < D; ++d)
        res.y[size_t((g * M + m) * D + d)] = float(roundTo(type, acc[size_t(d)]));
    }
  }
  return res;
}

//===----------------------------------------------------------------------===//
// Test data
//===----------------------------------------------------------------------===//

uint64_t TestRng::next() {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double TestRng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

double TestRng::normal() {
  if (hasSpare) {
    hasSpare = false;
    return spare;
  }
  const double u1 = 1.0 - uniform(); // (0, 1]
  const double u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 2.0 * 3.14159265358979323846 * u2;
  spare = r * std::sin(theta);
  hasSpare = true;
  return r * std::cos(theta);
}

std::vector<float> randomNormal(int64_t n, uint64_t seed, double stddev) {
  TestRng rng(seed);
  std::vector<float> v(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (float &f : v)
    f = float(rng.normal() * stddev);
  return v;
}

Experts randomExperts(int64_t E, int64_t D, int64_t H, Activation act,
                      bool withBiases, uint64_t seed, ElementType type) {
  Experts ex;
  ex.numExperts = E;
  ex.modelDim = D;
  ex.hiddenDim = H;
  ex.activation = act;
  const int64_t C = ex.w1Cols();
  // Distinct, fixed sub-seeds per tensor.
  TestRng seeds(seed ^ 0x6D6F652D72656621ull);
  ex.w1 = randomNormal(E * D * C, seeds.next(), 1.0 / std::sqrt(double(D)));
  ex.w2 = randomNormal(E * H * D, seeds.next(), 1.0 / std::sqrt(double(H)));
  const uint64_t sb1 = seeds.next(), sb2 = seeds.next();
  if (withBiases) {
    ex.b1 = randomNormal(E * C, sb1, 0.1);
    ex.b2 = randomNormal(E * D, sb2, 0.1);
  }
  ex.elementType = type;
  ex = roundedExperts(ex);
  return ex;
}

LayerInputs randomLayerInputs(int64_t T, int64_t D, int64_t E, int64_t H,
                              Activation act, bool withRouterBias,
                              bool withExpertBiases, uint64_t seed,
                              ElementType type) {
  LayerInputs in;
  in.numTokens = T;
  TestRng seeds(seed ^ 0x726F757465722121ull);
  in.x = randomNormal(T * D, seeds.next(), 1.0);
  in.wr = randomNormal(D * E, seeds.next(), 1.0 / std::sqrt(double(D)));
  const uint64_t sbr = seeds.next(), sex = seeds.next();
  if (withRouterBias)
    in.br = randomNormal(E, sbr, 0.1);
  in.experts = randomExperts(E, D, H, act, withExpertBiases, sex, type);
  roundAll(type, in.x);
  roundAll(type, in.wr);
  roundAll(type, in.br);
  return in;
}

void addRandomProductionParts(LayerInputs &in, bool selectionBias, int64_t sharedHidden,
                              bool sharedGate, uint64_t seed) {
  const int64_t D = in.experts.modelDim, E = in.experts.numExperts;
  const ElementType type = in.experts.elementType;
  TestRng seeds(seed ^ 0x7368617265642121ull);
  const uint64_t sb = seeds.next(), s1 = seeds.next(), s2 = seeds.next(), sg = seeds.next();
  if (selectionBias)
    in.selectionBias = randomNormal(E, sb, 0.05);
  if (sharedHidden > 0) {
    const int64_t width = isGated(in.experts.activation) ? 2 * sharedHidden : sharedHidden;
    in.sharedHidden = sharedHidden;
    in.sharedW1 = randomNormal(D * width, s1, 1.0 / std::sqrt(double(D)));
    in.sharedW2 = randomNormal(sharedHidden * D, s2, 1.0 / std::sqrt(double(sharedHidden)));
    roundAll(type, in.sharedW1);
    roundAll(type, in.sharedW2);
    if (sharedGate) {
      in.sharedGate = randomNormal(D, sg, 1.0 / std::sqrt(double(D)));
      roundAll(type, in.sharedGate);
    }
  }
}

int64_t firstMismatch(const std::vector<float> &a, const std::vector<float> &b,
                      double rtol, double atol) {
  if (a.size() != b.size())
    return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = b[i];
    if (std::isnan(x) || std::isnan(y) ||
        std::fabs(x - y) > atol + rtol * std::fabs(y))
      return int64_t(i);
  }
  return -1;
}

} // namespace ref
} // namespace moe
