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
// `--moe-gpu-materialize-launches` turns the calls into gpu.launch_func after
// bufferization and deallocation. Device buffers carry
// `bufferization.manual_deallocation` and are freed here with gpu.dealloc.
//
//===----------------------------------------------------------------------===//

#include "lowering/Passes.h"
#include "runtime/IndexErrors.h"
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
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
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

constexpr llvm::StringLiteral kLaunchAttr = moe::MoEDialect::getGpuKernelAttrName();
constexpr llvm::StringLiteral kLaunchPrefix = "__moe_launch_";
/// device-abi: a gpu.alloc holding a moe op result (see moe-gpu-device-abi).
constexpr llvm::StringLiteral kDeviceResultAttr = moe::MoEDialect::getGpuDeviceResultAttrName();

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
  /// How this op's GEMMs are emitted (its moe.gpu_config, or the default).
  GpuConfigAttr config;
  /// Validate the index data chain ops take from their operands (the
  /// pass's check-indices; Kernels.h "Index checks").
  bool checkIndices = true;
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

  /// A device error word of the index checks (Kernels.h): 4 x i32, zeroed
  /// (gpu.memset: no kernel launch) so that it reads "no violation" unless
  /// a checked kernel wrote it.
  Value errorWord() {
    Value err = alloc(e.i32(), e.idx(4));
    gpu::MemsetOp::create(b, Type(), ValueRange{}, err, e.ci32(0));
    return err;
  }

  /// After the kernels of an op that checks index data: copies its error
  /// word `err` back (one 16-byte copy, which waits for the op's work) and,
  /// when it reports a violation, calls the CUDA runtime's
  /// moeRuntimeIndexError(kind, token, slot, value, numExperts) (one error
  /// line; the rest of the GPU work is skipped, the tool or the C ABI
  /// reports it). `K` (index) splits the flat element index of an expert
  /// index into token and slot.
  void reportIndexError(Value err, Value K, int64_t numExperts) {
    constexpr llvm::StringLiteral name = "moeRuntimeIndexError";
    Type i32 = e.i32(), i64 = b.getI64Type();
    if (!module.lookupSymbol(name)) {
      OpBuilder ob(module.getContext());
      ob.setInsertionPointToStart(module.getBody());
      auto decl = func::FuncOp::create(ob, module.getLoc(), name,
                                       ob.getFunctionType({i32, i64, i64, i64, i64}, {}));
      decl.setPrivate();
    }
    Value host = memref::AllocaOp::create(b, MemRefType::get({4}, i32));
    gpu::MemcpyOp::create(b, Type(), ValueRange{}, host, err);
    Value kind = memref::LoadOp::create(b, host, ValueRange{e.idx(0)});
    e.ifThen(e.cmpi(arith::CmpIPredicate::ne, kind, e.ci32(0)), [&](IRB &e) {
      auto toI64 = [&](Value v) -> Value {
        if (v.getType().isIndex())
          return arith::IndexCastOp::create(e.b, i64, v);
        return arith::ExtSIOp::create(e.b, i64, v);
      };
      Value at = toI64(memref::LoadOp::create(e.b, host, ValueRange{e.idx(1)}));
      Value value = toI64(memref::LoadOp::create(e.b, host, ValueRange{e.idx(2)}));
      Value k = toI64(K);
      func::CallOp::create(
          e.b, name, TypeRange{},
          ValueRange{kind, arith::DivSIOp::create(e.b, at, k), arith::RemSIOp::create(e.b, at, k),
                     value,
                     arith::ConstantOp::create(e.b, e.b.getI64IntegerAttr(numExperts))});
    });
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
    /// The shared expert's gate: sg [D] (x's type) in, gate [T] f32 out
    /// (sigmoid(x sg), computed by the same kernel); null: none.
    Value sg, sharedGate;
  };
  /// `selectionBias`: the device buffer of the selection_bias operand, or
  /// null. A #moe.top_k that is not classic, or that has a selection bias,
  /// runs the production router of docs/spec.md §3.1.1. With `router` the
  /// logits are computed by the gate kernel into `logits` (uninitialized).
  Gate gate(Value logits, Value T, Value E, int64_t k, RoutingAttrInterface routing,
            bool training, Value seed, Value selectionBias = {},
            std::optional<FusedRouter> router = std::nullopt, bool deferLoss = false) {
    Value K = e.idx(k);
    // The routing kernel variant: the mapping the CPU gate uses too.
    TokenRoutingKind kind =
        TokenRoutingKind::get(routing, training, static_cast<bool>(selectionBias));
    using Mode = TokenRoutingKind::Mode;
    bool loss = kind.loss;
    Gate g;
    g.weights = alloc(e.f32(), e.muli(T, K));
    g.indices = alloc(e.i32(), e.muli(T, K));
    Value p = kind.mode == Mode::MoesartTraining ? alloc(e.f32(), e.muli(T, E)) : g.weights;
    Value nb = blocks(T, router ? kRouteTokens : kGateThreads);
    Value partials = loss ? alloc(e.f32(), nb) : g.weights;
    Value key0 = e.ci32(0), key1 = e.ci32(0);
    if (kind.mode == Mode::MoesartTraining) {
      // The key is read on the host before the first GPU op (see `start`).
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(start);
      std::tie(key0, key1) = buildPhiloxKey(b, hostScalar(seed));
    }
    auto topk = dyn_cast<TopKRoutingAttr>(routing);
    if (kind.production && kind.grouped)
      p = alloc(e.f32(), e.muli(T, e.muli(E, e.idx(2))));
    SmallVector<Value> args{logits, g.weights, g.indices, p, partials, T, E, K, key0, key1};
    if (kind.production)
      args.append({selectionBias ? selectionBias : g.weights, e.idx(topk.getGroups()),
                   e.idx(topk.getKeptGroups()), e.cf32(topk.getScale().convertToDouble())});
    bool sharedGate = router && router->sg;
    if (router)
      args.append({router->x, router->wr, router->br ? router->br : router->wr, router->D});
    if (sharedGate)
      args.append({router->sg, router->sharedGate});
    launch(lib.gate(kind, selectionBias ? eltOf(selectionBias) : Type(), router.has_value(),
                    router && router->br, router ? eltOf(router->x) : Type(), sharedGate),
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
    Operation *op = v.getDefiningOp();
    if (!op || op->getNumOperands() != 2 ||
        !isa<arith::MulIOp, arith::AddIOp, arith::CeilDivUIOp, arith::DivUIOp, arith::MinUIOp,
             arith::MaxUIOp>(op))
      return std::nullopt;
    std::optional<int64_t> l = foldedIndex(op->getOperand(0)), r = foldedIndex(op->getOperand(1));
    if (!l || !r || *l < 0 || *r < 0)
      return std::nullopt;
    uint64_t x = *l, y = *r;
    if (isa<arith::CeilDivUIOp, arith::DivUIOp>(op) && y == 0)
      return std::nullopt;
    return llvm::TypeSwitch<Operation *, int64_t>(op)
        .Case([&](arith::MulIOp) { return x * y; })
        .Case([&](arith::AddIOp) { return x + y; })
        .Case([&](arith::CeilDivUIOp) { return (x + y - 1) / y; })
        .Case([&](arith::DivUIOp) { return x / y; })
        .Case([&](arith::MinUIOp) { return std::min(x, y); })
        .Default([&](Operation *) { return std::max(x, y); });
  }

  /// The row tile of the grouped GEMMs for `rows` plan rows over
  /// `numExperts` groups (see Kernels.h): kSmallTileM when the average
  /// group has fewer than kTileM rows (decode), else kTileM (prefill), or
  /// kBigTileM with `big` when it has at least bigTileRows rows.
  Value chooseRowTile(Value rows, int64_t numExperts, bool big) {
    int64_t bigFrom = std::max(config.getBigTileRows(), kTileM) * numExperts;
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
  bool bigTiles(std::optional<MmaElt> elt) const {
    return elt && config.usesWgmma() && config.getBigTileRows() > 0;
  }

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
  Value maxTilesFor(Value rows, Value tileRows, int64_t numExperts) {
    Value bound = e.addi(e.ceildiv(rows, tileRows), e.idx(numExperts));
    return arith::MaxUIOp::create(b, arith::MinUIOp::create(b, bound, rows), e.idx(1));
  }
  void sizePlan(Plan &plan, Value rows, int64_t numExperts, bool big) {
    plan.bigTiles = big;
    plan.tileRows = chooseRowTile(rows, numExperts, big);
    plan.maxTiles = maxTilesFor(rows, plan.tileRows, numExperts);
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
    Value err;                                 // the index check's error word
    int32_t checkKind = 0;                     // with `err`: a MoeIndexErrorKind
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
    int32_t checkKind = extras.err ? extras.checkKind : 0;
    if (checkKind)
      args.push_back(extras.err);
    launch(lib.align(weights != nullptr, weights ? eltOf(weights) : Type(), combine,
                     extras.shared != nullptr, extras.loss != nullptr,
                     combine ? eltOf(extras.y) : Type(), checkKind),
           {e.idx(1)}, kAlignThreads, args);
    return plan;
  }

  /// With `err`, the offsets come from an operand: they are validated
  /// against `rows` (the checked tile map, Kernels.h).
  Plan tileMap(Value offsets, Value rows, int64_t numExperts, Value err = {},
               bool big = false) {
    Plan plan;
    plan.offsets = offsets;
    Value E = e.idx(numExperts);
    Value poff = alloc(e.i32(), e.addi(E, e.idx(1)));
    sizePlan(plan, rows, numExperts, big);
    SmallVector<Value> args{offsets,        E,          poff,        plan.sorted,
                            plan.tileExpert, plan.numTiles, plan.pMax, plan.maxTiles,
                            plan.tileRows};
    if (err)
      args.append({rows, err});
    launch(lib.tileMap(err != nullptr), {e.idx(1)}, kAlignThreads, args);
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
    /// Split-K of the 16-row GEMMs (null: none): slices of GEMM1 and GEMM2,
    /// their f32 workspaces, and where their tile counters start in
    /// `counters` (after the combine's T * ceil(D / 128)).
    Value split1, split2, workspace1, workspace2, counterBase1, counterBase2;
  };
  /// The shared expert folded into a fused layer's GEMM launches
  /// (Kernels.h, SharedFold): its weights as one expert (H = Hs, no
  /// biases), its gate [T] f32 from the gate kernel (null: ungated), and T.
  struct SharedExpertFold {
    Experts ex;
    Value gate, T;
  };
  /// The shared expert's weights as Experts (one expert, [D, Ws] and
  /// [Hs, D], the layer's activation).
  Experts sharedWeights(Value s1, Value s2, Value D, ActivationAttr act) {
    Experts ex;
    ex.w1 = upload(s1); // [D, W] is the flat layout of [1, D, W]
    ex.w2 = upload(s2);
    ex.act = act.getValue();
    ex.D = D;
    ex.H = act.isGated() ? e.divui(dim(s1, 1), e.idx(2)) : dim(s1, 1);
    return ex;
  }
  /// The folded shared expert's buffers of one launch pair: hs (rows padded
  /// to kBigTileM, so that every shared tile row has a place) and its f32
  /// output [T, D].
  struct SharedFoldBuffers {
    Value hs, out;
  };
  SharedFoldBuffers sharedFoldBuffers(const SharedExpertFold &f, Type hType) {
    SharedFoldBuffers fb;
    // Padded to the largest row tile (kBigTileM, a multiple of the others):
    // whatever tile the plan takes, its shared tiles' rows fit.
    Value rows = e.muli(e.ceildiv(f.T, e.idx(kBigTileM)), e.idx(kBigTileM));
    fb.hs = alloc(hType, e.muli(rows, f.ex.H));
    fb.out = alloc(e.f32(), e.muli(f.T, f.ex.D));
    return fb;
  }
  /// GEMM1 (+ gather, bias, activation) and GEMM2 (+ bias, routed weight)
  /// over the padded tiles of `plan`, writing one row of `out` per kept row
  /// (and, with `combine`, the per-token sums into combine->y). h has A's
  /// element type (the CPU path's rounding point); `out` receives GEMM2's f32
  /// result in its own element type. bf16/f16 GEMMs take the tensor-core
  /// kernels (mmaElt), GEMM2 with the combine epilogue in a fused layer; the
  /// kernels are specialised on the plan's row tile: a dynamic T launches
  /// the pair of its run-time tile (forRowTile).
  ///
  /// With `fold` (needs `combine`), the shared expert's tiles come first in
  /// both launches (grid rows ceil(T / R) + maxTiles, GEMM1 columns over
  /// max(H, Hs)) and its output starts every token's sum.
  void ffn(Value A, bool gather, const Plan &plan, const Experts &x, Value out,
           const FusedCombine *combine = nullptr, const SharedExpertFold *fold = nullptr) {
    assert((!fold || (combine && !combine->shared)) && "the folded shared expert is combined");
    Value h = alloc(eltOf(A), e.muli(plan.pMax, x.H));
    bool weighted = plan.rowWeights != nullptr;
    SharedFoldBuffers fb = fold ? sharedFoldBuffers(*fold, eltOf(A)) : SharedFoldBuffers();
    // Grid rows and GEMM1's columns with the folded shared expert.
    auto gridRows = [&](Value tileRows) {
      return fold ? e.addi(e.ceildiv(fold->T, tileRows), plan.maxTiles) : plan.maxTiles;
    };
    Value g1Cols = fold ? arith::MaxUIOp::create(b, x.H, fold->ex.H).getResult() : x.H;
    auto foldArgs1 = [&](SmallVector<Value> &args) {
      if (fold)
        args.append({fold->ex.w1, fb.hs, fold->ex.H, fold->T});
    };
    // (Made here: host buffers must not be made in forRowTile's branches.)
    Value foldGate = fold ? (fold->gate ? fold->gate : dummyF32()) : Value();
    auto foldArgs2 = [&](SmallVector<Value> &args) {
      if (fold)
        args.append({fb.hs, fold->ex.w2, foldGate, fb.out, fold->ex.H, fold->T});
    };
    // What the two GEMMs compute (lowering/GroupedGemm.h), whichever
    // generator emits them.
    GroupedGemmDesc desc1 = expertGemm1(gather, x.act, x.b1 != nullptr, eltOf(A), eltOf(x.w1),
                                        eltOf(h));
    GroupedGemmDesc desc2 = expertGemm2(x.b2 != nullptr, weighted, combine != nullptr,
                                        eltOf(h), eltOf(x.w2), eltOf(out));
    if (mmaElt(A, x, eltOf(out), combine ? eltOf(combine->y) : Type())) {
      // Host buffers are made before forRowTile's branches (they are freed
      // after the op).
      Value rowWeights = weighted ? plan.rowWeights : dummyF32();
      forRowTile(plan, [&](int64_t tileM) {
        MmaGemmConfig g1 = MmaGemmConfig::of(desc1);
        g1.tileM = tileM;
        g1.wgmma = config.usesWgmma() && tileM >= warp_layout::Wgmma::M;
        g1.wgmmaGroupsInFlight = config.getGroupsInFlight();
        g1.foldShared = fold != nullptr;
        g1.stages = tileM > kSmallTileM ? config.getStages() : 0;
        // Split-K at decode (fused layer without a folded shared expert:
        // fusedExperts sets no split then): unless S is the constant 1.
        bool split = combine && combine->split1 && tileM == kSmallTileM;
        auto splitOn = [&](Value S) {
          std::optional<int64_t> s = getConstantIntValue(S);
          return split && !(s && *s == 1);
        };
        g1.splitK = splitOn(split ? combine->split1 : Value());
        SmallVector<Value> args1{A, plan.sorted, gather ? plan.sourceRows : plan.sorted,
                                 plan.tileExpert, plan.numTiles, x.w1, x.b1 ? x.b1 : x.w1,
                                 h, x.D, x.H};
        foldArgs1(args1);
        SmallVector<Value> grid1{blocks(g1Cols, g1.tileN()), gridRows(e.idx(tileM))};
        if (g1.splitK) {
          args1.append({combine->workspace1, combine->counters, combine->counterBase1,
                        combine->split1});
          grid1.push_back(combine->split1);
        }
        launch(buildMmaGemm(lib.getModule(), g1), grid1, g1.threads(), args1);
        MmaGemmConfig g2 = MmaGemmConfig::of(desc2);
        g2.tileM = tileM;
        g2.stages = tileM > kSmallTileM ? config.getStages() : 0;
        g2.shared = combine && combine->shared;
        g2.foldShared = fold != nullptr;
        g2.sharedGated = fold && fold->gate;
        g2.wgmma = g1.wgmma;
        g2.wgmmaGroupsInFlight = config.getGroupsInFlight();
        SmallVector<Value> args{h,     plan.sorted, rowWeights,
                                plan.tileExpert, plan.numTiles, x.w2, x.b2 ? x.b2 : x.w2,
                                out,   x.H,         x.D};
        if (combine) {
          args.append({plan.sourceRows, combine->positions, combine->counters, combine->y,
                       combine->K});
          if (combine->shared)
            args.push_back(combine->shared);
        }
        foldArgs2(args);
        g2.splitK = splitOn(split ? combine->split2 : Value());
        SmallVector<Value> grid2{blocks(x.D, g2.tileN()), gridRows(e.idx(tileM))};
        if (g2.splitK) {
          args.append({combine->workspace2, combine->counters, combine->counterBase2,
                       combine->split2});
          grid2.push_back(combine->split2);
        }
        launch(buildMmaGemm(lib.getModule(), g2), grid2, g2.threads(), args);
      });
      return;
    }
    assert(!plan.bigTiles && "128-row tiles are for the wgmma kernels only");
    SmallVector<Value> args1{A, plan.sorted, gather ? plan.sourceRows : plan.sorted,
                             plan.tileExpert, plan.numTiles, x.w1, x.b1 ? x.b1 : x.w1,
                             h, x.D, x.H, plan.tileRows};
    foldArgs1(args1);
    launch(lib.gemm1(desc1, fold != nullptr),
           {blocks(g1Cols, kTileN), gridRows(plan.tileRows)}, kGemmThreads, args1);
    SmallVector<Value> args{h,     plan.sorted, weighted ? plan.rowWeights : dummyF32(),
                            plan.tileExpert, plan.numTiles, x.w2, x.b2 ? x.b2 : x.w2,
                            out,   x.H,         x.D,         plan.tileRows};
    if (combine) {
      args.append({plan.sourceRows, combine->positions, combine->counters, combine->y,
                   combine->K});
      if (combine->shared)
        args.push_back(combine->shared);
    }
    foldArgs2(args);
    launch(lib.gemm2(desc2, combine && combine->shared, combine ? eltOf(combine->y) : Type(),
                     fold != nullptr, fold && fold->gate),
           {blocks(x.D, kTileN), gridRows(plan.tileRows)}, kGemmThreads, args);
  }

  /// The element type of the tensor-core kernels (MmaGemm.h) for ffn()'s
  /// GEMMs, or nullopt for the CUDA-core kernels: tensor cores on; A, the
  /// weights and the biases of one bf16/f16 type T; GEMM2's rows f32 or T
  /// (f32 with a combine, whose y is T).
  std::optional<MmaElt> mmaElt(Value A, const Experts &x, Type out, Type y) {
    if (!config.usesTensorCores())
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

  /// Output columns per block of the tensor-core GEMM1 of `act`.
  static int64_t mmaTileN1(Activation act) {
    MmaGemmConfig c;
    c.act = act;
    return c.tileN();
  }

  /// Split-K of the fused layer's 16-row GEMMs (MmaGemm.h, splitK).
  struct SplitK {
    Value S1, S2; // null: the plan's tile is never 16 rows
    Value tileRows, maxTiles, base1, base2, ws1, ws2;
  };
  /// The slices S of GEMM1 and GEMM2 at decode: `decode-split-k` when set,
  /// else enough for about kSplitKTargetBlocks blocks, assuming min(rows, E)
  /// active tiles (decode: an expert's rows fit one 16-row tile), with at
  /// least kSplitKMinTiles k-tiles of kMmaTileK per slice. Index arithmetic
  /// on the host, so a dynamic T chooses at run time.
  SplitK splitK(Value rows, int64_t numExperts, const Experts &x) {
    SplitK sk;
    // Only the 16-row choice matters here: 128-row tiles (big) replace
    // 64-row ones, never 16-row ones.
    sk.tileRows = chooseRowTile(rows, numExperts, /*big=*/false);
    if (std::optional<int64_t> t = getConstantIntValue(sk.tileRows); t && *t != kSmallTileM)
      return sk;
    sk.maxTiles = maxTilesFor(rows, sk.tileRows, numExperts);
    auto choose = [&](Value cols, Value depth) -> Value {
      if (config.getSplitK() > 0)
        return e.idx(config.getSplitK());
      Value tiles = arith::MaxUIOp::create(
          b, arith::MinUIOp::create(b, rows, e.idx(numExperts)), e.idx(1));
      Value S = e.ceildiv(e.idx(kSplitKTargetBlocks), e.muli(cols, tiles));
      Value most = arith::MaxUIOp::create(
          b, e.divui(e.ceildiv(depth, e.idx(kMmaTileK)), e.idx(kSplitKMinTiles)), e.idx(1));
      if (std::optional<int64_t> m = foldedIndex(most); m && *m == 1)
        return e.idx(1); // too shallow to split, whatever T is
      S = arith::MinUIOp::create(b, S, most);
      // A static shape folds S (1: the kernels without split-K).
      if (std::optional<int64_t> folded = foldedIndex(S))
        return e.idx(*folded);
      return S;
    };
    sk.S1 = choose(blocks(x.H, mmaTileN1(x.act)), x.D);
    sk.S2 = choose(blocks(x.D, kMmaTileN), x.H);
    auto one = [](Value S) {
      std::optional<int64_t> s = getConstantIntValue(S);
      return s && *s == 1;
    };
    if (one(sk.S1) && one(sk.S2))
      return SplitK(); // no split: no workspace, no tile counters
    return sk;
  }

  /// The fused token-choice expert family in three launches: align (+ the
  /// combine's bookkeeping, + the aux loss of `loss`), GEMM1 with the
  /// gather, GEMM2 with the routed weight and the deterministic per-token
  /// combine in its epilogue (starting from `shared`, the shared expert's
  /// f32 output, when given). GEMM2's rows stay f32 (the CPU path's
  /// fused_experts); y, of type `yType`, is their f32 sum rounded once.
  Value fusedExperts(Value x, Value indices, Value weights, Value T, Value K, int64_t numExperts,
                     std::optional<llvm::APFloat> cf, const Experts &ex, Type yType,
                     Value shared = {}, const Gate *loss = nullptr,
                     const SharedExpertFold *fold = nullptr, Value err = {}) {
    Value y = alloc(yType, e.muli(T, ex.D));
    AlignExtras extras;
    // One arrival counter per (token, GEMM2 column tile).
    std::optional<MmaElt> mmaType = mmaElt(x, ex, e.f32(), yType);
    bool mma = mmaType.has_value();
    Value colTiles2 = blocks(ex.D, mma ? kMmaTileN : kTileN);
    extras.numCounters = e.muli(T, colTiles2);
    // Split-K of the 16-row tensor-core GEMMs: one tile counter per (plan
    // tile, column tile) of each GEMM after the combine's counters (the
    // align kernel zeroes them all), one f32 partial tile per block.
    // A folded shared expert adds tiles in front of the plan's, which the
    // split-K workspace and counters do not cover: no split then (not
    // even with decode-split-k > 1; docs/gpu.md, "Split-K at decode").
    SplitK split;
    if (mma && !fold)
      split = splitK(e.muli(T, K), numExperts, ex);
    if (split.S1) {
      Value colTiles1 = blocks(ex.H, mmaTileN1(ex.act));
      split.base1 = extras.numCounters;
      split.base2 = e.addi(split.base1, e.muli(split.maxTiles, colTiles1));
      extras.numCounters = e.addi(split.base2, e.muli(split.maxTiles, colTiles2));
      auto workspace = [&](Value cols, Value S) {
        Value n = e.muli(e.muli(e.muli(split.maxTiles, cols), S),
                         e.idx(kSmallTileM * kMmaTileN));
        // Only the 16-row tile splits: none needed when T picks 64 rows.
        n = e.select(e.eq(split.tileRows, e.idx(kSmallTileM)), n, e.idx(1));
        return alloc(e.f32(), n);
      };
      split.ws1 = workspace(colTiles1, split.S1);
      split.ws2 = workspace(colTiles2, split.S2);
    }
    extras.counters = alloc(e.i32(), extras.numCounters);
    extras.y = y;
    extras.D = ex.D;
    extras.shared = shared;
    extras.loss = loss;
    extras.err = err;
    extras.checkKind = MOE_INDEX_BAD_EXPERT_FUSED;
    Plan plan = align(indices, weights, T, K, numExperts, capacity(T, K, numExperts, cf),
                      &extras, bigTiles(mmaType));
    Value rows = alloc(e.f32(), e.muli(e.muli(T, K), ex.D));
    FusedCombine combine{plan.positions, extras.counters, y, T, K, shared};
    if (split.S1) {
      combine.split1 = split.S1;
      combine.split2 = split.S2;
      combine.workspace1 = split.ws1;
      combine.workspace2 = split.ws2;
      combine.counterBase1 = split.base1;
      combine.counterBase2 = split.base2;
    }
    ffn(x, /*gather=*/true, plan, ex, rows, &combine, fold);
    return y;
  }

  /// The shared expert of docs/spec.md §3.1.1 on the device buffer `x` ([T, D]):
  /// the grouped GEMM kernels with one group of all T rows (offsets [0, T],
  /// no gather), the gate sigmoid(x sg) (router GEMM + moe_sigmoid_kernel)
  /// as GEMM2's row weight. Returns the f32 output [T, D] on the device.
  Value sharedExpert(Value x, Value T, Value D, Value s1, Value s2, Value sg,
                     ActivationAttr act) {
    Experts ex = sharedWeights(s1, s2, D, act);
    Value hostOffsets = tensor::FromElementsOp::create(
        b, RankedTensorType::get({2}, e.i32()), ValueRange{e.ci32(0), e.toI32(T)});
    Plan plan = tileMap(upload(hostOffsets), T, /*numExperts=*/1, /*err=*/{},
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
  // the combine: 4 launches. A shared expert is folded into them (its gate
  // in the gate kernel, its tiles in the GEMMs; the kernels select between
  // its buffers and the experts', which have one element type: the op's
  // verifier).
  Host::FusedRouter router{x, wr, br, D};
  std::optional<Host::SharedExpertFold> sharedFold;
  if (op.getSharedW1()) {
    sharedFold = Host::SharedExpertFold{
        h.sharedWeights(op.getSharedW1(), op.getSharedW2(), D, op.getActivationAttr()),
        Value(), T};
    if (op.getSharedGate()) {
      router.sg = h.upload(op.getSharedGate());
      router.sharedGate = sharedFold->gate = h.alloc(h.e.f32(), T);
    }
  }
  Value logits = h.alloc(h.e.f32(), h.e.muli(T, E));
  Host::Gate g = h.gate(logits, T, E, k, op.getRouting(), op.getTraining(), op.getSeed(), sb,
                        router, /*deferLoss=*/true);
  Value y = h.fusedExperts(x, g.indices, g.weights, T, h.e.idx(k), numExperts,
                           op.getCapacityFactor(), ex, eltOf(op.getOutput()),
                           /*shared=*/Value(), g.partials ? &g : nullptr,
                           sharedFold ? &*sharedFold : nullptr);
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
  Host::AlignExtras check;
  if (h.checkIndices) {
    check.err = h.errorWord();
    check.checkKind = MOE_INDEX_BAD_EXPERT_DISPATCH;
  }
  Host::Plan plan = h.align(indices, Value(), T, K, numExperts,
                            h.capacity(T, K, numExperts, op.getCapacityFactor()), &check);
  Value N = h.e.muli(T, K);
  Value rows = h.alloc(eltOf(x), h.e.muli(N, D));
  h.launch(h.lib.dispatchRows(eltOf(x)), {h.blocks(h.e.muli(N, D), kEltThreads)}, kEltThreads,
           {x, plan.sourceRows, rows, N, D});
  SmallVector<Value> results{
      h.download(rows, op.getRows().getType(), {N, D}),
      h.download(plan.offsets, op.getOffsets().getType(), {h.e.idx(numExperts + 1)}),
      h.download(plan.sourceRows, op.getSourceRows().getType(), {N}),
      h.download(plan.positions, op.getPositions().getType(), {T, K})};
  if (check.err)
    h.reportIndexError(check.err, K, numExperts);
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
  Value err = h.checkIndices ? h.errorWord() : Value();
  Type outElt = eltOf(op.getOutput());
  Host::Plan plan = h.tileMap(offsets, N, numExperts, err,
                              h.bigTiles(h.mmaElt(rows, ex, outElt, Type())));
  Value out = h.alloc(outElt, h.e.muli(N, ex.D));
  // Rows from offsets[E] on are zero.
  gpu::MemsetOp::create(h.b, Type(), ValueRange{}, out,
                        arith::ConstantOp::create(h.b, h.b.getZeroAttr(outElt)));
  h.ffn(rows, /*gather=*/false, plan, ex, out);
  Value r = h.download(out, op.getOutput().getType(), {N, ex.D});
  if (err)
    h.reportIndexError(err, h.e.idx(1), numExperts);
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
  Value err;
  if (h.checkIndices) {
    err = h.errorWord();
    args.append({h.dim(op.getExpertOutput(), 0), err});
  }
  h.launch(h.lib.combine(op.getSharedOutput() != nullptr, eltOf(out), eltOf(w), eltOf(y),
                         err != nullptr),
           {h.blocks(h.e.muli(T, D), kEltThreads)}, kEltThreads, args);
  Value r = h.download(y, op.getOutput().getType(), {T, D});
  if (err)
    h.reportIndexError(err, h.e.idx(1), /*numExperts=*/0);
  h.releaseAll();
  op->replaceAllUsesWith(ValueRange{r});
  return success();
}

LogicalResult convert(FusedExpertsOp op, Host &h) {
  int64_t numExperts = op.getNumExperts();
  Value T = h.dim(op.getInput(), 0), K = h.dim(op.getIndices(), 1);
  Value x = h.upload(op.getInput()), indices = h.upload(op.getIndices());
  Value w = h.upload(op.getWeights());
  Host::Experts ex = h.experts(op.getW1(), op.getW2(), op.getB1(), op.getB2(),
                               op.getActivationAttr());
  Value shared = op.getSharedOutput() ? h.upload(op.getSharedOutput()) : Value();
  Value err = h.checkIndices ? h.errorWord() : Value();
  Value y = h.fusedExperts(x, indices, w, T, K, numExperts, op.getCapacityFactor(), ex,
                           eltOf(op.getOutput()), shared, /*loss=*/nullptr, /*fold=*/nullptr,
                           err);
  Value r = h.download(y, op.getOutput().getType(), {T, ex.D});
  if (err)
    h.reportIndexError(err, K, numExperts);
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
  Host::Plan plan = h.tileMap(offsets, N, numExperts, /*err=*/{},
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
      return llvm::all_of(inner.getOperands(), inBodyOrConstant);
    if (inner.getNumRegions() || !isPure(&inner) || isa<linalg::IndexOp>(inner) ||
        !llvm::all_of(inner.getOperands(), inBodyOrConstant))
      return false;
  }
  return false;
}

/// device-abi: an element-wise tensor op that runs on the device when it
/// reads a device tensor (a residual add between layers, a scaling, ...):
/// every operand and result a ranked tensor of one shape, and either an
/// ElementwiseMappable op without regions and with one result (arith.addf,
/// math.exp, arith.select, ...) or a linalg.generic with only parallel
/// iterators, identity indexing maps and a scalar body (one result per
/// init: a fused chain, fuseDeviceElementwise).
bool isDeviceElementwise(Operation *op) {
  if (op->getNumResults() == 0 || op->getNumOperands() == 0)
    return false;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type)
    return false;
  auto sameShape = [&](Value v) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.getShape() == type.getShape();
  };
  if (!llvm::all_of(op->getOperands(), sameShape) || !llvm::all_of(op->getResults(), sameShape))
    return false;
  if (OpTrait::hasElementwiseMappableTraits(op))
    return op->getNumResults() == 1 && op->getNumRegions() == 0;
  auto generic = dyn_cast<linalg::GenericOp>(op);
  return generic && generic.getNumDpsInits() >= 1 && generic.hasPureTensorSemantics() &&
         generic.getNumLoops() == generic.getNumParallelLoops() &&
         llvm::all_of(generic.getIndexingMapsArray(),
                      [](AffineMap map) { return map.isIdentity(); }) &&
         isScalarBody(generic.getRegion().front());
}

/// Marks the element-wise ops of fuseDeviceElementwise (and the generics the
/// fusion patterns create from them).
constexpr llvm::StringLiteral kDeviceElementwiseAttr = moe::MoEDialect::getGpuDeviceElementwiseAttrName();

/// The control of the element-wise fusion: both ops run on the device, and
/// every other user of the producer comes after the consumer (the fused op
/// takes the consumer's place and replaces all the producer's uses: a user
/// between the two, such as the next layer reading a residual sum, would
/// then read a value defined after it).
bool fusableOnDevice(OpOperand *operand) {
  Operation *producer = operand->get().getDefiningOp();
  Operation *consumer = operand->getOwner();
  if (!producer || !producer->hasAttr(kDeviceElementwiseAttr) ||
      !consumer->hasAttr(kDeviceElementwiseAttr) || producer->getBlock() != consumer->getBlock())
    return false;
  for (Value result : producer->getResults())
    for (Operation *user : result.getUsers()) {
      if (user == consumer)
        continue;
      Operation *at = consumer->getBlock()->findAncestorOpInBlock(*user);
      if (!at || !consumer->isBeforeInBlock(at))
        return false;
    }
  return true;
}

/// Fuses the producer of an operand of a device element-wise generic into it
/// with upstream's linalg::fuseElementwiseOps (the element-wise fusion of
/// linalg on tensors) and, unlike upstream's FuseElementwiseOps pattern,
/// which keeps the producer for its other users (its value is then
/// computed by two kernels), hands those users the fused op's copy of the
/// producer's result: fusableOnDevice made sure they come after the fused
/// op. A chain thus becomes one generic that yields each value once.
struct FuseDeviceChain : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp consumer,
                                PatternRewriter &rewriter) const override {
    for (OpOperand &operand : consumer->getOpOperands()) {
      if (!linalg::areElementwiseOpsFusable(&operand) || !fusableOnDevice(&operand))
        continue;
      Operation *producer = operand.get().getDefiningOp();
      FailureOr<linalg::ElementwiseOpFusionResult> fused =
          linalg::fuseElementwiseOps(rewriter, &operand);
      if (failed(fused))
        return rewriter.notifyMatchFailure(consumer, "element-wise fusion failed");
      // The fused op itself may still read another result of the producer
      // (a consumer with two operands from it): that use stays, and the
      // next fusion takes it in.
      Operation *fusedOp = fused->fusedOp;
      for (auto [from, to] : fused->replacements)
        rewriter.replaceUsesWithIf(from, to,
                                   [&](OpOperand &use) { return use.getOwner() != fusedOp; });
      rewriter.eraseOp(consumer);
      if (producer->use_empty())
        rewriter.eraseOp(producer);
      return success();
    }
    return failure();
  }
};

