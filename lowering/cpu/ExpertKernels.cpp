//===- ExpertKernels.cpp - CPU strategy for the expert GEMMs --------------===//

#include "lowering/cpu/ExpertKernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cpu;

namespace {

Value cIdx(ImplicitLocOpBuilder &b, int64_t v) { return arith::ConstantIndexOp::create(b, v); }

VectorType f32Vec(ImplicitLocOpBuilder &b) { return VectorType::get({kLanes}, b.getF32Type()); }

Value minIdx(ImplicitLocOpBuilder &b, Value x, Value y) { return arith::MinSIOp::create(b, x, y); }

Value ceilDiv(ImplicitLocOpBuilder &b, Value x, int64_t d) {
  return arith::CeilDivSIOp::create(b, x, cIdx(b, d));
}

Value loadIndex(ImplicitLocOpBuilder &b, Value memref, ValueRange indices) {
  Value v = memref::LoadOp::create(b, memref, indices);
  return arith::IndexCastOp::create(b, b.getIndexType(), v);
}

/// The indices of B[group][k][col] for a rank-3 (per group) or rank-2 B.
SmallVector<Value> bIndices(Value bMemref, Value group, Value k, Value col) {
  if (cast<MemRefType>(bMemref.getType()).getRank() == 3)
    return {group, k, col};
  return {k, col};
}

/// One micro-tile: rows [row0, row0 + kMicroRows) clamped to `rowEnd`,
/// output columns [col0, col0 + 16 * vecs).
void emitMicroTile(ImplicitLocOpBuilder &b, const GroupedGemm &g, Value group, Value row0,
                   Value rowEnd, Value col0, GemmEpilogue epilogue) {
  const int64_t outVecs = g.gated ? kMicroVecs / 2 : kMicroVecs;
  VectorType vt = f32Vec(b);

  // Rows: plan row r_i (clamped to an existing row for the tail) and the row
  // of A it reads.
  SmallVector<Value> rows, aRows, rowValid;
  for (int64_t i = 0; i < kMicroRows; ++i) {
    Value r = arith::AddIOp::create(b, row0, cIdx(b, i));
    Value valid = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, r, rowEnd);
    Value clamped = arith::SelectOp::create(b, valid, r, row0);
    rows.push_back(r);
    rowValid.push_back(valid);
    aRows.push_back(g.aRowMap ? loadIndex(b, g.aRowMap, {clamped}) : clamped);
  }
  // Columns of B read by every accumulator vector, and their masks.
  SmallVector<Value> outCols, bCols, masks;
  for (int64_t v = 0; v < outVecs; ++v) {
    Value c = arith::AddIOp::create(b, col0, cIdx(b, v * kLanes));
    outCols.push_back(c);
    masks.push_back(columnMask(b, c, g.columns));
  }
  for (int64_t v = 0; v < outVecs; ++v)
    bCols.push_back(outCols[v]);
  if (g.gated)
    for (int64_t v = 0; v < outVecs; ++v)
      bCols.push_back(arith::AddIOp::create(b, outCols[v], g.columns));

  // The reduction: every accumulator in a register.
  Value zero = arith::ConstantOp::create(b, vt, DenseElementsAttr::get(vt, 0.0f));
  SmallVector<Value> init(kMicroRows * kMicroVecs, zero);
  auto loop = scf::ForOp::create(
      b, cIdx(b, 0), g.reduction, cIdx(b, 1), init,
      [&](OpBuilder &nested, Location loc, Value k, ValueRange acc) {
        ImplicitLocOpBuilder nb(loc, nested);
        SmallVector<Value> bVecs;
        for (int64_t v = 0; v < kMicroVecs; ++v)
          bVecs.push_back(loadF32Vector(nb, g.b, bIndices(g.b, group, k, bCols[v]),
                                        masks[v % outVecs]));
        SmallVector<Value> next;
        for (int64_t i = 0; i < kMicroRows; ++i) {
          Value aScalar = toF32(nb, memref::LoadOp::create(nb, g.a, ValueRange{aRows[i], k}));
          Value aVec = vector::BroadcastOp::create(nb, vt, aScalar);
          for (int64_t v = 0; v < kMicroVecs; ++v)
            next.push_back(vector::FMAOp::create(nb, aVec, bVecs[v], acc[i * kMicroVecs + v]));
        }
        scf::YieldOp::create(nb, next);
      });

