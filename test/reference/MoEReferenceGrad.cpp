//===- MoEReferenceGrad.cpp - Reverse mode of the reference ---------------===//
//
// See MoEReferenceGrad.h for the contract. Notation: a leading d is the
// cotangent of a value (dL/dv for the scalar L = sum(dy * y) + dAux * aux).
//
//===----------------------------------------------------------------------===//

#include "test/reference/MoEReferenceGrad.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace moe {
namespace ref {

namespace {

void check(bool cond, const std::string &msg) {
  if (cond)
    return;
  std::fprintf(stderr, "moe::ref error: %s\n", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

/// The VJP of p = softmax(v): dv_i = p_i (dp_i - sum_j p_j dp_j).
std::vector<double> softmaxVjp(const std::vector<double> &p,
                               const std::vector<double> &dp) {
  double dot = 0.0;
  for (size_t i = 0; i < p.size(); ++i)
    dot += p[i] * dp[i];
  std::vector<double> dv(p.size());
  for (size_t i = 0; i < p.size(); ++i)
    dv[i] = p[i] * (dp[i] - dot);
  return dv;
}

//===----------------------------------------------------------------------===//
// Experts
//===----------------------------------------------------------------------===//

/// Gradient accumulators for the weights of one Experts, in their layout
/// (db1/db2 empty without biases).
struct ExpertGradients {
  std::vector<double> dw1, dw2, db1, db2;

  explicit ExpertGradients(const Experts &ex)
      : dw1(ex.w1.size(), 0.0), dw2(ex.w2.size(), 0.0), db1(ex.b1.size(), 0.0),
        db2(ex.b2.size(), 0.0) {}
};

/// The values of f_e(x) that its backward needs: the pre-activation u [C],
/// h [H] (rounded to T as expertForward does) and the output f [D].
struct ExpertTape {
  std::vector<double> u, h, f;
};

ExpertTape expertTape(const Experts &ex, int64_t e, const double *x) {
  const int64_t D = ex.modelDim, H = ex.hiddenDim, C = ex.w1Cols();
  ExpertTape tape;
  tape.u.assign(size_t(C), 0.0);
  const float *w1 = ex.w1.data() + e * D * C;
  for (int64_t c = 0; c < C; ++c) {
    double acc = ex.b1.empty() ? 0.0 : double(ex.b1[size_t(e * C + c)]);
    for (int64_t d = 0; d < D; ++d)
      acc += x[d] * double(w1[d * C + c]);
    tape.u[size_t(c)] = acc;
  }
  tape.h.resize(size_t(H));
  for (int64_t j = 0; j < H; ++j) {
    double h = activate(ex.activation, tape.u[size_t(j)]);
    if (isGated(ex.activation))
      h *= tape.u[size_t(H + j)];
    tape.h[size_t(j)] = h;
  }
  if (ex.elementType != ElementType::F32)
    for (double &h : tape.h)
      h = roundTo(ex.elementType, h);
  tape.f.assign(size_t(D), 0.0);
  const float *w2 = ex.w2.data() + e * H * D;
  for (int64_t d = 0; d < D; ++d) {
    double acc = ex.b2.empty() ? 0.0 : double(ex.b2[size_t(e * D + d)]);
    for (int64_t j = 0; j < H; ++j)
      acc += tape.h[size_t(j)] * double(w2[j * D + d]);
    tape.f[size_t(d)] = acc;
  }
  return tape;
}

/// The VJP of f = f_e(x) for the cotangent df [D]: accumulates expert e's
/// weight gradients into `grads` and dx [D] into `dx`.
void expertVjp(const Experts &ex, int64_t e, const double *x,
               const ExpertTape &tape, const double *df, ExpertGradients &grads,
               double *dx) {
  const int64_t D = ex.modelDim, H = ex.hiddenDim, C = ex.w1Cols();
  // f = h W2 + b2: db2 = df, dW2[j, d] = h_j df_d, dh_j = sum_d W2[j, d] df_d.
  const float *w2 = ex.w2.data() + e * H * D;
  double *dw2 = grads.dw2.data() + e * H * D;
  if (!grads.db2.empty())
    for (int64_t d = 0; d < D; ++d)
      grads.db2[size_t(e * D + d)] += df[d];
  std::vector<double> dh(static_cast<size_t>(H), 0.0);
  for (int64_t j = 0; j < H; ++j) {
    for (int64_t d = 0; d < D; ++d) {
      dw2[j * D + d] += tape.h[size_t(j)] * df[d];
      dh[size_t(j)] += double(w2[j * D + d]) * df[d];
    }
  }
  // h_j = act(u_j): du_j = dh_j act'(u_j). Gated, h_j = act(u_j) u_{H+j}:
  // du_j = dh_j act'(u_j) u_{H+j} and du_{H+j} = dh_j act(u_j). The rounding
  // of h to T is the identity here.
  std::vector<double> du(static_cast<size_t>(C));
  for (int64_t j = 0; j < H; ++j) {
    const double u = tape.u[size_t(j)];
    const double slope = activationDerivative(ex.activation, u);
    if (isGated(ex.activation)) {
      du[size_t(j)] = dh[size_t(j)] * slope * tape.u[size_t(H + j)];
      du[size_t(H + j)] = dh[size_t(j)] * activate(ex.activation, u);
    } else {
      du[size_t(j)] = dh[size_t(j)] * slope;
    }
  }
  // u = x W1 + b1: db1 = du, dW1[d, c] = x_d du_c, dx_d = sum_c W1[d, c] du_c.
  const float *w1 = ex.w1.data() + e * D * C;
  double *dw1 = grads.dw1.data() + e * D * C;
  if (!grads.db1.empty())
    for (int64_t c = 0; c < C; ++c)
      grads.db1[size_t(e * C + c)] += du[size_t(c)];
  for (int64_t d = 0; d < D; ++d) {
    for (int64_t c = 0; c < C; ++c) {
      dw1[d * C + c] += x[d] * du[size_t(c)];
      dx[d] += double(w1[d * C + c]) * du[size_t(c)];
    }
  }
}

//===----------------------------------------------------------------------===//
// Routing
//===----------------------------------------------------------------------===//

/// The VJP of one token's routing weights w = routingWeights(o, ...) (w and
/// their cotangents dw parallel to `selected`), to which `dg`, a cotangent
/// of g = softmax(o) from elsewhere (the trimmed lasso's), is added: do [E].
std::vector<double>
routingVjp(const double *o, int64_t E, const Routing &routing, bool training,
           const std::vector<int64_t> &selected, int64_t pickedJ,
           bool withSelectionBias, const std::vector<double> &w,
           const std::vector<double> &dw, std::vector<double> dg) {
  const std::vector<double> g = softmax(o, E);
  std::vector<double> dO(static_cast<size_t>(E), 0.0);
  const size_t n = selected.size();
  // sum_i w_i dw_i: the VJP of a softmax over S_t or of a normalization.
  double wdw = 0.0;
  for (size_t i = 0; i < n; ++i)
    wdw += w[i] * dw[i];

  if (routing.kind == RoutingKind::TopK &&
      (!routing.isClassicTopK() || withSelectionBias)) {
    // w_i = scale s_i / Z with Z = sum_S s + 1e-20 (normalize), else
    // scale s_i: ds_k = scale (dw_k - sum_i dw_i s_i / Z) / Z, resp.
    // scale dw_k.
    std::vector<double> s(static_cast<size_t>(E));
    if (routing.score == Score::Softmax)
      s = g;
    else
      for (int64_t e = 0; e < E; ++e)
        s[size_t(e)] = sigmoid(o[e]);
    std::vector<double> ds(static_cast<size_t>(E), 0.0);
    if (routing.normalize) {
      double z = 0.0, sdw = 0.0;
      for (size_t i = 0; i < n; ++i) {
        z += s[size_t(selected[i])];
        sdw += s[size_t(selected[i])] * dw[i];
      }
      z += 1e-20;
      for (size_t i = 0; i < n; ++i)
        ds[size_t(selected[i])] = routing.scale * (dw[i] - sdw / z) / z;
    } else {
      for (size_t i = 0; i < n; ++i)
        ds[size_t(selected[i])] = routing.scale * dw[i];
    }
    // s = softmax(o) is g; s = sigmoid(o): do = ds s (1 - s), for the
    // picked experts only (sigmoid scores are per expert: an expert not
    // picked, whose ds is 0, gets an exact 0, whatever its score).
    if (routing.score == Score::Softmax)
      for (int64_t e = 0; e < E; ++e)
        dg[size_t(e)] += ds[size_t(e)];
    else
      for (int64_t e : selected)
        dO[size_t(e)] += ds[size_t(e)] * s[size_t(e)] * (1.0 - s[size_t(e)]);
  } else if (routing.kind == RoutingKind::Dense) {
    // w = g.
    for (size_t i = 0; i < n; ++i)
      dg[size_t(selected[i])] += dw[i];
  } else if (routing.kind == RoutingKind::TopK) {
    // w = softmax over S of o_S.
    for (size_t i = 0; i < n; ++i)
      dO[size_t(selected[i])] += w[i] * (dw[i] - wdw);
  } else if (training && routing.adjust == Adjust::Large) {
    // w_i = g_i / sum_S g: dg_k = (dw_k - sum_i w_i dw_i) / sum_S g.
    double sum = 0.0;
    for (int64_t i : selected)
      sum += g[size_t(i)];
    for (size_t i = 0; i < n; ++i)
      dg[size_t(selected[i])] += (dw[i] - wdw) / sum;
  } else {
    // MOESART inference, zero and small_random: w = softmax over S of õ with
    // õ_i = o_i - log(max(c (g_i + 1e-10), 1e-10)), c = K (K - 1 for
    // small_random), and õ_j = o_j for small_random's j. dõ_i =
    // w_i (dw_i - sum w dw) goes to o_i directly and, where the max takes
    // c (g_i + 1e-10), as -dõ_i / (g_i + 1e-10) to g_i.
    const bool smallRandom = training && routing.adjust == Adjust::SmallRandom;
    const double c = double(smallRandom ? routing.k - 1 : routing.k);
    for (size_t i = 0; i < n; ++i) {
      const size_t e = size_t(selected[i]);
      const double dAdjusted = w[i] * (dw[i] - wdw);
      dO[e] += dAdjusted;
      if (smallRandom && selected[i] == pickedJ)
        continue;
      if (c * (g[e] + 1e-10) > 1e-10)
        dg[e] -= dAdjusted / (g[e] + 1e-10);
    }
  }
  // Only the routings whose forward computes g = softmax(o) differentiate
  // it: classic top_k (a softmax over S_t of o_S) and sigmoid scores never
  // read g, so a NaN among the logits of experts a token did not pick
  // leaves its gradient alone (docs/spec.md §9, NaN and infinities).
  const bool production = routing.kind == RoutingKind::TopK &&
                          (!routing.isClassicTopK() || withSelectionBias);
  const bool readsG = routing.kind == RoutingKind::Dense ||
                      routing.kind == RoutingKind::MoESART ||
                      (production && routing.score == Score::Softmax);
  if (!readsG)
    return dO;
  const std::vector<double> dFromG = softmaxVjp(g, dg);
  for (int64_t e = 0; e < E; ++e)
    dO[size_t(e)] += dFromG[size_t(e)];
  return dO;
}

} // namespace

double activationDerivative(Activation act, double v) {
  const double pi = 3.14159265358979323846;
  switch (act) {
  case Activation::Gelu:
  case Activation::GeGLU:
    // d/dv [v Phi(v)] = Phi(v) + v phi(v).
    return 0.5 * (1.0 + std::erf(v / std::sqrt(2.0))) +
           v * std::exp(-0.5 * v * v) / std::sqrt(2.0 * pi);
  case Activation::GeluTanh: {
    // d/dv [0.5 v (1 + tanh a)], a = c (v + 0.044715 v^3):
    // 0.5 (1 + tanh a) + 0.5 v (1 - tanh^2 a) c (1 + 3 0.044715 v^2).
    const double c = std::sqrt(2.0 / pi);
    const double t = std::tanh(c * (v + 0.044715 * v * v * v));
    return 0.5 * (1.0 + t) +
           0.5 * v * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * v * v);
  }
  case Activation::Relu:
    return v > 0.0 ? 1.0 : 0.0;
  case Activation::Silu:
  case Activation::SwiGLU: {
    // d/dv [v sigma(v)] = sigma(v) (1 + v (1 - sigma(v))).
    const double s = sigmoid(v);
    return s * (1.0 + v * (1.0 - s));
  }
  }
  check(false, "unknown activation");
  return 0.0;
}

//===----------------------------------------------------------------------===//
// moe.layer
//===----------------------------------------------------------------------===//

LayerGradients moeLayerVjp(const LayerInputs &in, const LayerOptions &opt,
                           const LayerDecisions &dec,
                           const LayerCotangents &cot) {
  in.experts.verify();
  const Experts &ex = in.experts;
  const Routing &routing = opt.routing;
  const int64_t T = in.numTokens, D = ex.modelDim, E = ex.numExperts;
  check(int64_t(cot.dy.size()) == T * D, "VJP: dy must be [T, D]");
  check(int64_t(dec.selected.size()) == T && int64_t(dec.dropped.size()) == T &&
            int64_t(dec.pickedJ.size()) == T,
        "VJP: the decisions need one entry per token");
  const bool lasso = opt.training && routing.kind == RoutingKind::MoESART;
  check(!lasso || int64_t(dec.lassoTopK.size()) == T,
        "VJP: MOESART training needs the trimmed-lasso sets");
  const bool withBias = !in.selectionBias.empty();

  // The shared expert as a one-expert FFN, as moeLayer runs it.
  const bool hasShared = in.sharedHidden > 0;
  Experts shared;
  if (hasShared) {
    shared.numExperts = 1;
    shared.modelDim = D;
    shared.hiddenDim = in.sharedHidden;
    shared.activation = ex.activation;
    shared.elementType = ex.elementType;
    shared.w1 = in.sharedW1;
    shared.w2 = in.sharedW2;
    shared.verify();
  }
  const bool hasGate = !in.sharedGate.empty();

  LayerGradients grads;
  grads.dx.assign(size_t(T * D), 0.0);
  grads.dwr.assign(size_t(D * E), 0.0);
  grads.dbr.assign(in.br.size(), 0.0);
  grads.dSelectionBias.assign(in.selectionBias.size(), 0.0);
  ExpertGradients expertGrads(ex);
  ExpertGradients sharedGrads(shared);
  grads.dSharedGate.assign(in.sharedGate.size(), 0.0);

  std::vector<double> o(static_cast<size_t>(E)), x(static_cast<size_t>(D));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t d = 0; d < D; ++d)
      x[size_t(d)] = double(in.x[size_t(t * D + d)]);
    for (int64_t e = 0; e < E; ++e) {
      double acc = in.br.empty() ? 0.0 : double(in.br[size_t(e)]);
      for (int64_t d = 0; d < D; ++d)
        acc += x[size_t(d)] * double(in.wr[size_t(d * E + e)]);
      o[size_t(e)] = acc;
    }
    const double *dy = cot.dy.data() + t * D;
    double *dx = grads.dx.data() + t * D;
    const std::vector<int64_t> &sel = dec.selected[size_t(t)];
    check(dec.dropped[size_t(t)].size() == sel.size(),
          "VJP: dropped must be parallel to selected");
    const std::vector<double> w =
        routingWeights(o.data(), E, routing, opt.training, sel,
                       dec.pickedJ[size_t(t)], withBias);

