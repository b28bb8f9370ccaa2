//===- Passes.h - the CPU lowering passes -----------------------*- C++ -*-===//
//
// The passes of lowering/cpu/Passes.td (library MoECpuLowering) and the
// patterns of convert-moe-to-cpu.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_CPU_PASSES_H
#define MOE_LOWERING_CPU_PASSES_H

#include "dialect/MoEDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace moe {

#define GEN_PASS_DECL
#include "lowering/cpu/Passes.h.inc"

/// Patterns lowering the moe chain ops to upstream dialects. With a
/// `kernelModule`, the CPU kernels are outlined into private functions of it
/// (one per variant) and, with `packWeights`, static expert weights are read
/// through packed copies kept in globals of it (see
/// lowering/cpu/ExpertKernels.h); pass one only when the caller owns that
/// module (not from a nested function pass). Without it, kernels are inline.
/// How each op's GEMMs are emitted is its `moe.cpu_config` (see
/// `--moe-cpu-configure`; AVX-512 blocking without one).
/// With `checkIndices`, the index data of the chain ops (moe.expert_ffn's
/// offsets, moe.combine's positions) is validated at run time (cf.assert).
void populateMoEToLinalgPatterns(RewritePatternSet &patterns, ModuleOp kernelModule = {},
                                 bool packWeights = false, bool checkIndices = true);

#define GEN_PASS_REGISTRATION
#include "lowering/cpu/Passes.h.inc"

} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_CPU_PASSES_H
