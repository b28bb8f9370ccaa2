//===- Passes.h - moe-to-moe transformations --------------------*- C++ -*-===//
#ifndef MOE_PASSES_PASSES_H
#define MOE_PASSES_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir {
namespace moe {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace moe
} // namespace mlir

#endif // MOE_PASSES_PASSES_H
