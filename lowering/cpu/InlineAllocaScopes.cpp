//===- InlineAllocaScopes.cpp - alloca scopes as stack save/restore -------===//
//
// `--moe-cpu-inline-alloca-scopes`: a memref.alloca_scope with one block
// becomes its body between llvm.intr.stacksave and llvm.intr.stackrestore.
//
//===----------------------------------------------------------------------===//

#include "lowering/cpu/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOECPUINLINEALLOCASCOPES
#include "lowering/cpu/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

namespace {

struct InlineAllocaScope : public OpRewritePattern<memref::AllocaScopeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(memref::AllocaScopeOp op,
                                PatternRewriter &rewriter) const override {
    Region &region = op.getBodyRegion();
    if (!region.hasOneBlock())
      return rewriter.notifyMatchFailure(op, "the scope's region is not one block");
    Location loc = op.getLoc();
    Value sp =
        LLVM::StackSaveOp::create(rewriter, loc, LLVM::LLVMPointerType::get(op.getContext()));
    Block *body = &region.front();
    auto ret = cast<memref::AllocaScopeReturnOp>(body->getTerminator());
    SmallVector<Value> results(ret.getResults());
    rewriter.inlineBlockBefore(body, op);
    rewriter.setInsertionPoint(ret);
    LLVM::StackRestoreOp::create(rewriter, loc, sp);
    rewriter.eraseOp(ret);
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct MoECpuInlineAllocaScopesPass
    : public moe::impl::MoECpuInlineAllocaScopesBase<MoECpuInlineAllocaScopesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<InlineAllocaScope>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
