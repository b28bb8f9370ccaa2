//===- MoEReference.h - Plain C++ reference of the moe ops ------*- C++ -*-===//
//
// An independent reference implementation of docs/spec.md §2-§3 (moe.layer
// and moe.soft_layer), written with plain loops and no MLIR, used by the
// integration tests to check the compiler's CPU and GPU results.
//
// Data layout: every tensor is a row-major std::vector<float> (element type
// f32 in and out); shapes are given by the integer fields of the structs.
//
// Element types (docs/spec.md §2-§3): Experts::elementType is the layer's element type
// T (f32 by default). For T = bf16/f16 the values of x, the router and the
// experts are values of T (every std::vector<float> holds exactly
// representable values; moeLayer/softMoELayer round their inputs to T first,
// a no-op for data made by randomLayerInputs/randomExperts with that type),
// and the reference rounds exactly where the design says:
//   - routing from those values, in double (f32-or-better);
//   - expert FFN: GEMM1 accumulated in double, bias and activation, then h
//     ROUNDED TO T (for gated activations h = act(u[:H]) * u[H:], then
//     rounded); GEMM2 accumulated in double, bias, not rounded;
//   - the weighted sum over a token's experts in double, then y rounded to T
//     once (returned as the f32 value of that T value);
//   - Soft MoE: logits and softmaxes in double, slot inputs X~ rounded to T
//     before the experts, combine in double, y rounded to T once.
// Every rounding is one round-to-nearest-even step from double to T
// (roundTo), overflow gives +-inf. With T = f32 nothing changes: h and the
// slots stay in double and only y is rounded (to f32).
//
// Tolerance for compiled bf16/f16 results against this reference
// ----------------------------------------------------------------
// Let u be T's unit roundoff (2^-8 for bf16, 2^-11 for f16); one ulp of a
// value b is at most 2u|b|. The compiled code accumulates in f32 where the
// reference uses double; those differences are relative ~sqrt(n) 2^-24 and
// matter only through the two roundings to T:
//   - h: an entry whose exact value lies within that f32 error of a rounding
//     boundary of T rounds to the neighbour, one ulp of T (|h_j| 2u) off.
//     This happens to a fraction ~sqrt(D) 2^-24 / u of the entries (~1e-4 at
//     D = 1024 for bf16): a few entries, each moving y by w 2u |h_j| |W2[j,:]|,
//     far below |y|'s typical size (a sum over H such terms);
//   - y: the pre-rounding values differ slightly, so y may round to the
//     adjacent value of T: one ulp, at most 2u|y|.
// Hence the per-element check |a - b| <= atol + rtol |b| with
//   rtol = 4u (two ulps of T: 2^-6 for bf16, 2^-9 for f16) and
//   atol = 2u max|b| (2^-7 resp. 2^-10 times the largest |expected|),
// the atol covering elements near zero (where cancellation leaves the h
// flips and f32 accumulation errors of the larger terms). `moe-ref compare
// --dtype bf16|f16` applies exactly these bounds (tolerance(T) below).
//
// Precision choices
// -----------------
// * All arithmetic is done in double with double accumulation (router logits,
//   softmax, routing weights, expert FFNs, the combine sum, Soft MoE logits,
//   normalisation, dispatch/combine softmaxes and slot sums). Intermediates
//   are kept in double; only the final outputs `y` are rounded to f32.
//   Routing weights, g, o, and Soft MoE dispatch/combine weights are also
//   returned in double for inspection.
// * MOESART training *sampling* is by default done in f32
//   (SamplingPrecision::F32), because the compiler computes g and the cumsum
//   in f32 and the sampling is a discontinuous function of them. The
//   reference mirrors the sequential definition of docs/spec.md §3.1 exactly:
//     - p starts as g rounded to f32 (g itself is the double softmax, so the
//       f32 start is the correctly rounded softmax);
//     - the cumsum is accumulated in f32 left to right (i = 0..E-1), and the
//       draw picks the first i with `u < c_i` (an f32 comparison; u has 24
//       bits and is exact in f32); if none, the last i with p_i > 0;
//     - then p_i = 0 and every p_j = p_j / (s + 1e-10f) where s is the f32
//       sum of p accumulated left to right (after zeroing p_i), and the
//       division is an f32 division (not a multiplication by a reciprocal).
//   If the compiler's f32 g differs from the correctly rounded one by an ulp,
//   a draw can only change when u lies within a few ulps of a cumsum
//   boundary; LayerResult::decisionMargin reports the distance so that
//   integration tests can skip such ill-conditioned tokens.
//   SamplingPrecision::F64 runs the same algorithm in double (1e-10 added in
//   double) for statistical tests.
// * Degenerate case (not covered by the design): when every remaining p_i is
//   0 (e.g. K exceeds the number of experts whose g did not underflow), the
//   draw picks the lowest-index expert not selected yet.
// * small_random's pick j = floor(u * K) is computed exactly (u * K in double
//   is exact), clamped to K - 1; the f32 product gives the same integer.
// * The capacity is C = ceil(cf * T * k / E), evaluated in double in that
//   order ((cf * T) * k) / E, with k = E for #moe.dense.
//
// Errors in the inputs (wrong sizes, k out of range, ...) print one line to
// stderr and abort(): the library does not use exceptions.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TEST_REFERENCE_MOEREFERENCE_H
#define MOE_TEST_REFERENCE_MOEREFERENCE_H

