//===- Host.cpp - host code of convert-moe-to-gpu -------------------------===//
//
// The members of `Host` (Host.h) but its strategy (HostStrategy.cpp): device
// buffers and their transfers (upload, download, the device-abi results),
// the index checks' error word, the launch placeholders
// `@__moe_launch_<kernel>`, and the device-level building blocks of the moe
// ops: router, gate, routing plan (align, tile map), the grouped expert GEMMs
// (ffn), fused experts, shared expert and soft MoE dispatch/combine.
//
//===----------------------------------------------------------------------===//

#include "lowering/gpu/Host.h"
#include "runtime/IndexErrors.h"

#include "lowering/gpu/WarpLayouts.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

namespace {

constexpr llvm::StringLiteral kLaunchAttr = moe::MoEDialect::getGpuKernelAttrName();
constexpr llvm::StringLiteral kLaunchPrefix = "__moe_launch_";
/// device-abi: a gpu.alloc holding a moe op result (see moe-gpu-device-abi).
constexpr llvm::StringLiteral kDeviceResultAttr = moe::MoEDialect::getGpuDeviceResultAttrName();

MemRefType flatType(Type elt) { return MemRefType::get({ShapedType::kDynamic}, elt); }

} // namespace

Value Host::dim(Value tensor, int64_t i) {
  auto type = cast<RankedTensorType>(tensor.getType());
  if (!type.isDynamicDim(i))
    return e.idx(type.getDimSize(i));
  return tensor::DimOp::create(b, tensor, i);
}

Value Host::numElements(Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  Value n = e.idx(1);
  for (int64_t i = 0; i < type.getRank(); ++i)
    n = e.muli(n, dim(tensor, i));
  return n;
}

