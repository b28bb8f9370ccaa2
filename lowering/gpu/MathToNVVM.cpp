//===- MathToNVVM.cpp - --moe-gpu-math-to-nvvm ----------------------------===//
//
// The math ops left in the kernels after --moe-gpu-kernel-math (floor, ceil,
// sqrt, rsqrt, absf) as NVVM intrinsics, so that convert-gpu-to-nvvm does
// not make them libdevice calls.
//
//===----------------------------------------------------------------------===//

#include "lowering/gpu/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "moe-gpu-math-to-nvvm"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEGPUMATHTONVVM
#include "lowering/gpu/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

namespace {

/// `llvm.nvvm.<name>.f` / `.d` on an f32 / f64 scalar; nullptr otherwise.
Value callNVVM(PatternRewriter &rewriter, Location loc, StringRef name, Value x) {
  Type type = x.getType();
  if (!type.isF32() && !type.isF64())
    return nullptr;
  std::string intrinsic = ("llvm.nvvm." + name + (type.isF32() ? ".f" : ".d")).str();
  return LLVM::CallIntrinsicOp::create(rewriter, loc, type,
                                       rewriter.getStringAttr(intrinsic), ValueRange{x})
      .getResult(0);
}

template <typename MathOp>
struct ToIntrinsic : OpRewritePattern<MathOp> {
  ToIntrinsic(MLIRContext *context, StringRef name)
      : OpRewritePattern<MathOp>(context), name(name) {}
  LogicalResult matchAndRewrite(MathOp op, PatternRewriter &rewriter) const override {
    Value r = callNVVM(rewriter, op.getLoc(), name, op.getOperand());
    if (!r)
      return rewriter.notifyMatchFailure(op, "not an f32 or f64 scalar");
    rewriter.replaceOp(op, r);
    return success();
  }
  std::string name;
};

/// rsqrt(x) = 1 / sqrt.rn(x), with a correctly rounded division.
struct RsqrtToIntrinsic : OpRewritePattern<math::RsqrtOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::RsqrtOp op, PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value s = callNVVM(rewriter, loc, "sqrt.rn", op.getOperand());
    if (!s)
      return rewriter.notifyMatchFailure(op, "not an f32 or f64 scalar");
    Value one = arith::ConstantOp::create(rewriter, loc, rewriter.getFloatAttr(s.getType(), 1.0));
    rewriter.replaceOpWithNewOp<arith::DivFOp>(op, one, s);
    return success();
  }
};

/// absf(x): the sign bit cleared (exact, NaN payloads kept).
struct AbsFToBits : OpRewritePattern<math::AbsFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::AbsFOp op, PatternRewriter &rewriter) const override {
    auto type = dyn_cast<FloatType>(op.getType());
    if (!type)
      return rewriter.notifyMatchFailure(op, "not a float scalar");
    Location loc = op.getLoc();
    unsigned width = type.getWidth();
    Type intType = rewriter.getIntegerType(width);
    Value bits = arith::BitcastOp::create(rewriter, loc, intType, op.getOperand());
    Value mask = arith::ConstantOp::create(
        rewriter, loc, rewriter.getIntegerAttr(intType, APInt::getSignedMaxValue(width)));
    Value cleared = arith::AndIOp::create(rewriter, loc, bits, mask);
    rewriter.replaceOpWithNewOp<arith::BitcastOp>(op, type, cleared);
    return success();
  }
};

/// fma as llvm.intr.fma (fma.rn); convert-gpu-to-nvvm would call __nv_fmaf.
struct FmaToIntrinsic : OpRewritePattern<math::FmaOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::FmaOp op, PatternRewriter &rewriter) const override {
    if (!isa<FloatType>(getElementTypeOrSelf(op.getType())))
      return rewriter.notifyMatchFailure(op, "not a float");
    rewriter.replaceOpWithNewOp<LLVM::FMAOp>(op, op.getA(), op.getB(), op.getC());
    return success();
  }
};

struct MoEGPUMathToNVVMPass : public moe::impl::MoEGPUMathToNVVMBase<MoEGPUMathToNVVMPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName()
                            << " at " << getOperation()->getLoc() << "\n");
    MLIRContext *context = &getContext();
    RewritePatternSet patterns(context);
    patterns.add<ToIntrinsic<math::FloorOp>>(context, "floor");
    patterns.add<ToIntrinsic<math::CeilOp>>(context, "ceil");
    patterns.add<ToIntrinsic<math::SqrtOp>>(context, "sqrt.rn");
    patterns.add<RsqrtToIntrinsic, AbsFToBits, FmaToIntrinsic>(context);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    WalkResult result = getOperation()->walk([&](Operation *op) {
      if (!isa_and_nonnull<math::MathDialect>(op->getDialect()))
        return WalkResult::advance();
      op->emitOpError() << "on " << op->getResultTypes()
                        << " has no NVVM instruction here; it would need libdevice, "
                           "which the MoE kernels do not link";
      return WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
