//===- DeviceABI.cpp - --moe-gpu-device-abi -------------------------------===//
//
// The memref half of convert-moe-to-gpu's `device-abi` mode (the ABI of
// `moe-compile --target=cuda`, docs/aot.md): the memref arguments of public
// functions, inputs and out-parameters alike, are device memory. After
// bufferization and buffer-results-to-out-params a result reaches its
// out-parameter through a `memref.copy`; here a device result buffer copied
// into an out-parameter becomes a view of that out-parameter (the kernels
// write the caller's buffer), the other device result buffers are freed at
// the end of their block, the remaining copies that touch device memory
// become gpu.memcpy, and any other host op on device memory is an error.
// A function that copies no device data to the host is marked for
// --moe-gpu-stream-ordered (also here), which, on the LLVM dialect at the end
// of the pipeline, turns the host synchronizations that gpu-async-region
// inserts into moeRuntimeSyncUnlessThreadStream (no wait on the caller's
// stream).
//
//===----------------------------------------------------------------------===//

#include "dialect/MoEDialect.h"
#include "lowering/gpu/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEGPUDEVICEABI
#define GEN_PASS_DEF_MOEGPUSTREAMORDERED
#include "lowering/gpu/Passes.h.inc"
} // namespace moe
} // namespace mlir

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "moe-gpu-device-abi"

using namespace mlir;

namespace {

constexpr llvm::StringLiteral kDeviceResultAttr = moe::MoEDialect::getGpuDeviceResultAttrName();
constexpr llvm::StringLiteral kLaunchAttr = moe::MoEDialect::getGpuKernelAttrName();
constexpr llvm::StringLiteral kStreamOrderedAttr = moe::MoEDialect::getGpuStreamOrderedAttrName();

/// The buffer `v` is a view of (through view-like ops), or `v`.
Value viewSource(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    auto view = dyn_cast<ViewLikeOpInterface>(def);
    if (!view)
      break;
    v = view.getViewSource();
  }
  return v;
}

/// `memref` (identity layout, contiguous) as memref<?xT>.
Value flatDynamic(OpBuilder &b, Location loc, Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  Value flat = memref;
  if (type.getRank() == 0) {
    flat = memref::ExpandShapeOp::create(b, loc, MemRefType::get({1}, type.getElementType()),
                                         memref, ArrayRef<ReassociationIndices>{});
  } else if (type.getRank() > 1) {
    ReassociationIndices all;
    for (int64_t i = 0; i < type.getRank(); ++i)
      all.push_back(i);
    flat = memref::CollapseShapeOp::create(b, loc, memref, ArrayRef<ReassociationIndices>{all});
  }
  auto dynType = MemRefType::get({ShapedType::kDynamic}, type.getElementType());
  if (flat.getType() == dynType)
    return flat;
  return memref::CastOp::create(b, loc, dynType, flat);
}

