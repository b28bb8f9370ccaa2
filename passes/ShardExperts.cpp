//===- ShardExperts.cpp - expert parallelism with the shard dialect -------===//
//
// --moe-shard-experts="ranks=N" (docs/spec.md §8): every moe.layer of a
// function becomes the SPMD program of one rank of a 1-D shard.grid. Expert
// weights are split on the expert dimension, token rows on dimension 0; the
// dispatch and the combine become ragged all-to-all exchanges of token rows
// (moe.exchange_dispatch / moe.exchange_combine), the row counts of all
// ranks are exchanged with shard.all_reduce.
//
//===----------------------------------------------------------------------===//

#include "dialect/MoEOps.h"
#include "dialect/MoESpmdOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/SymbolTable.h"

#include "passes/Passes.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOESHARDEXPERTS
#include "passes/Passes.h.inc"
} // namespace moe
} // namespace mlir

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "moe-shard-experts"

using namespace mlir;
using namespace mlir::moe;

namespace {

constexpr llvm::StringLiteral kGridName("moe_ranks");
constexpr llvm::StringLiteral kSplitAttr("moe.split");

RankedTensorType withDynamicRows(RankedTensorType type) {
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = ShapedType::kDynamic;
  return RankedTensorType::get(shape, type.getElementType());
}

/// "layer #I of @F".
std::string layerName(func::FuncOp func, unsigned index) {
  return "layer #" + std::to_string(index) + " of @" + func.getSymName().str();
}

/// Builds the SPMD form of one layer. `x` is the rank's rows; the expert
/// operands of `layer` are already the rank's slices.
struct LayerBuilder {
  ImplicitLocOpBuilder &b;
  FlatSymbolRefAttr grid;
  int64_t ranks;

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value i32(int64_t v) { return arith::ConstantIntOp::create(b, b.getI32Type(), v); }

  Value allReduceSum(Value v) {
    return shard::AllReduceOp::create(b, v.getType(), grid,
                                      b.getDenseI16ArrayAttr({0}), v,
                                      shard::ReductionKindAttr::get(
                                          b.getContext(), shard::ReductionKind::Sum))
        .getResult();
  }

  /// sum over q of counts[q, e] for q in [lo, hi) (index values), i32.
  Value sumRows(OpBuilder &ob, Location loc, Value counts, Value lo, Value hi,
                Value e) {
    Value zero = arith::ConstantIntOp::create(ob, loc, ob.getI32Type(), 0);
    Value one = arith::ConstantIndexOp::create(ob, loc, 1);
    auto loop = scf::ForOp::create(
        ob, loc, lo, hi, one, ValueRange{zero},
        [&](OpBuilder &lb, Location l, Value q, ValueRange acc) {
          Value v = tensor::ExtractOp::create(lb, l, counts, ValueRange{q, e});
          scf::YieldOp::create(lb, l, ValueRange{arith::AddIOp::create(lb, l, acc[0], v)});
        });
    return loop.getResult(0);
  }

