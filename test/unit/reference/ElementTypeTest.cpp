//===- ElementTypeTest.cpp - bf16/f16 rounding points of the reference ----===//

#include "test/reference/MoEReference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace moe::ref;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

//===----------------------------------------------------------------------===//
// roundTo
//===----------------------------------------------------------------------===//

TEST(RoundTo, BFloat16) {
  const ElementType T = ElementType::BF16;
  EXPECT_EQ(roundTo(T, 1.0), 1.0);
  // Ties go to even: 1 + 2^-8 -> 1; 1 + 3 * 2^-8 -> 1 + 2^-6.
  EXPECT_EQ(roundTo(T, 1.0 + std::ldexp(1.0, -8)), 1.0);
  EXPECT_EQ(roundTo(T, 1.0 + 3 * std::ldexp(1.0, -8)),
            1.0 + std::ldexp(1.0, -6));
  EXPECT_EQ(roundTo(T, -(1.0 + 3 * std::ldexp(1.0, -8))),
            -(1.0 + std::ldexp(1.0, -6)));
  // One rounding from double: just above the tie goes up (through f32 the
  // 2^-40 would be lost and the tie would go to even).
  EXPECT_EQ(roundTo(T, 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)),
            1.0 + std::ldexp(1.0, -7));
  // Largest finite (2 - 2^-7) 2^127; half an ulp above it overflows.
  const double maxBF16 = std::ldexp(255.0, 120);
  EXPECT_EQ(roundTo(T, maxBF16), maxBF16);
  EXPECT_EQ(roundTo(T, maxBF16 + std::ldexp(1.0, 119)), kInf);
  EXPECT_EQ(roundTo(T, maxBF16 + std::ldexp(1.0, 119) - std::ldexp(1.0, 100)),
            maxBF16);
  EXPECT_EQ(roundTo(T, -1e39), -kInf);
  // Subnormals: the quantum is 2^-133.
  EXPECT_EQ(roundTo(T, std::ldexp(1.0, -133)), std::ldexp(1.0, -133));
  EXPECT_EQ(roundTo(T, std::ldexp(1.0, -134)), 0.0); // tie -> 0 (even)
  EXPECT_EQ(roundTo(T, std::ldexp(3.0, -134)), std::ldexp(2.0, -133));
  EXPECT_TRUE(std::isnan(roundTo(T, std::nan(""))));
  EXPECT_EQ(roundTo(T, kInf), kInf);
  EXPECT_TRUE(std::signbit(roundTo(T, -0.0)));
  EXPECT_TRUE(std::signbit(roundTo(T, -std::ldexp(1.0, -140))));
}

TEST(RoundTo, Half) {
  const ElementType T = ElementType::F16;
  EXPECT_EQ(roundTo(T, 1.0 + std::ldexp(1.0, -11)), 1.0);
  EXPECT_EQ(roundTo(T, 1.0 + 3 * std::ldexp(1.0, -11)),
            1.0 + std::ldexp(1.0, -9));
  EXPECT_EQ(roundTo(T, 65504.0), 65504.0);
  EXPECT_EQ(roundTo(T, 65519.99), 65504.0);
  EXPECT_EQ(roundTo(T, 65520.0), kInf); // tie with 2^16: even -> overflow
  EXPECT_EQ(roundTo(T, -65520.0), -kInf);
  // Subnormals: the quantum is 2^-24.
  EXPECT_EQ(roundTo(T, std::ldexp(1.0, -25)), 0.0);
  EXPECT_EQ(roundTo(T, std::ldexp(3.0, -26)), std::ldexp(1.0, -24));
  EXPECT_EQ(roundTo(T, std::ldexp(5.0, -25)), std::ldexp(2.0, -24));
  EXPECT_EQ(roundTo(T, std::ldexp(1023.0, -24)), std::ldexp(1023.0, -24));
  EXPECT_EQ(roundTo(T, std::ldexp(2047.0, -25)), std::ldexp(1.0, -14));
  EXPECT_TRUE(std::isnan(roundTo(T, -std::nan(""))));
}

TEST(RoundTo, F32IsTheNearestFloat) {
  EXPECT_EQ(roundTo(ElementType::F32, 0.1), double(0.1f));
  EXPECT_EQ(roundTo(ElementType::F32, 1.0 + std::ldexp(1.0, -24)), 1.0);
}