/// A generic whose body reads an init (`outs(%x)` used as `o + ...`) reads
/// that tensor as an input instead, with a tensor.empty init: the value is
/// the same, and the fusion then needs to keep the producer's result only
/// where it is used (upstream keeps every result whose init is read).
struct ReadInitsAsInputs : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp op, PatternRewriter &rewriter) const override {
    if (!isDeviceElementwise(op) ||
        llvm::none_of(op.getDpsInitsMutable(), [&](OpOperand &init) {
          return op.payloadUsesValueFromOperand(&init);
        }))
      return failure();
    Block &body = op.getRegion().front();
    SmallVector<Value> inputs(op.getDpsInputs()), inits;
    SmallVector<BlockArgument> inputArgs(body.getArguments().take_front(op.getNumDpsInputs()));
    SmallVector<BlockArgument> initArgs;
    for (OpOperand &init : op.getDpsInitsMutable()) {
      BlockArgument arg = op.getMatchingBlockArgument(&init);
      if (!op.payloadUsesValueFromOperand(&init)) {
        inits.push_back(init.get());
        initArgs.push_back(arg);
        continue;
      }
      inputs.push_back(init.get());
      inputArgs.push_back(arg);
      auto type = cast<RankedTensorType>(init.get().getType());
      inits.push_back(tensor::EmptyOp::create(
          rewriter, op.getLoc(), tensor::getMixedSizes(rewriter, op.getLoc(), init.get()),
          type.getElementType()));
      initArgs.push_back(arg);
    }
    AffineMap id = rewriter.getMultiDimIdentityMap(op.getNumLoops());
    SmallVector<AffineMap> maps(inputs.size() + inits.size(), id);
    auto fused = linalg::GenericOp::create(rewriter, op.getLoc(), op->getResultTypes(), inputs,
                                           inits, maps, op.getIteratorTypesArray());
    Block *block = rewriter.createBlock(&fused.getRegion());
    IRMapping map;
    for (BlockArgument arg : inputArgs)
      map.map(arg, block->addArgument(arg.getType(), arg.getLoc()));
    for (BlockArgument arg : initArgs) {
      BlockArgument added = block->addArgument(arg.getType(), arg.getLoc());
      if (!map.contains(arg)) // a moved init is read through its input
        map.map(arg, added);
    }
    rewriter.setInsertionPointToStart(block);
    for (Operation &inner : body)
      rewriter.clone(inner, map);
    rewriter.replaceOp(op, fused->getResults());
    return success();
  }
};

