//===- DenseToMoESART.cpp - #moe.dense layers -> #moe.moesart -------------===//

#include "dialect/MoEOps.h"
#include "passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "moe-dense-to-moesart"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEDENSETOMOESART
#include "passes/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

struct DenseToMoESART : public OpRewritePattern<LayerOp> {
  DenseToMoESART(MLIRContext *ctx, MoesartRoutingAttr routing)
      : OpRewritePattern(ctx), routing(routing) {}

  LogicalResult matchAndRewrite(LayerOp op, PatternRewriter &rewriter) const override {
    if (!isa<DenseRoutingAttr>(op.getRouting()))
      return rewriter.notifyMatchFailure(op, "not a dense layer");
    // Only rewrite what verifies afterwards; the pass reports the rest.
    if (!canApply(op))
      return rewriter.notifyMatchFailure(op, "routing does not fit the layer");
    rewriter.modifyOpInPlace(op, [&] { op.setRoutingAttr(routing); });
    return success();
  }

  bool canApply(LayerOp op) const {
    int64_t e = op.getNumExperts();
    if (!ShapedType::isDynamic(e) && routing.getK() > e)
      return false;
    return !(op.getTraining() && routing.getAdjust() == MoesartAdjust::small_random &&
             routing.getK() < 2);
  }

  MoesartRoutingAttr routing;
};

struct MoEDenseToMoESARTPass
    : public moe::impl::MoEDenseToMoESARTBase<MoEDenseToMoESARTPass> {
  using MoEDenseToMoESARTBase::MoEDenseToMoESARTBase;

  LogicalResult initialize(MLIRContext *ctx) override {
    // The options are checked by the attribute's own verifier (k >= 1, a
    // finite lambda >= 0); `adjust` is an enum option, parsed by ODS.
    routing = MoesartRoutingAttr::getChecked(
        [&] {
          return emitError(UnknownLoc::get(ctx)) << "moe-dense-to-moesart: ";
        },
        ctx, static_cast<int64_t>(k), static_cast<MoesartAdjust>(adjust),
        llvm::APFloat(static_cast<double>(trimmedLasso)));
    return success(static_cast<bool>(routing));
  }

  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName()
                            << " at " << getOperation()->getLoc() << "\n");
    // Layers that are not dense are not candidates: say so.
    getOperation()->walk([&](LayerOp op) {
      if (isa<DenseRoutingAttr>(op.getRouting()))
        return;
      op.emitRemark() << "layer left unchanged: its routing is " << op.getRouting()
                      << ", and --moe-dense-to-moesart rewrites only #moe.dense layers";
    });
    RewritePatternSet patterns(&getContext());
    patterns.add<DenseToMoESART>(&getContext(), routing);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // Dense layers left behind: say why.
    getOperation()->walk([&](LayerOp op) {
      if (!isa<DenseRoutingAttr>(op.getRouting()))
        return;
      int64_t e = op.getNumExperts();
      if (!ShapedType::isDynamic(e) && k > e)
        op.emitWarning() << "dense layer left unchanged: k = " << static_cast<int64_t>(k)
                         << " exceeds its E = " << e << " experts";
      else
        op.emitWarning() << "dense layer left unchanged: adjust = small_random "
                            "needs k >= 2 in training mode, got k = "
                         << static_cast<int64_t>(k);
    });
  }

  MoesartRoutingAttr routing;
};

} // namespace
