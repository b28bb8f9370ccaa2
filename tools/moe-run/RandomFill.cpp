//===- RandomFill.cpp - moe-run: the values of --fill-random --------------===//
//
// fillRandomValues (RandomFill.h): the scale of an argument, then its
// elements in chunks of 2^16, each chunk from its own generator started at
// the stream's state for the chunk's first element, rounded to the
// argument's float type (or the seed, for integer arguments).
//
//===----------------------------------------------------------------------===//

#include "tools/moe-run/RandomFill.h"

#include "runtime/io/Quantized.h"
#include "runtime/io/TensorIO.h"

#include "llvm/Support/Parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace moe {
namespace run {

namespace {

void fillRandomRange(uint8_t *out, io::DType dtype, int64_t begin,
                     int64_t end, SplitMix64 &rng, double scale) {
  if (dtype == io::DType::U8) {
    // int4 codes: the top 4 bits of the element's first output (uniform
    // over 0..15); the second is skipped, as normal() would use it.
    for (int64_t i = begin; i < end; ++i) {
      out[i] = static_cast<uint8_t>(rng.next() >> 60);
      rng.next();
    }
    return;
  }
  for (int64_t i = begin; i < end; ++i) {
    float v = static_cast<float>(rng.normal() * scale);
    switch (dtype) {
    case io::DType::F32:
      std::memcpy(out + 4 * i, &v, 4);
      break;
    case io::DType::F16: {
      uint16_t h = io::floatToHalfBits(v);
      std::memcpy(out + 2 * i, &h, 2);
      break;
    }
    case io::DType::BF16: {
      uint16_t h = io::floatToBFloat16Bits(v);
      std::memcpy(out + 2 * i, &h, 2);
      break;
    }
    case io::DType::F8E4M3:
      out[i] = io::floatToFp8E4M3(v);
      break;
    default:
      break;
    }
  }
}

} // namespace

double fillScale(const ValueInfo &info, const std::vector<int64_t> &shape) {
  // Quantized weights: their f32 scales carry the magnitude.
  if (!info.param || info.dtype == io::DType::F8E4M3 || info.dtype == io::DType::U8)
    return 1.0;
  int64_t fanIn = 1;
  if (shape.size() >= 2)
    fanIn = shape[shape.size() - 2];
  else if (shape.size() == 1)
    fanIn = shape[0];
  return 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(fanIn, 1)));
}

void fillRandomValues(HostTensor &tensor, const ValueInfo &info,
                      uint64_t streamSeed, uint64_t userSeed) {
  // The fan-in below is that of the concrete shape (after --dynamic-size).
  const int64_t n = tensor.numElements();
  uint8_t *out = tensor.data();
  switch (info.dtype) {
  case io::DType::I32: {
    int32_t v = static_cast<int32_t>(userSeed);
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(out + 4 * i, &v, 4);
    return;
  }
  case io::DType::I64: {
    int64_t v = static_cast<int64_t>(userSeed);
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(out + 8 * i, &v, 8);
    return;
  }
  default:
    break;
  }
  const double scale = fillScale(info, tensor.shape());
  // Element i takes outputs 2i+1 and 2i+2 of the argument's stream, and
  // splitmix64's state after j outputs is seed + j * gamma: every chunk
  // starts its own generator there, so the values do not depend on how the
  // chunks are spread over the threads.
  constexpr int64_t kChunk = 1 << 16;
  llvm::parallelFor(0, (n + kChunk - 1) / kChunk, [&](size_t chunk) {
    const int64_t begin = static_cast<int64_t>(chunk) * kChunk;
    const int64_t end = std::min(n, begin + kChunk);
    SplitMix64 rng(streamSeed +
                   2 * static_cast<uint64_t>(begin) * SplitMix64::kGamma);
    fillRandomRange(out, info.dtype, begin, end, rng, scale);
  });
}

} // namespace run
} // namespace moe
