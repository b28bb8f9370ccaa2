//===- Passes.h - moe lowering passes ---------------------------*- C++ -*-===//
#ifndef MOE_LOWERING_PASSES_H
#define MOE_LOWERING_PASSES_H

#include "dialect/MoEDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class RewritePatternSet;
namespace moe {

#define GEN_PASS_DECL
#include "lowering/Passes.h.inc"

/// Patterns lowering the moe chain ops to upstream dialects. With
/// `packWeights`, expert weights are read through packed copies kept in
/// globals of the enclosing module (see lowering/cpu/ExpertKernels.h); only
/// safe when the caller owns the module (not from a nested function pass).
void populateMoEToLinalgPatterns(RewritePatternSet &patterns, bool packWeights = false);

#define GEN_PASS_REGISTRATION
#include "lowering/Passes.h.inc"

} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_PASSES_H
