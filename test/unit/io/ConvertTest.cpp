//===- ConvertTest.cpp - f32 / f16 / bf16 conversion tests ----------------===//

#include "TestUtil.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace moe::io;
using namespace moe::io::testing;

namespace {

float fromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

bool isHalfNaN(uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF); }
bool isBF16NaN(uint16_t h) { return (h & 0x7F80) == 0x7F80 && (h & 0x7F); }

//===----------------------------------------------------------------------===//
// float -> half
//===----------------------------------------------------------------------===//

TEST(HalfConversion, ExactValues) {
  EXPECT_EQ(floatToHalfBits(0.0f), 0x0000);
  EXPECT_EQ(floatToHalfBits(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalfBits(1.0f), 0x3C00);
  EXPECT_EQ(floatToHalfBits(-2.0f), 0xC000);
  EXPECT_EQ(floatToHalfBits(0.5f), 0x3800);
  EXPECT_EQ(floatToHalfBits(65504.0f), 0x7BFF); // largest finite
  EXPECT_EQ(floatToHalfBits(-65504.0f), 0xFBFF);
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -14)), 0x0400); // smallest normal
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -24)),
            0x0001); // smallest subnormal
  EXPECT_EQ(floatToHalfBits(-std::ldexp(1.0f, -24)), 0x8001);
  EXPECT_EQ(floatToHalfBits(std::ldexp(1023.0f, -24)),
            0x03FF); // largest subnormal
  EXPECT_EQ(floatToHalfBits(0.333251953125f), 0x3555);
}

TEST(HalfConversion, InfinityAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(floatToHalfBits(inf), 0x7C00);
  EXPECT_EQ(floatToHalfBits(-inf), 0xFC00);
  EXPECT_TRUE(isHalfNaN(floatToHalfBits(std::nanf(""))));
  uint16_t negNaN = floatToHalfBits(-std::nanf(""));
  EXPECT_TRUE(isHalfNaN(negNaN));
  EXPECT_TRUE(negNaN & 0x8000);
  // A signalling NaN whose payload would be truncated away stays a NaN.
  EXPECT_TRUE(isHalfNaN(floatToHalfBits(fromBits(0x7F800001))));
  // Overflow.
  EXPECT_EQ(floatToHalfBits(1e6f), 0x7C00);
  EXPECT_EQ(floatToHalfBits(-1e6f), 0xFC00);
  EXPECT_EQ(floatToHalfBits(std::numeric_limits<float>::max()), 0x7C00);
}

TEST(HalfConversion, RoundsToNearestEven) {
  // Halfway between 1 and the next half (1 + 2^-10): ties go to even (1).
  EXPECT_EQ(floatToHalfBits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  // Halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even): up.
  EXPECT_EQ(floatToHalfBits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // Just above / below the tie.
  EXPECT_EQ(
      floatToHalfBits(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)),
      0x3C01);
  EXPECT_EQ(
      floatToHalfBits(1.0f + std::ldexp(1.0f, -11) - std::ldexp(1.0f, -20)),
      0x3C00);
  // 65520 is halfway between 65504 (odd mantissa) and 65536 (= overflow).
  EXPECT_EQ(floatToHalfBits(65520.0f), 0x7C00);
  EXPECT_EQ(floatToHalfBits(65519.996f), 0x7BFF);
  // Subnormal ties: 2^-25 is halfway between 0 and 2^-24 -> 0.
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(floatToHalfBits(-std::ldexp(1.0f, -25)), 0x8000);
  // In units of the quantum 2^-24:
  EXPECT_EQ(floatToHalfBits(std::ldexp(3.0f, -26)), 0x0001); // 0.75 -> 1
  EXPECT_EQ(floatToHalfBits(std::ldexp(3.0f, -25)), 0x0002); // 1.5 -> 2
  EXPECT_EQ(floatToHalfBits(std::ldexp(5.0f, -25)), 0x0002); // 2.5 -> 2
  EXPECT_EQ(floatToHalfBits(std::ldexp(7.0f, -25)), 0x0004); // 3.5 -> 4
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -26)), 0x0000); // 0.25 -> 0
  EXPECT_EQ(floatToHalfBits(fromBits(0x00000001)), 0x0000);  // f32 subnormal
  // 1023.5 quanta: tie between 0x03FF (odd) and 0x0400 (the smallest normal).
  EXPECT_EQ(floatToHalfBits(std::ldexp(2047.0f, -25)), 0x0400);
}