Value Host::flatten(Value memref) {
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

Value Host::alloc(Type elt, Value n) {
  auto op = gpu::AllocOp::create(b, flatType(elt), Type(), ValueRange{}, ValueRange{n},
                                 ValueRange{}, /*hostShared=*/false);
  op->setAttr(bufferization::BufferizationDialect::kManualDeallocation, b.getUnitAttr());
  deviceBuffers.push_back(op.getMemref());
  return op.getMemref();
}

Value Host::upload(Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  auto memrefType = MemRefType::get(type.getShape(), type.getElementType());
  Value host = bufferization::ToBufferOp::create(b, memrefType, tensor, /*read_only=*/true);
  if (isDevice(tensor)) // device-abi: already on the device
    return memref::CastOp::create(b, flatType(type.getElementType()), flatten(host));
  Value dev = alloc(type.getElementType(), numElements(tensor));
  gpu::MemcpyOp::create(b, Type(), ValueRange{}, dev, flatten(host));
  return dev;
}

Value Host::download(Value dev, Type resultType, ArrayRef<Value> dims) {
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

Value Host::deviceResult(Value dev, RankedTensorType type, ArrayRef<Value> dyn) {
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

Value Host::hostResult(Value tensor) {
  if (!deviceValues)
    return tensor;
  auto type = cast<RankedTensorType>(tensor.getType());
  SmallVector<Value> dyn;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (type.isDynamicDim(i))
      dyn.push_back(dim(tensor, i));
  return deviceResult(upload(tensor), type, dyn);
}

Value Host::deviceView(Value view) {
  if (deviceValues)
    deviceValues->insert(view);
  return view;
}

void Host::zero(Value buf) {
  Type elt = cast<MemRefType>(buf.getType()).getElementType();
  gpu::MemsetOp::create(b, Type(), ValueRange{}, buf,
                        arith::ConstantOp::create(b, b.getZeroAttr(elt)));
}

Value Host::errorWord() {
  Value err = alloc(e.i32(), e.idx(4));
  zero(err);
  return err;
}

void Host::reportIndexError(Value err, Value K, int64_t numExperts) {
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

Value Host::hostScalar(Value tensor) {
  if (!isDevice(tensor))
    return tensor::ExtractOp::create(b, tensor, ValueRange{});
  auto type = cast<RankedTensorType>(tensor.getType());
  auto memrefType = MemRefType::get({}, type.getElementType());
  Value dev = bufferization::ToBufferOp::create(b, memrefType, tensor, /*read_only=*/true);
  Value host = memref::AllocaOp::create(b, memrefType);
  gpu::MemcpyOp::create(b, Type(), ValueRange{}, host, dev);
  return memref::LoadOp::create(b, host, ValueRange{});
}

Value Host::downloadAs(Value dev, Type resultType, ArrayRef<Value> dims) {
  auto type = cast<RankedTensorType>(resultType);
  if (eltOf(dev) == type.getElementType())
    return download(dev, type, dims);
  Value f32 = download(dev, type.clone(e.f32()), dims);
  return arith::TruncFOp::create(b, type, f32);
}

Value Host::toF32(Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  if (type.getElementType().isF32())
    return tensor;
  return arith::ExtFOp::create(b, type.clone(e.f32()), tensor);
}

void Host::releaseAll() {
  for (Value buf : deviceBuffers) {
    auto op = gpu::DeallocOp::create(b, Type(), ValueRange{}, buf);
    op->setAttr(bufferization::BufferizationDialect::kManualDeallocation, b.getUnitAttr());
  }
  deviceBuffers.clear();
}

func::FuncOp Host::launchDecl(gpu::GPUFuncOp kernel) {
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

void Host::launch(gpu::GPUFuncOp kernel, ArrayRef<Value> grid, int64_t block,
                  ArrayRef<Value> args) {
  SmallVector<Value> operands(grid.begin(), grid.end());
  while (operands.size() < 3)
    operands.push_back(e.idx(1));
  operands.append({e.idx(block), e.idx(1), e.idx(1)});
  operands.append(args.begin(), args.end());
  func::CallOp::create(b, launchDecl(kernel), operands);
}

Value Host::dummyF32() {
  if (!dummy)
    dummy = alloc(e.f32(), e.idx(1));
  return dummy;
}

Value Host::route(Value x, Value wr, Value br, Value T, Value D, Value E, Type out) {
  Value logits = alloc(out ? out : e.f32(), e.muli(T, E));
  launch(lib.route(br != nullptr, eltOf(x), eltOf(logits)),
         {blocks(E, kTileN), blocks(T, kTileM)}, kGemmThreads,
         {x, wr, br ? br : wr, logits, T, D, E});
  return logits;
}

Host::Gate Host::gate(Value logits, Value T, Value E, int64_t k, RoutingAttrInterface routing,
                      bool training, Value seed, Value selectionBias,
                      std::optional<FusedRouter> router, bool deferLoss) {
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

void Host::sizePlan(Plan &plan, Value rows, int64_t numExperts, bool big) {
  plan.bigTiles = big;
  plan.tileRows = chooseRowTile(rows, numExperts, big);
  plan.maxTiles = maxTilesFor(rows, plan.tileRows, numExperts);
  plan.pMax = e.muli(plan.maxTiles, plan.tileRows);
  plan.sorted = alloc(e.i32(), plan.pMax);
  plan.tileExpert = alloc(e.i32(), plan.maxTiles);
  plan.numTiles = alloc(e.i32(), e.idx(1));
}

Value Host::capacity(Value T, Value K, int64_t numExperts, std::optional<llvm::APFloat> cf) {
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

Host::Plan Host::align(Value indices, Value weights, Value T, Value K, int64_t numExperts,
                       Value cap, const AlignExtras *extrasOrNull, bool big) {
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

Host::Plan Host::tileMap(Value offsets, Value rows, int64_t numExperts, Value err, bool big) {
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

Host::Experts Host::experts(Value w1, Value w2, Value b1, Value b2, ActivationAttr act) {
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

Host::Experts Host::experts(Value w1, Value w2, Value b1, Value b2, ActivationAttr act,
                            QuantAttr quant, Value s1, Value s2, Value z1, Value z2) {
  Experts x = experts(w1, w2, b1, b2, act);
  if (!quant)
    return x;
  x.quant = quant;
  x.s1 = upload(s1);
  x.s2 = upload(s2);
  x.z1 = z1 ? upload(z1) : Value();
  x.z2 = z2 ? upload(z2) : Value();
  return x;
}

Host::Experts Host::sharedWeights(Value s1, Value s2, Value D, ActivationAttr act) {
  Experts ex;
  ex.w1 = upload(s1); // [D, W] is the flat layout of [1, D, W]
  ex.w2 = upload(s2);
  ex.act = act.getValue();
  ex.D = D;
  ex.H = act.isGated() ? e.divui(dim(s1, 1), e.idx(2)) : dim(s1, 1);
  return ex;
}

Host::SharedFoldBuffers Host::sharedFoldBuffers(const SharedExpertFold &f, Type hType) {
  SharedFoldBuffers fb;
  // Padded to the largest row tile (kBigTileM, a multiple of the others):
  // whatever tile the plan takes, its shared tiles' rows fit.
  Value rows = e.muli(e.ceildiv(f.T, e.idx(kBigTileM)), e.idx(kBigTileM));
  fb.hs = alloc(hType, e.muli(rows, f.ex.H));
  fb.out = alloc(e.f32(), e.muli(f.T, f.ex.D));
  return fb;
}

void Host::ffn(Value A, bool gather, const Plan &plan, const Experts &x, Value out,
               const FusedCombine *combine, const SharedExpertFold *fold) {
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
  desc1.setQuant(x.quant);
  desc2.setQuant(x.quant);
  assert((!x.quant || !fold) && "quantized experts are not folded with the shared expert");
  // Quantized weights: their scales (and zero points) last.
  auto quantArgs = [&](SmallVector<Value> &args, Value s, Value z) {
    if (!x.quant)
      return;
    args.push_back(s);
    if (z)
      args.push_back(z);
  };
  if (mmaElt(A, x, eltOf(out), combine ? eltOf(combine->y) : Type())) {
    // Host buffers are made before forRowTile's branches (they are freed
    // after the op).
    Value rowWeights = weighted ? plan.rowWeights : dummyF32();
    forRowTile(plan, [&](int64_t tileM) {
      MmaGemmConfig g1 = MmaGemmConfig::of(desc1);
      g1.tileM = tileM;
      // (Quantized weights: 64-row wgmma tiles at most, bigTiles.)
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
      // Without biases the kernels take a buffer of the bias type they
      // never read (quantized weights: the biases have A's type).
      SmallVector<Value> args1{A, plan.sorted, gather ? plan.sourceRows : plan.sorted,
                               plan.tileExpert, plan.numTiles, x.w1,
                               x.b1 ? x.b1 : (x.quant ? A : x.w1), h, x.D, x.H};
      foldArgs1(args1);
      SmallVector<Value> grid1{blocks(g1Cols, g1.tileN()), gridRows(e.idx(tileM))};
      if (g1.splitK) {
        args1.append({combine->workspace1, combine->counters, combine->counterBase1,
                      combine->split1});
        grid1.push_back(combine->split1);
      }
      quantArgs(args1, x.s1, x.z1);
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
                              plan.tileExpert, plan.numTiles, x.w2,
                              x.b2 ? x.b2 : (x.quant ? h : x.w2),
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
      quantArgs(args, x.s2, x.z2);
      launch(buildMmaGemm(lib.getModule(), g2), grid2, g2.threads(), args);
    });
    return;
  }
  assert(!plan.bigTiles && "128-row tiles are for the wgmma kernels only");
  // Without biases the kernels take a buffer of the bias type they never
  // read (quantized weights: the biases have the activations' type).
  SmallVector<Value> args1{A, plan.sorted, gather ? plan.sourceRows : plan.sorted,
                           plan.tileExpert, plan.numTiles, x.w1,
                           x.b1 ? x.b1 : (x.quant ? A : x.w1), h, x.D, x.H, plan.tileRows};
  foldArgs1(args1);
  quantArgs(args1, x.s1, x.z1);
  launch(lib.gemm1(desc1, fold != nullptr),
         {blocks(g1Cols, kTileN), gridRows(plan.tileRows)}, kGemmThreads, args1);
  SmallVector<Value> args{h,     plan.sorted, weighted ? plan.rowWeights : dummyF32(),
                          plan.tileExpert, plan.numTiles, x.w2,
                          x.b2 ? x.b2 : (x.quant ? h : x.w2),
                          out,   x.H,         x.D,         plan.tileRows};
  if (combine) {
    args.append({plan.sourceRows, combine->positions, combine->counters, combine->y,
                 combine->K});
    if (combine->shared)
      args.push_back(combine->shared);
  }
  foldArgs2(args);
  quantArgs(args, x.s2, x.z2);
  launch(lib.gemm2(desc2, combine && combine->shared, combine ? eltOf(combine->y) : Type(),
                   fold != nullptr, fold && fold->gate),
         {blocks(x.D, kTileN), gridRows(plan.tileRows)}, kGemmThreads, args);
}

Value Host::fusedExperts(Value x, Value indices, Value weights, Value T, Value K,
                         int64_t numExperts, std::optional<llvm::APFloat> cf, const Experts &ex,
                         Type yType, Value shared, const Gate *loss, const SharedExpertFold *fold,
                         Value err) {
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
                    &extras, bigTiles(mmaType, ex));
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

Value Host::sharedExpert(Value x, Value T, Value D, Value s1, Value s2, Value sg,
                         ActivationAttr act) {
  Experts ex = sharedWeights(s1, s2, D, act);
  Plan plan = tileMap(oneGroup(T), T, /*numExperts=*/1, /*err=*/{},
                      bigTiles(mmaElt(x, ex, e.f32(), Type()), ex));
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

Host::SoftFront Host::softFront(Value xT, Value phiT, Value scaleT, bool normalize, Type rowsType,
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

Value Host::softOffsets(int64_t numExperts, Value G, Value S) {
  Value per = e.toI32(e.muli(G, S));
  SmallVector<Value> elems;
  for (int64_t i = 0; i <= numExperts; ++i)
    elems.push_back(e.muli(e.ci32(i), per));
  return tensor::FromElementsOp::create(
      b, RankedTensorType::get({numExperts + 1}, e.i32()), elems);
}

Value Host::softCombine(Value expertOut, Value cw, Value G, Value M, Value ES, Value S, Value D,
                        Type yType) {
  Value y = alloc(yType, e.muli(e.muli(G, M), D));
  launch(lib.softCombine(eltOf(cw), eltOf(expertOut), yType),
         {blocks(D, kTileN), blocks(M, kTileM), G}, kGemmThreads,
         {cw, expertOut, y, G, M, ES, S, D});
  return y;
}

Value Host::oneGroup(Value rows) {
  Value offsets = alloc(e.i32(), e.idx(2));
  launch(lib.oneGroupOffsets(), {e.idx(1)}, 1, {offsets, rows});
  return offsets;
}

void Host::ffnBackward(Value rows, Value offsets, const Plan &plan, const Experts &x,
                       int64_t numExperts, Value dout, Value N, const FFNGrads &g) {
  Type f32 = e.f32(), elt = eltOf(rows), wElt = eltOf(x.w1);
  GemmEpilogue actGrad;
  actGrad.then(EpilogueStep::activationGrad);
  actGrad.activation = x.act;
  actGrad.roundTo = elt;
  Value W = actGrad.gatedGrad() ? e.muli(x.H, e.idx(2)) : x.H; // columns of W1[e]
  Value E = e.idx(numExperts);
  if (mmaElt(rows, x, f32, Type()))
    return ffnBackwardMma(rows, offsets, plan, x, numExperts, dout, N, g);
  Value z = alloc(f32, e.muli(N, W)), hBuf = alloc(f32, e.muli(N, x.H));
  auto rowGemm = [&](const GroupedGemmDesc &desc, Value a, Value w, Value bias, Value c,
                     Value hOut, Value K, Value cols) {
    launch(lib.backwardGemm(desc), {blocks(cols, kTileN), plan.maxTiles}, kGemmThreads,
           {a, plan.sorted, plan.tileExpert, plan.numTiles, w, bias ? bias : w, c,
            hOut ? hOut : dummyF32(), K, cols, plan.tileRows});
  };
  auto weightGrad = [&](Type aType, Value a, Value bm, Value c, Value bias, Value M,
                        Value cols) {
    Value rowsOfC = bias ? e.addi(M, e.idx(1)) : M;
    launch(lib.weightGradGemm(expertWeightGradient(false, aType, f32, f32), bias != nullptr),
           {blocks(cols, kTileN), blocks(rowsOfC, kTileM), E}, kGemmThreads,
           {a, offsets, bm, c, bias ? bias : dummyF32(), M, cols, N});
  };
  // z = rows W1 (+ b1), f32: the pre-activation the forward rounded away.
  GroupedGemmDesc zDesc;
  zDesc.aType = elt;
  zDesc.bType = wElt;
  zDesc.cType = f32;
  if (x.b1)
    zDesc.epilogue.then(EpilogueStep::bias);
  rowGemm(zDesc, rows, x.w1, x.b1, z, Value(), x.D, W);
  // dH = dout W2^T, never stored: the epilogue turns z into dZ and writes h
  // (rounded to the rows' type, the value GEMM2 read).
  GroupedGemmDesc dhDesc;
  dhDesc.bTransposed = true;
  dhDesc.aType = f32;
  dhDesc.bType = wElt;
  dhDesc.cType = f32;
  dhDesc.epilogue = actGrad;
  rowGemm(dhDesc, dout, x.w2, Value(), z, hBuf, x.D, x.H);
  // The weight gradients and (fused) the bias gradients.
  weightGrad(f32, hBuf, dout, g.dw2, g.db2, x.H, x.D);
  weightGrad(elt, rows, z, g.dw1, g.db1, x.D, W);
  // drows = dZ W1^T.
  GroupedGemmDesc dxDesc;
  dxDesc.bTransposed = true;
  dxDesc.aType = f32;
  dxDesc.bType = wElt;
  dxDesc.cType = f32;
  rowGemm(dxDesc, z, x.w1, Value(), g.drows, Value(), W, x.D);
}

void Host::ffnBackwardMma(Value rows, Value offsets, const Plan &plan, const Experts &x,
                          int64_t numExperts, Value dout, Value N, const FFNGrads &g) {
  // The steps of ffnBackward on bf16/f16 tensor cores (MmaGemm.h, rowGrad
  // and weightGrad): the f32 cotangents dout and dZ enter as two terms of
  // the data type each (IRB::splitTerms), h is kept in that type (the
  // value GEMM2 read). f16 terms are those of the cotangent times a power
  // of two chosen from its largest finite magnitude (scaledSplit), so dZ
  // is split by its own launches once all of it is known.
  Type f32 = e.f32(), t = eltOf(rows);
  const bool scaled = t.isF16();
  GemmEpilogue actGrad;
  actGrad.then(EpilogueStep::activationGrad);
  actGrad.activation = x.act;
  actGrad.roundTo = t;
  Value W = actGrad.gatedGrad() ? e.muli(x.H, e.idx(2)) : x.H;
  Value E = e.idx(numExperts);
  Value z = alloc(f32, e.muli(N, W)), h = alloc(t, e.muli(N, x.H));
  Value dzHi = alloc(t, e.muli(N, W)), dzLo = alloc(t, e.muli(N, W));
  Value nD = e.muli(N, x.D);
  Value doHi = alloc(t, nD), doLo = alloc(t, nD);
  // f16: the largest finite |dout| and |dZ| (as bits), max-ed from 0.
  Value doMax, dzMax;
  auto splitScaled = [&](Value a, Value hi, Value lo, Value n, Value maxBits) {
    Value grid = arith::MaxUIOp::create(
        b, arith::MinUIOp::create(b, blocks(n, kEltThreads), e.idx(kAbsMaxBlocks)), e.idx(1));
    zero(maxBits);
    launch(lib.absMaxBits(), {grid}, kEltThreads, {a, maxBits, n});
    launch(lib.splitTerms(t, /*scaled=*/true), {blocks(n, kEltThreads)}, kEltThreads,
           {a, hi, lo, n, maxBits});
  };
  if (scaled) {
    doMax = alloc(e.i32(), e.idx(1));
    dzMax = alloc(e.i32(), e.idx(1));
    splitScaled(dout, doHi, doLo, nD, doMax);
  } else {
    launch(lib.splitTerms(t), {blocks(nD, kEltThreads)}, kEltThreads, {dout, doHi, doLo, nD});
  }
  GroupedGemmDesc zDesc;
  zDesc.aType = t;
  zDesc.bType = t;
  zDesc.cType = f32;
  if (x.b1)
    zDesc.epilogue.then(EpilogueStep::bias);
  GroupedGemmDesc dhDesc;
  dhDesc.bTransposed = true;
  dhDesc.aType = f32;
  dhDesc.bType = t;
  dhDesc.cType = f32;
  dhDesc.epilogue = actGrad;
  GroupedGemmDesc dxDesc = dhDesc;
  dxDesc.epilogue = GemmEpilogue();
  forRowTile(plan, [&](int64_t tileM) {
    auto rowGemm = [&](const GroupedGemmDesc &desc, Value a, Value aLo, Value w, Value bias,
                       Value c, Value K, Value cols, Value aMax = Value()) {
      MmaGemmConfig config = *MmaGemmConfig::ofBackward(desc);
      config.tileM = tileM;
      // sm_90a: the 64-row tiles on wgmma, as the forward's.
      config.wgmma = this->config.usesWgmma() && tileM >= warp_layout::Wgmma::M;
      config.wgmmaGroupsInFlight = this->config.getGroupsInFlight();
      SmallVector<Value> args{a,  plan.sorted, aLo, plan.tileExpert, plan.numTiles, w,
                              bias ? bias : w, c, K, cols, h, dzHi, dzLo};
      if (config.scaledSplit())
        args.push_back(aMax);
      launch(buildMmaGemm(lib.getModule(), config), {blocks(cols, kMmaTileN), plan.maxTiles},
             config.threads(), args);
    };
    // z = rows W1 (+ b1), f32: the pre-activation the forward rounded away.
    rowGemm(zDesc, rows, rows, x.w1, x.b1, z, x.D, W);
    // dH = dout W2^T, never stored: the epilogue turns z into dZ (its two
    // terms) and writes h.
    rowGemm(dhDesc, doHi, doLo, x.w2, Value(), z, x.D, x.H, doMax);
    // f16: the epilogue left dZ in f32 in z; its terms with its own scale.
    if (scaled)
      splitScaled(z, dzHi, dzLo, e.muli(N, W), dzMax);
    // drows = dZ W1^T.
    rowGemm(dxDesc, dzHi, dzLo, x.w1, Value(), g.drows, W, x.D, dzMax);
  });
  // The weight gradients and (fused) the bias gradients.
  auto weightGrad = [&](Value a, Value bHi, Value bLo, Value c, Value bias, Value M,
                        Value cols, Value bMax) {
    MmaGemmConfig config = *MmaGemmConfig::ofBackward(expertWeightGradient(false, t, f32, f32));
    config.tileM = kMmaWeightGradTileM;
    config.bias = bias != nullptr;
    config.wgmma = this->config.usesWgmma();
    config.wgmmaGroupsInFlight = this->config.getGroupsInFlight();
    Value rowsOfC = bias ? e.addi(M, e.idx(1)) : M;
    SmallVector<Value> args{a, offsets, bHi, bLo, c, bias ? bias : dummyF32(), M, cols, N};
    if (config.scaledSplit())
      args.push_back(bMax);
    launch(buildMmaGemm(lib.getModule(), config),
           {blocks(cols, kMmaTileN), blocks(rowsOfC, kMmaWeightGradTileM), E}, config.threads(),
           args);
  };
  weightGrad(h, doHi, doLo, g.dw2, g.db2, x.H, x.D, doMax);
  weightGrad(rows, dzHi, dzLo, g.dw1, g.db1, x.D, W, dzMax);
}