/// Tags the generics that the rewrites create (they all come from tagged
/// ops: the patterns only run on those, GreedyRewriteStrictness).
struct TagNewGenerics : public RewriterBase::Listener {
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    if (isa<linalg::GenericOp>(op))
      op->setAttr(kDeviceElementwiseAttr, UnitAttr::get(op->getContext()));
  }
};

/// device-abi: the element-wise ops on device tensors (`ops`) become
/// linalg.generic ops (upstream's elementwise-to-linalg patterns) and
/// producer/consumer chains of them are fused (FuseDeviceChain, under
/// fusableOnDevice, with upstream's populateElementwiseOpsFusionPatterns
/// companions): one generic per chain, which reads the chain's external
/// inputs and yields only the values used outside it; splat constants fold
/// into the body as scalars. Each generic becomes one kernel
/// (convertElementwise).
void fuseDeviceElementwise(ModuleOp module, ArrayRef<Operation *> ops) {
  MLIRContext *ctx = module.getContext();
  // Tagged: the generics among `ops`, and every generic the rewrites create
  // (the elementwise-to-linalg conversion copies an op's attributes into
  // the body, so the ops themselves are not tagged).
  for (Operation *op : ops)
    if (isa<linalg::GenericOp>(op))
      op->setAttr(kDeviceElementwiseAttr, UnitAttr::get(ctx));
  TagNewGenerics tagger;
  GreedyRewriteConfig config;
  config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps).setListener(&tagger);
  auto tagged = [&] {
    SmallVector<Operation *> generics;
    module.walk([&](linalg::GenericOp op) {
      if (op->hasAttr(kDeviceElementwiseAttr))
        generics.push_back(op);
    });
    return generics;
  };
  // 1. Generics, with upstream's companions of the fusion: splat constants
  // folded into the body as scalars, inits the body does not read replaced
  // by tensor.empty (the conversion reuses an operand as the init: that use
  // would keep the producer alive), dead operands and results dropped.
  auto companions = [&](RewritePatternSet &patterns) {
    linalg::populateElementwiseOpsFusionPatterns(patterns, [](OpOperand *) { return false; });
    patterns.add<ReadInitsAsInputs>(ctx);
  };
  {
    RewritePatternSet patterns(ctx);
    linalg::populateElementwiseToLinalgConversionPatterns(patterns);
    (void)applyOpPatternsGreedily(ops, std::move(patterns), config);
  }
  {
    RewritePatternSet patterns(ctx);
    companions(patterns);
    (void)applyOpPatternsGreedily(tagged(), std::move(patterns), config);
  }
  // 2. The fusion of the chains.
  RewritePatternSet patterns(ctx);
  companions(patterns);
  patterns.add<FuseDeviceChain>(ctx, /*benefit=*/2);
  (void)applyOpPatternsGreedily(tagged(), std::move(patterns), config);
  module.walk([&](linalg::GenericOp op) { op->removeAttr(kDeviceElementwiseAttr); });
}

