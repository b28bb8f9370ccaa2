//===- ConvertMoEToGPU.cpp - moe ops -> GPU kernels + host code -----------===//
//
// `--convert-moe-to-gpu` rewrites every moe op (layers, chain ops, fused ops;
// training and inference) into host code on tensors that moves the operands
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
// the gate kernel; the shared expert reuses the grouped GEMM kernels over one
// group of all T rows, its f32 output starting the per-token sum of the
// reduce/combine kernel.
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
// `moe_gpu.kernel = @moe_kernels::@<kernel>`: the upstream ownership-based
// buffer deallocation rejects gpu.launch_func (no memory-effect interface), so
// `--moe-gpu-materialize-launches` turns the calls into gpu.launch_func after
// bufferization and deallocation. Device buffers carry
// `bufferization.manual_deallocation` and are freed here with gpu.dealloc.
//
//===----------------------------------------------------------------------===//

#include "lowering/Passes.h"
#include "lowering/Pipelines.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include "dialect/MoEOps.h"
#include "lowering/gpu/IRBuilder.h"
#include "lowering/gpu/Kernels.h"
#include "lowering/gpu/MmaGemm.h"
#include "lowering/gpu/WarpLayouts.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/xxhash.h"

#include <optional>

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_CONVERTMOETOGPU
#define GEN_PASS_DEF_MOEGPUMATERIALIZELAUNCHES
#include "lowering/Passes.h.inc"
} // namespace moe
} // namespace mlir

#include "llvm/Support/Debug.h"

// The passes of this file log under one debug type, each naming itself.
#define DEBUG_TYPE "convert-moe-to-gpu"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

namespace {

constexpr llvm::StringLiteral kLaunchAttr = "moe_gpu.kernel";
constexpr llvm::StringLiteral kLaunchPrefix = "__moe_launch_";
/// device-abi: a gpu.alloc holding a moe op result (see moe-gpu-device-abi).
constexpr llvm::StringLiteral kDeviceResultAttr = "moe_gpu.device_result";

MemRefType flatType(Type elt) { return MemRefType::get({ShapedType::kDynamic}, elt); }

/// The element type of a tensor or a (device) memref.
Type eltOf(Value v) { return cast<ShapedType>(v.getType()).getElementType(); }

/// Host-side emission for one moe op.
class Host {
public:
  Host(ImplicitLocOpBuilder &b, KernelLibrary &lib, ModuleOp module)
      : b(b), e(b), lib(lib), module(module) {
    start = e.idx(0).getDefiningOp();
  }

  ImplicitLocOpBuilder &b;
  IRB e;
  KernelLibrary &lib;
  ModuleOp module;
  /// Expert GEMMs on bf16/f16 data use the tensor-core kernels.
  bool tensorCores = true;
  /// ... and 64-row tiles use the sm_90a wgmma kernels.
  bool wgmma = false;
  /// With wgmma: plans of at least this many rows per expert on average
  /// (T*k / E) take 128-row tiles (two warpgroups per block); 0: never.
  int64_t bigTileRows = 0;
  SmallVector<Value> deviceBuffers;
  /// The first op of this moe op's host code: static host allocations go
  /// before it, so that they do not split the GPU stream (gpu-async-region
  /// synchronizes before host ops with side effects).
  Operation *start;
  /// device-abi (in a public function): the tensors in device memory, see
  /// DeviceABI.cpp; null in the default (host) convention.
  llvm::DenseSet<Value> *deviceValues = nullptr;

  bool isDevice(Value tensor) const {
    return deviceValues && deviceValues->contains(tensor);
  }

  Value dim(Value tensor, int64_t i) {
    auto type = cast<RankedTensorType>(tensor.getType());
    if (!type.isDynamicDim(i))
      return e.idx(type.getDimSize(i));
    return tensor::DimOp::create(b, tensor, i);
  }
  Value numElements(Value tensor) {
    auto type = cast<RankedTensorType>(tensor.getType());
    Value n = e.idx(1);
    for (int64_t i = 0; i < type.getRank(); ++i)
      n = e.muli(n, dim(tensor, i));
    return n;
  }

  /// A contiguous memref viewed as 1-D.
  Value flatten(Value memref) {
    auto type = cast<MemRefType>(memref.getType());
    if (type.getRank() == 0)
      return memref::ExpandShapeOp::create(b, MemRefType::get({1}, type.getElementType()),
                                           memref, ArrayRef<ReassociationIndices>{});
    if (type.getRank() == 1)
      return memref;
    ReassociationIndices all;
    for (int64_t i = 0; i < type.getRank(); ++i)
      all.push_back(i);
    return memref::CollapseShapeOp::create(b, memref, ArrayRef<ReassociationIndices>{all});
  }

  Value alloc(Type elt, Value n) {
    auto op = gpu::AllocOp::create(b, flatType(elt), Type(), ValueRange{}, ValueRange{n},
                                   ValueRange{}, /*hostShared=*/false);
    op->setAttr(bufferization::BufferizationDialect::kManualDeallocation, b.getUnitAttr());
    deviceBuffers.push_back(op.getMemref());
    return op.getMemref();
  }

  Value upload(Value tensor) {
    auto type = cast<RankedTensorType>(tensor.getType());
    auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
    Value host = bufferization::ToBufferOp::create(b, memrefType, tensor, /*read_only=*/true);
    if (isDevice(tensor)) // device-abi: already on the device
      return memref::CastOp::create(b, flatType(type.getElementType()), flatten(host));
    Value dev = alloc(type.getElementType(), numElements(tensor));
    gpu::MemcpyOp::create(b, Type(), ValueRange{}, dev, flatten(host));
    return dev;
  }

  /// Copies `dev` into a new host tensor of `resultType`; `dims` are the
  /// sizes of every dimension (only the dynamic ones are used).
  Value download(Value dev, Type resultType, ArrayRef<Value> dims = {}) {
    auto type = cast<RankedTensorType>(resultType);
    SmallVector<Value> dyn;
    for (int64_t i = 0; i < type.getRank(); ++i)
      if (type.isDynamicDim(i))
        dyn.push_back(dims[i]);
    if (deviceValues)
      return deviceResult(dev, type, dyn);
    auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
    Value host;
    if (type.hasStaticShape()) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(start);
      host = memref::AllocOp::create(b, memrefType, dyn);
    } else {
      host = memref::AllocOp::create(b, memrefType, dyn);
    }
    gpu::MemcpyOp::create(b, Type(), ValueRange{}, flatten(host), dev);
    return bufferization::ToTensorOp::create(b, type, host, /*restrict=*/true,
                                             /*writable=*/true);
  }

  /// device-abi: `dev` (a device buffer of this op) as the tensor result of
  /// `type`; it is not freed here but marked for moe-gpu-device-abi.
  Value deviceResult(Value dev, RankedTensorType type, ArrayRef<Value> dyn) {
    auto *it = llvm::find(deviceBuffers, dev);
    if (it == deviceBuffers.end()) { // not this op's buffer: copy it
      Value n = e.idx(1);
      for (int64_t i = 0, j = 0; i < type.getRank(); ++i)
        n = e.muli(n, type.isDynamicDim(i) ? dyn[j++] : e.idx(type.getDimSize(i)));
      Value copy = alloc(type.getElementType(), n);
      gpu::MemcpyOp::create(b, Type(), ValueRange{}, copy, dev);
      dev = copy;
      it = llvm::find(deviceBuffers, dev);
    }
    deviceBuffers.erase(it);
    dev.getDefiningOp()->setAttr(kDeviceResultAttr, b.getUnitAttr());
    auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
    Value view = dev;
    if (type.hasStaticShape())
      view = memref::CastOp::create(
          b, MemRefType::get({type.getNumElements()}, type.getElementType()), dev);
    if (type.getRank() == 0)
      view = memref::CollapseShapeOp::create(b, memrefType, view,
                                             ArrayRef<ReassociationIndices>{});
    else if (type.getRank() > 1) {
      SmallVector<OpFoldResult> shape;
      for (int64_t i = 0, j = 0; i < type.getRank(); ++i)
        shape.push_back(type.isDynamicDim(i) ? OpFoldResult(dyn[j++])
                                             : OpFoldResult(b.getIndexAttr(type.getDimSize(i))));
      ReassociationIndices all;
      for (int64_t i = 0; i < type.getRank(); ++i)
        all.push_back(i);
      view = memref::ExpandShapeOp::create(b, memrefType, view,
                                           ArrayRef<ReassociationIndices>{all}, shape);
    }
    Value result =
        bufferization::ToTensorOp::create(b, type, view, /*restrict=*/true, /*writable=*/true);
    deviceValues->insert(result);
    return result;
  }

