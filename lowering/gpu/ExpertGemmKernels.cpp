//===- ExpertGemmKernels.cpp - grouped expert GEMMs -------------------------===//
//
// KernelLibrary's CUDA-core grouped GEMMs (Kernels.h) from the grouped-GEMM
// description (lowering/GroupedGemm.h) on the tiled skeleton
// (KernelSkeleton.h), their combine epilogue, the reduce and combine
// kernels.
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

using namespace mlir::moe::gpu_lowering::kernels;

SharedFold gpu_lowering::splitSharedTiles(IRB &e, Value blockRow, Value T, Value tileM,
                                          Value numTiles) {
  SharedFold f;
  Value sharedTiles = e.ceildiv(T, tileM);
  f.isShared = e.ult(blockRow, sharedTiles);
  f.tile = e.select(f.isShared, blockRow, e.subi(blockRow, sharedTiles));
  f.active = e.ori(f.isShared, e.ult(f.tile, e.toIndex(e.load(numTiles, e.idx(0)))));
  return f;
}

/// The kernel arguments of quantized weights: the scales (f32) and, int4
/// with zero points, the zero points (i4), after the others.
static void appendQuantArgs(SmallVectorImpl<Type> &args, const GroupedGemmDesc &desc,
                            MLIRContext *ctx) {
  if (!desc.quantized())
    return;
  args.push_back(flat(Float32Type::get(ctx)));
  if (desc.zeroPoint)
    args.push_back(flat(IntegerType::get(ctx, 4)));
}

/// B[k][col] of expert `ex`'s quantized weights, dequantized as the
/// description defines it (buildDequantized): the codes `w` (flat [E, K,
/// N]), the scales `s` (flat [E, ceil(K / bk), ceil(N / bn)]; int4: [E,
/// ceil(K / G), N]) and the int4 zero points `z` (flat [E, ceil(K / G), N],
/// or null: 8).
static Value loadQuantizedB(IRB &e, const GroupedGemmDesc &desc, Value w, Value s, Value z,
                            Value ex, Value K, Value N, Value k, Value col) {
  Value code = e.load(w, e.addi(e.muli(ex, e.muli(K, N)), e.addi(e.muli(k, N), col)));
  Value blocks = e.ceildiv(K, e.idx(desc.blockK));
  Value row = e.addi(e.muli(ex, blocks), e.divui(k, e.idx(desc.blockK)));
  if (desc.format == WeightFormat::int4Group) {
    Value at = e.addi(e.muli(row, N), col);
    return buildDequantized(e.b, desc, code, e.load(s, at), z ? e.load(z, at) : Value());
  }
  Value columnBlocks = e.ceildiv(N, e.idx(desc.blockN));
  Value at = e.addi(e.muli(row, columnBlocks), e.divui(col, e.idx(desc.blockN)));
  return buildDequantized(e.b, desc, code, e.load(s, at), Value());
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
  assert(!(foldShared && desc.quantized()) && "quantized experts are not folded");
  // The biases have the weights' element type, or quantized, A's.
  Type biasType = desc.quantized() ? aType : wType;
  std::string name = std::string(gather ? "moe_gemm1_gather_kernel_" : "moe_gemm1_kernel_") +
                     stringifyActivation(act).str() + (bias ? "_bias" : "") +
                     (foldShared ? "_foldshared" : "") + typeSuffix({aType, wType, hType}) +
                     desc.formatSuffix();
  SmallVector<Type> args{flat(aType),    flat(i32),   flat(i32), flat(i32), flat(i32), flat(wType),
                         flat(biasType), flat(hType), ix,        ix,        ix};
  if (foldShared)
    args.append({flat(wType), flat(hType), ix, ix});
  const size_t quantArgs = args.size();
  appendQuantArgs(args, desc, ctx);
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
                  return SmallVector<Value>{e.rowOrNone(e.addi(h.rowBase, lr), a[14])};
                },
                [&](IRB &e) { return SmallVector<Value>{planRow(e, lr)}; })[0];
          return planRow(e, lr);
        };
        h.aBuf = A;
        h.aVecOk = multipleOf(e, D, kVec);
        h.aIndex = [&](IRB &e, Value ar, Value k) { return e.addi(e.muli(ar, D), k); };
        Value wBase = e.muli(ex, e.muli(D, W));
        if (desc.quantized()) {
          // Each weight dequantized as it is loaded (the CPU path's
          // per-element form): its code, scale and zero point.
          Value s1 = a[quantArgs], z1 = desc.zeroPoint ? a[quantArgs + 1] : Value();
          h.loadB = [&, s1, z1, W, ex, D, H](IRB &e, Value k, Value n, int part) {
            return loadQuantizedB(e, desc, w1, s1, z1, ex, D, W, k, part ? e.addi(n, H) : n);
          };
        } else {
          h.bBuf = w1;
          // H % kVec == 0 makes W, the expert's base and the up half's
          // offset multiples of kVec.
          h.bVecOk = multipleOf(e, H, kVec);
          h.bIndex = [&](IRB &e, Value k, Value n, int part) {
            Value col = part ? e.addi(n, H) : n;
            return e.addi(wBase, e.addi(e.muli(k, W), col));
          };
        }
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
  assert(!(foldShared && desc.quantized()) && "quantized experts are not folded");
  Type biasType = desc.quantized() ? hType : wType;
  std::string name = std::string(weighted ? "moe_gemm2_weighted_kernel" : "moe_gemm2_kernel") +
                     (bias ? "_bias" : "") +
                     (combine ? (shared ? "_combine_shared" : "_combine") : "") +
                     (foldShared ? (sharedGated ? "_foldshared_gated" : "_foldshared") : "") +
                     typeSuffix(types) + desc.formatSuffix();
  SmallVector<Type> args{flat(hType),   flat(i32), flat(f32),      flat(i32),
                         flat(i32),     flat(wType), flat(biasType), flat(outType),
                         ix,            ix,        ix};
  if (combine) {
    args.append({flat(i32), flat(i32), flat(i32), flat(yElt), ix});
    if (shared)
      args.push_back(flat(f32));
  }
  const size_t foldArgs = args.size();
  if (foldShared)
    args.append({flat(hType), flat(wType), flat(f32), flat(f32), ix, ix});
  const size_t quantArgs = args.size();
  appendQuantArgs(args, desc, ctx);
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
              [&](IRB &e) { return SmallVector<Value>{e.rowOrNone(p, Tn)}; }, plan)[0];
        };
        h.aRow = rowOf;
        h.aBuf = hIn;
        h.aVecOk = multipleOf(e, H, kVec);
        h.aIndex = [&](IRB &e, Value ar, Value k) { return e.addi(e.muli(ar, H), k); };
        Value wBase = e.muli(ex, e.muli(H, D));
        if (desc.quantized()) {
          Value s2 = a[quantArgs], z2 = desc.zeroPoint ? a[quantArgs + 1] : Value();
          h.loadB = [&, s2, z2, ex, H, D](IRB &e, Value k, Value n, int) {
            return loadQuantizedB(e, desc, w2, s2, z2, ex, H, D, k, n);
          };
        } else {
          h.bBuf = w2;
          h.bVecOk = multipleOf(e, D, kVec);
          h.bIndex = [&](IRB &e, Value k, Value n, int) {
            return e.addi(wBase, e.addi(e.muli(k, D), n));
          };
        }
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
                                 e.rowOrNone(p, c.T)};
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