TEST(RoundTo, NamesAndTolerance) {
  for (const char *name : {"f32", "bf16", "f16"}) {
    ElementType t;
    ASSERT_TRUE(parseElementType(name, t));
    EXPECT_STREQ(elementTypeName(t), name);
  }
  ElementType t;
  EXPECT_FALSE(parseElementType("f64", t));
  EXPECT_EQ(tolerance(ElementType::BF16).rtol, std::ldexp(1.0, -6));
  EXPECT_EQ(tolerance(ElementType::BF16).atolScale, std::ldexp(1.0, -7));
  EXPECT_EQ(tolerance(ElementType::F16).rtol, std::ldexp(1.0, -9));
  EXPECT_EQ(tolerance(ElementType::F16).atolScale, std::ldexp(1.0, -10));
}

//===----------------------------------------------------------------------===//
// The rounding points of a layer, by hand
//===----------------------------------------------------------------------===//

// One expert, D = 2, H = 1, relu, top_k k = 1 (weight 1), x = [1, 1]:
//   u = x W1 = 1 + eps (W1 = [[1], [eps]]); h = relu(u);
//   y = h W2 with W2 = [[1 + 2 eps, 1]].
// With eps = half an ulp of T at 1 (2^-8 bf16, 2^-11 f16), h = 1 + eps is a
// tie and rounds to 1 (even), so y = [1 + 2 eps, 1] exactly. Without the
// rounding of h, y0 = (1 + eps)(1 + 2 eps) = 1 + 3 eps + 2 eps^2 would round
// to 1 + 4 eps.
LayerInputs handLayer(ElementType type, double eps) {
  LayerInputs in;
  in.numTokens = 1;
  in.x = {1.0f, 1.0f};
  in.wr = {0.5f, 0.25f};
  Experts &ex = in.experts;
  ex.numExperts = 1;
  ex.modelDim = 2;
  ex.hiddenDim = 1;
  ex.activation = Activation::Relu;
  ex.elementType = type;
  ex.w1 = {1.0f, float(eps)};
  ex.w2 = {float(1 + 2 * eps), 1.0f};
  return in;
}

TEST(ElementTypeLayer, HIsRoundedToT) {
  LayerOptions opt;
  opt.routing = Routing::topK(1);
  for (auto [type, eps] : {std::pair{ElementType::BF16, std::ldexp(1.0, -8)},
                           std::pair{ElementType::F16, std::ldexp(1.0, -11)}}) {
    LayerResult res = moeLayer(handLayer(type, eps), opt);
    ASSERT_EQ(res.y.size(), 2u);
    EXPECT_EQ(double(res.y[0]), 1 + 2 * eps) << elementTypeName(type);
    EXPECT_EQ(double(res.y[1]), 1.0) << elementTypeName(type);
  }
  // f32 keeps h in double: y0 = float((1 + eps)(1 + 2 eps)), exact here.
  const double eps = std::ldexp(1.0, -8);
  LayerResult res = moeLayer(handLayer(ElementType::F32, eps), opt);
  EXPECT_EQ(double(res.y[0]), (1 + eps) * (1 + 2 * eps));
  EXPECT_EQ(double(res.y[1]), 1 + eps);
}

// y is rounded once, after the weighted sum: two experts (dense routing with
// Wr = 0, so both weights are exactly 1/2), f_0 = 1 + 2 eps and
// f_1 = 1 + 4 eps (eps = 2^-8, bf16). The exact mean 1 + 3 eps lies halfway
// between two values of bf16 and rounds to the even one, 1 + 4 eps; in f32
// it is kept.
TEST(ElementTypeLayer, YIsRoundedOnceAfterTheSum) {
  const double eps = std::ldexp(1.0, -8);
  LayerInputs in;
  in.numTokens = 1;
  in.x = {1.0f};
  in.wr = {0.0f, 0.0f};
  Experts &ex = in.experts;
  ex.numExperts = 2;
  ex.modelDim = 1;
  ex.hiddenDim = 1;
  ex.activation = Activation::Relu;
  ex.elementType = ElementType::BF16;
  ex.w1 = {1.0f, 1.0f};
  ex.w2 = {float(1 + 2 * eps), float(1 + 4 * eps)};
  LayerOptions opt; // dense
  LayerResult res = moeLayer(in, opt);
  ASSERT_EQ(res.weights[0].size(), 2u);
  EXPECT_EQ(res.weights[0][0], 0.5);
  EXPECT_EQ(double(res.y[0]), 1 + 4 * eps);
  in.experts.elementType = ElementType::F32;
  EXPECT_EQ(double(moeLayer(in, opt).y[0]), 1 + 3 * eps);
}

