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
// `--moe-host-bf16-memory-as-i16`: afterwards, on the LLVM dialect, the bf16
// loads and stores move i16 instead, so that LLVM never sees a bf16 value
// it could turn into arithmetic (Passes.td has why).
//
//===----------------------------------------------------------------------===//

#include "lowering/cpu/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "moe-host-expand-bf16"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEHOSTEXPANDBF16
#define GEN_PASS_DEF_MOEHOSTBF16MEMORYASI16
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

/// The i16 type of the shape of `type` when it is bf16 or a vector of bf16;
/// null otherwise.
Type asI16(Type type) {
  if (type.isBF16())
    return IntegerType::get(type.getContext(), 16);
  if (auto vector = dyn_cast<VectorType>(type); vector && vector.getElementType().isBF16())
    return vector.clone(IntegerType::get(type.getContext(), 16));
  return nullptr;
}

/// `value` (bf16) as i16: the operand of the bitcast that made it, or a new
/// bitcast.
Value bitsOf(PatternRewriter &rewriter, Location loc, Value value, Type i16) {
  if (auto cast = value.getDefiningOp<LLVM::BitcastOp>(); cast && cast.getArg().getType() == i16)
    return cast.getArg();
  return LLVM::BitcastOp::create(rewriter, loc, i16, value);
}

/// A bf16 result of `op` (a load) becomes i16: the users that bitcast it to
/// i16 take it directly, the others through one bitcast back to bf16.
void retypeResult(PatternRewriter &rewriter, Operation *op, Type i16) {
  Value result = op->getResult(0);
  Type bf16 = result.getType();
  rewriter.modifyOpInPlace(op, [&] { result.setType(i16); });
  rewriter.setInsertionPointAfter(op);
  // The uses before the bitcast back adds its own.
  SmallVector<OpOperand *> uses;
  for (OpOperand &use : result.getUses())
    uses.push_back(&use);
  Value back;
  for (OpOperand *use : uses) {
    auto cast = dyn_cast<LLVM::BitcastOp>(use->getOwner());
    if (cast && cast.getType() == i16) {
      rewriter.replaceOp(cast, result);
      continue;
    }
    if (!back)
      back = LLVM::BitcastOp::create(rewriter, op->getLoc(), bf16, result);
    rewriter.modifyOpInPlace(use->getOwner(), [&] { use->set(back); });
  }
}

/// A load or masked load of a bf16 value loads its i16 bits (a masked
/// load's pass-through value too).
template <typename LoadOp>
struct LoadAsI16 : OpRewritePattern<LoadOp> {
  using OpRewritePattern<LoadOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(LoadOp op, PatternRewriter &rewriter) const override {
    Type i16 = asI16(op.getType());
    if (!i16)
      return failure();
    if constexpr (std::is_same_v<LoadOp, LLVM::MaskedLoadOp>) {
      if (Value passThru = op.getPassThru()) {
        rewriter.setInsertionPoint(op);
        Value bits = bitsOf(rewriter, op.getLoc(), passThru, i16);
        rewriter.modifyOpInPlace(op, [&] { op.getPassThruMutable().assign(bits); });
      }
    }
    retypeResult(rewriter, op, i16);
    return success();
  }
};

/// A store or masked store of a bf16 value stores its i16 bits.
template <typename StoreOp>
struct StoreAsI16 : OpRewritePattern<StoreOp> {
  using OpRewritePattern<StoreOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(StoreOp op, PatternRewriter &rewriter) const override {
    Type i16 = asI16(op.getValue().getType());
    if (!i16)
      return failure();
    Value bits = bitsOf(rewriter, op.getLoc(), op.getValue(), i16);
    rewriter.modifyOpInPlace(op, [&] { op.getValueMutable().assign(bits); });
    return success();
  }
};

struct HostBF16MemoryAsI16Pass
    : public moe::impl::MoEHostBF16MemoryAsI16Base<HostBF16MemoryAsI16Pass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[moe-host-bf16-memory-as-i16] on "
                            << getOperation()->getName() << "\n");
    RewritePatternSet patterns(&getContext());
    patterns.add<LoadAsI16<LLVM::LoadOp>, LoadAsI16<LLVM::MaskedLoadOp>,
                 StoreAsI16<LLVM::StoreOp>, StoreAsI16<LLVM::MaskedStoreOp>>(
        &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