  LogicalResult build(LayerOp layer, Value x, SmallVectorImpl<Value> &results) {
    int64_t numExperts = layer.getNumExperts();
    int64_t local = numExperts / ranks;
    auto xType = cast<RankedTensorType>(x.getType());
    Type elt = xType.getElementType();
    int64_t modelDim = xType.getDimSize(1);
    int64_t k = layer.getRouting().getExpertsPerToken(numExperts);
    Type f32 = b.getF32Type(), i32Type = b.getI32Type(), i64Type = b.getI64Type();
    const int64_t dyn = ShapedType::kDynamic;

    Value rank = shard::ProcessLinearIndexOp::create(b, grid).getResult();
    Value localRows = tensor::DimOp::create(b, x, 0);

    // Rows of every rank: a one-hot [N] i64, summed over the grid.
    Value rowsOneHot = arith::ConstantOp::create(
        b, DenseElementsAttr::get(RankedTensorType::get({ranks}, i64Type),
                                  b.getI64IntegerAttr(0)));
    rowsOneHot = tensor::InsertOp::create(
        b, arith::IndexCastOp::create(b, i64Type, localRows), rowsOneHot,
        ValueRange{rank});
    Value allRows = allReduceSum(rowsOneHot);
    // T (all rows) and t0 (the rows of the ranks before this one: the
    // global index of the rank's first row).
    Value totalRows = arith::ConstantIntOp::create(b, i64Type, 0);
    Value rowOffset = arith::ConstantIntOp::create(b, i64Type, 0);
    for (int64_t q = 0; q < ranks; ++q) {
      Value n = tensor::ExtractOp::create(b, allRows, ValueRange{idx(q)});
      totalRows = arith::AddIOp::create(b, totalRows, n);
      Value before = arith::CmpIOp::create(b, arith::CmpIPredicate::ult, idx(q), rank);
      rowOffset = arith::AddIOp::create(
          b, rowOffset,
          arith::SelectOp::create(b, before, n, arith::ConstantIntOp::create(b, i64Type, 0)));
    }

    // Routing where the token lives.
    auto route = RouteOp::create(b, RankedTensorType::get({dyn, numExperts}, f32),
                                 x, layer.getRouterWeight(), layer.getRouterBias());
    auto gate = GateOp::create(b, route.getLogits(), layer.getSelectionBias(),
                               layer.getSeed(), layer.getRouting(),
                               layer.getTraining());
    Value weights = gate.getWeights(), indices = gate.getIndices();
    if (layer.getRouting().isSampling(layer.getTraining())) {
      // MOESART training draws with the Philox counter (token index, draw):
      // the rank's rows must be gated as rows t0 .. t0 + T_rank - 1. moe.gate
      // numbers its rows from 0, so the rank's logits are placed after t0
      // zero rows and the gate's results for them are sliced out (the
      // padding costs routing work only, O(t0 * E)). The aux loss (no
      // sampling in it) comes from the gate of the rank's own rows.
      Value t0 = arith::IndexCastOp::create(b, b.getIndexType(), rowOffset);
      Value padRows = arith::AddIOp::create(b, t0, localRows);
      Value empty = tensor::EmptyOp::create(b, ArrayRef<int64_t>{dyn, numExperts}, f32,
                                            ValueRange{padRows});
      Value zeros = linalg::FillOp::create(
                        b, ValueRange{arith::ConstantOp::create(b, b.getZeroAttr(f32))},
                        ValueRange{empty})
                        .getResult(0);
      auto one = b.getIndexAttr(1);
      Value padded = tensor::InsertSliceOp::create(
          b, route.getLogits(), zeros, ArrayRef<OpFoldResult>{t0, b.getIndexAttr(0)},
          ArrayRef<OpFoldResult>{localRows, b.getIndexAttr(numExperts)},
          ArrayRef<OpFoldResult>{one, one});
      auto global = GateOp::create(b, padded, layer.getSelectionBias(), layer.getSeed(),
                                   layer.getRouting(), layer.getTraining());
      auto rowsOf = [&](Value v, Type elt) -> Value {
        return tensor::ExtractSliceOp::create(
            b, RankedTensorType::get({dyn, k}, elt), v,
            ArrayRef<OpFoldResult>{t0, b.getIndexAttr(0)},
            ArrayRef<OpFoldResult>{localRows, b.getIndexAttr(k)},
            ArrayRef<OpFoldResult>{one, one});
      };
      weights = rowsOf(global.getWeights(), f32);
      indices = rowsOf(global.getIndices(), i32Type);
    }
    // Dropless local dispatch: rows grouped by expert, so by owner rank.
    auto rowsType = RankedTensorType::get({dyn, modelDim}, elt);
    auto dispatch = DispatchOp::create(
        b, rowsType, RankedTensorType::get({numExperts + 1}, i32Type),
        RankedTensorType::get({dyn}, i32Type),
        RankedTensorType::get({dyn, k}, i32Type), x, indices,
        b.getI64IntegerAttr(numExperts), FloatAttr());
    Value offsets = dispatch.getOffsets();

    // counts[q, e]: rows rank q has for expert e (one-hot row, summed).
    auto countsType = RankedTensorType::get({ranks, numExperts}, i32Type);
    auto localCounts = tensor::GenerateOp::create(
        b, countsType, ValueRange{},
        [&](OpBuilder &gb, Location l, ValueRange ids) {
          Value q = ids[0], e = ids[1];
          Value e1 = arith::AddIOp::create(gb, l, e, arith::ConstantIndexOp::create(gb, l, 1));
          Value n = arith::SubIOp::create(
              gb, l, tensor::ExtractOp::create(gb, l, offsets, ValueRange{e1}),
              tensor::ExtractOp::create(gb, l, offsets, ValueRange{e}));
          Value mine = arith::CmpIOp::create(gb, l, arith::CmpIPredicate::eq, q, rank);
          Value zero = arith::ConstantIntOp::create(gb, l, gb.getI32Type(), 0);
          tensor::YieldOp::create(gb, l, arith::SelectOp::create(gb, l, mine, n, zero).getResult());
        });
    Value counts = allReduceSum(localCounts);

    // A capacity counts assignments in global token order: rank q keeps
    // min(cnt[q, e], max(C - sum_{q' < q} cnt[q', e], 0)) rows of expert e,
    // with C = min(ceil(cf * T * K / E), T * K) for the global T.
    if (std::optional<llvm::APFloat> cf = layer.getCapacityFactor()) {
      Type f64 = b.getF64Type();
      Value tF = arith::SIToFPOp::create(b, f64, totalRows);
      Value c = arith::MulFOp::create(
          b, arith::MulFOp::create(
                 b, arith::ConstantOp::create(b, b.getF64FloatAttr(cf->convertToDouble())),
                 tF),
          arith::ConstantOp::create(b, b.getF64FloatAttr(double(k))));
      c = arith::DivFOp::create(
          b, c, arith::ConstantOp::create(b, b.getF64FloatAttr(double(numExperts))));
      c = math::CeilOp::create(b, c);
      Value assignments = arith::MulFOp::create(
          b, tF, arith::ConstantOp::create(b, b.getF64FloatAttr(double(k))));
      c = arith::MinNumFOp::create(b, c, assignments);
      c = arith::MaxNumFOp::create(b, c,
                                   arith::ConstantOp::create(b, b.getF64FloatAttr(0.0)));
      Value capacity = arith::FPToSIOp::create(b, i32Type, c);
      Value all = counts;
      counts = tensor::GenerateOp::create(
                   b, countsType, ValueRange{},
                   [&](OpBuilder &gb, Location l, ValueRange ids) {
                     Value q = ids[0], e = ids[1];
                     Value before = sumRows(gb, l, all, arith::ConstantIndexOp::create(gb, l, 0), q, e);
                     Value room = arith::MaxSIOp::create(
                         gb, l, arith::SubIOp::create(gb, l, capacity, before),
                         arith::ConstantIntOp::create(gb, l, gb.getI32Type(), 0));
                     Value have = tensor::ExtractOp::create(gb, l, all, ValueRange{q, e});
                     tensor::YieldOp::create(gb, l, arith::MinSIOp::create(gb, l, have, room).getResult());
                   })
                   .getResult();
    }

    // Ragged all-to-all of the token rows to the experts' owners.
    auto recv = ExchangeDispatchOp::create(b, rowsType, dispatch.getRows(), offsets,
                                           counts, grid);
    // The local experts' offsets in the received rows: expert l holds
    // sum_q counts[q, rank*L + l] rows.
    Value firstExpert = arith::MulIOp::create(b, rank, idx(local));
    auto localOffsets = tensor::GenerateOp::create(
        b, RankedTensorType::get({local + 1}, i32Type), ValueRange{},
        [&](OpBuilder &gb, Location l, ValueRange ids) {
          Value zero = arith::ConstantIntOp::create(gb, l, gb.getI32Type(), 0);
          Value one = arith::ConstantIndexOp::create(gb, l, 1);
          Value lo = arith::ConstantIndexOp::create(gb, l, 0);
          Value nRanks = arith::ConstantIndexOp::create(gb, l, ranks);
          auto loop = scf::ForOp::create(
              gb, l, lo, ids[0], one, ValueRange{zero},
              [&](OpBuilder &lb, Location ll, Value le, ValueRange acc) {
                Value e = arith::AddIOp::create(lb, ll, firstExpert, le);
                Value s = sumRows(lb, ll, counts, lo, nRanks, e);
                scf::YieldOp::create(lb, ll, ValueRange{arith::AddIOp::create(lb, ll, acc[0], s)});
              });
          tensor::YieldOp::create(gb, l, loop.getResult(0));
        });
    // bf16/f16: the expert outputs travel back in f32, unrounded, so that
    // each token's sum is rounded once at home, as in the layer.
    auto outRowsType = RankedTensorType::get({dyn, modelDim}, f32);
    auto ffn = ExpertFFNOp::create(b, outRowsType, recv.getResult(), localOffsets,
                                   layer.getW1(), layer.getW2(), Value(), Value(), Value(),
                                   Value(), layer.getB1(), layer.getB2(),
                                   layer.getActivationAttr(), QuantAttr());
    // Back to the tokens' ranks, at their dispatch positions; rows a
    // capacity dropped stay zero (they add +0 to the token's sum).
    Value numDispatched = tensor::DimOp::create(b, dispatch.getRows(), 0);
    Value empty = tensor::EmptyOp::create(b, ArrayRef<int64_t>{dyn, modelDim}, f32,
                                          ValueRange{numDispatched});
    Value zeros =
        linalg::FillOp::create(b, ValueRange{arith::ConstantOp::create(
                                      b, b.getZeroAttr(f32))},
                               ValueRange{empty})
            .getResult(0);
    auto back = ExchangeCombineOp::create(b, outRowsType, ffn.getOutput(), offsets,
                                          counts, zeros, grid);
    Value shared;
    if (layer.getSharedW1())
      shared = SharedExpertOp::create(b, RankedTensorType::get({dyn, modelDim}, f32), x,
                                      layer.getSharedW1(), layer.getSharedW2(),
                                      layer.getSharedGate(), layer.getActivationAttr());
    auto combine = CombineOp::create(b, rowsType, back.getResult(), weights,
                                     dispatch.getPositions(), shared);
    results.push_back(combine.getOutput());

    if (layer.getAuxLoss()) {
      // The gate's loss is a mean over the rank's rows: weight it by the
      // rows, sum over the grid, divide by the global T.
      Value loss = tensor::ExtractOp::create(b, gate.getAuxLoss(), ValueRange{});
      Value rowsF = arith::UIToFPOp::create(
          b, f32, arith::IndexCastOp::create(b, i64Type, localRows));
      Value part = tensor::FromElementsOp::create(
          b, RankedTensorType::get({}, f32),
          ValueRange{arith::MulFOp::create(b, loss, rowsF)});
      Value sum = tensor::ExtractOp::create(b, allReduceSum(part), ValueRange{});
      Value mean = arith::DivFOp::create(b, sum,
                                         arith::SIToFPOp::create(b, f32, totalRows));
      results.push_back(tensor::FromElementsOp::create(
          b, RankedTensorType::get({}, f32), ValueRange{mean}));
    }
    return success();
  }
};

struct MoEShardExpertsPass
    : public moe::impl::MoEShardExpertsBase<MoEShardExpertsPass> {
  using Base::Base;

  LogicalResult shardFunction(func::FuncOp func, FlatSymbolRefAttr grid);

  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << getArgument() << " on "
                            << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    if (failed(rejectQuantizedLayers(getOperation(), "--moe-shard-experts")))
      return signalPassFailure();
    ModuleOp module = getOperation();
    if (ranks < 1) {
      module.emitError() << "--moe-shard-experts: option 'ranks' must be >= 1, got "
                         << static_cast<int64_t>(ranks);
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> funcs;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && !func.getOps<LayerOp>().empty())
        funcs.push_back(func);
    // Layers outside a function body (nested regions) are not partitioned.
    WalkResult nested = module.walk([&](Operation *op) {
      if (isa<SoftLayerOp>(op)) {
        op->emitError() << "'moe.soft_layer' cannot be made expert-parallel by "
                           "--moe-shard-experts (Soft MoE mixes tokens of a group)";
        return WalkResult::interrupt();
      }
      if (auto layer = dyn_cast<LayerOp>(op))
        if (!isa<func::FuncOp>(layer->getParentOp())) {
          op->emitError() << "'moe.layer' inside '" << layer->getParentOp()->getName()
                          << "': --moe-shard-experts partitions layers at the top "
                             "level of a function only";
          return WalkResult::interrupt();
        }
      return WalkResult::advance();
    });
    if (nested.wasInterrupted())
      return signalPassFailure();
    if (funcs.empty())
      return;

    // One grid for the module.
    FlatSymbolRefAttr grid = FlatSymbolRefAttr::get(&getContext(), kGridName);
    if (Operation *existing = SymbolTable::lookupSymbolIn(module, kGridName)) {
      auto gridOp = dyn_cast<shard::GridOp>(existing);
      if (!gridOp || gridOp.getShape() != ArrayRef<int64_t>{ranks}) {
        existing->emitError() << "symbol @" << kGridName
                              << " exists and is not shard.grid of shape " << static_cast<int64_t>(ranks);
        return signalPassFailure();
      }
    } else {
      OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
      shard::GridOp::create(builder, module.getLoc(), kGridName,
                            ArrayRef<int64_t>{ranks});
    }
    for (func::FuncOp func : funcs)
      if (failed(shardFunction(func, grid)))
        return signalPassFailure();
  }
};

