//===- ConvertMoEToGPU.cpp - moe ops -> GPU kernels + host code -----------===//
//
// `--convert-moe-to-gpu` rewrites every moe op (layers, chain ops, fused ops,
// the backward ops; training and inference) into host code on tensors that moves the operands
// to the device, launches the kernels of Kernels.h (built into
// `gpu.module @moe_kernels`) and copies the results back:
//
//   bufferization.to_buffer (inputs) -> gpu.alloc + gpu.memcpy in
//   -> launches -> gpu.memcpy out into memref.alloc -> bufferization.to_tensor
//
// A whole layer (router, routing, alignment, both grouped GEMMs and the
// reduction) runs on the device without host round trips; a chain op copies
// its own operands and results. The production routers of docs/spec.md §3.1.1
// (#moe.top_k score/normalize/scale/groups, selection_bias) are variants of
// the gate kernel. A layer's shared expert is folded into the same launches
// (its gate sigmoid(x sg) in the gate kernel, its tiles first in both grouped
// GEMM grids, its f32 output the first term of GEMM2's per-token combine);
// moe.shared_expert alone reuses the grouped GEMM kernels over one group of
// all T rows.
//
// Element types (docs/spec.md §2-§3, docs/gpu.md): device buffers keep the element
// type of their tensor (f32, bf16, f16); the kernel variants are chosen by
// the types of their buffers. Routing buffers (logits, weights, the plan's
// row weights) are f32; h has the type of GEMM1's rows; a layer's and a fused
// op's GEMM2 rows are f32 and y is rounded once. A dynamic T is read with
// tensor.dim (memref.dim after bufferization) and sizes every allocation.
//
// Kernel launches are emitted as calls to private declarations
// `@__moe_launch_<kernel>(gx, gy, gz, bx, by, bz, args...)` carrying
// `moe.gpu_kernel = @moe_kernels::@<kernel>`: the upstream ownership-based
// buffer deallocation rejects gpu.launch_func (no memory-effect interface), so
// `--moe-gpu-materialize-launches` (MaterializeLaunches.cpp) turns the calls
// into gpu.launch_func after bufferization and deallocation. Device buffers
// carry `bufferization.manual_deallocation` and are freed here with
// gpu.dealloc.
//
// The pieces: Host.h / Host.cpp (the host code of one moe op: device buffers,
// launches, the device-level building blocks), HostStrategy.cpp (row tiles,
// tensor cores and split-K of the expert GEMMs), ConvertOps.cpp (the per-op
// conversions, convertMoEOp), DeviceElementwise.h / .cpp (device-abi: the
// element-wise ops on device tensors as fused kernels) and
// MaterializeLaunches.cpp. This file holds the pass: which ops it converts,
// in program order, with which #moe.gpu_config and index checks, and
// (device-abi) which tensors live on the device.
//
//===----------------------------------------------------------------------===//

#include "lowering/gpu/Passes.h"
#include "lowering/Pipelines.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include "dialect/MoEOps.h"
#include "lowering/gpu/DeviceElementwise.h"
#include "lowering/gpu/Host.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/ADT/SetVector.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_CONVERTMOETOGPU
#include "lowering/gpu/Passes.h.inc"
} // namespace moe
} // namespace mlir

#include "llvm/Support/Debug.h"

// The passes of convert-moe-to-gpu log under one debug type, each naming
// itself (moe-gpu-materialize-launches too: MaterializeLaunches.cpp).
#define DEBUG_TYPE "convert-moe-to-gpu"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

