//===- Kernels.cpp - the MoE GPU kernels ----------------------------------===//
//
// See Kernels.h. The numerics mirror lowering/ConvertMoEToCPU.cpp
// operation by operation (same f32 formulas, same accumulation order per
// output element, the same Philox4x32-10 builder), so the GPU path selects
// the same experts as the CPU path for the same seed.
//
//===----------------------------------------------------------------------===//

#include "lowering/gpu/Kernels.h"
#include "lowering/GroupedGemm.h"
#include "lowering/Activations.h"
#include "lowering/RoutingBuilder.h"
#include "runtime/IndexErrors.h"

#include "lowering/Philox.h"
#include "lowering/gpu/IRBuilder.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

namespace {

MemRefType flat(Type elt) { return MemRefType::get({ShapedType::kDynamic}, elt); }

MemRefType workgroup(MLIRContext *ctx, int64_t n, Type elt) {
  auto space = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  return MemRefType::get({n}, elt, MemRefLayoutAttrInterface(), space);
}

/// Builds (or finds) kernel `name` with the given arguments and workgroup
/// attributions; `body` fills it (the gpu.return is added here).
gpu::GPUFuncOp buildKernel(
    gpu::GPUModuleOp module, StringRef name, ArrayRef<Type> args,
    ArrayRef<Type> workgroupBuffers, int64_t blockSize,
    function_ref<void(IRB &, ValueRange, ArrayRef<BlockArgument>)> body) {
  if (auto existing = module.lookupSymbol<gpu::GPUFuncOp>(name))
    return existing;
  MLIRContext *ctx = module.getContext();
  OpBuilder ob(ctx);
  ob.setInsertionPointToEnd(module.getBody());
  ImplicitLocOpBuilder b(module.getLoc(), ob);
  auto func = gpu::GPUFuncOp::create(b, name, FunctionType::get(ctx, args, {}),
                                     workgroupBuffers, TypeRange{});
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), ob.getUnitAttr());
  func.setKnownBlockSizeAttr(ob.getDenseI32ArrayAttr(
      {static_cast<int32_t>(blockSize), 1, 1}));
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  IRB e(b);
  body(e, entry.getArguments().take_front(args.size()),
       func.getWorkgroupAttributions());
  gpu::ReturnOp::create(b);
  return func;
}

Value threadId(IRB &e) { return gpu::ThreadIdOp::create(e.b, gpu::Dimension::x); }
Value blockId(IRB &e, gpu::Dimension d) { return gpu::BlockIdOp::create(e.b, d); }
void barrier(IRB &e) { gpu::BarrierOp::create(e.b); }

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

/// m[i] as f32: bf16/f16 data are extended on load (docs/spec.md §2-§3: the
/// arithmetic is f32 whatever the storage type).
Value loadF32(IRB &e, Value m, Value i) {
  Value v = e.load(m, i);
  if (v.getType().isF32())
    return v;
  return arith::ExtFOp::create(e.b, e.f32(), v);
}

/// Stores the f32 value `v` into m[i], rounded to nearest even to m's element
/// type.
void storeF32(IRB &e, Value v, Value m, Value i) {
  Type elt = cast<MemRefType>(m.getType()).getElementType();
  if (elt != v.getType())
    v = arith::TruncFOp::create(e.b, elt, v);
  e.store(v, m, i);
}

/// The kVec values m[i .. i+kVec) as f32 through one vector load (128 bits
/// for f32, 64 for bf16/f16); the caller guarantees that i is a multiple of
/// kVec (the alignment the load claims) and that the range is in bounds.
constexpr int64_t kVec = 4;
SmallVector<Value> loadVecF32(IRB &e, Value m, Value i) {
  Type elt = cast<MemRefType>(m.getType()).getElementType();
  auto vt = VectorType::get({kVec}, elt);
  unsigned bytes = kVec * elt.getIntOrFloatBitWidth() / 8;
  Value v = vector::LoadOp::create(e.b, vt, m, ValueRange{i}, /*nontemporal=*/false,
                                   llvm::MaybeAlign(bytes));
  if (!elt.isF32())
    v = arith::ExtFOp::create(e.b, VectorType::get({kVec}, e.f32()), v);
  SmallVector<Value> out;
  for (int64_t j = 0; j < kVec; ++j)
    out.push_back(vector::ExtractOp::create(e.b, v, ArrayRef<int64_t>{j}));
  return out;
}

/// i1: `v` (index) is a multiple of `m`.
Value multipleOf(IRB &e, Value v, int64_t m) {
  return e.eq(e.remui(v, e.idx(m)), e.idx(0));
}

/// The suffix of a kernel variant for the element types of its data
/// buffers: "" when all are f32 (the f32 kernels keep their names), "_bf16"
/// when all are bf16, else every type in order ("_bf16_f32").
std::string typeSuffix(ArrayRef<Type> types) {
  auto name = [](Type t) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << t;
    return s;
  };
  if (llvm::all_of(types, [](Type t) { return t.isF32(); }))
    return "";
  if (llvm::all_equal(types))
    return "_" + name(types.front());
  std::string out;
  for (Type t : types)
    out += "_" + name(t);
  return out;
}

//===----------------------------------------------------------------------===//
// The tiled GEMM skeleton
//===----------------------------------------------------------------------===//

/// What a GEMM kernel plugs into the skeleton. All callbacks run inside the
/// kernel body; `lr` is a row of the block's tile (0..kTileM-1).
///
/// Operands are read either through `loadA` / `loadB` (one element at a
/// time) or, when `aBuf` / `bBuf` is set, from a buffer whose element
/// A[aRow, k] (B[k, n]) sits at `aIndex` (`bIndex`), contiguous in k (n):
/// then a thread stages kVec consecutive elements with one vector load when
/// `aVecOk` (`bVecOk`, uniform over the launch: every index of a k (n) that
/// is a multiple of kVec is a multiple of kVec) holds and the kVec elements
/// are in range, and element by element otherwise.
struct GemmHooks {
  Value active;     // i1, uniform over the block; null: always active
  Value rowBase;    // index of the tile's first row (block_id.y * kTileM)
  Value kDim, nDim; // index
  int parts = 1;    // 2: gated GEMM1 (gate and up columns side by side)
  /// The A row (i32, -1 for a zero row) of tile row `lr`: the gather.
  std::function<Value(IRB &, Value lr)> aRow;
  /// A[aRow, k] as f32 (aRow >= 0 and k < kDim hold).
  std::function<Value(IRB &, Value aRow, Value k)> loadA;
  Value aBuf, aVecOk;
  std::function<Value(IRB &, Value aRow, Value k)> aIndex;
  /// B[k, n] of `part` as f32 (k < kDim and n < nDim hold).
  std::function<Value(IRB &, Value k, Value n, int part)> loadB;
  Value bBuf, bVecOk;
  std::function<Value(IRB &, Value k, Value n, int part)> bIndex;
  /// The epilogue of one output (n < nDim holds): acc has `parts` values.
  std::function<void(IRB &, Value lr, Value aRow, Value n, ArrayRef<Value> acc)> store;
  /// The run-time row tile of the grouped GEMMs (kTileM or kSmallTileM, see
  /// Kernels.h); null: kTileM. `rowBase` must be block_id.y * tileRows.
  Value tileRows;
  /// Runs after the epilogue, in every thread (`tileM`: the tile's rows).
  std::function<void(IRB &, int64_t tileM)> finish;
};

/// Workgroup buffers of the skeleton: A tile, B tile(s) (f32 whatever the
/// storage type), the gathered rows.
SmallVector<Type> gemmWorkgroup(MLIRContext *ctx, int parts) {
  return {workgroup(ctx, kTileM * kTileK, Float32Type::get(ctx)),
          workgroup(ctx, parts * kTileK * kTileN, Float32Type::get(ctx)),
          workgroup(ctx, kTileM, IntegerType::get(ctx, 32))};
}

/// The kVec operand values at positions at, at+1, ... along the contiguous
/// dimension (zero past `limit`, and all zero when !valid): with a buffer,
/// one vector load from `baseIndex` when `vecOk` holds and all kVec are in
/// range (at + kVec <= limit); otherwise element by element through `scalar`.
SmallVector<Value> stageVec(IRB &e, Value valid, Value at, Value limit, Value vecOk,
                            function_ref<Value(IRB &)> baseIndex, Value buf,
                            function_ref<Value(IRB &, Value)> scalar) {
  auto elementwise = [&](IRB &e) {
    SmallVector<Value> out;
    for (int64_t j = 0; j < kVec; ++j) {
      Value p = e.addi(at, e.idx(j));
      out.push_back(e.guardedLoad(e.andi(valid, e.ult(p, limit)), e.f32(),
                                  [&](IRB &e) { return scalar(e, p); }));
    }
    return out;
  };
  if (!buf)
    return elementwise(e);
  Value full = e.andi(e.andi(valid, vecOk), e.ule(e.addi(at, e.idx(kVec)), limit));
  return e.ifElse(
      full, SmallVector<Type>(kVec, e.f32()),
      [&](IRB &e) { return loadVecF32(e, buf, baseIndex(e)); }, elementwise);
}