#include "test/reference/Philox.h"

#include <cstdint>
#include <string>
#include <vector>

namespace moe {
namespace ref {

//===----------------------------------------------------------------------===//
// Activations and experts
//===----------------------------------------------------------------------===//

enum class Activation { Gelu, GeluTanh, Relu, Silu, SwiGLU, GeGLU };

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

enum class ElementType { F32, BF16, F16 };

/// "f32", "bf16", "f16".
const char *elementTypeName(ElementType type);
/// Parses an element type name; returns false when unknown.
bool parseElementType(const std::string &name, ElementType &type);
/// v rounded to T with one round-to-nearest-even step (ties to even,
/// subnormals of T kept, overflow to +-inf, NaN stays NaN, the sign of zero
/// kept); for F32 the nearest float.
double roundTo(ElementType type, double v);
/// Every element rounded to T in place.
void roundAll(ElementType type, std::vector<float> &v);
/// T's unit roundoff u: 2^-24, 2^-8, 2^-11 (one ulp of b is at most 2u|b|).
double unitRoundoff(ElementType type);
/// The per-element check |a - b| <= atol + rtol |b| of the header comment:
/// rtol = 4u, atol = atolScale * max|b| with atolScale = 2u.
struct Tolerance {
  double rtol;
  double atolScale;
};
Tolerance tolerance(ElementType type);

/// True for swiglu/geglu: W1 is [E, D, 2H] and h = act(u[:H]) * u[H:].
bool isGated(Activation act);
/// The element-wise activation: gelu (erf), gelu_tanh, relu, silu; for the
/// gated ones, the activation of their gate half (silu / gelu (erf)).
double activate(Activation act, double v);
/// The name as written in `#moe.activation<NAME>`.
const char *activationName(Activation act);
/// Parses an `#moe.activation` name; returns false when unknown.
bool parseActivation(const std::string &name, Activation &act);

double gelu(double v);     // 0.5 v (1 + erf(v / sqrt 2))
double geluTanh(double v); // 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))
double relu(double v);     // max(v, 0)
double silu(double v);     // v / (1 + exp(-v))

/// The experts f_e(x) = act(x W1[e] + b1[e]) W2[e] + b2[e].
struct Experts {
  int64_t numExperts = 0; // E
  int64_t modelDim = 0;   // D
  int64_t hiddenDim = 0;  // H (W2 is [E, H, D]; gated W1 is [E, D, 2H])
  Activation activation = Activation::Gelu;
  /// The element type T of the weights, of h, and of the layer that uses
  /// these experts (see the header comment).
  ElementType elementType = ElementType::F32;
  std::vector<float> w1; // [E, D, H] or [E, D, 2H] when gated
  std::vector<float> w2; // [E, H, D]
  /// Quantized expert weights (docs/spec.md §2.1): w1 and w2 hold the
  /// dequantized f32 values (quantizeFp8Block), which are not values of T
  /// and are not rounded to it.
  bool quantizedWeights = false;
  /// #moe.quant<int4, group = G, int8_activations> (docs/spec.md §2.1): G,
  /// each GEMM's left operand (x, then h rounded to T, f32 included)
  /// replaced by quantizeActivationsInt8 of it; 0: the operands as they are.
  int64_t int8ActivationGroup = 0;
  std::vector<float> b1; // empty, or [E, H] / [E, 2H] when gated
  std::vector<float> b2; // empty, or [E, D]