  /// A host-computed tensor as a moe op result: itself, or (device-abi) an
  /// uploaded device copy.
  Value hostResult(Value tensor) {
    if (!deviceValues)
      return tensor;
    auto type = cast<RankedTensorType>(tensor.getType());
    SmallVector<Value> dyn;
    for (int64_t i = 0; i < type.getRank(); ++i)
      if (type.isDynamicDim(i))
        dyn.push_back(dim(tensor, i));
    return deviceResult(upload(tensor), type, dyn);
  }

  /// `view`, a view of a device tensor, is one too.
  Value deviceView(Value view) {
    if (deviceValues)
      deviceValues->insert(view);
    return view;
  }

  /// The value of a 0-d tensor on the host (device-abi: copied back first,
  /// before this op's GPU work).
  Value hostScalar(Value tensor) {
    if (!isDevice(tensor))
      return tensor::ExtractOp::create(b, tensor, ValueRange{});
    auto type = cast<RankedTensorType>(tensor.getType());
    auto memrefType = MemRefType::get({}, type.getElementType());
    Value dev = bufferization::ToBufferOp::create(b, memrefType, tensor, /*read_only=*/true);
    Value host = memref::AllocaOp::create(b, memrefType);
    gpu::MemcpyOp::create(b, Type(), ValueRange{}, host, dev);
    return memref::LoadOp::create(b, host, ValueRange{});
  }

  /// `download` into a tensor of `resultType`, converting on the host when
  /// the device buffer holds f32 and the result is bf16/f16 (the routing
  /// weights of a hand-written moe.gate with T results).
  Value downloadAs(Value dev, Type resultType, ArrayRef<Value> dims = {}) {
    auto type = cast<RankedTensorType>(resultType);
    if (eltOf(dev) == type.getElementType())
      return download(dev, type, dims);
    Value f32 = download(dev, type.clone(e.f32()), dims);
    return arith::TruncFOp::create(b, type, f32);
  }

  /// `tensor` as f32 (extended on the host when it is bf16/f16).
  Value toF32(Value tensor) {
    auto type = cast<RankedTensorType>(tensor.getType());
    if (type.getElementType().isF32())
      return tensor;
    return arith::ExtFOp::create(b, type.clone(e.f32()), tensor);
  }

  void releaseAll() {
    for (Value buf : deviceBuffers) {
      auto op = gpu::DeallocOp::create(b, Type(), ValueRange{}, buf);
      op->setAttr(bufferization::BufferizationDialect::kManualDeallocation, b.getUnitAttr());
    }
    deviceBuffers.clear();
  }

  func::FuncOp launchDecl(gpu::GPUFuncOp kernel) {
    std::string name = (kLaunchPrefix + kernel.getName()).str();
    if (auto existing = module.lookupSymbol<func::FuncOp>(name))
      return existing;
    SmallVector<Type> args(6, b.getIndexType());
    llvm::append_range(args, kernel.getArgumentTypes());
    OpBuilder ob(module.getContext());
    ob.setInsertionPointToStart(module.getBody());
    auto decl = func::FuncOp::create(ob, module.getLoc(), name,
                                     ob.getFunctionType(args, {}));
    decl.setPrivate();
    decl->setAttr(kLaunchAttr,
                  SymbolRefAttr::get(ob.getStringAttr(kKernelModuleName),
                                     {FlatSymbolRefAttr::get(kernel.getNameAttr())}));
    return decl;
  }

  void launch(gpu::GPUFuncOp kernel, ArrayRef<Value> grid, int64_t block, ArrayRef<Value> args) {
    SmallVector<Value> operands(grid.begin(), grid.end());
    while (operands.size() < 3)
      operands.push_back(e.idx(1));
    operands.append({e.idx(block), e.idx(1), e.idx(1)});
    operands.append(args.begin(), args.end());
    func::CallOp::create(b, launchDecl(kernel), operands);
  }
  Value blocks(Value n, int64_t per) { return e.ceildiv(n, e.idx(per)); }

  /// A one-element f32 device buffer for the unused f32 arguments of a
  /// kernel variant (one per moe op).
  Value dummyF32() {
    if (!dummy)
      dummy = alloc(e.f32(), e.idx(1));
    return dummy;
  }
  Value dummy;

  //===--------------------------------------------------------------------===//
  // Device-level building blocks (operands and results are device buffers)
  //===--------------------------------------------------------------------===//

  /// The router logits [T, E] of type `out` (null: f32, the routing type).
  Value route(Value x, Value wr, Value br, Value T, Value D, Value E, Type out = {}) {
    Value logits = alloc(out ? out : e.f32(), e.muli(T, E));
    launch(lib.route(br != nullptr, eltOf(x), eltOf(logits)),
           {blocks(E, kTileN), blocks(T, kTileM)}, kGemmThreads,
           {x, wr, br ? br : wr, logits, T, D, E});
    return logits;
  }

