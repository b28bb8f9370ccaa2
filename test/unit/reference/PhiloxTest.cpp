//===- PhiloxTest.cpp - Philox4x32-10 known answers -----------------------===//

#include "test/reference/Philox.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace moe::ref;

namespace {

// Known-answer vectors of Random123 (kat_vectors, philox4x32 with 10 rounds).
TEST(Philox, KnownAnswerZero) {
  PhiloxCounter out = philox4x32_10({0u, 0u, 0u, 0u}, {0u, 0u});
  EXPECT_EQ(out[0], 0x6627e8d5u);
  EXPECT_EQ(out[1], 0xe169c58du);
  EXPECT_EQ(out[2], 0xbc57ac4cu);
  EXPECT_EQ(out[3], 0x9b00dbd8u);
}

TEST(Philox, KnownAnswerAllOnes) {
  PhiloxCounter out = philox4x32_10(
      {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
      {0xffffffffu, 0xffffffffu});
  EXPECT_EQ(out[0], 0x408f276du);
  EXPECT_EQ(out[1], 0x41c83b0eu);
  EXPECT_EQ(out[2], 0xa20bc7c6u);
  EXPECT_EQ(out[3], 0x6d5451fdu);
}

TEST(Philox, KnownAnswerPi) {
  PhiloxCounter out = philox4x32_10(
      {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
      {0xa4093822u, 0x299f31d0u});
  EXPECT_EQ(out[0], 0xd16cfe09u);
  EXPECT_EQ(out[1], 0x94fdccebu);
  EXPECT_EQ(out[2], 0x5001e420u);
  EXPECT_EQ(out[3], 0x24126ea1u);
}

TEST(Philox, KeyFromSeedIsLowThenHighWord) {
  PhiloxKey k = philoxKeyFromSeed(0x299f31d0a4093822ull);
  EXPECT_EQ(k[0], 0xa4093822u);
  EXPECT_EQ(k[1], 0x299f31d0u);
  // A negative i64 seed reinterpreted as unsigned.
  PhiloxKey m = philoxKeyFromSeed(uint64_t(int64_t(-1)));
  EXPECT_EQ(m[0], 0xffffffffu);
  EXPECT_EQ(m[1], 0xffffffffu);
}

TEST(Philox, UniformFromBits) {
  EXPECT_EQ(uniformFromBits(0u), 0.0f);
  EXPECT_EQ(uniformFromBits(0xffu), 0.0f); // the low 8 bits are dropped
  EXPECT_EQ(uniformFromBits(0x100u), 0x1.0p-24f);
  EXPECT_EQ(uniformFromBits(0x80000000u), 0.5f);
  EXPECT_EQ(uniformFromBits(0xffffffffu), 1.0f - 0x1.0p-24f);
  EXPECT_LT(uniformFromBits(0xffffffffu), 1.0f);
  // Exact: (bits >> 8) * 2^-24 computed in double equals the float.
  for (uint32_t bits : {0x6627e8d5u, 0x408f276du, 0xd16cfe09u, 0x12345678u})
    EXPECT_EQ(double(uniformFromBits(bits)),
              double(bits >> 8) * std::ldexp(1.0, -24));
}

TEST(Philox, UniformUsesCounterTokenDrawAndOut0) {
  // u for token t, draw r = out[0] of counter (t, r, 0, 0), key (lo, hi).
  const uint64_t seed = 0x299f31d0a4093822ull;
  for (uint32_t t : {0u, 1u, 7u, 1000u})
    for (uint32_t r : {0u, 1u, 2u}) {
      PhiloxCounter out =
          philox4x32_10({t, r, 0u, 0u}, {0xa4093822u, 0x299f31d0u});
      EXPECT_EQ(philoxUniform(seed, t, r), uniformFromBits(out[0]));
    }
  // Counter 0, key 0 -> out[0] = 0x6627e8d5.
  EXPECT_EQ(philoxUniform(0, 0, 0), float(0x6627e8u) * 0x1.0p-24f);
}

TEST(Philox, UniformsLookUniform) {
  // Mean and variance of 100k uniforms (fixed seed, deterministic).
  const int n = 100000;
  double s = 0, s2 = 0;
  for (int t = 0; t < n; ++t) {
    double u = philoxUniform(42, uint32_t(t), 0);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    s += u;
    s2 += u * u;
  }
  const double mean = s / n, var = s2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 0.005);
  EXPECT_NEAR(var, 1.0 / 12.0, 0.002);
}

} // namespace
