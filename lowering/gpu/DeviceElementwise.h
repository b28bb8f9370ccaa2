//===- DeviceElementwise.h - device-abi element-wise kernels ----*- C++ -*-===//
//
// device-abi mode of convert-moe-to-gpu: the host's element-wise tensor ops
// that read device tensors (a residual add between layers, a scaling, ...)
// run on the device, chains of them fused into one kernel each. Internal to
// the GPU lowering library; defined in DeviceElementwise.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_GPU_DEVICEELEMENTWISE_H
#define MOE_LOWERING_GPU_DEVICEELEMENTWISE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace mlir {
namespace moe {
namespace gpu_lowering {

class Host;

/// device-abi: an element-wise tensor op that runs on the device when it
/// reads a device tensor (a residual add between layers, a scaling, ...):
/// every operand and result a ranked tensor of one shape, and either an
/// ElementwiseMappable op without regions and with one result (arith.addf,
/// math.exp, arith.select, ...) or a linalg.generic with only parallel
/// iterators, identity indexing maps and a scalar body (one result per
/// init: a fused chain, fuseDeviceElementwise).
bool isDeviceElementwise(Operation *op);

/// device-abi: the element-wise ops on device tensors (`ops`) become
/// linalg.generic ops (upstream's elementwise-to-linalg patterns) and
/// producer/consumer chains of them are fused (FuseDeviceChain, under
/// fusableOnDevice, with upstream's populateElementwiseOpsFusionPatterns
/// companions): one generic per chain, which reads the chain's external
/// inputs and yields only the values used outside it; splat constants fold
/// into the body as scalars. Each generic becomes one kernel
/// (convertElementwise).
void fuseDeviceElementwise(ModuleOp module, ArrayRef<Operation *> ops);

/// An element-wise op on device tensors (isDeviceElementwise, a generic
/// after fuseDeviceElementwise) as one kernel launch: the tensors it reads
/// on the device (device tensors in place, splat constants as scalars in the
/// kernel, dense constants as globals of the gpu.module, other host tensors
/// uploaded), one device tensor per result like a moe op's.
LogicalResult convertElementwise(Operation *op, Host &h);

} // namespace gpu_lowering
} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_GPU_DEVICEELEMENTWISE_H