TEST(HalfConversion, HalfToFloatIsExact) {
  EXPECT_EQ(halfBitsToFloat(0x3C00), 1.0f);
  EXPECT_EQ(halfBitsToFloat(0xC000), -2.0f);
  EXPECT_EQ(halfBitsToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(halfBitsToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(halfBitsToFloat(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(halfBitsToFloat(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(halfBitsToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(bitsOf(halfBitsToFloat(0x8000)), 0x80000000u);
  EXPECT_EQ(halfBitsToFloat(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(halfBitsToFloat(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(halfBitsToFloat(0x7E00)));
  EXPECT_TRUE(std::isnan(halfBitsToFloat(0x7C01)));
  // Every non-NaN half survives half -> float -> half, and the float is the
  // exact value m * 2^e.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    uint16_t bits = static_cast<uint16_t>(h);
    if (isHalfNaN(bits))
      continue;
    float f = halfBitsToFloat(bits);
    EXPECT_EQ(floatToHalfBits(f), bits) << std::hex << h;
    unsigned exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    if (exp != 0x1F) {
      float expected = exp == 0 ? std::ldexp(static_cast<float>(mant), -24)
                                : std::ldexp(static_cast<float>(mant | 0x400),
                                             static_cast<int>(exp) - 25);
      if (h & 0x8000)
        expected = -expected;
      EXPECT_EQ(bitsOf(f), bitsOf(expected)) << std::hex << h;
    }
  }
}

#if defined(__FLT16_MAX__)
// Cross-check against the compiler's _Float16 (hardware rounding, which is
// round-to-nearest-even by default).
TEST(HalfConversion, AgreesWithCompilerFloat16) {
  std::mt19937 rng(42);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t bits = rng();
    // Bias half of the samples towards the f16 range.
    if (i & 1)
      bits = (bits & 0x807FFFFF) | ((100 + (rng() % 60)) << 23);
    float f = fromBits(bits);
    _Float16 h = static_cast<_Float16>(f);
    uint16_t expected;
    std::memcpy(&expected, &h, 2);
    uint16_t got = floatToHalfBits(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(isHalfNaN(got));
      continue;
    }
    ASSERT_EQ(got, expected) << std::hex << bits;
  }
  for (uint32_t v = 0; v < 0x10000; ++v) {
    uint16_t bits = static_cast<uint16_t>(v);
    if (isHalfNaN(bits))
      continue;
    _Float16 h;
    std::memcpy(&h, &bits, 2);
    ASSERT_EQ(bitsOf(halfBitsToFloat(bits)), bitsOf(static_cast<float>(h)));
  }
}
#endif

//===----------------------------------------------------------------------===//
// float <-> bfloat16
//===----------------------------------------------------------------------===//

TEST(BFloat16Conversion, ExactValues) {
  EXPECT_EQ(floatToBFloat16Bits(1.0f), 0x3F80);
  EXPECT_EQ(floatToBFloat16Bits(-2.0f), 0xC000);
  EXPECT_EQ(floatToBFloat16Bits(0.0f), 0x0000);
  EXPECT_EQ(floatToBFloat16Bits(-0.0f), 0x8000);
  EXPECT_EQ(floatToBFloat16Bits(fromBits(0x7F7F0000)), 0x7F7F); // max bf16
  EXPECT_EQ(floatToBFloat16Bits(fromBits(0x00010000)), 0x0001); // min subnormal
  EXPECT_EQ(floatToBFloat16Bits(fromBits(0x00800000)), 0x0080); // min normal
  EXPECT_EQ(bfloat16BitsToFloat(0x3F80), 1.0f);
  EXPECT_EQ(bfloat16BitsToFloat(0xC000), -2.0f);
  EXPECT_EQ(bitsOf(bfloat16BitsToFloat(0x0001)), 0x00010000u);
}

TEST(BFloat16Conversion, RoundsToNearestEven) {
  EXPECT_EQ(floatToBFloat16Bits(fromBits(0x3F808000)), 0x3F80); // tie, even
  EXPECT_EQ(floatToBFloat16Bits(fromBits(0x3F818000)), 0x3F82); // tie, up
  EXPECT_EQ(floatToBFloat16Bits(fromBits(0x3F808001)), 0x3F81); // above
  EXPECT_EQ(floatToBFloat16Bits(fromBits(0x3F807FFF)), 0x3F80); // below
  EXPECT_EQ(floatToBFloat16Bits(fromBits(0xBF818000)), 0xBF82);
  // Rounding carries into the exponent.
  EXPECT_EQ(floatToBFloat16Bits(fromBits(0x3FFFC000)), 0x4000);
  // Overflow: above max bf16 by half an ulp or more -> inf.
  EXPECT_EQ(floatToBFloat16Bits(fromBits(0x7F7F7FFF)), 0x7F7F);
  EXPECT_EQ(floatToBFloat16Bits(fromBits(0x7F7F8000)), 0x7F80);
  EXPECT_EQ(floatToBFloat16Bits(std::numeric_limits<float>::max()), 0x7F80);
  // f32 subnormals below half of bf16's smallest subnormal -> 0.
  EXPECT_EQ(floatToBFloat16Bits(fromBits(0x00000001)), 0x0000);
  EXPECT_EQ(floatToBFloat16Bits(fromBits(0x00008000)), 0x0000); // tie -> 0
  EXPECT_EQ(floatToBFloat16Bits(fromBits(0x00008001)), 0x0001);
  EXPECT_EQ(floatToBFloat16Bits(fromBits(0x00018000)), 0x0002); // tie -> even
}

TEST(BFloat16Conversion, InfinityAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(floatToBFloat16Bits(inf), 0x7F80);
  EXPECT_EQ(floatToBFloat16Bits(-inf), 0xFF80);
  EXPECT_TRUE(isBF16NaN(floatToBFloat16Bits(std::nanf(""))));
  // A NaN whose payload lies only in the low 16 bits must not become inf.
  EXPECT_TRUE(isBF16NaN(floatToBFloat16Bits(fromBits(0x7F800001))));
  EXPECT_TRUE(isBF16NaN(floatToBFloat16Bits(fromBits(0xFFFFFFFF))));
  EXPECT_EQ(bfloat16BitsToFloat(0x7F80), inf);
  EXPECT_EQ(bfloat16BitsToFloat(0xFF80), -inf);
  EXPECT_TRUE(std::isnan(bfloat16BitsToFloat(0x7FC0)));
  EXPECT_TRUE(std::isnan(bfloat16BitsToFloat(0x7F81)));
}

TEST(BFloat16Conversion, WideningIsExact) {
  for (uint32_t v = 0; v < 0x10000; ++v) {
    uint16_t bits = static_cast<uint16_t>(v);
    if (isBF16NaN(bits))
      continue;
    float f = bfloat16BitsToFloat(bits);
    ASSERT_EQ(bitsOf(f), v << 16) << std::hex << v;
    ASSERT_EQ(floatToBFloat16Bits(f), bits) << std::hex << v;
  }
}

TEST(BFloat16Conversion, MatchesReferenceRounding) {
  // The usual bit trick (valid for non-NaN input) as a reference.
  auto reference = [](uint32_t bits) {
    uint32_t lsb = (bits >> 16) & 1;
    return static_cast<uint16_t>((bits + 0x7FFF + lsb) >> 16);
  };
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t bits = rng();
    float f = fromBits(bits);
    if (std::isnan(f))
      continue;
    ASSERT_EQ(floatToBFloat16Bits(f), reference(bits)) << std::hex << bits;
  }
}

//===----------------------------------------------------------------------===//
// Tensor conversion
//===----------------------------------------------------------------------===//

TEST(ConvertTensor, HalfToFloat) {
  Tensor t = Tensor::fromValues<uint16_t>(DType::F16, {2, 2},
                                          {0x3C00, 0xC000, 0x7BFF, 0x0001});
  Result<Tensor> f = convertTensor(t, DType::F32);
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->dtype, DType::F32);
  EXPECT_EQ(f->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(f->toVector<float>(),
            (std::vector<float>{1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24)}));
}

TEST(ConvertTensor, FloatToHalfAndBF16) {
  Tensor t = Tensor::fromValues<float>(
      DType::F32, {4}, {1.0f, 65520.0f, 1.0f + std::ldexp(1.0f, -11), -0.0f});
  Result<Tensor> h = convertTensor(t, DType::F16);
  ASSERT_TRUE(h.ok()) << h.error();
  EXPECT_EQ(h->toVector<uint16_t>(),
            (std::vector<uint16_t>{0x3C00, 0x7C00, 0x3C00, 0x8000}));
  Result<Tensor> b = convertTensor(t, DType::BF16);
  ASSERT_TRUE(b.ok()) << b.error();
  EXPECT_EQ(b->toVector<uint16_t>(),
            (std::vector<uint16_t>{0x3F80, 0x4780, 0x3F80, 0x8000}));
}

// What moe-run does to an f32 .npy bound to a bf16/f16 argument: one
// round-to-nearest-even step per element.
TEST(ConvertTensor, F32ToHalfTypesRoundsToNearestEven) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Tensor t = Tensor::fromValues<float>(
      DType::F32, {10},
      {1.0f + std::ldexp(1.0f, -11),     // f16 tie -> 1 (even)
       1.0f + 3 * std::ldexp(1.0f, -11), // f16 tie -> 1 + 2^-9 (even)
       65519.0f,                         // f16 -> 65504
       65520.0f,                         // f16 tie with 2^16 -> inf
       -1e6f,                            // f16 overflow -> -inf
       std::ldexp(1.0f, -25),            // f16 subnormal tie -> 0
       std::ldexp(3.0f, -26),            // f16: 0.75 quanta -> 2^-24
       std::ldexp(1023.0f, -24),         // f16: largest subnormal, exact
       nan, -inf});
  Result<Tensor> h = convertTensor(t, DType::F16);
  ASSERT_TRUE(h.ok()) << h.error();
  std::vector<uint16_t> hv = h->toVector<uint16_t>();
  EXPECT_EQ(hv[0], 0x3C00);
  EXPECT_EQ(hv[1], 0x3C02);
  EXPECT_EQ(hv[2], 0x7BFF);
  EXPECT_EQ(hv[3], 0x7C00);
  EXPECT_EQ(hv[4], 0xFC00);
  EXPECT_EQ(hv[5], 0x0000);
  EXPECT_EQ(hv[6], 0x0001);
  EXPECT_EQ(hv[7], 0x03FF);
  EXPECT_TRUE(isHalfNaN(hv[8]));
  EXPECT_EQ(hv[9], 0xFC00);

  Tensor b = Tensor::fromValues<float>(
      DType::F32, {8},
      {fromBits(0x3F808000),  // tie -> 0x3F80 (even)
       fromBits(0x3F818000),  // tie -> 0x3F82 (even)
       fromBits(0x3F808001),  // above the tie -> up
       fromBits(0x7F7F8000),  // above the largest bf16 by half an ulp -> inf
       fromBits(0x00008000),  // subnormal tie -> 0
       fromBits(0x00018000),  // subnormal tie -> 0x0002 (even)
       nan, inf});
  Result<Tensor> bf = convertTensor(b, DType::BF16);
  ASSERT_TRUE(bf.ok()) << bf.error();
  std::vector<uint16_t> bv = bf->toVector<uint16_t>();
  EXPECT_EQ(bv[0], 0x3F80);
  EXPECT_EQ(bv[1], 0x3F82);
  EXPECT_EQ(bv[2], 0x3F81);
  EXPECT_EQ(bv[3], 0x7F80);
  EXPECT_EQ(bv[4], 0x0000);
  EXPECT_EQ(bv[5], 0x0002);
  EXPECT_TRUE(isBF16NaN(bv[6]));
  EXPECT_EQ(bv[7], 0x7F80);
  // And back to f32 exactly (what --output writes for bf16 results).
  Result<Tensor> back = convertTensor(*bf, DType::F32);
  ASSERT_TRUE(back.ok());
  std::vector<float> fv = back->toVector<float>();
  EXPECT_EQ(bitsOf(fv[0]), 0x3F800000u);
  EXPECT_EQ(bitsOf(fv[5]), 0x00020000u);
  EXPECT_TRUE(std::isnan(fv[6]));
}

TEST(ConvertTensor, BetweenHalfTypes) {
  // bf16 -> f16 and back, through the exact value (a single rounding).
  Tensor b =
      Tensor::fromValues<uint16_t>(DType::BF16, {3}, {0x3F80, 0x4780, 0x3EAB});
  Result<Tensor> h = convertTensor(b, DType::F16);
  ASSERT_TRUE(h.ok());
  // 1.0; 65536 overflows f16; 0x3EAB = 0.333984375 -> f16 0x3558 exactly.
  EXPECT_EQ(h->toVector<uint16_t>(),
            (std::vector<uint16_t>{0x3C00, 0x7C00, 0x3558}));
}

TEST(ConvertTensor, IntegersRoundOnce) {
  Tensor i32 = Tensor::fromValues<int32_t>(DType::I32, {4},
                                           {16777217, -3, 0, INT32_MIN});
  Result<Tensor> f = convertTensor(i32, DType::F32);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->toVector<float>(),
            (std::vector<float>{16777216.0f, -3.0f, 0.0f, -2147483648.0f}));
  // 2^40 + 2^32 + 1: direct rounding to bf16 goes up (0x5381); rounding via
  // f32 first would land on the tie 2^40 + 2^32 and then go to even (0x5380).
  const int64_t v = (int64_t(1) << 40) + (int64_t(1) << 32) + 1;
  Tensor i64 = Tensor::fromValues<int64_t>(DType::I64, {3}, {v, INT64_MIN, 7});
  Result<Tensor> b = convertTensor(i64, DType::BF16);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->toVector<uint16_t>(),
            (std::vector<uint16_t>{0x5381, 0xDF00, 0x40E0}));
  Result<Tensor> h = convertTensor(i64, DType::F16);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->toVector<uint16_t>(),
            (std::vector<uint16_t>{0x7C00, 0xFC00, 0x4700}));
}

TEST(ConvertTensor, SameTypeCopiesAndZeroD) {
  Tensor t = Tensor::fromValues<float>(DType::F32, {}, {2.5f});
  Result<Tensor> same = convertTensor(t, DType::F32);
  ASSERT_TRUE(same.ok());
  expectSameTensor(*same, t);
  Result<Tensor> h = convertTensor(t, DType::F16);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->shape.empty());
  EXPECT_EQ(h->toVector<uint16_t>(), (std::vector<uint16_t>{0x4100}));
  Tensor empty(DType::F16, {0, 3}, {});
  Result<Tensor> e = convertTensor(empty, DType::F32);
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->data.empty());
  EXPECT_EQ(e->shape, (std::vector<int64_t>{0, 3}));
}

TEST(ConvertTensor, Errors) {
  Tensor t = Tensor::fromValues<float>(DType::F32, {1}, {1.0f});
  Result<Tensor> r = convertTensor(t, DType::I32);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("cannot convert to i32"), std::string::npos);
  Tensor bad(DType::F32, {3}, std::vector<uint8_t>(5));
  EXPECT_FALSE(convertTensor(bad, DType::F16).ok());
}

} // namespace
