//===- QuantizedTest.cpp - quantized checkpoint formats -------------------===//
//
// runtime/io/Quantized.h against values worked out by hand from the formats'
// definitions (the OCP 8-bit float specification's E4M3 table; the packing
// of AutoGPTQ, AutoAWQ and compressed-tensors): known codes, the packing
// orders (a wrong nibble order or orientation reads another element), the
// partial last block or group, and the errors.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "runtime/io/Checkpoint.h"
#include "runtime/io/Quantized.h"

#include <cmath>
#include <cstring>
#include <map>

using namespace moe::io;

namespace {

/// W[k][n] of a dequantized [K, N] F32 tensor.
float at(const Tensor &w, int64_t k, int64_t n) {
  float v;
  std::memcpy(&v, w.data.data() + 4 * (k * w.shape[1] + n), 4);
  return v;
}

Tensor f32(std::vector<int64_t> shape, const std::vector<float> &values) {
  return Tensor::fromValues(DType::F32, std::move(shape), values);
}

Tensor i32(std::vector<int64_t> shape, const std::vector<uint32_t> &words) {
  return Tensor::fromValues(DType::I32, std::move(shape), words);
}

Tensor fp8(std::vector<int64_t> shape, const std::vector<uint8_t> &codes) {
  return Tensor(DType::F8E4M3, std::move(shape), codes);
}

//===----------------------------------------------------------------------===//
// E4M3
//===----------------------------------------------------------------------===//

TEST(Fp8E4M3, KnownCodes) {
  EXPECT_EQ(fp8E4M3ToFloat(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(fp8E4M3ToFloat(0x80)));
  EXPECT_EQ(fp8E4M3ToFloat(0x01), std::ldexp(1.0f, -9));   // min subnormal
  EXPECT_EQ(fp8E4M3ToFloat(0x07), 0.875f * std::ldexp(1.0f, -6)); // max subnormal
  EXPECT_EQ(fp8E4M3ToFloat(0x08), std::ldexp(1.0f, -6));   // min normal
  EXPECT_EQ(fp8E4M3ToFloat(0x38), 1.0f);
  EXPECT_EQ(fp8E4M3ToFloat(0x3C), 1.5f);
  EXPECT_EQ(fp8E4M3ToFloat(0x40), 2.0f);
  EXPECT_EQ(fp8E4M3ToFloat(0x7E), 448.0f);                 // max normal
  EXPECT_EQ(fp8E4M3ToFloat(0xFE), -448.0f);
  EXPECT_EQ(fp8E4M3ToFloat(0x78), 256.0f);                 // S.1111.000: finite
  EXPECT_TRUE(std::isnan(fp8E4M3ToFloat(0x7F)));
  EXPECT_TRUE(std::isnan(fp8E4M3ToFloat(0xFF)));
  EXPECT_TRUE(std::signbit(fp8E4M3ToFloat(0xFF)));
}

TEST(Fp8E4M3, EncodeRoundTripsEveryCode) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F)
      continue;
    EXPECT_EQ(floatToFp8E4M3(fp8E4M3ToFloat(static_cast<uint8_t>(c))), c) << "code " << c;
  }
  EXPECT_EQ(floatToFp8E4M3(std::nanf("")), 0x7F);
}

TEST(Fp8E4M3, EncodeRoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(floatToFp8E4M3(1.0625f), 0x38); // tie between 1 and 1.125: even
  EXPECT_EQ(floatToFp8E4M3(1.1875f), 0x3A); // tie between 1.125 and 1.25: even
  EXPECT_EQ(floatToFp8E4M3(1.07f), 0x39);
  EXPECT_EQ(floatToFp8E4M3(std::ldexp(1.0f, -10)), 0x00); // half the min subnormal
  EXPECT_EQ(floatToFp8E4M3(std::ldexp(3.0f, -10)), 0x02); // 1.5 units: even
  EXPECT_EQ(floatToFp8E4M3(std::ldexp(15.5f, -10)), 0x08); // rounds up to min normal
  EXPECT_EQ(floatToFp8E4M3(15.5f), 0x58);   // 15.5 -> 16 (carry into the next binade)
  EXPECT_EQ(floatToFp8E4M3(460.0f), 0x7E);
  EXPECT_EQ(floatToFp8E4M3(1e9f), 0x7E);
  EXPECT_EQ(floatToFp8E4M3(-INFINITY), 0xFE);
}

