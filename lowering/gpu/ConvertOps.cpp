//===- ConvertOps.cpp - the moe ops -> GPU host code, op by op ------------===//
//
// The per-op conversions of convert-moe-to-gpu: each moe op (layers, chain
// ops, fused ops; soft MoE) becomes the host code of `Host` (Host.h) that
// uploads its operands, runs its kernels and downloads its results, which
// replace the op's. convertMoEOp dispatches on the op.
//
//===----------------------------------------------------------------------===//

#include "lowering/gpu/Host.h"
#include "lowering/GroupedGemm.h"
#include "lowering/Philox.h"
#include "lowering/RoutingBuilder.h"
#include "runtime/IndexErrors.h"

#include "dialect/MoEOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

namespace {

int64_t staticExperts(Value w1) { return cast<RankedTensorType>(w1.getType()).getDimSize(0); }

Value zeroLoss(Host &h, Type type) {
  auto tt = cast<RankedTensorType>(type);
  return arith::ConstantOp::create(
      h.b, DenseElementsAttr::get(tt, h.b.getFloatAttr(tt.getElementType(), 0.0)));
}

/// The expert weights of moe.layer, moe.expert_ffn or moe.fused_experts on
/// the device, with their quantization (scales and zero points), if any.
template <typename OpT>
Host::Experts expertsOf(Host &h, OpT op) {
  return h.experts(op.getW1(), op.getW2(), op.getB1(), op.getB2(), op.getActivationAttr(),
                   op.getQuantAttr(), op.getW1Scale(), op.getW2Scale(), op.getW1ZeroPoint(),
                   op.getW2ZeroPoint());
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
  Host::Experts ex = expertsOf(h, op);
  Value sb = op.getSelectionBias() ? h.upload(op.getSelectionBias()) : Value();
  // Router + gate in one launch, align (+ the aux loss), GEMM1, GEMM2 with
  // the combine: 4 launches. A shared expert is folded into them (its gate
  // in the gate kernel, its tiles in the GEMMs; the kernels select between
  // its buffers and the experts', which have one element type: the op's
  // verifier).
  Host::FusedRouter router{x, wr, br, D};
  std::optional<Host::SharedExpertFold> sharedFold;
  Value sharedOut;
  if (op.getSharedW1() && ex.quant) {
    // Quantized routed experts and a float shared expert cannot share a
    // launch: the shared expert runs in launches of its own (its gate
    // too), and its f32 output is the combine's first term, as folded.
    sharedOut = h.sharedExpert(x, T, D, op.getSharedW1(), op.getSharedW2(),
                               op.getSharedGate(), op.getActivationAttr());
  } else if (op.getSharedW1()) {
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
                           /*shared=*/sharedOut, g.partials ? &g : nullptr,
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
  Host::Experts ex = expertsOf(h, op);
  Value err = h.checkIndices ? h.errorWord() : Value();
  Type outElt = eltOf(op.getOutput());
  Host::Plan plan = h.tileMap(offsets, N, numExperts, err,
                              h.bigTiles(h.mmaElt(rows, ex, outElt, Type()), ex));
  Value out = h.alloc(outElt, h.e.muli(N, ex.D));
  // Rows from offsets[E] on are zero.
  h.zero(out);
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
  Host::Experts ex = expertsOf(h, op);
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
                              h.bigTiles(h.mmaElt(f.rows, ex, h.e.f32(), Type()), ex));
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
// The backward ops (docs/spec.md §9): f32 cotangents in, f32 gradients out.
//===----------------------------------------------------------------------===//

LogicalResult convert(RouteGradOp op, Host &h) {
  Value T = h.dim(op.getInput(), 0), D = h.dim(op.getInput(), 1);
  Value E = h.dim(op.getRouterWeight(), 1);
  Value x = h.upload(op.getInput()), wr = h.upload(op.getRouterWeight());
  Value dlogits = h.upload(op.getLogitsGrad());
  Type f32 = h.e.f32();
  // All T rows as one group: dx = do Wr^T (Wr read transposed), dWr = x^T
  // do with dbr, the column sums of do, as its row of ones.
  Value offsets = h.oneGroup(T);
  Host::Plan plan = h.tileMap(offsets, T, /*numExperts=*/1);
  Value dx = h.alloc(f32, h.e.muli(T, D));
  GroupedGemmDesc dxDesc;
  dxDesc.bTransposed = true;
  dxDesc.aType = f32;
  dxDesc.bType = eltOf(wr);
  dxDesc.cType = f32;
  h.launch(h.lib.backwardGemm(dxDesc), {h.blocks(D, kTileN), plan.maxTiles}, kGemmThreads,
           {dlogits, plan.sorted, plan.tileExpert, plan.numTiles, wr, wr, dx, h.dummyF32(), E, D,
            plan.tileRows});
  Value dwr = h.alloc(f32, h.e.muli(D, E)), dbr = h.alloc(f32, E);
  h.launch(h.lib.weightGradGemm(expertWeightGradient(false, eltOf(x), f32, f32), true),
           {h.blocks(E, kTileN), h.blocks(h.e.addi(D, h.e.idx(1)), kTileM), h.e.idx(1)},
           kGemmThreads, {x, offsets, dlogits, dwr, dbr, D, E, T});
  SmallVector<Value> results{h.download(dx, op.getInputGrad().getType(), {T, D}),
                             h.download(dwr, op.getRouterWeightGrad().getType(), {D, E}),
                             h.download(dbr, op.getRouterBiasGrad().getType(), {E})};
  h.releaseAll();
  op->replaceAllUsesWith(results);
  return success();
}

LogicalResult convert(GateGradOp op, Host &h) {
  int64_t k = op.getIndices().getType().getDimSize(1);
  if (ShapedType::isDynamic(k))
    return op.emitError("cannot lower to the GPU: the number of experts per token is dynamic");
  Value T = h.dim(op.getLogits(), 0), E = h.dim(op.getLogits(), 1);
  RoutingAttrInterface routing = op.getRouting();
  // The routing variant of the forward gate (the CPU path's mapping); the
  // selection bias and the groups only choose.
  TokenRoutingKind kind = TokenRoutingKind::get(routing, op.getTraining(), false);
  kind.loss = kind.loss && op.getAuxLossGrad();
  using Mode = TokenRoutingKind::Mode;
  Value key0 = h.e.ci32(0), key1 = h.e.ci32(0);
  if (kind.mode == Mode::MoesartTraining && op.getSeed()) {
    // The key is read on the host before the op's GPU work (Host::start).
    OpBuilder::InsertionGuard guard(h.b);
    h.b.setInsertionPoint(h.start);
    std::tie(key0, key1) = buildPhiloxKey(h.b, h.hostScalar(op.getSeed()));
  }
  // The aux loss's cotangent stays on the device (the kernel reads it).
  Value aux = kind.loss ? h.upload(op.getAuxLossGrad()) : h.dummyF32();
  Value lambda = h.e.cf32(kind.loss ? routing.getRegularizerCoefficient() : 0.0);
  auto topk = dyn_cast<TopKRoutingAttr>(routing);
  Value scale = h.e.cf32(kind.production ? topk.getScale().convertToDouble() : 1.0);
  Value logits = h.upload(op.getLogits()), indices = h.upload(op.getIndices());
  Value dw = h.upload(op.getWeightsGrad());
  Value dlogits = h.alloc(h.e.f32(), h.e.muli(T, E));
  h.launch(h.lib.gateGrad(kind, eltOf(logits)), {h.blocks(T, kGateThreads)}, kGateThreads,
           {logits, indices, dw, dlogits, T, E, h.e.idx(k), key0, key1, aux, lambda, scale});
  Value r = h.download(dlogits, op.getLogitsGrad().getType(), {T, E});
  h.releaseAll();
  op->replaceAllUsesWith(ValueRange{r});
  return success();
}

LogicalResult convert(DispatchGradOp op, Host &h) {
  Value T = h.dim(op.getPositions(), 0), K = h.dim(op.getPositions(), 1);
  Value N = h.dim(op.getRowsGrad(), 0), D = h.dim(op.getRowsGrad(), 1);
  Value drows = h.upload(op.getRowsGrad()), pos = h.upload(op.getPositions());
  Value dx = h.alloc(h.e.f32(), h.e.muli(T, D));
  // dx[t] = the token's rows summed in slot order: the reduce kernel.
  SmallVector<Value> args{drows, pos, dx, T, K, D};
  Value err = h.checkIndices ? h.errorWord() : Value();
  if (err)
    args.append({N, err});
  h.launch(h.lib.reduce(false, eltOf(drows), eltOf(dx), err != nullptr),
           {h.blocks(h.e.muli(T, D), kEltThreads)}, kEltThreads, args);
  Value r = h.download(dx, op.getInputGrad().getType(), {T, D});
  if (err)
    h.reportIndexError(err, h.e.idx(1), /*numExperts=*/0);
  h.releaseAll();
  op->replaceAllUsesWith(ValueRange{r});
  return success();
}

LogicalResult convert(ExpertFFNGradOp op, Host &h) {
  int64_t numExperts = staticExperts(op.getW1());
  if (ShapedType::isDynamic(numExperts))
    return op.emitError("cannot lower to the GPU: the number of experts is dynamic");
  Value N = h.dim(op.getRows(), 0);
  Value rows = h.upload(op.getRows()), offsets = h.upload(op.getOffsets());
  Value dout = h.upload(op.getOutputGrad());
  Host::Experts ex = h.experts(op.getW1(), op.getW2(), op.getB1(), op.getB2(),
                               op.getActivationAttr());
  Value err = h.checkIndices ? h.errorWord() : Value();
  Host::Plan plan = h.tileMap(offsets, N, numExperts, err);
  Type f32 = h.e.f32();
  Value E = h.e.idx(numExperts), W = h.dim(op.getW1(), 2);
  Host::FFNGrads g;
  g.drows = h.alloc(f32, h.e.muli(N, ex.D));
  // Rows from offsets[E] on are zero.
  h.zero(g.drows);
  g.dw1 = h.alloc(f32, h.e.muli(E, h.e.muli(ex.D, W)));
  g.dw2 = h.alloc(f32, h.e.muli(E, h.e.muli(ex.H, ex.D)));
  if (op.getB1()) {
    g.db1 = h.alloc(f32, h.e.muli(E, W));
    g.db2 = h.alloc(f32, h.e.muli(E, ex.D));
  }
  h.ffnBackward(rows, offsets, plan, ex, numExperts, dout, N, g);
  SmallVector<Value> results{h.download(g.drows, op.getRowsGrad().getType(), {N, ex.D}),
                             h.download(g.dw1, op.getW1Grad().getType(), {E, ex.D, W}),
                             h.download(g.dw2, op.getW2Grad().getType(), {E, ex.H, ex.D})};
  if (g.db1) {
    results.push_back(h.download(g.db1, op.getB1Grad().getType(), {E, W}));
    results.push_back(h.download(g.db2, op.getB2Grad().getType(), {E, ex.D}));
  }
  if (err)
    h.reportIndexError(err, h.e.idx(1), numExperts);
  h.releaseAll();
  op->replaceAllUsesWith(results);
  return success();
}

LogicalResult convert(CombineGradOp op, Host &h) {
  Value T = h.dim(op.getWeights(), 0), K = h.dim(op.getWeights(), 1);
  Value N = h.dim(op.getExpertOutput(), 0), D = h.dim(op.getExpertOutput(), 1);
  Value dy = h.upload(op.getOutputGrad()), out = h.upload(op.getExpertOutput());
  Value w = h.upload(op.getWeights()), pos = h.upload(op.getPositions());
  Type f32 = h.e.f32();
  Value dout = h.alloc(f32, h.e.muli(N, D)), dw = h.alloc(f32, h.e.muli(T, K));
  // Rows no kept assignment names are zero.
  h.zero(dout);
  SmallVector<Value> args{dy, out, w, pos, dout, dw, T, K, D, N};
  Value err = h.checkIndices ? h.errorWord() : Value();
  if (err)
    args.push_back(err);
  h.launch(h.lib.combineGrad(eltOf(out), eltOf(w), err != nullptr), {h.e.muli(T, K)},
           kCombineGradThreads, args);
  SmallVector<Value> results{h.download(dout, op.getExpertOutputGrad().getType(), {N, D}),
                             h.download(dw, op.getWeightsGrad().getType(), {T, K})};
  if (err)
    h.reportIndexError(err, h.e.idx(1), /*numExperts=*/0);
  h.releaseAll();
  op->replaceAllUsesWith(results);
  return success();
}

LogicalResult convert(SharedExpertGradOp op, Host &h) {
  Value T = h.dim(op.getInput(), 0), D = h.dim(op.getInput(), 1);
  Value x = h.upload(op.getInput()), dout = h.upload(op.getOutputGrad());
  Value s1 = op.getSharedW1(), s2 = op.getSharedW2();
  Host::Experts ex = h.sharedWeights(s1, s2, D, op.getActivationAttr());
  Type f32 = h.e.f32();
  // One group of all T rows (the CPU path's singleGroup).
  Value offsets = h.oneGroup(T);
  Host::Plan plan = h.tileMap(offsets, T, /*numExperts=*/1);
  Value scaled = dout, dO, sg;
  if (op.getSharedGate()) {
    // The gate's backward needs f(x), the ungated output, recomputed with
    // the forward's kernels.
    sg = h.upload(op.getSharedGate());
    Value logits = h.route(x, sg, Value(), T, D, h.e.idx(1));
    // The backward's plan serves unless the forward runs the wgmma tiles.
    bool big = h.bigTiles(h.mmaElt(x, ex, f32, Type()), ex);
    Host::Plan forward =
        big ? h.tileMap(offsets, T, /*numExperts=*/1, /*err=*/{}, /*big=*/true) : plan;
    Value fx = h.alloc(f32, h.e.muli(T, D));
    h.ffn(x, /*gather=*/false, forward, ex, fx);
    scaled = h.alloc(f32, h.e.muli(T, D));
    dO = h.alloc(f32, T);
    h.launch(h.lib.sharedGateGrad(), {h.blocks(T, kEltThreads)}, kEltThreads,
             {dout, fx, logits, scaled, dO, T, D});
  }
  Value W = h.dim(s1, 1);
  Host::FFNGrads g;
  g.drows = h.alloc(f32, h.e.muli(T, D)); // every row is a token
  g.dw1 = h.alloc(f32, h.e.muli(D, W));
  g.dw2 = h.alloc(f32, h.e.muli(ex.H, D));
  h.ffnBackward(x, offsets, plan, ex, /*numExperts=*/1, scaled, T, g);
  Value dsg;
  if (sg) {
    // dsg = x^T dO (one group, D x 1), then dx += dO sg^T.
    dsg = h.alloc(f32, D);
    h.launch(h.lib.weightGradGemm(expertWeightGradient(false, eltOf(x), f32, f32), false),
             {h.e.idx(1), h.blocks(D, kTileM), h.e.idx(1)}, kGemmThreads,
             {x, offsets, dO, dsg, h.dummyF32(), D, h.e.idx(1), T});
    h.launch(h.lib.sharedGateInputGrad(eltOf(sg)), {h.blocks(h.e.muli(T, D), kEltThreads)},
             kEltThreads, {g.drows, dO, sg, T, D});
  }
  SmallVector<Value> results{h.download(g.drows, op.getInputGrad().getType(), {T, D}),
                             h.download(g.dw1, op.getSharedW1Grad().getType(), {D, W}),
                             h.download(g.dw2, op.getSharedW2Grad().getType(), {ex.H, D})};
  if (dsg)
    results.push_back(h.download(dsg, op.getSharedGateGrad().getType(), {D, h.e.idx(1)}));
  h.releaseAll();
  op->replaceAllUsesWith(results);
  return success();
}

LogicalResult convert(SoftCombineGradOp op, Host &h) {
  Value cwT = op.getCombineWeights();
  Value G = h.dim(cwT, 0), M = h.dim(cwT, 1), S = h.dim(cwT, 3);
  Value ES = h.e.muli(h.dim(cwT, 2), S), D = h.dim(op.getExpertOutput(), 1);
  Value dy = h.upload(op.getOutputGrad()), out = h.upload(op.getExpertOutput());
  Value cw = h.upload(cwT);
  Type f32 = h.e.f32();
  // dOut[slot row] = sum_m Cw[g, m, j] dy[g, m]: the slot kernel with Cw for
  // the dispatch weights and dy for the tokens.
  Value dOut = h.alloc(f32, h.e.muli(h.e.muli(ES, G), D));
  h.launch(h.lib.softSlots(f32, f32, eltOf(cw)), {h.blocks(D, kTileN), h.blocks(ES, kTileM), G},
           kGemmThreads, {cw, dy, dOut, G, M, ES, S, D});
  // dCw[g, m, j] = <dy[g, m], out[slot row]>.
  Value dCw = h.alloc(f32, h.e.muli(h.e.muli(G, M), ES));
  h.launch(h.lib.softRowDots(f32, eltOf(out)), {h.blocks(ES, kTileN), h.blocks(M, kTileM), G},
           kGemmThreads, {dy, out, dCw, G, M, ES, S, D});
  SmallVector<Value> results{
      h.download(dOut, op.getExpertOutputGrad().getType(), {h.e.muli(ES, G), D}),
      h.download(dCw, op.getCombineWeightsGrad().getType(), {G, M, h.dim(cwT, 2), S})};
  h.releaseAll();
  op->replaceAllUsesWith(results);
  return success();
}

LogicalResult convert(SoftDispatchGradOp op, Host &h) {
  Value xT = op.getInput(), phiT = op.getSlots();
  Value G = h.dim(xT, 0), M = h.dim(xT, 1), D = h.dim(xT, 2);
  Value E = h.dim(phiT, 1), S = h.dim(phiT, 2), ES = h.e.muli(E, S);
  Value GM = h.e.muli(G, M), n = h.e.muli(GM, ES);
  bool normalize = op.getNormalize();
  Type f32 = h.e.f32();
  Value x = h.upload(xT), phi = h.upload(phiT);
  // The forward's logits and softmaxes, recomputed by its kernels: L0 (the
  // scale's gradient needs it), L = scale L0, Dw, Cw.
  Value rx = h.dummyF32(), rphi = h.dummyF32();
  if (normalize) {
    rx = h.alloc(f32, GM);
    rphi = h.alloc(f32, ES);
    h.launch(h.lib.softNorms(eltOf(x)), {h.blocks(h.e.addi(GM, ES), kEltThreads)}, kEltThreads,
             {x, phi, rx, rphi, GM, ES, D});
  }
  Value scale = h.e.cf32(1.0);
  if (op.getScale()) {
    OpBuilder::InsertionGuard guard(h.b);
    h.b.setInsertionPoint(h.start); // read before the op's GPU work
    scale = h.hostScalar(op.getScale());
    if (!scale.getType().isF32())
      scale = arith::ExtFOp::create(h.b, f32, scale);
  }
  auto logits = [&](Value s) {
    Value L = h.alloc(f32, n);
    h.launch(h.lib.softLogits(normalize, eltOf(x)), {h.blocks(ES, kTileN), h.blocks(GM, kTileM)},
             kGemmThreads, {x, phi, rx, rphi, L, GM, ES, D, s});
    return L;
  };
  Value L0 = logits(h.e.cf32(1.0));
  Value L = op.getScale() ? logits(scale) : L0;
  Value Dw = h.alloc(f32, n), Cw = h.alloc(f32, n);
  h.launch(h.lib.softDispatchWeights(), {h.blocks(h.e.muli(G, ES), kEltThreads)}, kEltThreads,
           {L, Dw, G, M, ES});
  h.launch(h.lib.softCombineWeights(f32), {h.blocks(GM, kEltThreads)}, kEltThreads,
           {L, Cw, G, M, ES});
  // dL from the two softmaxes (the dispatch's first, then += the combine's).
  Value dL = h.alloc(f32, n), direct;
  if (Value dRowsT = op.getRowsGrad()) {
    Value dRows = h.upload(dRowsT);
    Value dDw = h.alloc(f32, n);
    h.launch(h.lib.softRowDots(eltOf(x), f32), {h.blocks(ES, kTileN), h.blocks(M, kTileM), G},
             kGemmThreads, {x, dRows, dDw, G, M, ES, S, D});
    h.launch(h.lib.softmaxGrad(/*overTokens=*/true, /*accumulate=*/false),
             {h.blocks(h.e.muli(G, ES), kEltThreads)}, kEltThreads, {Dw, dDw, dL, G, M, ES});
    // The slot averages' own term: dx[g, m] = sum_j Dw[g, m, j] dRows[slot row].
    direct = h.alloc(f32, h.e.muli(GM, D));
    h.launch(h.lib.softCombine(f32, f32, f32), {h.blocks(D, kTileN), h.blocks(M, kTileM), G},
             kGemmThreads, {Dw, dRows, direct, G, M, ES, S, D});
  }
  if (Value dCwT = op.getCombineWeightsGrad())
    h.launch(h.lib.softmaxGrad(/*overTokens=*/false, /*accumulate=*/op.getRowsGrad() != nullptr),
             {h.blocks(GM, kEltThreads)}, kEltThreads, {Cw, h.upload(dCwT), dL, G, M, ES});
  if (!op.getRowsGrad() && !op.getCombineWeightsGrad())
    h.zero(dL);
  Value dScale;
  if (op.getScale()) {
    dScale = h.alloc(f32, h.e.idx(1));
    h.launch(h.lib.softScaleGrad(), {h.e.idx(1)}, 1, {dL, L0, dScale, n});
  }
  // Through the logits' product (dL0 = scale dL), then the normalizations.
  Value dx = h.alloc(f32, h.e.muli(GM, D)), dphi = h.alloc(f32, h.e.muli(D, ES));
  h.launch(h.lib.softLogitsGrad(/*wrtSlots=*/false, normalize, eltOf(phi)),
           {h.blocks(D, kTileN), h.blocks(GM, kTileM)}, kGemmThreads,
           {phi, rphi, dL, dx, GM, ES, D, scale});
  h.launch(h.lib.softLogitsGrad(/*wrtSlots=*/true, normalize, eltOf(x)),
           {h.blocks(ES, kTileN), h.blocks(D, kTileM)}, kGemmThreads,
           {x, rx, dL, dphi, GM, ES, D, scale});
  if (normalize) {
    h.launch(h.lib.softNormGrad(eltOf(x)), {h.blocks(GM, kEltThreads)}, kEltThreads,
             {x, rx, dx, GM, D, D, h.e.idx(1)});
    h.launch(h.lib.softNormGrad(eltOf(phi)), {h.blocks(ES, kEltThreads)}, kEltThreads,
             {phi, rphi, dphi, ES, D, h.e.idx(1), ES});
  }
  if (direct) {
    auto add = [](IRB &e, Value, ValueRange v) { return SmallVector<Value>{e.addf(v[0], v[1])}; };
    h.launch(h.lib.elementwise("moe_soft_add_kernel", {f32, f32}, {f32}, add),
             {h.blocks(h.e.muli(GM, D), kEltThreads)}, kEltThreads,
             {direct, dx, dx, h.e.muli(GM, D)});
  }
  SmallVector<Value> results{h.download(dx, op.getInputGrad().getType(), {G, M, D}),
                             h.download(dphi, op.getSlotsGrad().getType(), {D, E, S})};
  if (dScale)
    results.push_back(h.download(dScale, op.getScaleGrad().getType()));
  h.releaseAll();
  op->replaceAllUsesWith(results);
  return success();
}

} // namespace

LogicalResult gpu_lowering::convertMoEOp(Operation *op, Host &h) {
  // The int8-activation mode (docs/spec.md §2.1) has CPU kernels only.
  if (auto quant = op->getAttrOfType<QuantAttr>("quant"); quant && quant.getInt8Activations())
    return op->emitError("cannot lower to the GPU: #moe.quant's int8_activations mode has "
                         "CPU kernels only (the GPU runs int4 weight-only)");
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<LayerOp, RouteOp, GateOp, DispatchOp, ExpertFFNOp, SharedExpertOp, CombineOp,
            FusedExpertsOp, SoftDispatchOp, SoftCombineOp, RouteGradOp, GateGradOp,
            DispatchGradOp, ExpertFFNGradOp, CombineGradOp, SharedExpertGradOp,
            SoftDispatchGradOp, SoftCombineGradOp>(
          [&](auto concrete) { return convert(concrete, h); })
      .Case<SoftLayerOp, FusedSoftExpertsOp>(
          [&](auto concrete) { return convertSoftLayer(concrete, h); })
      .Default([&](Operation *op) -> LogicalResult {
        return op->emitError("no GPU lowering for this moe op");
      });
}