  struct Gate {
    Value weights, indices, loss; // loss: device [1], or null
    /// The aux loss not reduced yet (gate(..., deferLoss = true)): the
    /// gate's per-block partials, their count and lambda; `loss` is
    /// allocated, and the align kernel of the layer reduces them into it.
    Value partials, numPartials, lambda;
  };
  /// The layer's router inside the gate kernel (one launch for both).
  struct FusedRouter {
    Value x, wr, br, D; // br may be null
  };
  /// `selectionBias`: the device buffer of the selection_bias operand, or
  /// null. A #moe.top_k that is not classic, or that has a selection bias,
  /// runs the production router of docs/spec.md §3.1.1. With `router` the
  /// logits are computed by the gate kernel into `logits` (uninitialized).
  Gate gate(Value logits, Value T, Value E, int64_t k, RoutingAttrInterface routing,
            bool training, Value seed, Value selectionBias = {},
            std::optional<FusedRouter> router = std::nullopt, bool deferLoss = false) {
    Value K = e.idx(k);
    auto moesart = dyn_cast<MoesartRoutingAttr>(routing);
    GateKind kind = isa<DenseRoutingAttr>(routing) ? GateKind::Dense
                    : !moesart                    ? GateKind::TopK
                    : routing.isSampling(training) ? GateKind::MoesartTraining
                                                   : GateKind::MoesartInference;
    bool loss = training && moesart;
    Gate g;
    g.weights = alloc(e.f32(), e.muli(T, K));
    g.indices = alloc(e.i32(), e.muli(T, K));
    Value p = kind == GateKind::MoesartTraining ? alloc(e.f32(), e.muli(T, E)) : g.weights;
    Value nb = blocks(T, router ? kRouteTokens : kGateThreads);
    Value partials = loss ? alloc(e.f32(), nb) : g.weights;
    Value key0 = e.ci32(0), key1 = e.ci32(0);
    if (kind == GateKind::MoesartTraining) {
      // The key is read on the host before the first GPU op (see `start`).
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(start);
      Value s = hostScalar(seed);
      key0 = arith::TruncIOp::create(b, e.i32(), s);
      key1 = arith::TruncIOp::create(
          b, e.i32(),
          arith::ShRUIOp::create(b, s, arith::ConstantOp::create(b, b.getI64IntegerAttr(32))));
    }
    MoesartAdjust adjust = moesart ? moesart.getAdjust() : MoesartAdjust::small_random;
    auto topk = dyn_cast<TopKRoutingAttr>(routing);
    std::optional<ProductionGate> production;
    if (topk && (!topk.isClassic() || selectionBias)) {
      production = ProductionGate{topk.getScore(), topk.getNormalize(), topk.getGroups() > 1,
                                  selectionBias != nullptr};
      if (production->grouped)
        p = alloc(e.f32(), e.muli(T, e.muli(E, e.idx(2))));
    }
    SmallVector<Value> args{logits, g.weights, g.indices, p, partials, T, E, K, key0, key1};
    if (production)
      args.append({selectionBias ? selectionBias : g.weights, e.idx(topk.getGroups()),
                   e.idx(topk.getKeptGroups()), e.cf32(topk.getScale().convertToDouble())});
    if (router)
      args.append({router->x, router->wr, router->br ? router->br : router->wr, router->D});
    launch(lib.gate(kind, adjust, loss, production,
                    selectionBias ? eltOf(selectionBias) : Type(), router.has_value(),
                    router && router->br, router ? eltOf(router->x) : Type()),
           {nb}, kGateThreads, args);
    if (loss) {
      g.loss = alloc(e.f32(), e.idx(1));
      g.lambda = e.cf32(routing.getRegularizerCoefficient());
      if (deferLoss) {
        g.partials = partials;
        g.numPartials = nb;
      } else {
        launch(lib.lossReduce(), {e.idx(1)}, 1, {partials, nb, T, g.lambda, g.loss});
      }
    }
    return g;
  }

  /// `v` as a constant when it is one or a product of constants (static
  /// sizes are built as arith.muli of constants here).
  static std::optional<int64_t> foldedIndex(Value v) {
    if (std::optional<int64_t> c = getConstantIntValue(v))
      return c;
    if (auto mul = v.getDefiningOp<arith::MulIOp>()) {
      std::optional<int64_t> l = foldedIndex(mul.getLhs()), r = foldedIndex(mul.getRhs());
      if (l && r)
        return *l * *r;
    }
    return std::nullopt;
  }

  /// The row tile of the grouped GEMMs for `rows` plan rows over
  /// `numExperts` groups (see Kernels.h): kSmallTileM when the average
  /// group has fewer than kTileM rows (decode), else kTileM (prefill), or
  /// kBigTileM with `big` when it has at least bigTileRows rows.
  Value chooseRowTile(Value rows, int64_t numExperts, bool big) {
    int64_t bigFrom = std::max(bigTileRows, kTileM) * numExperts;
    if (std::optional<int64_t> n = foldedIndex(rows))
      return e.idx(*n < kTileM * numExperts ? kSmallTileM
                   : big && *n >= bigFrom   ? kBigTileM
                                            : kTileM);
    Value prefill = e.idx(kTileM);
    if (big)
      prefill = e.select(e.ult(rows, e.idx(bigFrom)), prefill, e.idx(kBigTileM));
    Value small = e.ult(rows, e.idx(kTileM * numExperts));
    return e.select(small, e.idx(kSmallTileM), prefill);
  }

  /// Whether the GEMMs of a plan may take 128-row tiles: the sm_90a wgmma
  /// kernels with bigTileRows set, for `elt` (the GEMMs' tensor-core type).
  bool bigTiles(std::optional<MmaElt> elt) const { return elt && wgmma && bigTileRows > 0; }

  /// The routing plan on the device, padded to the GEMM row tile.
  struct Plan {
    Value offsets, positions, sourceRows, rowWeights, sorted, tileExpert, numTiles;
    Value pMax, maxTiles, tileRows;
    /// tileRows may be kBigTileM (the GEMMs are the wgmma kernels).
    bool bigTiles = false;
  };
  /// maxTiles = max(1, min(ceil(rows / R) + E, rows)): every tile holds at
  /// least one row, so the launched grid has at most rows + R (E + 1)
  /// padded rows (Kernels.h).
  void sizePlan(Plan &plan, Value rows, int64_t numExperts, bool big) {
    plan.bigTiles = big;
    plan.tileRows = chooseRowTile(rows, numExperts, big);
    Value bound = e.addi(e.ceildiv(rows, plan.tileRows), e.idx(numExperts));
    plan.maxTiles = arith::MaxUIOp::create(
        b, arith::MinUIOp::create(b, bound, rows), e.idx(1));
    plan.pMax = e.muli(plan.maxTiles, plan.tileRows);
    plan.sorted = alloc(e.i32(), plan.pMax);
    plan.tileExpert = alloc(e.i32(), plan.maxTiles);
    plan.numTiles = alloc(e.i32(), e.idx(1));
  }

  Value capacity(Value T, Value K, int64_t numExperts, std::optional<llvm::APFloat> cf) {
    if (!cf)
      return e.toI32(e.muli(T, K));
    Type f64 = b.getF64Type();
    auto toF64 = [&](Value v) {
      return arith::SIToFPOp::create(b, f64, arith::IndexCastOp::create(b, b.getI64Type(), v));
    };
    Value cfv = arith::ConstantOp::create(b, b.getF64FloatAttr(cf->convertToDouble()));
    Value c = arith::DivFOp::create(
        b, arith::MulFOp::create(b, arith::MulFOp::create(b, cfv, toF64(T)), toF64(K)),
        toF64(e.idx(numExperts)));
    return arith::FPToSIOp::create(b, e.i32(), math::CeilOp::create(b, c));
  }

  /// What the align kernel does besides the plan in a fused layer: the
  /// combine's bookkeeping (counters zeroed, y of the tokens without a kept
  /// assignment) and the aux loss reduction.
  struct AlignExtras {
    Value counters, numCounters, y, D, shared; // counters null: no combine
    const Gate *loss = nullptr;                // with deferred partials
  };
  Plan align(Value indices, Value weights, Value T, Value K, int64_t numExperts, Value cap,
             const AlignExtras *extrasOrNull = nullptr, bool big = false) {
    AlignExtras extras = extrasOrNull ? *extrasOrNull : AlignExtras();
    Plan plan;
    Value E = e.idx(numExperts), TK = e.muli(T, K);
    plan.offsets = alloc(e.i32(), e.addi(E, e.idx(1)));
    Value poff = alloc(e.i32(), e.addi(E, e.idx(1)));
    plan.positions = alloc(e.i32(), TK);
    plan.sourceRows = alloc(e.i32(), TK);
    plan.rowWeights = weights ? alloc(e.f32(), TK) : Value();
    sizePlan(plan, TK, numExperts, big);
    Value dummyF = weights ? weights : dummyF32();
    SmallVector<Value> args{indices, dummyF, T, K, E, cap, plan.offsets, poff, plan.positions,
                            plan.sourceRows, weights ? plan.rowWeights : dummyF, plan.sorted,
                            plan.tileExpert, plan.numTiles, plan.pMax, plan.maxTiles,
                            plan.tileRows};
    bool combine = extras.counters != nullptr;
    if (combine) {
      args.append({extras.counters, extras.numCounters, extras.y, extras.D});
      if (extras.shared)
        args.push_back(extras.shared);
    }
    if (extras.loss)
      args.append({extras.loss->partials, extras.loss->numPartials, extras.loss->lambda,
                   extras.loss->loss});
    launch(lib.align(weights != nullptr, weights ? eltOf(weights) : Type(), combine,
                     extras.shared != nullptr, extras.loss != nullptr,
                     combine ? eltOf(extras.y) : Type()),
           {e.idx(1)}, kAlignThreads, args);
    return plan;
  }

