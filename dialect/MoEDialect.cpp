//===- MoEDialect.cpp - the moe dialect -----------------------------------===//

#include "dialect/MoEDialect.h"
#include "dialect/MoEAttrs.h"
#include "dialect/MoEOps.h"
#include "dialect/MoESpmdOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::moe;

/// `moe.split = 0 : i64` on a function argument or result of an SPMD
/// function (--moe-shard-experts): the value is this rank's part of a
/// tensor split on dimension 0 over the module's `shard.grid`.
static constexpr llvm::StringLiteral kSplitAttrName("moe.split");

#include "dialect/MoEDialect.cpp.inc"

void MoEDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "dialect/MoEOps.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialect/MoESpmdOps.cpp.inc"
      >();
}

LogicalResult MoEDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == getCausalAttrName()) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be a unit attribute, got "
                             << attr.getValue();
    if (isa<SoftLayerOp>(op))
      return op->emitError()
             << "'" << name
             << "' cannot mark a moe.soft_layer: Soft MoE mixes tokens across "
                "positions inside a group, which a causal layer must not do";
    if (!isa<LayerOp>(op))
      return op->emitError() << "'" << name << "' applies to moe.layer only, not to '"
                             << op->getName() << "'";
    return success();
  }
  bool cpu = name == CpuConfigAttr::getAttrName();
  if (cpu || name == GpuConfigAttr::getAttrName()) {
    if (cpu ? !isa<CpuConfigAttr>(attr.getValue()) : !isa<GpuConfigAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be a #" << name << ", got "
                             << attr.getValue();
    if (!takesLoweringConfig(op))
      return op->emitError() << "'" << name << "' applies to the ops whose "
                             << (cpu ? "CPU" : "GPU")
                             << " lowering emits grouped GEMMs (moe.layer, moe.soft_layer, "
                                "moe.route, moe.expert_ffn, moe.shared_expert, "
                                "moe.fused_experts, moe.fused_soft_experts), not to '"
                             << op->getName() << "'";
    return success();
  }
  // The markers of the GPU lowering (docs/gpu.md): a launch placeholder
  // names its kernel, a kernel its dynamic shared memory, the rest are
  // unit flags.
  if (name == getGpuKernelAttrName()) {
    if (!isa<SymbolRefAttr>(attr.getValue()) || !isa<FunctionOpInterface>(op))
      return op->emitError() << "'" << name
                             << "' must be a symbol reference to a kernel on a function "
                                "(a launch placeholder), got "
                             << attr.getValue() << " on '" << op->getName() << "'";
    return success();
  }
  if (name == getGpuDynamicSharedMemoryAttrName()) {
    auto bytes = dyn_cast<IntegerAttr>(attr.getValue());
    if (!bytes || bytes.getValue().isNegative() || !isa<FunctionOpInterface>(op))
      return op->emitError() << "'" << name
                             << "' must be a non-negative integer (bytes) on a kernel, got "
                             << attr.getValue() << " on '" << op->getName() << "'";
    return success();
  }
  if (name == getGpuDeviceResultAttrName() || name == getGpuStreamOrderedAttrName() ||
      name == getGpuDeviceElementwiseAttrName()) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be a unit attribute, got "
                             << attr.getValue();
    if (name == getGpuStreamOrderedAttrName() && !isa<FunctionOpInterface>(op))
      return op->emitError() << "'" << name << "' marks a function, not '" << op->getName()
                             << "'";
    return success();
  }
  if (name == getParamAttrName())
    return op->emitError() << "'" << name
                           << "' is a function-argument attribute; it cannot "
                              "be attached to an operation";
  return op->emitError() << "unknown moe dialect attribute '" << name << "'";
}

LogicalResult MoEDialect::verifyRegionArgAttribute(Operation *op,
                                                   unsigned regionIndex,
                                                   unsigned argIndex,
                                                   NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == getParamAttrName()) {
    if (auto checkpoint = dyn_cast<CheckpointAttr>(attr.getValue())) {
      // The attribute checked its names itself; here, what `{e}` asks of
      // the argument (the expert count as a static leading dimension) and
      // what fp8_scales ask (values of a float type to dequantize into).
      Type type;
      if (auto fn = dyn_cast<FunctionOpInterface>(op);
          fn && argIndex < fn.getNumArguments())
        type = fn.getArgumentTypes()[argIndex];
      else if (op->getNumRegions() > regionIndex &&
          !op->getRegion(regionIndex).empty() &&
          argIndex < op->getRegion(regionIndex).getNumArguments())
        type = op->getRegion(regionIndex).getArgument(argIndex).getType();
      // (A memref once the function is bufferized.)
      auto shaped = dyn_cast_or_null<ShapedType>(type);
      const bool floats = shaped && (shaped.getElementType().isF32() ||
                                     shaped.getElementType().isF16() ||
                                     shaped.getElementType().isBF16());
      // Dequantized at load (fp8_scales, int4_scales): values of a float type.
      for (auto [dequantized, what] :
           {std::pair(!checkpoint.getFp8Scales().empty(), "FP8 tensors (fp8_scales)"),
            std::pair(!checkpoint.getInt4Scales().empty(), "int4 weights (int4_scales)")})
        if (dequantized && !floats)
          return op->emitError() << "'" << name << "' on argument #" << argIndex
                                 << " dequantizes " << what
                                 << ", so the argument must be a tensor of f32, f16 or bf16, got "
                                 << type;
      if (checkpoint.getInt4() != Int4Packing::none && checkpoint.getInt4Scales().empty() &&
          !(shaped && shaped.getElementType().isInteger(4)))
        return op->emitError()
               << "'" << name << "' on argument #" << argIndex
               << " unpacks int4 codes (int4 = " << stringifyInt4Packing(checkpoint.getInt4())
               << "), so the argument must be a tensor of i4, got " << type;
      if (!checkpoint.isPerExpert())
        return success();
      if (!shaped || !shaped.hasRank() || shaped.getRank() < 1 ||
          ShapedType::isDynamic(shaped.getDimSize(0)))
        return op->emitError()
               << "'" << name << "' on argument #" << argIndex
               << " stacks per-expert tensors ({e}), so the argument must be "
                  "a ranked tensor whose leading dimension (the expert "
                  "count) is static, got "
               << type;
      return success();
    }
    auto str = dyn_cast<StringAttr>(attr.getValue());
    if (!str || str.getValue().empty())
      return op->emitError() << "'" << name << "' on argument #" << argIndex
                             << " must be a non-empty string naming a tensor "
                                "of the parameters file or a "
                                "#moe.checkpoint<...>, got "
                             << attr.getValue();
    return success();
  }
  if (name == kSplitAttrName) {
    auto dim = dyn_cast<IntegerAttr>(attr.getValue());
    if (!dim || dim.getInt() != 0)
      return op->emitError() << "'" << name << "' on argument #" << argIndex
                             << " must be 0 : i64 (split on dimension 0 over "
                                "the module's shard.grid), got "
                             << attr.getValue();
    return success();
  }
  return op->emitError() << "unknown moe dialect argument attribute '" << name
                         << "' on argument #" << argIndex;
}
