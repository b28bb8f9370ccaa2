//===- Passes.h - moe-to-moe transformations --------------------*- C++ -*-===//
#ifndef MOE_PASSES_PASSES_H
#define MOE_PASSES_PASSES_H

#include "dialect/MoEAttrs.h"
#include "dialect/MoEDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <string>

namespace mlir {
class RewritePatternSet;
namespace moe {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// Patterns rewriting moe.layer / moe.soft_layer into the chain of
/// docs/spec.md §3.3 (used by --moe-decompose and by the lowering).
void populateDecompositionPatterns(RewritePatternSet &patterns);
/// Patterns fusing single-use dispatch -> expert_ffn -> combine chains (and
/// their soft counterparts) into moe.fused_experts / moe.fused_soft_experts
/// (used by --moe-fuse and by the CPU lowering).
void populateFusionPatterns(RewritePatternSet &patterns);
/// The function whose gradient a tool's `--entry=NAME` asks for: "f" when
/// NAME is "f_vjp", the module has no symbol NAME and has a function @f with a
/// body (moe-run and moe-compile then add @f_vjp with --moe-generate-vjp);
/// otherwise "".
std::string requestedVjpBase(ModuleOp module, StringRef name);

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace moe
} // namespace mlir

#endif // MOE_PASSES_PASSES_H