  Plan tileMap(Value offsets, Value rows, int64_t numExperts, bool big = false) {
    Plan plan;
    plan.offsets = offsets;
    Value E = e.idx(numExperts);
    Value poff = alloc(e.i32(), e.addi(E, e.idx(1)));
    sizePlan(plan, rows, numExperts, big);
    launch(lib.tileMap(), {e.idx(1)}, kAlignThreads,
           {offsets, E, poff, plan.sorted, plan.tileExpert, plan.numTiles, plan.pMax,
            plan.maxTiles, plan.tileRows});
    return plan;
  }

  struct Experts {
    Value w1, w2, b1, b2; // device
    Activation act;
    Value D, H;
  };
  Experts experts(Value w1, Value w2, Value b1, Value b2, ActivationAttr act) {
    Experts x;
    x.w1 = upload(w1);
    x.w2 = upload(w2);
    x.b1 = b1 ? upload(b1) : Value();
    x.b2 = b2 ? upload(b2) : Value();
    x.act = act.getValue();
    x.D = dim(w1, 1);
    x.H = act.isGated() ? e.divui(dim(w1, 2), e.idx(2)) : dim(w1, 2);
    return x;
  }

  /// The combine fused into GEMM2 (fusedExperts).
  struct FusedCombine {
    Value positions, counters, y, T, K, shared; // shared may be null
  };
  /// GEMM1 (+ gather, bias, activation) and GEMM2 (+ bias, routed weight)
  /// over the padded tiles of `plan`, writing one row of `out` per kept row
  /// (and, with `combine`, the per-token sums into combine->y). h has A's
  /// element type (the CPU path's rounding point); `out` receives GEMM2's f32
  /// result in its own element type. bf16/f16 GEMMs take the tensor-core
  /// kernels (mmaElt), GEMM2 with the combine epilogue in a fused layer; the
  /// kernels are specialised on the plan's row tile: a dynamic T launches
  /// the pair of its run-time tile (forRowTile).
  void ffn(Value A, bool gather, const Plan &plan, const Experts &x, Value out,
           const FusedCombine *combine = nullptr) {
    Value h = alloc(eltOf(A), e.muli(plan.pMax, x.H));
    bool weighted = plan.rowWeights != nullptr;
    if (std::optional<MmaElt> elt = mmaElt(A, x, eltOf(out), combine ? eltOf(combine->y) : Type())) {
      // Host buffers are made before forRowTile's branches (they are freed
      // after the op).
      Value rowWeights = weighted ? plan.rowWeights : dummyF32();
      forRowTile(plan, [&](int64_t tileM) {
        MmaGemmConfig g1;
        g1.elt = *elt;
        g1.tileM = tileM;
        g1.gather = gather;
        g1.act = x.act;
        g1.bias = x.b1 != nullptr;
        g1.wgmma = wgmma && tileM >= warp_layout::Wgmma::M;
        launch(buildMmaGemm(lib.getModule(), g1), {blocks(x.H, g1.tileN()), plan.maxTiles},
               g1.threads(),
               {A, plan.sorted, gather ? plan.sourceRows : plan.sorted, plan.tileExpert,
                plan.numTiles, x.w1, x.b1 ? x.b1 : x.w1, h, x.D, x.H});
        MmaGemmConfig g2;
        g2.kind = MmaGemmConfig::Kind::gemm2;
        g2.elt = *elt;
        g2.tileM = tileM;
        g2.weighted = weighted;
        g2.bias = x.b2 != nullptr;
        g2.outF32 = eltOf(out).isF32();
        g2.combine = combine != nullptr;
        g2.shared = combine && combine->shared;
        g2.wgmma = g1.wgmma;
        SmallVector<Value> args{h,     plan.sorted, rowWeights,
                                plan.tileExpert, plan.numTiles, x.w2, x.b2 ? x.b2 : x.w2,
                                out,   x.H,         x.D};
        if (combine) {
          args.append({plan.sourceRows, combine->positions, combine->counters, combine->y,
                       combine->K});
          if (combine->shared)
            args.push_back(combine->shared);
        }
        launch(buildMmaGemm(lib.getModule(), g2), {blocks(x.D, g2.tileN()), plan.maxTiles},
               g2.threads(), args);
      });
      return;
    }
    assert(!plan.bigTiles && "128-row tiles are for the wgmma kernels only");
    launch(lib.gemm1(gather, x.act, x.b1 != nullptr, eltOf(A), eltOf(x.w1), eltOf(h)),
           {blocks(x.H, kTileN), plan.maxTiles}, kGemmThreads,
           {A, plan.sorted, gather ? plan.sourceRows : plan.sorted, plan.tileExpert,
            plan.numTiles, x.w1, x.b1 ? x.b1 : x.w1, h, x.D, x.H, plan.tileRows});
    SmallVector<Value> args{h,     plan.sorted, weighted ? plan.rowWeights : dummyF32(),
                            plan.tileExpert, plan.numTiles, x.w2, x.b2 ? x.b2 : x.w2,
                            out,   x.H,         x.D,         plan.tileRows};
    if (combine) {
      args.append({plan.sourceRows, combine->positions, combine->counters, combine->y,
                   combine->K});
      if (combine->shared)
        args.push_back(combine->shared);
    }
    launch(lib.gemm2(weighted, x.b2 != nullptr, eltOf(h), eltOf(x.w2), eltOf(out),
                     combine != nullptr, combine && combine->shared,
                     combine ? eltOf(combine->y) : Type()),
           {blocks(x.D, kTileN), plan.maxTiles}, kGemmThreads, args);
  }

  /// The element type of the tensor-core kernels (MmaGemm.h) for ffn()'s
  /// GEMMs, or nullopt for the CUDA-core kernels: tensor cores on; A, the
  /// weights and the biases of one bf16/f16 type T; GEMM2's rows f32 or T
  /// (f32 with a combine, whose y is T).
  std::optional<MmaElt> mmaElt(Value A, const Experts &x, Type out, Type y) {
    if (!tensorCores)
      return std::nullopt;
    Type t = eltOf(A);
    std::optional<MmaElt> elt = mmaEltOf(t);
    if (!elt || eltOf(x.w1) != t || eltOf(x.w2) != t || (x.b1 && eltOf(x.b1) != t) ||
        (x.b2 && eltOf(x.b2) != t) || (out != t && !out.isF32()) ||
        (y && (y != t || !out.isF32())))
      return std::nullopt;
    return elt;
  }