namespace {

/// Whether the index data `op` reads was produced, in the same function, by
/// moe ops that make it valid by construction, so that check-indices has
/// nothing to check: moe.dispatch / moe.fused_experts on the indices of a
/// moe.gate with the same num_experts, moe.expert_ffn on the rows and
/// offsets of one moe.dispatch, moe.combine on the positions of a
/// moe.dispatch and the output of a moe.expert_ffn of that dispatch's rows
/// (what --moe-decompose and --moe-fuse write), and their adjoints on the
/// same values (what --moe-generate-vjp writes). Decided before any op is
/// converted.
bool indexDataIsValidByConstruction(Operation *op) {
  auto fromGate = [](Value indices, int64_t numExperts) {
    auto gate = indices.getDefiningOp<GateOp>();
    return gate && gate.getIndices() == indices && gate.getNumExperts() == numExperts;
  };
  if (auto d = dyn_cast<DispatchOp>(op))
    return fromGate(d.getIndices(), d.getNumExperts());
  if (auto f = dyn_cast<FusedExpertsOp>(op))
    return fromGate(f.getIndices(), f.getNumExperts());
  if (auto ffn = dyn_cast<ExpertFFNOp>(op)) {
    auto d = ffn.getOffsets().getDefiningOp<DispatchOp>();
    return d && d.getOffsets() == ffn.getOffsets() && d.getRows() == ffn.getRows();
  }
  if (auto c = dyn_cast<CombineOp>(op)) {
    auto d = c.getPositions().getDefiningOp<DispatchOp>();
    auto ffn = c.getExpertOutput().getDefiningOp<ExpertFFNOp>();
    return d && ffn && d.getPositions() == c.getPositions() && ffn.getRows() == d.getRows();
  }
  // The backward --moe-generate-vjp writes: the plan of the recomputed
  // forward's moe.dispatch, rows of that dispatch's size.
  if (auto g = dyn_cast<ExpertFFNGradOp>(op)) {
    auto d = g.getOffsets().getDefiningOp<DispatchOp>();
    return d && d.getOffsets() == g.getOffsets() && d.getRows() == g.getRows();
  }
  if (auto g = dyn_cast<CombineGradOp>(op)) {
    auto d = g.getPositions().getDefiningOp<DispatchOp>();
    auto ffn = g.getExpertOutput().getDefiningOp<ExpertFFNOp>();
    return d && ffn && d.getPositions() == g.getPositions() && ffn.getRows() == d.getRows();
  }
  if (auto g = dyn_cast<DispatchGradOp>(op)) {
    auto d = g.getPositions().getDefiningOp<DispatchOp>();
    auto ffn = g.getRowsGrad().getDefiningOp<ExpertFFNGradOp>();
    return d && ffn && d.getPositions() == g.getPositions() && ffn.getRows() == d.getRows() &&
           ffn.getRowsGrad() == g.getRowsGrad();
  }
  return false;
}

struct ConvertMoEToGPUPass : public moe::impl::ConvertMoEToGPUBase<ConvertMoEToGPUPass> {
  using ConvertMoEToGPUBase::ConvertMoEToGPUBase;

  void getDependentDialects(DialectRegistry &registry) const override {
    ConvertMoEToGPUBase::getDependentDialects(registry);
    // gpu-module-to-binary later translates the kernels to LLVM IR: make
    // sure the translations are known even in tools that do not register
    // them (moe-opt, embedders).
    registerAllGPUToLLVMIRTranslations(registry);
  }