TEST(Fp8E4M3, ConvertTensorWidensExactly) {
  Tensor t = fp8({4}, {0x7E, 0x01, 0xBC, 0x7F});
  Result<Tensor> bf = convertTensor(t, DType::BF16);
  ASSERT_TRUE(bf.ok()) << bf.error();
  std::vector<uint16_t> bits = bf->toVector<uint16_t>();
  EXPECT_EQ(bits[0], 0x43E0); // 448
  EXPECT_EQ(bits[1], 0x3B00); // 2^-9
  EXPECT_EQ(bits[2], 0xBFC0); // -1.5
  EXPECT_EQ(bits[3] & 0x7F80, 0x7F80);
  EXPECT_NE(bits[3] & 0x7F, 0);
  Result<Tensor> h = convertTensor(t, DType::F16);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->toVector<uint16_t>()[1], 0x1800); // 2^-9 is a normal f16
}

TEST(Fp8E4M3, SafeTensorsReadsAndWritesF8E4M3) {
  std::map<std::string, Tensor> tensors;
  tensors["w"] = fp8({2, 2}, {0x38, 0x40, 0x7E, 0x81});
  tensors["s"] = f32({1}, {2.0f});
  Result<std::vector<uint8_t>> bytes = encodeSafeTensors(tensors);
  ASSERT_TRUE(bytes.ok()) << bytes.error();
  std::string text(bytes->begin(), bytes->end());
  EXPECT_NE(text.find("\"dtype\":\"F8_E4M3\""), std::string::npos);
  Result<SafeTensorsFile> file = SafeTensorsFile::fromBuffer(*bytes, "mem");
  ASSERT_TRUE(file.ok()) << file.error();
  Result<Tensor> w = file->get("w");
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_EQ(w->dtype, DType::F8E4M3);
  EXPECT_EQ(w->data, (std::vector<uint8_t>{0x38, 0x40, 0x7E, 0x81}));
  EXPECT_EQ(parseDType("F8_E4M3").value_or(DType::F32), DType::F8E4M3);
  EXPECT_EQ(parseDType("f8E4M3FN").value_or(DType::F32), DType::F8E4M3);
}

//===----------------------------------------------------------------------===//
// FP8 block-scaled
//===----------------------------------------------------------------------===//

TEST(Fp8Block, IndexesBlocksOfTheOutInLayout) {
  // weight [N=3, K=5] (out, in), blocks 2 x 2: scale [2, 3], partial last
  // blocks in both directions. Every q is 1.0 except q[1][3] = 1.5.
  std::vector<uint8_t> q(15, 0x38);
  q[1 * 5 + 3] = 0x3C;
  Tensor scale = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Result<Tensor> w = dequantizeFp8Block(fp8({3, 5}, q), scale, 2, 2, "L.w1");
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_EQ(w->shape, (std::vector<int64_t>{5, 3})); // [K, N]
  EXPECT_EQ(at(*w, 0, 0), 1.0f);
  EXPECT_EQ(at(*w, 4, 2), 6.0f); // n = 2 -> block row 1, k = 4 -> block col 2
  EXPECT_EQ(at(*w, 2, 2), 5.0f);
  EXPECT_EQ(at(*w, 3, 0), 2.0f);
  EXPECT_EQ(at(*w, 3, 1), 3.0f); // 1.5 * 2
  EXPECT_EQ(at(*w, 4, 1), 3.0f); // block (0, 2)
}