struct DeviceABIPass : public moe::impl::MoEGPUDeviceABIBase<DeviceABIPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << getArgument() << " on "
                            << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    bool ok = true;
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && func.isPublic() && failed(runOnFunction(func)))
        ok = false;
    if (!ok)
      signalPassFailure();
  }

  /// Whether `v` is (a view of) device memory of `func`.
  static bool isDevice(func::FuncOp func, Value v) {
    Value source = viewSource(v);
    if (auto arg = dyn_cast<BlockArgument>(source))
      return arg.getOwner() == &func.getBody().front() && isa<MemRefType>(arg.getType());
    return source.getDefiningOp<gpu::AllocOp>() != nullptr;
  }

  LogicalResult runOnFunction(func::FuncOp func) {
    // 1. Device result buffers copied into an out-parameter: write it directly.
    SmallVector<gpu::AllocOp> results;
    func.walk([&](gpu::AllocOp alloc) {
      if (alloc->hasAttr(kDeviceResultAttr))
        results.push_back(alloc);
    });
    for (gpu::AllocOp alloc : results) {
      memref::CopyOp target;
      func.walk([&](memref::CopyOp copy) {
        if (target || viewSource(copy.getSource()) != alloc.getMemref())
          return;
        auto arg = dyn_cast<BlockArgument>(copy.getTarget());
        if (arg && arg.getOwner() == &func.getBody().front() && arg.hasOneUse() &&
            copy->getBlock() == alloc->getBlock() &&
            cast<MemRefType>(arg.getType()).getLayout().isIdentity())
          target = copy;
      });
      OpBuilder b(alloc);
      if (!target) {
        // Not a result: free it after its last use in its block (all of
        // them are in that block or nested in it).
        b.setInsertionPoint(alloc->getBlock()->getTerminator());
        gpu::DeallocOp::create(b, alloc.getLoc(), Type(), ValueRange{}, alloc.getMemref());
        continue;
      }
      Value out = flatDynamic(b, alloc.getLoc(), target.getTarget());
      alloc.getMemref().replaceAllUsesWith(out);
      target.erase();
      alloc.erase();
    }

    // 2. Copies from or to device memory: gpu.memcpy.
    bool ok = true;
    SmallVector<memref::CopyOp> copies;
    func.walk([&](memref::CopyOp copy) {
      if (isDevice(func, copy.getSource()) || isDevice(func, copy.getTarget()))
        copies.push_back(copy);
    });
    for (memref::CopyOp copy : copies) {
      auto src = cast<MemRefType>(copy.getSource().getType());
      auto dst = cast<MemRefType>(copy.getTarget().getType());
      if (!src.getLayout().isIdentity() || !dst.getLayout().isIdentity()) {
        copy.emitError("device-abi: a strided copy of device memory; only contiguous "
                       "buffers can be copied to or from the device");
        ok = false;
        continue;
      }
      OpBuilder b(copy);
      gpu::MemcpyOp::create(b, copy.getLoc(), Type(), ValueRange{},
                            flatDynamic(b, copy.getLoc(), copy.getTarget()),
                            flatDynamic(b, copy.getLoc(), copy.getSource()));
      copy.erase();
    }

    // 3. Nothing else on the host may touch device memory.
    func.walk([&](Operation *op) {
      if (isa<ViewLikeOpInterface, memref::DimOp, memref::ExtractStridedMetadataOp,
              gpu::MemcpyOp, gpu::MemsetOp, gpu::DeallocOp, gpu::LaunchFuncOp,
              func::ReturnOp>(op))
        return;
      if (auto call = dyn_cast<func::CallOp>(op)) {
        auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
            op, call.getCalleeAttr());
        if (callee && callee->hasAttr(kLaunchAttr))
          return;
      }
      for (Value operand : op->getOperands()) {
        if (isa<MemRefType>(operand.getType()) && isDevice(func, operand)) {
          op->emitError() << "device-abi: '" << op->getName()
                          << "' would access device memory on the host";
          ok = false;
          return;
        }
      }
    });
    // 4. Stream-ordered unless device data is copied to the host (the error
    // words of the index checks, a size read back): then the host waits.
    bool readsBack = false;
    func.walk([&](gpu::MemcpyOp copy) {
      if (!isDevice(func, copy.getDst()))
        readsBack = true;
    });
    if (ok && !readsBack)
      func->setAttr(kStreamOrderedAttr, UnitAttr::get(func.getContext()));
    return success(ok);
  }
};

/// The callee of `op` when it is an llvm.call to a named function.
StringRef calleeName(Operation *op) {
  auto call = dyn_cast<LLVM::CallOp>(op);
  if (!call || !call.getCallee())
    return StringRef();
  return *call.getCallee();
}

struct StreamOrderedPass : public moe::impl::MoEGPUStreamOrderedBase<StreamOrderedPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << getArgument() << " on "
                            << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    ModuleOp module = getOperation();
    constexpr llvm::StringLiteral kSync = "mgpuStreamSynchronize";
    constexpr llvm::StringLiteral kOrderedSync = "moeRuntimeSyncUnlessThreadStream";
    SmallVector<LLVM::CallOp> syncs;
    module.walk([&](LLVM::LLVMFuncOp func) {
      if (!func->removeAttr(kStreamOrderedAttr))
        return;
      SmallVector<LLVM::CallOp> mine;
      bool events = false;
      func.walk([&](LLVM::CallOp call) {
        StringRef callee = calleeName(call);
        if (callee == kSync)
          mine.push_back(call);
        else if (callee == "mgpuEventSynchronize")
          events = true;
      });
      LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] @" << func.getName() << ": "
                              << mine.size() << " synchronizations"
                              << (events ? ", events: left as is" : "") << "\n");
      if (!events)
        syncs.append(mine);
    });
    if (syncs.empty())
      return;
    auto decl = module.lookupSymbol<LLVM::LLVMFuncOp>(kOrderedSync);
    if (!decl) {
      OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
      auto type = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(&getContext()),
                                              {LLVM::LLVMPointerType::get(&getContext())});
      decl = LLVM::LLVMFuncOp::create(b, module.getLoc(), kOrderedSync, type);
    }
    for (LLVM::CallOp sync : syncs) {
      OpBuilder b(sync);
      LLVM::CallOp::create(b, sync.getLoc(), decl, sync.getArgOperands());
      sync.erase();
    }
    // The declaration of mgpuStreamSynchronize when nothing calls it now.
    auto old = module.lookupSymbol<LLVM::LLVMFuncOp>(kSync);
    if (old && old.isExternal() && SymbolTable::symbolKnownUseEmpty(old, module))
      old.erase();
  }
};

} // namespace
