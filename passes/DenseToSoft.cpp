//===- DenseToSoft.cpp - #moe.dense layers -> moe.soft_layer --------------===//

#include "dialect/MoEOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "moe-dense-to-soft"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEDENSETOSOFT
#include "passes/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

/// The most slot rows (E * G * S) a Soft MoE layer may have.
constexpr int64_t kMaxRows = std::numeric_limits<int32_t>::max();

/// Whether a layer is a candidate at all (dense, not causal).
static bool isCandidate(LayerOp op) {
  return isa<DenseRoutingAttr>(op.getRouting()) && !op.isCausal() && !op.getSharedW1();
}

/// The group size M for a layer, or failure with a diagnostic.
static FailureOr<int64_t> groupSizeFor(LayerOp op, int64_t requested) {
  int64_t tokens = op.getInput().getType().getDimSize(0);
  if (ShapedType::isDynamic(tokens))
    return op.emitError() << "cannot turn this dense layer into Soft MoE: the "
                             "number of tokens T is dynamic, and regrouping "
                             "[T, D] into [T/M, M, D] needs it";
  int64_t m = requested == 0 ? tokens : requested;
  if (m <= 0 || tokens % m != 0)
    return op.emitError() << "cannot turn this dense layer into Soft MoE: "
                             "group-size = "
                          << m << " does not divide the T = " << tokens
                          << " tokens";
  return m;
}

struct DenseToSoft : public OpRewritePattern<LayerOp> {
  DenseToSoft(MLIRContext *ctx, int64_t slots, int64_t groupSize, bool normalize)
      : OpRewritePattern(ctx), slots(slots), groupSize(groupSize),
        normalize(normalize) {}

  LogicalResult matchAndRewrite(LayerOp op, PatternRewriter &rewriter) const override {
    if (!isCandidate(op))
      return rewriter.notifyMatchFailure(op, "not a dense, non-causal layer");
    auto xType = op.getInput().getType();
    int64_t tokens = xType.getDimSize(0), modelDim = xType.getDimSize(1);
    if (ShapedType::isDynamic(tokens))
      return rewriter.notifyMatchFailure(op, "dynamic token count");
    int64_t m = groupSize == 0 ? tokens : groupSize;
    if (m <= 0 || tokens % m != 0)
      return rewriter.notifyMatchFailure(op, "group size does not divide T");
    int64_t groups = tokens / m;
    Location loc = op.getLoc();
    Type elt = xType.getElementType();
    auto wrType = op.getRouterWeight().getType();
    int64_t numExperts = wrType.getDimSize(1);

    // [T, D] -> [G, M, D].
    SmallVector<ReassociationIndices> regroup{{0, 1}, {2}};
    auto groupedType = RankedTensorType::get({groups, m, modelDim}, elt);
    SmallVector<OpFoldResult> groupedShape{rewriter.getIndexAttr(groups),
                                           rewriter.getIndexAttr(m)};
    if (ShapedType::isDynamic(modelDim))
      groupedShape.push_back(
          tensor::DimOp::create(rewriter, loc, op.getInput(), 1).getResult());
    else
      groupedShape.push_back(rewriter.getIndexAttr(modelDim));
    Value grouped = tensor::ExpandShapeOp::create(rewriter, loc, groupedType,
                                                  op.getInput(), regroup, groupedShape);

    // Phi[:, e, s] = Wr[:, e]: broadcast the router weight over S slots.
    SmallVector<OpFoldResult> phiShape;
    for (int64_t i = 0; i < 2; ++i) {
      if (wrType.isDynamicDim(i))
        phiShape.push_back(
            tensor::DimOp::create(rewriter, loc, op.getRouterWeight(), i).getResult());
      else
        phiShape.push_back(rewriter.getIndexAttr(wrType.getDimSize(i)));
    }
    phiShape.push_back(rewriter.getIndexAttr(slots));
    Value phiInit = tensor::EmptyOp::create(rewriter, loc, phiShape, elt);
    Value phi = linalg::BroadcastOp::create(rewriter, loc, op.getRouterWeight(),
                                            phiInit, ArrayRef<int64_t>{2})
                    ->getResult(0);
    (void)numExperts;

    auto soft = SoftLayerOp::create(rewriter, loc, groupedType, grouped, phi,
                                    /*scale=*/Value(), op.getW1(), op.getW2(),
                                    op.getB1(), op.getB2(), op.getActivationAttr(),
                                    normalize ? rewriter.getUnitAttr() : UnitAttr());
    Value y = tensor::CollapseShapeOp::create(rewriter, loc, op.getOutput().getType(),
                                              soft.getOutput(), regroup);
    SmallVector<Value> results{y};
    if (op.getAuxLoss()) {
      auto lossType = cast<RankedTensorType>(op.getAuxLoss().getType());
      results.push_back(arith::ConstantOp::create(
          rewriter, loc, DenseElementsAttr::get(lossType, rewriter.getF32FloatAttr(0.0f))));
    }
    rewriter.replaceOp(op, results);
    return success();
  }