Value kernels::checkPosition(IRB &e, Value pos, Value kept, Value N, Value err) {
  // Index check (Kernels.h, error words): -1 (dropped) or a row of the
  // expert output; a bad position reads nothing and records the kind (the
  // host zeroed the word before the launch; every writer stores the same
  // value).
  Value inRows = e.lt(pos, e.toI32(N));
  e.ifThen(e.noti(e.ori(e.andi(kept, inRows), e.eq(pos, e.ci32(-1)))), [&](IRB &e) {
    e.store(e.ci32(MOE_INDEX_BAD_POSITION), err, e.idx(0));
  });
  return e.andi(kept, inRows);
}

gpu::GPUFuncOp KernelLibrary::reduce(bool shared, Type rowsType, Type yType, bool check) {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), i32 = IntegerType::get(ctx, 32), ix = IndexType::get(ctx);
  assert(!(shared && check) && "the checked reduce is moe.dispatch_grad's");
  SmallVector<Type> args{flat(rowsType), flat(i32), flat(yType), ix, ix, ix};
  if (shared)
    args.push_back(flat(f32));
  if (check)
    args.append({ix, flat(i32)});
  return buildKernel(
      gpuModule,
      std::string(shared ? "moe_reduce_shared" : "moe_reduce") + (check ? "_checked" : "") +
          "_kernel" + typeSuffix({rowsType, yType}),
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
            if (check)
              kept = checkPosition(e, pos, kept, a[6], a[7]);
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
            if (check)
              kept = checkPosition(e, pos, kept, a[checkArgs], a[checkArgs + 1]);
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