LogicalResult MoEShardExpertsPass::shardFunction(func::FuncOp func,
                                                 FlatSymbolRefAttr grid) {
  Block &body = func.getBody().front();
  SmallVector<LayerOp> layers(func.getOps<LayerOp>());
  DenseSet<Value> expertArgs;
  // Check every layer first, so a failure leaves the function unchanged.
  for (auto [index, layer] : llvm::enumerate(layers)) {
    std::string name = layerName(func, index);
    int64_t numExperts = layer.getNumExperts();
    if (ShapedType::isDynamic(numExperts))
      return layer.emitError() << name << ": the number of experts is dynamic; "
                                          "--moe-shard-experts needs it to split experts";
    if (numExperts % ranks != 0)
      return layer.emitError() << name << ": E = " << numExperts
                               << " experts cannot be split over " << static_cast<int64_t>(ranks)
                               << " ranks (E % N != 0)";
    for (Value w : {layer.getW1(), layer.getW2(), layer.getB1(), layer.getB2()}) {
      if (!w)
        continue;
      auto arg = dyn_cast<BlockArgument>(w);
      if (!arg || arg.getOwner() != &body)
        return layer.emitError()
               << name << ": expert weights must be function arguments to be "
                          "split over the ranks";
      expertArgs.insert(w);
    }
  }
  // Expert arguments are used as expert weights only.
  for (Value arg : expertArgs)
    for (Operation *user : arg.getUsers()) {
      auto layer = dyn_cast<LayerOp>(user);
      if (!layer ||
          llvm::any_of(layer->getOpOperands(), [&](OpOperand &use) {
            return use.get() == arg &&
                   !llvm::is_contained(
                       ValueRange{layer.getW1(), layer.getW2()}, arg) &&
                   use.get() != layer.getB1() && use.get() != layer.getB2();
          }))
        return user->emitError() << "argument #" << cast<BlockArgument>(arg).getArgNumber()
                                 << " of @" << func.getSymName()
                                 << " is an expert weight split over the ranks; it "
                                    "cannot also be used by '"
                                 << user->getName() << "'";
    }
  // Token rows: layer inputs and outputs. Row-split values may feed layers
  // (as input) and the return only.
  DenseSet<Value> rowValues;
  for (LayerOp layer : layers) {
    rowValues.insert(layer.getInput());
    rowValues.insert(layer.getOutput());
  }
  for (Value v : rowValues) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() != &body)
        return func.emitError() << "token rows of a layer must be a function "
                                   "argument or another layer's output";
    } else if (!isa<LayerOp>(v.getDefiningOp())) {
      return v.getDefiningOp()->emitError()
             << "'" << v.getDefiningOp()->getName()
             << "' produces a layer's token rows; --moe-shard-experts splits rows "
                "that come from a function argument or a layer only";
    }
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (isa<func::ReturnOp>(user))
        continue;
      if (auto layer = dyn_cast<LayerOp>(user); layer && use.get() == layer.getInput() &&
                                                 use.getOperandNumber() == 0)
        continue;
      return user->emitError() << "'" << user->getName()
                               << "' uses token rows that --moe-shard-experts "
                                  "splits over the ranks; only moe.layer inputs "
                                  "and the return may";
    }
  }

  // Arguments: new types and moe.split.
  OpBuilder attrBuilder(func.getContext());
  for (BlockArgument arg : body.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      continue;
    if (expertArgs.contains(arg)) {
      SmallVector<int64_t> shape(type.getShape());
      shape[0] /= ranks;
      arg.setType(RankedTensorType::get(shape, type.getElementType()));
    } else if (rowValues.contains(arg)) {
      arg.setType(withDynamicRows(type));
    } else {
      continue;
    }
    func.setArgAttr(arg.getArgNumber(), kSplitAttr, attrBuilder.getI64IntegerAttr(0));
  }

  // Layers, in order (each input is an argument or an earlier layer).
  for (LayerOp layer : layers) {
    ImplicitLocOpBuilder b(layer.getLoc(), layer);
    LayerBuilder lb{b, grid, ranks};
    SmallVector<Value> results;
    if (failed(lb.build(layer, layer.getInput(), results)))
      return failure();
    layer->replaceAllUsesWith(results);
    layer->erase();
  }

  // Results: row-split values get dynamic rows and moe.split.
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  SmallVector<Type> resultTypes(ret.getOperandTypes());
  func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                 resultTypes));
  for (auto [i, type] : llvm::enumerate(resultTypes)) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (tensor && tensor.getRank() == 2 && tensor.isDynamicDim(0) &&
        ret.getOperand(i).getDefiningOp<CombineOp>())
      func.setResultAttr(i, kSplitAttr, attrBuilder.getI64IntegerAttr(0));
  }
  return success();
}

} // namespace