  /// The width of W1's last dimension: H, or 2H when gated.
  int64_t w1Cols() const { return isGated(activation) ? 2 * hiddenDim : hiddenDim; }
  /// Aborts with a message when a size does not match.
  void verify() const;
};

/// The value of an OCP E4M3 (f8E4M3FN) code, decoded from its fields
/// (sign, 4 exponent bits of bias 7, 3 mantissa bits; exponent 0 is
/// subnormal, S.1111.111 is NaN, there are no infinities).
double fp8E4M3Value(uint8_t code);

/// Block-scaled FP8 quantization of one weight tensor [E, K, N] (docs/spec.md
/// §2.1, #moe.quant<fp8_e4m3, block = [BK, BN]>) for test data: per expert
/// and block, the f32 scale s = max|w| / 448 over its finite weights (1 for
/// a block without a nonzero one) and
/// the codes q = E4M3(w / s) (nearest, from `encode`); `w` is replaced by
/// the dequantized weights, q * s computed exactly in double and rounded
/// once to f32. `scales` receives [E, ceil(K/BK), ceil(N/BN)]. With
/// `roundScale`, each scale is first rounded by it (a checkpoint whose
/// scales are stored in bf16: the codes are then made with the rounded
/// scale, saturating at +-448 where it came out smaller).
void quantizeFp8Block(std::vector<float> &w, int64_t E, int64_t K, int64_t N,
                      int64_t blockK, int64_t blockN, uint8_t (*encode)(float),
                      std::vector<uint8_t> &codes, std::vector<float> &scales,
                      float (*roundScale)(float) = nullptr);

/// Group-wise int4 quantization of one weight tensor [E, K, N] (docs/spec.md
/// §2.1, #moe.quant<int4, group = G[, zero_point]>) for test data: per
/// expert, group of G rows of K and column, with `zeroPoint` (GPTQ's and
/// AWQ's asymmetric form) over the group's finite values w_min = min(w, 0)
/// and w_max = max(w, 0): s = (w_max - w_min) / 15 (1 when 0), z =
/// round(-w_min / s) in [0, 15], q = clamp(round(w / s) + z, 0, 15);
/// without it (symmetric) s = max|w| / 7 (1 when 0), z = 8, q = clamp(
/// round(w / s) + 8, 0, 15). `w` is replaced by the dequantized weights,
/// (q - z) * s computed exactly in double and rounded once to f32.
/// `codes` receives q [E, K, N], `scales` [E, ceil(K/G), N], `zeros` (with
/// `zeroPoint`) z [E, ceil(K/G), N]. `roundScale` as for quantizeFp8Block.
void quantizeInt4Group(std::vector<float> &w, int64_t E, int64_t K, int64_t N,
                       int64_t group, bool zeroPoint, std::vector<uint8_t> &codes,
                       std::vector<float> &scales, std::vector<uint8_t> &zeros,
                       float (*roundScale)(float) = nullptr);

/// The int8-activation mode's quantization of one row `a` of n values (each
/// a float value) in place (docs/spec.md §2.1): per group of `group`
/// consecutive values, s = max|a| / 127 computed in float (NaN if a value
/// is NaN), q = the float a / s rounded to nearest even (0 where s is 0),
/// and a replaced by q * s (exact in double).
void quantizeActivationsInt8(double *a, int64_t n, int64_t group);

/// f_e(x) for one row: x has D doubles, out receives D doubles. For T =
/// bf16/f16 h is rounded to T (the weights are used as they are).
void expertForward(const Experts &experts, int64_t e, const double *x,
                   double *out);
/// Same for an f32 row.
std::vector<double> expertForward(const Experts &experts, int64_t e,
                                  const float *x);

//===----------------------------------------------------------------------===//
// Routing (moe.layer)
//===----------------------------------------------------------------------===//

enum class RoutingKind { Dense, TopK, MoESART };
enum class Adjust { SmallRandom, Zero, Large };
enum class SamplingPrecision { F32, F64 };

const char *adjustName(Adjust adjust);
bool parseAdjust(const std::string &name, Adjust &adjust);

enum class Score { Softmax, Sigmoid };

struct Routing {
  RoutingKind kind = RoutingKind::Dense;
  int64_t k = 0; // unused for Dense (every expert)
  Adjust adjust = Adjust::SmallRandom;
  double trimmedLasso = 1e-3; // lambda of the auxiliary loss (MOESART)
  // #moe.top_k's production parameters (docs/spec.md §3.1.1); the defaults are the
  // classic top-k.
  Score score = Score::Softmax;
  bool normalize = true;
  double scale = 1.0;
  int64_t groups = 1;
  int64_t groupK = 0; // 0: all groups

