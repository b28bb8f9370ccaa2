//===- EmulateGPU.cpp - run the MoE kernels on the host (testing) ---------===//
//
// `--moe-test-emulate-gpu` makes the output of convert-moe-to-gpu (after
// bufferization and moe-gpu-materialize-launches) executable on a machine
// without a GPU, so the kernels' numerics can be compared with the CPU path:
//
// * gpu.alloc / gpu.dealloc / gpu.memcpy / gpu.memset -> memref ops;
// * gpu.launch_func -> a loop over the blocks; each block allocates its
//   workgroup buffers and runs the kernel body in an `omp.parallel` region
//   with one OpenMP thread per GPU thread (gpu.thread_id x =
//   omp_get_thread_num(), gpu.barrier = omp.barrier), so barriers have their
//   real semantics;
// * the gpu.module is dropped.
//
// Testing only: it is slow (a team of blockDim threads per block) and needs
// an OpenMP runtime (libomp) at run time.
//
//===----------------------------------------------------------------------===//

#include "lowering/Passes.h"

#include "lowering/gpu/Kernels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOETESTEMULATEGPU
#include "lowering/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;

namespace {

func::FuncOp ompThreadNum(ModuleOp module) {
  constexpr llvm::StringLiteral name = "omp_get_thread_num";
  if (auto f = module.lookupSymbol<func::FuncOp>(name))
    return f;
  OpBuilder b(module.getContext());
  b.setInsertionPointToStart(module.getBody());
  auto f = func::FuncOp::create(b, module.getLoc(), name,
                                b.getFunctionType({}, {b.getI32Type()}));
  f.setPrivate();
  return f;
}

LogicalResult emulateLaunch(gpu::LaunchFuncOp launch, gpu::GPUFuncOp kernel,
                            func::FuncOp threadNum) {
  OpBuilder b(launch);
  Location loc = launch.getLoc();
  if (kernel.getBody().getBlocks().size() != 1)
    return launch.emitError("emulation needs single-block kernels");
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
  gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
  SmallVector<Value> ivs;
  for (Value ub : {grid.z, grid.y, grid.x}) {
    auto loop = scf::ForOp::create(b, loc, c0, ub, c1);
    b.setInsertionPointToStart(loop.getBody());
    ivs.push_back(loop.getInductionVar());
  }
  Value bz = ivs[0], by = ivs[1], bx = ivs[2];
  // Workgroup memory: one buffer per block.
  SmallVector<Value> workgroup;
  for (BlockArgument arg : kernel.getWorkgroupAttributions()) {
    auto type = cast<MemRefType>(arg.getType());
    workgroup.push_back(memref::AllocOp::create(
        b, loc, MemRefType::get(type.getShape(), type.getElementType())));
  }
  Value numThreads = arith::IndexCastOp::create(b, loc, b.getI32Type(), block.x);
  auto parallel = omp::ParallelOp::create(
      b, loc, ValueRange{}, ValueRange{}, Value(), numThreads, ValueRange{}, nullptr, nullptr,
      nullptr, nullptr, ValueRange{}, nullptr, nullptr);
  for (Value buf : workgroup)
    memref::DeallocOp::create(b, loc, buf);

  Block *body = b.createBlock(&parallel.getRegion());
  b.setInsertionPointToStart(body);
  Value tid = arith::IndexCastOp::create(
      b, loc, b.getIndexType(), func::CallOp::create(b, loc, threadNum).getResult(0));
  IRMapping map;
  Block &entry = kernel.getBody().front();
  unsigned numArgs = kernel.getNumArguments();
  for (unsigned i = 0; i < numArgs; ++i)
    map.map(entry.getArgument(i), launch.getKernelOperands()[i]);
  for (auto [arg, buf] : llvm::zip(kernel.getWorkgroupAttributions(), workgroup))
    map.map(arg, buf);
  for (Operation &op : entry.without_terminator())
    b.clone(op, map);
  omp::TerminatorOp::create(b, loc);

  // GPU builtins inside the cloned body.
  WalkResult result = parallel.walk([&](Operation *op) -> WalkResult {
    OpBuilder rb(op);
    if (auto id = dyn_cast<gpu::ThreadIdOp>(op)) {
      id.replaceAllUsesWith(id.getDimension() == gpu::Dimension::x ? tid : c0);
      id.erase();
    } else if (auto id = dyn_cast<gpu::BlockIdOp>(op)) {
      Value v = id.getDimension() == gpu::Dimension::x   ? bx
                : id.getDimension() == gpu::Dimension::y ? by
                                                         : bz;
      id.replaceAllUsesWith(v);
      id.erase();
    } else if (auto dim = dyn_cast<gpu::BlockDimOp>(op)) {
      Value v = dim.getDimension() == gpu::Dimension::x   ? block.x
                : dim.getDimension() == gpu::Dimension::y ? block.y
                                                          : block.z;
      dim.replaceAllUsesWith(v);
      dim.erase();
    } else if (isa<gpu::BarrierOp>(op)) {
      omp::BarrierOp::create(rb, op->getLoc());
      op->erase();
    } else if (op->getDialect() && isa<gpu::GPUDialect>(op->getDialect())) {
      op->emitError("no host emulation for this GPU op");
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (result.wasInterrupted())
    return failure();
  launch.erase();
  return success();
}

struct EmulateGPUPass : public moe::impl::MoETestEmulateGPUBase<EmulateGPUPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp threadNum;
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<gpu::AllocOp, gpu::DeallocOp, gpu::MemcpyOp, gpu::MemsetOp, gpu::LaunchFuncOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      if (auto alloc = dyn_cast<gpu::AllocOp>(op)) {
        if (alloc.getAsyncToken())
          return (void)(op->emitError("emulation expects synchronous GPU ops"), signalPassFailure());
        Value m = memref::AllocOp::create(b, loc, alloc.getMemref().getType(),
                                          alloc.getDynamicSizes(), alloc.getSymbolOperands());
        alloc.getMemref().replaceAllUsesWith(m);
        op->erase();
      } else if (auto dealloc = dyn_cast<gpu::DeallocOp>(op)) {
        memref::DeallocOp::create(b, loc, dealloc.getMemref());
        op->erase();
      } else if (auto copy = dyn_cast<gpu::MemcpyOp>(op)) {
        memref::CopyOp::create(b, loc, copy.getSrc(), copy.getDst());
        op->erase();
      } else if (auto set = dyn_cast<gpu::MemsetOp>(op)) {
        Value dst = set.getDst();
        Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
        Value n = memref::DimOp::create(b, loc, dst, 0);
        auto loop = scf::ForOp::create(b, loc, c0, n, arith::ConstantIndexOp::create(b, loc, 1));
        b.setInsertionPointToStart(loop.getBody());
        memref::StoreOp::create(b, loc, set.getValue(), dst, loop.getInductionVar());
        op->erase();
      } else if (auto launch = dyn_cast<gpu::LaunchFuncOp>(op)) {
        auto kernel = SymbolTable::lookupNearestSymbolFrom<gpu::GPUFuncOp>(
            module, launch.getKernel());
        if (!kernel)
          return (void)(launch.emitError("kernel not found"), signalPassFailure());
        if (!threadNum)
          threadNum = ompThreadNum(module);
        if (failed(emulateLaunch(launch, kernel, threadNum)))
          return signalPassFailure();
      }
    }
    for (auto gpuModule : llvm::make_early_inc_range(module.getOps<gpu::GPUModuleOp>()))
      gpuModule.erase();
    module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());
  }
};

} // namespace