/// Where a kernel's element of one tensor read by an element-wise op comes
/// from: a kernel argument (a device tensor, or a host tensor uploaded per
/// call), the scalar of a splat constant, or a constant global of the
/// gpu.module (a dense constant: resident with the module, no upload).
struct ElementSource {
  enum Kind { Buffer, Splat, Global } kind = Buffer;
  Value tensor;
  TypedAttr splat;
  memref::GlobalOp global;
};

/// A dense constant read by a kernel, as a flat constant global of the
/// gpu.module named after its type and contents (equal constants share
/// one). It is part of the module image: loaded with the module (once,
/// cuModuleLoadData) and freed with it (cuModuleUnload). Element types of
/// whole bytes only; others stay uploaded per call (null).
memref::GlobalOp constantGlobal(gpu::GPUModuleOp gpuModule, DenseElementsAttr value) {
  Type elt = value.getElementType();
  if (!elt.isIntOrFloat() || elt.getIntOrFloatBitWidth() % 8 != 0)
    return {};
  int64_t n = value.getNumElements();
  DenseElementsAttr flatValue = value.reshape(RankedTensorType::get({n}, elt));
  std::string key;
  llvm::raw_string_ostream os(key);
  os << flatValue.getType() << ":";
  ArrayRef<char> raw = flatValue.getRawData();
  os << StringRef(raw.data(), raw.size());
  std::string name = llvm::formatv("moe_const_{0:x-16}", llvm::xxh3_64bits(key)).str();
  if (auto existing = gpuModule.lookupSymbol<memref::GlobalOp>(name))
    return existing;
  OpBuilder b(gpuModule.getBodyRegion());
  return memref::GlobalOp::create(b, gpuModule.getLoc(), name, b.getStringAttr("private"),
                                  MemRefType::get({n}, elt), flatValue, /*constant=*/true,
                                  b.getI64IntegerAttr(16));
}

