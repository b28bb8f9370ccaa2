//===- Convert.cpp - f32 / f16 / bf16 / integer conversions ---------------===//
//
// Portable bit-level conversions (no compiler half-float support needed).
// Every value is decoded to an exact (sign, integer significand, power of two)
// triple and re-encoded with one round-to-nearest-even step, so conversions
// are correctly rounded whatever the source type.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Internal.h"
#include "runtime/io/Quantized.h"
#include "runtime/io/TensorIO.h"

#include <cstring>

namespace moe {
namespace io {

namespace {

struct FloatFormat {
  int mantBits; ///< explicit fraction bits
  int expBits;
};

constexpr FloatFormat kF32{23, 8};
constexpr FloatFormat kF16{10, 5};
constexpr FloatFormat kBF16{7, 8};

/// An exactly represented value: (-1)^negative * significand * 2^exponent,
/// or an infinity, or a NaN whose fraction bits are kept left-aligned in a
/// 64-bit word.
struct Exact {
  enum Kind { Finite, Infinity, NaN } kind = Finite;
  bool negative = false;
  uint64_t significand = 0;
  int exponent = 0;
  uint64_t nanPayload = 0;
};

Exact decode(uint32_t bits, FloatFormat f) {
  Exact x;
  const uint32_t mantMask = (1u << f.mantBits) - 1;
  const uint32_t expMax = (1u << f.expBits) - 1;
  const int bias = static_cast<int>((1u << (f.expBits - 1)) - 1);
  x.negative = (bits >> (f.mantBits + f.expBits)) & 1;
  uint32_t e = (bits >> f.mantBits) & expMax;
  uint32_t m = bits & mantMask;
  if (e == expMax) {
    if (m == 0) {
      x.kind = Exact::Infinity;
    } else {
      x.kind = Exact::NaN;
      x.nanPayload = static_cast<uint64_t>(m) << (64 - f.mantBits);
    }
    return x;
  }
  if (e == 0) { // zero or subnormal
    x.significand = m;
    x.exponent = 1 - bias - f.mantBits;
  } else {
    x.significand = m | (1u << f.mantBits);
    x.exponent = static_cast<int>(e) - bias - f.mantBits;
  }
  return x;
}

/// Index of the most significant set bit of v (v != 0).
int highestBit(uint64_t v) {
#if defined(__GNUC__) || defined(__clang__)
  return 63 - __builtin_clzll(v);
#else
  int b = -1;
  while (v) {
    v >>= 1;
    ++b;
  }
  return b;
#endif
}

uint32_t encode(const Exact &x, FloatFormat f) {
  const uint32_t expMax = (1u << f.expBits) - 1;
  const int bias = static_cast<int>((1u << (f.expBits - 1)) - 1);
  const uint32_t sign = static_cast<uint32_t>(x.negative)
                        << (f.mantBits + f.expBits);
  const uint32_t infBits = sign | (expMax << f.mantBits);
  if (x.kind == Exact::Infinity)
    return infBits;
  if (x.kind == Exact::NaN) {
    uint32_t payload = static_cast<uint32_t>(x.nanPayload >> (64 - f.mantBits));
    return infBits | payload | (1u << (f.mantBits - 1)); // quiet NaN
  }
  if (x.significand == 0)
    return sign;

  // Quantum (weight of the last kept bit): 2^(msb + exponent - mantBits) for
  // normal results, 2^(emin - mantBits) for subnormal ones.
  const int emin = 1 - bias;
  const int msb = highestBit(x.significand);
  int shift = msb - f.mantBits;
  if (emin - f.mantBits - x.exponent > shift)
    shift = emin - f.mantBits - x.exponent;

  uint64_t q;
  bool roundUp;
  if (shift <= 0) {
    q = x.significand << -shift; // exact; q < 2^(mantBits + 1)
    roundUp = false;
  } else if (shift >= 64) {
    // The value is below one quantum; it rounds up only if above half a
    // quantum, i.e. significand > 2^(shift - 1) (a tie rounds to even: 0).
    q = 0;
    roundUp = shift == 64 && x.significand > (uint64_t(1) << 63);
  } else {
    q = x.significand >> shift;
    uint64_t rem = x.significand & ((uint64_t(1) << shift) - 1);
    uint64_t half = uint64_t(1) << (shift - 1);
    roundUp = rem > half || (rem == half && (q & 1));
  }
  if (roundUp)
    ++q;
  long long qExp = static_cast<long long>(x.exponent) + shift;
  if (q >> (f.mantBits + 1)) { // rounding carried into a new bit
    q >>= 1;
    ++qExp;
  }
  if (q < (uint64_t(1) << f.mantBits)) // subnormal (or zero)
    return sign | static_cast<uint32_t>(q);
  long long biased = qExp + f.mantBits + bias;
  if (biased >= static_cast<long long>(expMax))
    return infBits;
  return sign | static_cast<uint32_t>(biased) << f.mantBits |
         static_cast<uint32_t>(q & ((uint64_t(1) << f.mantBits) - 1));
}

uint32_t floatBits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

float bitsFloat(uint32_t b) {
  float v;
  std::memcpy(&v, &b, 4);
  return v;
}

Exact fromInteger(int64_t v) {
  Exact x;
  x.negative = v < 0;
  // Two's complement magnitude, correct for INT64_MIN too.
  x.significand =
      x.negative ? ~static_cast<uint64_t>(v) + 1 : static_cast<uint64_t>(v);
  return x;
}

template <typename T> T loadLE(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

} // namespace

uint16_t floatToHalfBits(float value) {
  return static_cast<uint16_t>(encode(decode(floatBits(value), kF32), kF16));
}

float halfBitsToFloat(uint16_t bits) {
  return bitsFloat(encode(decode(bits, kF16), kF32));
}

uint16_t floatToBFloat16Bits(float value) {
  return static_cast<uint16_t>(encode(decode(floatBits(value), kF32), kBF16));
}

float bfloat16BitsToFloat(uint16_t bits) {
  return bitsFloat(encode(decode(bits, kBF16), kF32));
}

Result<Tensor> convertTensor(const Tensor &tensor, DType target) {
  if (!isFloatType(target))
    return Error{std::string("cannot convert to ") + dtypeName(target) +
                 ": the target element type must be f32, f16 or bf16"};
  if (Status s = tensor.validate("convert"); !s)
    return s;
  if (tensor.dtype == target)
    return tensor;

  const size_t n = tensor.data.size() / tensor.elementSize();
  Tensor out(target, tensor.shape,
             std::vector<uint8_t>(n * elementSize(target)));
  const uint8_t *src = tensor.data.data();
  uint8_t *dst = out.data.data();
  const FloatFormat targetFormat = target == DType::F32   ? kF32
                                   : target == DType::F16 ? kF16
                                                          : kBF16;

  for (size_t i = 0; i < n; ++i) {
    Exact x;
    switch (tensor.dtype) {
    case DType::F32:
      x = decode(loadLE<uint32_t>(src + 4 * i), kF32);
      break;
    case DType::F16:
      x = decode(loadLE<uint16_t>(src + 2 * i), kF16);
      break;
    case DType::BF16:
      x = decode(loadLE<uint16_t>(src + 2 * i), kBF16);
      break;
    case DType::I32:
      x = fromInteger(loadLE<int32_t>(src + 4 * i));
      break;
    case DType::I64:
      x = fromInteger(loadLE<int64_t>(src + 8 * i));
      break;
    case DType::F8E4M3:
      x = decode(floatBits(fp8E4M3ToFloat(src[i])), kF32);
      break;
    case DType::U8:
      x = fromInteger(src[i]);
      break;
    }
    uint32_t bits = encode(x, targetFormat);
    if (target == DType::F32) {
      std::memcpy(dst + 4 * i, &bits, 4);
    } else {
      uint16_t h = static_cast<uint16_t>(bits);
      std::memcpy(dst + 2 * i, &h, 2);
    }
  }
  return out;
}

} // namespace io
} // namespace moe
