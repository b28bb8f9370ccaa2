//===- QuantTest.cpp - the reference's FP8 dequantization ----------------===//
//
// fp8E4M3Value against values worked out by hand from the OCP E4M3 table,
// and quantizeFp8Block's and quantizeInt4Group's exact properties, and
// quantizeActivationsInt8 against hand-worked groups (docs/spec.md §2.1).
//
//===----------------------------------------------------------------------===//

#include "test/reference/MoEReference.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace moe::ref;

namespace {

TEST(Fp8E4M3Value, HandWorkedCodes) {
  EXPECT_EQ(fp8E4M3Value(0x38), 1.0);          // 0.0111.000: 2^0
  EXPECT_EQ(fp8E4M3Value(0x3C), 1.5);          // 0.0111.100
  EXPECT_EQ(fp8E4M3Value(0x7E), 448.0);        // 0.1111.110: the largest
  EXPECT_EQ(fp8E4M3Value(0xFE), -448.0);
  EXPECT_EQ(fp8E4M3Value(0x08), 1.0 / 64);     // 0.0001.000: smallest normal
  EXPECT_EQ(fp8E4M3Value(0x07), 7.0 / 512);    // 0.0000.111: subnormal
  EXPECT_EQ(fp8E4M3Value(0x01), 1.0 / 512);    // 0.0000.001: smallest
  EXPECT_EQ(fp8E4M3Value(0x81), -1.0 / 512);
  EXPECT_EQ(fp8E4M3Value(0x00), 0.0);
  EXPECT_TRUE(std::signbit(fp8E4M3Value(0x80)));
  EXPECT_EQ(fp8E4M3Value(0x78), 256.0);        // 0.1111.000: 2^8, not inf
  EXPECT_TRUE(std::isnan(fp8E4M3Value(0x7F))); // S.1111.111 only
  EXPECT_TRUE(std::isnan(fp8E4M3Value(0xFF)));
}

// A stand-in encoder for the test: nearest code by search over all 254
// finite codes (ties to the lower code; the property below does not care).
uint8_t nearestCode(float v) {
  uint8_t best = 0;
  for (int c = 0; c < 256; ++c) {
    double x = fp8E4M3Value(uint8_t(c));
    if (std::isnan(x))
      continue;
    if (std::fabs(x - v) < std::fabs(fp8E4M3Value(best) - v))
      best = uint8_t(c);
  }
  return best;
}

TEST(QuantizeFp8Block, ScalesCodesAndPartialBlocks) {
  // E = 2, K = 5, N = 3 in blocks of 2 x 2: 3 x 2 blocks per expert, the
  // last row and column of blocks partial.
  const int64_t E = 2, K = 5, N = 3;
  std::vector<float> w(E * K * N);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = float(std::sin(0.7 * double(i) + 0.3)) * float(1 + i % 4);
  w[7] = 0; // any value: the properties hold for every element
  const std::vector<float> original = w;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  quantizeFp8Block(w, E, K, N, 2, 2, nearestCode, codes, scales);
  ASSERT_EQ(scales.size(), size_t(E * 3 * 2));
  for (int64_t e = 0; e < E; ++e)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) {
        const size_t i = size_t((e * K + k) * N + n);
        const float s = scales[size_t((e * 3 + k / 2) * 2 + n / 2)];
        // The weight is q * s rounded once to f32.
        EXPECT_EQ(w[i], float(fp8E4M3Value(codes[i]) * double(s))) << i;
        // Within half a step of E4M3 (relative 2^-4, or the subnormal
        // step 2^-10 * s) of the original.
        EXPECT_LE(std::fabs(double(w[i]) - original[i]),
                  std::fabs(original[i]) / 16 + s / 1024.0 + 1e-7)
            << i;
      }
  // Each block's largest |w| is encoded as +-448: s = max / 448.
  for (int64_t e = 0; e < E; ++e)
    for (int64_t kb = 0; kb < 3; ++kb)
      for (int64_t nb = 0; nb < 2; ++nb) {
        double amax = 0;
        for (int64_t k = kb * 2; k < std::min<int64_t>(K, kb * 2 + 2); ++k)
          for (int64_t n = nb * 2; n < std::min<int64_t>(N, nb * 2 + 2); ++n)
            amax = std::max(amax, std::fabs(double(original[size_t((e * K + k) * N + n)])));
        EXPECT_EQ(scales[size_t((e * 3 + kb) * 2 + nb)], float(amax / 448.0));
      }
}

TEST(QuantizeFp8Block, ZeroBlockHasScaleOne) {
  std::vector<float> w(4, 0.0f);
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  quantizeFp8Block(w, 1, 2, 2, 2, 2, nearestCode, codes, scales);
  ASSERT_EQ(scales.size(), 1u);
  EXPECT_EQ(scales[0], 1.0f);
  for (float v : w)
    EXPECT_EQ(v, 0.0f);
}