    // y_t = sum over the kept i of w_i f_i(x_t): dw_i = dy_t . f_i(x_t) and
    // f_i's backward with df = w_i dy_t; a dropped i passes nothing.
    std::vector<double> dw(sel.size(), 0.0), df(static_cast<size_t>(D));
    for (size_t i = 0; i < sel.size(); ++i) {
      if (dec.dropped[size_t(t)][i])
        continue;
      const ExpertTape tape = expertTape(ex, sel[i], x.data());
      for (int64_t d = 0; d < D; ++d) {
        dw[i] += dy[d] * tape.f[size_t(d)];
        df[size_t(d)] = w[i] * dy[d];
      }
      expertVjp(ex, sel[i], x.data(), tape, df.data(), expertGrads, dx);
    }

    // y_t += gate_t fs(x_t) with gate_t = sigmoid(x_t . sg) (else 1): fs's
    // backward with df = gate_t dy_t, and dz = (dy_t . fs) gate (1 - gate)
    // for z = x_t . sg.
    if (hasShared) {
      double gate = 1.0;
      if (hasGate) {
        double z = 0.0;
        for (int64_t d = 0; d < D; ++d)
          z += x[size_t(d)] * double(in.sharedGate[size_t(d)]);
        gate = sigmoid(z);
      }
      const ExpertTape tape = expertTape(shared, 0, x.data());
      double dGate = 0.0;
      for (int64_t d = 0; d < D; ++d) {
        dGate += dy[d] * tape.f[size_t(d)];
        df[size_t(d)] = gate * dy[d];
      }
      expertVjp(shared, 0, x.data(), tape, df.data(), sharedGrads, dx);
      if (hasGate) {
        const double dz = dGate * gate * (1.0 - gate);
        for (int64_t d = 0; d < D; ++d) {
          grads.dSharedGate[size_t(d)] += x[size_t(d)] * dz;
          dx[d] += double(in.sharedGate[size_t(d)]) * dz;
        }
      }
    }