  /// Emits `body(R)` for the plan's row tile R: once when R is a constant
  /// (static T), else under an scf.if on its run-time value, once per
  /// possible tile (kSmallTileM, kTileM, and kBigTileM when the plan may
  /// take it): the launches of one branch run.
  void forRowTile(const Plan &plan, function_ref<void(int64_t)> body) {
    if (std::optional<int64_t> tile = getConstantIntValue(plan.tileRows))
      return body(*tile);
    auto ifOp = scf::IfOp::create(b, e.eq(plan.tileRows, e.idx(kSmallTileM)),
                                  /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    body(kSmallTileM);
    b.setInsertionPointToStart(ifOp.elseBlock());
    if (!plan.bigTiles)
      return body(kTileM);
    auto big = scf::IfOp::create(b, e.eq(plan.tileRows, e.idx(kBigTileM)),
                                 /*withElseRegion=*/true);
    b.setInsertionPointToStart(big.thenBlock());
    body(kBigTileM);
    b.setInsertionPointToStart(big.elseBlock());
    body(kTileM);
  }

  /// The fused token-choice expert family in three launches: align (+ the
  /// combine's bookkeeping, + the aux loss of `loss`), GEMM1 with the
  /// gather, GEMM2 with the routed weight and the deterministic per-token
  /// combine in its epilogue (starting from `shared`, the shared expert's
  /// f32 output, when given). GEMM2's rows stay f32 (the CPU path's
  /// fused_experts); y, of type `yType`, is their f32 sum rounded once.
  Value fusedExperts(Value x, Value indices, Value weights, Value T, Value K, int64_t numExperts,
                     std::optional<llvm::APFloat> cf, const Experts &ex, Type yType,
                     Value shared = {}, const Gate *loss = nullptr) {
    Value y = alloc(yType, e.muli(T, ex.D));
    AlignExtras extras;
    // One arrival counter per (token, GEMM2 column tile).
    std::optional<MmaElt> mmaType = mmaElt(x, ex, e.f32(), yType);
    bool mma = mmaType.has_value();
    extras.numCounters = e.muli(T, blocks(ex.D, mma ? kMmaTileN : kTileN));
    extras.counters = alloc(e.i32(), extras.numCounters);
    extras.y = y;
    extras.D = ex.D;
    extras.shared = shared;
    extras.loss = loss;
    Plan plan = align(indices, weights, T, K, numExperts, capacity(T, K, numExperts, cf),
                      &extras, bigTiles(mmaType));
    Value rows = alloc(e.f32(), e.muli(e.muli(T, K), ex.D));
    FusedCombine combine{plan.positions, extras.counters, y, T, K, shared};
    ffn(x, /*gather=*/true, plan, ex, rows, &combine);
    return y;
  }

  /// The shared expert of docs/spec.md §3.1.1 on the device buffer `x` ([T, D]):
  /// the grouped GEMM kernels with one group of all T rows (offsets [0, T],
  /// no gather), the gate sigmoid(x sg) (router GEMM + moe_sigmoid_kernel)
  /// as GEMM2's row weight. Returns the f32 output [T, D] on the device.
  Value sharedExpert(Value x, Value T, Value D, Value s1, Value s2, Value sg,
                     ActivationAttr act) {
    Experts ex;
    ex.w1 = upload(s1); // [D, W] is the flat layout of [1, D, W]
    ex.w2 = upload(s2);
    ex.act = act.getValue();
    ex.D = D;
    ex.H = act.isGated() ? e.divui(dim(s1, 1), e.idx(2)) : dim(s1, 1);
    Value hostOffsets = tensor::FromElementsOp::create(
        b, RankedTensorType::get({2}, e.i32()), ValueRange{e.ci32(0), e.toI32(T)});
    Plan plan = tileMap(upload(hostOffsets), T, /*numExperts=*/1,
                        bigTiles(mmaElt(x, ex, e.f32(), Type())));
    if (sg) {
      Value logits = route(x, upload(sg), Value(), T, D, e.idx(1));
      plan.rowWeights = alloc(e.f32(), T);
      launch(lib.sigmoid(), {blocks(T, kEltThreads)}, kEltThreads,
             {logits, plan.rowWeights, T});
    }
    Value out = alloc(e.f32(), e.muli(T, D)); // every row is a token
    ffn(x, /*gather=*/false, plan, ex, out);
    return out;
  }

  /// Soft MoE dispatch on the device: slot rows [E*G*S, D] and Cw.
  struct SoftFront {
    Value rows, combineWeights, G, M, D, ES, S;
  };
  /// The slot inputs are rounded to `rowsType` (docs/spec.md §2-§3: to T before the
  /// experts), the combine weights stored as `cwType`.
  SoftFront softFront(Value xT, Value phiT, Value scaleT, bool normalize, Type rowsType,
                      Type cwType) {
    SoftFront f;
    f.G = dim(xT, 0);
    f.M = dim(xT, 1);
    f.D = dim(xT, 2);
    f.S = dim(phiT, 2);
    f.ES = e.muli(dim(phiT, 1), f.S);
    Value GM = e.muli(f.G, f.M);
    Value x = upload(xT), phi = upload(phiT);
    Value rx = x, rphi = phi;
    if (normalize) {
      rx = alloc(e.f32(), GM);
      rphi = alloc(e.f32(), f.ES);
      launch(lib.softNorms(eltOf(x)), {blocks(e.addi(GM, f.ES), kEltThreads)}, kEltThreads,
             {x, phi, rx, rphi, GM, f.ES, f.D});
    }
    Value scale = scaleT ? hostScalar(scaleT) : e.cf32(1.0);
    if (!scale.getType().isF32())
      scale = arith::ExtFOp::create(b, e.f32(), scale);
    Value L = alloc(e.f32(), e.muli(GM, f.ES));
    launch(lib.softLogits(normalize, eltOf(x)), {blocks(f.ES, kTileN), blocks(GM, kTileM)},
           kGemmThreads,
           {x, phi, rx, rphi, L, GM, f.ES, f.D, scale});
    Value dw = alloc(e.f32(), e.muli(GM, f.ES));
    launch(lib.softDispatchWeights(), {blocks(e.muli(f.G, f.ES), kEltThreads)}, kEltThreads,
           {L, dw, f.G, f.M, f.ES});
    f.combineWeights = alloc(cwType, e.muli(GM, f.ES));
    launch(lib.softCombineWeights(cwType), {blocks(GM, kEltThreads)}, kEltThreads,
           {L, f.combineWeights, f.G, f.M, f.ES});
    f.rows = alloc(rowsType, e.muli(e.muli(f.ES, f.G), f.D));
    launch(lib.softSlots(eltOf(x), rowsType), {blocks(f.D, kTileN), blocks(f.ES, kTileM), f.G},
           kGemmThreads,
           {dw, x, f.rows, f.G, f.M, f.ES, f.S, f.D});
    return f;
  }

  /// offsets[e] = e * G * S as a host tensor<E+1 x i32>.
  Value softOffsets(int64_t numExperts, Value G, Value S) {
    Value per = e.toI32(e.muli(G, S));
    SmallVector<Value> elems;
    for (int64_t i = 0; i <= numExperts; ++i)
      elems.push_back(e.muli(e.ci32(i), per));
    return tensor::FromElementsOp::create(
        b, RankedTensorType::get({numExperts + 1}, e.i32()), elems);
  }

  Value softCombine(Value expertOut, Value cw, Value G, Value M, Value ES, Value S, Value D,
                    Type yType) {
    Value y = alloc(yType, e.muli(e.muli(G, M), D));
    launch(lib.softCombine(eltOf(cw), eltOf(expertOut), yType),
           {blocks(D, kTileN), blocks(M, kTileM), G}, kGemmThreads,
           {cw, expertOut, y, G, M, ES, S, D});
    return y;
  }
};

//===----------------------------------------------------------------------===//
// Per-op conversions
//===----------------------------------------------------------------------===//

int64_t staticExperts(Value w1) { return cast<RankedTensorType>(w1.getType()).getDimSize(0); }

Value zeroLoss(Host &h, Type type) {
  auto tt = cast<RankedTensorType>(type);
  return arith::ConstantOp::create(
      h.b, DenseElementsAttr::get(tt, h.b.getFloatAttr(tt.getElementType(), 0.0)));
}

LogicalResult convert(LayerOp op, Host &h) {
  int64_t numExperts = op.getNumExperts();
  if (ShapedType::isDynamic(numExperts))
    return op.emitError("cannot lower to the GPU: the number of experts is dynamic");
  int64_t k = op.getRouting().getExpertsPerToken(numExperts);
  Value T = h.dim(op.getInput(), 0), D = h.dim(op.getInput(), 1), E = h.e.idx(numExperts);
  Value x = h.upload(op.getInput());
  Value wr = h.upload(op.getRouterWeight());
  Value br = op.getRouterBias() ? h.upload(op.getRouterBias()) : Value();
  Host::Experts ex = h.experts(op.getW1(), op.getW2(), op.getB1(), op.getB2(),
                               op.getActivationAttr());
  Value sb = op.getSelectionBias() ? h.upload(op.getSelectionBias()) : Value();
  // Router + gate in one launch, align (+ the aux loss), GEMM1, GEMM2 with
  // the combine: 4 launches (plus the shared expert's).
  Value logits = h.alloc(h.e.f32(), h.e.muli(T, E));
  Host::Gate g = h.gate(logits, T, E, k, op.getRouting(), op.getTraining(), op.getSeed(), sb,
                        Host::FusedRouter{x, wr, br, D}, /*deferLoss=*/true);
  Value shared = op.getSharedW1()
                     ? h.sharedExpert(x, T, D, op.getSharedW1(), op.getSharedW2(),
                                      op.getSharedGate(), op.getActivationAttr())
                     : Value();
  Value y = h.fusedExperts(x, g.indices, g.weights, T, h.e.idx(k), numExperts,
                           op.getCapacityFactor(), ex, eltOf(op.getOutput()), shared,
                           g.partials ? &g : nullptr);
  SmallVector<Value> results{h.download(y, op.getOutput().getType(), {T, D})};
  if (op.getAuxLoss())
    results.push_back(g.loss ? h.download(g.loss, op.getAuxLoss().getType())
                             : h.hostResult(zeroLoss(h, op.getAuxLoss().getType())));
  h.releaseAll();
  op->replaceAllUsesWith(results);
  return success();
}

LogicalResult convert(RouteOp op, Host &h) {
  Value T = h.dim(op.getInput(), 0), D = h.dim(op.getInput(), 1);
  Value E = h.dim(op.getRouterWeight(), 1);
  Value x = h.upload(op.getInput()), wr = h.upload(op.getRouterWeight());
  Value br = op.getRouterBias() ? h.upload(op.getRouterBias()) : Value();
  Value logits = h.route(x, wr, br, T, D, E, eltOf(op.getLogits()));
  Value r = h.download(logits, op.getLogits().getType(), {T, E});
  h.releaseAll();
  op->replaceAllUsesWith(ValueRange{r});
  return success();
}

LogicalResult convert(GateOp op, Host &h) {
  int64_t numExperts = op.getNumExperts();
  if (ShapedType::isDynamic(numExperts))
    return op.emitError("cannot lower to the GPU: the number of experts is dynamic");
  int64_t k = op.getRouting().getExpertsPerToken(numExperts);
  Value T = h.dim(op.getLogits(), 0), E = h.e.idx(numExperts);
  // The gate kernels read f32 logits (routing in f32).
  Value logits = h.upload(h.toF32(op.getLogits()));
  Value sb = op.getSelectionBias() ? h.upload(op.getSelectionBias()) : Value();
  Host::Gate g =
      h.gate(logits, T, E, k, op.getRouting(), op.getTraining(), op.getSeed(), sb);
  SmallVector<Value> results{h.downloadAs(g.weights, op.getWeights().getType(), {T, h.e.idx(k)}),
                             h.download(g.indices, op.getIndices().getType(), {T, h.e.idx(k)})};
  if (op.getAuxLoss())
    results.push_back(g.loss ? h.download(g.loss, op.getAuxLoss().getType())
                             : h.hostResult(zeroLoss(h, op.getAuxLoss().getType())));
  h.releaseAll();
  op->replaceAllUsesWith(results);
  return success();
}

LogicalResult convert(DispatchOp op, Host &h) {
  int64_t numExperts = op.getNumExperts();
  Value T = h.dim(op.getInput(), 0), D = h.dim(op.getInput(), 1);
  Value K = h.dim(op.getIndices(), 1);
  Value x = h.upload(op.getInput()), indices = h.upload(op.getIndices());
  Host::Plan plan = h.align(indices, Value(), T, K, numExperts,
                            h.capacity(T, K, numExperts, op.getCapacityFactor()));
  Value N = h.e.muli(T, K);
  Value rows = h.alloc(eltOf(x), h.e.muli(N, D));
  h.launch(h.lib.dispatchRows(eltOf(x)), {h.blocks(h.e.muli(N, D), kEltThreads)}, kEltThreads,
           {x, plan.sourceRows, rows, N, D});
  SmallVector<Value> results{
      h.download(rows, op.getRows().getType(), {N, D}),
      h.download(plan.offsets, op.getOffsets().getType(), {h.e.idx(numExperts + 1)}),
      h.download(plan.sourceRows, op.getSourceRows().getType(), {N}),
      h.download(plan.positions, op.getPositions().getType(), {T, K})};
  h.releaseAll();
  op->replaceAllUsesWith(results);
  return success();
}

LogicalResult convert(ExpertFFNOp op, Host &h) {
  int64_t numExperts = staticExperts(op.getW1());
  if (ShapedType::isDynamic(numExperts))
    return op.emitError("cannot lower to the GPU: the number of experts is dynamic");
  Value N = h.dim(op.getRows(), 0);
  Value rows = h.upload(op.getRows()), offsets = h.upload(op.getOffsets());
  Host::Experts ex = h.experts(op.getW1(), op.getW2(), op.getB1(), op.getB2(),
                               op.getActivationAttr());
  Type outElt = eltOf(op.getOutput());
  Host::Plan plan =
      h.tileMap(offsets, N, numExperts, h.bigTiles(h.mmaElt(rows, ex, outElt, Type())));
  Value out = h.alloc(outElt, h.e.muli(N, ex.D));
  // Rows from offsets[E] on are zero.
  gpu::MemsetOp::create(h.b, Type(), ValueRange{}, out,
                        arith::ConstantOp::create(h.b, h.b.getZeroAttr(outElt)));
  h.ffn(rows, /*gather=*/false, plan, ex, out);
  Value r = h.download(out, op.getOutput().getType(), {N, ex.D});
  h.releaseAll();
  op->replaceAllUsesWith(ValueRange{r});
  return success();
}

LogicalResult convert(CombineOp op, Host &h) {
  Value T = h.dim(op.getWeights(), 0), K = h.dim(op.getWeights(), 1);
  Value D = h.dim(op.getExpertOutput(), 1);
  Value out = h.upload(op.getExpertOutput()), w = h.upload(op.getWeights());
  Value pos = h.upload(op.getPositions());
  Value y = h.alloc(eltOf(op.getOutput()), h.e.muli(T, D));
  SmallVector<Value> args{out, w, pos, y, T, K, D};
  if (op.getSharedOutput())
    args.push_back(h.upload(op.getSharedOutput()));
  h.launch(h.lib.combine(op.getSharedOutput() != nullptr, eltOf(out), eltOf(w), eltOf(y)),
           {h.blocks(h.e.muli(T, D), kEltThreads)}, kEltThreads, args);
  Value r = h.download(y, op.getOutput().getType(), {T, D});
  h.releaseAll();
  op->replaceAllUsesWith(ValueRange{r});
  return success();
}

LogicalResult convert(FusedExpertsOp op, Host &h) {
  int64_t numExperts = op.getNumExperts();
  Value T = h.dim(op.getInput(), 0), K = h.dim(op.getIndices(), 1);
  (void)K;
  Value x = h.upload(op.getInput()), indices = h.upload(op.getIndices());
  Value w = h.upload(op.getWeights());
  Host::Experts ex = h.experts(op.getW1(), op.getW2(), op.getB1(), op.getB2(),
                               op.getActivationAttr());
  Value shared = op.getSharedOutput() ? h.upload(op.getSharedOutput()) : Value();
  Value y = h.fusedExperts(x, indices, w, T, K, numExperts, op.getCapacityFactor(), ex,
                           eltOf(op.getOutput()), shared);
  Value r = h.download(y, op.getOutput().getType(), {T, ex.D});
  h.releaseAll();
  op->replaceAllUsesWith(ValueRange{r});
  return success();
}

LogicalResult convert(SharedExpertOp op, Host &h) {
  Value T = h.dim(op.getInput(), 0), D = h.dim(op.getInput(), 1);
  Value x = h.upload(op.getInput());
  Value out = h.sharedExpert(x, T, D, op.getSharedW1(), op.getSharedW2(), op.getSharedGate(),
                             op.getActivationAttr());
  Value r = h.download(out, op.getOutput().getType(), {T, D});
  h.releaseAll();
  op->replaceAllUsesWith(ValueRange{r});
  return success();
}

LogicalResult convert(SoftDispatchOp op, Host &h) {
  int64_t numExperts = cast<RankedTensorType>(op.getSlots().getType()).getDimSize(1);
  if (ShapedType::isDynamic(numExperts))
    return op.emitError("cannot lower to the GPU: the number of experts is dynamic");
  Host::SoftFront f = h.softFront(op.getInput(), op.getSlots(), op.getScale(), op.getNormalize(),
                                  eltOf(op.getRows()), eltOf(op.getCombineWeights()));
  Value offsets = h.softOffsets(numExperts, f.G, f.S);
  SmallVector<Value> results{
      h.download(f.rows, op.getRows().getType(), {h.e.muli(f.ES, f.G), f.D}),
      h.deviceView(tensor::CastOp::create(h.b, op.getOffsets().getType(), h.hostResult(offsets))),
      h.download(f.combineWeights, op.getCombineWeights().getType(),
                 {f.G, f.M, h.e.idx(numExperts), f.S})};
  h.releaseAll();
  op->replaceAllUsesWith(results);
  return success();
}

LogicalResult convert(SoftCombineOp op, Host &h) {
  Value G = h.dim(op.getCombineWeights(), 0), M = h.dim(op.getCombineWeights(), 1);
  Value S = h.dim(op.getCombineWeights(), 3);
  Value ES = h.e.muli(h.dim(op.getCombineWeights(), 2), S);
  Value D = h.dim(op.getExpertOutput(), 1);
  Value out = h.upload(op.getExpertOutput()), cw = h.upload(op.getCombineWeights());
  Value y = h.softCombine(out, cw, G, M, ES, S, D, eltOf(op.getOutput()));
  Value r = h.download(y, op.getOutput().getType(), {G, M, D});
  h.releaseAll();
  op->replaceAllUsesWith(ValueRange{r});
  return success();
}

template <typename OpT>
LogicalResult convertSoftLayer(OpT op, Host &h) {
  int64_t numExperts = cast<RankedTensorType>(op.getSlots().getType()).getDimSize(1);
  if (ShapedType::isDynamic(numExperts))
    return op.emitError("cannot lower to the GPU: the number of experts is dynamic");
  // Slot inputs rounded to T, expert outputs and combine weights kept in
  // f32, y rounded once (docs/spec.md §2-§3).
  Host::SoftFront f = h.softFront(op.getInput(), op.getSlots(), op.getScale(), op.getNormalize(),
                                  eltOf(op.getInput()), h.e.f32());
  Host::Experts ex = h.experts(op.getW1(), op.getW2(), op.getB1(), op.getB2(),
                               op.getActivationAttr());
  Value N = h.e.muli(f.ES, f.G);
  Value offsets = h.upload(h.softOffsets(numExperts, f.G, f.S));
  Host::Plan plan = h.tileMap(offsets, N, numExperts,
                              h.bigTiles(h.mmaElt(f.rows, ex, h.e.f32(), Type())));
  Value out = h.alloc(h.e.f32(), h.e.muli(N, f.D)); // every row is a slot
  h.ffn(f.rows, /*gather=*/false, plan, ex, out);
  Value y = h.softCombine(out, f.combineWeights, f.G, f.M, f.ES, f.S, f.D,
                          eltOf(op.getOutput()));
  Value r = h.download(y, op.getOutput().getType(), {f.G, f.M, f.D});
  h.releaseAll();
  op->replaceAllUsesWith(ValueRange{r});
  return success();
}

//===----------------------------------------------------------------------===//
// device-abi: the host's element-wise tensor ops on device tensors
//===----------------------------------------------------------------------===//

/// The body of a linalg.generic that isDeviceElementwise accepts: pure ops
/// without regions (no linalg.index) whose operands are the block's
/// arguments, results of earlier body ops or constants defined outside.
bool isScalarBody(Block &body) {
  auto inBodyOrConstant = [&](Value v) {
    return v.getParentBlock() == &body || matchPattern(v, m_Constant());
  };
  for (Operation &inner : body) {
    if (&inner == body.getTerminator())
      return inner.getNumOperands() == 1 && inBodyOrConstant(inner.getOperand(0));
    if (inner.getNumRegions() || !isPure(&inner) || isa<linalg::IndexOp>(inner) ||
        !llvm::all_of(inner.getOperands(), inBodyOrConstant))
      return false;
  }
  return false;
}

/// device-abi: an element-wise tensor op that runs on the device when it
/// reads a device tensor (a residual add between layers, a scaling, ...):
/// one ranked tensor result, every operand a ranked tensor of the same
/// shape, and either an ElementwiseMappable op without regions (arith.addf,
/// math.exp, arith.select, ...) or a linalg.generic with only parallel
/// iterators, identity indexing maps, one init and a scalar body.
bool isDeviceElementwise(Operation *op) {
  if (op->getNumResults() != 1 || op->getNumOperands() == 0)
    return false;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type)
    return false;
  auto sameShape = [&](Value v) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.getShape() == type.getShape();
  };
  if (!llvm::all_of(op->getOperands(), sameShape))
    return false;
  if (OpTrait::hasElementwiseMappableTraits(op))
    return op->getNumRegions() == 0;
  auto generic = dyn_cast<linalg::GenericOp>(op);
  return generic && generic.getNumDpsInits() == 1 && generic.hasPureTensorSemantics() &&
         generic.getNumLoops() == generic.getNumParallelLoops() &&
         llvm::all_of(generic.getIndexingMapsArray(),
                      [](AffineMap map) { return map.isIdentity(); }) &&
         isScalarBody(generic.getRegion().front());
}