  // Epilogues of the rows that exist.
  for (int64_t i = 0; i < kMicroRows; ++i) {
    scf::IfOp::create(b, rowValid[i], [&](OpBuilder &nested, Location loc) {
      ImplicitLocOpBuilder nb(loc, nested);
      for (int64_t v = 0; v < outVecs; ++v) {
        Value acc = loop.getResult(i * kMicroVecs + v);
        Value accUp = g.gated ? loop.getResult(i * kMicroVecs + outVecs + v) : Value();
        epilogue(nb, group, rows[i], outCols[v], masks[v], acc, accUp);
      }
      scf::YieldOp::create(nb);
    });
  }
}

} // namespace

Value cpu::activate(ImplicitLocOpBuilder &b, Activation act, Value x) {
  Type type = x.getType();
  auto c = [&](double v) -> Value {
    auto f = b.getF32FloatAttr(static_cast<float>(v));
    if (auto vt = dyn_cast<VectorType>(type))
      return arith::ConstantOp::create(b, vt, DenseElementsAttr::get(vt, f.getValue()));
    return arith::ConstantOp::create(b, f);
  };
  auto mul = [&](Value p, Value q) -> Value { return arith::MulFOp::create(b, p, q); };
  auto add = [&](Value p, Value q) -> Value { return arith::AddFOp::create(b, p, q); };
  switch (act) {
  case Activation::relu:
    return arith::MaximumFOp::create(b, x, c(0.0));
  case Activation::silu:
  case Activation::swiglu:
    return arith::DivFOp::create(
        b, x, add(c(1.0), math::ExpOp::create(b, arith::NegFOp::create(b, x))));
  case Activation::gelu:
  case Activation::geglu: {
    Value erf = math::ErfOp::create(b, mul(x, c(M_SQRT1_2)));
    return mul(mul(c(0.5), x), add(c(1.0), erf));
  }
  case Activation::gelu_tanh: {
    Value x3 = mul(mul(x, x), x);
    Value inner = mul(c(std::sqrt(2.0 / M_PI)), add(x, mul(c(0.044715), x3)));
    return mul(mul(c(0.5), x), add(c(1.0), math::TanhOp::create(b, inner)));
  }
  }
  llvm_unreachable("unknown activation");
}

Value cpu::toF32(ImplicitLocOpBuilder &b, Value scalar) {
  if (scalar.getType().isF32())
    return scalar;
  return arith::ExtFOp::create(b, b.getF32Type(), scalar);
}

Value cpu::columnMask(ImplicitLocOpBuilder &b, Value col, Value limit) {
  Value remaining = arith::SubIOp::create(b, limit, col);
  return vector::CreateMaskOp::create(b, VectorType::get({kLanes}, b.getI1Type()),
                                      ValueRange{remaining});
}

Value cpu::loadF32Vector(ImplicitLocOpBuilder &b, Value memref, ValueRange indices,
                         Value mask) {
  Type elt = cast<MemRefType>(memref.getType()).getElementType();
  auto vt = VectorType::get({kLanes}, elt);
  Value pass = arith::ConstantOp::create(b, vt, DenseElementsAttr::get(vt, b.getZeroAttr(elt)));
  Value v = vector::MaskedLoadOp::create(b, vt, memref, indices, mask, pass);
  if (elt.isF32())
    return v;
  return arith::ExtFOp::create(b, f32Vec(b), v);
}

void cpu::storeVector(ImplicitLocOpBuilder &b, Value v, Value memref, ValueRange indices,
                      Value mask) {
  Type elt = cast<MemRefType>(memref.getType()).getElementType();
  if (!elt.isF32())
    v = arith::TruncFOp::create(b, VectorType::get({kLanes}, elt), v);
  vector::MaskedStoreOp::create(b, memref, indices, mask, v);
}

