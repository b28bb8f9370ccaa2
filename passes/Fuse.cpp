//===- Fuse.cpp - dispatch -> expert_ffn -> combine => fused op -----------===//

#include "dialect/MoEOps.h"
#include "passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <optional>
#include <string>

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "moe-fuse"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEFUSE
#include "passes/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

/// The chain ending in a combine-like op, if its producers form one.
template <typename DispatchT>
struct Chain {
  DispatchT dispatch;
  ExpertFFNOp ffn;
};

template <typename DispatchT, typename CombineT>
static std::optional<Chain<DispatchT>> matchChain(CombineT combine) {
  auto ffn = combine.getExpertOutput().template getDefiningOp<ExpertFFNOp>();
  if (!ffn)
    return std::nullopt;
  auto dispatch = ffn.getRows().template getDefiningOp<DispatchT>();
  if (!dispatch)
    return std::nullopt;
  return Chain<DispatchT>{dispatch, ffn};
}

static bool onlyUsedBy(Value v, Operation *user) {
  return llvm::all_of(v.getUsers(), [&](Operation *u) { return u == user; });
}

/// Why a token-choice chain cannot fuse, or std::nullopt if it can.
static std::optional<std::string> whyNotFusible(CombineOp combine,
                                                Chain<DispatchOp> c) {
  if (c.ffn.getOffsets() != c.dispatch.getOffsets())
    return std::string("moe.expert_ffn takes its offsets from another op than "
                       "the moe.dispatch that produced its rows (mismatched plans)");
  if (combine.getPositions() != c.dispatch.getPositions())
    return std::string("moe.combine takes its positions from another op than "
                       "the moe.dispatch of the chain (mismatched plans)");
  if (!onlyUsedBy(c.dispatch.getRows(), c.ffn.getOperation()) ||
      !onlyUsedBy(c.dispatch.getOffsets(), c.ffn.getOperation()))
    return std::string("the dispatched rows or offsets are also used outside "
                       "the chain");
  if (!onlyUsedBy(c.dispatch.getPositions(), combine))
    return std::string("the dispatch positions are also used outside the chain");
  if (!c.dispatch.getSourceRows().use_empty())
    return std::string("the dispatch source_rows are used outside the chain");
  if (!onlyUsedBy(c.ffn.getOutput(), combine))
    return std::string("the expert outputs are also used outside the chain");
  return std::nullopt;
}

/// Why a soft chain cannot fuse, or std::nullopt if it can.
static std::optional<std::string> whyNotFusible(SoftCombineOp combine,
                                                Chain<SoftDispatchOp> c) {
  if (c.ffn.getOffsets() != c.dispatch.getOffsets())
    return std::string("moe.expert_ffn takes its offsets from another op than "
                       "the moe.soft_dispatch that produced its rows (mismatched plans)");
  if (combine.getCombineWeights() != c.dispatch.getCombineWeights())
    return std::string("moe.soft_combine takes its combine weights from another "
                       "op than the moe.soft_dispatch of the chain (mismatched plans)");
  if (!onlyUsedBy(c.dispatch.getRows(), c.ffn.getOperation()) ||
      !onlyUsedBy(c.dispatch.getOffsets(), c.ffn.getOperation()))
    return std::string("the slot rows or offsets are also used outside the chain");
  if (!onlyUsedBy(c.dispatch.getCombineWeights(), combine))
    return std::string("the combine weights are also used outside the chain");
  if (!onlyUsedBy(c.ffn.getOutput(), combine))
    return std::string("the expert outputs are also used outside the chain");
  return std::nullopt;
}

struct FuseTokenChoice : public OpRewritePattern<CombineOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CombineOp combine, PatternRewriter &rewriter) const override {
    auto chain = matchChain<DispatchOp>(combine);
    if (!chain)
      return rewriter.notifyMatchFailure(combine, "not a dispatch->ffn->combine chain");
    if (auto reason = whyNotFusible(combine, *chain))
      return rewriter.notifyMatchFailure(combine, *reason);
    DispatchOp dispatch = chain->dispatch;
    ExpertFFNOp ffn = chain->ffn;
    auto fused = rewriter.replaceOpWithNewOp<FusedExpertsOp>(
        combine, combine.getOutput().getType(), dispatch.getInput(),
        dispatch.getIndices(), combine.getWeights(), ffn.getW1(), ffn.getW2(),
        ffn.getW1Scale(), ffn.getW2Scale(), ffn.getW1ZeroPoint(), ffn.getW2ZeroPoint(),
        ffn.getB1(), ffn.getB2(), combine.getSharedOutput(), dispatch.getNumExpertsAttr(),
        ffn.getActivationAttr(), dispatch.getCapacityFactorAttr(), ffn.getQuantAttr());
    copyLoweringConfig(ffn, fused);
    rewriter.eraseOp(ffn);
    rewriter.eraseOp(dispatch);
    return success();
  }
};

struct FuseSoft : public OpRewritePattern<SoftCombineOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftCombineOp combine,
                                PatternRewriter &rewriter) const override {
    auto chain = matchChain<SoftDispatchOp>(combine);
    if (!chain)
      return rewriter.notifyMatchFailure(combine, "not a soft dispatch->ffn->combine chain");
    if (auto reason = whyNotFusible(combine, *chain))
      return rewriter.notifyMatchFailure(combine, *reason);
    SoftDispatchOp dispatch = chain->dispatch;
    ExpertFFNOp ffn = chain->ffn;
    auto fused = rewriter.replaceOpWithNewOp<FusedSoftExpertsOp>(
        combine, combine.getOutput().getType(), dispatch.getInput(),
        dispatch.getSlots(), dispatch.getScale(), ffn.getW1(), ffn.getW2(),
        ffn.getB1(), ffn.getB2(), ffn.getActivationAttr(), dispatch.getNormalizeAttr());
    copyLoweringConfig(ffn, fused);
    rewriter.eraseOp(ffn);
    rewriter.eraseOp(dispatch);
    return success();
  }
};

struct MoEFusePass : public moe::impl::MoEFuseBase<MoEFusePass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName()
                            << " at " << getOperation()->getLoc() << "\n");
    RewritePatternSet patterns(&getContext());
    populateFusionPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // Chains left unfused: say why.
    getOperation()->walk([](Operation *op) {
      std::optional<std::string> reason;
      if (auto combine = dyn_cast<CombineOp>(op)) {
        if (auto chain = matchChain<DispatchOp>(combine))
          reason = whyNotFusible(combine, *chain);
      } else if (auto combine = dyn_cast<SoftCombineOp>(op)) {
        if (auto chain = matchChain<SoftDispatchOp>(combine))
          reason = whyNotFusible(combine, *chain);
      }
      if (reason)
        op->emitRemark() << "chain not fused: " << *reason;
    });
  }
};

} // namespace

void moe::populateFusionPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseTokenChoice, FuseSoft>(patterns.getContext());
}