    // The trimmed lasso lambda / T sum_t (1 - sum of the K largest g_t):
    // -lambda dAux / T to each of those g.
    std::vector<double> dg(static_cast<size_t>(E), 0.0);
    if (lasso && T > 0)
      for (int64_t i : dec.lassoTopK[size_t(t)])
        dg[size_t(i)] -= routing.trimmedLasso * cot.dAuxLoss / double(T);
    const std::vector<double> dO =
        routingVjp(o.data(), E, routing, opt.training, sel,
                   dec.pickedJ[size_t(t)], withBias, w, dw, std::move(dg));

    // o = x Wr + br: dbr = do, dWr[d, e] = x_d do_e and
    // dx_d += sum_e Wr[d, e] do_e.
    for (int64_t e = 0; e < E; ++e) {
      if (!grads.dbr.empty())
        grads.dbr[size_t(e)] += dO[size_t(e)];
      for (int64_t d = 0; d < D; ++d) {
        grads.dwr[size_t(d * E + e)] += x[size_t(d)] * dO[size_t(e)];
        dx[d] += double(in.wr[size_t(d * E + e)]) * dO[size_t(e)];
      }
    }
  }
  grads.dw1 = std::move(expertGrads.dw1);
  grads.dw2 = std::move(expertGrads.dw2);
  grads.db1 = std::move(expertGrads.db1);
  grads.db2 = std::move(expertGrads.db2);
  grads.dSharedW1 = std::move(sharedGrads.dw1);
  grads.dSharedW2 = std::move(sharedGrads.dw2);
  return grads;
}