void buildGemm(IRB &e, ArrayRef<BlockArgument> wg, const GemmHooks &h) {
  static_assert(kTileM * kTileK == kGemmThreads * kVec, "one A vector per thread");
  static_assert(kTileK * kTileN == kGemmThreads * kVec, "one B vector per thread and part");
  Value aTile = wg[0], bTile = wg[1], rows = wg[2];
  Value tid = threadId(e);
  constexpr int64_t threadsN = kTileN / kMicro; // 16
  Value tx = e.remui(tid, e.idx(threadsN)), ty = e.divui(tid, e.idx(threadsN));
  Value n0 = e.muli(blockId(e, gpu::Dimension::x), e.idx(kTileN));
  // This thread's share of the staged tiles: kVec consecutive k of one A
  // row, kVec consecutive n of one B row.
  Value aR = e.divui(tid, e.idx(kTileK / kVec));
  Value aK = e.muli(e.remui(tid, e.idx(kTileK / kVec)), e.idx(kVec));
  Value bK = e.divui(tid, e.idx(kTileN / kVec));
  Value bC = e.muli(e.remui(tid, e.idx(kTileN / kVec)), e.idx(kVec));
  Value aVecOk = h.aVecOk ? h.aVecOk : e.ci1(false);
  Value bVecOk = h.bVecOk ? h.bVecOk : e.ci1(false);
  auto loadA = [&](IRB &e, Value ar, Value k) {
    return h.aBuf ? loadF32(e, h.aBuf, h.aIndex(e, ar, k)) : h.loadA(e, ar, k);
  };
  auto loadB = [&](IRB &e, Value k, Value n, int part) {
    return h.bBuf ? loadF32(e, h.bBuf, h.bIndex(e, k, n, part)) : h.loadB(e, k, n, part);
  };

  // One code path per row tile: tileM rows, microRows rows per thread.
  auto body = [&](IRB &e, int64_t tileM) {
    const int64_t microRows = tileM / (kTileM / kMicro);
    // The gather: the A row of every tile row, once per block.
    e.ifThen(e.ult(tid, e.idx(tileM)), [&](IRB &e) { e.store(h.aRow(e, tid), rows, tid); });
    barrier(e);

    int64_t numAcc = microRows * kMicro * h.parts;
    SmallVector<Value> init(numAcc, e.cf32(0.0));
    SmallVector<Value> acc = e.forLoop(
        e.idx(0), h.kDim, e.idx(kTileK), init, [&](IRB &e, Value k0, ValueRange accIn) {
          // Stage A[rows, k0:k0+kTileK] (row-major, kTileK wide).
          {
            // A 16-row tile stages 16 x kTileK: the first tileM * kTileK / kVec
            // threads, one vector each.
            auto stageA = [&](IRB &e) {
              Value ar = e.load(rows, aR);
              Value arIdx = e.toIndex(e.select(e.ge(ar, e.ci32(0)), ar, e.ci32(0)));
              Value k = e.addi(k0, aK);
              SmallVector<Value> v = stageVec(
                  e, e.ge(ar, e.ci32(0)), k, h.kDim, aVecOk,
                  [&](IRB &e) { return h.aIndex(e, arIdx, k); }, h.aBuf,
                  [&](IRB &e, Value kj) { return loadA(e, arIdx, kj); });
              Value at = e.addi(e.muli(aR, e.idx(kTileK)), aK);
              for (int64_t j = 0; j < kVec; ++j)
                e.store(v[j], aTile, e.addi(at, e.idx(j)));
            };
            if (tileM == kTileM)
              stageA(e);
            else
              e.ifThen(e.ult(aR, e.idx(tileM)), stageA);
          }
          // Stage B[k0:k0+kTileK, n0:n0+kTileN] of every part.
          for (int part = 0; part < h.parts; ++part) {
            Value k = e.addi(k0, bK), n = e.addi(n0, bC);
            SmallVector<Value> v = stageVec(
                e, e.ult(k, h.kDim), n, h.nDim, bVecOk,
                [&](IRB &e) { return h.bIndex(e, k, n, part); }, h.bBuf,
                [&](IRB &e, Value nj) { return loadB(e, k, nj, part); });
            Value at = e.addi(e.addi(e.muli(bK, e.idx(kTileN)), bC),
                              e.idx(part * kTileK * kTileN));
            for (int64_t j = 0; j < kVec; ++j)
              e.store(v[j], bTile, e.addi(at, e.idx(j)));
          }
          barrier(e);
          // TENSOR CORES: the bf16/f16 inner product over the staged tiles
          // is where nvgpu.mma.sync / wgmma kernels (MmaGemm.cpp) take over;
          // this is the CUDA-core micro-tile: every output accumulates
          // fma(a, b, acc) in ascending k, one rounding per product-sum.
          SmallVector<Value> inner = e.forLoop(
              e.idx(0), e.idx(kTileK), accIn, [&](IRB &e, Value kk, ValueRange a) {
                SmallVector<Value> av, out(a.begin(), a.end());
                for (int64_t i = 0; i < microRows; ++i) {
                  Value r = e.addi(ty, e.idx(i * (kTileM / kMicro)));
                  av.push_back(e.load(aTile, e.addi(e.muli(r, e.idx(kTileK)), kk)));
                }
                for (int part = 0; part < h.parts; ++part)
                  for (int64_t j = 0; j < kMicro; ++j) {
                    Value c = e.addi(tx, e.idx(j * threadsN));
                    Value bv = e.load(
                        bTile, e.addi(e.addi(e.muli(kk, e.idx(kTileN)), c),
                                      e.idx(part * kTileK * kTileN)));
                    for (int64_t i = 0; i < microRows; ++i) {
                      int64_t slot = (part * microRows + i) * kMicro + j;
                      out[slot] = math::FmaOp::create(e.b, av[i], bv, out[slot]);
                    }
                  }
                return out;
              });
          barrier(e);
          return inner;
        });
    // Epilogue.
    for (int64_t i = 0; i < microRows; ++i) {
      Value lr = e.addi(ty, e.idx(i * (kTileM / kMicro)));
      Value ar = e.load(rows, lr);
      for (int64_t j = 0; j < kMicro; ++j) {
        Value n = e.addi(n0, e.addi(tx, e.idx(j * threadsN)));
        SmallVector<Value> vals;
        for (int part = 0; part < h.parts; ++part)
          vals.push_back(acc[(part * microRows + i) * kMicro + j]);
        e.ifThen(e.ult(n, h.nDim), [&](IRB &e) { h.store(e, lr, ar, n, vals); });
      }
    }
    if (h.finish)
      h.finish(e, tileM);
  };
  auto run = [&](IRB &e) {
    if (!h.tileRows)
      return body(e, kTileM);
    // The run-time row tile is uniform over the launch.
    e.ifElse(
        e.eq(h.tileRows, e.idx(kSmallTileM)), {},
        [&](IRB &e) {
          body(e, kSmallTileM);
          return SmallVector<Value>{};
        },
        [&](IRB &e) {
          body(e, kTileM);
          return SmallVector<Value>{};
        });
  };
  if (h.active)
    e.ifThen(h.active, run);
  else
    run(e);
}

/// The shared expert's gate sigmoid(o) = 1 / (1 + exp(-o)) (f32,
/// buildRoutingSigmoid of docs/routing-numerics.md, as on the CPU path):
/// moe_sigmoid_kernel and the router + gate kernel's shared gate compute the
/// same bits.
Value sharedGateSigmoid(IRB &e, Value o) { return e.routingSigmoid(o); }

/// The linear thread index of a 1-D launch of kEltThreads-thread blocks.
Value globalThread(IRB &e) {
  return e.addi(e.muli(blockId(e, gpu::Dimension::x), e.idx(kEltThreads)), threadId(e));
}

} // namespace

//===----------------------------------------------------------------------===//
// KernelLibrary
//===----------------------------------------------------------------------===//

KernelLibrary::KernelLibrary(ModuleOp module) : module(module) {
  MLIRContext *ctx = module.getContext();
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), UnitAttr::get(ctx));
  gpuModule = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModuleName);
  if (!gpuModule) {
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(module.getBody());
    gpuModule = gpu::GPUModuleOp::create(b, module.getLoc(), kKernelModuleName);
  }
}

gpu::GPUFuncOp KernelLibrary::route(bool bias, Type data, Type out) {
  MLIRContext *ctx = module.getContext();
  Type ix = IndexType::get(ctx);
  std::string name =
      std::string("moe_route_kernel") + (bias ? "_bias" : "") + typeSuffix({data, out});
  return buildKernel(
      gpuModule, name, {flat(data), flat(data), flat(data), flat(out), ix, ix, ix},
      gemmWorkgroup(ctx, 1), kGemmThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument> wg) {
        Value x = a[0], wr = a[1], br = a[2], logits = a[3], T = a[4], D = a[5], E = a[6];
        GemmHooks h;
        h.rowBase = e.muli(blockId(e, gpu::Dimension::y), e.idx(kTileM));
        h.kDim = D;
        h.nDim = E;
        h.aRow = [&](IRB &e, Value lr) {
          Value t = e.addi(h.rowBase, lr);
          return e.select(e.ult(t, T), e.toI32(t), e.ci32(-1));
        };
        h.aBuf = x;
        h.aVecOk = multipleOf(e, D, kVec);
        h.aIndex = [&](IRB &e, Value ar, Value k) { return e.addi(e.muli(ar, D), k); };
        h.bBuf = wr;
        h.bVecOk = multipleOf(e, E, kVec);
        h.bIndex = [&](IRB &e, Value k, Value n, int) { return e.addi(e.muli(k, E), n); };
        h.store = [&](IRB &e, Value, Value ar, Value n, ArrayRef<Value> acc) {
          e.ifThen(e.ge(ar, e.ci32(0)), [&](IRB &e) {
            Value v = acc[0];
            if (bias)
              v = e.addf(v, loadF32(e, br, n));
            storeF32(e, v, logits, e.addi(e.muli(e.toIndex(ar), E), n));
          });
        };
        buildGemm(e, wg, h);
      });
}

