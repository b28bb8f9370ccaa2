//===- Passes.h - the GPU lowering passes -----------------------*- C++ -*-===//
//
// The passes of lowering/gpu/Passes.td (library MoEGpuLowering). The
// pipelines built from them are declared in lowering/Pipelines.h.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_GPU_PASSES_H
#define MOE_LOWERING_GPU_PASSES_H

#include "dialect/MoEDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace moe {

#define GEN_PASS_DECL
#include "lowering/gpu/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lowering/gpu/Passes.h.inc"

} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_GPU_PASSES_H