/// The kernel of an element-wise op is named after what it computes (op
/// names, attributes, element types and the dataflow of a generic body), so
/// that equal ops share one kernel: moe_elementwise_<op>_<16 hex digits>.
std::string elementwiseKernelName(Operation *op) {
  std::string signature;
  llvm::raw_string_ostream os(signature);
  auto describe = [&](Operation *o, function_ref<void(Value)> operand) {
    os << o->getName() << o->getAttrDictionary() << "(";
    for (Value v : o->getOperands())
      operand(v);
    os << ")->";
    llvm::interleaveComma(o->getResultTypes(), os);
    os << ";";
  };
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic) {
    describe(op, [&](Value v) { os << eltOf(v) << ","; });
  } else {
    Block &body = generic.getRegion().front();
    llvm::DenseMap<Operation *, unsigned> index;
    for (BlockArgument arg : body.getArguments())
      os << "arg" << arg.getArgNumber() << ":" << arg.getType() << ",";
    for (Operation &inner : body) {
      index[&inner] = index.size();
      describe(&inner, [&](Value v) {
        if (auto arg = dyn_cast<BlockArgument>(v))
          os << "a" << arg.getArgNumber() << ",";
        else if (v.getParentBlock() == &body)
          os << "o" << index.lookup(v.getDefiningOp()) << "#"
             << cast<OpResult>(v).getResultNumber() << ",";
        else // a constant from outside
          describe(v.getDefiningOp(), [](Value) {});
      });
    }
  }
  std::string opName = op->getName().stripDialect().str();
  llvm::replace(opName, '.', '_');
  return llvm::formatv("moe_elementwise_{0}_{1:x-16}", opName,
                       llvm::xxh3_64bits(signature))
      .str();
}