LayerGradients moeLayerVjp(const LayerInputs &in, const LayerOptions &opt,
                           const LayerCotangents &cot) {
  return moeLayerVjp(in, opt, layerDecisions(moeLayer(in, opt), opt), cot);
}

//===----------------------------------------------------------------------===//
// moe.soft_layer
//===----------------------------------------------------------------------===//

SoftLayerGradients softMoELayerVjp(const SoftLayerInputs &in,
                                   const std::vector<double> &dy) {
  const SoftLayerResult fwd = softMoELayer(in);
  const Experts &ex = in.experts;
  const int64_t G = in.numGroups, M = in.groupSize, S = in.slotsPerExpert;
  const int64_t D = ex.modelDim, ES = ex.numExperts * S;
  check(int64_t(dy.size()) == G * M * D, "VJP: dy must be [G, M, D]");

  // Phin[d, j] = Phi[d, j] rPhi_j (rPhi_j = rsqrt(sum_d Phi[d, j]^2 + 1e-6)
  // with normalize, else 1).
  std::vector<double> rPhi(static_cast<size_t>(ES), 1.0);
  std::vector<double> phin(static_cast<size_t>(D * ES));
  for (int64_t j = 0; j < ES; ++j) {
    if (in.normalize) {
      double ss = 0.0;
      for (int64_t d = 0; d < D; ++d)
        ss += double(in.phi[size_t(d * ES + j)]) *
              double(in.phi[size_t(d * ES + j)]);
      rPhi[size_t(j)] = 1.0 / std::sqrt(ss + 1e-6);
    }
    for (int64_t d = 0; d < D; ++d)
      phin[size_t(d * ES + j)] =
          double(in.phi[size_t(d * ES + j)]) * rPhi[size_t(j)];
  }

  SoftLayerGradients grads;
  grads.dx.assign(size_t(G * M * D), 0.0);
  std::vector<double> dPhin(static_cast<size_t>(D * ES), 0.0);
  ExpertGradients expertGrads(ex);
  std::vector<double> dSlots(static_cast<size_t>(ES * D));
  std::vector<double> dSlotOut(static_cast<size_t>(D));
  std::vector<double> dCombine(static_cast<size_t>(M * ES));
  std::vector<double> dDispatch(static_cast<size_t>(M * ES));
  std::vector<double> xn(static_cast<size_t>(D)), dxn(static_cast<size_t>(D));
  for (int64_t g = 0; g < G; ++g) {
    const double *combine = fwd.combine.data() + g * M * ES;
    const double *dispatch = fwd.dispatch.data() + g * M * ES;
    const float *xg = in.x.data() + g * M * D;
    const double *dyg = dy.data() + g * M * D;
    double *dxg = grads.dx.data() + g * M * D;
    std::fill(dSlots.begin(), dSlots.end(), 0.0);
    for (int64_t j = 0; j < ES; ++j) {
      // y[m] = sum_j Cw[m, j] Y~[j]: dCw[m, j] = dy[m] . Y~[j] and
      // dY~[j] = sum_m Cw[m, j] dy[m].
      const double *slotOut = fwd.slotOutputs.data() + (g * ES + j) * D;
      std::fill(dSlotOut.begin(), dSlotOut.end(), 0.0);
      for (int64_t m = 0; m < M; ++m) {
        double dot = 0.0;
        for (int64_t d = 0; d < D; ++d) {
          dot += dyg[m * D + d] * slotOut[d];
          dSlotOut[size_t(d)] += combine[m * ES + j] * dyg[m * D + d];
        }
        dCombine[size_t(m * ES + j)] = dot;
      }
      // Y~[j] = f_{j / S}(X~[j]) on the forward's (rounded) slot.
      const double *slot = fwd.slots.data() + (g * ES + j) * D;
      const ExpertTape tape = expertTape(ex, j / S, slot);
      expertVjp(ex, j / S, slot, tape, dSlotOut.data(), expertGrads,
                dSlots.data() + j * D);
      // X~[j] = sum_m Dw[m, j] x[m]: dDw[m, j] = dX~[j] . x[m] and
      // dx[m] += Dw[m, j] dX~[j].
      for (int64_t m = 0; m < M; ++m) {
        double dot = 0.0;
        for (int64_t d = 0; d < D; ++d) {
          dot += dSlots[size_t(j * D + d)] * double(xg[m * D + d]);
          dxg[m * D + d] += dispatch[m * ES + j] * dSlots[size_t(j * D + d)];
        }
        dDispatch[size_t(m * ES + j)] = dot;
      }
    }
    // Both softmaxes of the logits: Cw over j for each m, Dw over m for
    // each j; dLogits is the sum of their VJPs.
    std::vector<double> dLogits(static_cast<size_t>(M * ES));
    for (int64_t m = 0; m < M; ++m) {
      const std::vector<double> p(combine + m * ES, combine + (m + 1) * ES);
      const std::vector<double> dp(dCombine.begin() + m * ES,
                                   dCombine.begin() + (m + 1) * ES);
      const std::vector<double> dl = softmaxVjp(p, dp);
      std::copy(dl.begin(), dl.end(), dLogits.begin() + m * ES);
    }
    std::vector<double> p(static_cast<size_t>(M)), dp(static_cast<size_t>(M));
    for (int64_t j = 0; j < ES; ++j) {
      for (int64_t m = 0; m < M; ++m) {
        p[size_t(m)] = dispatch[m * ES + j];
        dp[size_t(m)] = dDispatch[size_t(m * ES + j)];
      }
      const std::vector<double> dl = softmaxVjp(p, dp);
      for (int64_t m = 0; m < M; ++m)
        dLogits[size_t(m * ES + j)] += dl[size_t(m)];
    }
    // L[m, j] = scale (xn[m] . Phin[:, j]): dscale += dL (xn . Phin),
    // dxn[m, d] = scale sum_j dL Phin[d, j], dPhin[d, j] += scale dL xn[m, d].
    for (int64_t m = 0; m < M; ++m) {
      const float *xm = xg + m * D;
      double ss = 0.0;
      for (int64_t d = 0; d < D; ++d)
        ss += double(xm[d]) * double(xm[d]);
      const double r = in.normalize ? 1.0 / std::sqrt(ss + 1e-6) : 1.0;
      for (int64_t d = 0; d < D; ++d)
        xn[size_t(d)] = double(xm[d]) * r;
      std::fill(dxn.begin(), dxn.end(), 0.0);
      for (int64_t j = 0; j < ES; ++j) {
        const double dl = dLogits[size_t(m * ES + j)];
        double dot = 0.0;
        for (int64_t d = 0; d < D; ++d) {
          dot += xn[size_t(d)] * phin[size_t(d * ES + j)];
          dxn[size_t(d)] += in.scale * dl * phin[size_t(d * ES + j)];
          dPhin[size_t(d * ES + j)] += in.scale * dl * xn[size_t(d)];
        }
        grads.dscale += dl * dot;
      }
      // xn = x r with r = (sum x^2 + 1e-6)^(-1/2), dr/dx_d = -x_d r^3:
      // dx = r dxn - r^3 (dxn . x) x.
      double dot = 0.0;
      for (int64_t d = 0; d < D; ++d)
        dot += dxn[size_t(d)] * double(xm[d]);
      for (int64_t d = 0; d < D; ++d) {
        dxg[m * D + d] += r * dxn[size_t(d)];
        if (in.normalize)
          dxg[m * D + d] -= r * r * r * dot * double(xm[d]);
      }
    }
  }
  // Phin = Phi rPhi per column, as for x: dPhi = rPhi dPhin -
  // rPhi^3 (dPhin . Phi) Phi.
  grads.dphi.assign(size_t(D * ES), 0.0);
  for (int64_t j = 0; j < ES; ++j) {
    const double r = rPhi[size_t(j)];
    double dot = 0.0;
    for (int64_t d = 0; d < D; ++d)
      dot += dPhin[size_t(d * ES + j)] * double(in.phi[size_t(d * ES + j)]);
    for (int64_t d = 0; d < D; ++d) {
      double v = r * dPhin[size_t(d * ES + j)];
      if (in.normalize)
        v -= r * r * r * dot * double(in.phi[size_t(d * ES + j)]);
      grads.dphi[size_t(d * ES + j)] = v;
    }
  }
  grads.dw1 = std::move(expertGrads.dw1);
  grads.dw2 = std::move(expertGrads.dw2);
  grads.db1 = std::move(expertGrads.db1);
  grads.db2 = std::move(expertGrads.db2);
  return grads;
}

} // namespace ref
} // namespace moe