  /// True when top_k's parameters are the defaults.
  bool isClassicTopK() const {
    return score == Score::Softmax && normalize && scale == 1.0 && groups == 1;
  }

  static Routing dense() { return Routing(); }
  static Routing topK(int64_t k) {
    Routing r;
    r.kind = RoutingKind::TopK;
    r.k = k;
    return r;
  }
  static Routing moesart(int64_t k, Adjust adjust = Adjust::SmallRandom,
                         double trimmedLasso = 1e-3) {
    Routing r;
    r.kind = RoutingKind::MoESART;
    r.k = k;
    r.adjust = adjust;
    r.trimmedLasso = trimmedLasso;
    return r;
  }
  /// The number of experts per token: k, or E for Dense.
  int64_t expertsPerToken(int64_t numExperts) const {
    return kind == RoutingKind::Dense ? numExperts : k;
  }
};

/// Max-subtracted softmax of n doubles.
std::vector<double> softmax(const double *v, int64_t n);

/// Indices of the k largest of v[0..n), in rank order (rankedAbove; equal
/// values, NaNs among them: lower index first).
/// The order of every top-k selection (docs/spec.md §3, "NaN and
/// infinities"): the larger value first, NaN below every number (-inf
/// included). A strict weak order on values; topKIndices breaks its ties
/// (NaNs among them) by the lower index.
bool rankedAbove(double a, double b);

std::vector<int64_t> topKIndices(const double *v, int64_t n, int64_t k);

/// MOESART sampling of K experts without replacement from g (docs/spec.md §3.1):
/// draw r = 0..K-1 uses u = philoxUniform(seed, token, r). Returns the
/// experts in draw order. In F32 mode g is first rounded to f32 and all the
/// arithmetic is f32 (see the header comment); in F64 mode it is double.
/// If `margin` is non-null it receives min over draws and i of |u - c_i|
/// (the cumsums as computed, compared in double).
std::vector<int64_t> sampleWithoutReplacement(const double *g, int64_t n,
                                              int64_t k, uint64_t seed,
                                              uint32_t token,
                                              SamplingPrecision precision,
                                              double *margin = nullptr);
/// The f32 algorithm on an f32 distribution, exactly as the compiler is
/// expected to run it (p starts as g; no rounding step).
std::vector<int64_t> sampleWithoutReplacementF32(const float *g, int64_t n,
                                                 int64_t k, uint64_t seed,
                                                 uint32_t token,
                                                 double *margin = nullptr);

/// small_random's j: u = philoxUniform(seed, token, K) picks the
/// floor(u*K)-th (0-based) member of `selected` in ascending expert index.
int64_t smallRandomPick(const std::vector<int64_t> &selected, uint64_t seed,
                        uint32_t token);

/// The routing decision for one token.
struct TokenRouting {
  std::vector<int64_t> selected; // S_t in routing order (see LayerResult)
  std::vector<double> weights;   // w_t,i, parallel to `selected`
  int64_t pickedJ = -1;          // small_random's j (training), else -1
  double decisionMargin = 0;     // see LayerResult::decisionMargin
};

/// Routes one token from its router logits o (n = E values).
/// `selectionBias` (nullable, E values): #moe.top_k's selection-only bias.
/// For #moe.top_k with production parameters or a bias (docs/spec.md §3.1.1):
/// s = softmax(o) or sigmoid(o), c = s + b chooses (groups: a group's score
/// is the sum of its top-min(2, E/G) c, the GK best groups are kept, ties to
/// the lower index; then the top-K of c among their experts), w_i = s_i,
/// divided by (sum_S s + 1e-20) with normalize, times scale. The decision
/// margin is then the smaller of the c gap at the K-th pick and the group
/// score gap at the GK-th kept group.
TokenRouting routeToken(const double *o, int64_t numExperts,
                        const Routing &routing, bool training, uint64_t seed,
                        uint32_t token,
                        SamplingPrecision precision = SamplingPrecision::F32,
                        const double *selectionBias = nullptr);

/// The routing weights w_t,i, parallel to `selected`, of one token whose
/// expert set S_t (in routing order) is `selected` and, for small_random in
/// training, whose j is `pickedJ` (ignored otherwise): the weights of the
/// table of docs/spec.md §3.1 and of §3.1.1 step 5, from the logits o (n = E
/// values). routeToken computes its weights with this function; with the
/// choices held fixed it is the part of the routing that the reverse mode
/// differentiates (MoEReferenceGrad.h). `withSelectionBias` tells whether
/// the layer has a selection bias (its values only choose).
std::vector<double> routingWeights(const double *o, int64_t numExperts,
                                   const Routing &routing, bool training,
                                   const std::vector<int64_t> &selected,
                                   int64_t pickedJ, bool withSelectionBias);

/// lambda * mean_t (1 - sum of the K largest g_t,i) over T rows of g [T, E].
double trimmedLassoLoss(const std::vector<double> &g, int64_t numTokens,
                        int64_t numExperts, int64_t k, double lambda);

//===----------------------------------------------------------------------===//
// moe.layer
//===----------------------------------------------------------------------===//

/// The layer's element type is experts.elementType.
struct LayerInputs {
  int64_t numTokens = 0; // T
  std::vector<float> x;  // [T, D]
  std::vector<float> wr; // [D, E]
  std::vector<float> br; // empty, or [E]
  Experts experts;
  /// #moe.top_k's selection_bias: empty, or [E] (f32 whatever T is).
  std::vector<float> selectionBias;
  /// The shared expert (docs/spec.md §3.1.1): empty, or s1 [D, Hs] ([D, 2Hs] for
  /// gated activations) and s2 [Hs, D] with the experts' activation and no
  /// biases; sharedGate empty or [D] (gate_t = sigmoid(x_t . sg)). In T.
  int64_t sharedHidden = 0; // Hs
  std::vector<float> sharedW1;
  std::vector<float> sharedW2;
  std::vector<float> sharedGate;
};

/// Adds random docs/spec.md §3.1.1 parts to `in`: a selection bias ~ N(0, 0.05^2)
/// (f32), a shared expert of width `sharedHidden` (> 0) with weights
/// ~ N(0, 1/fan_in) rounded to the experts' element type, and a shared gate
/// ~ N(0, 1/D). Deterministic in seed.
void addRandomProductionParts(LayerInputs &in, bool selectionBias, int64_t sharedHidden,
                              bool sharedGate, uint64_t seed);

struct LayerOptions {
  Routing routing;
  bool training = false;
  uint64_t seed = 0; // the i64 seed operand, reinterpreted as unsigned
  /// GShard capacity factor; <= 0 means dropless (the default).
  double capacityFactor = 0;
  SamplingPrecision samplingPrecision = SamplingPrecision::F32;
};

struct LayerResult {
  std::vector<float> y; // [T, D]
  /// The second result in training mode: lambda * mean_t(1 - topK sum of g)
  /// for MOESART, 0 for the other routings; 0 in inference mode too.
  double auxLoss = 0;
  /// selected[t][i]: the experts S_t, in routing order: ascending index for
  /// dense, rank order for top_k and MOESART inference, draw order for
  /// MOESART training.
  std::vector<std::vector<int64_t>> selected;
  /// weights[t][i]: w_t,i for selected[t][i] (before capacity drops).
  std::vector<std::vector<double>> weights;
  /// dropped[t][i]: the assignment was dropped by the capacity limit.
  std::vector<std::vector<bool>> dropped;
  /// small_random's j per token (training), else -1.
  std::vector<int64_t> pickedJ;
  std::vector<double> logits; // o [T, E]
  std::vector<double> probs;  // g [T, E]
  /// How robust the expert choice of token t is to small perturbations of
  /// the inputs: +inf for dense (and top_k with k = E); o_(k) - o_(k+1) (the
  /// gap between the last chosen and the first unchosen logit) for top_k
  /// and MOESART inference; for MOESART training the smallest |u - c_i| over
  /// all draws and all i (c = the cumsums the sampling compared u with).
  /// NaN where the gap has a NaN on a side: a choice the NaN rule of
  /// docs/spec.md §3 makes exactly.
  std::vector<double> decisionMargin;
  /// The per-expert capacity C, or -1 when dropless.
  int64_t capacity = -1;
};

/// moe.layer forward (docs/spec.md §3.1). Aborts on invalid inputs (e.g. MOESART
/// training with k < 2, k outside [1, E]).
LayerResult moeLayer(const LayerInputs &in, const LayerOptions &options);

/// The discrete choices of one moe.layer forward, which its derivative holds
/// fixed (MoEReferenceGrad.h).
struct LayerDecisions {
  /// S_t per token, in routing order (LayerResult::selected).
  std::vector<std::vector<int64_t>> selected;
  /// The capacity drops, parallel to `selected`.
  std::vector<std::vector<bool>> dropped;
  /// small_random's j per token (training), else -1.
  std::vector<int64_t> pickedJ;
  /// MOESART training: per token the K experts of the largest g_t,i (the
  /// trimmed lasso's terms; ties: lower index first); else empty.
  std::vector<std::vector<int64_t>> lassoTopK;
};

/// The decisions a moeLayer run with these options took.
LayerDecisions layerDecisions(const LayerResult &result,
                              const LayerOptions &options);

/// The outputs of moe.layer in double: y before its rounding to T and the
/// aux loss (0 unless MOESART training).
struct LayerValues {
  std::vector<double> y; // [T, D]
  double auxLoss = 0;
};

/// moe.layer's forward with the discrete choices of `decisions` instead of
/// its own: the router logits, the routing weights of S_t (routingWeights),
/// the experts and the combine of moeLayer, the aux loss over the given
/// trimmed-lasso sets, and y in double. The inputs are used as they are
/// (moeLayer first rounds them to T; for T = bf16/f16 h is still rounded to
/// T). For T = f32 it is smooth in the inputs (relu's kink aside): what the
/// finite differences of the gradient tests evaluate. With the inputs and
/// decisions of a moeLayer run, roundTo(T, y) and auxLoss are that run's
/// values, bit for bit.
LayerValues moeLayerWithDecisions(const LayerInputs &in,
                                  const LayerOptions &options,
                                  const LayerDecisions &decisions);

//===----------------------------------------------------------------------===//
// moe.soft_layer
//===----------------------------------------------------------------------===//

/// The layer's element type is experts.elementType.
struct SoftLayerInputs {
  int64_t numGroups = 0;       // G
  int64_t groupSize = 0;       // M
  int64_t slotsPerExpert = 0;  // S
  std::vector<float> x;        // [G, M, D]
  std::vector<float> phi;      // [D, E, S]
  double scale = 1.0;          // the optional scale operand (default 1)
  bool normalize = false;      // the `normalize` unit attribute
  Experts experts;
};

struct SoftLayerResult {
  std::vector<float> y;         // [G, M, D]
  std::vector<double> logits;   // L  [G, M, E, S]
  std::vector<double> dispatch; // Dw [G, M, E, S], softmax over m
  std::vector<double> combine;  // Cw [G, M, E, S], softmax over (e, s)
  std::vector<double> slots;    // X~ [G, E, S, D]
  std::vector<double> slotOutputs; // Y~ [G, E, S, D]
};

/// moe.soft_layer forward (docs/spec.md §3.2).
SoftLayerResult softMoELayer(const SoftLayerInputs &in);

//===----------------------------------------------------------------------===//
// Deterministic test data (independent of Philox)
//===----------------------------------------------------------------------===//

/// splitmix64 (Steele, Lea, Flood) with a Box-Muller normal generator.
class TestRng {
public:
  explicit TestRng(uint64_t seed) : state(seed) {}
  uint64_t next();
  /// Uniform in [0, 1) with 53 bits.
  double uniform();
  /// Standard normal (Box-Muller; the second value of a pair is cached).
  double normal();

private:
  uint64_t state;
  bool hasSpare = false;
  double spare = 0;
};

/// n normal values * stddev, as f32.
std::vector<float> randomNormal(int64_t n, uint64_t seed, double stddev = 1.0);

/// Random experts: W1 ~ N(0, 1/D), W2 ~ N(0, 1/H), biases ~ N(0, 0.1^2)
/// when withBiases. Deterministic in seed. For T = bf16/f16 the same values
/// rounded to T (and elementType = T).
Experts randomExperts(int64_t numExperts, int64_t modelDim, int64_t hiddenDim,
                      Activation act, bool withBiases, uint64_t seed,
                      ElementType type = ElementType::F32);

/// Random moe.layer inputs: x ~ N(0, 1), Wr ~ N(0, 1/D), br ~ N(0, 0.1^2)
/// when withRouterBias, experts as randomExperts. Deterministic in seed; for
/// T = bf16/f16 the same values rounded to T.
LayerInputs randomLayerInputs(int64_t numTokens, int64_t modelDim,
                              int64_t numExperts, int64_t hiddenDim,
                              Activation act, bool withRouterBias,
                              bool withExpertBiases, uint64_t seed,
                              ElementType type = ElementType::F32);

/// Relative-or-absolute closeness: |a - b| <= atol + rtol * |b| elementwise;
/// returns the index of the first mismatch (0 when the sizes differ; NaN
/// never matches) or -1 when all match.
int64_t firstMismatch(const std::vector<float> &a, const std::vector<float> &b,
                      double rtol, double atol);

} // namespace ref
} // namespace moe

#endif // MOE_TEST_REFERENCE_MOEREFERENCE_H
