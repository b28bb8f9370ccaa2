//===- HostTensor.cpp - aligned host tensors for moe-run ------------------===//

#include "tools/moe-run/Backend.h"

#include "runtime/io/Quantized.h"

#include <cstring>

namespace moe {
namespace run {

HostTensor::HostTensor(io::DType dtype, std::vector<int64_t> shape)
    : elementType(dtype), dims(std::move(shape)) {
  count = 1;
  for (int64_t d : dims)
    count *= d;
  // aligned_alloc needs a size that is a multiple of the alignment; never 0.
  size_t bytes = byteSize();
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0)
    rounded = 64;
  storage.reset(static_cast<uint8_t *>(std::aligned_alloc(64, rounded)));
  if (storage)
    std::memset(storage.get(), 0, rounded);
}

void HostTensor::assign(const io::Tensor &tensor) {
  if (!tensor.data.empty())
    std::memcpy(data(), tensor.data.data(),
                std::min(tensor.data.size(), byteSize()));
}

io::Tensor HostTensor::toTensor() const {
  std::vector<uint8_t> bytes(data(), data() + byteSize());
  return io::Tensor(elementType, dims, std::move(bytes));
}

double HostTensor::elementAsDouble(int64_t i) const {
  const uint8_t *p = data() + i * io::elementSize(elementType);
  switch (elementType) {
  case io::DType::F32: {
    float v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
  case io::DType::F16: {
    uint16_t v;
    std::memcpy(&v, p, sizeof(v));
    return io::halfBitsToFloat(v);
  }
  case io::DType::BF16: {
    uint16_t v;
    std::memcpy(&v, p, sizeof(v));
    return io::bfloat16BitsToFloat(v);
  }
  case io::DType::I32: {
    int32_t v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
  case io::DType::I64: {
    int64_t v;
    std::memcpy(&v, p, sizeof(v));
    return static_cast<double>(v);
  }
  case io::DType::F8E4M3:
    return io::fp8E4M3ToFloat(*p);
  case io::DType::U8:
    return *p;
  }
  return 0;
}

} // namespace run
} // namespace moe