// The reference rounds inputs that are not values of T.
TEST(ElementTypeLayer, InputsAreRoundedToT) {
  const double eps = std::ldexp(1.0, -8);
  LayerInputs in = handLayer(ElementType::BF16, eps);
  LayerInputs off = in;
  off.x = {float(1 + eps / 4), 1.0f}; // rounds to 1 in bf16
  LayerOptions opt;
  opt.routing = Routing::topK(1);
  EXPECT_EQ(moeLayer(off, opt).y, moeLayer(in, opt).y);
}

TEST(ElementTypeLayer, RandomDataAndOutputsAreValuesOfT) {
  for (ElementType type : {ElementType::BF16, ElementType::F16}) {
    LayerInputs in = randomLayerInputs(5, 8, 4, 16, Activation::SwiGLU,
                                       /*withRouterBias=*/true,
                                       /*withExpertBiases=*/true, 11, type);
    EXPECT_EQ(in.experts.elementType, type);
    auto representable = [&](const std::vector<float> &v) {
      for (float f : v)
        if (roundTo(type, f) != double(f))
          return false;
      return true;
    };
    EXPECT_TRUE(representable(in.x));
    EXPECT_TRUE(representable(in.wr));
    EXPECT_TRUE(representable(in.br));
    EXPECT_TRUE(representable(in.experts.w1));
    EXPECT_TRUE(representable(in.experts.b2));
    LayerOptions opt;
    opt.routing = Routing::topK(2);
    LayerResult res = moeLayer(in, opt);
    EXPECT_TRUE(representable(res.y));
    // Close to the f32 layer on the same (rounded) data: within the
    // documented tolerance.
    LayerInputs f32 = in;
    f32.experts.elementType = ElementType::F32;
    LayerResult exact = moeLayer(f32, opt);
    Tolerance tol = tolerance(type);
    double maxY = 0;
    for (float v : exact.y)
      maxY = std::max(maxY, std::fabs(double(v)));
    // The f32 layer skips h's rounding too, so allow a few more ulps.
    EXPECT_EQ(firstMismatch(res.y, exact.y, 4 * tol.rtol,
                            4 * tol.atolScale * maxY),
              -1)
        << elementTypeName(type);
  }
  // The f32 default is unchanged by the new parameter.
  LayerInputs a = randomLayerInputs(3, 4, 2, 8, Activation::Gelu, false, false, 5);
  LayerInputs b = randomLayerInputs(3, 4, 2, 8, Activation::Gelu, false, false,
                                    5, ElementType::F32);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.experts.w1, b.experts.w1);
}

// Soft MoE: slots are rounded to T before the experts. One group of two
// tokens, one expert with one slot, D = 1, H = 1, relu, W1 = W2 = 1,
// Phi = 0: the dispatch weights are 1/2 each, so the slot is the mean of
// x = [1, 1 + 2 eps] (eps = 2^-8): 1 + eps, a tie that rounds to 1 in bf16.
// The combine weight is 1 and W2 = 1 + 2 eps, so y = 1 + 2 eps with the slot
// rounded (without it, (1 + eps)(1 + 2 eps) would round to 1 + 4 eps).
TEST(ElementTypeSoftLayer, SlotsAreRoundedToT) {
  const double eps = std::ldexp(1.0, -8);
  SoftLayerInputs in;
  in.numGroups = 1;
  in.groupSize = 2;
  in.slotsPerExpert = 1;
  in.x = {1.0f, float(1 + 2 * eps)};
  in.phi = {0.0f};
  Experts &ex = in.experts;
  ex.numExperts = 1;
  ex.modelDim = 1;
  ex.hiddenDim = 1;
  ex.activation = Activation::Relu;
  ex.w1 = {1.0f};
  ex.w2 = {float(1 + 2 * eps)};
  ex.elementType = ElementType::BF16;
  SoftLayerResult res = softMoELayer(in);
  EXPECT_EQ(res.slots[0], 1.0);
  EXPECT_EQ(double(res.y[0]), 1 + 2 * eps);
  EXPECT_EQ(double(res.y[1]), 1 + 2 * eps);
  ex.elementType = ElementType::F32;
  SoftLayerResult exact = softMoELayer(in);
  EXPECT_EQ(exact.slots[0], 1 + eps);
  EXPECT_EQ(double(exact.y[0]), (1 + eps) * (1 + 2 * eps));
}

} // namespace