  int64_t slots, groupSize;
  bool normalize;
};

struct MoEDenseToSoftPass : public moe::impl::MoEDenseToSoftBase<MoEDenseToSoftPass> {
  using MoEDenseToSoftBase::MoEDenseToSoftBase;

  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName()
                            << " at " << getOperation()->getLoc() << "\n");
    if (failed(rejectQuantizedLayers(getOperation(), "--moe-dense-to-soft")))
      return signalPassFailure();
    if (slotsPerExpert < 1) {
      emitError(getOperation()->getLoc())
          << "moe-dense-to-soft: slots-per-expert must be >= 1, got "
          << static_cast<int64_t>(slotsPerExpert);
      return signalPassFailure();
    }
    // The E*G*S slot rows are indexed with i32 (moe.soft_dispatch offsets).
    if (slotsPerExpert > kMaxRows) {
      emitError(getOperation()->getLoc())
          << "moe-dense-to-soft: slots-per-expert must be <= 2^31 - 1 (slot "
             "rows are indexed with i32), got "
          << static_cast<int64_t>(slotsPerExpert);
      return signalPassFailure();
    }
    if (groupSize < 0) {
      emitError(getOperation()->getLoc())
          << "moe-dense-to-soft: group-size must be >= 0, got "
          << static_cast<int64_t>(groupSize);
      return signalPassFailure();
    }
    // Check every candidate first, so that a bad group size changes nothing.
    bool ok = true;
    getOperation()->walk([&](LayerOp op) {
      if (!isa<DenseRoutingAttr>(op.getRouting()))
        return;
      if (op.isCausal()) {
        op.emitWarning() << "layer marked moe.causal left unchanged: Soft MoE "
                            "mixes tokens across positions inside a group, "
                            "which a causal layer must not do";
        return;
      }
      if (op.getSharedW1()) {
        op.emitWarning() << "dense layer with a shared expert left unchanged: "
                            "Soft MoE (docs/spec.md §3.2) defines no shared expert";
        return;
      }
      FailureOr<int64_t> m = groupSizeFor(op, groupSize);
      if (failed(m)) {
        ok = false;
        return;
      }
      // E * G * S rows (E experts, G = T / M groups, S slots) must fit in
      // i32 where E is known.
      int64_t tokens = op.getInput().getType().getDimSize(0);
      int64_t numExperts = op.getNumExperts();
      int64_t rows;
      if (!ShapedType::isDynamic(numExperts) &&
          (llvm::MulOverflow(numExperts, tokens / *m, rows) ||
           llvm::MulOverflow(rows, static_cast<int64_t>(slotsPerExpert), rows) ||
           rows > kMaxRows)) {
        op.emitError() << "cannot turn this dense layer into Soft MoE: E * G * S = "
                       << numExperts << " * " << tokens / *m << " * "
                       << static_cast<int64_t>(slotsPerExpert)
                       << " slot rows exceed 2^31 - 1 (they are indexed with i32)";
        ok = false;
      }
    });
    if (!ok)
      return signalPassFailure();

    RewritePatternSet patterns(&getContext());
    patterns.add<DenseToSoft>(&getContext(), slotsPerExpert, groupSize, normalize);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