gpu::GPUFuncOp KernelLibrary::gate(const TokenRoutingKind &kind, Type biasType, bool router,
                                   bool routerBias, Type routerData, bool sharedGate) {
  using Mode = TokenRoutingKind::Mode;
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), i32 = IntegerType::get(ctx, 32), ix = IndexType::get(ctx);
  std::string name = "moe_gate_kernel_";
  switch (kind.mode) {
  case Mode::Dense:
    name += "dense";
    break;
  case Mode::TopK:
    name += "topk";
    break;
  case Mode::MoesartInference:
    name += "moesart";
    break;
  case Mode::MoesartTraining:
    name += "moesart_train_" + stringifyMoesartAdjust(kind.adjust).str();
    break;
  }
  const bool production = kind.production, loss = kind.loss;
  assert((!production || kind.mode == Mode::TopK) && "production routers are top_k");
  if (production) {
    name += "_" + stringifyRouterScore(kind.score).str();
    if (!kind.normalize)
      name += "_nonorm";
    if (kind.grouped)
      name += "_grouped";
    if (kind.selectionBias)
      name += "_bias";
  }
  Type biasElt = biasType ? biasType : f32;
  if (production && kind.selectionBias)
    name += typeSuffix({biasElt});
  if (loss)
    name += "_loss";
  Type rd = routerData ? routerData : f32;
  assert((!sharedGate || router) && "the shared gate is computed with the router");
  if (router)
    name += std::string(routerBias ? "_router_bias" : "_router") +
            (sharedGate ? "_sgate" : "") + typeSuffix({rd});
  SmallVector<Type> args{flat(f32), flat(f32), flat(i32), flat(f32), flat(f32),
                         ix,        ix,        ix,        i32,       i32};
  if (production)
    args.append({flat(biasElt), ix, ix, f32});
  size_t routerArgs = args.size();
  if (router)
    args.append({flat(rd), flat(rd), flat(rd), ix});
  if (sharedGate)
    args.append({flat(rd), flat(f32)});
  // Tokens per block: one per thread, or kRouteTokens with the router.
  const int64_t tokensPerBlock = router ? kRouteTokens : kGateThreads;
  // The loss partials; with the router also its staged x and Wr chunks.
  SmallVector<Type> gateWorkgroup{workgroup(ctx, kGateThreads, f32)};
  if (router)
    gateWorkgroup.append({workgroup(ctx, kRouteTokens * kRouteDepth, f32),
                          workgroup(ctx, kRouteWeights, f32)});
  gpu::GPUFuncOp kernel = buildKernel(
      gpuModule, name, args, gateWorkgroup, kGateThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument> wg) {
        Value logits = a[0], weights = a[1], indices = a[2], p = a[3], partials = a[4];
        Value T = a[5], E = a[6], K = a[7], key0 = a[8], key1 = a[9];
        Value selBias, numGroups, keptGroups, scale;
        if (production) {
          selBias = a[10];
          numGroups = a[11];
          keptGroups = a[12];
          scale = a[13];
        }
        Value tid = threadId(e), bid = blockId(e, gpu::Dimension::x);
        Value first = e.muli(bid, e.idx(tokensPerBlock));
        Value t = e.addi(first, tid);
        Value c0 = e.idx(0);
        if (router) {
          // The logits of the block's tokens: pair q = (token first + q / E,
          // expert q % E) is fma(x[t, d], wr[d, e], acc) over ascending d
          // from 0 (the CPU router's vector.fma chain), plus the bias: the
          // same f32 bits as the CPU path. The chain is sequential per pair;
          // its operands are staged through workgroup memory in depth chunks
          // (coalesced loads, many in flight) and the running sums kept in
          // `logits` between chunks. More than kRouteWeights experts: direct
          // loads (same arithmetic).
          Value x = a[routerArgs], wr = a[routerArgs + 1], br = a[routerArgs + 2];
          Value D = a[routerArgs + 3];
          // With the shared gate, column E of every token is the shared
          // expert's gate logit x sg (the same fma chain; its running sum is
          // kept in `gate`), made sigmoid(x sg) after the chain.
          Value sg = sharedGate ? a[routerArgs + 4] : Value();
          Value gateOut = sharedGate ? a[routerArgs + 5] : Value();
          Value cols = sharedGate ? e.addi(E, e.idx(1)) : E;
          Value xs = wg[1], ws = wg[2];
          Value step = e.idx(kGateThreads);
          Value pairs = e.muli(e.idx(tokensPerBlock), cols);
          // The running sum of pair q: logits[t, ex], or gate[t] for ex = E.
          auto accAt = [&](IRB &e, Value q, function_ref<void(IRB &, Value buf, Value i)> f) {
            Value tq = e.addi(first, e.divui(q, cols)), ex = e.remui(q, cols);
            if (!sharedGate)
              return f(e, logits, e.addi(e.muli(tq, E), ex));
            e.ifElse(
                e.ult(ex, E), {},
                [&](IRB &e) {
                  f(e, logits, e.addi(e.muli(tq, E), ex));
                  return SmallVector<Value>{};
                },
                [&](IRB &e) {
                  f(e, gateOut, tq);
                  return SmallVector<Value>{};
                });
          };
          auto loadAcc = [&](IRB &e, Value q) {
            if (!sharedGate)
              return e.load(logits, e.addi(e.muli(e.addi(first, e.divui(q, cols)), E),
                                           e.remui(q, cols)));
            Value tq = e.addi(first, e.divui(q, cols)), ex = e.remui(q, cols);
            Value isGate = e.noti(e.ult(ex, E));
            return e.ifElse(
                isGate, {e.f32()},
                [&](IRB &e) { return SmallVector<Value>{e.load(gateOut, tq)}; },
                [&](IRB &e) {
                  return SmallVector<Value>{e.load(logits, e.addi(e.muli(tq, E), ex))};
                })[0];
          };
          auto storeAcc = [&](IRB &e, Value q, Value v) {
            accAt(e, q, [&](IRB &e, Value buf, Value i) { e.store(v, buf, i); });
          };
          // The router weight of (d, column ex): Wr[d, ex], or sg[d].
          auto weightAt = [&](IRB &e, Value d, Value ex) {
            if (!sharedGate)
              return loadF32(e, wr, e.addi(e.muli(d, E), ex));
            return e.ifElse(
                e.ult(ex, E), {e.f32()},
                [&](IRB &e) {
                  return SmallVector<Value>{loadF32(e, wr, e.addi(e.muli(d, E), ex))};
                },
                [&](IRB &e) { return SmallVector<Value>{loadF32(e, sg, d)}; })[0];
          };
          auto live = [&](IRB &e, Value q) { return e.ult(e.addi(first, e.divui(q, cols)), T); };
          e.ifElse(
              e.cmpi(arith::CmpIPredicate::ule, cols, e.idx(kRouteWeights)), {},
              [&](IRB &e) {
                // Depth of a chunk: the weights [dc, cols] fit in ws.
                Value dc = e.mini(e.idx(kRouteDepth), e.divui(e.idx(kRouteWeights), cols));
                e.forEach(c0, D, dc, [&](IRB &e, Value d0) {
                  Value n = e.mini(dc, e.subi(D, d0));
                  e.forEach(tid, e.muli(e.idx(tokensPerBlock), n), step, [&](IRB &e, Value i) {
                    Value tl = e.divui(i, n), dd = e.remui(i, n);
                    Value tq = e.addi(first, tl);
                    Value v = e.guardedLoad(e.ult(tq, T), e.f32(), [&](IRB &e) {
                      return loadF32(e, x, e.addi(e.muli(tq, D), e.addi(d0, dd)));
                    });
                    e.store(v, xs, e.addi(e.muli(tl, e.idx(kRouteDepth)), dd));
                  });
                  e.forEach(tid, e.muli(n, cols), step, [&](IRB &e, Value i) {
                    Value v = sharedGate ? weightAt(e, e.addi(d0, e.divui(i, cols)),
                                                    e.remui(i, cols))
                                         : loadF32(e, wr, e.addi(e.muli(d0, E), i));
                    e.store(v, ws, i);
                  });
                  barrier(e);
                  e.forEach(tid, pairs, step, [&](IRB &e, Value q) {
                    e.ifThen(live(e, q), [&](IRB &e) {
                      Value tl = e.divui(q, cols), ex = e.remui(q, cols);
                      Value init = e.guardedLoad(e.cmpi(arith::CmpIPredicate::ne, d0, c0), e.f32(), [&](IRB &e) {
                        return loadAcc(e, q);
                      });
                      Value xBase = e.muli(tl, e.idx(kRouteDepth));
                      Value acc = e.forLoop(c0, n, {init}, [&](IRB &e, Value dd, ValueRange s) {
                        Value xv = e.load(xs, e.addi(xBase, dd));
                        Value wv = e.load(ws, e.addi(e.muli(dd, cols), ex));
                        return SmallVector<Value>{math::FmaOp::create(e.b, xv, wv, s[0])};
                      })[0];
                      storeAcc(e, q, acc);
                    });
                  });
                  barrier(e);
                });
                return SmallVector<Value>{};
              },
              [&](IRB &e) {
                e.forEach(tid, pairs, step, [&](IRB &e, Value q) {
                  e.ifThen(live(e, q), [&](IRB &e) {
                    Value tq = e.addi(first, e.divui(q, cols)), ex = e.remui(q, cols);
                    Value xBase = e.muli(tq, D);
                    Value acc = e.forLoop(c0, D, {e.cf32(0.0)}, [&](IRB &e, Value d, ValueRange s) {
                      Value xv = loadF32(e, x, e.addi(xBase, d));
                      Value wv = weightAt(e, d, ex);
                      return SmallVector<Value>{math::FmaOp::create(e.b, xv, wv, s[0])};
                    })[0];
                    storeAcc(e, q, acc);
                  });
                });
                return SmallVector<Value>{};
              });
          // The bias after the whole sum (the CPU router's epilogue), and
          // the shared gate's sigmoid (moe_sigmoid_kernel's formula). Each
          // thread finishes the pairs it accumulated.
          if (routerBias || sharedGate)
            e.forEach(tid, pairs, step, [&](IRB &e, Value q) {
              e.ifThen(live(e, q), [&](IRB &e) {
                Value tq = e.addi(first, e.divui(q, cols)), ex = e.remui(q, cols);
                auto routed = [&](IRB &e) {
                  if (!routerBias)
                    return SmallVector<Value>{};
                  Value at = e.addi(e.muli(tq, E), ex);
                  e.store(e.addf(e.load(logits, at), loadF32(e, br, ex)), logits, at);
                  return SmallVector<Value>{};
                };
                if (!sharedGate) {
                  routed(e);
                  return;
                }
                e.ifElse(e.ult(ex, E), {}, routed, [&](IRB &e) {
                  Value o = e.load(gateOut, tq);
                  e.store(sharedGateSigmoid(e, o), gateOut, tq);
                  return SmallVector<Value>{};
                });
              });
            });
          // The block's logits are written by its own threads: a block
          // barrier orders them before the routing below.
          barrier(e);
        }

        // The token's routing: buildTokenRouting (lowering/RoutingBuilder.h),
        // the code the CPU path runs, over this kernel's flat buffers.
        auto token = [&](IRB &e) -> SmallVector<Value> {
          Value base = e.muli(t, E), wbase = e.muli(t, K);
          TokenRoutingKind tk = kind;
          TokenRoutingValues tv;
          tv.experts = E;
          tv.k = K;
          // Scratch of this token: E values at t * E for MOESART's draws,
          // 2G (<= 2E) at t * 2E for the grouped production router.
          Value sbase = base;
          if (production) {
            tv.groups = numGroups;
            tv.keptGroups = keptGroups;
            tv.scale = scale;
            sbase = e.muli(t, e.muli(E, e.idx(2)));
          }
          if (kind.mode == Mode::MoesartTraining) {
            tv.key0 = key0;
            tv.key1 = key1;
            tv.token = e.toI32(t);
          }
          auto flatLoad = [](ImplicitLocOpBuilder &b, Value m, Value i) -> Value {
            return memref::LoadOp::create(b, m, ValueRange{i});
          };
          auto flatStore = [](ImplicitLocOpBuilder &b, Value v, Value m, Value i) {
            memref::StoreOp::create(b, v, m, ValueRange{i});
          };
          auto add = [](ImplicitLocOpBuilder &b, Value x, Value y) -> Value {
            return arith::AddIOp::create(b, x, y);
          };
          auto logitAt = [&](ImplicitLocOpBuilder &b, Value ex) {
            return flatLoad(b, logits, add(b, base, ex));
          };
          auto biasAt = [&](ImplicitLocOpBuilder &b, Value ex) {
            IRB be(b);
            return loadF32(be, selBias, ex);
          };
          auto loadIndex = [&](ImplicitLocOpBuilder &b, Value r) {
            return flatLoad(b, indices, add(b, wbase, r));
          };
          auto storeIndex = [&](ImplicitLocOpBuilder &b, Value r, Value ex) {
            flatStore(b, ex, indices, add(b, wbase, r));
          };
          auto storeWeight = [&](ImplicitLocOpBuilder &b, Value i, Value w) {
            flatStore(b, w, weights, add(b, wbase, i));
          };
          auto loadScratch = [&](ImplicitLocOpBuilder &b, Value i) {
            return flatLoad(b, p, add(b, sbase, i));
          };
          auto storeScratch = [&](ImplicitLocOpBuilder &b, Value i, Value v) {
            flatStore(b, v, p, add(b, sbase, i));
          };
          TokenRoutingStorage io;
          io.logit = logitAt;
          io.selectionBias = biasAt;
          io.loadIndex = loadIndex;
          io.storeIndex = storeIndex;
          io.storeWeight = storeWeight;
          io.loadScratch = loadScratch;
          io.storeScratch = storeScratch;
          Value term = buildTokenRouting(e.b, tk, tv, io);
          return {term ? term : e.cf32(0.0)};
        };
        Value activeToken = e.ult(t, T);
        if (router)
          activeToken = e.andi(activeToken, e.ult(tid, e.idx(tokensPerBlock)));
        Value contribution = e.ifElse(activeToken, {e.f32()}, token, [&](IRB &e) {
          return SmallVector<Value>{e.cf32(0.0)};
        })[0];
        if (loss) {
          // Per-block partial sum in token order (deterministic), reduced
          // across blocks in block order by moe_loss_reduce_kernel.
          Value tile = wg[0];
          e.store(contribution, tile, tid);
          barrier(e);
          e.ifThen(e.eq(tid, c0), [&](IRB &e) {
            Value s = e.forLoop(c0, e.idx(kGateThreads), {e.cf32(0.0)},
                                [&](IRB &e, Value i, ValueRange q) {
                                  return SmallVector<Value>{e.addf(q[0], e.load(tile, i))};
                                })[0];
            e.store(s, partials, bid);
          });
        }
      });
  // At least one block per SM (PTX .minnctapersm 1): without it ptxas caps
  // this branchy one-thread-per-token kernel at 32 registers for occupancy
  // and spills (8 bytes at sm_80 for the grouped production router).
  kernel->setAttr("nvvm.minctasm", IntegerAttr::get(IntegerType::get(ctx, 32), 1));
  return kernel;
}

