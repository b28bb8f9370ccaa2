//===- VectorMath.cpp - polynomial approximations for vector math (CPU) ---===//

#include "lowering/cpu/Passes.h"

#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "moe-cpu-vector-math"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOECPUVECTORMATH
#include "lowering/cpu/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

namespace {

struct MoECpuVectorMathPass : public moe::impl::MoECpuVectorMathBase<MoECpuVectorMathPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName()
                            << " at " << getOperation()->getLoc() << "\n");
    SmallVector<Operation *> vectorMath;
    getOperation()->walk([&](Operation *op) {
      if (op->getDialect() && isa<math::MathDialect>(op->getDialect()) &&
          llvm::any_of(op->getResultTypes(), [](Type t) { return isa<VectorType>(t); }))
        vectorMath.push_back(op);
    });
    if (vectorMath.empty())
      return;
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns, [](StringRef) { return true; });
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
    if (failed(applyOpPatternsGreedily(vectorMath, std::move(patterns), config)))
      return signalPassFailure();
  }
};

} // namespace