TEST(Fp8Block, BF16ScalesAndErrorsNameTheTensor) {
  Tensor scale(DType::BF16, {1, 1}, {0x80, 0x3F}); // bf16 1.0 = 0x3F80
  Result<Tensor> w = dequantizeFp8Block(fp8({2, 2}, {0x40, 0x38, 0x7F, 0x00}), scale, 128, 128, "w");
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_EQ(at(*w, 0, 0), 2.0f);
  EXPECT_TRUE(std::isnan(at(*w, 0, 1)));

  Result<Tensor> bad = dequantizeFp8Block(fp8({3, 5}, std::vector<uint8_t>(15)),
                                          f32({2, 2}, {1, 1, 1, 1}), 2, 2, "layers.0.w1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), "layers.0.w1.scale: shape [2, 2], expected [2, 3]");
  Result<Tensor> badType = dequantizeFp8Block(i32({1, 1}, {0}), f32({1, 1}, {1}), 128, 128, "x");
  ASSERT_FALSE(badType.ok());
  EXPECT_EQ(badType.error(), "x.weight: dtype I32, expected F8_E4M3");
  Result<Tensor> badBlock = dequantizeFp8Block(fp8({1, 1}, {0}), f32({1, 1}, {1}), 0, 128, "x");
  ASSERT_FALSE(badBlock.ok());
  EXPECT_EQ(badBlock.error(), "x: block size 0, expected at least 1");
}

//===----------------------------------------------------------------------===//
// GPTQ
//===----------------------------------------------------------------------===//

// K = 16, N = 2, group 8: q(k, n) = (k + 3n) % 16 packed along K; the zero
// of (g, n) is 8 + g + n, stored minus one; scales F16 [2, 2] = 0.5, 0.25 /
// 2, 1.
struct GptqCase {
  Tensor qweight, qzeros, scales;
  GptqCase() {
    std::vector<uint32_t> words(2 * 2, 0);
    for (int k = 0; k < 16; ++k)
      for (int n = 0; n < 2; ++n)
        words[(k / 8) * 2 + n] |= uint32_t((k + 3 * n) % 16) << (4 * (k % 8));
    qweight = i32({2, 2}, words);
    std::vector<uint32_t> zeros(2, 0);
    for (int g = 0; g < 2; ++g)
      for (int n = 0; n < 2; ++n)
        zeros[g] |= uint32_t(8 + g + n - 1) << (4 * n);
    qzeros = i32({2, 1}, zeros);
    scales = Tensor::fromValues(DType::F16, {2, 2},
                                std::vector<uint16_t>{0x3800, 0x3400, 0x4000, 0x3C00});
  }
};

TEST(Gptq, UnpacksAlongKWithZeroPlusOne) {
  GptqCase c;
  Result<Tensor> w = dequantizeGptq(c.qweight, c.qzeros, c.scales, nullptr, 8, "g");
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_EQ(w->shape, (std::vector<int64_t>{16, 2}));
  EXPECT_EQ(at(*w, 0, 0), -4.0f);  // (0 - 8) * 0.5
  EXPECT_EQ(at(*w, 7, 1), 0.25f);  // q = 10, z = 9: 1 * 0.25
  EXPECT_EQ(at(*w, 9, 1), 2.0f);   // q = 12, z = 10: 2 * 1
  EXPECT_EQ(at(*w, 15, 0), 12.0f); // q = 15, z = 9: 6 * 2
}

TEST(Gptq, GIdxPicksTheGroup) {
  GptqCase c;
  std::vector<uint32_t> g(16);
  for (int k = 0; k < 16; ++k)
    g[k] = k < 8 ? 1 : 0; // reversed groups
  Tensor gIdx = i32({16}, g);
  Result<Tensor> w = dequantizeGptq(c.qweight, c.qzeros, c.scales, &gIdx, 8, "g");
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_EQ(at(*w, 0, 0), -18.0f); // group 1: z = 9, s = 2
  g[3] = 2;
  Tensor bad = i32({16}, g);
  Result<Tensor> e = dequantizeGptq(c.qweight, c.qzeros, c.scales, &bad, 8, "layers.1.w2");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error(), "layers.1.w2.g_idx: row 3 is in group 2, outside [0, 2)");
  Result<Tensor> z = dequantizeGptq(c.qweight, i32({1, 1}, {0}), c.scales, nullptr, 8, "x");
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(z.error(), "x.qzeros: shape [1, 1], expected [2, 1]");
}