gpu::GPUFuncOp KernelLibrary::lossReduce() {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), ix = IndexType::get(ctx);
  return buildKernel(gpuModule, "moe_loss_reduce_kernel", {flat(f32), ix, ix, f32, flat(f32)},
                     {}, 1, [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
                       Value s = e.forLoop(e.idx(0), a[1], {e.cf32(0.0)},
                                           [&](IRB &e, Value i, ValueRange q) {
                                             return SmallVector<Value>{
                                                 e.addf(q[0], e.load(a[0], i))};
                                           })[0];
                       Value loss = e.mulf(a[3], e.divf(s, e.toF32(a[2])));
                       e.store(loss, a[4], e.idx(0));
                     });
}

/// moe_tile_map_kernel: with the offsets of the (unpadded) expert groups in
/// place, pad every group to `tileRows` (index) rows.
static void padGroups(IRB &e, Value tid, Value E, Value offsets, Value poff, Value numTiles,
                      Value tileRows) {
  e.ifThen(e.eq(tid, e.idx(0)), [&](IRB &e) {
    Value zero = e.ci32(0), tile = e.toI32(tileRows);
    e.store(zero, poff, e.idx(0));
    Value total = e.forLoop(e.idx(0), E, {zero}, [&](IRB &e, Value ex, ValueRange s) {
      Value n = e.subi(e.load(offsets, e.addi(ex, e.idx(1))), e.load(offsets, ex));
      Value padded = e.muli(arith::CeilDivSIOp::create(e.b, n, tile), tile);
      Value next = e.addi(s[0], padded);
      e.store(next, poff, e.addi(ex, e.idx(1)));
      return SmallVector<Value>{next};
    })[0];
    e.store(arith::DivSIOp::create(e.b, total, tile), numTiles, e.idx(0));
  });
}

gpu::GPUFuncOp KernelLibrary::align(bool weighted, Type weights, bool combine, bool shared,
                                    bool loss, Type yType, int32_t checkKind) {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), i32 = IntegerType::get(ctx, 32), ix = IndexType::get(ctx);
  assert((!shared || combine) && "the shared output goes with the combine");
  Type wElt = weights ? weights : f32, yElt = yType ? yType : f32;
  // Data types in the name: the weights' when weighted, y's with the combine.
  SmallVector<Type> types;
  if (weighted)
    types.push_back(wElt);
  if (combine)
    types.push_back(yElt);
  std::string name = std::string("moe_align_kernel") + (weighted ? "_weighted" : "") +
                     (combine ? (shared ? "_combine_shared" : "_combine") : "") +
                     (loss ? "_loss" : "") + (checkKind ? "_checked" : "") +
                     typeSuffix(types);
  SmallVector<Type> args{flat(i32), flat(weighted ? wElt : f32), ix,        ix,        ix,        i32,
                         flat(i32), flat(i32), flat(i32), flat(i32), flat(f32), flat(i32),
                         flat(i32), flat(i32), ix,        ix,        ix};
  const size_t combineArgs = args.size();
  if (combine) {
    args.append({flat(i32), ix, flat(yElt), ix});
    if (shared)
      args.push_back(flat(f32));
  }
  const size_t lossArgs = args.size();
  if (loss)
    args.append({flat(f32), ix, f32, flat(f32)});
  const size_t checkArgs = args.size();
  if (checkKind)
    args.push_back(flat(i32));
  return buildKernel(
      gpuModule, name, args, {workgroup(ctx, kAlignThreads, i32)}, kAlignThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument> wg) {
        Value indices = a[0], w = a[1], T = a[2], K = a[3], E = a[4], cap = a[5];
        Value offsets = a[6], poff = a[7], positions = a[8], src = a[9], rowW = a[10];
        Value sorted = a[11], tileExpert = a[12], numTiles = a[13], pMax = a[14],
              maxTiles = a[15], tileRows = a[16];
        Value tid = threadId(e), step = e.idx(kAlignThreads), c0 = e.idx(0);
        Value TK = e.muli(T, K);
        Value minus1 = e.ci32(-1);
        if (loss) {
          // The aux loss: the gate's per-block partials summed in block order
          // (moe_loss_reduce_kernel's arithmetic), lambda * mean.
          Value partials = a[lossArgs], numPartials = a[lossArgs + 1];
          Value lambda = a[lossArgs + 2], lossOut = a[lossArgs + 3];
          e.ifThen(e.eq(tid, c0), [&](IRB &e) {
            Value s = e.forLoop(c0, numPartials, {e.cf32(0.0)}, [&](IRB &e, Value i, ValueRange q) {
              return SmallVector<Value>{e.addf(q[0], e.load(partials, i))};
            })[0];
            e.store(e.mulf(lambda, e.divf(s, e.toF32(T))), lossOut, c0);
          });
        }
        if (combine) {
          // The arrival counters of gemm2's combine start at 0 every call.
          Value counters = a[combineArgs], numCounters = a[combineArgs + 1];
          e.forEach(tid, numCounters, step,
                    [&](IRB &e, Value i) { e.store(e.ci32(0), counters, i); });
        }
        // 1. Defaults: dropped / unused everywhere.
        e.forEach(tid, TK, step, [&](IRB &e, Value i) {
          e.store(minus1, positions, i);
          e.store(minus1, src, i);
          if (weighted)
            e.store(e.cf32(0.0), rowW, i);
        });
        e.forEach(tid, pMax, step, [&](IRB &e, Value i) { e.store(minus1, sorted, i); });
        e.forEach(tid, maxTiles, step, [&](IRB &e, Value i) { e.store(e.ci32(0), tileExpert, i); });
        barrier(e);
        // 2. Per expert, in expert order: the block counts the expert's
        // assignments (thread tid owns the contiguous chunk [lo, hi) of the
        // T*K assignments), an exclusive scan of the chunk counts gives each
        // thread its first slot, and every thread places its matches in
        // token order: the first `cap` assignments of an expert in token
        // order are kept (GShard), exactly as a sequential scan would.
        Value scan = wg[0];
        Value chunk = e.ceildiv(TK, step);
        Value lo = e.mini(e.muli(tid, chunk), TK), hi = e.mini(e.addi(lo, chunk), TK);
        Value tile = e.toI32(tileRows);
        if (checkKind) {
          // Index check (Kernels.h, error words): every thread finds the
          // first expert index outside [0, E) of its chunk; the chunks are in
          // assignment order, so the lowest one found is the first in token
          // order (the CPU path's report). Such an assignment matches no
          // expert below: it is dropped, nothing reads out of bounds.
          Value EI = e.toI32(E);
          Value none = e.toI32(TK);
          Value bad = e.forLoop(lo, hi, {none}, [&](IRB &e, Value i, ValueRange q) {
            Value ex = e.load(indices, i);
            Value invalid = e.ori(e.lt(ex, e.ci32(0)), e.ge(ex, EI));
            Value first = e.andi(invalid, e.eq(q[0], none));
            return SmallVector<Value>{e.select(first, e.toI32(i), q[0])};
          })[0];
          e.store(bad, scan, tid);
          barrier(e);
          Value err = a[checkArgs];
          e.ifThen(e.eq(tid, c0), [&](IRB &e) {
            Value first = e.forLoop(c0, step, {none}, [&](IRB &e, Value j, ValueRange q) {
              return SmallVector<Value>{e.mini(q[0], e.load(scan, j))};
            })[0];
            Value found = e.lt(first, none);
            Value at = e.toIndex(e.select(found, first, e.ci32(0)));
            Value value = e.guardedLoad(found, e.i32(),
                                        [&](IRB &e) { return e.load(indices, at); });
            e.store(e.select(found, e.ci32(checkKind), e.ci32(0)), err, c0);
            e.store(e.select(found, first, e.ci32(0)), err, e.idx(1));
            e.store(value, err, e.idx(2));
            e.store(e.ci32(0), err, e.idx(3));
          });
          // The scan buffer is reused below.
          barrier(e);
        }
        e.ifThen(e.eq(tid, c0), [&](IRB &e) {
          e.store(e.ci32(0), offsets, c0);
          e.store(e.ci32(0), poff, c0);
        });
        SmallVector<Value> ends = e.forLoop(
            c0, E, {e.ci32(0), e.ci32(0)}, [&](IRB &e, Value ex, ValueRange run) {
              Value base = run[0], pbase = run[1];
              Value exI = e.toI32(ex);
              Value mine = e.forLoop(lo, hi, {e.ci32(0)}, [&](IRB &e, Value i, ValueRange q) {
                Value hit = e.eq(e.load(indices, i), exI);
                return SmallVector<Value>{e.select(hit, e.addi(q[0], e.ci32(1)), q[0])};
              })[0];
              // Inclusive scan of the chunk counts (Hillis-Steele).
              e.store(mine, scan, tid);
              barrier(e);
              for (int64_t off = 1; off < kAlignThreads; off *= 2) {
                Value has = e.ge(tid, e.idx(off));
                Value other = e.guardedLoad(has, e.i32(), [&](IRB &e) {
                  return e.load(scan, e.subi(tid, e.idx(off)));
                });
                barrier(e);
                e.store(e.addi(e.load(scan, tid), other), scan, tid);
                barrier(e);
              }
              Value first = e.subi(e.load(scan, tid), mine);
              Value total = e.load(scan, e.idx(kAlignThreads - 1));
              Value kept = arith::MinSIOp::create(e.b, total, cap);
              e.forLoop(lo, hi, {first}, [&](IRB &e, Value i, ValueRange q) {
                Value jv = q[0];
                Value hit = e.eq(e.load(indices, i), exI);
                e.ifThen(e.andi(hit, e.lt(jv, cap)), [&](IRB &e) {
                  Value r = e.addi(base, jv);
                  Value rIdx = e.toIndex(r);
                  e.store(r, positions, i);
                  e.store(e.toI32(e.divui(i, K)), src, rIdx);
                  if (weighted)
                    e.store(loadF32(e, w, i), rowW, rIdx);
                  e.store(r, sorted, e.toIndex(e.addi(pbase, jv)));
                });
                return SmallVector<Value>{e.select(hit, e.addi(jv, e.ci32(1)), jv)};
              });
              // The group padded to the row tile, and its tiles.
              Value padded = e.muli(arith::CeilDivSIOp::create(e.b, kept, tile), tile);
              Value nextBase = e.addi(base, kept), nextPbase = e.addi(pbase, padded);
              e.ifThen(e.eq(tid, c0), [&](IRB &e) {
                Value at = e.addi(ex, e.idx(1));
                e.store(nextBase, offsets, at);
                e.store(nextPbase, poff, at);
              });
              Value t0 = e.toIndex(arith::DivSIOp::create(e.b, pbase, tile));
              Value t1 = e.toIndex(arith::DivSIOp::create(e.b, nextPbase, tile));
              e.forEach(e.addi(t0, tid), t1, step,
                        [&](IRB &e, Value ti) { e.store(exI, tileExpert, ti); });
              // The scan buffer is reused by the next expert.
              barrier(e);
              return SmallVector<Value>{nextBase, nextPbase};
            });
        e.ifThen(e.eq(tid, c0), [&](IRB &e) {
          e.store(arith::DivSIOp::create(e.b, ends[1], tile), numTiles, c0);
        });
        if (combine) {
          // 5. Tokens without a kept assignment get no gemm2 contribution:
          // y[t, :] = shared[t, :] (or 0) here.
          barrier(e);
          Value y = a[combineArgs + 2], D = a[combineArgs + 3];
          e.forEach(tid, T, step, [&](IRB &e, Value t) {
            Value kept = e.forLoop(c0, K, {e.ci1(false)}, [&](IRB &e, Value j, ValueRange q) {
              Value pos = e.load(positions, e.addi(e.muli(t, K), j));
              return SmallVector<Value>{e.ori(q[0], e.ge(pos, e.ci32(0)))};
            })[0];
            e.ifThen(e.noti(kept), [&](IRB &e) {
              e.forEach(c0, D, e.idx(1), [&](IRB &e, Value d) {
                Value at = e.addi(e.muli(t, D), d);
                storeF32(e, shared ? loadF32(e, a[combineArgs + 4], at) : e.cf32(0.0), y, at);
              });
            });
          });
        }
      });
}

