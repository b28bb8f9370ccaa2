//===- LayerTest.cpp - moe.layer reference, activations, experts ----------===//

#include "test/reference/MoEReference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

using namespace moe::ref;

namespace {

//===----------------------------------------------------------------------===//
// Activations and experts
//===----------------------------------------------------------------------===//

TEST(Activation, HandValues) {
  // gelu(1) = 0.5 (1 + erf(1/sqrt 2)) = 0.5 (1 + 0.6826894921370859)
  EXPECT_NEAR(gelu(1.0), 0.8413447460685429, 1e-15);
  // gelu(-1) = -0.5 (1 - 0.6826894921370859)
  EXPECT_NEAR(gelu(-1.0), -0.15865525393145707, 1e-15);
  // gelu_tanh(1) = 0.5 (1 + tanh(sqrt(2/pi) 1.044715))
  EXPECT_NEAR(geluTanh(1.0), 0.8411919906082768, 1e-15);
  // silu(1) = 1 / (1 + e^-1); silu(-2) = -2 / (1 + e^2)
  EXPECT_NEAR(silu(1.0), 0.7310585786300049, 1e-15);
  EXPECT_NEAR(silu(-2.0), -0.2384058440442351, 1e-15);
  EXPECT_EQ(relu(-1.0), 0.0);
  EXPECT_EQ(relu(2.5), 2.5);
  EXPECT_EQ(activate(Activation::SwiGLU, 1.0), silu(1.0));
  EXPECT_EQ(activate(Activation::GeGLU, 1.0), gelu(1.0));
}

TEST(Activation, Names) {
  for (const char *name :
       {"gelu", "gelu_tanh", "relu", "silu", "swiglu", "geglu"}) {
    Activation a;
    ASSERT_TRUE(parseActivation(name, a)) << name;
    EXPECT_STREQ(activationName(a), name);
  }
  Activation a;
  EXPECT_FALSE(parseActivation("tanh", a));
  EXPECT_TRUE(isGated(Activation::SwiGLU));
  EXPECT_TRUE(isGated(Activation::GeGLU));
  EXPECT_FALSE(isGated(Activation::Silu));
  for (const char *name : {"small_random", "zero", "large"}) {
    Adjust j;
    ASSERT_TRUE(parseAdjust(name, j)) << name;
    EXPECT_STREQ(adjustName(j), name);
  }
}

// One gated expert, E = 1, D = 2, H = 1 (W1 is [1, 2, 2]):
//   W1[0] = [[1, 0.5], [0, 1]], b1 = [0, -0.5], W2[0] = [[1, -2]],
//   b2 = [0.5, 0], x = [1, 2]
//   u = [1*1 + 2*0, 1*0.5 + 2*1] + b1 = [1, 2]
Experts gatedExpert(Activation act) {
  Experts ex;
  ex.numExperts = 1;
  ex.modelDim = 2;
  ex.hiddenDim = 1;
  ex.activation = act;
  ex.w1 = {1.0f, 0.5f, 0.0f, 1.0f};
  ex.b1 = {0.0f, -0.5f};
  ex.w2 = {1.0f, -2.0f};
  ex.b2 = {0.5f, 0.0f};
  return ex;
}

TEST(Experts, SwiGLUHandExample) {
  // h = silu(1) * 2 = 0.7310585786300049 * 2 = 1.4621171572600098
  // y = [1.4621171572600098 + 0.5, -2 * 1.4621171572600098]
  //   = [1.9621171572600098, -2.9242343145200196]
  const float x[2] = {1.0f, 2.0f};
  std::vector<double> y = expertForward(gatedExpert(Activation::SwiGLU), 0, x);
  EXPECT_NEAR(y[0], 1.9621171572600098, 1e-12);
  EXPECT_NEAR(y[1], -2.9242343145200196, 1e-12);
}

TEST(Experts, GeGLUHandExample) {
  // h = gelu(1) * 2 = 0.8413447460685429 * 2 = 1.6826894921370859
  // y = [2.1826894921370859, -3.3653789842741718]
  const float x[2] = {1.0f, 2.0f};
  std::vector<double> y = expertForward(gatedExpert(Activation::GeGLU), 0, x);
  EXPECT_NEAR(y[0], 2.1826894921370859, 1e-12);
  EXPECT_NEAR(y[1], -3.3653789842741718, 1e-12);
}

TEST(Experts, GatedThroughTheLayer) {
  // A dense layer with one expert: g = 1, so y = f_0(x).
  LayerInputs in;
  in.numTokens = 1;
  in.x = {1.0f, 2.0f};
  in.wr = {0.3f, -0.7f};
  in.experts = gatedExpert(Activation::SwiGLU);
  LayerOptions opt;
  LayerResult r = moeLayer(in, opt);
  EXPECT_NEAR(r.y[0], 1.9621171572600098, 1e-6);
  EXPECT_NEAR(r.y[1], -2.9242343145200196, 1e-6);
  in.experts = gatedExpert(Activation::GeGLU);
  r = moeLayer(in, opt);
  EXPECT_NEAR(r.y[0], 2.1826894921370859, 1e-6);
  EXPECT_NEAR(r.y[1], -3.3653789842741718, 1e-6);
}

TEST(Experts, BiasesAreOptional) {
  Experts ex = gatedExpert(Activation::SwiGLU);
  ex.b1.clear();
  ex.b2.clear();
  // u = [1, 2.5]; h = silu(1) * 2.5 = 1.8276464465750122;
  // y = [1.8276464465750122, -3.6552928931500244]
  const float x[2] = {1.0f, 2.0f};
  std::vector<double> y = expertForward(ex, 0, x);
  EXPECT_NEAR(y[0], 1.8276464465750122, 1e-12);
  EXPECT_NEAR(y[1], -3.6552928931500244, 1e-12);
}

//===----------------------------------------------------------------------===//
// moe.layer by hand
//===----------------------------------------------------------------------===//

// E = 2, D = 1, H = 1, relu. Wr = [[0, ln(3)/2]], x = [[2], [-1]]:
//   token 0: o = [0, ln 3],      g = [1/4, 3/4]
//   token 1: o = [0, -ln(3)/2],  g = [sqrt3/(sqrt3+1), 1/(sqrt3+1)]
//                                  = [0.6339745962155614, 0.36602540378443865]
//   f_0(x) = relu(x) * 1,  f_1(x) = relu(-x + 3) * 4 + 1
//   f_0(2) = 2, f_1(2) = 5, f_0(-1) = 0, f_1(-1) = 17
LayerInputs handLayer() {
  LayerInputs in;
  in.numTokens = 2;
  in.x = {2.0f, -1.0f};
  in.wr = {0.0f, float(std::log(3.0) / 2)};
  Experts &ex = in.experts;
  ex.numExperts = 2;
  ex.modelDim = 1;
  ex.hiddenDim = 1;
  ex.activation = Activation::Relu;
  ex.w1 = {1.0f, -1.0f};
  ex.b1 = {0.0f, 3.0f};
  ex.w2 = {1.0f, 4.0f};
  ex.b2 = {0.0f, 1.0f};
  return in;
}

TEST(Layer, DenseHandExample) {
  LayerOptions opt;
  LayerResult r = moeLayer(handLayer(), opt);
  // y0 = 0.25 * 2 + 0.75 * 5 = 4.25; y1 = 0.36602540378443865 * 17
  EXPECT_NEAR(r.y[0], 4.25, 1e-6);
  EXPECT_NEAR(r.y[1], 6.222431864335457, 1e-6);
  EXPECT_NEAR(r.probs[0], 0.25, 1e-7);
  EXPECT_NEAR(r.probs[1], 0.75, 1e-7);
  EXPECT_EQ(r.auxLoss, 0.0);
  EXPECT_EQ(r.capacity, -1);
}

TEST(Layer, TopOneAndMoesartOneHandExample) {
  // Top-1: token 0 -> expert 1 (y = 5), token 1 -> expert 0 (y = 0).
  for (Routing routing : {Routing::topK(1), Routing::moesart(1)}) {
    LayerOptions opt;
    opt.routing = routing;
    LayerResult r = moeLayer(handLayer(), opt);
    EXPECT_EQ(r.selected[0], (std::vector<int64_t>{1}));
    EXPECT_EQ(r.selected[1], (std::vector<int64_t>{0}));
    EXPECT_NEAR(r.weights[0][0], 1.0, 1e-15);
    EXPECT_NEAR(r.y[0], 5.0, 1e-6);
    EXPECT_NEAR(r.y[1], 0.0, 1e-6);
  }
}

TEST(Layer, TopKEqualsDenseWhenKIsE) {
  LayerInputs in = randomLayerInputs(32, 16, 4, 24, Activation::Gelu, true,
                                     true, 2024);
  LayerOptions dense, topk;
  topk.routing = Routing::topK(4);
  LayerResult a = moeLayer(in, dense), b = moeLayer(in, topk);
  EXPECT_EQ(firstMismatch(b.y, a.y, 1e-6, 1e-6), -1);
  for (int64_t t = 0; t < 32; ++t)
    for (size_t i = 0; i < 4; ++i)
      EXPECT_NEAR(b.weights[size_t(t)][i],
                  a.probs[size_t(t * 4 + b.selected[size_t(t)][i])], 1e-12);
}

// y_t = sum_i w_t,i f_i(x_t) over the kept assignments, recomputed from the
// result's routing decisions.
void expectCombineConsistent(const LayerInputs &in, const LayerResult &r) {
  const int64_t D = in.experts.modelDim;
  for (int64_t t = 0; t < in.numTokens; ++t) {
    std::vector<double> y(static_cast<size_t>(D), 0.0);
    const auto &sel = r.selected[size_t(t)];
    for (size_t i = 0; i < sel.size(); ++i) {
      if (r.dropped[size_t(t)][i])
        continue;
      std::vector<double> f =
          expertForward(in.experts, sel[i], in.x.data() + t * D);
      for (int64_t d = 0; d < D; ++d)
        y[size_t(d)] += r.weights[size_t(t)][i] * f[size_t(d)];
    }
    for (int64_t d = 0; d < D; ++d)
      ASSERT_NEAR(r.y[size_t(t * D + d)], y[size_t(d)],
                  1e-6 * (1 + std::fabs(y[size_t(d)])));
  }
}

TEST(Layer, AllRoutingsRandomConsistency) {
  LayerInputs in = randomLayerInputs(64, 16, 8, 32, Activation::GeluTanh,
                                     true, true, 77);
  std::vector<std::pair<Routing, bool>> cases = {
      {Routing::dense(), false},
      {Routing::topK(2), false},
      {Routing::moesart(2), false},
      {Routing::moesart(2, Adjust::SmallRandom), true},
      {Routing::moesart(3, Adjust::Zero), true},
      {Routing::moesart(4, Adjust::Large), true},
  };
  for (auto &c : cases) {
    LayerOptions opt;
    opt.routing = c.first;
    opt.training = c.second;
    opt.seed = 0x1234567890abcdefull;
    LayerResult r = moeLayer(in, opt);
    const int64_t K = c.first.expertsPerToken(8);
    ASSERT_EQ(r.y.size(), size_t(64 * 16));
    for (int64_t t = 0; t < 64; ++t) {
      const auto &sel = r.selected[size_t(t)];
      ASSERT_EQ(int64_t(sel.size()), K);
      EXPECT_EQ(std::set<int64_t>(sel.begin(), sel.end()).size(), sel.size());
      double s = 0;
      for (double w : r.weights[size_t(t)])
        s += w;
      EXPECT_NEAR(s, 1.0, 1e-12);
      const bool smallRandom = c.second &&
                               c.first.kind == RoutingKind::MoESART &&
                               c.first.adjust == Adjust::SmallRandom;
      if (smallRandom) {
        EXPECT_NE(std::find(sel.begin(), sel.end(), r.pickedJ[size_t(t)]),
                  sel.end());
      } else {
        EXPECT_EQ(r.pickedJ[size_t(t)], -1);
      }
    }
    expectCombineConsistent(in, r);
  }
}

TEST(Layer, TrainingIsDeterministicInTheSeed) {
  LayerInputs in = randomLayerInputs(64, 8, 16, 8, Activation::Relu, true,
                                     false, 5);
  LayerOptions opt;
  opt.routing = Routing::moesart(2);
  opt.training = true;
  opt.seed = 42;
  LayerResult a = moeLayer(in, opt), b = moeLayer(in, opt);
  EXPECT_EQ(a.selected, b.selected);
  EXPECT_EQ(a.y, b.y);
  opt.seed = 43;
  LayerResult c = moeLayer(in, opt);
  EXPECT_NE(a.selected, c.selected);
  // Sampling precisions agree on well-conditioned tokens.
  opt.seed = 42;
  opt.samplingPrecision = SamplingPrecision::F64;
  LayerResult d = moeLayer(in, opt);
  for (size_t t = 0; t < 64; ++t) {
    if (a.decisionMargin[t] > 1e-5) {
      EXPECT_EQ(a.selected[t], d.selected[t]);
    }
  }
}

TEST(Layer, TrainingUsesTokenIndexAsCounter) {
  // Token t's experts are the sampling of its own g with counter (t, r).
  LayerInputs in = randomLayerInputs(16, 8, 8, 8, Activation::Silu, true,
                                     true, 6);
  LayerOptions opt;
  opt.routing = Routing::moesart(3);
  opt.training = true;
  opt.seed = 0xfeedbeefcafeull;
  LayerResult r = moeLayer(in, opt);
  for (uint32_t t = 0; t < 16; ++t) {
    EXPECT_EQ(r.selected[t],
              sampleWithoutReplacement(r.probs.data() + t * 8, 8, 3, opt.seed,
                                       t, SamplingPrecision::F32));
    EXPECT_EQ(r.pickedJ[t], smallRandomPick(r.selected[t], opt.seed, t));
  }
}

//===----------------------------------------------------------------------===//
// Auxiliary loss through the layer
//===----------------------------------------------------------------------===//

TEST(Layer, AuxLossHandExample) {
  // D = 2, E = 3, x0 = [1, 0], x1 = [0, 1]; Wr's rows are log(g_t), so
  // g_0 = {0.5, 0.3, 0.2}, g_1 = {0.1, 0.1, 0.8} (up to f32 rounding).
  // K = 2, lambda = 0.5: 0.5 * mean(1 - 0.8, 1 - 0.9) = 0.5 * 0.15 = 0.075.
  LayerInputs in;
  in.numTokens = 2;
  in.x = {1.0f, 0.0f, 0.0f, 1.0f};
  in.wr = {float(std::log(0.5)), float(std::log(0.3)), float(std::log(0.2)),
           float(std::log(0.1)), float(std::log(0.1)), float(std::log(0.8))};
  in.experts = randomExperts(3, 2, 4, Activation::Relu, false, 1);
  LayerOptions opt;
  opt.routing = Routing::moesart(2, Adjust::SmallRandom, 0.5);
  opt.training = true;
  opt.seed = 1;
  EXPECT_NEAR(moeLayer(in, opt).auxLoss, 0.075, 2e-7);
  // Inference: no second result.
  opt.training = false;
  EXPECT_EQ(moeLayer(in, opt).auxLoss, 0.0);
  // Routings without a regularizer return 0 in training mode.
  opt.training = true;
  opt.routing = Routing::topK(2);
  EXPECT_EQ(moeLayer(in, opt).auxLoss, 0.0);
  opt.routing = Routing::dense();
  EXPECT_EQ(moeLayer(in, opt).auxLoss, 0.0);
}

//===----------------------------------------------------------------------===//
// Capacity factor
//===----------------------------------------------------------------------===//

TEST(Capacity, TopOneDropsInTokenOrder) {
  // E = 2, D = 2, Wr = 10 I: tokens [1,0] go to expert 0, [0,1] to 1.
  // T = 4, k = 1, cf = 1 -> C = ceil(1 * 4 * 1 / 2) = 2. Tokens 0, 1, 3 all
  // want expert 0: token 3 (the third in token order) is dropped -> y3 = 0.
  LayerInputs in;
  in.numTokens = 4;
  in.x = {1, 0, 1, 0, 0, 1, 1, 0};
  in.wr = {10, 0, 0, 10};
  in.experts = randomExperts(2, 2, 3, Activation::Gelu, true, 9);
  LayerOptions opt;
  opt.routing = Routing::topK(1);
  LayerResult free = moeLayer(in, opt);
  opt.capacityFactor = 1.0;
  LayerResult cap = moeLayer(in, opt);
  EXPECT_EQ(cap.capacity, 2);
  for (int t = 0; t < 3; ++t) {
    EXPECT_FALSE(cap.dropped[size_t(t)][0]);
    for (int d = 0; d < 2; ++d)
      EXPECT_EQ(cap.y[size_t(t * 2 + d)], free.y[size_t(t * 2 + d)]);
  }
  EXPECT_TRUE(cap.dropped[3][0]);
  EXPECT_EQ(cap.y[6], 0.0f);
  EXPECT_EQ(cap.y[7], 0.0f);
  EXPECT_NE(free.y[6], 0.0f);
}

LayerInputs threeExpertTop2() {
  // E = 3, D = 3, Wr = I, so o = x. Top-2: t0 = [2,1,0] -> {0, 1},
  // t1 = [2,0,1] -> {0, 2}, t2 = [2,1,0] -> {0, 1}.
  LayerInputs in;
  in.numTokens = 3;
  in.x = {2, 1, 0, 2, 0, 1, 2, 1, 0};
  in.wr = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  in.experts = randomExperts(3, 3, 5, Activation::Silu, true, 10);
  return in;
}

TEST(Capacity, TopTwoPartialDropKeepsWeights) {
  // T = 3, k = 2, E = 3, cf = 1 -> C = ceil(2) = 2. Expert 0 takes tokens 0
  // and 1; token 2's assignment to expert 0 is dropped; its assignment to
  // expert 1 is kept with its unrenormalised top-2 weight
  // e^1 / (e^2 + e^1) = 0.2689414213699951.
  LayerInputs in = threeExpertTop2();
  LayerOptions opt;
  opt.routing = Routing::topK(2);
  LayerResult free = moeLayer(in, opt);
  opt.capacityFactor = 1.0;
  LayerResult cap = moeLayer(in, opt);
  EXPECT_EQ(cap.capacity, 2);
  EXPECT_EQ(cap.selected[2], (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(cap.dropped[0], (std::vector<bool>{false, false}));
  EXPECT_EQ(cap.dropped[1], (std::vector<bool>{false, false}));
  EXPECT_EQ(cap.dropped[2], (std::vector<bool>{true, false}));
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(cap.y[size_t(i)], free.y[size_t(i)]);
  EXPECT_NEAR(cap.weights[2][1], 0.2689414213699951, 1e-15);
  std::vector<double> f1 = expertForward(in.experts, 1, in.x.data() + 6);
  for (int d = 0; d < 3; ++d)
    EXPECT_NEAR(cap.y[size_t(6 + d)], 0.2689414213699951 * f1[size_t(d)],
                1e-6);
}

TEST(Capacity, CeilAndDense) {
  LayerInputs in = threeExpertTop2();
  LayerOptions opt;
  opt.routing = Routing::topK(2);
  // cf = 0.5: C = ceil(0.5 * 3 * 2 / 3) = 1. Expert 0: t0 kept, t1 and t2
  // dropped; expert 1: t0 kept, t2 dropped; expert 2: t1 kept.
  opt.capacityFactor = 0.5;
  LayerResult r = moeLayer(in, opt);
  EXPECT_EQ(r.capacity, 1);
  EXPECT_EQ(r.dropped[0], (std::vector<bool>{false, false}));
  EXPECT_EQ(r.dropped[1], (std::vector<bool>{true, false}));
  EXPECT_EQ(r.dropped[2], (std::vector<bool>{true, true}));
  EXPECT_EQ(r.y[6], 0.0f);
  // Dense uses k = E: cf = 0.5 -> C = ceil(0.5 * 3 * 3 / 3) = 2: token 2 is
  // dropped from every expert.
  opt.routing = Routing::dense();
  r = moeLayer(in, opt);
  EXPECT_EQ(r.capacity, 2);
  EXPECT_EQ(r.dropped[2], (std::vector<bool>{true, true, true}));
  EXPECT_EQ(r.y[6], 0.0f);
  EXPECT_EQ(r.y[8], 0.0f);
  // A large factor drops nothing.
  opt.capacityFactor = 10.0;
  LayerResult big = moeLayer(in, opt);
  opt.capacityFactor = 0.0;
  EXPECT_EQ(big.y, moeLayer(in, opt).y);
}

TEST(Capacity, TrainingUsesDrawOrder) {
  // MOESART training: the assignments of a token are considered in draw
  // order; with C = 2 every expert keeps exactly its first two assignments.
  LayerInputs in = randomLayerInputs(40, 4, 4, 4, Activation::Relu, false,
                                     false, 12);
  LayerOptions opt;
  opt.routing = Routing::moesart(2, Adjust::Large);
  opt.training = true;
  opt.seed = 3;
  opt.capacityFactor = 0.1; // ceil(0.1 * 40 * 2 / 4) = 2
  LayerResult r = moeLayer(in, opt);
  EXPECT_EQ(r.capacity, 2);
  std::vector<int> count(4, 0);
  for (size_t t = 0; t < 40; ++t)
    for (size_t i = 0; i < 2; ++i) {
      const int64_t e = r.selected[t][i];
      EXPECT_EQ(bool(r.dropped[t][i]), count[size_t(e)] >= 2);
      if (!r.dropped[t][i])
        ++count[size_t(e)];
    }
  expectCombineConsistent(in, r);
}

//===----------------------------------------------------------------------===//
// Example shapes and invalid input
//===----------------------------------------------------------------------===//

TEST(Layer, SpecExampleShapes) {
  // moesart_train.mlir: T = 64, D = 128, E = 16, H = 256, k = 2, relu.
  LayerInputs in = randomLayerInputs(64, 128, 16, 256, Activation::Relu, true,
                                     true, 1);
  LayerOptions opt;
  opt.routing = Routing::moesart(2, Adjust::SmallRandom, 1e-3);
  opt.training = true;
  opt.seed = 7;
  LayerResult r = moeLayer(in, opt);
  EXPECT_GT(r.auxLoss, 0.0);
  EXPECT_LT(r.auxLoss, 1e-3);
  for (float v : r.y)
    ASSERT_TRUE(std::isfinite(v));
  // top2_swiglu.mlir: T = 32, D = 256, E = 8, H = 512, swiglu, no biases.
  LayerInputs in2 = randomLayerInputs(32, 256, 8, 512, Activation::SwiGLU,
                                      false, false, 2);
  EXPECT_EQ(in2.experts.w1.size(), size_t(8 * 256 * 1024));
  LayerOptions opt2;
  opt2.routing = Routing::topK(2);
  expectCombineConsistent(in2, moeLayer(in2, opt2));
}

TEST(TestData, DeterministicNormal) {
  std::vector<float> a = randomNormal(10000, 3), b = randomNormal(10000, 3);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, randomNormal(10000, 4));
  double s = 0, s2 = 0;
  for (float v : a) {
    s += v;
    s2 += double(v) * v;
  }
  EXPECT_NEAR(s / 1e4, 0.0, 0.05);
  EXPECT_NEAR(s2 / 1e4, 1.0, 0.05);
}

using LayerDeathTest = ::testing::Test;

TEST(LayerDeathTest, MoesartTrainingNeedsKAtLeastTwo) {
  LayerInputs in = randomLayerInputs(4, 4, 4, 4, Activation::Relu, false,
                                     false, 1);
  LayerOptions opt;
  opt.routing = Routing::moesart(1);
  opt.training = true;
  EXPECT_DEATH(moeLayer(in, opt), "k >= 2");
  opt.routing = Routing::topK(5);
  opt.training = false;
  EXPECT_DEATH(moeLayer(in, opt), "must be in \\[1, E = 4\\]");
  in.x.pop_back();
  opt.routing = Routing::dense();
  EXPECT_DEATH(moeLayer(in, opt), "x has 15 elements, expected 16");
}

} // namespace