//===----------------------------------------------------------------------===//
// AWQ
//===----------------------------------------------------------------------===//

TEST(Awq, UnpacksTheInterleavedOrder) {
  // K = 3, N = 8, group 2 (groups 2, the last partial): q(k, n) = n + k,
  // nibble p holding column {0,2,4,6,1,3,5,7}[p]; zeros 1 (group 0) and 2
  // (group 1); scales 1 except scales[0][5] = 0.5 and scales[1][6] = 4.
  static const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  std::vector<uint32_t> words(3, 0), zeros(2, 0);
  for (int k = 0; k < 3; ++k)
    for (int p = 0; p < 8; ++p)
      words[k] |= uint32_t(order[p] + k) << (4 * p);
  for (int g = 0; g < 2; ++g)
    for (int p = 0; p < 8; ++p)
      zeros[g] |= uint32_t(g + 1) << (4 * p);
  std::vector<float> s(16, 1.0f);
  s[5] = 0.5f;
  s[8 + 6] = 4.0f;
  Result<Tensor> w = dequantizeAwq(i32({3, 1}, words), i32({2, 1}, zeros), f32({2, 8}, s), 2, "a");
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_EQ(w->shape, (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(at(*w, 0, 3), 2.0f);  // q = 3, z = 1
  EXPECT_EQ(at(*w, 1, 5), 2.5f);  // q = 6, z = 1, s = 0.5
  EXPECT_EQ(at(*w, 2, 6), 24.0f); // q = 8, z = 2, s = 4
  EXPECT_EQ(at(*w, 2, 1), 1.0f);  // q = 3, z = 2
  Result<Tensor> e = dequantizeAwq(i32({3, 1}, words), i32({2, 1}, zeros),
                                   f32({1, 8}, std::vector<float>(8, 1.0f)), 2, "a");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error(), "a.scales: shape [1, 8], expected [2, 8]");
}

//===----------------------------------------------------------------------===//
// compressed-tensors pack-quantized
//===----------------------------------------------------------------------===//

TEST(PackQuantized, UnpacksAlongKWithOffsetEight) {
  // N = 2, K = 10 (two words per row, the second partial), group 4 (3
  // groups, the last partial): u(n, k) = (k + n) % 16; scale[n][g] =
  // g + 1 + 10 n.
  std::vector<uint32_t> words(2 * 2, 0);
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 10; ++k)
      words[n * 2 + k / 8] |= uint32_t((k + n) % 16) << (4 * (k % 8));
  Tensor scale = f32({2, 3}, {1, 2, 3, 11, 12, 13});
  Result<Tensor> w = dequantizePackQuantized(i32({2, 2}, words), scale, 10, 4, "c");
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_EQ(w->shape, (std::vector<int64_t>{10, 2}));
  EXPECT_EQ(at(*w, 0, 0), -8.0f);  // u = 0
  EXPECT_EQ(at(*w, 9, 1), 26.0f);  // u = 10, scale[1][2] = 13
  EXPECT_EQ(at(*w, 5, 0), -6.0f);  // u = 5, scale[0][1] = 2
  Result<Tensor> e = dequantizePackQuantized(i32({2, 2}, words), scale, 17, 4, "c");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error(), "c.weight_packed: shape [2, 2], expected [2, 3]");
  Result<Tensor> g = dequantizePackQuantized(i32({2, 2}, words), scale, 10, 0, "c");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error(), "c: group size 0, expected at least 1");
}