gpu::GPUFuncOp KernelLibrary::tileMap(bool check) {
  MLIRContext *ctx = module.getContext();
  Type i32 = IntegerType::get(ctx, 32), ix = IndexType::get(ctx);
  SmallVector<Type> args{flat(i32), ix, flat(i32), flat(i32), flat(i32), flat(i32), ix, ix, ix};
  if (check)
    args.append({ix, flat(i32)});
  SmallVector<Type> wg;
  if (check)
    wg.push_back(workgroup(ctx, 1, i32));
  return buildKernel(
      gpuModule, check ? "moe_tile_map_checked_kernel" : "moe_tile_map_kernel", args, wg,
      kAlignThreads, [&](IRB &e, ValueRange a, ArrayRef<BlockArgument> wgBufs) {
        Value offsets = a[0], E = a[1], poff = a[2], sorted = a[3], tileExpert = a[4],
              numTiles = a[5], pMax = a[6], maxTiles = a[7], tileRows = a[8];
        Value tid = threadId(e), step = e.idx(kAlignThreads);
        Value c0 = e.idx(0);
        e.forEach(tid, pMax, step, [&](IRB &e, Value i) { e.store(e.ci32(-1), sorted, i); });
        e.forEach(tid, maxTiles, step, [&](IRB &e, Value i) { e.store(e.ci32(0), tileExpert, i); });
        if (check) {
          // Index check (Kernels.h, error words): the offsets must be a
          // non-decreasing sequence within [0, N] (the CPU path's check);
          // thread 0 records the first bad one. Bad offsets make no tiles:
          // nothing is read or written out of bounds.
          Value N = e.toI32(a[9]), err = a[10], okFlag = wgBufs[0];
          e.ifThen(e.eq(tid, c0), [&](IRB &e) {
            Value none = e.ci32(-1);
            SmallVector<Value> r = e.forLoop(
                c0, e.addi(E, e.idx(1)), {e.ci32(0), none, e.ci32(0)},
                [&](IRB &e, Value g, ValueRange q) {
                  Value o = e.load(offsets, g);
                  Value ok = e.andi(e.ge(o, q[0]), e.cmpi(arith::CmpIPredicate::sle, o, N));
                  Value first = e.andi(e.noti(ok), e.eq(q[1], none));
                  return SmallVector<Value>{o, e.select(first, e.toI32(g), q[1]),
                                            e.select(first, o, q[2])};
                });
            Value found = e.ge(r[1], e.ci32(0));
            e.store(e.select(found, e.ci32(MOE_INDEX_BAD_OFFSETS), e.ci32(0)), err, c0);
            e.store(e.select(found, r[1], e.ci32(0)), err, e.idx(1));
            e.store(r[2], err, e.idx(2));
            e.store(e.ci32(0), err, e.idx(3));
            e.store(e.select(found, e.ci32(0), e.ci32(1)), okFlag, c0);
          });
        }
        barrier(e);
        Value groups = E;
        if (check) {
          Value ok = e.eq(e.load(wgBufs[0], c0), e.ci32(1));
          e.ifThen(ok, [&](IRB &e) { padGroups(e, tid, E, offsets, poff, numTiles, tileRows); });
          e.ifThen(e.andi(e.noti(ok), e.eq(tid, c0)),
                   [&](IRB &e) { e.store(e.ci32(0), numTiles, c0); });
          groups = e.select(ok, E, c0);
        } else {
          padGroups(e, tid, E, offsets, poff, numTiles, tileRows);
        }
        barrier(e);
        e.forEach(tid, groups, step, [&](IRB &e, Value ex) {
          Value exI = e.toI32(ex);
          Value base = e.load(offsets, ex), pbase = e.load(poff, ex);
          Value n = e.subi(e.load(offsets, e.addi(ex, e.idx(1))), base);
          e.forEach(e.idx(0), e.toIndex(n), e.idx(1), [&](IRB &e, Value j) {
            Value jI = e.toI32(j);
            e.store(e.addi(base, jI), sorted, e.toIndex(e.addi(pbase, jI)));
          });
          Value tile = e.toI32(tileRows);
          Value first = e.toIndex(arith::DivSIOp::create(e.b, pbase, tile));
          Value end = e.toIndex(
              arith::DivSIOp::create(e.b, e.load(poff, e.addi(ex, e.idx(1))), tile));
          e.forEach(first, end, e.idx(1), [&](IRB &e, Value ti) { e.store(exI, tileExpert, ti); });
        });
      });
}

gpu::GPUFuncOp KernelLibrary::dispatchRows(Type data) {
  MLIRContext *ctx = module.getContext();
  Type i32 = IntegerType::get(ctx, 32), ix = IndexType::get(ctx);
  return buildKernel(
      gpuModule, "moe_dispatch_rows_kernel" + typeSuffix({data}),
      {flat(data), flat(i32), flat(data), ix, ix}, {},
      kEltThreads, [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
        Value x = a[0], src = a[1], rows = a[2], N = a[3], D = a[4];
        Value i = globalThread(e);
        e.ifThen(e.ult(i, e.muli(N, D)), [&](IRB &e) {
          Value r = e.divui(i, D), d = e.remui(i, D);
          Value s = e.load(src, r);
          // A copy: the rows keep the data's element type.
          Value v = e.guardedLoad(e.ge(s, e.ci32(0)), data, [&](IRB &e) {
            return e.load(x, e.addi(e.muli(e.toIndex(s), D), d));
          });
          e.store(v, rows, i);
        });
      });
}

SharedFold gpu_lowering::splitSharedTiles(IRB &e, Value blockRow, Value T, Value tileM,
                                          Value numTiles) {
  SharedFold f;
  Value sharedTiles = e.ceildiv(T, tileM);
  f.isShared = e.ult(blockRow, sharedTiles);
  f.tile = e.select(f.isShared, blockRow, e.subi(blockRow, sharedTiles));
  f.active = e.ori(f.isShared, e.ult(f.tile, e.toIndex(e.load(numTiles, e.idx(0)))));
  return f;
}

/// The A row of shared-tile row `p` (= the token): p, or -1 from T on.
static Value sharedRow(IRB &e, Value p, Value T) {
  return e.select(e.ult(p, T), e.toI32(p), e.ci32(-1));
}

