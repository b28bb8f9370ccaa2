//===- PlanKernels.cpp - dispatch plan kernels ------------------------------===//
//
// KernelLibrary's plan kernels (Kernels.h): per-expert counts, capacity,
// offsets and the padded token permutation (align), the tile map, the
// dispatch of rows.
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

