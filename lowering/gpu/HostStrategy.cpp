//===- HostStrategy.cpp - how the host emits the expert GEMMs -------------===//
//
// The strategy members of `Host` (Host.h): the row tile of the grouped GEMMs
// (chooseRowTile, bigTiles, maxTilesFor; forRowTile emits the launches of
// each possible tile), the tensor-core engine of ffn()'s GEMMs (mmaElt) and
// split-K of the fused layer's 16-row GEMMs at decode (splitK), all read
// from the op's #moe.gpu_config and decided by index arithmetic on the host,
// folded when the shapes are static (foldedIndex).
//
//===----------------------------------------------------------------------===//

#include "lowering/gpu/Host.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

std::optional<int64_t> Host::foldedIndex(Value v) {
  if (std::optional<int64_t> c = getConstantIntValue(v))
    return c;
  Operation *op = v.getDefiningOp();
  if (!op || op->getNumOperands() != 2 ||
      !isa<arith::MulIOp, arith::AddIOp, arith::CeilDivUIOp, arith::DivUIOp, arith::MinUIOp,
           arith::MaxUIOp>(op))
    return std::nullopt;
  std::optional<int64_t> l = foldedIndex(op->getOperand(0)), r = foldedIndex(op->getOperand(1));
  if (!l || !r || *l < 0 || *r < 0)
    return std::nullopt;
  uint64_t x = *l, y = *r;
  if (isa<arith::CeilDivUIOp, arith::DivUIOp>(op) && y == 0)
    return std::nullopt;
  return llvm::TypeSwitch<Operation *, int64_t>(op)
      .Case([&](arith::MulIOp) { return x * y; })
      .Case([&](arith::AddIOp) { return x + y; })
      .Case([&](arith::CeilDivUIOp) { return (x + y - 1) / y; })
      .Case([&](arith::DivUIOp) { return x / y; })
      .Case([&](arith::MinUIOp) { return std::min(x, y); })
      .Default([&](Operation *) { return std::max(x, y); });
}

Value Host::chooseRowTile(Value rows, int64_t numExperts, bool big) {
  int64_t bigFrom = std::max(config.getBigTileRows(), kTileM) * numExperts;
  if (std::optional<int64_t> n = foldedIndex(rows))
    return e.idx(*n < kTileM * numExperts ? kSmallTileM
                 : big && *n >= bigFrom   ? kBigTileM
                                          : kTileM);
  Value prefill = e.idx(kTileM);
  if (big)
    prefill = e.select(e.ult(rows, e.idx(bigFrom)), prefill, e.idx(kBigTileM));
  Value small = e.ult(rows, e.idx(kTileM * numExperts));
  return e.select(small, e.idx(kSmallTileM), prefill);
}

bool Host::bigTiles(std::optional<MmaElt> elt, const Experts &x) const {
  return elt && !x.quant && config.usesWgmma() && config.getBigTileRows() > 0;
}

Value Host::maxTilesFor(Value rows, Value tileRows, int64_t numExperts) {
  Value bound = e.addi(e.ceildiv(rows, tileRows), e.idx(numExperts));
  return arith::MaxUIOp::create(b, arith::MinUIOp::create(b, bound, rows), e.idx(1));
}

std::optional<MmaElt> Host::mmaElt(Value A, const Experts &x, Type out, Type y) {
  if (!config.usesTensorCores())
    return std::nullopt;
  Type t = eltOf(A);
  std::optional<MmaElt> elt = mmaEltOf(t);
  // Quantized weights: tensor cores when their blocks or groups along K are
  // whole k-tiles (MmaGemmConfig::quantizedOk), else the CUDA-core GEMMs,
  // which dequantize each weight as they load it.
  if (x.quant) {
    GroupedGemmDesc format;
    format.setQuant(x.quant);
    if (!MmaGemmConfig::quantizedOk(format))
      return std::nullopt;
  }
  if (!elt || (!x.quant && (eltOf(x.w1) != t || eltOf(x.w2) != t)) ||
      (x.b1 && eltOf(x.b1) != t) ||
      (x.b2 && eltOf(x.b2) != t) || (out != t && !out.isF32()) ||
      (y && (y != t || !out.isF32())))
    return std::nullopt;
  return elt;
}

void Host::forRowTile(const Plan &plan, function_ref<void(int64_t)> body) {
  if (std::optional<int64_t> tile = getConstantIntValue(plan.tileRows))
    return body(*tile);
  auto ifOp = scf::IfOp::create(b, e.eq(plan.tileRows, e.idx(kSmallTileM)),
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  body(kSmallTileM);
  b.setInsertionPointToStart(ifOp.elseBlock());
  if (!plan.bigTiles)
    return body(kTileM);
  auto big = scf::IfOp::create(b, e.eq(plan.tileRows, e.idx(kBigTileM)),
                               /*withElseRegion=*/true);
  b.setInsertionPointToStart(big.thenBlock());
  body(kBigTileM);
  b.setInsertionPointToStart(big.elseBlock());
  body(kTileM);
}

int64_t Host::mmaTileN1(Activation act) {
  MmaGemmConfig c;
  c.act = act;
  return c.tileN();
}

Host::SplitK Host::splitK(Value rows, int64_t numExperts, const Experts &x) {
  SplitK sk;
  // Only the 16-row choice matters here: 128-row tiles (big) replace
  // 64-row ones, never 16-row ones.
  sk.tileRows = chooseRowTile(rows, numExperts, /*big=*/false);
  if (std::optional<int64_t> t = getConstantIntValue(sk.tileRows); t && *t != kSmallTileM)
    return sk;
  sk.maxTiles = maxTilesFor(rows, sk.tileRows, numExperts);
  auto choose = [&](Value cols, Value depth) -> Value {
    if (config.getSplitK() > 0)
      return e.idx(config.getSplitK());
    Value tiles = arith::MaxUIOp::create(
        b, arith::MinUIOp::create(b, rows, e.idx(numExperts)), e.idx(1));
    Value S = e.ceildiv(e.idx(kSplitKTargetBlocks), e.muli(cols, tiles));
    Value most = arith::MaxUIOp::create(
        b, e.divui(e.ceildiv(depth, e.idx(kMmaTileK)), e.idx(kSplitKMinTiles)), e.idx(1));
    if (std::optional<int64_t> m = foldedIndex(most); m && *m == 1)
      return e.idx(1); // too shallow to split, whatever T is
    S = arith::MinUIOp::create(b, S, most);
    // A static shape folds S (1: the kernels without split-K).
    if (std::optional<int64_t> folded = foldedIndex(S))
      return e.idx(*folded);
    return S;
  };
  sk.S1 = choose(blocks(x.H, mmaTileN1(x.act)), x.D);
  sk.S2 = choose(blocks(x.D, kMmaTileN), x.H);
  auto one = [](Value S) {
    std::optional<int64_t> s = getConstantIntValue(S);
    return s && *s == 1;
  };
  if (one(sk.S1) && one(sk.S2))
    return SplitK(); // no split: no workspace, no tile counters
  return sk;
}