// Asymmetric: weight_zero_point [ceil(N/8), G] packed along N, plus 8.
// N = 10 (two words of zero points, the second partial), K = 8, group 4.
TEST(PackQuantized, AsymmetricZeroPointsPackAlongN) {
  std::vector<uint32_t> words(10, 0);
  for (int n = 0; n < 10; ++n)
    for (int k = 0; k < 8; ++k)
      words[n] |= uint32_t((k + n) % 16) << (4 * k);
  // z(n, g) = (3 n + g) % 16 in the nibble n % 8 of word [n / 8][g].
  std::vector<uint32_t> zeros(2 * 2, 0);
  for (int n = 0; n < 10; ++n)
    for (int g = 0; g < 2; ++g)
      zeros[(n / 8) * 2 + g] |= uint32_t((3 * n + g) % 16) << (4 * (n % 8));
  Tensor scale = f32({10, 2}, std::vector<float>(20, 0.5f));
  Tensor zp = i32({2, 2}, zeros);
  Result<Tensor> w = dequantizePackQuantized(i32({10, 1}, words), scale, 8, 4, "c", &zp);
  ASSERT_TRUE(w.ok()) << w.error();
  EXPECT_EQ(at(*w, 0, 0), 0.0f);   // u = 0, z = 0
  EXPECT_EQ(at(*w, 5, 1), 1.0f);   // u = 6, z(1, 1) = 4: 0.5 * 2
  EXPECT_EQ(at(*w, 7, 9), -6.0f);  // u = 16 % 16 = 0, z(9, 1) = 28 % 16 = 12: 0.5 * -12
  EXPECT_EQ(at(*w, 2, 8), 1.0f);   // u = 10, z(8, 0) = 24 % 16 = 8: 0.5 * 2
  Tensor bad = i32({1, 2}, {0, 0});
  Result<Tensor> e = dequantizePackQuantized(i32({10, 1}, words), scale, 8, 4, "c", &bad);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error(), "c.weight_zero_point: shape [1, 2], expected [2, 2]");
}

} // namespace

//===----------------------------------------------------------------------===//
// unpackInt4 (#moe.checkpoint int4 = ...) against the decoders above
//===----------------------------------------------------------------------===//

namespace int4check {

std::vector<uint32_t> randomWords(size_t n, uint32_t seed, bool below15 = false) {
  std::vector<uint32_t> w(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint32_t &x : w) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = uint32_t(s >> 32);
    if (below15) // no nibble 15 (a GPTQ zero point 16)
      for (int p = 0; p < 8; ++p)
        if (((x >> (4 * p)) & 15) == 15)
          x &= ~(1u << (4 * p));
  }
  return w;
}

const uint8_t *bytes(const Tensor &t) { return t.data.data(); }

} // namespace int4check

