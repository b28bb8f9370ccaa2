//===- DenseToMoESART.cpp - #moe.dense layers -> #moe.moesart -------------===//

#include "dialect/MoEOps.h"
#include "passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

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
    auto fail = [&](const Twine &msg) {
      emitError(UnknownLoc::get(ctx)) << "moe-dense-to-moesart: " << msg;
      return failure();
    };
    std::optional<MoesartAdjust> parsed = symbolizeMoesartAdjust(adjust);
    if (!parsed)
      return fail("unknown adjust '" + adjust +
                  "' (expected small_random, zero or large)");
    if (k < 1)
      return fail("k must be >= 1, got " + Twine(static_cast<int64_t>(k)));
    if (!(trimmedLasso >= 0.0) || std::isinf(trimmedLasso))
      return fail("trimmed-lasso must be a finite number >= 0, got " +
                  std::to_string(static_cast<double>(trimmedLasso)));
    routing = MoesartRoutingAttr::get(ctx, k, *parsed, llvm::APFloat(trimmedLasso));
    return success();
  }

  void runOnOperation() override {
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
