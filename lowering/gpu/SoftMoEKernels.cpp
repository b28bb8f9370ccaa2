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
        h.kDim = D;
        h.nDim = ES;
        h.boundRows(e, GM);
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

/// The slot row of slot j = e*S + s of group g: (e*G + g)*S + s.
static Value slotRow(IRB &e, Value j, Value g, Value G, Value S) {
  return e.addi(e.muli(e.addi(e.muli(e.divui(j, S), G), g), S), e.remui(j, S));
}

gpu::GPUFuncOp KernelLibrary::softSlots(Type xType, Type rowsType, Type dwType) {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), ix = IndexType::get(ctx);
  Type dw = dwType ? dwType : f32;
  return buildKernel(
      gpuModule,
      "moe_soft_slots_kernel" + typeSuffix({xType, rowsType}) +
          (dw.isF32() ? std::string() : "_w" + typeSuffix({dw})),
      {flat(dw), flat(xType), flat(rowsType), ix, ix, ix, ix, ix},
      gemmWorkgroup(ctx, 1), kGemmThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument> wg) {
        Value Dw = a[0], x = a[1], rows = a[2], G = a[3], M = a[4], ES = a[5], S = a[6],
              D = a[7];
        Value g = blockId(e, gpu::Dimension::z);
        // Per group g: X~[j, :] = sum_m Dw[g, m, j] x[g, m, :] (j = e*S + s).
        GemmHooks h;
        h.kDim = M;
        h.nDim = D;
        h.boundRows(e, ES);
        h.loadA = [&](IRB &e, Value j, Value m) {
          return loadF32(e, Dw, e.addi(e.muli(e.addi(e.muli(g, M), m), ES), j));
        };
        h.bBuf = x;
        h.bVecOk = multipleOf(e, D, kVec);
        h.bIndex = [&](IRB &e, Value m, Value d, int) {
          return e.addi(e.muli(e.addi(e.muli(g, M), m), D), d);
        };
        h.store = [&](IRB &e, Value, Value ar, Value d, ArrayRef<Value> acc) {
          e.ifThen(e.ge(ar, e.ci32(0)), [&](IRB &e) {
            Value row = slotRow(e, e.toIndex(ar), g, G, S);
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
        h.kDim = ES;
        h.nDim = D;
        h.boundRows(e, M);
        h.aBuf = Cw;
        h.aVecOk = multipleOf(e, ES, kVec);
        h.aIndex = [&](IRB &e, Value m, Value j) {
          return e.addi(e.muli(e.addi(e.muli(g, M), m), ES), j);
        };
        h.bBuf = out;
        h.bVecOk = multipleOf(e, D, kVec);
        h.bIndex = [&](IRB &e, Value j, Value d, int) {
          return e.addi(e.muli(slotRow(e, j, g, G, S), D), d);
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

//===----------------------------------------------------------------------===//
// The backward (moe.soft_dispatch_grad, moe.soft_combine_grad; docs/spec.md §9)
//===----------------------------------------------------------------------===//

gpu::GPUFuncOp KernelLibrary::softRowDots(Type aType, Type bType) {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), ix = IndexType::get(ctx);
  return buildKernel(
      gpuModule, "moe_soft_row_dots_kernel" + typeSuffix({aType, bType}),
      {flat(aType), flat(bType), flat(f32), ix, ix, ix, ix, ix}, gemmWorkgroup(ctx, 1),
      kGemmThreads, [&](IRB &e, ValueRange a, ArrayRef<BlockArgument> wg) {
        Value A = a[0], B = a[1], out = a[2], G = a[3], M = a[4], ES = a[5], S = a[6],
              D = a[7];
        Value g = blockId(e, gpu::Dimension::z);
        // Per group g: out[g, m, j] = sum_d A[g, m, d] B[slotRow(j), d].
        GemmHooks h;
        h.kDim = D;
        h.nDim = ES;
        h.boundRows(e, M);
        h.aBuf = A;
        h.aVecOk = multipleOf(e, D, kVec);
        h.aIndex = [&](IRB &e, Value m, Value d) {
          return e.addi(e.muli(e.addi(e.muli(g, M), m), D), d);
        };
        h.loadB = [&](IRB &e, Value d, Value j, int) {
          return loadF32(e, B, e.addi(e.muli(slotRow(e, j, g, G, S), D), d));
        };
        h.store = [&](IRB &e, Value, Value ar, Value j, ArrayRef<Value> acc) {
          e.ifThen(e.ge(ar, e.ci32(0)), [&](IRB &e) {
            Value m = e.toIndex(ar);
            e.store(acc[0], out, e.addi(e.muli(e.addi(e.muli(g, M), m), ES), j));
          });
        };
        buildGemm(e, wg, h);
      });
}

gpu::GPUFuncOp KernelLibrary::softmaxGrad(bool overTokens, bool accumulate) {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), ix = IndexType::get(ctx);
  std::string name = std::string("moe_soft_softmax_grad_kernel_") +
                     (overTokens ? "dispatch" : "combine") + (accumulate ? "_acc" : "");
  return buildKernel(
      gpuModule, name, {flat(f32), flat(f32), flat(f32), ix, ix, ix}, {}, kEltThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
        Value P = a[0], dP = a[1], dL = a[2], G = a[3], M = a[4], ES = a[5];
        Value i = globalThread(e);
        // The dispatch softmax runs over a group's M tokens for each slot
        // (one thread per (g, slot)), the combine softmax over a token's E*S
        // slots (one thread per token).
        Value n = overTokens ? M : ES;
        Value lanes = overTokens ? e.muli(G, ES) : e.muli(G, M);
        e.ifThen(e.ult(i, lanes), [&](IRB &e) {
          auto at = [&](IRB &e, Value q) -> Value {
            if (!overTokens)
              return e.addi(e.muli(i, ES), q);
            Value g = e.divui(i, ES), j = e.remui(i, ES);
            return e.addi(e.muli(e.addi(e.muli(g, M), q), ES), j);
          };
          // dL = P (dP - <P, dP>), the sum in ascending order.
          Value dot = e.forLoop(e.idx(0), n, {e.cf32(0.0)}, [&](IRB &e, Value q, ValueRange s) {
            Value k = at(e, q);
            return SmallVector<Value>{e.addf(s[0], e.mulf(e.load(P, k), e.load(dP, k)))};
          })[0];
          e.forEach(e.idx(0), n, e.idx(1), [&](IRB &e, Value q) {
            Value k = at(e, q);
            Value v = e.mulf(e.load(P, k), e.subf(e.load(dP, k), dot));
            e.store(accumulate ? e.addf(e.load(dL, k), v) : v, dL, k);
          });
        });
      });
}

gpu::GPUFuncOp KernelLibrary::softScaleGrad() {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), ix = IndexType::get(ctx);
  return buildKernel(gpuModule, "moe_soft_scale_grad_kernel",
                     {flat(f32), flat(f32), flat(f32), ix}, {}, 1,
                     [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
                       Value s = e.forLoop(e.idx(0), a[3], {e.cf32(0.0)},
                                           [&](IRB &e, Value i, ValueRange q) {
                                             return SmallVector<Value>{e.addf(
                                                 q[0], e.mulf(e.load(a[0], i), e.load(a[1], i)))};
                                           })[0];
                       e.store(s, a[2], e.idx(0));
                     });
}

gpu::GPUFuncOp KernelLibrary::softLogitsGrad(bool wrtSlots, bool normalize, Type data) {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), ix = IndexType::get(ctx);
  std::string name = std::string("moe_soft_logits_grad_kernel_") + (wrtSlots ? "slots" : "input") +
                     (normalize ? "_normalize" : "") + typeSuffix({data});
  return buildKernel(
      gpuModule, name, {flat(data), flat(f32), flat(f32), flat(f32), ix, ix, ix, f32},
      gemmWorkgroup(ctx, 1), kGemmThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument> wg) {
        Value t = a[0], r = a[1], dL = a[2], out = a[3], GM = a[4], ES = a[5], D = a[6];
        Value scale = a[7];
        // dL0 = scale dL as the operand is loaded; t is x (wrtSlots: dPhin =
        // xn^T dL0, [D, ES], K = GM) or Phi (dXn = dL0 Phin^T, [GM, D], K =
        // ES), normalized by r when `normalize` (docs/spec.md §9).
        auto scaled = [&](IRB &e, Value row, Value j) {
          return e.mulf(e.load(dL, e.addi(e.muli(row, ES), j)), scale);
        };
        GemmHooks h;
        Value rows = wrtSlots ? D : GM;
        h.kDim = wrtSlots ? GM : ES;
        h.nDim = wrtSlots ? ES : D;
        h.boundRows(e, rows);
        if (wrtSlots) {
          h.loadA = [&](IRB &e, Value d, Value gm) {
            Value v = loadF32(e, t, e.addi(e.muli(gm, D), d));
            return normalize ? e.mulf(v, e.load(r, gm)) : v;
          };
          h.loadB = [&](IRB &e, Value gm, Value j, int) { return scaled(e, gm, j); };
        } else {
          h.loadA = [&](IRB &e, Value gm, Value j) { return scaled(e, gm, j); };
          h.loadB = [&](IRB &e, Value j, Value d, int) {
            Value v = loadF32(e, t, e.addi(e.muli(d, ES), j));
            return normalize ? e.mulf(v, e.load(r, j)) : v;
          };
        }
        h.store = [&](IRB &e, Value, Value ar, Value n, ArrayRef<Value> acc) {
          e.ifThen(e.ge(ar, e.ci32(0)), [&](IRB &e) {
            e.store(acc[0], out, e.addi(e.muli(e.toIndex(ar), h.nDim), n));
          });
        };
        buildGemm(e, wg, h);
      });
}

