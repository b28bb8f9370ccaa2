//===- Decompose.cpp - layers -> route/gate/dispatch/expert/combine -------===//

#include "dialect/MoEOps.h"
#include "passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/MathExtras.h"

#include <limits>
#include <string>

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "moe-decompose"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEDECOMPOSE
#include "passes/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

static RankedTensorType tensorOf(ArrayRef<int64_t> shape, Type elt) {
  return RankedTensorType::get(shape, elt);
}

static int64_t mulDims(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) ? ShapedType::kDynamic
                                                              : a * b;
}

/// Why a layer cannot be decomposed, or "" when it can.
std::string whyNotDecomposable(Operation *op) {
  if (auto layer = dyn_cast<LayerOp>(op)) {
    int64_t numExperts = layer.getNumExperts();
    if (ShapedType::isDynamic(numExperts))
      return "the number of experts is dynamic, and the dispatch plan needs it";
    int64_t tokens = layer.getInput().getType().getDimSize(0);
    int64_t k = layer.getRouting().getExpertsPerToken(numExperts);
    int64_t rows;
    if (!ShapedType::isDynamic(tokens) &&
        (llvm::MulOverflow(tokens, k, rows) ||
         rows > std::numeric_limits<int32_t>::max()))
      return "its T * K = " + std::to_string(tokens) + " * " + std::to_string(k) +
             " dispatched rows exceed 2^31 - 1, and moe.dispatch indexes rows "
             "with i32";
    return "";
  }
  if (auto soft = dyn_cast<SoftLayerOp>(op))
    if (ShapedType::isDynamic(soft.getNumExperts()))
      return "the number of experts is dynamic, and the dispatch plan needs it";
  return "";
}

struct DecomposeLayer : public OpRewritePattern<LayerOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LayerOp op, PatternRewriter &rewriter) const override {
    std::string why = whyNotDecomposable(op);
    if (!why.empty())
      return rewriter.notifyMatchFailure(op, why);
    int64_t numExperts = op.getNumExperts();
    Location loc = op.getLoc();
    int64_t tokens = op.getInput().getType().getDimSize(0);

    // Routing is computed in f32 whatever the element type (docs/spec.md §2-§3).
    Type f32 = rewriter.getF32Type();
    auto route = RouteOp::create(rewriter, loc, tensorOf({tokens, numExperts}, f32),
                                 op.getInput(), op.getRouterWeight(),
                                 op.getRouterBias());
    // The gate's and the dispatch's result types are inferred.
    auto gate = GateOp::create(rewriter, loc, route.getLogits(), op.getSelectionBias(),
                               op.getSeed(), op.getRouting(), op.getTraining());
    auto dispatch = DispatchOp::create(rewriter, loc, op.getInput(), gate.getIndices(),
                                       rewriter.getI64IntegerAttr(numExperts),
                                       op.getCapacityFactorAttr());
    auto ffn = ExpertFFNOp::create(rewriter, loc, dispatch.getRows().getType(),
                                   dispatch.getRows(), dispatch.getOffsets(),
                                   op.getW1(), op.getW2(), op.getW1Scale(), op.getW2Scale(),
                                   op.getW1ZeroPoint(), op.getW2ZeroPoint(), op.getB1(),
                                   op.getB2(), op.getActivationAttr(), op.getQuantAttr());
    // The shared expert runs on every token; its f32 output joins the sum
    // before y is rounded.
    Value shared;
    if (op.getSharedW1())
      shared = SharedExpertOp::create(rewriter, loc, op.getInput(), op.getSharedW1(),
                                      op.getSharedW2(),
                                      op.getSharedGate(), op.getActivationAttr());
    auto combine = CombineOp::create(rewriter, loc, op.getOutput().getType(),
                                     ffn.getOutput(), gate.getWeights(),
                                     dispatch.getPositions(), shared);
    // The CPU strategy chosen for the layer is its chain's.
    copyLoweringConfig(op, route);
    copyLoweringConfig(op, ffn);
    if (shared)
      copyLoweringConfig(op, shared.getDefiningOp());
    SmallVector<Value> results{combine.getOutput()};
    if (op.getAuxLoss())
      results.push_back(gate.getAuxLoss());
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct DecomposeSoftLayer : public OpRewritePattern<SoftLayerOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SoftLayerOp op,
                                PatternRewriter &rewriter) const override {
    auto xType = op.getInput().getType();
    auto phiType = op.getSlots().getType();
    int64_t numExperts = op.getNumExperts();
    if (ShapedType::isDynamic(numExperts))
      return rewriter.notifyMatchFailure(op, "the number of experts is dynamic");
    Location loc = op.getLoc();
    Type elt = xType.getElementType();
    int64_t groups = xType.getDimSize(0), tokens = xType.getDimSize(1),
            modelDim = xType.getDimSize(2), slots = phiType.getDimSize(2);
    int64_t rows = mulDims(mulDims(numExperts, groups), slots);
    auto dispatch = SoftDispatchOp::create(
        rewriter, loc, tensorOf({rows, modelDim}, elt),
        tensorOf({numExperts + 1}, rewriter.getI32Type()),
        tensorOf({groups, tokens, numExperts, slots}, elt), op.getInput(),
        op.getSlots(), op.getScale(), op.getNormalize());
    auto ffn = ExpertFFNOp::create(rewriter, loc, dispatch.getRows().getType(),
                                   dispatch.getRows(), dispatch.getOffsets(),
                                   op.getW1(), op.getW2(), Value(), Value(), Value(), Value(),
                                   op.getB1(), op.getB2(), op.getActivationAttr(),
                                   QuantAttr());
    copyLoweringConfig(op, ffn);
    rewriter.replaceOpWithNewOp<SoftCombineOp>(op, op.getOutput().getType(),
                                               ffn.getOutput(),
                                               dispatch.getCombineWeights());
    return success();
  }
};

struct MoEDecomposePass : public moe::impl::MoEDecomposeBase<MoEDecomposePass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName()
                            << " at " << getOperation()->getLoc() << "\n");
    RewritePatternSet patterns(&getContext());
    populateDecompositionPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // Say why a layer was left alone.
    getOperation()->walk([](Operation *op) {
      if (isa<LayerOp, SoftLayerOp>(op))
        op->emitWarning() << "'" << op->getName()
                          << "' not decomposed: " << whyNotDecomposable(op);
    });
  }
};

} // namespace

void moe::populateDecompositionPatterns(RewritePatternSet &patterns) {
  patterns.add<DecomposeLayer, DecomposeSoftLayer>(patterns.getContext());
}
