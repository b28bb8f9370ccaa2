//===- KernelMath.cpp - --moe-gpu-kernel-math -----------------------------===//
//
// The kernels' transcendental math as MLIR's polynomial approximations (the
// CPU kernels' vector math, lowering/cpu/VectorMath.cpp, is the same code),
// so that no kernel calls libdevice: the PTX needs no CUDA toolkit, and the
// host emulation of a kernel runs the arithmetic the device runs.
//
//===----------------------------------------------------------------------===//

#include "lowering/gpu/Passes.h"

#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "moe-gpu-kernel-math"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEGPUKERNELMATH
#include "lowering/gpu/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

namespace {

/// The math ops left after the approximations: exactly those
/// --moe-gpu-math-to-nvvm (MathToNVVM.cpp) turns into NVVM intrinsics or bit
/// arithmetic, never a libdevice call. Anything else is an error here, not
/// later in the NVPTX pipeline.
bool hasNVPTXInstruction(Operation *op) {
  return isa<math::AbsFOp, math::CeilOp, math::FloorOp, math::FmaOp, math::SqrtOp,
             math::RsqrtOp>(op);
}

/// A math op on f16 or bf16 (scalars or vectors) computed in f32 and
/// rounded back: the approximations are f32 ones, and f32 is what the CPU
/// computes narrow activations in.
struct ExtendNarrowFloats : RewritePattern {
  ExtendNarrowFloats(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/2, context) {}
  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rewriter) const override {
    if (!isa_and_nonnull<math::MathDialect>(op->getDialect()) || hasNVPTXInstruction(op) ||
        op->getNumResults() != 1 || op->getNumRegions() != 0)
      return failure();
    Type type = op->getResult(0).getType();
    auto narrow = dyn_cast<FloatType>(getElementTypeOrSelf(type));
    if (!narrow || narrow.getWidth() != 16 ||
        llvm::any_of(op->getOperandTypes(), [&](Type t) { return t != type; }))
      return failure();
    Type wide = rewriter.getF32Type();
    if (auto vector = dyn_cast<VectorType>(type))
      wide = vector.clone(wide);
    SmallVector<Value> operands;
    for (Value operand : op->getOperands())
      operands.push_back(arith::ExtFOp::create(rewriter, op->getLoc(), wide, operand));
    OperationState state(op->getLoc(), op->getName(), operands, TypeRange{wide},
                         op->getAttrs());
    Operation *wideOp = rewriter.create(state);
    rewriter.replaceOpWithNewOp<arith::TruncFOp>(op, type, wideOp->getResult(0));
    return success();
  }
};

struct MoEGPUKernelMathPass : public moe::impl::MoEGPUKernelMathBase<MoEGPUKernelMathPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName()
                            << " at " << getOperation()->getLoc() << "\n");
    SmallVector<Operation *> math;
    getOperation()->walk([&](Operation *op) {
      if (isa_and_nonnull<math::MathDialect>(op->getDialect()) && !hasNVPTXInstruction(op))
        math.push_back(op);
    });
    if (!math.empty()) {
      RewritePatternSet patterns(&getContext());
      patterns.add<ExtendNarrowFloats>(&getContext());
      populateMathPolynomialApproximationPatterns(patterns, [](StringRef) { return true; });
      GreedyRewriteConfig config;
      config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
      if (failed(applyOpPatternsGreedily(math, std::move(patterns), config)))
        return signalPassFailure();
    }
    // What is left must have an instruction: anything else would become a
    // libdevice call (and an unresolved function in PTX built without the
    // toolkit).
    WalkResult result = getOperation()->walk([&](Operation *op) {
      if (!isa_and_nonnull<math::MathDialect>(op->getDialect()))
        return WalkResult::advance();
      if (hasNVPTXInstruction(op))
        return WalkResult::advance();
      op->emitOpError() << "in a GPU kernel has no polynomial form for "
                        << op->getResultTypes()
                        << "; it would need libdevice, which the MoE kernels do not link";
      return WalkResult::interrupt();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