gpu::GPUFuncOp KernelLibrary::softNormGrad(Type data) {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), ix = IndexType::get(ctx);
  return buildKernel(
      gpuModule, "moe_soft_norm_grad_kernel" + typeSuffix({data}),
      {flat(data), flat(f32), flat(f32), ix, ix, ix, ix}, {}, kEltThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
        Value t = a[0], r = a[1], dt = a[2], n = a[3], D = a[4], strideI = a[5], strideD = a[6];
        Value i = globalThread(e);
        // Vector i of t (D elements at i*strideI + d*strideD), tn = t r[i]:
        // dt = r (dtn - tn <tn, dtn>), in place.
        e.ifThen(e.ult(i, n), [&](IRB &e) {
          Value ri = e.load(r, i);
          auto at = [&](IRB &e, Value d) {
            return e.addi(e.muli(i, strideI), e.muli(d, strideD));
          };
          Value dot = e.forLoop(e.idx(0), D, {e.cf32(0.0)}, [&](IRB &e, Value d, ValueRange s) {
            Value k = at(e, d);
            Value tn = e.mulf(loadF32(e, t, k), ri);
            return SmallVector<Value>{e.addf(s[0], e.mulf(tn, e.load(dt, k)))};
          })[0];
          e.forEach(e.idx(0), D, e.idx(1), [&](IRB &e, Value d) {
            Value k = at(e, d);
            Value tn = e.mulf(loadF32(e, t, k), ri);
            e.store(e.mulf(ri, e.subf(e.load(dt, k), e.mulf(tn, dot))), dt, k);
          });
        });
      });
}
