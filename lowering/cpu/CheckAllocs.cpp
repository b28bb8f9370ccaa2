//===- CheckAllocs.cpp - failed allocations become one error (CPU) --------===//

#include "lowering/cpu/Passes.h"

#include "lowering/cpu/ExpertKernels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "moe-cpu-check-allocs"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOECPUCHECKALLOCS
#include "lowering/cpu/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

namespace {

struct MoECpuCheckAllocsPass
    : public moe::impl::MoECpuCheckAllocsBase<MoECpuCheckAllocsPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName()
                            << " at " << getOperation()->getLoc() << "\n");
    ModuleOp module = getOperation();
    SmallVector<memref::AllocOp> allocs;
    module.walk([&](memref::AllocOp op) { allocs.push_back(op); });
    if (allocs.empty())
      return;
    StringRef name = "moeCpuAllocError";
    OpBuilder top(module.getBodyRegion());
    moe::cpu::declareFunction(top, module.getLoc(), module, name,
                         top.getFunctionType({top.getI64Type()}, {}));
    for (memref::AllocOp alloc : allocs) {
      OpBuilder ob(alloc);
      ob.setInsertionPointAfter(alloc);
      ImplicitLocOpBuilder b(alloc.getLoc(), ob);
      MemRefType type = alloc.getType();
      // Bytes requested: static sizes times the dynamic ones (index: 8).
      Type elt = type.getElementType();
      int64_t eltBytes = elt.isIndex() ? 8
                         : elt.isIntOrFloat() ? (elt.getIntOrFloatBitWidth() + 7) / 8
                                              : 1;
      Value bytes = arith::ConstantIndexOp::create(b, eltBytes);
      unsigned dyn = 0;
      for (int64_t size : type.getShape()) {
        Value s = ShapedType::isDynamic(size) ? alloc.getDynamicSizes()[dyn++]
                                              : arith::ConstantIndexOp::create(b, size).getResult();
        bytes = arith::MulIOp::create(b, bytes, s);
      }
      Value ptr = memref::ExtractAlignedPointerAsIndexOp::create(b, alloc.getResult());
      Value zero = arith::ConstantIndexOp::create(b, 0);
      Value failedAlloc = arith::AndIOp::create(
          b, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, ptr, zero),
          arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, bytes, zero));
      scf::IfOp::create(b, failedAlloc, [&](OpBuilder &nested, Location loc) {
        Value n = arith::IndexCastOp::create(nested, loc, nested.getI64Type(), bytes);
        func::CallOp::create(nested, loc, name, TypeRange{}, ValueRange{n});
        scf::YieldOp::create(nested, loc);
      });
    }
  }
};

} // namespace
