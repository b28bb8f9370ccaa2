//===- Quantized.cpp - Quantized checkpoint tensor formats ----------------===//
//
// The formats of Quantized.h, decoded to f32.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Quantized.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

namespace moe {
namespace io {

float fp8E4M3ToFloat(uint8_t bits) {
  const bool negative = bits & 0x80;
  const int e = (bits >> 3) & 0xF, m = bits & 0x7;
  if (e == 0xF && m == 0x7)
    return negative ? -std::numeric_limits<float>::quiet_NaN()
                    : std::numeric_limits<float>::quiet_NaN();
  // Subnormal: m * 2^-9; normal: (8 + m) * 2^(e - 10). Both exact in f32.
  const float magnitude =
      e == 0 ? std::ldexp(static_cast<float>(m), -9)
             : std::ldexp(static_cast<float>(8 + m), e - 10);
  return negative ? -magnitude : magnitude;
}

uint8_t floatToFp8E4M3(float value) {
  const uint8_t sign = std::signbit(value) ? 0x80 : 0;
  if (std::isnan(value))
    return sign | 0x7F;
  const float a = std::fabs(value);
  if (!(a < 448.0f))
    return sign | 0x7E;
  if (a == 0.0f)
    return sign;
  int exp2;
  (void)std::frexp(a, &exp2); // a = f * 2^exp2, f in [0.5, 1)
  const int e = exp2 - 1;     // a = 1.x * 2^e
  if (e < -6) {
    // Subnormal: units of 2^-9, rounded to nearest even (the default
    // rounding mode); 8 units is the smallest normal, code 0x08.
    const float q = std::nearbyint(std::ldexp(a, 9));
    return sign | static_cast<uint8_t>(q);
  }
  // Normal: units of 2^(e-3); the significand in [8, 16], 16 carrying into
  // the next binade.
  float q = std::nearbyint(std::ldexp(a, 3 - e));
  int biased = e + 7;
  if (q == 16.0f) {
    q = 8.0f;
    ++biased;
  }
  const int code = (biased << 3) | (static_cast<int>(q) - 8);
  return sign | static_cast<uint8_t>(code > 0x7E ? 0x7E : code);
}

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

Status fail(std::string_view name, const std::string &what) {
  return Error{std::string(name) + what};
}

/// Checks a tensor's validity, dtype (one of `dtypes`) and shape.
Status expect(const Tensor &t, std::string_view name, const char *field,
              std::initializer_list<DType> dtypes,
              const std::vector<int64_t> &shape) {
  const std::string label = std::string(name) + "." + field;
  if (Status s = t.validate(label); !s)
    return s;
  bool dtypeOk = false;
  std::string allowed;
  for (DType d : dtypes) {
    dtypeOk |= t.dtype == d;
    allowed += (allowed.empty() ? "" : " or ") + std::string(safetensorsDTypeName(d));
  }
  if (!dtypeOk)
    return Error{label + ": dtype " + safetensorsDTypeName(t.dtype) + ", expected " + allowed};
  if (t.shape != shape)
    return Error{label + ": shape " + formatShape(t.shape) + ", expected " + formatShape(shape)};
  return Status::success();
}

/// Checks that `t` is valid and 2-D; `expected` describes its shape.
Status check2D(const Tensor &t, std::string_view name, const char *field,
               const char *expected) {
  const std::string label = std::string(name) + "." + field;
  if (Status s = t.validate(label); !s)
    return s;
  if (t.shape.size() != 2)
    return Error{label + ": shape " + formatShape(t.shape) + ", expected " + expected};
  return Status::success();
}

/// Element i of a scale tensor (F32, BF16 or F16), widened exactly.
float scaleAt(const Tensor &t, int64_t i) {
  switch (t.dtype) {
  case DType::BF16: {
    uint16_t b;
    std::memcpy(&b, t.data.data() + 2 * i, 2);
    return bfloat16BitsToFloat(b);
  }
  case DType::F16: {
    uint16_t b;
    std::memcpy(&b, t.data.data() + 2 * i, 2);
    return halfBitsToFloat(b);
  }
  default: {
    float v;
    std::memcpy(&v, t.data.data() + 4 * i, 4);
    return v;
  }
  }
}

uint32_t wordAt(const Tensor &t, int64_t i) {
  uint32_t w;
  std::memcpy(&w, t.data.data() + 4 * i, 4);
  return w;
}

unsigned nibble(uint32_t word, int64_t position) {
  return (word >> (4 * position)) & 0xF;
}

/// The F32 result [K, N], or an error when K * N overflows.
Result<Tensor> output(int64_t k, int64_t n, std::string_view name) {
  std::optional<int64_t> count = shapeNumElements({k, n});
  if (!count || *count > std::numeric_limits<int64_t>::max() / 4)
    return fail(name, ": the dequantized [" + std::to_string(k) + ", " +
                          std::to_string(n) + "] f32 tensor is too large");
  return Tensor(DType::F32, {k, n}, std::vector<uint8_t>(static_cast<size_t>(*count) * 4));
}

void store(Tensor &out, int64_t i, float v) {
  std::memcpy(out.data.data() + 4 * i, &v, 4);
}

constexpr std::initializer_list<DType> kScaleTypes = {DType::F32, DType::BF16, DType::F16};

Status checkPositive(std::string_view name, const char *what, int64_t v) {
  if (v < 1)
    return fail(name, std::string(": ") + what + " " + std::to_string(v) + ", expected at least 1");
  return Status::success();
}

} // namespace

Result<Tensor> dequantizeFp8Block(const Tensor &weight, const Tensor &scale,
                                  int64_t blockN, int64_t blockK,
                                  std::string_view name) {
  if (Status s = checkPositive(name, "block size", std::min(blockN, blockK)); !s)
    return s;
  if (Status s = check2D(weight, name, "weight", "[N, K]"); !s)
    return s;
  const int64_t n = weight.shape[0], k = weight.shape[1];
  if (Status s = expect(weight, name, "weight", {DType::F8E4M3}, {n, k}); !s)
    return s;
  const int64_t sk = ceilDiv(k, blockK);
  if (Status s = expect(scale, name, "scale", kScaleTypes, {ceilDiv(n, blockN), sk}); !s)
    return s;
  Result<Tensor> out = output(k, n, name);
  if (!out)
    return out;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      store(*out, c * n + r,
            fp8E4M3ToFloat(weight.data[r * k + c]) * scaleAt(scale, (r / blockN) * sk + c / blockK));
  return out;
}

Result<Tensor> dequantizeGptq(const Tensor &qweight, const Tensor &qzeros,
                              const Tensor &scales, const Tensor *gIdx,
                              int64_t group, std::string_view name) {
  if (Status s = checkPositive(name, "group size", group); !s)
    return s;
  if (Status s = check2D(qweight, name, "qweight", "[K/8, N]"); !s)
    return s;
  const int64_t k = 8 * qweight.shape[0], n = qweight.shape[1];
  if (Status s = expect(qweight, name, "qweight", {DType::I32}, qweight.shape); !s)
    return s;
  const int64_t groups = ceilDiv(k, group);
  if (Status s = expect(scales, name, "scales", kScaleTypes, {groups, n}); !s)
    return s;
  if (Status s = expect(qzeros, name, "qzeros", {DType::I32}, {groups, ceilDiv(n, 8)}); !s)
    return s;
  std::vector<int32_t> rowGroup(static_cast<size_t>(k));
  for (int64_t r = 0; r < k; ++r)
    rowGroup[r] = static_cast<int32_t>(r / group);
  if (gIdx) {
    if (Status s = expect(*gIdx, name, "g_idx", {DType::I32}, {k}); !s)
      return s;
    for (int64_t r = 0; r < k; ++r) {
      int32_t g = static_cast<int32_t>(wordAt(*gIdx, r));
      if (g < 0 || g >= groups)
        return fail(name, ".g_idx: row " + std::to_string(r) + " is in group " +
                              std::to_string(g) + ", outside [0, " +
                              std::to_string(groups) + ")");
      rowGroup[r] = g;
    }
  }
  Result<Tensor> out = output(k, n, name);
  if (!out)
    return out;
  const int64_t zWords = ceilDiv(n, 8);
  for (int64_t r = 0; r < k; ++r) {
    const int64_t g = rowGroup[r];
    for (int64_t c = 0; c < n; ++c) {
      const int q = static_cast<int>(nibble(wordAt(qweight, (r / 8) * n + c), r % 8));
      const int z = static_cast<int>(nibble(wordAt(qzeros, g * zWords + c / 8), c % 8)) + 1;
      store(*out, r * n + c, static_cast<float>(q - z) * scaleAt(scales, g * n + c));
    }
  }
  return out;
}

Result<Tensor> dequantizeAwq(const Tensor &qweight, const Tensor &qzeros,
                             const Tensor &scales, int64_t group,
                             std::string_view name) {
  if (Status s = checkPositive(name, "group size", group); !s)
    return s;
  if (Status s = check2D(scales, name, "scales", "[K/group, N]"); !s)
    return s;
  if (Status s = check2D(qweight, name, "qweight", "[K, N/8]"); !s)
    return s;
  const int64_t k = qweight.shape[0], n = scales.shape[1];
  const int64_t words = ceilDiv(n, 8), groups = ceilDiv(k, group);
  if (Status s = expect(qweight, name, "qweight", {DType::I32}, {k, words}); !s)
    return s;
  if (Status s = expect(scales, name, "scales", kScaleTypes, {groups, n}); !s)
    return s;
  if (Status s = expect(qzeros, name, "qzeros", {DType::I32}, {groups, words}); !s)
    return s;
  // Column 8w + j sits in nibble kPosition[j] (the inverse of the packing
  // order {0, 2, 4, 6, 1, 3, 5, 7}).
  static constexpr int kPosition[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  Result<Tensor> out = output(k, n, name);
  if (!out)
    return out;
  for (int64_t r = 0; r < k; ++r) {
    const int64_t g = r / group;
    for (int64_t c = 0; c < n; ++c) {
      const int64_t at = kPosition[c % 8];
      const int q = static_cast<int>(nibble(wordAt(qweight, r * words + c / 8), at));
      const int z = static_cast<int>(nibble(wordAt(qzeros, g * words + c / 8), at));
      store(*out, r * n + c, static_cast<float>(q - z) * scaleAt(scales, g * n + c));
    }
  }
  return out;
}

Result<Tensor> dequantizePackQuantized(const Tensor &packed,
                                       const Tensor &scale, int64_t k,
                                       int64_t group, std::string_view name,
                                       const Tensor *zeroPoint) {
  if (Status s = checkPositive(name, "group size", group); !s)
    return s;
  if (Status s = checkPositive(name, "K", k); !s)
    return s;
  if (Status s = check2D(packed, name, "weight_packed", "[N, K/8]"); !s)
    return s;
  const int64_t n = packed.shape[0], words = ceilDiv(k, 8), groups = ceilDiv(k, group);
  if (Status s = expect(packed, name, "weight_packed", {DType::I32}, {n, words}); !s)
    return s;
  if (Status s = expect(scale, name, "weight_scale", kScaleTypes, {n, groups}); !s)
    return s;
  if (zeroPoint) {
    if (Status s = expect(*zeroPoint, name, "weight_zero_point", {DType::I32},
                          {ceilDiv(n, 8), groups});
        !s)
      return s;
  }
  Result<Tensor> out = output(k, n, name);
  if (!out)
    return out;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const int64_t g = c / group;
      const int u = static_cast<int>(nibble(wordAt(packed, r * words + c / 8), c % 8));
      // Both stored plus 8: u - z is the signed code minus the signed zero.
      const int z = zeroPoint ? static_cast<int>(nibble(wordAt(*zeroPoint, (r / 8) * groups + g),
                                                        r % 8))
                              : 8;
      store(*out, c * n + r, static_cast<float>(u - z) * scaleAt(scale, r * groups + g));
    }
  return out;
}

} // namespace io
} // namespace moe