void cpu::emitGroupedGemm(ImplicitLocOpBuilder &b, const GroupedGemm &g,
                          GemmEpilogue epilogue) {
  const int64_t outVecs = g.gated ? kMicroVecs / 2 : kMicroVecs;
  const int64_t tileCols = outVecs * kLanes;
  static_assert(kColBlock % (kMicroVecs * kLanes) == 0, "column block of whole tiles");
  static_assert(kRowBlock % kMicroRows == 0, "row block of whole tiles");

  // The largest group bounds the row blocks of the iteration space.
  Value maxRows;
  if (g.groupOffsets) {
    auto scan = scf::ForOp::create(
        b, cIdx(b, 0), cIdx(b, g.numGroups), cIdx(b, 1), ValueRange{cIdx(b, 0)},
        [&](OpBuilder &nested, Location loc, Value grp, ValueRange acc) {
          ImplicitLocOpBuilder nb(loc, nested);
          Value begin = loadIndex(nb, g.groupOffsets, {grp});
          Value end = loadIndex(nb, g.groupOffsets,
                                {arith::AddIOp::create(nb, grp, cIdx(nb, 1))});
          Value n = arith::SubIOp::create(nb, end, begin);
          scf::YieldOp::create(nb, ValueRange{arith::MaxSIOp::create(nb, acc[0], n)});
        });
    maxRows = scan.getResult(0);
  } else {
    maxRows = g.numRows;
  }
  Value rowBlocks = ceilDiv(b, maxRows, kRowBlock);
  Value colBlocks = ceilDiv(b, g.columns, kColBlock);

  // Work items (group, column block, row block): row blocks innermost, so
  // that consecutive items share one column slab of B in the cache.
  scf::ParallelOp::create(
      b, ValueRange{cIdx(b, 0), cIdx(b, 0), cIdx(b, 0)},
      ValueRange{cIdx(b, g.numGroups), colBlocks, rowBlocks},
      ValueRange{cIdx(b, 1), cIdx(b, 1), cIdx(b, 1)},
      [&](OpBuilder &nested, Location loc, ValueRange ivs) {
        ImplicitLocOpBuilder nb(loc, nested);
        Value group = ivs[0], cb = ivs[1], rb = ivs[2];
        Value groupBegin = g.groupOffsets ? loadIndex(nb, g.groupOffsets, {group}) : cIdx(nb, 0);
        Value groupEnd =
            g.groupOffsets
                ? loadIndex(nb, g.groupOffsets, {arith::AddIOp::create(nb, group, cIdx(nb, 1))})
                : g.numRows;
        Value rowBegin = arith::AddIOp::create(
            nb, groupBegin, arith::MulIOp::create(nb, rb, cIdx(nb, kRowBlock)));
        Value rowEnd =
            minIdx(nb, groupEnd, arith::AddIOp::create(nb, rowBegin, cIdx(nb, kRowBlock)));
        Value colBegin = arith::MulIOp::create(nb, cb, cIdx(nb, kColBlock));
        Value colEnd =
            minIdx(nb, g.columns, arith::AddIOp::create(nb, colBegin, cIdx(nb, kColBlock)));
        Value hasRows = arith::CmpIOp::create(nb, arith::CmpIPredicate::slt, rowBegin, rowEnd);
        scf::IfOp::create(nb, hasRows, [&](OpBuilder &ifBuilder, Location loc) {
          ImplicitLocOpBuilder ib(loc, ifBuilder);
          scf::ForOp::create(
              ib, colBegin, colEnd, cIdx(ib, tileCols), ValueRange{},
              [&](OpBuilder &colBuilder, Location loc, Value col0, ValueRange) {
                ImplicitLocOpBuilder cb2(loc, colBuilder);
                scf::ForOp::create(
                    cb2, rowBegin, rowEnd, cIdx(cb2, kMicroRows), ValueRange{},
                    [&](OpBuilder &rowBuilder, Location loc, Value row0, ValueRange) {
                      ImplicitLocOpBuilder rb2(loc, rowBuilder);
                      emitMicroTile(rb2, g, group, row0, rowEnd, col0, epilogue);
                      scf::YieldOp::create(rb2);
                    });
                scf::YieldOp::create(cb2);
              });
          scf::YieldOp::create(ib);
        });
        // scf.parallel's body ends in scf.reduce, which the builder adds.
      });
}
