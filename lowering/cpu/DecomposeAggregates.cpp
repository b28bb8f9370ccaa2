//===- DecomposeAggregates.cpp - linalg.softmax & co. for the CPU ---------===//
//
// `--moe-cpu-decompose-aggregates`: ops implementing
// linalg::AggregatedOpInterface (linalg.softmax) become the structured ops
// their decomposeOperation builds, so the rest of the CPU pipeline
// (linalg -> loops -> LLVM) handles them.
//
//===----------------------------------------------------------------------===//

#include "lowering/cpu/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "moe-cpu-decompose-aggregates"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOECPUDECOMPOSEAGGREGATES
#include "lowering/cpu/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

namespace {

struct DecomposeAggregate
    : public OpInterfaceRewritePattern<linalg::AggregatedOpInterface> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;
  LogicalResult matchAndRewrite(linalg::AggregatedOpInterface op,
                                PatternRewriter &rewriter) const override {
    FailureOr<SmallVector<Value>> parts = op.decomposeOperation(rewriter);
    if (failed(parts))
      return rewriter.notifyMatchFailure(op, "decomposeOperation failed");
    rewriter.replaceOp(op, *parts);
    return success();
  }
};

struct MoECpuDecomposeAggregatesPass
    : public moe::impl::MoECpuDecomposeAggregatesBase<
          MoECpuDecomposeAggregatesPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName()
                            << " at " << getOperation()->getLoc() << "\n");
    RewritePatternSet patterns(&getContext());
    patterns.add<DecomposeAggregate>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    // Whatever could not be decomposed would fail much later, in the LLVM
    // translation, without naming the op: say it here.
    WalkResult left = getOperation()->walk([](linalg::AggregatedOpInterface op) {
      op->emitError("cannot be decomposed for the CPU pipeline");
      return WalkResult::interrupt();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