/// An element-wise op on device tensors (isDeviceElementwise) as one kernel
/// launch: operands on the device (device tensors in place, host ones
/// uploaded), the result a device tensor like a moe op's.
LogicalResult convertElementwise(Operation *op, Host &h) {
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  auto generic = dyn_cast<linalg::GenericOp>(op);
  // The tensors the kernel reads: every operand of an op; a generic's
  // inputs, and its init when the body reads it.
  SmallVector<Value> inputs;
  if (!generic) {
    inputs.assign(op->getOperands().begin(), op->getOperands().end());
  } else {
    llvm::append_range(inputs, generic.getDpsInputs());
    if (generic.getMatchingBlockArgument(generic.getDpsInitOperand(0)).getNumUses())
      inputs.push_back(generic.getDpsInits()[0]);
  }
  Value shapeSource = op->getOperand(0);
  SmallVector<Value> buffers, dims;
  SmallVector<Type> types;
  for (Value t : inputs) {
    buffers.push_back(h.upload(t));
    types.push_back(eltOf(t));
  }
  for (int64_t i = 0; i < type.getRank(); ++i)
    dims.push_back(h.dim(shapeSource, i));
  Value n = h.numElements(shapeSource);
  Type elt = type.getElementType();
  Value out = h.alloc(elt, n);
  Location loc = op->getLoc();
  gpu::GPUFuncOp kernel = h.lib.elementwise(
      elementwiseKernelName(op), types, elt, [&](IRB &e, ValueRange in) -> Value {
        OpBuilder::InsertionGuard guard(e.b);
        if (!generic) {
          OperationState state(loc, op->getName());
          state.addOperands(in);
          state.addTypes(elt);
          state.addAttributes(op->getAttrs());
          return e.b.create(state)->getResult(0);
        }
        Block &body = generic.getRegion().front();
        IRMapping map;
        for (auto [arg, value] : llvm::zip(body.getArguments(), in))
          map.map(arg, value);
        if (in.size() > generic.getNumDpsInputs()) // the init is read
          map.map(body.getArguments().back(), in.back());
        auto mapOutside = [&](Value v) {
          if (v.getParentBlock() != &body && !map.contains(v))
            map.map(v, e.b.clone(*v.getDefiningOp())->getResult(0));
        };
        for (Operation &inner : body.without_terminator()) {
          llvm::for_each(inner.getOperands(), mapOutside);
          e.b.clone(inner, map);
        }
        Value yielded = body.getTerminator()->getOperand(0);
        mapOutside(yielded);
        return map.lookup(yielded);
      });
  // At least one block: a launch of an empty grid is an error in CUDA.
  Value grid = arith::MaxUIOp::create(h.b, h.blocks(n, kEltThreads), h.e.idx(1));
  SmallVector<Value> args(buffers);
  args.append({out, n});
  h.launch(kernel, {grid}, kEltThreads, args);
  Value r = h.download(out, type, dims);
  h.releaseAll();
  op->replaceAllUsesWith(ValueRange{r});
  return success();
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

  /// Without libdevice the kernels' math calls stay unresolved in the PTX;
  /// say so up front instead of producing a binary that cannot load.
  LogicalResult checkToolkit(Operation *anchor) {
    if (toolkit.empty())
      return success();
    if (toolkit == "none")
      return anchor->emitError()
             << "moe-nvptx-pipeline: no CUDA toolkit found; the kernels link "
                "libdevice (nvvm/libdevice/libdevice.10.bc): install the toolkit "
                "or pass cuda-path=DIR (or set CUDA_HOME)";
    llvm::SmallString<256> libdevice(toolkit);
    llvm::sys::path::append(libdevice, "nvvm", "libdevice", "libdevice.10.bc");
    if (!llvm::sys::fs::exists(libdevice))
      return anchor->emitError()
             << "moe-nvptx-pipeline: the CUDA toolkit at '" << toolkit
             << "' has no " << libdevice.str()
             << "; the kernels link libdevice (pass cuda-path=DIR or set CUDA_HOME)";
    return success();
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
    if (failed(checkToolkit(ops.front())))
      return signalPassFailure();
    if (bigTileRows < 0) {
      ops.front()->emitError() << "convert-moe-to-gpu: option big-tile-rows must be >= 0 (got "
                               << static_cast<int64_t>(bigTileRows) << ")";
      return signalPassFailure();
    }
    bool failedAny = false;

    KernelLibrary lib(module);
    for (Operation *op : ops) {
      OpBuilder ob(op);
      ImplicitLocOpBuilder b(op->getLoc(), ob);
      Host h(b, lib, module);
      auto func = op->getParentOfType<func::FuncOp>();
      if (deviceAbi && func && func.isPublic())
        h.deviceValues = &deviceValues;
      h.tensorCores = tensorCores;
      h.wgmma = wgmma;
      h.bigTileRows = bigTileRows;
      LogicalResult result =
          llvm::TypeSwitch<Operation *, LogicalResult>(op)
              .Case<LayerOp, RouteOp, GateOp, DispatchOp, ExpertFFNOp, SharedExpertOp,
                    CombineOp, FusedExpertsOp, SoftDispatchOp, SoftCombineOp>(
                  [&](auto concrete) { return convert(concrete, h); })
              .Case<SoftLayerOp, FusedSoftExpertsOp>(
                  [&](auto concrete) { return convertSoftLayer(concrete, h); })
              .Default([&](Operation *op) -> LogicalResult {
                if (elementwise.contains(op))
                  return convertElementwise(op, h);
                return op->emitError("no GPU lowering for this moe op");
              });
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

/// Turns the launch placeholders into gpu.launch_func (after bufferization
/// and buffer deallocation) and drops their declarations.
struct MaterializeLaunchesPass
    : public moe::impl::MoEGPUMaterializeLaunchesBase<MaterializeLaunchesPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << getArgument() << " on "
                            << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    ModuleOp module = getOperation();
    SmallVector<func::CallOp> calls;
    module.walk([&](func::CallOp call) {
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
      if (callee && callee->hasAttr(kLaunchAttr))
        calls.push_back(call);
    });
    for (func::CallOp call : calls) {
      auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
      auto kernelRef = cast<SymbolRefAttr>(callee->getAttr(kLaunchAttr));
      auto kernel = SymbolTable::lookupNearestSymbolFrom<gpu::GPUFuncOp>(module, kernelRef);
      if (!kernel) {
        call.emitError() << "kernel " << kernelRef << " not found";
        return signalPassFailure();
      }
      OpBuilder b(call);
      ValueRange ops = call.getOperands();
      gpu::LaunchFuncOp::create(b, call.getLoc(), kernel,
                                gpu::KernelDim3{ops[0], ops[1], ops[2]},
                                gpu::KernelDim3{ops[3], ops[4], ops[5]}, Value(),
                                ops.drop_front(6));
      call.erase();
    }
    for (func::FuncOp f : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
      if (f->hasAttr(kLaunchAttr))
        f.erase();
  }
};

} // namespace

bool moe::deviceAbiApplies(ModuleOp module) {
  llvm::DenseSet<Value> device;
  llvm::SetVector<Operation *> elementwise;
  return succeeded(
      ConvertMoEToGPUPass::findDeviceValues(module, device, elementwise, /*emit=*/false));
}
