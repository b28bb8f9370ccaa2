//===- ExpandBF16.cpp - bf16 conversions as integer arithmetic (host) -----===//
//
// `--moe-host-expand-bf16`: arith.truncf to bf16 and arith.extf from bf16
// (scalars and vectors) become integer arithmetic on the f32 bits, with
// upstream's patterns (arith::populateExpandBFloat16Patterns): truncation
// rounds to nearest, ties to even (docs/spec.md), keeps subnormals and
// quiets NaNs. Without it the x86 backend emits a call of __truncsfbf2 on a
// CPU without AVX512_BF16 (a symbol neither libgcc 12 nor libc has, so the
// JIT or the link of an AOT library fails), and vcvtneps2bf16, which treats
// subnormal inputs as zero, on a CPU with it: the host's bf16 results would
// depend on the host.
//
//===----------------------------------------------------------------------===//

#include "lowering/cpu/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "moe-host-expand-bf16"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEHOSTEXPANDBF16
#include "lowering/cpu/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

namespace {

/// Whether `op` converts between f32 and bf16 (element types).
bool isBF16Conversion(Operation *op) {
  if (!isa<arith::TruncFOp, arith::ExtFOp>(op))
    return false;
  Type in = getElementTypeOrSelf(op->getOperand(0).getType());
  Type out = getElementTypeOrSelf(op->getResult(0).getType());
  return (in.isF32() && out.isBF16()) || (in.isBF16() && out.isF32());
}

struct HostExpandBF16Pass : public moe::impl::MoEHostExpandBF16Base<HostExpandBF16Pass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    SmallVector<Operation *> conversions;
    getOperation()->walk([&](Operation *op) {
      if (isBF16Conversion(op))
        conversions.push_back(op);
    });
    if (conversions.empty())
      return;
    RewritePatternSet patterns(&getContext());
    arith::populateExpandBFloat16Patterns(patterns);
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingOps);
    if (failed(applyOpPatternsGreedily(conversions, std::move(patterns), config)))
      return signalPassFailure();
  }
};

} // namespace
