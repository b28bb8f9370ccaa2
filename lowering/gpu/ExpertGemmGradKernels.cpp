//===- ExpertGemmGradKernels.cpp - the backward's grouped GEMMs -----------===//
//
// KernelLibrary's CUDA-core kernels of the backward (Kernels.h, docs/spec.md
// §9), next to the forward's grouped GEMMs (ExpertGemmKernels.cpp) and on the
// same tiled skeleton (KernelSkeleton.h): the row GEMMs over a plan's tiles
// (the recomputed z, dH = dOut W2^T with the activation's backward in its
// epilogue, dX = dZ W1^T through the transposed weights), the variable-K
// weight-gradient GEMMs with the bias gradient as one more output row, and
// moe.combine_grad. Every output element is one thread's fused multiply-add
// chain in ascending k (the CPU path's order), so no gradient depends on the
// block schedule and no float atomics are needed.
//
//===----------------------------------------------------------------------===//

#include "lowering/gpu/KernelSkeleton.h"
#include "lowering/GroupedGemm.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <string>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;
using namespace mlir::moe::gpu_lowering::kernels;

gpu::GPUFuncOp KernelLibrary::backwardGemm(const GroupedGemmDesc &desc) {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), i32 = IntegerType::get(ctx, 32), ix = IndexType::get(ctx);
  const GemmEpilogue &epilogue = desc.epilogue;
  const bool actGrad = epilogue.has(EpilogueStep::activationGrad);
  const bool bias = epilogue.has(EpilogueStep::bias);
  const bool gated = epilogue.gatedGrad();
  assert(desc.invalidReason().empty() && !desc.weightGradient() && !desc.gathered() &&
         desc.weights == GemmWeights::perGroup && desc.cType.isF32() &&
         !epilogue.has(EpilogueStep::activation) && !epilogue.has(EpilogueStep::routedWeight) &&
         !epilogue.has(EpilogueStep::combine) && !epilogue.has(EpilogueStep::round) &&
         "a row GEMM of the backward");
  Type aType = desc.aType, wType = desc.bType;
  std::string name = std::string("moe_bwd_gemm_kernel") + (desc.bTransposed ? "_bt" : "") +
                     (bias ? "_bias" : "");
  if (actGrad)
    name += "_actgrad_" + stringifyActivation(epilogue.activation).str() + "_h" +
            (epilogue.roundTo.isF32() ? std::string("_f32") : typeSuffix({epilogue.roundTo}));
  name += typeSuffix({aType, wType});
  SmallVector<Type> args{flat(aType), flat(i32), flat(i32), flat(i32), flat(wType), flat(wType),
                         flat(f32),   flat(f32), ix,        ix,        ix};
  return buildKernel(
      gpuModule, name, args, gemmWorkgroup(ctx, 1), kGemmThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument> wg) {
        Value A = a[0], sorted = a[1], tileExpert = a[2], numTiles = a[3], W = a[4];
        Value biasBuf = a[5], C = a[6], hOut = a[7], K = a[8], N = a[9], tileRows = a[10];
        Value bm = blockId(e, gpu::Dimension::y);
        Value ex = e.toIndex(e.load(tileExpert, bm));
        // C's row stride: a gated activation gradient's z holds both halves.
        Value ldc = gated ? e.muli(N, e.idx(2)) : N;
        GemmHooks h;
        h.active = e.ult(bm, e.toIndex(e.load(numTiles, e.idx(0))));
        h.tileRows = tileRows;
        h.rowBase = e.muli(bm, tileRows);
        h.kDim = K;
        h.nDim = N;
        h.aRow = [&](IRB &e, Value lr) { return e.load(sorted, e.addi(h.rowBase, lr)); };
        h.aBuf = A;
        h.aVecOk = multipleOf(e, K, kVec);
        h.aIndex = [&](IRB &e, Value ar, Value k) { return e.addi(e.muli(ar, K), k); };
        Value wBase = e.muli(ex, e.muli(K, N));
        if (desc.bTransposed) {
          // B[k, n] = W[g][n, k]: strided along n, staged element by element.
          h.loadB = [&](IRB &e, Value k, Value n, int) {
            return loadF32(e, W, e.addi(wBase, e.addi(e.muli(n, K), k)));
          };
        } else {
          h.bBuf = W;
          h.bVecOk = multipleOf(e, N, kVec);
          h.bIndex = [&](IRB &e, Value k, Value n, int) {
            return e.addi(wBase, e.addi(e.muli(k, N), n));
          };
        }
        h.store = [&](IRB &e, Value, Value ar, Value n, ArrayRef<Value> acc) {
          // Padded plan rows (-1) store nothing.
          e.ifThen(e.ge(ar, e.ci32(0)), [&](IRB &e) {
            Value r = e.toIndex(ar);
            Value at = e.addi(e.muli(r, ldc), n);
            if (actGrad) {
              Value z = e.load(C, at);
              Value zUp = gated ? e.load(C, e.addi(at, N)) : Value();
              ActivationGradValues v = buildActivationGradEpilogue(e.b, epilogue, acc[0], z, zUp);
              e.store(v.dz, C, at);
              if (gated)
                e.store(v.dzUp, C, e.addi(at, N));
              e.store(v.h, hOut, e.addi(e.muli(r, N), n));
              return;
            }
            EpilogueValues in;
            in.acc = acc[0];
            if (bias)
              in.bias = loadF32(e, biasBuf, e.addi(e.muli(ex, N), n));
            e.store(buildEpilogue(e.b, epilogue, in), C, at);
          });
        };
        buildGemm(e, wg, h);
      });
}