gpu::GPUFuncOp KernelLibrary::gemm1(const GroupedGemmDesc &desc, bool foldShared) {
  MLIRContext *ctx = module.getContext();
  Type i32 = IntegerType::get(ctx, 32), ix = IndexType::get(ctx);
  const GemmEpilogue &epilogue = desc.epilogue;
  assert(epilogue.has(EpilogueStep::activation) && !epilogue.has(EpilogueStep::routedWeight) &&
         !epilogue.has(EpilogueStep::combine) && desc.weights == GemmWeights::perGroup &&
         "gemm1 is the expert FFN's first GEMM");
  bool gather = desc.gathered(), gated = desc.gated();
  bool bias = epilogue.has(EpilogueStep::bias);
  Activation act = epilogue.activation;
  Type aType = desc.aType, wType = desc.bType, hType = desc.cType;
  std::string name = std::string(gather ? "moe_gemm1_gather_kernel_" : "moe_gemm1_kernel_") +
                     stringifyActivation(act).str() + (bias ? "_bias" : "") +
                     (foldShared ? "_foldshared" : "") + typeSuffix({aType, wType, hType});
  SmallVector<Type> args{flat(aType), flat(i32),   flat(i32), flat(i32), flat(i32), flat(wType),
                         flat(wType), flat(hType), ix,        ix,        ix};
  if (foldShared)
    args.append({flat(wType), flat(hType), ix, ix});
  return buildKernel(
      gpuModule, name, args, gemmWorkgroup(ctx, gated ? 2 : 1), kGemmThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument> wg) {
        Value A = a[0], sorted = a[1], src = a[2], tileExpert = a[3], numTiles = a[4];
        Value w1 = a[5], b1 = a[6], hOut = a[7], D = a[8], H = a[9], tileRows = a[10];
        Value bm = blockId(e, gpu::Dimension::y);
        Value active = e.ult(bm, e.toIndex(e.load(numTiles, e.idx(0))));
        // The folded shared expert: its tiles come first and use s1 / hs /
        // Hs (every size and buffer below is selected per block).
        Value isShared = e.ci1(false);
        if (foldShared) {
          SharedFold f = splitSharedTiles(e, bm, a[14], tileRows, numTiles);
          isShared = f.isShared;
          bm = f.tile;
          H = e.select(isShared, a[13], H);
          w1 = e.select(isShared, a[11], w1);
          hOut = e.select(isShared, a[12], hOut);
          // Columns past this tile's expert: nothing to do.
          Value n0 = e.muli(blockId(e, gpu::Dimension::x), e.idx(kTileN));
          active = e.andi(f.active, e.ult(n0, H));
        }
        Value W = gated ? e.muli(H, e.idx(2)) : H; // columns of W1[e]
        Value ex = e.toIndex(e.guardedLoad(e.noti(isShared), i32,
                                           [&](IRB &e) { return e.load(tileExpert, bm); }));
        GemmHooks h;
        h.active = active;
        h.tileRows = tileRows;
        h.rowBase = e.muli(bm, tileRows);
        h.kDim = D;
        h.nDim = H;
        h.parts = gated ? 2 : 1;
        auto planRow = [&](IRB &e, Value lr) -> Value {
          Value r = e.load(sorted, e.addi(h.rowBase, lr));
          if (!gather)
            return r;
          return e.ifElse(
              e.ge(r, e.ci32(0)), {e.i32()},
              [&](IRB &e) { return SmallVector<Value>{e.load(src, e.toIndex(r))}; },
              [&](IRB &e) { return SmallVector<Value>{e.ci32(-1)}; })[0];
        };
        // The gather: rows are read through the permutation, never copied.
        // A shared tile's rows are the tokens themselves.
        h.aRow = [&](IRB &e, Value lr) {
          if (foldShared)
            return e.ifElse(
                isShared, {e.i32()},
                [&](IRB &e) {
                  return SmallVector<Value>{sharedRow(e, e.addi(h.rowBase, lr), a[14])};
                },
                [&](IRB &e) { return SmallVector<Value>{planRow(e, lr)}; })[0];
          return planRow(e, lr);
        };
        h.aBuf = A;
        h.aVecOk = multipleOf(e, D, kVec);
        h.aIndex = [&](IRB &e, Value ar, Value k) { return e.addi(e.muli(ar, D), k); };
        Value wBase = e.muli(ex, e.muli(D, W));
        h.bBuf = w1;
        // H % kVec == 0 makes W, the expert's base and the up half's offset
        // multiples of kVec.
        h.bVecOk = multipleOf(e, H, kVec);
        h.bIndex = [&](IRB &e, Value k, Value n, int part) {
          Value col = part ? e.addi(n, H) : n;
          return e.addi(wBase, e.addi(e.muli(k, W), col));
        };
        // Epilogue (buildEpilogue): bias and activation in f32, h rounded to
        // its element type (the CPU path's h). The shared expert's rows
        // have no biases.
        h.store = [&](IRB &e, Value lr, Value, Value n, ArrayRef<Value> acc) {
          auto apply = [&](IRB &e, const GemmEpilogue &ep) {
            EpilogueValues in;
            in.acc = acc[0];
            if (gated)
              in.accUp = acc[1];
            if (ep.has(EpilogueStep::bias)) {
              Value at = e.addi(e.muli(ex, W), n);
              in.bias = loadF32(e, b1, at);
              if (gated)
                in.biasUp = loadF32(e, b1, e.addi(at, H));
            }
            return buildEpilogue(e.b, ep, in);
          };
          Value v =
              foldShared
                  ? e.ifElse(
                         isShared, {e.f32()},
                         [&](IRB &e) {
                           return SmallVector<Value>{
                               apply(e, epilogue.without(EpilogueStep::bias))};
                         },
                         [&](IRB &e) { return SmallVector<Value>{apply(e, epilogue)}; })[0]
                  : apply(e, epilogue);
          Value p = e.addi(h.rowBase, lr);
          storeF32(e, v, hOut, e.addi(e.muli(p, H), n));
        };
        buildGemm(e, wg, h);
      });
}

gpu::GPUFuncOp KernelLibrary::gemm2(const GroupedGemmDesc &desc, bool shared, Type yType,
                                    bool foldShared, bool sharedGated) {
  MLIRContext *ctx = module.getContext();
  const GemmEpilogue &epilogue = desc.epilogue;
  assert(!epilogue.has(EpilogueStep::activation) && !desc.gathered() &&
         desc.weights == GemmWeights::perGroup && "gemm2 is the expert FFN's second GEMM");
  bool weighted = epilogue.has(EpilogueStep::routedWeight);
  bool bias = epilogue.has(EpilogueStep::bias);
  bool combine = epilogue.has(EpilogueStep::combine);
  Type hType = desc.aType, wType = desc.bType, outType = desc.cType;
  Type f32 = Float32Type::get(ctx), i32 = IntegerType::get(ctx, 32), ix = IndexType::get(ctx);
  assert((!shared || combine) && "the shared output goes with the combine");
  assert((!foldShared || (combine && !shared && outType.isF32())) &&
         "the folded shared expert goes with the combine of f32 rows");
  Type yElt = yType ? yType : f32;
  SmallVector<Type> types{hType, wType, outType};
  if (combine)
    types.push_back(yElt);
  std::string name = std::string(weighted ? "moe_gemm2_weighted_kernel" : "moe_gemm2_kernel") +
                     (bias ? "_bias" : "") +
                     (combine ? (shared ? "_combine_shared" : "_combine") : "") +
                     (foldShared ? (sharedGated ? "_foldshared_gated" : "_foldshared") : "") +
                     typeSuffix(types);
  SmallVector<Type> args{flat(hType), flat(i32), flat(f32),   flat(i32), flat(i32), flat(wType),
                         flat(wType), flat(outType), ix,        ix,        ix};
  if (combine) {
    args.append({flat(i32), flat(i32), flat(i32), flat(yElt), ix});
    if (shared)
      args.push_back(flat(f32));
  }
  const size_t foldArgs = args.size();
  if (foldShared)
    args.append({flat(hType), flat(wType), flat(f32), flat(f32), ix, ix});
  SmallVector<Type> wgTypes = gemmWorkgroup(ctx, 1);
  if (combine) // per tile row: the token this block completes, or -1
    wgTypes.push_back(workgroup(ctx, kTileM, i32));
  return buildKernel(
      gpuModule, name, args, wgTypes, kGemmThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument> wg) {
        Value hIn = a[0], sorted = a[1], rowW = a[2], tileExpert = a[3], numTiles = a[4];
        Value w2 = a[5], b2 = a[6], out = a[7], H = a[8], D = a[9], tileRows = a[10];
        Value bm = blockId(e, gpu::Dimension::y);
        Value active = e.ult(bm, e.toIndex(e.load(numTiles, e.idx(0))));
        // The folded shared expert: its tiles come first, read hs (Hs deep)
        // and s2, and store their rows into sharedOut.
        Value isShared = e.ci1(false), Tn, gateW, sharedOut;
        if (foldShared) {
          Tn = a[foldArgs + 5];
          gateW = a[foldArgs + 2];
          sharedOut = a[foldArgs + 3];
          SharedFold f = splitSharedTiles(e, bm, Tn, tileRows, numTiles);
          isShared = f.isShared;
          bm = f.tile;
          active = f.active;
          hIn = e.select(isShared, a[foldArgs], hIn);
          w2 = e.select(isShared, a[foldArgs + 1], w2);
          H = e.select(isShared, a[foldArgs + 4], H);
        }
        Value ex = e.toIndex(e.guardedLoad(e.noti(isShared), i32,
                                           [&](IRB &e) { return e.load(tileExpert, bm); }));
        GemmHooks h;
        h.active = active;
        h.tileRows = tileRows;
        h.rowBase = e.muli(bm, tileRows);
        h.kDim = H;
        h.nDim = D;
        // The A row of tile row lr: the plan row (h is indexed by plan row),
        // or for a shared tile the token (hs by token); -1: a zero row.
        auto rowOf = [&](IRB &e, Value lr) {
          Value p = e.addi(h.rowBase, lr);
          auto plan = [&](IRB &e) {
            Value r = e.load(sorted, p);
            return SmallVector<Value>{e.select(e.ge(r, e.ci32(0)), e.toI32(p), e.ci32(-1))};
          };
          if (!foldShared)
            return plan(e)[0];
          return e.ifElse(
              isShared, {e.i32()},
              [&](IRB &e) { return SmallVector<Value>{sharedRow(e, p, Tn)}; }, plan)[0];
        };
        h.aRow = rowOf;
        h.aBuf = hIn;
        h.aVecOk = multipleOf(e, H, kVec);
        h.aIndex = [&](IRB &e, Value ar, Value k) { return e.addi(e.muli(ar, H), k); };
        Value wBase = e.muli(ex, e.muli(H, D));
        h.bBuf = w2;
        h.bVecOk = multipleOf(e, D, kVec);
        h.bIndex = [&](IRB &e, Value k, Value n, int) {
          return e.addi(wBase, e.addi(e.muli(k, D), n));
        };
        // Epilogue (buildEpilogue): bias, then the routed weight (f32); one
        // row per assignment, stored in out's element type (without
        // `combine`, moe_reduce_kernel sums a token's rows in fixed order).
        h.store = [&](IRB &e, Value lr, Value ar, Value n, ArrayRef<Value> acc) {
          auto routed = [&](IRB &e) {
            Value r = e.load(sorted, e.addi(h.rowBase, lr));
            e.ifThen(e.ge(r, e.ci32(0)), [&](IRB &e) {
              Value rIdx = e.toIndex(r);
              EpilogueValues in;
              in.acc = acc[0];
              if (bias)
                in.bias = loadF32(e, b2, e.addi(e.muli(ex, D), n));
              if (weighted)
                in.weight = e.load(rowW, rIdx);
              storeF32(e, buildEpilogue(e.b, epilogue, in), out, e.addi(e.muli(rIdx, D), n));
            });
            return SmallVector<Value>{};
          };
          if (!foldShared) {
            routed(e);
            return;
          }
          // A shared row (ar = the token, -1 past T): no bias, the gate in
          // place of the routed weight.
          GemmEpilogue sharedEpilogue;
          if (sharedGated)
            sharedEpilogue.then(EpilogueStep::routedWeight);
          e.ifElse(
              isShared, {},
              [&](IRB &e) {
                e.ifThen(e.ge(ar, e.ci32(0)), [&](IRB &e) {
                  Value t = e.toIndex(ar);
                  EpilogueValues in;
                  in.acc = acc[0];
                  if (sharedGated)
                    in.weight = e.load(gateW, t);
                  e.store(buildEpilogue(e.b, sharedEpilogue, in), sharedOut,
                          e.addi(e.muli(t, D), n));
                });
                return SmallVector<Value>{};
              },
              routed);
        };
        if (combine) {
          // The combine (see Kernels.h): after this block's rows are stored,
          // one arrival per (token, column tile); the block that brings a
          // token's last kept contribution sums the token's rows in slot
          // order (after the shared output), as moe_reduce_kernel does.
          CombineEpilogue c;
          c.sorted = sorted;
          c.sourceRows = a[11];
          c.positions = a[12];
          c.counters = a[13];
          c.y = a[14];
          c.K = a[15];
          c.sharedOut = shared ? a[16] : Value();
          if (foldShared) {
            c.sharedOut = sharedOut;
            c.sharedTile = isShared;
            c.T = Tn;
          }
          c.rows = out;
          c.D = D;
          c.lastOf = wg[3];
          h.finish = [&, c](IRB &e, int64_t tileM) {
            emitCombineEpilogue(e, c, threadId(e), h.rowBase, tileM,
                                blockId(e, gpu::Dimension::x), kTileN, kGemmThreads);
          };
        }
        buildGemm(e, wg, h);
      });
}