// Symmetric int4, worked by hand: a group of 2 rows of column 0 is {7, -7}
// (s = 7 / 7 = 1, q = 15 and 1), of column 1 {0.5, 0} (s = 0.5 / 7, q =
// round(7) + 8 = 15 and 8); the last group (row 2) is partial.
TEST(QuantizeInt4Group, SymmetricHandWorked) {
  std::vector<float> w = {7, 0.5f, -7, 0, 3, -1};
  std::vector<uint8_t> codes, zeros;
  std::vector<float> scales;
  quantizeInt4Group(w, 1, 3, 2, 2, /*zeroPoint=*/false, codes, scales, zeros);
  EXPECT_TRUE(zeros.empty());
  ASSERT_EQ(scales.size(), 4u);
  EXPECT_EQ(scales[0], 1.0f);
  EXPECT_EQ(scales[1], float(0.5 / 7.0));
  EXPECT_EQ(scales[2], float(3.0 / 7.0));
  EXPECT_EQ(scales[3], float(1.0 / 7.0));
  EXPECT_EQ(codes, (std::vector<uint8_t>{15, 15, 1, 8, 15, 1}));
  EXPECT_EQ(w[0], 7.0f);
  EXPECT_EQ(w[2], -7.0f);
  EXPECT_EQ(w[1], float(7.0 * double(float(0.5 / 7.0))));
  EXPECT_EQ(w[3], 0.0f);
  EXPECT_EQ(w[5], float(-7.0 * double(float(1.0 / 7.0))));
}

// With zero points: codes in 0..15, w replaced by (q - z) * s rounded once,
// within half a step of the original (nothing is clamped: the range
// includes 0 and spans 15 steps), and a group's extremes near 0 and 15.
TEST(QuantizeInt4Group, ZeroPointProperties) {
  const int64_t E = 2, K = 7, N = 3, G = 3;
  std::vector<float> w(E * K * N);
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = float(std::sin(1.3 * double(i) + 0.2)) * float(1 + i % 3) + 0.25f;
  const std::vector<float> original = w;
  std::vector<uint8_t> codes, zeros;
  std::vector<float> scales;
  quantizeInt4Group(w, E, K, N, G, /*zeroPoint=*/true, codes, scales, zeros);
  const int64_t groups = 3; // ceil(7 / 3), the last partial
  ASSERT_EQ(scales.size(), size_t(E * groups * N));
  ASSERT_EQ(zeros.size(), scales.size());
  for (int64_t e = 0; e < E; ++e)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) {
        const size_t i = size_t((e * K + k) * N + n);
        const size_t g = size_t((e * groups + k / G) * N + n);
        ASSERT_LE(codes[i], 15);
        ASSERT_LE(zeros[g], 15);
        const double s = scales[g];
        EXPECT_EQ(w[i], float((double(codes[i]) - double(zeros[g])) * s)) << i;
        EXPECT_LE(std::fabs(double(w[i]) - original[i]), s / 2 + 1e-7) << i;
      }
  // A group of one negative and one positive value uses both ends.
  std::vector<float> two = {-1.5f, 3.0f};
  quantizeInt4Group(two, 1, 2, 1, 2, true, codes, scales, zeros);
  EXPECT_EQ(scales[0], float(4.5 / 15.0));
  EXPECT_EQ(zeros[0], 5);
  EXPECT_EQ(codes, (std::vector<uint8_t>{0, 15}));
}

// The int8-activation mode's quantization: s = max|a| / 127, q = a / s
// rounded half to even. Groups of 5: {127, 0.5, 1.5, 2.5, -3.5} has s = 1
// (ties go to even: 0, 2, 2, -4); {254, 1, 3, 0, -254} has s = 2 (0.5 -> 0,
// 1.5 -> 2: 0 and 4); the partial last group {0, 0} has s = 0: zeros.
TEST(QuantizeActivationsInt8, HandWorkedGroups) {
  std::vector<double> a = {127, 0.5, 1.5, 2.5, -3.5, 254, 1, 3, 0, -254, 0, 0};
  quantizeActivationsInt8(a.data(), int64_t(a.size()), 5);
  const std::vector<double> expected = {127, 0, 2, 2, -4, 254, 0, 4, 0, -254, 0, 0};
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i], expected[i]) << "element " << i;
}

// s is computed in float: 1 / 127 is not exact, and the value q * s is
// the product of the code and that float, exact in double. A NaN makes its
// group NaN and leaves the next group alone.
TEST(QuantizeActivationsInt8, FloatScaleAndNaN) {
  std::vector<double> a = {1.0, -0.25, std::nan(""), 1.0, 2.0, 4.0};
  quantizeActivationsInt8(a.data(), int64_t(a.size()), 2);
  const float s = 1.0f / 127.0f;
  EXPECT_EQ(a[0], 127.0 * double(s));
  EXPECT_EQ(a[1], double(std::nearbyint(-0.25f / s)) * double(s)); // -31.75 -> -32
  EXPECT_EQ(a[1], -32.0 * double(s));
  EXPECT_TRUE(std::isnan(a[2]));
  EXPECT_TRUE(std::isnan(a[3]));
  const float s2 = 4.0f / 127.0f;
  EXPECT_EQ(a[4], double(std::nearbyint(2.0f / s2)) * double(s2));
  EXPECT_EQ(a[5], 127.0 * double(s2));
}

} // namespace