gpu::GPUFuncOp KernelLibrary::weightGradGemm(const GroupedGemmDesc &desc, bool biasGrad) {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), i32 = IntegerType::get(ctx, 32), ix = IndexType::get(ctx);
  assert(desc.invalidReason().empty() && desc.weightGradient() && !desc.gathered() &&
         desc.bType.isF32() && desc.cType.isF32() && desc.epilogue.steps.empty() &&
         "a weight gradient over rows in group order");
  Type aType = desc.aType;
  std::string name = std::string("moe_wgrad_gemm_kernel") + (biasGrad ? "_bias" : "") +
                     typeSuffix({aType});
  SmallVector<Type> args{flat(aType), flat(i32), flat(f32), flat(f32), flat(f32), ix, ix, ix};
  return buildKernel(
      gpuModule, name, args, gemmWorkgroup(ctx, 1), kGemmThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument> wg) {
        Value A = a[0], offsets = a[1], B = a[2], C = a[3], biasOut = a[4];
        Value M = a[5], N = a[6], numRows = a[7];
        Value g = blockId(e, gpu::Dimension::z);
        // The group's rows [begin, end): K of this block. Offsets outside
        // [0, numRows] or decreasing (reported by the checked tile map) give
        // an empty group: nothing out of bounds is read.
        Value begin = e.load(offsets, g), end = e.load(offsets, e.addi(g, e.idx(1)));
        Value rowsI32 = e.toI32(numRows);
        Value valid = e.andi(e.andi(e.ge(begin, e.ci32(0)), e.ge(end, begin)),
                             e.ge(rowsI32, end));
        Value count = e.toIndex(e.select(valid, e.subi(end, begin), e.ci32(0)));
        Value first = e.toIndex(e.select(valid, begin, e.ci32(0)));
        // C's rows are A's columns (plus the row of ones of the bias).
        Value rowsOfC = biasGrad ? e.addi(M, e.idx(1)) : M;
        GemmHooks h;
        h.kDim = count;
        h.nDim = N;
        h.boundRows(e, rowsOfC);
        // A read transposed: A^T[m, k] = A[first + k, m] (strided along k).
        h.loadA = [&](IRB &e, Value m, Value k) {
          auto load = [&](IRB &e) {
            return SmallVector<Value>{loadF32(e, A, e.addi(e.muli(e.addi(first, k), M), m))};
          };
          if (!biasGrad)
            return load(e)[0];
          return e.ifElse(
              e.ult(m, M), {e.f32()}, load,
              [&](IRB &e) { return SmallVector<Value>{e.cf32(1.0)}; })[0];
        };
        h.bBuf = B;
        h.bVecOk = multipleOf(e, N, kVec);
        h.bIndex = [&](IRB &e, Value k, Value n, int) {
          return e.addi(e.muli(e.addi(first, k), N), n);
        };
        h.store = [&](IRB &e, Value, Value ar, Value n, ArrayRef<Value> acc) {
          e.ifThen(e.ge(ar, e.ci32(0)), [&](IRB &e) {
            Value m = e.toIndex(ar);
            // C[g, m, n]; with the bias, row M of the product is its gradient.
            auto storeC = [&](IRB &e) {
              e.store(acc[0], C, e.addi(e.muli(e.addi(e.muli(g, M), m), N), n));
              return SmallVector<Value>{};
            };
            if (!biasGrad) {
              storeC(e);
              return;
            }
            e.ifElse(
                e.ult(m, M), {}, storeC,
                [&](IRB &e) {
                  e.store(acc[0], biasOut, e.addi(e.muli(g, N), n));
                  return SmallVector<Value>{};
                });
          });
        };
        buildGemm(e, wg, h);
      });
}

