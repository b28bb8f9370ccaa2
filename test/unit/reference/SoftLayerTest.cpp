//===- SoftLayerTest.cpp - moe.soft_layer reference -----------------------===//

#include "test/reference/MoEReference.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace moe::ref;

namespace {

// Identity-like scalar experts (D = 1, H = 1, relu, no biases):
// f_e(x) = relu(x * a_e) * b_e.
Experts scalarExperts(std::vector<float> a, std::vector<float> b) {
  Experts ex;
  ex.numExperts = int64_t(a.size());
  ex.modelDim = 1;
  ex.hiddenDim = 1;
  ex.activation = Activation::Relu;
  ex.w1 = std::move(a);
  ex.w2 = std::move(b);
  return ex;
}

TEST(SoftLayer, OneExpertHandExample) {
  // G = 1, M = 2, D = 1, E = 1, S = 1, Phi = [[[1]]], x = [1, 2], f(x) = x:
  //   L = [1, 2]; dispatch over m = [e/(e+e^2), e^2/(e+e^2)]
  //                            = [0.2689414213699951, 0.7310585786300049]
  //   slot = 0.2689414213699951 * 1 + 0.7310585786300049 * 2
  //        = 1.7310585786300049; combine over one slot = 1.
  SoftLayerInputs in;
  in.numGroups = 1;
  in.groupSize = 2;
  in.slotsPerExpert = 1;
  in.x = {1.0f, 2.0f};
  in.phi = {1.0f};
  in.experts = scalarExperts({1.0f}, {1.0f});
  SoftLayerResult r = softMoELayer(in);
  EXPECT_NEAR(r.dispatch[0], 0.2689414213699951, 1e-15);
  EXPECT_NEAR(r.dispatch[1], 0.7310585786300049, 1e-15);
  EXPECT_EQ(r.combine[0], 1.0);
  EXPECT_EQ(r.combine[1], 1.0);
  EXPECT_NEAR(r.slots[0], 1.7310585786300049, 1e-15);
  EXPECT_NEAR(r.y[0], 1.7310585786300049, 1e-6);
  EXPECT_NEAR(r.y[1], 1.7310585786300049, 1e-6);
}

TEST(SoftLayer, TwoExpertHandExample) {
  // G = 1, M = 2, D = 1, E = 2, S = 1, Phi[0, :, 0] = [1, -1], x = [1, 2],
  // f_0(x) = relu(x), f_1(x) = 2 relu(x).
  //   L[m=0] = [1, -1], L[m=1] = [2, -2]
  //   dispatch e0 = softmax([1, 2])   = [0.2689414213699951, 0.7310585786300049]
  //   dispatch e1 = softmax([-1, -2]) = [0.7310585786300049, 0.2689414213699951]
  //   slots: e0 = 1.7310585786300049, e1 = 0.73105... + 2 * 0.26894...
  //          = 1.2689414213699952;  Y~ = [1.7310585786300049, 2.5378828427399904]
  //   combine m0 = softmax([1, -1]) = [0.8807970779778824, 0.11920292202211756]
  //   combine m1 = softmax([2, -2]) = [0.9820137900379085, 0.01798620996209156]
  //   y0 = 0.8807970779778824 * 1.7310585786300049
  //      + 0.11920292202211756 * 2.5378828427399904 = 1.8272343884702598
  //   y1 = 0.9820137900379085 * 1.7310585786300049
  //      + 0.01798620996209156 * 2.5378828427399904 = 1.745570289246797
  SoftLayerInputs in;
  in.numGroups = 1;
  in.groupSize = 2;
  in.slotsPerExpert = 1;
  in.x = {1.0f, 2.0f};
  in.phi = {1.0f, -1.0f};
  in.experts = scalarExperts({1.0f, 1.0f}, {1.0f, 2.0f});
  SoftLayerResult r = softMoELayer(in);
  EXPECT_NEAR(r.slots[1], 1.2689414213699952, 1e-15);
  EXPECT_NEAR(r.combine[0], 0.8807970779778824, 1e-15);
  EXPECT_NEAR(r.combine[3], 0.01798620996209156, 1e-15);
  EXPECT_NEAR(r.y[0], 1.8272343884702598, 1e-6);
  EXPECT_NEAR(r.y[1], 1.745570289246797, 1e-6);
}

TEST(SoftLayer, ScaleMultipliesLogits) {
  SoftLayerInputs in;
  in.numGroups = 1;
  in.groupSize = 2;
  in.slotsPerExpert = 1;
  in.x = {1.0f, 2.0f};
  in.phi = {1.0f, -1.0f};
  in.scale = 0.5;
  in.experts = scalarExperts({1.0f, 1.0f}, {1.0f, 2.0f});
  SoftLayerResult r = softMoELayer(in);
  // L[m=1, e=0] = 2 * 1 * 0.5 = 1.
  EXPECT_NEAR(r.logits[2], 1.0, 1e-15);
  EXPECT_NEAR(r.logits[3], -1.0, 1e-15);
}

SoftLayerInputs randomSoft(bool normalize, uint64_t seed) {
  SoftLayerInputs in;
  in.numGroups = 3;
  in.groupSize = 16;
  in.slotsPerExpert = 2;
  const int64_t D = 12, E = 4;
  in.x = randomNormal(3 * 16 * D, seed, 1.0);
  in.phi = randomNormal(D * E * 2, seed + 1, 1.0 / std::sqrt(double(D)));
  in.scale = 1.5;
  in.normalize = normalize;
  in.experts = randomExperts(E, D, 20, Activation::Gelu, true, seed + 2);
  return in;
}

TEST(SoftLayer, DispatchAndCombineSumToOne) {
  for (bool normalize : {false, true}) {
    SoftLayerInputs in = randomSoft(normalize, 100);
    SoftLayerResult r = softMoELayer(in);
    const int64_t G = 3, M = 16, ES = 8;
    for (int64_t g = 0; g < G; ++g) {
      // Dispatch: over tokens m for each slot.
      for (int64_t j = 0; j < ES; ++j) {
        double s = 0;
        for (int64_t m = 0; m < M; ++m)
          s += r.dispatch[size_t((g * M + m) * ES + j)];
        EXPECT_NEAR(s, 1.0, 1e-12);
      }
      // Combine: over slots (e, s) for each token.
      for (int64_t m = 0; m < M; ++m) {
        double s = 0;
        for (int64_t j = 0; j < ES; ++j)
          s += r.combine[size_t((g * M + m) * ES + j)];
        EXPECT_NEAR(s, 1.0, 1e-12);
      }
    }
    for (float v : r.y)
      ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(SoftLayer, NormalizeMakesLogitsScaleInvariant) {
  SoftLayerInputs in = randomSoft(true, 200);
  SoftLayerResult a = softMoELayer(in);
  for (float &v : in.x)
    v *= 4.0f;
  for (float &v : in.phi)
    v *= 2.0f; // larger, so that the 1e-6 in rsqrt matters less
  SoftLayerResult b = softMoELayer(in);
  for (size_t i = 0; i < a.logits.size(); ++i)
    EXPECT_NEAR(a.logits[i], b.logits[i], 1e-5);
  // Normalised logits are bounded by |scale| (Cauchy-Schwarz).
  for (double l : a.logits)
    EXPECT_LE(std::fabs(l), 1.5 + 1e-9);
  // Without normalize the logits scale with x.
  in.normalize = false;
  SoftLayerResult c = softMoELayer(in);
  in.x = randomSoft(true, 200).x;
  SoftLayerResult d = softMoELayer(in);
  for (size_t i = 0; i < c.logits.size(); ++i)
    EXPECT_NEAR(c.logits[i], 4.0 * d.logits[i], 1e-9 * (1 + std::fabs(c.logits[i])));
}

TEST(SoftLayer, SlotsUseRawTokens) {
  // With normalize and a zero Phi every logit is 0: dispatch = 1/M, so each
  // slot is the mean of the *raw* tokens, combine = 1/(E S), and every
  // output row is mean_{e,s} f_e(mean_m x).
  SoftLayerInputs in = randomSoft(true, 300);
  std::fill(in.phi.begin(), in.phi.end(), 0.0f);
  SoftLayerResult r = softMoELayer(in);
  const int64_t M = 16, D = 12, E = 4;
  for (int64_t g = 0; g < 3; ++g) {
    std::vector<double> mean(static_cast<size_t>(D), 0.0);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t d = 0; d < D; ++d)
        mean[size_t(d)] += double(in.x[size_t((g * M + m) * D + d)]) / M;
    std::vector<double> want(static_cast<size_t>(D), 0.0);
    std::vector<double> f(static_cast<size_t>(D));
    for (int64_t e = 0; e < E; ++e) {
      expertForward(in.experts, e, mean.data(), f.data());
      for (int64_t d = 0; d < D; ++d)
        want[size_t(d)] += f[size_t(d)] / E; // two equal slots per expert
    }
    for (int64_t d = 0; d < D; ++d)
      EXPECT_NEAR(r.slots[size_t((g * 8 + 0) * D + d)], mean[size_t(d)], 1e-12);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t d = 0; d < D; ++d)
        EXPECT_NEAR(r.y[size_t((g * M + m) * D + d)], want[size_t(d)], 1e-6);
  }
}

TEST(SoftLayer, SingleTokenSingleSlotIsTheExpert) {
  // M = 1, E = 1, S = 1: dispatch = combine = 1 and y = f_0(x).
  SoftLayerInputs in;
  in.numGroups = 2;
  in.groupSize = 1;
  in.slotsPerExpert = 1;
  in.x = randomNormal(2 * 8, 7, 1.0);
  in.phi = randomNormal(8, 8, 1.0);
  in.normalize = true;
  in.experts = randomExperts(1, 8, 16, Activation::SwiGLU, true, 9);
  SoftLayerResult r = softMoELayer(in);
  for (int64_t g = 0; g < 2; ++g) {
    std::vector<double> f = expertForward(in.experts, 0, in.x.data() + g * 8);
    for (int64_t d = 0; d < 8; ++d)
      EXPECT_NEAR(r.y[size_t(g * 8 + d)], f[size_t(d)], 1e-6);
  }
}

TEST(SoftLayer, GroupsAreIndependent) {
  // Changing group 1's tokens leaves groups 0 and 2 unchanged.
  SoftLayerInputs in = randomSoft(false, 400);
  SoftLayerResult a = softMoELayer(in);
  for (int64_t i = 16 * 12; i < 2 * 16 * 12; ++i)
    in.x[size_t(i)] += 1.0f;
  SoftLayerResult b = softMoELayer(in);
  for (int64_t i = 0; i < 16 * 12; ++i) {
    EXPECT_EQ(a.y[size_t(i)], b.y[size_t(i)]);
    EXPECT_EQ(a.y[size_t(i + 2 * 16 * 12)], b.y[size_t(i + 2 * 16 * 12)]);
  }
}

} // namespace