void gpu_lowering::emitCombineEpilogue(IRB &e, const CombineEpilogue &c, Value tid,
                                       Value rowBase, int64_t tileM, Value colTile,
                                       int64_t tileN, int64_t numThreads) {
  Value c0 = e.idx(0);
  Value colTiles = e.ceildiv(c.D, e.idx(tileN));
  // Release: this block's stores before its arrivals (every thread fences
  // its own stores, then the block meets).
  LLVM::FenceOp::create(e.b, LLVM::AtomicOrdering::acq_rel, "device");
  barrier(e);
  e.ifThen(e.ult(tid, e.idx(tileM)), [&](IRB &e) {
    // The token of this tile row (i32, -1: a padding row): through the
    // plan, or (a folded shared tile) the row itself.
    Value p = e.addi(rowBase, tid);
    auto planToken = [&](IRB &e) {
      Value r = e.load(c.sorted, p);
      return e.ifElse(
          e.ge(r, e.ci32(0)), {e.i32()},
          [&](IRB &e) { return SmallVector<Value>{e.load(c.sourceRows, e.toIndex(r))}; },
          [&](IRB &e) { return SmallVector<Value>{e.ci32(-1)}; });
    };
    Value tok = c.sharedTile
                    ? e.ifElse(
                           c.sharedTile, {e.i32()},
                           [&](IRB &e) {
                             return SmallVector<Value>{
                                 e.select(e.ult(p, c.T), e.toI32(p), e.ci32(-1))};
                           },
                           planToken)[0]
                    : planToken(e)[0];
    Value done = e.ifElse(
        e.ge(tok, e.ci32(0)), {e.i32()},
        [&](IRB &e) {
          Value t = e.toIndex(tok);
          // The token's contributions: its kept slots, and the folded
          // shared expert's row.
          Value init = e.ci32(c.sharedTile ? 1 : 0);
          Value kept = e.forLoop(c0, c.K, {init}, [&](IRB &e, Value j, ValueRange q) {
            Value pos = e.load(c.positions, e.addi(e.muli(t, c.K), j));
            return SmallVector<Value>{
                e.select(e.ge(pos, e.ci32(0)), e.addi(q[0], e.ci32(1)), q[0])};
          })[0];
          Value old = memref::AtomicRMWOp::create(
              e.b, arith::AtomicRMWKind::addi, e.ci32(1), c.counters,
              ValueRange{e.addi(e.muli(t, colTiles), colTile)});
          Value last = e.eq(e.addi(old, e.ci32(1)), kept);
          return SmallVector<Value>{e.select(last, e.toI32(t), e.ci32(-1))};
        },
        [&](IRB &e) { return SmallVector<Value>{e.ci32(-1)}; })[0];
    e.store(done, c.lastOf, tid);
  });
  barrier(e);
  // Acquire: the other blocks' rows of the completed tokens.
  LLVM::FenceOp::create(e.b, LLVM::AtomicOrdering::acq_rel, "device");
  Value n0 = e.muli(colTile, e.idx(tileN));
  e.forEach(tid, e.idx(tileM * tileN), e.idx(numThreads), [&](IRB &e, Value q) {
    Value lr = e.divui(q, e.idx(tileN)), n = e.addi(n0, e.remui(q, e.idx(tileN)));
    Value tI = e.load(c.lastOf, lr);
    e.ifThen(e.andi(e.ge(tI, e.ci32(0)), e.ult(n, c.D)), [&](IRB &e) {
      Value t = e.toIndex(tI);
      Value at = e.addi(e.muli(t, c.D), n);
      Value init = c.sharedOut ? e.load(c.sharedOut, at) : e.cf32(0.0);
      Value sum = e.forLoop(c0, c.K, {init}, [&](IRB &e, Value j, ValueRange q) {
        Value pos = e.load(c.positions, e.addi(e.muli(t, c.K), j));
        Value v = e.guardedLoad(e.ge(pos, e.ci32(0)), e.f32(), [&](IRB &e) {
          return loadF32(e, c.rows, e.addi(e.muli(e.toIndex(pos), c.D), n));
        });
        return SmallVector<Value>{e.addf(q[0], v)};
      })[0];
      storeF32(e, sum, c.y, at);
    });
  });
}

gpu::GPUFuncOp KernelLibrary::reduce(bool shared, Type rowsType, Type yType) {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), i32 = IntegerType::get(ctx, 32), ix = IndexType::get(ctx);
  SmallVector<Type> args{flat(rowsType), flat(i32), flat(yType), ix, ix, ix};
  if (shared)
    args.push_back(flat(f32));
  return buildKernel(
      gpuModule,
      (shared ? "moe_reduce_shared_kernel" : "moe_reduce_kernel") +
          typeSuffix({rowsType, yType}),
      args, {},
      kEltThreads, [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
        Value rows = a[0], positions = a[1], y = a[2], T = a[3], K = a[4], D = a[5];
        Value i = globalThread(e);
        e.ifThen(e.ult(i, e.muli(T, D)), [&](IRB &e) {
          Value t = e.divui(i, D), d = e.remui(i, D);
          // The shared expert's output (f32) starts the sum (the CPU order).
          Value init = shared ? e.load(a[6], i) : e.cf32(0.0);
          // The token's k rows, summed in assignment order: deterministic.
          Value s = e.forLoop(e.idx(0), K, {init}, [&](IRB &e, Value k, ValueRange q) {
            Value pos = e.load(positions, e.addi(e.muli(t, K), k));
            Value kept = e.ge(pos, e.ci32(0));
            Value v = e.guardedLoad(kept, e.f32(), [&](IRB &e) {
              return loadF32(e, rows, e.addi(e.muli(e.toIndex(pos), D), d));
            });
            return SmallVector<Value>{e.addf(q[0], v)};
          })[0];
          // The f32 sum, rounded once to y's element type.
          storeF32(e, s, y, i);
        });
      });
}

gpu::GPUFuncOp KernelLibrary::combine(bool shared, Type outType, Type weightsType,
                                      Type yType, bool check) {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), i32 = IntegerType::get(ctx, 32), ix = IndexType::get(ctx);
  SmallVector<Type> args{flat(outType), flat(weightsType), flat(i32), flat(yType), ix, ix, ix};
  if (shared)
    args.push_back(flat(f32));
  const size_t checkArgs = args.size();
  if (check)
    args.append({ix, flat(i32)});
  return buildKernel(
      gpuModule,
      std::string(shared ? "moe_combine_shared" : "moe_combine") + (check ? "_checked" : "") +
          "_kernel" + typeSuffix({outType, weightsType, yType}),
      args, {},
      kEltThreads, [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
        Value out = a[0], w = a[1], positions = a[2], y = a[3], T = a[4], K = a[5], D = a[6];
        Value i = globalThread(e);
        e.ifThen(e.ult(i, e.muli(T, D)), [&](IRB &e) {
          Value t = e.divui(i, D), d = e.remui(i, D);
          // The shared expert's output (f32) starts the sum (the CPU order).
          Value init = shared ? e.load(a[7], i) : e.cf32(0.0);
          Value s = e.forLoop(e.idx(0), K, {init}, [&](IRB &e, Value k, ValueRange q) {
            Value at = e.addi(e.muli(t, K), k);
            Value pos = e.load(positions, at);
            Value kept = e.ge(pos, e.ci32(0));
            if (check) {
              // Index check (Kernels.h, error words): -1 (dropped) or a row
              // of the expert output; a bad position reads nothing and
              // records the kind (the host zeroed the word before the
              // launch; every writer stores the same value).
              Value N = e.toI32(a[checkArgs]);
              Value inRows = e.lt(pos, N);
              e.ifThen(e.noti(e.ori(e.andi(kept, inRows), e.eq(pos, e.ci32(-1)))),
                       [&](IRB &e) {
                         e.store(e.ci32(MOE_INDEX_BAD_POSITION), a[checkArgs + 1],
                                 e.idx(0));
                       });
              kept = e.andi(kept, inRows);
            }
            Value v = e.guardedLoad(kept, e.f32(), [&](IRB &e) {
              return e.mulf(loadF32(e, out, e.addi(e.muli(e.toIndex(pos), D), d)),
                            loadF32(e, w, at));
            });
            return SmallVector<Value>{e.addf(q[0], v)};
          })[0];
          storeF32(e, s, y, i);
        });
      });
}

gpu::GPUFuncOp KernelLibrary::sigmoid() {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), ix = IndexType::get(ctx);
  return buildKernel(gpuModule, "moe_sigmoid_kernel", {flat(f32), flat(f32), ix}, {},
                     kEltThreads, [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
                       Value i = globalThread(e);
                       e.ifThen(e.ult(i, a[2]), [&](IRB &e) {
                         e.store(sharedGateSigmoid(e, e.load(a[0], i)), a[1], i);
                       });
                     });
}

gpu::GPUFuncOp KernelLibrary::elementwise(
    StringRef name, TypeRange inputs, TypeRange outputs,
    function_ref<SmallVector<Value>(IRB &, Value, ValueRange)> body) {
  SmallVector<Type> args;
  for (TypeRange types : {inputs, outputs})
    for (Type t : types)
      args.push_back(flat(t));
  args.push_back(IndexType::get(module.getContext()));
  size_t n = inputs.size(), m = outputs.size();
  return buildKernel(gpuModule, name, args, {}, kEltThreads,
                     [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
                       Value i = globalThread(e);
                       e.ifThen(e.ult(i, a[n + m]), [&](IRB &e) {
                         SmallVector<Value> values;
                         for (size_t j = 0; j < n; ++j)
                           values.push_back(e.load(a[j], i));
                         SmallVector<Value> results = body(e, i, values);
                         for (size_t j = 0; j < m; ++j)
                           e.store(results[j], a[n + j], i);
                       });
                     });
}

