//===- SoftMoEKernels.cpp - Soft MoE kernels --------------------------------===//
//
// KernelLibrary's Soft MoE kernels (Kernels.h): token norms, slot logits,
// the two softmaxes, dispatch and combine weights, slots, combine.
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
