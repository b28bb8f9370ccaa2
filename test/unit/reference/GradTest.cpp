//===- GradTest.cpp - reverse mode of the reference against differences ---===//
//
// Every gradient of moeLayerVjp and softMoELayerVjp against central finite
// differences in double of L = sum(dy * y) + dAux * aux, with y (before its
// rounding to T) and aux from the reference forward with the discrete
// routing held fixed to the unperturbed run's (moeLayerWithDecisions), so
// that no step can flip a top-k or a sampling decision.
//
// Differences: step h = 2^-17 (about 7.6e-6). The operands are f32, so the
// steps actually taken are float(v + h) - v and v - float(v - h), exact in
// double, and the difference quotient divides by their sum. Tolerance:
// |fd - grad| <= 1e-6 max|grad| + 1e-9 for every element of every gradient
// tensor (the absolute part covers the rounding of L, about 1e-16 |L| / h).
//
//===----------------------------------------------------------------------===//

#include "test/reference/MoEReferenceGrad.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

using namespace moe::ref;

namespace {

constexpr double kStep = 0x1.0p-17;
constexpr double kRelTol = 1e-6;
constexpr double kAbsTol = 1e-9;

/// Central differences of `objective` with respect to every element of
/// `param` (restored afterwards), with the f32 steps of the file comment.
std::vector<double> finiteDifferences(std::vector<float> &param,
                                      const std::function<double()> &objective,
                                      double h = kStep) {
  std::vector<double> fd(param.size());
  for (size_t i = 0; i < param.size(); ++i) {
    const float v = param[i];
    param[i] = float(double(v) + h);
    const double up = double(param[i]) - double(v);
    const double lp = objective();
    param[i] = float(double(v) - h);
    const double down = double(v) - double(param[i]);
    const double lm = objective();
    param[i] = v;
    fd[i] = (lp - lm) / (up + down);
  }
  return fd;
}

double maxAbs(const std::vector<double> &v) {
  double m = 0.0;
  for (double x : v)
    m = std::max(m, std::fabs(x));
  return m;
}

/// |fd - grad| <= relTol max|grad| + absTol elementwise.
void expectNear(const std::string &name, const std::vector<double> &grad,
                const std::vector<double> &fd, double relTol = kRelTol,
                double absTol = kAbsTol) {
  ASSERT_EQ(grad.size(), fd.size()) << name;
  const double bound = relTol * maxAbs(grad) + absTol;
  for (size_t i = 0; i < grad.size(); ++i)
    ASSERT_LE(std::fabs(fd[i] - grad[i]), bound)
        << name << "[" << i << "]: vjp " << grad[i] << ", fd " << fd[i]
        << " (max|grad| " << maxAbs(grad) << ")";
}

std::vector<double> randomCotangent(size_t n, uint64_t seed) {
  TestRng rng(seed);
  std::vector<double> v(n);
  for (double &x : v)
    x = rng.normal();
  return v;
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

TEST(ActivationGrad, HandValuesAndDifferences) {
  // At 0 every derivative is 1/2 (gelu: Phi(0); silu: sigma(0)), but relu's
  // is 0 by convention.
  EXPECT_EQ(activationDerivative(Activation::Relu, 0.0), 0.0);
  EXPECT_EQ(activationDerivative(Activation::Relu, 1e-300), 1.0);
  EXPECT_EQ(activationDerivative(Activation::Relu, -2.0), 0.0);
  for (Activation act :
       {Activation::Gelu, Activation::GeluTanh, Activation::Silu,
        Activation::SwiGLU, Activation::GeGLU})
    EXPECT_NEAR(activationDerivative(act, 0.0), 0.5, 1e-15)
        << activationName(act);
  // gelu'(1) = Phi(1) + phi(1) = 0.8413447460685429 + 0.24197072451914337.
  EXPECT_NEAR(activationDerivative(Activation::Gelu, 1.0), 1.0833154705876864,
              1e-15);
  for (Activation act :
       {Activation::Gelu, Activation::GeluTanh, Activation::Relu,
        Activation::Silu, Activation::SwiGLU, Activation::GeGLU})
    for (double v : {-3.1, -0.7, 0.3, 1.9}) {
      const double fd =
          (activate(act, v + kStep) - activate(act, v - kStep)) / (2 * kStep);
      EXPECT_NEAR(activationDerivative(act, v), fd, 1e-9)
          << activationName(act) << " at " << v;
    }
}

//===----------------------------------------------------------------------===//
// moe.layer
//===----------------------------------------------------------------------===//

struct LayerCase {
  int64_t tokens = 7, dim = 5, experts = 6, hidden = 7;
  Activation act = Activation::Gelu;
  bool routerBias = true, expertBiases = true;
  bool selectionBias = false;
  int64_t sharedHidden = 0;
  bool sharedGate = false;
  uint64_t dataSeed = 1;
  LayerOptions options;
  /// dy ~ N(0, 1) times dyScale; dAux as given.
  double dyScale = 1.0;
  double dAux = 0.0;
};

LayerInputs inputsFor(const LayerCase &c, ElementType type = ElementType::F32) {
  LayerInputs in =
      randomLayerInputs(c.tokens, c.dim, c.experts, c.hidden, c.act,
                        c.routerBias, c.expertBiases, c.dataSeed, type);
  if (c.selectionBias || c.sharedHidden > 0)
    addRandomProductionParts(in, c.selectionBias, c.sharedHidden, c.sharedGate,
                             c.dataSeed + 1);
  return in;
}

LayerCotangents cotangentsFor(const LayerCase &c) {
  LayerCotangents cot;
  cot.dy = randomCotangent(size_t(c.tokens * c.dim), c.dataSeed ^ 0xD1);
  for (double &v : cot.dy)
    v *= c.dyScale;
  cot.dAuxLoss = c.dAux;
  return cot;
}

/// L = sum(dy * y) + dAux * aux of the forward with fixed decisions.
double layerObjective(const LayerInputs &in, const LayerOptions &opt,
                      const LayerDecisions &dec, const LayerCotangents &cot) {
  const LayerValues v = moeLayerWithDecisions(in, opt, dec);
  double l = cot.dAuxLoss * v.auxLoss;
  for (size_t i = 0; i < v.y.size(); ++i)
    l += cot.dy[i] * v.y[i];
  return l;
}

/// The VJP of `in` and its check against finite differences, tensor by
/// tensor; also checks that the fixed-decision forward is moeLayer's.
struct LayerCheck {
  LayerResult forward;
  LayerDecisions decisions;
  LayerGradients grads;
};

LayerCheck checkLayer(const LayerInputs &in, const LayerCase &c,
                      double relTol = kRelTol) {
  LayerCheck out;
  const LayerOptions &opt = c.options;
  out.forward = moeLayer(in, opt);
  out.decisions = layerDecisions(out.forward, opt);
  const ElementType type = in.experts.elementType;
  const LayerValues values = moeLayerWithDecisions(in, opt, out.decisions);
  EXPECT_EQ(values.auxLoss, out.forward.auxLoss);
  for (size_t i = 0; i < values.y.size(); ++i) {
    EXPECT_EQ(float(roundTo(type, values.y[i])), out.forward.y[i])
        << "y[" << i << "]";
    if (float(roundTo(type, values.y[i])) != out.forward.y[i])
      break;
  }

  const LayerCotangents cot = cotangentsFor(c);
  out.grads = moeLayerVjp(in, opt, cot);
  // The differences see the forward's rounding points as the identity, as
  // the VJP does (a no-op for f32).
  LayerInputs work = in;
  work.experts.elementType = ElementType::F32;
  auto objective = [&] {
    return layerObjective(work, opt, out.decisions, cot);
  };
  const std::pair<const char *,
                  std::pair<std::vector<float> *, const std::vector<double> *>>
      tensors[] = {
          {"dx", {&work.x, &out.grads.dx}},
          {"dwr", {&work.wr, &out.grads.dwr}},
          {"dbr", {&work.br, &out.grads.dbr}},
          {"dSelectionBias", {&work.selectionBias, &out.grads.dSelectionBias}},
          {"dw1", {&work.experts.w1, &out.grads.dw1}},
          {"dw2", {&work.experts.w2, &out.grads.dw2}},
          {"db1", {&work.experts.b1, &out.grads.db1}},
          {"db2", {&work.experts.b2, &out.grads.db2}},
          {"dSharedW1", {&work.sharedW1, &out.grads.dSharedW1}},
          {"dSharedW2", {&work.sharedW2, &out.grads.dSharedW2}},
          {"dSharedGate", {&work.sharedGate, &out.grads.dSharedGate}},
      };
  for (const auto &t : tensors) {
    std::vector<float> &param = *t.second.first;
    const std::vector<double> &grad = *t.second.second;
    EXPECT_EQ(grad.size(), param.size()) << t.first;
    expectNear(t.first, grad, finiteDifferences(param, objective), relTol);
  }
  // The selection bias only chooses.
  for (double v : out.grads.dSelectionBias)
    EXPECT_EQ(v, 0.0);
  return out;
}

LayerCheck checkLayer(const LayerCase &c) {
  return checkLayer(inputsFor(c), c);
}

LayerCase withRouting(Routing routing, bool training = false,
                      uint64_t seed = 0x9e3779b97f4a7c15ull) {
  LayerCase c;
  c.options.routing = routing;
  c.options.training = training;
  c.options.seed = seed;
  c.dAux = training ? 1.7 : 0.0;
  return c;
}

Routing topK(int64_t k, Score score, bool normalize, double scale,
             int64_t groups = 1, int64_t groupK = 0) {
  Routing r = Routing::topK(k);
  r.score = score;
  r.normalize = normalize;
  r.scale = scale;
  r.groups = groups;
  r.groupK = groupK;
  return r;
}

/// True when some assignment of `dec` is dropped.
bool anyDropped(const LayerDecisions &dec) {
  for (const auto &row : dec.dropped)
    if (std::find(row.begin(), row.end(), true) != row.end())
      return true;
  return false;
}

/// Expects exact zeros in every weight gradient of expert e.
void expectExpertGradsZero(const LayerGradients &g, const Experts &ex,
                           int64_t e) {
  const int64_t D = ex.modelDim, H = ex.hiddenDim, C = ex.w1Cols();
  for (int64_t i = 0; i < D * C; ++i)
    ASSERT_EQ(g.dw1[size_t(e * D * C + i)], 0.0);
  for (int64_t i = 0; i < H * D; ++i)
    ASSERT_EQ(g.dw2[size_t(e * H * D + i)], 0.0);
  for (int64_t i = 0; i < C && !g.db1.empty(); ++i)
    ASSERT_EQ(g.db1[size_t(e * C + i)], 0.0);
  for (int64_t i = 0; i < D && !g.db2.empty(); ++i)
    ASSERT_EQ(g.db2[size_t(e * D + i)], 0.0);
}

TEST(LayerGrad, EveryRouting) {
  const std::pair<const char *, LayerCase> cases[] = {
      {"dense", withRouting(Routing::dense())},
      {"top_k 1", withRouting(Routing::topK(1))},
      {"top_k 2", withRouting(Routing::topK(2))},
      {"top_k 2 training", withRouting(Routing::topK(2), true)},
      {"moesart 2 inference", withRouting(Routing::moesart(2))},
      {"moesart 3 inference", withRouting(Routing::moesart(3))},
      {"moesart 2 small_random",
       withRouting(Routing::moesart(2, Adjust::SmallRandom, 0.3), true)},
      {"moesart 3 small_random",
       withRouting(Routing::moesart(3, Adjust::SmallRandom, 0.3), true)},
      {"moesart 3 zero",
       withRouting(Routing::moesart(3, Adjust::Zero, 0.3), true)},
      {"moesart 3 large",
       withRouting(Routing::moesart(3, Adjust::Large, 0.3), true)},
      {"dense training", withRouting(Routing::dense(), true)},
  };
  for (const auto &c : cases) {
    SCOPED_TRACE(c.first);
    checkLayer(c.second);
  }
}

TEST(LayerGrad, ProductionTopK) {
  std::vector<std::pair<const char *, LayerCase>> cases = {
      {"sigmoid", withRouting(topK(2, Score::Sigmoid, true, 1.0))},
      {"softmax unnormalized",
       withRouting(topK(2, Score::Softmax, false, 1.0))},
      {"sigmoid unnormalized",
       withRouting(topK(3, Score::Sigmoid, false, 1.0))},
      {"scale", withRouting(topK(2, Score::Softmax, true, 2.5))},
      {"groups", withRouting(topK(2, Score::Softmax, true, 1.0, 3, 2))},
      {"classic with selection bias", withRouting(Routing::topK(2))},
      {"deepseek-v3", withRouting(topK(2, Score::Sigmoid, true, 2.5, 3, 2))},
      {"unnormalized with bias",
       withRouting(topK(2, Score::Softmax, false, 1.5))},
  };
  cases[5].second.selectionBias = true;
  cases[6].second.selectionBias = true;
  cases[7].second.selectionBias = true;
  for (const auto &c : cases) {
    SCOPED_TRACE(c.first);
    const LayerCheck r = checkLayer(c.second);
    EXPECT_EQ(r.grads.dSelectionBias.size(),
              c.second.selectionBias ? size_t(6) : size_t(0));
  }
}

TEST(LayerGrad, EveryActivationWithAndWithoutBiases) {
  for (Activation act :
       {Activation::Gelu, Activation::GeluTanh, Activation::Relu,
        Activation::Silu, Activation::SwiGLU, Activation::GeGLU}) {
    for (bool biases : {false, true}) {
      SCOPED_TRACE(std::string(activationName(act)) +
                   (biases ? " biases" : ""));
      LayerCase c = withRouting(Routing::topK(2));
      c.act = act;
      c.routerBias = biases;
      c.expertBiases = biases;
      c.dataSeed = 3 + uint64_t(act);
      const LayerCheck r = checkLayer(c);
      EXPECT_EQ(r.grads.dbr.empty(), !biases);
      EXPECT_EQ(r.grads.db1.empty(), !biases);
      EXPECT_EQ(r.grads.db2.empty(), !biases);
    }
  }
}

TEST(LayerGrad, SharedExpertWithAndWithoutGate) {
  for (Activation act : {Activation::Silu, Activation::SwiGLU}) {
    for (bool gate : {false, true}) {
      SCOPED_TRACE(std::string(activationName(act)) + (gate ? " gate" : ""));
      LayerCase c = withRouting(Routing::topK(2));
      c.act = act;
      c.sharedHidden = 4;
      c.sharedGate = gate;
      const LayerCheck r = checkLayer(c);
      EXPECT_EQ(r.grads.dSharedW1.size(),
                size_t(5 * (act == Activation::SwiGLU ? 8 : 4)));
      EXPECT_EQ(r.grads.dSharedGate.size(), gate ? size_t(5) : size_t(0));
    }
  }
  // With MOESART training and a selection-biased production router too.
  LayerCase c =
      withRouting(Routing::moesart(2, Adjust::SmallRandom, 0.3), true);
  c.sharedHidden = 3;
  c.sharedGate = true;
  checkLayer(c);
  LayerCase p = withRouting(topK(2, Score::Sigmoid, true, 2.5, 3, 2));
  p.selectionBias = true;
  p.sharedHidden = 3;
  p.sharedGate = true;
  checkLayer(p);
}

TEST(LayerGrad, CapacityDrops) {
  const std::pair<const char *, LayerCase> cases[] = {
      {"top_k 2", withRouting(Routing::topK(2))},
      {"dense", withRouting(Routing::dense())},
      {"moesart 3 small_random",
       withRouting(Routing::moesart(3, Adjust::SmallRandom, 0.3), true)},
      {"moesart 2 large",
       withRouting(Routing::moesart(2, Adjust::Large, 0.3), true)},
  };
  for (auto c : cases) {
    SCOPED_TRACE(c.first);
    c.second.tokens = 12;
    c.second.options.capacityFactor = 0.5;
    const LayerCheck r = checkLayer(c.second);
    EXPECT_TRUE(anyDropped(r.decisions));
  }
}

TEST(LayerGrad, MoesartTrainingSeeds) {
  for (Adjust adjust : {Adjust::SmallRandom, Adjust::Zero, Adjust::Large}) {
    for (uint64_t seed : {1ull, 42ull, 0xfeedfacecafebeefull}) {
      SCOPED_TRACE(std::string(adjustName(adjust)) + " seed " +
                   std::to_string(seed));
      LayerCase c = withRouting(Routing::moesart(3, adjust, 0.5), true, seed);
      c.dataSeed = seed;
      c.act = Activation::SwiGLU;
      checkLayer(c);
    }
  }
}

TEST(LayerGrad, AuxLossOnly) {
  // dy = 0: only the trimmed lasso's gradient, through g to the router.
  LayerCase c =
      withRouting(Routing::moesart(3, Adjust::SmallRandom, 0.5), true);
  c.dyScale = 0.0;
  c.dAux = 2.0;
  c.sharedHidden = 3;
  const LayerCheck r = checkLayer(c);
  EXPECT_GT(maxAbs(r.grads.dwr), 1e-3);
  EXPECT_GT(maxAbs(r.grads.dx), 1e-3);
  EXPECT_GT(maxAbs(r.grads.dbr), 1e-3);
  for (const std::vector<double> *g :
       {&r.grads.dw1, &r.grads.dw2, &r.grads.db1, &r.grads.db2,
        &r.grads.dSharedW1, &r.grads.dSharedW2})
    EXPECT_EQ(maxAbs(*g), 0.0);
}

TEST(LayerGrad, EdgeShapes) {
  LayerCase one = withRouting(Routing::topK(2));
  one.tokens = 1;
  checkLayer(one);
  LayerCase oneTrain =
      withRouting(Routing::moesart(2, Adjust::SmallRandom, 0.3), true);
  oneTrain.tokens = 1;
  checkLayer(oneTrain);
  // E = 1, k = 1.
  for (Routing r : {Routing::topK(1), Routing::dense(), Routing::moesart(1)}) {
    LayerCase c = withRouting(r);
    c.experts = 1;
    checkLayer(c);
  }
  // k = E.
  for (Routing r : {Routing::topK(6), Routing::moesart(6)}) {
    LayerCase c = withRouting(r);
    checkLayer(c);
  }
  checkLayer(withRouting(Routing::moesart(6, Adjust::SmallRandom, 0.3), true));
  checkLayer(withRouting(Routing::moesart(6, Adjust::Large, 0.3), true));
}

TEST(LayerGrad, UnusedExpertGetsExactZeros) {
  // Expert 5's router bias keeps it out of every top-2.
  LayerCase c = withRouting(Routing::topK(2));
  LayerInputs in = inputsFor(c);
  in.br[5] = -20.0f;
  const LayerCheck r = checkLayer(in, c);
  for (const auto &sel : r.decisions.selected)
    ASSERT_EQ(std::count(sel.begin(), sel.end(), 5), 0);
  expectExpertGradsZero(r.grads, in.experts, 5);
  EXPECT_GT(maxAbs(r.grads.dw1), 0.0);

  // Capacity 1 with every token preferring expert 0 first: every expert
  // that only appears after its slot is full gets zeros as well.
  LayerCase d = withRouting(Routing::topK(1));
  d.options.capacityFactor = 0.1;
  LayerInputs in2 = inputsFor(d);
  in2.br[0] = 20.0f;
  const LayerCheck r2 = checkLayer(in2, d);
  ASSERT_EQ(r2.forward.capacity, 1);
  EXPECT_TRUE(anyDropped(r2.decisions));
  for (int64_t e = 1; e < 6; ++e)
    expectExpertGradsZero(r2.grads, in2.experts, e);
}

TEST(LayerGrad, BFloat16) {
  // Values of bf16, routed by the bf16 forward. The VJP takes the rounding
  // of h to bf16 as the identity but uses the rounded h (in dW2 and f), so
  // it differs from the differences of the unrounded forward by about
  // bf16's unit roundoff 2^-8: within 2e-2 of max|grad|.
  LayerCase c =
      withRouting(Routing::moesart(2, Adjust::SmallRandom, 0.3), true);
  c.sharedHidden = 3;
  c.sharedGate = true;
  const LayerInputs in = inputsFor(c, ElementType::BF16);
  const LayerCheck r = checkLayer(in, c, 2e-2);
  // The rounding of h matters: the f32 VJP of the same values differs.
  LayerInputs asF32 = in;
  asF32.experts.elementType = ElementType::F32;
  const LayerGradients f32 =
      moeLayerVjp(asF32, c.options, r.decisions, cotangentsFor(c));
  EXPECT_NE(f32.dw2, r.grads.dw2);
}

//===----------------------------------------------------------------------===//
// moe.soft_layer
//===----------------------------------------------------------------------===//

struct SoftCase {
  int64_t groups = 2, groupSize = 3, dim = 5, experts = 3, slots = 2,
          hidden = 7;
  Activation act = Activation::Gelu;
  bool biases = true;
  bool normalize = false;
  double scale = 1.0;
  uint64_t seed = 11;
};

SoftLayerInputs softInputsFor(const SoftCase &c) {
  SoftLayerInputs in;
  in.numGroups = c.groups;
  in.groupSize = c.groupSize;
  in.slotsPerExpert = c.slots;
  in.x = randomNormal(c.groups * c.groupSize * c.dim, c.seed);
  in.phi = randomNormal(c.dim * c.experts * c.slots, c.seed + 1,
                        1.0 / std::sqrt(double(c.dim)));
  in.scale = c.scale;
  in.normalize = c.normalize;
  in.experts =
      randomExperts(c.experts, c.dim, c.hidden, c.act, c.biases, c.seed + 2);
  return in;
}

/// sum(dy * y) with y = sum_j Cw[m, j] Y~[j] in double, from the forward's
/// own combine weights and expert outputs (y before its rounding).
double softObjective(const SoftLayerInputs &in, const std::vector<double> &dy) {
  const SoftLayerResult r = softMoELayer(in);
  const int64_t G = in.numGroups, M = in.groupSize, D = in.experts.modelDim;
  const int64_t ES = in.experts.numExperts * in.slotsPerExpert;
  double l = 0.0;
  for (int64_t g = 0; g < G; ++g)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t d = 0; d < D; ++d) {
        double y = 0.0;
        for (int64_t j = 0; j < ES; ++j)
          y += r.combine[size_t((g * M + m) * ES + j)] *
               r.slotOutputs[size_t((g * ES + j) * D + d)];
        EXPECT_EQ(float(y), r.y[size_t((g * M + m) * D + d)]);
        l += dy[size_t((g * M + m) * D + d)] * y;
      }
  return l;
}

void checkSoftLayer(const SoftCase &c) {
  SoftLayerInputs work = softInputsFor(c);
  const std::vector<double> dy =
      randomCotangent(work.x.size(), c.seed ^ 0x50F7);
  const SoftLayerGradients grads = softMoELayerVjp(work, dy);
  auto objective = [&] { return softObjective(work, dy); };
  expectNear("dx", grads.dx, finiteDifferences(work.x, objective));
  expectNear("dphi", grads.dphi, finiteDifferences(work.phi, objective));
  expectNear("dw1", grads.dw1, finiteDifferences(work.experts.w1, objective));
  expectNear("dw2", grads.dw2, finiteDifferences(work.experts.w2, objective));
  expectNear("db1", grads.db1, finiteDifferences(work.experts.b1, objective));
  expectNear("db2", grads.db2, finiteDifferences(work.experts.b2, objective));
  // The scale is a double: plain central differences.
  const double s = work.scale;
  work.scale = s + kStep;
  const double lp = objective();
  work.scale = s - kStep;
  const double lm = objective();
  work.scale = s;
  expectNear("dscale", {grads.dscale}, {(lp - lm) / (2 * kStep)});
}

TEST(SoftLayerGrad, NormalizeAndScale) {
  for (bool normalize : {false, true}) {
    for (double scale : {1.0, 1.7}) {
      SCOPED_TRACE(std::string(normalize ? "normalize" : "raw") + " scale " +
                   std::to_string(scale));
      SoftCase c;
      c.normalize = normalize;
      c.scale = scale;
      checkSoftLayer(c);
    }
  }
}

TEST(SoftLayerGrad, ActivationsAndShapes) {
  for (Activation act :
       {Activation::Relu, Activation::SwiGLU, Activation::GeGLU}) {
    SCOPED_TRACE(activationName(act));
    SoftCase c;
    c.act = act;
    c.biases = act != Activation::Relu;
    c.normalize = true;
    c.scale = 0.8;
    checkSoftLayer(c);
  }
  SoftCase single; // one token per group: the dispatch softmax is 1
  single.groupSize = 1;
  checkSoftLayer(single);
  SoftCase oneExpert;
  oneExpert.experts = 1;
  oneExpert.slots = 1;
  oneExpert.groups = 1;
  checkSoftLayer(oneExpert);
}

} // namespace