  /// device-abi: the tensors of public functions that live in device memory
  /// (tensor arguments, moe op results and their reshapes); every other use
  /// of one is an error naming the op.
  /// Element-wise ops (isDeviceElementwise) that read one become device
  /// kernels (`elementwise`) and their results device tensors. With `emit`
  /// false nothing is reported (deviceAbiApplies).
  static LogicalResult findDeviceValues(ModuleOp module, llvm::DenseSet<Value> &device,
                                        llvm::SetVector<Operation *> &elementwise,
                                        bool emit = true) {
    SmallVector<Value> worklist;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal() || !func.isPublic())
        continue;
      for (BlockArgument arg : func.getArguments())
        if (isa<RankedTensorType>(arg.getType()))
          worklist.push_back(arg);
      func.walk([&](Operation *op) {
        if (op->getDialect() && isa<MoEDialect>(op->getDialect()))
          for (Value r : op->getResults())
            worklist.push_back(r);
      });
    }
    bool ok = true;
    llvm::SmallPtrSet<Operation *, 4> reported;
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      if (!device.insert(v).second)
        continue;
      for (Operation *user : v.getUsers()) {
        if (isa<tensor::CastOp, tensor::ExpandShapeOp, tensor::CollapseShapeOp>(user)) {
          worklist.push_back(user->getResult(0));
          continue;
        }
        if (isa<tensor::DimOp, func::ReturnOp>(user) ||
            (user->getDialect() && isa<MoEDialect>(user->getDialect())))
          continue;
        if (isDeviceElementwise(user)) {
          elementwise.insert(user);
          worklist.push_back(user->getResult(0));
          continue;
        }
        ok = false;
        if (!emit || !reported.insert(user).second) // one error per op
          continue;
        user->emitError() << "device-abi: '" << user->getName()
                          << "' would read a device tensor (an argument of a public function "
                             "or a moe op result) on the host; only moe ops, element-wise ops on "
                             "tensors of one shape, tensor.dim, tensor.cast/expand_shape/"
                             "collapse_shape and func.return may use it";
      }
    }
    return success(ok);
  }

  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << getArgument() << " on "
                            << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    ModuleOp module = getOperation();
    llvm::DenseSet<Value> deviceValues;
    llvm::SetVector<Operation *> elementwise;
    if (deviceAbi && failed(findDeviceValues(module, deviceValues, elementwise)))
      return signalPassFailure();
    if (!elementwise.empty()) {
      // Chains of element-wise ops become one generic (one kernel) each.
      fuseDeviceElementwise(module, elementwise.getArrayRef());
      deviceValues.clear();
      elementwise.clear();
      if (failed(findDeviceValues(module, deviceValues, elementwise)))
        return signalPassFailure();
    }
    // The moe ops and (device-abi) the element-wise ops on device tensors, in
    // program order.
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if ((op->getDialect() && isa<MoEDialect>(op->getDialect())) || elementwise.contains(op))
        ops.push_back(op);
    });
    if (ops.empty())
      return;
    // The kernels and their launch functions are symbols of this module: a
    // moe op of a nested module could not call them.
    for (Operation *op : ops) {
      if (op->getParentOfType<ModuleOp>() == module)
        continue;
      op->emitError() << "cannot lower '" << op->getName()
                      << "' to the GPU inside a nested builtin.module: run convert-moe-to-gpu "
                         "on that module (--pass-pipeline='builtin.module(builtin.module("
                         "convert-moe-to-gpu))')";
      return signalPassFailure();
    }
    bool failedAny = false;

    // Ops whose index data needs no run-time check (before ops are replaced).
    llvm::SmallPtrSet<Operation *, 8> validByConstruction;
    if (checkIndices)
      for (Operation *op : ops)
        if (indexDataIsValidByConstruction(op))
          validByConstruction.insert(op);

    KernelLibrary lib(module);
    for (Operation *op : ops) {
      OpBuilder ob(op);
      ImplicitLocOpBuilder b(op->getLoc(), ob);
      Host h(b, lib, module);
      auto func = op->getParentOfType<func::FuncOp>();
      if (deviceAbi && func && func.isPublic())
        h.deviceValues = &deviceValues;
      h.config = op->getAttrOfType<GpuConfigAttr>(GpuConfigAttr::getAttrName());
      if (!h.config)
        h.config = GpuConfigAttr::getDefault(op->getContext());
      h.checkIndices = checkIndices && !validByConstruction.contains(op);
      // The moe ops (ConvertOps.cpp) and the element-wise ones (never moe
      // ops: findDeviceValues).
      LogicalResult result =
          elementwise.contains(op) ? convertElementwise(op, h) : convertMoEOp(op, h);
      if (failed(result)) {
        failedAny = true;
        continue;
      }
      op->erase();
    }
    if (failedAny)
      signalPassFailure();
  }
};

} // namespace

bool moe::deviceAbiApplies(ModuleOp module) {
  llvm::DenseSet<Value> device;
  llvm::SetVector<Operation *> elementwise;
  return succeeded(
      ConvertMoEToGPUPass::findDeviceValues(module, device, elementwise, /*emit=*/false));
}
