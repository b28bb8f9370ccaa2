//===- MoEOps.h - moe dialect operations ------------------------*- C++ -*-===//
#ifndef MOE_DIALECT_MOEOPS_H
#define MOE_DIALECT_MOEOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialect/MoEAttrs.h"
#include "dialect/MoEAdjointInterface.h"
#include "dialect/MoEDialect.h"

namespace mlir {
namespace moe {
/// One error on `op` when `quant` is set: `what` (a pass or lowering) does
/// not support quantized expert weights yet (the ops' checkNotQuantized).
LogicalResult checkNotQuantized(Operation *op, QuantAttr quant, StringRef what);
} // namespace moe
} // namespace mlir

#define GET_OP_CLASSES
#include "dialect/MoEOps.h.inc"

namespace mlir {
namespace moe {
/// Whether `op` is lowered to grouped GEMMs, so that it takes a
/// `moe.cpu_config` and a `moe.gpu_config` (moe.layer, moe.soft_layer,
/// moe.route, moe.expert_ffn, moe.shared_expert, moe.fused_experts,
/// moe.fused_soft_experts, and the adjoints moe.route_grad,
/// moe.expert_ffn_grad, moe.shared_expert_grad).
inline bool takesLoweringConfig(Operation *op) {
  return isa<LayerOp, SoftLayerOp, RouteOp, ExpertFFNOp, SharedExpertOp, FusedExpertsOp,
             FusedSoftExpertsOp, RouteGradOp, ExpertFFNGradOp, SharedExpertGradOp>(op);
}
/// Passes `from`'s `moe.cpu_config` and `moe.gpu_config` (those it has) on
/// to `to`: a rewrite that replaces a configured op by others keeps the
/// user's or the target's choice.
inline void copyLoweringConfig(Operation *from, Operation *to) {
  for (StringRef name : {CpuConfigAttr::getAttrName(), GpuConfigAttr::getAttrName()})
    if (Attribute config = from->getAttr(name))
      to->setAttr(name, config);
}
/// Whether `op` is a moe.layer, moe.expert_ffn or moe.fused_experts with
/// quantized expert weights (#moe.quant).
inline bool hasQuantizedExperts(Operation *op) {
  if (auto layer = dyn_cast<LayerOp>(op))
    return layer.getQuantAttr() != nullptr;
  if (auto ffn = dyn_cast<ExpertFFNOp>(op))
    return ffn.getQuantAttr() != nullptr;
  if (auto fused = dyn_cast<FusedExpertsOp>(op))
    return fused.getQuantAttr() != nullptr;
  return false;
}
/// Fails with one error on the first op under `root` with quantized expert
/// weights (moe.layer, moe.expert_ffn, moe.fused_experts; their
/// checkNotQuantized): for the passes and lowerings that do not handle
/// them yet; `what` names the pass.
inline LogicalResult rejectQuantizedLayers(Operation *root, StringRef what) {
  WalkResult result = root->walk([&](Operation *op) {
    LogicalResult ok = success();
    if (auto layer = dyn_cast<LayerOp>(op))
      ok = layer.checkNotQuantized(what);
    else if (auto ffn = dyn_cast<ExpertFFNOp>(op))
      ok = ffn.checkNotQuantized(what);
    else if (auto fused = dyn_cast<FusedExpertsOp>(op))
      ok = fused.checkNotQuantized(what);
    return failed(ok) ? WalkResult::interrupt() : WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}
} // namespace moe
} // namespace mlir

#endif // MOE_DIALECT_MOEOPS_H
