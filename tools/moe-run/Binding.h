//===- Binding.h - moe-run: binding file data to arguments -----*- C++ -*-===//
//
// How moe-run binds data to the entry's arguments, apart from the command
// line and the MLIR module, so that it can be fuzzed (tools/moe-fuzz,
// moe-fuzz-io): an --input .npy (dtype and shape checks, f32 -> bf16/f16
// rounding; float64 data is converted by io::readNpyConverting /
// io::parseNpyConverting), a --params safetensors tensor (dtype conversion
// between float types), a #moe.checkpoint parameter (io::checkpointShape,
// then the checks of the assembled tensor), and the allocation of the host
// buffer. Every error is one line without the "moe-run: " prefix, the text
// moe-run prints.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TOOLS_MOE_RUN_BINDING_H
#define MOE_TOOLS_MOE_RUN_BINDING_H

#include "tools/moe-run/Backend.h"

#include "runtime/io/Checkpoint.h"
#include "runtime/io/TensorIO.h"

#include <optional>
#include <string>
#include <vector>

namespace moe {
namespace run {

/// "%arg2".
std::string argName(unsigned index);
/// "argument #2 (%arg2)".
std::string describeArgument(const ValueInfo &arg);
/// "tensor<37x4xf32>": a tensor type with concrete sizes.
std::string concreteTypeString(io::DType dtype,
                               const std::vector<int64_t> &shape);
/// Whether `actual` fits the declared `shape` (same rank, the same sizes
/// where static).
bool shapeFits(const std::vector<int64_t> &shape,
               const std::vector<int64_t> &actual);
/// An error when a tensor of `shape` cannot possibly be allocated (> 2^48
/// bytes).
std::optional<std::string> checkAllocatable(io::DType dtype,
                                            const std::vector<int64_t> &shape);
/// "f32 [2, 3]" (safetensors dtype names with `safetensorsNames`).
std::string fileTensorDesc(io::DType dtype, const std::vector<int64_t> &shape,
                           bool safetensorsNames);

/// The tensor that `tensor`, read from the --input file `path`, binds to
/// `arg` as: the same dtype and a shape that fits, or f32 data for a bf16/f16
/// argument (rounded to nearest even).
io::Result<io::Tensor> bindInputTensor(io::Tensor tensor,
                                       const std::string &path,
                                       const ValueInfo &arg);

/// The tensor `info` of the --params file `file` as argument `arg` (moe.param
/// name `*arg.param`) takes it: the same dtype, or any float dtype for a
/// float argument (converted), and a shape that fits.
io::Result<io::Tensor> bindParamTensor(const io::SafeTensorsFile &file,
                                       const io::SafeTensorInfo &info,
                                       const ValueInfo &arg);

/// The shape of #moe.checkpoint argument `arg` assembled from `store`
/// (io::checkpointShape).
io::Result<std::vector<int64_t>>
checkpointArgumentShape(const io::TensorStore &store, const ValueInfo &arg);

/// Checks that #moe.checkpoint argument `arg` can be assembled with `shape`
/// (a float tensor, allocatable).
io::Status checkAssembledArgument(const ValueInfo &arg,
                                  const std::vector<int64_t> &shape);

/// Allocates `out` for `arg` with the shape of `tensor` and copies its data.
io::Status allocateArgument(const ValueInfo &arg, const io::Tensor &tensor,
                            HostTensor &out);

} // namespace run
} // namespace moe

#endif // MOE_TOOLS_MOE_RUN_BINDING_H