gpu::GPUFuncOp KernelLibrary::splitTerms(Type t, bool scaled) {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), i32 = IntegerType::get(ctx, 32), ix = IndexType::get(ctx);
  SmallVector<Type> args{flat(f32), flat(t), flat(t), ix};
  if (scaled)
    args.push_back(flat(i32));
  return buildKernel(gpuModule,
                     std::string("moe_split_terms") + (scaled ? "_scaled" : "") + "_kernel" +
                         typeSuffix({t}),
                     args, {}, kEltThreads, [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
                       Value i = globalThread(e);
                       Value s = scaled ? e.splitScale(e.load(a[4], e.idx(0))).first : Value();
                       e.ifThen(e.ult(i, a[3]), [&](IRB &e) {
                         Value x = e.load(a[0], i);
                         auto [hi, lo] = e.splitTerms(scaled ? e.mulf(x, s) : x, t);
                         e.store(hi, a[1], i);
                         e.store(lo, a[2], i);
                       });
                     });
}

gpu::GPUFuncOp KernelLibrary::absMaxBits() {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), i32 = IntegerType::get(ctx, 32), ix = IndexType::get(ctx);
  return buildKernel(
      gpuModule, "moe_absmax_bits_kernel", {flat(f32), flat(i32), ix},
      {workgroup(ctx, kEltThreads, i32)}, kEltThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument> wg) {
        Value x = a[0], maxBits = a[1], n = a[2], tid = threadId(e);
        Value stride = e.muli(gpu::GridDimOp::create(e.b, gpu::Dimension::x), e.idx(kEltThreads));
        Value m = e.forLoop(globalThread(e), n, stride, {e.ci32(0)},
                            [&](IRB &e, Value i, ValueRange s) {
                              return SmallVector<Value>{arith::MaxSIOp::create(
                                  e.b, s[0], e.finiteAbsBits(e.load(x, i)))};
                            })[0];
        Value buf = wg[0];
        e.store(m, buf, tid);
        barrier(e);
        for (int64_t half = kEltThreads / 2; half >= 1; half /= 2) {
          e.ifThen(e.ult(tid, e.idx(half)), [&](IRB &e) {
            e.store(arith::MaxSIOp::create(e.b, e.load(buf, tid),
                                           e.load(buf, e.addi(tid, e.idx(half)))),
                    buf, tid);
          });
          barrier(e);
        }
        e.ifThen(e.eq(tid, e.idx(0)), [&](IRB &e) {
          memref::AtomicRMWOp::create(e.b, arith::AtomicRMWKind::maxs, e.load(buf, e.idx(0)),
                                      maxBits, ValueRange{e.idx(0)});
        });
      });
}