gpu::GPUFuncOp KernelLibrary::softNorms(Type data) {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), ix = IndexType::get(ctx);
  return buildKernel(
      gpuModule, "moe_soft_norms_kernel" + typeSuffix({data}),
      {flat(data), flat(data), flat(f32), flat(f32), ix, ix, ix}, {}, kEltThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
        Value x = a[0], phi = a[1], rx = a[2], rphi = a[3], GM = a[4], ES = a[5], D = a[6];
        Value i = globalThread(e);
        // Rows of x: rx[i] = rsqrt(sum_d x[i, d]^2 + 1e-6).
        e.ifThen(e.ult(i, GM), [&](IRB &e) {
          Value s = e.forLoop(e.idx(0), D, {e.cf32(0.0)}, [&](IRB &e, Value d, ValueRange q) {
            Value v = loadF32(e, x, e.addi(e.muli(i, D), d));
            return SmallVector<Value>{e.addf(q[0], e.mulf(v, v))};
          })[0];
          e.store(math::RsqrtOp::create(e.b, e.addf(s, e.cf32(1e-6))), rx, i);
        });
        // Columns of Phi: rphi[j] = rsqrt(sum_d Phi[d, j]^2 + 1e-6).
        Value j = e.subi(i, GM);
        e.ifThen(e.andi(e.ge(i, GM), e.ult(j, ES)), [&](IRB &e) {
          Value s = e.forLoop(e.idx(0), D, {e.cf32(0.0)}, [&](IRB &e, Value d, ValueRange q) {
            Value v = loadF32(e, phi, e.addi(e.muli(d, ES), j));
            return SmallVector<Value>{e.addf(q[0], e.mulf(v, v))};
          })[0];
          e.store(math::RsqrtOp::create(e.b, e.addf(s, e.cf32(1e-6))), rphi, j);
        });
      });
}

gpu::GPUFuncOp KernelLibrary::softLogits(bool normalize, Type data) {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), ix = IndexType::get(ctx);
  std::string name = std::string("moe_soft_logits_kernel") + (normalize ? "_normalize" : "") +
                     typeSuffix({data});
  return buildKernel(
      gpuModule, name,
      {flat(data), flat(data), flat(f32), flat(f32), flat(f32), ix, ix, ix, f32},
      gemmWorkgroup(ctx, 1), kGemmThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument> wg) {
        Value x = a[0], phi = a[1], rx = a[2], rphi = a[3], L = a[4], GM = a[5], ES = a[6],
              D = a[7], scale = a[8];
        GemmHooks h;
        h.rowBase = e.muli(blockId(e, gpu::Dimension::y), e.idx(kTileM));
        h.kDim = D;
        h.nDim = ES;
        h.aRow = [&](IRB &e, Value lr) {
          Value r = e.addi(h.rowBase, lr);
          return e.select(e.ult(r, GM), e.toI32(r), e.ci32(-1));
        };
        h.loadA = [&](IRB &e, Value ar, Value k) {
          Value v = loadF32(e, x, e.addi(e.muli(ar, D), k));
          return normalize ? e.mulf(v, e.load(rx, ar)) : v;
        };
        h.loadB = [&](IRB &e, Value k, Value n, int) {
          Value v = loadF32(e, phi, e.addi(e.muli(k, ES), n));
          return normalize ? e.mulf(v, e.load(rphi, n)) : v;
        };
        h.store = [&](IRB &e, Value, Value ar, Value n, ArrayRef<Value> acc) {
          e.ifThen(e.ge(ar, e.ci32(0)), [&](IRB &e) {
            e.store(e.mulf(acc[0], scale), L, e.addi(e.muli(e.toIndex(ar), ES), n));
          });
        };
        buildGemm(e, wg, h);
      });
}

/// Softmax with max-subtraction over `n` entries at `at(i)`, written to `out`.
static void softmaxInto(IRB &e, Value in, Value out, Value n,
                        function_ref<Value(IRB &, Value)> at) {
  Value c0 = e.idx(0);
  // The numerics are ScalarBuilder's softmax pieces, which the CPU path's
  // Soft MoE uses too.
  Value mx = e.forLoop(c0, n, {e.softmaxMaxInit()}, [&](IRB &e, Value i, ValueRange s) {
    return SmallVector<Value>{e.softmaxMax(s[0], e.load(in, at(e, i)))};
  })[0];
  Value sum = e.forLoop(c0, n, {e.cf32(0.0)}, [&](IRB &e, Value i, ValueRange s) {
    return SmallVector<Value>{e.addf(s[0], e.softmaxTerm(e.load(in, at(e, i)), mx))};
  })[0];
  e.forEach(c0, n, e.idx(1), [&](IRB &e, Value i) {
    Value idx = at(e, i);
    storeF32(e, e.softmaxWeight(e.load(in, idx), mx, sum), out, idx);
  });
}

gpu::GPUFuncOp KernelLibrary::softDispatchWeights() {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), ix = IndexType::get(ctx);
  return buildKernel(
      gpuModule, "moe_soft_dispatch_weights_kernel", {flat(f32), flat(f32), ix, ix, ix}, {},
      kEltThreads, [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
        Value L = a[0], Dw = a[1], G = a[2], M = a[3], ES = a[4];
        Value i = globalThread(e);
        // One thread per (g, slot): softmax over the group's M tokens.
        e.ifThen(e.ult(i, e.muli(G, ES)), [&](IRB &e) {
          Value g = e.divui(i, ES), j = e.remui(i, ES);
          softmaxInto(e, L, Dw, M, [&](IRB &e, Value m) {
            return e.addi(e.muli(e.addi(e.muli(g, M), m), ES), j);
          });
        });
      });
}

gpu::GPUFuncOp KernelLibrary::softCombineWeights(Type cw) {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), ix = IndexType::get(ctx);
  return buildKernel(
      gpuModule, "moe_soft_combine_weights_kernel" + typeSuffix({cw}),
      {flat(f32), flat(cw), ix, ix, ix}, {},
      kEltThreads, [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
        Value L = a[0], Cw = a[1], G = a[2], M = a[3], ES = a[4];
        Value i = globalThread(e);
        // One thread per token: softmax over all E*S slots jointly.
        e.ifThen(e.ult(i, e.muli(G, M)), [&](IRB &e) {
          softmaxInto(e, L, Cw, ES, [&](IRB &e, Value j) { return e.addi(e.muli(i, ES), j); });
        });
      });
}

gpu::GPUFuncOp KernelLibrary::softSlots(Type xType, Type rowsType) {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), ix = IndexType::get(ctx);
  return buildKernel(
      gpuModule, "moe_soft_slots_kernel" + typeSuffix({xType, rowsType}),
      {flat(f32), flat(xType), flat(rowsType), ix, ix, ix, ix, ix},
      gemmWorkgroup(ctx, 1), kGemmThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument> wg) {
        Value Dw = a[0], x = a[1], rows = a[2], G = a[3], M = a[4], ES = a[5], S = a[6],
              D = a[7];
        Value g = blockId(e, gpu::Dimension::z);
        // Per group g: X~[j, :] = sum_m Dw[g, m, j] x[g, m, :] (j = e*S + s).
        GemmHooks h;
        h.rowBase = e.muli(blockId(e, gpu::Dimension::y), e.idx(kTileM));
        h.kDim = M;
        h.nDim = D;
        h.aRow = [&](IRB &e, Value lr) {
          Value j = e.addi(h.rowBase, lr);
          return e.select(e.ult(j, ES), e.toI32(j), e.ci32(-1));
        };
        h.loadA = [&](IRB &e, Value j, Value m) {
          return e.load(Dw, e.addi(e.muli(e.addi(e.muli(g, M), m), ES), j));
        };
        h.bBuf = x;
        h.bVecOk = multipleOf(e, D, kVec);
        h.bIndex = [&](IRB &e, Value m, Value d, int) {
          return e.addi(e.muli(e.addi(e.muli(g, M), m), D), d);
        };
        h.store = [&](IRB &e, Value, Value ar, Value d, ArrayRef<Value> acc) {
          e.ifThen(e.ge(ar, e.ci32(0)), [&](IRB &e) {
            Value j = e.toIndex(ar);
            Value ex = e.divui(j, S), s = e.remui(j, S);
            Value row = e.addi(e.muli(e.addi(e.muli(ex, G), g), S), s);
            // The slot inputs, rounded to the rows' element type (docs/spec.md §2-§3).
            storeF32(e, acc[0], rows, e.addi(e.muli(row, D), d));
          });
        };
        buildGemm(e, wg, h);
      });
}

gpu::GPUFuncOp KernelLibrary::softCombine(Type cwType, Type outType, Type yType) {
  MLIRContext *ctx = module.getContext();
  Type ix = IndexType::get(ctx);
  return buildKernel(
      gpuModule, "moe_soft_combine_kernel" + typeSuffix({cwType, outType, yType}),
      {flat(cwType), flat(outType), flat(yType), ix, ix, ix, ix, ix},
      gemmWorkgroup(ctx, 1), kGemmThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument> wg) {
        Value Cw = a[0], out = a[1], y = a[2], G = a[3], M = a[4], ES = a[5], S = a[6],
              D = a[7];
        Value g = blockId(e, gpu::Dimension::z);
        // Per group g: y[m, :] = sum_j Cw[g, m, j] Y~[(e*G + g)*S + s, :].
        GemmHooks h;
        h.rowBase = e.muli(blockId(e, gpu::Dimension::y), e.idx(kTileM));
        h.kDim = ES;
        h.nDim = D;
        h.aRow = [&](IRB &e, Value lr) {
          Value m = e.addi(h.rowBase, lr);
          return e.select(e.ult(m, M), e.toI32(m), e.ci32(-1));
        };
        h.aBuf = Cw;
        h.aVecOk = multipleOf(e, ES, kVec);
        h.aIndex = [&](IRB &e, Value m, Value j) {
          return e.addi(e.muli(e.addi(e.muli(g, M), m), ES), j);
        };
        h.bBuf = out;
        h.bVecOk = multipleOf(e, D, kVec);
        h.bIndex = [&](IRB &e, Value j, Value d, int) {
          Value ex = e.divui(j, S), s = e.remui(j, S);
          Value row = e.addi(e.muli(e.addi(e.muli(ex, G), g), S), s);
          return e.addi(e.muli(row, D), d);
        };
        h.store = [&](IRB &e, Value, Value ar, Value d, ArrayRef<Value> acc) {
          e.ifThen(e.ge(ar, e.ci32(0)), [&](IRB &e) {
            Value m = e.toIndex(ar);
            storeF32(e, acc[0], y, e.addi(e.muli(e.addi(e.muli(g, M), m), D), d));
          });
        };
        buildGemm(e, wg, h);
      });
}
