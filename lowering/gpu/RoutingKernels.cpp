//===- RoutingKernels.cpp - routing kernels ---------------------------------===//
//
// KernelLibrary's routing kernels (Kernels.h): the router logits GEMM, the
// gate (softmax, top-k, MOESART sampling, the production routers) from the
// one routing definition (lowering/RoutingBuilder.h), the loss reduction.
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
        h.kDim = D;
        h.nDim = E;
        h.boundRows(e, T);
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

/// The name of the routing variant `kind` in its kernels' names ("topk",
/// "moesart_train_small_random", "topk_sigmoid_nonorm_grouped", ...).
static std::string routingVariantName(const TokenRoutingKind &kind) {
  using Mode = TokenRoutingKind::Mode;
  std::string name;
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
  assert((!kind.production || kind.mode == Mode::TopK) && "production routers are top_k");
  if (kind.production) {
    name += "_" + stringifyRouterScore(kind.score).str();
    if (!kind.normalize)
      name += "_nonorm";
    if (kind.grouped)
      name += "_grouped";
    if (kind.selectionBias)
      name += "_bias";
  }
  return name;
}

gpu::GPUFuncOp KernelLibrary::gate(const TokenRoutingKind &kind, Type biasType, bool router,
                                   bool routerBias, Type routerData, bool sharedGate) {
  using Mode = TokenRoutingKind::Mode;
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), i32 = IntegerType::get(ctx, 32), ix = IndexType::get(ctx);
  std::string name = "moe_gate_kernel_" + routingVariantName(kind);
  const bool production = kind.production, loss = kind.loss;
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

gpu::GPUFuncOp KernelLibrary::gateGrad(const TokenRoutingKind &kind, Type logitsType) {
  using Mode = TokenRoutingKind::Mode;
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), i32 = IntegerType::get(ctx, 32), ix = IndexType::get(ctx);
  // The selection bias and the groups only choose: the backward of a
  // production router does not depend on them.
  TokenRoutingKind variant = kind;
  variant.selectionBias = variant.grouped = false;
  std::string name = "moe_gate_grad_kernel_" + routingVariantName(variant) +
                     (kind.loss ? "_loss" : "") + typeSuffix({logitsType});
  SmallVector<Type> args{flat(logitsType), flat(i32), flat(f32), flat(f32), ix, ix, ix,
                         i32,              i32,       flat(f32), f32,       f32};
  return buildKernel(
      gpuModule, name, args, {}, kGateThreads,
      [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
        Value logits = a[0], indices = a[1], dw = a[2], out = a[3], T = a[4], E = a[5];
        Value K = a[6];
        Value t = e.addi(e.muli(blockId(e, gpu::Dimension::x), e.idx(kGateThreads)),
                         threadId(e));
        e.ifThen(e.ult(t, T), [&](IRB &e) {
          TokenRoutingValues values;
          values.experts = E;
          values.k = K;
          values.token = e.toI32(t);
          if (kind.production)
            values.scale = a[11];
          if (kind.mode == Mode::MoesartTraining) {
            values.key0 = a[7];
            values.key1 = a[8];
          }
          if (kind.loss) // lambda / T times the aux loss's cotangent
            values.lossGrad = e.divf(e.mulf(e.load(a[9], e.idx(0)), a[10]), e.toF32(T));
          // Built with the builder each callback gets (it may be inside a
          // region buildTokenRoutingGrad opened); the buffers are flat.
          auto load = [&](ImplicitLocOpBuilder &b, Value buf, Value width, Value col) {
            IRB ie(b);
            return ie.load(buf, ie.addi(ie.muli(t, width), col));
          };
          auto store = [&](ImplicitLocOpBuilder &b, Value v, Value buf, Value width, Value col) {
            IRB ie(b);
            ie.store(v, buf, ie.addi(ie.muli(t, width), col));
          };
          buildTokenRoutingGrad(e.b, kind, values, TokenRowAccess{load, store}, logits, indices,
                                dw, out);
        });
      });
}