gpu::GPUFuncOp KernelLibrary::combineGrad(Type outType, Type weightsType, bool check) {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), i32 = IntegerType::get(ctx, 32), ix = IndexType::get(ctx);
  SmallVector<Type> args{flat(f32), flat(outType), flat(weightsType), flat(i32), flat(f32),
                         flat(f32), ix,            ix,                ix,        ix};
  if (check)
    args.push_back(flat(i32));
  constexpr int64_t threads = kCombineGradThreads;
  return buildKernel(
      gpuModule,
      std::string("moe_combine_grad") + (check ? "_checked" : "") + "_kernel" +
          typeSuffix({outType, weightsType}),
      args, {workgroup(ctx, threads, f32)}, threads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument> wg) {
        Value dy = a[0], out = a[1], w = a[2], positions = a[3], dOut = a[4], dW = a[5];
        Value K = a[7], D = a[8], N = a[9];
        // Assignment i = (t, k) is block i (uniform: every branch on it is
        // taken by the whole block, so the barriers below are reached).
        Value i = blockId(e, gpu::Dimension::x), tid = threadId(e);
        Value t = e.divui(i, K);
        Value pos = e.load(positions, i);
        Value kept = e.ge(pos, e.ci32(0));
        kept = check ? checkPosition(e, pos, kept, N, a[10]) : e.andi(kept, e.lt(pos, e.toI32(N)));
        Value part = e.ifElse(
            kept, {f32},
            [&](IRB &e) {
              Value wv = loadF32(e, w, i);
              Value row = e.muli(e.toIndex(pos), D), tok = e.muli(t, D);
              return e.forLoop(tid, D, e.idx(threads), {e.cf32(0.0)},
                               [&](IRB &e, Value d, ValueRange s) {
                                 Value g = e.load(dy, e.addi(tok, d));
                                 e.store(e.mulf(wv, g), dOut, e.addi(row, d));
                                 Value o = loadF32(e, out, e.addi(row, d));
                                 return SmallVector<Value>{e.addf(s[0], e.mulf(g, o))};
                               });
            },
            [&](IRB &e) { return SmallVector<Value>{e.cf32(0.0)}; })[0];
        // The threads' partial sums, added pairwise in a fixed order.
        Value sums = wg[0];
        e.store(part, sums, tid);
        barrier(e);
        for (int64_t half = threads / 2; half >= 1; half /= 2) {
          e.ifThen(e.ult(tid, e.idx(half)), [&](IRB &e) {
            e.store(e.addf(e.load(sums, tid), e.load(sums, e.addi(tid, e.idx(half)))), sums, tid);
          });
          barrier(e);
        }
        e.ifThen(e.eq(tid, e.idx(0)), [&](IRB &e) { e.store(e.load(sums, e.idx(0)), dW, i); });
      });
}

gpu::GPUFuncOp KernelLibrary::sharedGateGrad() {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), ix = IndexType::get(ctx);
  return buildKernel(
      gpuModule, "moe_shared_gate_grad_kernel",
      {flat(f32), flat(f32), flat(f32), flat(f32), flat(f32), ix, ix}, {}, kEltThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
        Value dOut = a[0], f = a[1], o = a[2], scaled = a[3], dO = a[4], T = a[5], D = a[6];
        Value t = globalThread(e);
        e.ifThen(e.ult(t, T), [&](IRB &e) {
          Value g = sharedGateSigmoid(e, e.load(o, t));
          Value row = e.muli(t, D);
          Value dot = e.forLoop(e.idx(0), D, {e.cf32(0.0)}, [&](IRB &e, Value d, ValueRange s) {
            Value at = e.addi(row, d);
            Value dy = e.load(dOut, at);
            e.store(e.mulf(dy, g), scaled, at);
            return SmallVector<Value>{e.addf(s[0], e.mulf(dy, e.load(f, at)))};
          })[0];
          e.store(e.mulf(dot, e.mulf(g, e.subf(e.cf32(1.0), g))), dO, t);
        });
      });
}

gpu::GPUFuncOp KernelLibrary::sharedGateInputGrad(Type sgType) {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), ix = IndexType::get(ctx);
  return buildKernel(
      gpuModule, "moe_shared_gate_input_grad_kernel" + typeSuffix({sgType}),
      {flat(f32), flat(f32), flat(sgType), ix, ix}, {}, kEltThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
        Value dx = a[0], dO = a[1], sg = a[2], T = a[3], D = a[4];
        Value i = globalThread(e);
        e.ifThen(e.ult(i, e.muli(T, D)), [&](IRB &e) {
          Value t = e.divui(i, D), d = e.remui(i, D);
          e.store(e.addf(e.load(dx, i), e.mulf(e.load(dO, t), loadF32(e, sg, d))), dx, i);
        });
      });
}

gpu::GPUFuncOp KernelLibrary::oneGroupOffsets() {
  MLIRContext *ctx = module.getContext();
  Type i32 = IntegerType::get(ctx, 32), ix = IndexType::get(ctx);
  return buildKernel(gpuModule, "moe_one_group_offsets_kernel", {flat(i32), ix}, {}, 1,
                     [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
                       e.store(e.ci32(0), a[0], e.idx(0));
                       e.store(e.toI32(a[1]), a[0], e.idx(1));
                     });
}