// The codes moe-run unpacks at load, minus the zero points it unpacks, are
// the integer factors the decoders (written from the formats' definitions)
// compute, element for element: a wrong orientation, nibble order or offset
// in either reads other values. K = 24, N = 16, groups of 8.
TEST(UnpackInt4, AgreesWithTheDecoders) {
  using namespace int4check;
  const int64_t K = 24, N = 16, G = 3;
  Tensor ones = f32({G, N}, std::vector<float>(G * N, 1.0f));
  // GPTQ: qweight [K/8, N] along K, qzeros [G, N/8] along N, stored - 1.
  Tensor qw = i32({K / 8, N}, randomWords(K / 8 * N, 1));
  Tensor qz = i32({G, N / 8}, randomWords(G * N / 8, 2, /*below15=*/true));
  Result<Tensor> w = dequantizeGptq(qw, qz, ones, nullptr, 8, "g");
  ASSERT_TRUE(w.ok()) << w.error();
  auto q = unpackInt4(bytes(qw), qw.shape, Int4Packing::Gptq, "g.qweight");
  auto z = unpackInt4(bytes(qz), qz.shape, Int4Packing::GptqZeros, "g.qzeros");
  ASSERT_TRUE(q.ok() && z.ok());
  ASSERT_EQ(q->size(), size_t(K * N));
  ASSERT_EQ(z->size(), size_t(G * N));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      ASSERT_EQ(at(*w, k, n), float((*q)[k * N + n]) - float((*z)[(k / 8) * N + n]))
          << "gptq " << k << ", " << n;
  // AWQ: qweight [K, N/8] and qzeros [G, N/8], interleaved along N.
  Tensor aw = i32({K, N / 8}, randomWords(K * N / 8, 3));
  Tensor az = i32({G, N / 8}, randomWords(G * N / 8, 4));
  w = dequantizeAwq(aw, az, ones, 8, "a");
  ASSERT_TRUE(w.ok()) << w.error();
  q = unpackInt4(bytes(aw), aw.shape, Int4Packing::Awq, "a.qweight");
  z = unpackInt4(bytes(az), az.shape, Int4Packing::Awq, "a.qzeros");
  ASSERT_TRUE(q.ok() && z.ok());
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      ASSERT_EQ(at(*w, k, n), float((*q)[k * N + n]) - float((*z)[(k / 8) * N + n]))
          << "awq " << k << ", " << n;
  // compressed-tensors: weight_packed [N, K/8] along K, codes plus 8; the
  // unpacked [N, K] is transposed at load.
  Tensor cw = i32({N, K / 8}, randomWords(N * K / 8, 5));
  w = dequantizePackQuantized(cw, f32({N, G}, std::vector<float>(N * G, 1.0f)), K, 8, "c");
  ASSERT_TRUE(w.ok()) << w.error();
  q = unpackInt4(bytes(cw), cw.shape, Int4Packing::PackQuantized, "c.weight_packed");
  ASSERT_TRUE(q.ok());
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      ASSERT_EQ(at(*w, k, n), float((*q)[n * K + k]) - 8.0f) << "ct " << k << ", " << n;
  // Asymmetric compressed-tensors: weight_zero_point [N/8, G] along N,
  // unpacked as GPTQ's qweight ([N, G]) and transposed at load.
  Tensor cz = i32({N / 8, G}, randomWords(N / 8 * G, 6));
  w = dequantizePackQuantized(cw, f32({N, G}, std::vector<float>(N * G, 1.0f)), K, 8, "c", &cz);
  ASSERT_TRUE(w.ok()) << w.error();
  z = unpackInt4(bytes(cz), cz.shape, Int4Packing::Gptq, "c.weight_zero_point");
  ASSERT_TRUE(z.ok());
  ASSERT_EQ(z->size(), size_t(N * G));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      ASSERT_EQ(at(*w, k, n), float((*q)[n * K + k]) - float((*z)[n * G + k / 8]))
          << "ct zero " << k << ", " << n;
}

TEST(UnpackInt4, GptqZeroPointSixteenIsAnError) {
  // Column 3 of row 1 stored as 15: z = 16.
  std::vector<uint32_t> words = {0, 0xF000u};
  Tensor qz = i32({2, 1}, words);
  auto z = unpackInt4(qz.data.data(), qz.shape, Int4Packing::GptqZeros, "m.qzeros");
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(z.error(), "tensor 'm.qzeros': zero point of row 1, column 3 is stored as 15, so "
                       "it would be 16 (GPTQ stores it minus one), outside an int4 code");
  auto ok = unpackInt4(qz.data.data(), qz.shape, Int4Packing::Awq, "m.qzeros");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)[8 + 6], 15); // nibble 3 holds column order[3] = 6
}
