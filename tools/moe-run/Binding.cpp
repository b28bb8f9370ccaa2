//===- Binding.cpp - moe-run: binding file data to arguments --------------===//

#include "tools/moe-run/Binding.h"

namespace moe {
namespace run {

std::string argName(unsigned index) { return "%arg" + std::to_string(index); }

std::string describeArgument(const ValueInfo &arg) {
  return "argument #" + std::to_string(arg.index) + " (" + argName(arg.index) +
         ")";
}

std::string concreteTypeString(io::DType dtype,
                               const std::vector<int64_t> &shape) {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + io::dtypeName(dtype) + ">";
}

bool shapeFits(const std::vector<int64_t> &shape,
               const std::vector<int64_t> &actual) {
  if (shape.size() != actual.size())
    return false;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != ValueInfo::kDynamic && shape[d] != actual[d])
      return false;
  return true;
}

std::optional<std::string> checkAllocatable(io::DType dtype,
                                            const std::vector<int64_t> &shape) {
  auto count = io::shapeNumElements(shape);
  if (!count || *count > (int64_t(1) << 48) /
                             static_cast<int64_t>(io::elementSize(dtype)))
    return "too large to allocate";
  return std::nullopt;
}

std::string fileTensorDesc(io::DType dtype, const std::vector<int64_t> &shape,
                           bool safetensorsNames) {
  return std::string(safetensorsNames ? io::safetensorsDTypeName(dtype)
                                      : io::dtypeName(dtype)) +
         " " + io::formatShape(shape);
}

/// An i4 argument (bound from U8, docs/spec.md §2.1) takes one code 0..15
/// per byte: the first other byte is an error.
static io::Result<io::Tensor> checkInt4Codes(io::Result<io::Tensor> tensor,
                                             const std::string &subject) {
  if (!tensor.ok() || tensor->dtype != io::DType::U8)
    return tensor;
  for (size_t i = 0; i < tensor->data.size(); ++i)
    if (tensor->data[i] > 15)
      return io::Error{subject + ": element " + std::to_string(i) + " is " +
                       std::to_string(tensor->data[i]) +
                       "; an i4 argument takes one code 0..15 per byte"};
  return tensor;
}

io::Result<io::Tensor> bindInputTensor(io::Tensor tensor,
                                       const std::string &path,
                                       const ValueInfo &arg) {
  // An f32 .npy binds to a bf16/f16 argument by rounding to nearest even.
  bool convertible =
      tensor.dtype == io::DType::F32 &&
      (arg.dtype == io::DType::BF16 || arg.dtype == io::DType::F16);
  if ((tensor.dtype != arg.dtype && !convertible) ||
      !shapeFits(arg.shape, tensor.shape))
    return io::Error{"--input " + path + " for " + describeArgument(arg) +
                     ": expected " + arg.typeString + ", got " +
                     fileTensorDesc(tensor.dtype, tensor.shape, false)};
  if (convertible)
    return io::convertTensor(tensor, arg.dtype);
  return checkInt4Codes(std::move(tensor),
                        "--input " + path + " for " + describeArgument(arg));
}

io::Result<io::Tensor> bindParamTensor(const io::SafeTensorsFile &file,
                                       const io::SafeTensorInfo &info,
                                       const ValueInfo &arg) {
  std::string subject = "parameter '" + arg.param.value_or(info.name) +
                        "' (argument #" + std::to_string(arg.index) + ", " +
                        argName(arg.index) + ") in " + file.path();
  bool convertible = io::isFloatType(info.dtype) && io::isFloatType(arg.dtype);
  if (!shapeFits(arg.shape, info.shape) ||
      (info.dtype != arg.dtype && !convertible))
    return io::Error{subject + ": expected " + arg.typeString + ", got " +
                     fileTensorDesc(info.dtype, info.shape, true)};
  return checkInt4Codes(info.dtype == arg.dtype ? file.get(info.name)
                                               : file.get(info.name, arg.dtype),
                        subject);
}

io::Result<std::vector<int64_t>>
checkpointArgumentShape(const io::TensorStore &store, const ValueInfo &arg) {
  if (!arg.checkpoint)
    return io::Error{describeArgument(arg) + " carries no #moe.checkpoint"};
  return io::checkpointShape(store, *arg.checkpoint, arg.shape,
                             describeArgument(arg), arg.dtype);
}

io::Status checkAssembledArgument(const ValueInfo &arg,
                                  const std::vector<int64_t> &shape) {
  if (!io::isFloatType(arg.dtype) && arg.dtype != io::DType::F8E4M3 &&
      arg.dtype != io::DType::U8)
    return io::Error{describeArgument(arg) + " (" + arg.typeString +
                     ") carries a #moe.checkpoint but is not a float, f8E4M3FN or i4 tensor"};
  if (auto error = checkAllocatable(arg.dtype, shape))
    return io::Error{describeArgument(arg) + " (" +
                     concreteTypeString(arg.dtype, shape) + ") is " + *error};
  return io::Status();
}

io::Status allocateArgument(const ValueInfo &arg, const io::Tensor &tensor,
                            HostTensor &out) {
  if (auto error = checkAllocatable(arg.dtype, tensor.shape))
    return io::Error{describeArgument(arg) + " (" +
                     concreteTypeString(arg.dtype, tensor.shape) + ") is " +
                     *error};
  if (tensor.dtype != arg.dtype ||
      tensor.data.size() != static_cast<size_t>(*io::shapeNumElements(
                                tensor.shape)) *
                                io::elementSize(tensor.dtype))
    return io::Error{describeArgument(arg) + ": internal error: " +
                     fileTensorDesc(tensor.dtype, tensor.shape, false) +
                     " data does not match " + arg.typeString};
  out = HostTensor(arg.dtype, tensor.shape);
  if (!out.ok())
    return io::Error{"cannot allocate " + std::to_string(out.byteSize()) +
                     " bytes for " + describeArgument(arg)};
  out.assign(tensor);
  return io::Status();
}

} // namespace run
} // namespace moe