/// The kernel of an element-wise op is named after what it computes (the
/// body's op names, attributes, element types and dataflow, and where each
/// read element comes from), so that equal ops share one kernel:
/// moe_elementwise_<body ops>_<16 hex digits>.
std::string elementwiseKernelName(linalg::GenericOp generic, ArrayRef<ElementSource> sources) {
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
  for (ElementSource s : sources) {
    if (s.kind == ElementSource::Splat)
      os << "splat:" << s.splat << ",";
    else if (s.kind == ElementSource::Global)
      os << "global:" << s.global.getSymName() << ",";
    else
      os << "buffer:" << eltOf(s.tensor) << ",";
  }
  Block &body = generic.getRegion().front();
  llvm::DenseMap<Operation *, unsigned> index;
  SmallVector<std::string> opNames;
  for (BlockArgument arg : body.getArguments())
    os << "arg" << arg.getArgNumber() << ":" << arg.getType() << ",";
  for (Operation &inner : body) {
    index[&inner] = index.size();
    if (&inner != body.getTerminator() && !matchPattern(&inner, m_Constant())) {
      std::string opName = inner.getName().stripDialect().str();
      llvm::replace(opName, '.', '_');
      if (opNames.size() < 4 && !llvm::is_contained(opNames, opName))
        opNames.push_back(opName);
    }
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
  std::string what = opNames.empty() ? "copy" : llvm::join(opNames, "_");
  return llvm::formatv("moe_elementwise_{0}_{1:x-16}", what, llvm::xxh3_64bits(signature))
      .str();
}

/// An element-wise op on device tensors (isDeviceElementwise, a generic
/// after fuseDeviceElementwise) as one kernel launch: the tensors it reads
/// on the device (device tensors in place, splat constants as scalars in the
/// kernel, dense constants as globals of the gpu.module, other host tensors
/// uploaded), one device tensor per result like a moe op's.
LogicalResult convertElementwise(Operation *op, Host &h) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic)
    return op->emitError("device-abi: this element-wise op was not turned into a "
                         "linalg.generic before its kernel was built");
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  Block &body = generic.getRegion().front();
  // The block arguments the body reads and where their elements come from:
  // every input, and the inits the body uses.
  SmallVector<BlockArgument> readArgs;
  SmallVector<ElementSource> sources;
  for (OpOperand &operand : generic->getOpOperands()) {
    BlockArgument arg = generic.getMatchingBlockArgument(&operand);
    if (generic.isDpsInit(&operand) && arg.use_empty())
      continue;
    readArgs.push_back(arg);
    ElementSource s;
    s.tensor = operand.get();
    DenseElementsAttr constant;
    if (!h.isDevice(s.tensor) && matchPattern(s.tensor, m_Constant(&constant))) {
      if (constant.isSplat() && constant.getElementType().isIntOrFloat()) {
        s.kind = ElementSource::Splat;
        s.splat = constant.getSplatValue<TypedAttr>();
      } else if ((s.global = constantGlobal(h.lib.getModule(), constant))) {
        s.kind = ElementSource::Global;
      }
    }
    sources.push_back(s);
  }
  SmallVector<Value> buffers, dims;
  SmallVector<Type> types, resultTypes;
  for (const ElementSource &s : sources) {
    if (s.kind != ElementSource::Buffer)
      continue;
    buffers.push_back(h.upload(s.tensor));
    types.push_back(eltOf(s.tensor));
  }
  Value shapeSource = op->getOperand(0);
  for (int64_t i = 0; i < type.getRank(); ++i)
    dims.push_back(h.dim(shapeSource, i));
  Value n = h.numElements(shapeSource);
  SmallVector<Value> outs;
  for (Value r : op->getResults()) {
    resultTypes.push_back(eltOf(r));
    outs.push_back(h.alloc(eltOf(r), n));
  }
  gpu::GPUFuncOp kernel = h.lib.elementwise(
      elementwiseKernelName(generic, sources), types, resultTypes,
      [&](IRB &e, Value i, ValueRange loaded) -> SmallVector<Value> {
        OpBuilder::InsertionGuard guard(e.b);
        IRMapping map;
        size_t next = 0;
        for (auto [arg, source] : llvm::zip(readArgs, sources)) {
          ElementSource s = source;
          Value v;
          if (s.kind == ElementSource::Buffer)
            v = loaded[next++];
          else if (s.kind == ElementSource::Splat)
            v = arith::ConstantOp::create(e.b, s.splat);
          else
            v = e.load(memref::GetGlobalOp::create(e.b, s.global.getType(), s.global.getSymName()),
                       i);
          map.map(arg, v);
        }
        auto mapOutside = [&](Value v) {
          if (v.getParentBlock() != &body && !map.contains(v))
            map.map(v, e.b.clone(*v.getDefiningOp())->getResult(0));
        };
        for (Operation &inner : body.without_terminator()) {
          llvm::for_each(inner.getOperands(), mapOutside);
          e.b.clone(inner, map);
        }
        SmallVector<Value> yielded;
        for (Value v : body.getTerminator()->getOperands()) {
          mapOutside(v);
          yielded.push_back(map.lookup(v));
        }
        return yielded;
      });
  // At least one block: a launch of an empty grid is an error in CUDA.
  Value grid = arith::MaxUIOp::create(h.b, h.blocks(n, kEltThreads), h.e.idx(1));
  SmallVector<Value> args(buffers);
  llvm::append_range(args, outs);
  args.push_back(n);
  h.launch(kernel, {grid}, kEltThreads, args);
  SmallVector<Value> results;
  for (auto [out, r] : llvm::zip(outs, op->getResults()))
    results.push_back(h.download(out, r.getType(), dims));
  h.releaseAll();
  op->replaceAllUsesWith(results);
  return success();
}

/// Whether the index data `op` reads was produced, in the same function, by
/// moe ops that make it valid by construction, so that check-indices has
/// nothing to check: moe.dispatch / moe.fused_experts on the indices of a
/// moe.gate with the same num_experts, moe.expert_ffn on the rows and
/// offsets of one moe.dispatch, moe.combine on the positions of a
/// moe.dispatch and the output of a moe.expert_ffn of that dispatch's rows
/// (what --moe-decompose and --moe-fuse write). Decided before any op is
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
    if (failed(checkToolkit(ops.front())))
      return signalPassFailure();
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
      // The dynamic shared memory the kernel declares (the tensor-core
      // GEMMs' staging buffers, MmaGemmConfig::dynamicSharedBytes).
      Value smem;
      if (auto bytes = kernel->getAttrOfType<IntegerAttr>(gpu_lowering::kDynamicSmemAttr))
        smem = arith::ConstantIntOp::create(b, call.getLoc(), b.getI32Type(), bytes.getInt());
      gpu::LaunchFuncOp::create(b, call.getLoc(), kernel,
                                gpu::KernelDim3{ops[0], ops[1], ops[2]},
                                gpu::KernelDim3{ops[3], ops[4], ops[5]}, smem,
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
