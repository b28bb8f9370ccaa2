//===- KernelSkeleton.cpp - the MoE GPU kernels' building blocks ------------===//
//
// See KernelSkeleton.h.
//
//===----------------------------------------------------------------------===//

#include "lowering/gpu/KernelSkeleton.h"
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

namespace mlir::moe::gpu_lowering::kernels {

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

void GemmHooks::boundRows(IRB &e, Value rows) {
  rowBase = e.muli(blockId(e, gpu::Dimension::y), e.idx(kTileM));
  aRow = [base = rowBase, rows](IRB &e, Value lr) { return e.rowOrNone(e.addi(base, lr), rows); };
}

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

} // namespace mlir::moe::gpu_lowering::kernels
