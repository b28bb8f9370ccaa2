//===- ExpertKernels.cpp - CPU strategy for the expert GEMMs --------------===//

#include "lowering/cpu/ExpertKernels.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/xxhash.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/X86TargetParser.h"

#include <cmath>
#include <functional>
#include <limits>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::cpu;

namespace {

Value cIdx(ImplicitLocOpBuilder &b, int64_t v) { return arith::ConstantIndexOp::create(b, v); }

VectorType f32Vec(ImplicitLocOpBuilder &b, int64_t lanes) {
  return VectorType::get({lanes}, b.getF32Type());
}

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

/// Prefetches row `row + distance` of a packed panel (`rowElements`
/// elements), one prefetch per 64-byte cache line; nothing for distance 0.
/// A prefetch past the end of the panel is harmless.
void prefetchPanelRow(ImplicitLocOpBuilder &b, Value packed, Value group, Value panel,
                      Value row, int64_t distance, int64_t rowElements) {
  if (distance <= 0)
    return;
  int64_t bytes = cast<MemRefType>(packed.getType()).getElementTypeBitWidth() / 8;
  int64_t lineElements = 64 / bytes;
  Value ahead = arith::AddIOp::create(b, row, cIdx(b, distance));
  for (int64_t e = 0; e < rowElements; e += lineElements)
    memref::PrefetchOp::create(b, packed, ValueRange{group, panel, ahead, cIdx(b, e)},
                               /*isWrite=*/false, /*localityHint=*/3, /*isDataCache=*/true);
}

/// The 32 bits of A from (row, k) (two bf16 or four i8 elements) in every
/// one of `lanes` 32-bit lanes: the left operand of a dot product that
/// multiplies a 32-bit group of A by every lane of B.
Value broadcastWordOfA(ImplicitLocOpBuilder &b, Value a, Value row, Value k, int64_t lanes) {
  Type elt = cast<MemRefType>(a.getType()).getElementType();
  auto partType = VectorType::get({32 / int64_t(elt.getIntOrFloatBitWidth())}, elt);
  Value part = vector::LoadOp::create(b, partType, a, ValueRange{row, k});
  Value one = vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()), part);
  Value word = vector::ExtractOp::create(b, one, ArrayRef<int64_t>{0});
  return vector::BroadcastOp::create(b, VectorType::get({lanes}, b.getI32Type()), word);
}

/// The bf16 pair (A[row, k], A[row, k + 1]) of a bf16 A, or with `single`
/// (an odd K's last row) (A[row, k], 0), in every one of `lanes` 32-bit
/// lanes (vector<2 lanes x bf16>): the left operand of the AVX512_BF16 dot
/// product for a pair of k.
Value bf16PairVector(ImplicitLocOpBuilder &b, Value a, Value row, Value k, bool single,
                     int64_t lanes) {
  Value words;
  if (single) {
    Value x = memref::LoadOp::create(b, a, ValueRange{row, k});
    Value word =
        arith::ExtUIOp::create(b, b.getI32Type(), arith::BitcastOp::create(b, b.getI16Type(), x));
    words = vector::BroadcastOp::create(b, VectorType::get({lanes}, b.getI32Type()), word);
  } else {
    words = broadcastWordOfA(b, a, row, k, lanes);
  }
  return vector::BitCastOp::create(b, VectorType::get({2 * lanes}, b.getBF16Type()), words);
}

/// One pair of k on the AVX512_BF16 dot product: each row's pair of A
/// (bf16PairVector at k, or (a_k, 0) with `single`) times every vector of B
/// pairs in `bPairs`, one vdpbf16ps each, added to the sums `part` (the
/// micro-tile's aRows.size() x bPairs.size() accumulators).
SmallVector<Value> dotPairRows(ImplicitLocOpBuilder &b, const GroupedGemm &g,
                               ArrayRef<Value> aRows, Value k, bool single,
                               ArrayRef<Value> bPairs, ValueRange part) {
  const int64_t lanes = g.config.getLanes();
  const int64_t vecs = bPairs.size();
  VectorType vt = f32Vec(b, lanes);
  SmallVector<Value> next(part.begin(), part.end());
  for (size_t i = 0; i < aRows.size(); ++i) {
    Value aPair = bf16PairVector(b, g.a, aRows[i], k, single, lanes);
    for (int64_t v = 0; v < vecs; ++v) {
      Value &p = next[i * vecs + v];
      p = x86vector::DotBF16Op::create(b, vt, p, aPair, bPairs[v]);
    }
  }
  return next;
}

/// A[row, k] extended to f32 and broadcast to `lanes` lanes. A bf16 element
/// is broadcast as 16-bit words and shifted into the high half of each
/// 32-bit lane (bf16 -> f32 is exactly that shift): one broadcast load and
/// one shift (vpbroadcastw + vpslld), where the scalar extension would take
/// a load, a shift, a move and a broadcast per row and k.
Value broadcastF32(ImplicitLocOpBuilder &b, Value a, Value row, Value k, int64_t lanes) {
  Value x = memref::LoadOp::create(b, a, ValueRange{row, k});
  if (!x.getType().isBF16())
    return vector::BroadcastOp::create(b, f32Vec(b, lanes), toF32(b, x));
  Value bits = arith::BitcastOp::create(b, b.getI16Type(), x);
  Value words = vector::BroadcastOp::create(
      b, VectorType::get({2 * lanes}, b.getI16Type()), bits);
  auto i32Vec = VectorType::get({lanes}, b.getI32Type());
  Value pairs = vector::BitCastOp::create(b, i32Vec, words);
  Value sixteen = arith::ConstantOp::create(
      b, i32Vec, DenseElementsAttr::get(i32Vec, b.getI32IntegerAttr(16).getValue()));
  return vector::BitCastOp::create(b, f32Vec(b, lanes),
                                   arith::ShLIOp::create(b, pairs, sixteen));
}

/// The epilogue of the accumulator vector (row, col..col+L-1) (`accUp`:
/// the up half of a gated GEMM): its operands loaded under `mask`, the
/// description's epilogue (buildEpilogue), the store rounded to C's type.
void emitEpilogue(ImplicitLocOpBuilder &b, const GroupedGemm &g, Value group, Value row,
                  Value col, Value mask, Value acc, Value accUp) {
  const GemmEpilogue &ep = g.desc.epilogue;
  if (ep.has(EpilogueStep::activationGrad)) {
    // C holds z (gated: the up half N columns on) and receives dZ in place:
    // each element is this micro-tile's alone.
    Value z = loadF32Vector(b, g.c, {row, col}, mask);
    Value upCol = ep.gatedGrad() ? arith::AddIOp::create(b, col, g.columns).getResult() : Value();
    Value zUp = upCol ? loadF32Vector(b, g.c, {row, upCol}, mask) : Value();
    ActivationGradValues out = buildActivationGradEpilogue(b, ep, acc, z, zUp);
    storeVector(b, out.dz, g.c, {row, col}, mask);
    if (upCol)
      storeVector(b, out.dzUp, g.c, {row, upCol}, mask);
    storeVector(b, out.h, g.activationOut, {row, col}, mask);
    return;
  }
  EpilogueValues in;
  in.acc = acc;
  in.accUp = accUp;
  if (ep.has(EpilogueStep::bias)) {
    bool perGroup = g.desc.weights != GemmWeights::shared; // one bias per group
    auto biasAt = [&](Value c) {
      return perGroup ? loadF32Vector(b, g.bias, {group, c}, mask)
                      : loadF32Vector(b, g.bias, {c}, mask);
    };
    in.bias = biasAt(col);
    if (accUp)
      in.biasUp = biasAt(arith::AddIOp::create(b, col, g.columns));
  }
  if (ep.has(EpilogueStep::routedWeight))
    in.weight = toF32(b, memref::LoadOp::create(b, g.rowWeights, row));
  Value v = buildEpilogue(b, ep, in);
  if (g.desc.weightGradient() && g.biasGradient) {
    // The last row of the tile space is the fused bias gradient.
    Value last = arith::SubIOp::create(b, g.numRows, cIdx(b, 1));
    Value isBias = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, row, last);
    scf::IfOp::create(
        b, isBias,
        [&](OpBuilder &nested, Location loc) {
          ImplicitLocOpBuilder nb(loc, nested);
          storeVector(nb, v, g.biasGradient, {group, col}, mask);
          scf::YieldOp::create(nb);
        },
        [&](OpBuilder &nested, Location loc) {
          ImplicitLocOpBuilder nb(loc, nested);
          storeVector(nb, v, g.c, {group, row, col}, mask);
          scf::YieldOp::create(nb);
        });
  } else if (g.desc.weightGradient())
    storeVector(b, v, g.c, {group, row, col}, mask);
  else
    storeVector(b, v, g.c, {row, col}, mask);
}

/// FP8 E4M3 codes (vector<L x f8E4M3FN>) as f32 values times `scale`
/// (vector<L x f32>), exactly as docs/spec.md §2.1 defines them
/// (buildFp8Value), q * s rounded once to f32.
Value dequantizeFp8(ImplicitLocOpBuilder &b, Value codes, Value scale) {
  return arith::MulFOp::create(b, buildFp8Value(b, codes), scale);
}

/// FP8 E4M3 codes (vector<L x f8E4M3FN>) as the f32 values q * 2^-8, in
/// three integer steps and one conversion: the code sign-extended to i16
/// and shifted left by 7 holds the sign in bit 15, a copy of it in bit 14
/// and the 7 magnitude bits below: clearing bit 14 leaves the f16 of
/// q * 2^-8 (vpmovsxbw, vpsllw, vpand, vcvtph2ps). The NaN code gives the
/// finite 1.875 * 2^0: the packed panel scales carry NaN for it
/// (declarePackedScales).
Value fp8TimesTwoToMinus8(ImplicitLocOpBuilder &b, Value codes) {
  int64_t lanes = cast<VectorType>(codes.getType()).getDimSize(0);
  auto i8v = VectorType::get({lanes}, b.getI8Type());
  auto i16v = VectorType::get({lanes}, b.getI16Type());
  auto f16v = VectorType::get({lanes}, b.getF16Type());
  auto splat = [&](int64_t c) -> Value {
    return arith::ConstantOp::create(
        b, i16v, DenseElementsAttr::get(i16v, b.getIntegerAttr(b.getI16Type(), c)));
  };
  Value x = arith::ExtSIOp::create(b, i16v, arith::BitcastOp::create(b, i8v, codes));
  Value bits = arith::AndIOp::create(b, arith::ShLIOp::create(b, x, splat(7)), splat(0xBFFF));
  Value half = arith::BitcastOp::create(b, f16v, bits);
  return arith::ExtFOp::create(b, f32Vec(b, lanes), half);
}

/// The scales of B's vector (k, col..col+L-1) of an FP8 block-scaled GEMM:
/// s[group][k / blockK][n / blockN] per lane n, one broadcast load when
/// the vector lies in one block (fp8VectorScale). Columns past B's last
/// (masked or zero-padded lanes) read the last block's scale.
Value fp8ScaleVector(ImplicitLocOpBuilder &b, const GroupedGemm &g, Value group, Value k,
                     Value col, int64_t lanes) {
  Value kb = arith::DivUIOp::create(b, k, cIdx(b, g.desc.blockK));
  Value lastBlock =
      arith::SubIOp::create(b, memref::DimOp::create(b, g.bScales, 2), cIdx(b, 1));
  auto blockOf = [&](Value n) {
    return minIdx(b, arith::DivUIOp::create(b, n, cIdx(b, g.desc.blockN)), lastBlock);
  };
  VectorType vt = f32Vec(b, lanes);
  if (g.fp8VectorScale)
    return vector::BroadcastOp::create(
        b, vt, memref::LoadOp::create(b, g.bScales, ValueRange{group, kb, blockOf(col)}));
  Value v = arith::ConstantOp::create(b, vt, DenseElementsAttr::get(vt, 1.0f));
  for (int64_t l = 0; l < lanes; ++l) {
    Value n = arith::AddIOp::create(b, col, cIdx(b, l));
    Value s = memref::LoadOp::create(b, g.bScales, ValueRange{group, kb, blockOf(n)});
    v = vector::InsertOp::create(b, s, v, ArrayRef<int64_t>{l});
  }
  return v;
}

/// B's vector (k, col..col+L-1) as f32, zero where `mask` is off: one masked
/// load of a row, or with a transposed B ([.., N, K]) L scalar loads down a
/// column (the masked lanes read column `col`, which exists, and give 0).
Value loadBVector(ImplicitLocOpBuilder &b, const GroupedGemm &g, Value group, Value k,
                  Value col, Value mask) {
  if (g.desc.format == WeightFormat::int4Group) {
    // Per lane: the code (an i4 element occupies a byte, so no vector
    // load), minus its zero point (8 without them), times the scale
    // (contiguous along N: one masked load), rounded once. Masked lanes
    // give 0.
    int64_t lanes = cast<VectorType>(mask.getType()).getDimSize(0);
    VectorType vt = f32Vec(b, lanes);
    Value kb = arith::DivUIOp::create(b, k, cIdx(b, g.desc.blockK));
    Value zeroVec = arith::ConstantOp::create(b, vt, DenseElementsAttr::get(vt, 0.0f));
    Value scale = vector::MaskedLoadOp::create(b, vt, g.bScales, ValueRange{group, kb, col},
                                               mask, zeroVec);
    Value diff = zeroVec;
    Value eight = arith::ConstantOp::create(b, b.getF32FloatAttr(8.0f));
    auto codeAt = [&](Value m, ValueRange idx) -> Value {
      Value q = arith::ExtUIOp::create(b, b.getI32Type(), memref::LoadOp::create(b, m, idx));
      return arith::SIToFPOp::create(b, b.getF32Type(), q);
    };
    for (int64_t l = 0; l < lanes; ++l) {
      Value on = vector::ExtractOp::create(b, mask, ArrayRef<int64_t>{l});
      Value n = arith::SelectOp::create(b, on, arith::AddIOp::create(b, col, cIdx(b, l)), col);
      Value q = codeAt(g.b, bIndices(g.b, group, k, n));
      Value z = g.bZeroPoints ? codeAt(g.bZeroPoints, ValueRange{group, kb, n}) : eight;
      diff = vector::InsertOp::create(b, arith::SubFOp::create(b, q, z), diff,
                                      ArrayRef<int64_t>{l});
    }
    return arith::MulFOp::create(b, diff, scale);
  }
  if (g.desc.format == WeightFormat::fp8Block) {
    // Masked lanes read the code 0 (the value 0).
    int64_t lanes = cast<VectorType>(mask.getType()).getDimSize(0);
    Type elt = cast<MemRefType>(g.b.getType()).getElementType();
    auto vt = VectorType::get({lanes}, elt);
    Value zero = arith::ConstantOp::create(b, vt, DenseElementsAttr::get(vt, b.getZeroAttr(elt)));
    Value codes = vector::MaskedLoadOp::create(b, vt, g.b, bIndices(g.b, group, k, col), mask, zero);
    return dequantizeFp8(b, codes, fp8ScaleVector(b, g, group, k, col, lanes));
  }
  if (!g.desc.bTransposed)
    return loadF32Vector(b, g.b, bIndices(g.b, group, k, col), mask);
  int64_t lanes = cast<VectorType>(mask.getType()).getDimSize(0);
  VectorType vt = f32Vec(b, lanes);
  Value v = arith::ConstantOp::create(b, vt, DenseElementsAttr::get(vt, 0.0f));
  Value zero = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0f));
  for (int64_t l = 0; l < lanes; ++l) {
    Value on = vector::ExtractOp::create(b, mask, ArrayRef<int64_t>{l});
    Value n = arith::SelectOp::create(b, on, arith::AddIOp::create(b, col, cIdx(b, l)), col);
    Value x = toF32(b, memref::LoadOp::create(b, g.b, bIndices(g.b, group, n, k)));
    Value lane = arith::SelectOp::create(b, on, x, zero);
    v = vector::InsertOp::create(b, lane, v, ArrayRef<int64_t>{l});
  }
  return v;
}

/// The left operand of an AMX GEMM as its tiles read it (emitGroupedGemm
/// builds it once per call): memref<parts x (N + 16) x 2P x bf16>, plan row
/// r of A (through the row map, if any) at row r, zero-padded to 2P
/// columns (P = amxPairs) and by 16 zero rows (a tile at the last rows
/// reads them). A bf16 A is copied (parts = 1); an f32 A (the backward's
/// cotangents) is split into three bf16 parts, hi + mid + lo = a exactly
/// (8 + 8 + 8 significant bits; an infinity or a NaN goes whole into hi),
/// so that every product of the three tile products is exact, as on the
/// FMA path.
Value emitAmxPackA(ImplicitLocOpBuilder &b, const GroupedGemm &g) {
  Type bf16 = b.getBF16Type();
  Type aElt = cast<MemRefType>(g.a.getType()).getElementType();
  const bool split = aElt.isF32();
  const int64_t parts = split ? 3 : 1, width = 2 * g.amxPairs;
  Value planRows = g.aRowMap ? memref::DimOp::create(b, g.aRowMap, 0).getResult()
                             : memref::DimOp::create(b, g.a, 0).getResult();
  Value padded = arith::AddIOp::create(b, planRows, cIdx(b, 16));
  auto type = MemRefType::get({parts, ShapedType::kDynamic, width}, bf16);
  Value packed = memref::AllocOp::create(b, type, ValueRange{padded}, IntegerAttr());
  Value k = memref::DimOp::create(b, g.a, 1);
  scf::ParallelOp::create(
      b, ValueRange{cIdx(b, 0)}, ValueRange{padded}, ValueRange{cIdx(b, 1)},
      [&](OpBuilder &nested, Location loc, ValueRange ivs) {
        ImplicitLocOpBuilder nb(loc, nested);
        Value r = ivs[0];
        Value real = arith::CmpIOp::create(nb, arith::CmpIPredicate::slt, r, planRows);
        Value clamped = arith::SelectOp::create(nb, real, r, cIdx(nb, 0));
        Value src = g.aRowMap ? loadIndex(nb, g.aRowMap, {clamped}) : clamped;
        // Chunks of 32 columns (the last one shorter), zero past K and in
        // the padding rows.
        for (int64_t c0 = 0; c0 < width; c0 += 32) {
          const int64_t n = std::min<int64_t>(32, width - c0);
          auto readType = VectorType::get({n}, aElt);
          auto rowType = VectorType::get({n}, bf16);
          Value col = cIdx(nb, c0);
          Value count = arith::SelectOp::create(
              nb, real, minIdx(nb, cIdx(nb, n), arith::MaxSIOp::create(
                                                    nb, arith::SubIOp::create(nb, k, col),
                                                    cIdx(nb, 0))),
              cIdx(nb, 0));
          Value mask = vector::CreateMaskOp::create(nb, VectorType::get({n}, nb.getI1Type()),
                                                    ValueRange{count});
          Value zero = arith::ConstantOp::create(
              nb, readType, DenseElementsAttr::get(readType, nb.getZeroAttr(aElt)));
          Value v = vector::MaskedLoadOp::create(nb, readType, g.a, ValueRange{src, col}, mask,
                                                 zero);
          SmallVector<Value> pieces;
          if (!split) {
            pieces.push_back(v);
          } else {
            auto wide = [&](Value x) { return arith::ExtFOp::create(nb, readType, x).getResult(); };
            Value inf = arith::ConstantOp::create(
                nb, readType,
                DenseElementsAttr::get(readType, nb.getF32FloatAttr(
                                                     std::numeric_limits<float>::infinity())));
            Value finite = arith::CmpFOp::create(nb, arith::CmpFPredicate::OLT,
                                                 math::AbsFOp::create(nb, v), inf);
            Value hi = arith::TruncFOp::create(nb, rowType, v);
            Value r1 = arith::SelectOp::create(nb, finite,
                                               arith::SubFOp::create(nb, v, wide(hi)), zero);
            Value mid = arith::TruncFOp::create(nb, rowType, r1);
            Value lo =
                arith::TruncFOp::create(nb, rowType, arith::SubFOp::create(nb, r1, wide(mid)));
            pieces = {hi, mid, lo};
          }
          for (int64_t p = 0; p < parts; ++p)
            vector::StoreOp::create(nb, pieces[p], packed, ValueRange{cIdx(nb, p), r, col});
        }
      });
  return packed;
}

/// The AMX products of one micro-tile: 16 plan rows from row0 (rows past
/// the tile's are computed and not stored) times `vecs` tiles of 16 columns
/// of the pairwise panel, over the whole reduction: A's tiles loaded from
/// g.amxA (emitAmxPackA), B's straight from the panel (row stride 2 x the
/// panel width). The C tiles stay in tile registers across the reduction
/// and are stored once into a 16 x (16 vecs) buffer; returns `tileRows` x
/// vecs vectors of 16 f32 from it, the accumulators of the FMA path.
SmallVector<Value> emitAmxProducts(ImplicitLocOpBuilder &b, const GroupedGemm &g, Value group,
                                   Value panel, Value row0, int64_t tileRows, int64_t vecs) {
  const int64_t pairs = g.amxPairs, full = pairs / 16, tailPairs = pairs % 16;
  const int64_t panelStride = 2 * vecs * 16;
  const int64_t parts = cast<MemRefType>(g.amxA.getType()).getDimSize(0);
  Type bf16 = b.getBF16Type(), f32 = b.getF32Type();
  auto cTile = amx::TileType::get({16, 16}, f32);
  auto vt = VectorType::get({16}, f32);
  // The C buffer lives on the stack within a memref.alloca_scope: the
  // micro-tile runs inside loops, where a bare alloca would grow the stack
  // at every iteration. (The CPU pipeline inlines the scope between a stack
  // save and restore before the loops inside become blocks:
  // --moe-cpu-inline-alloca-scopes.)
  SmallVector<Type> resultTypes(tileRows * vecs, vt);
  auto scope = memref::AllocaScopeOp::create(b, resultTypes);
  if (scope.getBodyRegion().empty())
    scope.getBodyRegion().push_back(new Block());
  Block *body = &scope.getBodyRegion().front();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(body);
  Value cBuf = memref::AllocaOp::create(b, MemRefType::get({16, 16 * vecs}, f32), IntegerAttr());
  Value stride = cIdx(b, panelStride);
  // One step of np pairs at pair kk: A's 16 x 2np per part, B's np x 32 per
  // tile; one A part at a time (4 C tiles + 1 A + 1 B of the 8 tile
  // registers: three A parts at once leave the allocator none spare).
  auto step = [&](ImplicitLocOpBuilder &nb, Value kk, int64_t np, ValueRange acc) {
    Value k = arith::MulIOp::create(nb, kk, cIdx(nb, 2));
    SmallVector<Value> next(acc.begin(), acc.end());
    for (int64_t p = 0; p < parts; ++p) {
      Value aT = amx::TileLoadOp::create(nb, amx::TileType::get({16, 2 * np}, bf16), g.amxA,
                                         ValueRange{cIdx(nb, p), row0, k});
      for (int64_t v = 0; v < vecs; ++v) {
        Value bT = amx::TileLoadOp::create(
            nb, amx::TileType::get({np, 32}, bf16), g.b,
            ValueRange{group, panel, kk, cIdx(nb, 2 * v * 16)}, stride);
        next[v] = amx::TileMulFOp::create(nb, cTile, aT, bT, next[v]);
      }
    }
    return next;
  };
  SmallVector<Value> acc;
  for (int64_t v = 0; v < vecs; ++v)
    acc.push_back(amx::TileZeroOp::create(b, cTile));
  if (full > 0) {
    auto loop = scf::ForOp::create(
        b, cIdx(b, 0), cIdx(b, full * 16), cIdx(b, 16), acc,
        [&](OpBuilder &nested, Location loc, Value kk, ValueRange a) {
          ImplicitLocOpBuilder nb(loc, nested);
          scf::YieldOp::create(nb, step(nb, kk, 16, a));
        });
    acc.assign(loop.getResults().begin(), loop.getResults().end());
  }
  if (tailPairs > 0)
    acc = step(b, cIdx(b, full * 16), tailPairs, acc);
  for (int64_t v = 0; v < vecs; ++v)
    amx::TileStoreOp::create(b, cBuf, ValueRange{cIdx(b, 0), cIdx(b, 16 * v)}, acc[v]);
  SmallVector<Value> out;
  for (int64_t i = 0; i < tileRows; ++i)
    for (int64_t v = 0; v < vecs; ++v)
      out.push_back(vector::LoadOp::create(b, vt, cBuf, ValueRange{cIdx(b, i), cIdx(b, 16 * v)}));
  memref::AllocaScopeReturnOp::create(b, out);
  return SmallVector<Value>(scope.getResults().begin(), scope.getResults().end());
}

/// The reduction of a packed quantized GEMM by blocks of `blockK` rows of K
/// (FP8's blocks, int4's groups): `block` gives the accumulators after
/// block kb (rows [k0, k1)) from those before it, `acc`; they start from
/// `init` and their results go to `accs`.
void emitBlockLoop(
    ImplicitLocOpBuilder &b, Value kEnd, int64_t blockK, ArrayRef<Value> init,
    function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, Value, Value, Value, ValueRange)>
        block,
    SmallVectorImpl<Value> &accs) {
  Value numBlocks = ceilDiv(b, kEnd, blockK);
  auto outer = scf::ForOp::create(
      b, cIdx(b, 0), numBlocks, cIdx(b, 1), init,
      [&](OpBuilder &outerBuilder, Location loc, Value kb, ValueRange acc) {
        ImplicitLocOpBuilder ob(loc, outerBuilder);
        Value k0 = arith::MulIOp::create(ob, kb, cIdx(ob, blockK));
        Value k1 = minIdx(ob, kEnd, arith::AddIOp::create(ob, k0, cIdx(ob, blockK)));
        scf::YieldOp::create(ob, block(ob, kb, k0, k1, acc));
      });
  accs.assign(outer.getResults().begin(), outer.getResults().end());
}

/// emitBlockLoop with even blocks (a pair of rows never straddles two)
/// reduced by pair rows kk (rows k = 2 kk and k + 1): `pairStep` gives the
/// partial sums after a pair row (single: an odd K's last row alone, the
/// pair row pairEnd), `prefetch` streams the panel, and `blockEnd` gives
/// the accumulators after a block from its partial sums (the block's
/// scales, and zero points). The partial sums start from `init` in every
/// block.
void emitBlockPairLoop(
    ImplicitLocOpBuilder &b, Value kEnd, int64_t blockK, ArrayRef<Value> init,
    function_ref<void(ImplicitLocOpBuilder &, Value)> prefetch,
    function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, Value, Value, bool, ValueRange)>
        pairStep,
    function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, Value, ValueRange, ValueRange)>
        blockEnd,
    SmallVectorImpl<Value> &accs) {
  emitBlockLoop(
      b, kEnd, blockK, init,
      [&](ImplicitLocOpBuilder &ob, Value kb, Value k0, Value k1, ValueRange acc) {
        Value pairBegin = arith::DivUIOp::create(ob, k0, cIdx(ob, 2));
        Value pairEnd = arith::DivUIOp::create(ob, k1, cIdx(ob, 2));
        auto pairs = scf::ForOp::create(
            ob, pairBegin, pairEnd, cIdx(ob, 1), init,
            [&](OpBuilder &nested, Location loc, Value kk, ValueRange part) {
              ImplicitLocOpBuilder nb(loc, nested);
              prefetch(nb, kk);
              Value k = arith::MulIOp::create(nb, kk, cIdx(nb, 2));
              scf::YieldOp::create(nb, pairStep(nb, kk, k, /*single=*/false, part));
            });
        // An odd K: its last row alone.
        Value odd = arith::CmpIOp::create(ob, arith::CmpIPredicate::ne,
                                          arith::MulIOp::create(ob, pairEnd, cIdx(ob, 2)), k1);
        auto last = scf::IfOp::create(
            ob, odd,
            [&](OpBuilder &nested, Location loc) {
              ImplicitLocOpBuilder nb(loc, nested);
              Value k = arith::SubIOp::create(nb, k1, cIdx(nb, 1));
              scf::YieldOp::create(nb,
                                   pairStep(nb, pairEnd, k, /*single=*/true, pairs.getResults()));
            },
            [&](OpBuilder &nested, Location loc) {
              scf::YieldOp::create(nested, loc, pairs.getResults());
            });
        return blockEnd(ob, kb, last.getResults(), acc);
      },
      accs);
}

/// FP8 block kb's partial sums times its panel scales (declarePackedScales),
/// added to the accumulators `acc` of a micro-tile of `microRows` rows.
SmallVector<Value> addScaledBlock(ImplicitLocOpBuilder &ob, const GroupedGemm &g, Value group,
                                  Value panel, Value kb, ValueRange partials, ValueRange acc,
                                  int64_t microRows) {
  const int64_t lanes = g.config.getLanes();
  const int64_t microVecs = g.config.getMicroVectors();
  VectorType vt = f32Vec(ob, lanes);
  SmallVector<Value> scales, next;
  for (int64_t v = 0; v < microVecs; ++v)
    scales.push_back(vector::LoadOp::create(ob, vt, g.bScales,
                                            ValueRange{group, panel, kb, cIdx(ob, v * lanes)}));
  for (int64_t i = 0; i < microRows; ++i)
    for (int64_t v = 0; v < microVecs; ++v)
      next.push_back(vector::FMAOp::create(ob, partials[i * microVecs + v], scales[v],
                                           acc[i * microVecs + v]));
  return next;
}

/// Group kb's panel scales of packed int4 weights (declarePackedScales) and
/// the negated zero points plus `zeroOffset` (8 without zero points), one
/// vector per vector of the panels `panels`: the factors of a group's (P -
/// z A) s.
void loadGroupScales(ImplicitLocOpBuilder &b, const GroupedGemm &g, Value group,
                     ArrayRef<Value> panels, Value kb, float zeroOffset,
                     SmallVectorImpl<Value> &scales, SmallVectorImpl<Value> &negZeros) {
  const int64_t lanes = g.config.getLanes();
  const int64_t microVecs = g.config.getMicroVectors();
  VectorType vt = f32Vec(b, lanes);
  for (int64_t v = 0; v < microVecs * static_cast<int64_t>(panels.size()); ++v) {
    Value panel = panels[v / microVecs];
    Value at = cIdx(b, (v % microVecs) * lanes);
    scales.push_back(vector::LoadOp::create(b, vt, g.bScales, ValueRange{group, panel, kb, at}));
    Value z = g.bZeroPoints
                  ? vector::LoadOp::create(b, vt, g.bZeroPoints, ValueRange{group, panel, kb, at})
                        .getResult()
                  : arith::ConstantOp::create(b, vt, DenseElementsAttr::get(vt, 8.0f)).getResult();
    if (zeroOffset != 0.0f)
      z = arith::AddFOp::create(
          b, z, arith::ConstantOp::create(b, vt, DenseElementsAttr::get(vt, zeroOffset)));
    negZeros.push_back(arith::NegFOp::create(b, z));
  }
}

/// The products of an int4 micro-tile from packed panels (two rows of
/// codes to a byte, declarePackedWeights; the tile's columns are those of
/// `panels`, one panel or the two of a wide tile, emitGroupedGemm): per
/// group of K, the partial sums P = sum a * q of the codes (converted
/// exactly to f32), then (P - z A) s added to the accumulators, A the
/// group's sum of the row's a (g.aGroupSums), z and s the group's panel
/// zero points and scales: the zero point and the scale once per group, as
/// the block-scaled kernels apply their scales (docs/spec.md §2.1). The
/// group is even (the lowering packs int4 weights only then), so a byte
/// never straddles two groups; an odd K ends with a single row, the low
/// half of its byte. A code becomes f32 by a mask (low) or a shift (high)
/// and a conversion: two vector instructions per panel vector besides the
/// widening load, where subtracting the zero point per weight would take a
/// third.
/// With g.bf16Dot (bf16 A, AVX512_BF16) a byte becomes the bf16 pair (128
/// + q_lo, 128 + q_hi) by masks and an or (the bf16 of 128 + q, q < 128, is
/// 0x4300 | q), and one vdpbf16ps per row adds a_k (128 + q_k) + a_k+1 (128 +
/// q_k+1), exact products, to P; the group adds (P - (128 + z) A) s.
void emitInt4PackedProducts(ImplicitLocOpBuilder &b, const GroupedGemm &g, Value group,
                            ArrayRef<Value> panels, ArrayRef<Value> aRows, int64_t microRows,
                            Value kEnd, ArrayRef<Value> init, SmallVectorImpl<Value> &accs) {
  const int64_t lanes = g.config.getLanes();
  const int64_t panelVecs = g.config.getMicroVectors();
  // The tile's vectors: micro_vectors in each of its panels.
  const int64_t microVecs = panelVecs * panels.size();
  const int64_t group4 = g.desc.blockK;
  assert(group4 % 2 == 0 && "packed int4 weights need an even group");
  VectorType vt = f32Vec(b, lanes);
  auto i8v = VectorType::get({lanes}, b.getI8Type());
  auto i32v = VectorType::get({lanes}, b.getI32Type());
  auto splatI32 = [&](ImplicitLocOpBuilder &nb, int32_t c) -> Value {
    return arith::ConstantOp::create(nb, i32v,
                                     DenseElementsAttr::get(i32v, nb.getI32IntegerAttr(c)));
  };
  // The same bytes ahead as the f32 panels prefetch: a pair row of codes
  // (W bytes) holds two rows, an f32 row 4W bytes.
  const int64_t int4PrefetchScale = 4;
  const bool dot = g.bf16Dot;
  auto pairType = VectorType::get({2 * lanes}, b.getBF16Type());
  // The bf16 pairs (128 + low code, 128 + high code) of a widened byte.
  auto dotPairs = [&](ImplicitLocOpBuilder &nb, Value x, bool lowOnly) -> Value {
    // (x | x << 12) & 0x000F000F puts the low code at bits 0..3 and the
    // high one at 16..19 (x is a byte): a shift, an or and one ternary
    // logic instruction with the or of 0x43004300.
    Value both = lowOnly ? x
                         : arith::OrIOp::create(nb, x,
                                                arith::ShLIOp::create(nb, x, splatI32(nb, 12)))
                               .getResult();
    Value bits = arith::AndIOp::create(nb, both, splatI32(nb, lowOnly ? 15 : 0x000F000F));
    bits = arith::OrIOp::create(nb, bits, splatI32(nb, 0x43004300));
    return vector::BitCastOp::create(nb, pairType, bits);
  };
  // The codes of vector v of pair row kk: the low or high halves.
  auto codes = [&](ImplicitLocOpBuilder &nb, Value kk, int64_t v) -> Value {
    Value bytes = vector::LoadOp::create(
        nb, i8v, g.b,
        ValueRange{group, panels[v / panelVecs], kk, cIdx(nb, (v % panelVecs) * lanes)});
    return arith::ExtUIOp::create(nb, i32v, bytes);
  };
  auto weights = [&](ImplicitLocOpBuilder &nb, Value x, bool high) -> Value {
    Value q = high ? arith::ShRUIOp::create(nb, x, splatI32(nb, 4)).getResult()
                   : arith::AndIOp::create(nb, x, splatI32(nb, 15)).getResult();
    return arith::SIToFPOp::create(nb, vt, q);
  };
  // Pair row kk (k = 2 kk): both rows, or (single: an odd K's last row)
  // the low halves alone.
  auto pairStep = [&](ImplicitLocOpBuilder &nb, Value kk, Value k, bool single,
                      ValueRange part) -> SmallVector<Value> {
    if (dot) {
      SmallVector<Value> pairs;
      for (int64_t v = 0; v < microVecs; ++v)
        pairs.push_back(dotPairs(nb, codes(nb, kk, v), single));
      return dotPairRows(nb, g, aRows, k, single, pairs, part);
    }
    SmallVector<Value> next(part.begin(), part.end());
    Value kNext = single ? Value() : arith::AddIOp::create(nb, k, cIdx(nb, 1)).getResult();
    SmallVector<Value> lo, hi;
    for (int64_t v = 0; v < microVecs; ++v) {
      Value x = codes(nb, kk, v);
      lo.push_back(weights(nb, x, false));
      if (!single)
        hi.push_back(weights(nb, x, true));
    }
    for (int64_t i = 0; i < microRows; ++i) {
      Value a0 = broadcastF32(nb, g.a, aRows[i], k, lanes);
      Value a1 = single ? Value() : broadcastF32(nb, g.a, aRows[i], kNext, lanes);
      for (int64_t v = 0; v < microVecs; ++v) {
        Value &p = next[i * microVecs + v];
        p = vector::FMAOp::create(nb, a0, lo[v], p);
        if (!single)
          p = vector::FMAOp::create(nb, a1, hi[v], p);
      }
    }
    return next;
  };
  // (P - z A) s per group: the zero points as -z, A broadcast per row.
  auto groupEnd = [&](ImplicitLocOpBuilder &ob, Value kb, ValueRange partials,
                      ValueRange acc) -> SmallVector<Value> {
    SmallVector<Value> scales, negZeros, next;
    // The dot product's codes carry 128 (exact in f32 with z).
    loadGroupScales(ob, g, group, panels, kb, dot ? 128.0f : 0.0f, scales, negZeros);
    for (int64_t i = 0; i < microRows; ++i) {
      Value sumA = vector::BroadcastOp::create(
          ob, vt, memref::LoadOp::create(ob, g.aGroupSums, ValueRange{aRows[i], kb}));
      for (int64_t v = 0; v < microVecs; ++v) {
        Value p = vector::FMAOp::create(ob, negZeros[v], sumA, partials[i * microVecs + v]);
        next.push_back(vector::FMAOp::create(ob, p, scales[v], acc[i * microVecs + v]));
      }
    }
    return next;
  };
  emitBlockPairLoop(
      b, kEnd, group4, init,
      [&](ImplicitLocOpBuilder &nb, Value kk) {
        for (Value panel : panels)
          prefetchPanelRow(nb, g.b, group, panel, kk,
                           g.config.getPrefetchRows() * int4PrefetchScale, panelVecs * lanes);
      },
      pairStep, groupEnd, accs);
}

/// The integer dot products of the int8-activation mode (#moe.quant's
/// int8_activations), called by their LLVM intrinsics' names as vpermi2b
/// is: AVX512_VNNI's vpdpbusd (each 32-bit lane adds the four products of
/// unsigned and signed bytes), and AVX2's vpmaddubsw (pairs of unsigned x
/// signed bytes to 16 bits, saturating) and vpmaddwd (pairs of 16-bit
/// words to 32 bits).
constexpr StringLiteral kVpdpbusd = "llvm.x86.avx512.vpdpbusd.512";
constexpr StringLiteral kVpdpbusd256 = "llvm.x86.avx512.vpdpbusd.256";
constexpr StringLiteral kPmaddubsw = "llvm.x86.avx2.pmadd.ub.sw";
constexpr StringLiteral kPmaddwd = "llvm.x86.avx2.pmadd.wd";

/// The intrinsic of vpdpbusd at `lanes` 32-bit lanes (16: AVX512_VNNI; 8:
/// AVX-VNNI, which LLVM selects as the VEX form without AVX512VL).
StringLiteral vpdpbusdName(int64_t lanes) { return lanes == 16 ? kVpdpbusd : kVpdpbusd256; }

void declareInt8Dot(ImplicitLocOpBuilder &b, int64_t lanes, Int8Dot kind) {
  auto module = b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  assert(module && "the kernel is in a module");
  assert((lanes == 16 || lanes == 8) && "the int8 dot product has 512- and 256-bit forms");
  auto words = VectorType::get({lanes}, b.getI32Type());
  auto bytes = VectorType::get({4 * lanes}, b.getI8Type());
  if (kind == Int8Dot::vpdpbusd) {
    cpu::declareFunction(b, b.getLoc(), module, vpdpbusdName(lanes),
                         b.getFunctionType({words, bytes, bytes}, {words}));
    return;
  }
  assert(kind == Int8Dot::vpmaddubsw && lanes == 8 && "vpmaddubsw at 256 bits");
  auto halves = VectorType::get({16}, b.getI16Type());
  cpu::declareFunction(b, b.getLoc(), module, kPmaddubsw,
                       b.getFunctionType({bytes, bytes}, {halves}));
  cpu::declareFunction(b, b.getLoc(), module, kPmaddwd,
                       b.getFunctionType({halves, halves}, {words}));
}

/// The products of an int4 micro-tile in the int8-activation mode: A is the
/// rows' int8 codes (memref<rows x K8 x i8>, K8 = K rounded up to 8, the
/// padding zeros), B the panels of declarePackedWeights with `vnni` (a
/// 32-bit word holds the codes of 8 consecutive k of one column: byte j
/// has k = 8kk + j in its low and 8kk + 4 + j in its high 4 bits). Per group
/// of K (a multiple of 8), the integer sum I = sum q_a q_w is exact in 32
/// bits (|I| <= G x 127 x 15); the group then adds (I - z S) s_w s_a to the
/// f32 accumulators, S the group's sum of the row's codes, s_a its scale
/// (g.aCodeSums, g.aScales), z and s_w the panel's zero points and scales.
/// Each 8 k of 16 (8) columns: one load, three bit operations, and per row
/// two vpdpbusd (AVX2 without AVX-VNNI: two vpmaddubsw, one vpaddw, one vpmaddwd, one
/// vpaddd; a vpmaddubsw lane sums two products, the vpaddw four, at most
/// 4 x 15 x 127 = 7620 in magnitude: no saturation).
void emitInt8DotProducts(ImplicitLocOpBuilder &b, const GroupedGemm &g, Value group,
                         Value panel, ArrayRef<Value> aRows, int64_t microRows, Value kEnd,
                         SmallVectorImpl<Value> &accs) {
  const int64_t lanes = g.config.getLanes();
  const int64_t microVecs = g.config.getMicroVectors();
  const int64_t groupK = g.desc.blockK;
  assert(groupK % 8 == 0 && "the int8 dot product needs groups of whole 8-k words");
  const Int8Dot kind = g.config.getInt8Dot();
  assert((lanes == 16 || lanes == 8) && kind != Int8Dot::none &&
         "vpdpbusd (512 or 256 bits) or vpmaddubsw (256 bits)");
  VectorType vt = f32Vec(b, lanes);
  auto i32v = VectorType::get({lanes}, b.getI32Type());
  auto bytes = VectorType::get({4 * lanes}, b.getI8Type());
  auto halves = VectorType::get({16}, b.getI16Type());
  auto splatI32 = [&](ImplicitLocOpBuilder &nb, int32_t c) -> Value {
    return arith::ConstantOp::create(nb, i32v,
                                     DenseElementsAttr::get(i32v, nb.getI32IntegerAttr(c)));
  };
  // The four codes of A at (row, k) in every 32-bit lane, as bytes.
  auto aWord = [&](ImplicitLocOpBuilder &nb, Value row, Value k) -> Value {
    return vector::BitCastOp::create(nb, bytes, broadcastWordOfA(nb, g.a, row, k, lanes));
  };
  auto asBytes = [&](ImplicitLocOpBuilder &nb, Value x) -> Value {
    return vector::BitCastOp::create(nb, bytes, x);
  };
  Value ones;
  if (kind == Int8Dot::vpmaddubsw)
    ones = arith::ConstantOp::create(b, halves,
                                     DenseElementsAttr::get(halves, b.getI16IntegerAttr(1)));
  Value zeroI = splatI32(b, 0);
  SmallVector<Value> initI(microRows * microVecs, zeroI);
  Value zeroF = arith::ConstantOp::create(b, vt, DenseElementsAttr::get(vt, 0.0f));
  SmallVector<Value> initF(microRows * microVecs, zeroF);
  // Prefetch as many bytes ahead as the f32 panels: a word row of codes
  // (4W bytes) holds 8 rows, an f32 row 4W bytes.
  const int64_t int8PrefetchScale = 1;
  emitBlockLoop(
      b, kEnd, groupK, initF,
      [&](ImplicitLocOpBuilder &ob, Value kb, Value k0, Value k1, ValueRange acc) {
        Value w0 = arith::DivUIOp::create(ob, k0, cIdx(ob, 8));
        Value w1 = ceilDiv(ob, k1, 8);
        auto words = scf::ForOp::create(
            ob, w0, w1, cIdx(ob, 1), initI,
            [&](OpBuilder &nested, Location loc, Value kk, ValueRange part) {
              ImplicitLocOpBuilder nb(loc, nested);
              prefetchPanelRow(nb, g.b, group, panel, kk,
                               g.config.getPrefetchRows() * int8PrefetchScale,
                               microVecs * lanes);
              Value k = arith::MulIOp::create(nb, kk, cIdx(nb, 8));
              Value kHigh = arith::AddIOp::create(nb, k, cIdx(nb, 4));
              SmallVector<Value> lo, hi;
              for (int64_t v = 0; v < microVecs; ++v) {
                Value x = vector::LoadOp::create(nb, i32v, g.b,
                                                 ValueRange{group, panel, kk, cIdx(nb, v * lanes)});
                Value nibbles = splatI32(nb, 0x0F0F0F0F);
                lo.push_back(asBytes(nb, arith::AndIOp::create(nb, x, nibbles)));
                hi.push_back(asBytes(
                    nb, arith::AndIOp::create(nb, arith::ShRUIOp::create(nb, x, splatI32(nb, 4)),
                                              nibbles)));
              }
              SmallVector<Value> next(part.begin(), part.end());
              for (int64_t i = 0; i < microRows; ++i) {
                Value aLo = aWord(nb, aRows[i], k), aHi = aWord(nb, aRows[i], kHigh);
                for (int64_t v = 0; v < microVecs; ++v) {
                  Value &p = next[i * microVecs + v];
                  if (kind == Int8Dot::vpdpbusd) {
                    p = func::CallOp::create(nb, vpdpbusdName(lanes), TypeRange{i32v},
                                             ValueRange{p, lo[v], aLo})
                            .getResult(0);
                    p = func::CallOp::create(nb, vpdpbusdName(lanes), TypeRange{i32v},
                                             ValueRange{p, hi[v], aHi})
                            .getResult(0);
                  } else {
                    Value pl = func::CallOp::create(nb, kPmaddubsw, TypeRange{halves},
                                                    ValueRange{lo[v], aLo})
                                   .getResult(0);
                    Value ph = func::CallOp::create(nb, kPmaddubsw, TypeRange{halves},
                                                    ValueRange{hi[v], aHi})
                                   .getResult(0);
                    Value sum = arith::AddIOp::create(nb, pl, ph);
                    Value w = func::CallOp::create(nb, kPmaddwd, TypeRange{i32v},
                                                   ValueRange{sum, ones})
                                  .getResult(0);
                    p = arith::AddIOp::create(nb, p, w);
                  }
                }
              }
              scf::YieldOp::create(nb, next);
            });
        // (I - z S) s_w s_a per group: I converted exactly while |I| <
        // 2^24 (G x 127 x 15: G up to 8808), else with one f32 rounding.
        SmallVector<Value> scales, negZeros, next;
        loadGroupScales(ob, g, group, panel, kb, 0.0f, scales, negZeros);
        for (int64_t i = 0; i < microRows; ++i) {
          Value sumA = vector::BroadcastOp::create(
              ob, vt, memref::LoadOp::create(ob, g.aCodeSums, ValueRange{aRows[i], kb}));
          Value scaleA = vector::BroadcastOp::create(
              ob, vt, memref::LoadOp::create(ob, g.aScales, ValueRange{aRows[i], kb}));
          for (int64_t v = 0; v < microVecs; ++v) {
            Value sum = arith::SIToFPOp::create(ob, vt, words.getResult(i * microVecs + v));
            Value p = vector::FMAOp::create(ob, negZeros[v], sumA, sum);
            Value s = arith::MulFOp::create(ob, scales[v], scaleA);
            next.push_back(vector::FMAOp::create(ob, p, s, acc[i * microVecs + v]));
          }
        }
        return next;
      },
      accs);
}

/// vpermi2b (AVX512_VBMI), called by its LLVM intrinsic's name: a function
/// of that name declared in the module (declareVpermi2b) becomes the
/// intrinsic when translated to LLVM IR, and a func.call, unlike
/// llvm.call_intrinsic, is something buffer deallocation accepts. Operands
/// (table bytes 0..63, indices, table bytes 64..127); an index's bit 7 is
/// ignored.
constexpr StringLiteral kVpermi2b = "llvm.x86.avx512.vpermi2var.qi.512";

void declareVpermi2b(ImplicitLocOpBuilder &b) {
  auto module = b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  assert(module && "the kernel is in a module");
  auto bytes = VectorType::get({64}, b.getI8Type());
  cpu::declareFunction(b, b.getLoc(), module, kVpermi2b,
                       b.getFunctionType({bytes, bytes, bytes}, {bytes}));
}

/// The exact bf16 of the E4M3 magnitude m (7 bits): 1.fff * 2^(e - 7), or
/// 0.fff * 2^-6 for e = 0 (E4M3's subnormals are normal bf16s: 8 exponent
/// bits); every value has at most 4 significant bits, so the high half of
/// its f32 is exact. The NaN magnitude (1111.111) gives 0: the panel scales
/// carry NaN for its columns (emitPackScales).
uint16_t e4m3MagnitudeBf16(unsigned m) {
  if (m == 0x7F)
    return 0;
  unsigned e = m >> 3, f = m & 7;
  float v = e == 0 ? std::ldexp(float(f), -9) : std::ldexp(float(8 + f), int(e) - 10);
  return static_cast<uint16_t>(llvm::bit_cast<uint32_t>(v) >> 16);
}

/// 64 E4M3 codes (one chunk of a pair row packed in unpack order,
/// emitPackWeights) as two vectors of bf16 pairs (vector<32 x bf16> each:
/// vectors 2j and 2j + 1 of the pair row): the high and the low byte of
/// each code's exact bf16 by two 128-entry lookups (vpermi2b reads the
/// index's low 7 bits, the magnitude), the sign or'ed into the high byte,
/// and the bytes interleaved into words by the unpacks of each 128-bit lane.
std::pair<Value, Value> fp8DotPairs(ImplicitLocOpBuilder &b, Value codes) {
  auto bytes = VectorType::get({64}, b.getI8Type());
  auto table = [&](bool high, int64_t half) -> Value {
    SmallVector<int8_t> entries;
    for (unsigned i = 0; i < 64; ++i) {
      uint16_t bits = e4m3MagnitudeBf16(64 * half + i);
      entries.push_back(static_cast<int8_t>(high ? bits >> 8 : bits & 0xFF));
    }
    return arith::ConstantOp::create(b, bytes,
                                     DenseElementsAttr::get(bytes, ArrayRef<int8_t>(entries)));
  };
  auto lookup = [&](bool high) -> Value {
    return func::CallOp::create(b, kVpermi2b, TypeRange{bytes},
                                ValueRange{table(high, 0), codes, table(high, 1)})
        .getResult(0);
  };
  Value signs = arith::AndIOp::create(
      b, codes,
      arith::ConstantOp::create(
          b, bytes, DenseElementsAttr::get(bytes, b.getIntegerAttr(b.getI8Type(), 0x80))));
  Value hi = arith::OrIOp::create(b, lookup(true), signs);
  Value lo = lookup(false);
  auto pairType = VectorType::get({32}, b.getBF16Type());
  auto unpack = [&](int64_t offset) -> Value {
    SmallVector<int64_t> mask;
    for (int64_t l = 0; l < 4; ++l)
      for (int64_t i = 0; i < 8; ++i) {
        mask.push_back(16 * l + offset + i);
        mask.push_back(64 + 16 * l + offset + i);
      }
    return vector::BitCastOp::create(b, pairType, vector::ShuffleOp::create(b, lo, hi, mask));
  };
  return {unpack(0), unpack(8)};
}

/// The products of an FP8 GEMM from panels packed pairwise (the
/// configuration's fp8_dot; bf16 A): per block of K, one vdpbf16ps per row
/// and vector adds a_k q_k + a_k+1 q_k+1 (exact products; the codes as
/// their exact bf16s, fp8DotPairs) to partial sums, which the block's panel
/// scales (s, or NaN for a column with a NaN code) times are added to the
/// accumulators. The block is even (the lowering takes the dot product only
/// then), so a pair never straddles two blocks; an odd K ends with the pair
/// (a_k, 0), its packed odd row being the code 0.
void emitFp8DotProducts(ImplicitLocOpBuilder &b, const GroupedGemm &g, Value group, Value panel,
                        ArrayRef<Value> aRows, int64_t microRows, Value kEnd,
                        ArrayRef<Value> init, SmallVectorImpl<Value> &accs) {
  const int64_t lanes = g.config.getLanes();
  const int64_t microVecs = g.config.getMicroVectors();
  const int64_t blockK = g.desc.blockK;
  assert(lanes == 16 && blockK % 2 == 0 && microVecs % 2 == 0 &&
         "FP8 pairs: 64-byte chunks of two vectors, even blocks");
  Type elt = cast<MemRefType>(g.b.getType()).getElementType();
  auto chunkType = VectorType::get({4 * lanes}, elt);
  // The same bytes ahead as the f32 panels: a pair row of codes is half as
  // long as an f32 row.
  const int64_t fp8PairPrefetchScale = 2;
  // One step: pair row kk's vectors, dotted with every row's pair at k
  // (single: (a_k, 0)).
  auto step = [&](ImplicitLocOpBuilder &nb, Value kk, Value k, bool single, ValueRange part) {
    SmallVector<Value> pairs;
    for (int64_t j = 0; j < microVecs / 2; ++j) {
      Value chunk = vector::LoadOp::create(nb, chunkType, g.b,
                                           ValueRange{group, panel, kk, cIdx(nb, 4 * j * lanes)});
      auto [first, second] = fp8DotPairs(
          nb, arith::BitcastOp::create(nb, VectorType::get({4 * lanes}, nb.getI8Type()), chunk));
      pairs.push_back(first);
      pairs.push_back(second);
    }
    return dotPairRows(nb, g, aRows, k, single, pairs, part);
  };
  // The block's partial sums times its panel scales, added to the
  // accumulators.
  auto blockEnd = [&](ImplicitLocOpBuilder &ob, Value kb, ValueRange partials,
                      ValueRange acc) -> SmallVector<Value> {
    return addScaledBlock(ob, g, group, panel, kb, partials, acc, microRows);
  };
  emitBlockPairLoop(
      b, kEnd, blockK, init,
      [&](ImplicitLocOpBuilder &nb, Value kk) {
        prefetchPanelRow(nb, g.b, group, panel, kk,
                         g.config.getPrefetchRows() * fp8PairPrefetchScale,
                         2 * microVecs * lanes);
      },
      step, blockEnd, accs);
}

/// The sums of each row of A over each group of K (WeightFormat::int4Group):
/// memref<rows of A x ceil(K / group) x f32>, every row on its own core. The
/// elements, widened to f32, are added in a fixed order that no
/// configuration changes: 16 running sums (lane j takes k = k0 + j, k0 + 16
/// + j, ... of the group's whole chunks of 16), added in lane order, then
/// the group's last elements in increasing k. A sequential sum was a chain
/// of dependent scalar additions: 2.4% of a Mixtral-shaped int4 layer at T
/// = 16, one core.
Value emitGroupSums(ImplicitLocOpBuilder &b, const GroupedGemm &g) {
  constexpr int64_t kSumLanes = 16;
  Value rows = memref::DimOp::create(b, g.a, 0);
  Value numGroups = ceilDiv(b, g.reduction, g.desc.blockK);
  auto type = MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic}, b.getF32Type());
  Value sums = memref::AllocOp::create(b, type, ValueRange{rows, numGroups}, IntegerAttr());
  Type elt = cast<MemRefType>(g.a.getType()).getElementType();
  auto eltVec = VectorType::get({kSumLanes}, elt);
  VectorType vt = f32Vec(b, kSumLanes);
  scf::ParallelOp::create(
      b, ValueRange{cIdx(b, 0)}, ValueRange{rows}, ValueRange{cIdx(b, 1)},
      [&](OpBuilder &pb, Location loc, ValueRange ivs) {
        ImplicitLocOpBuilder rb(loc, pb);
        scf::ForOp::create(
            rb, cIdx(rb, 0), numGroups, cIdx(rb, 1), ValueRange{},
            [&](OpBuilder &gBuilder, Location loc, Value kb, ValueRange) {
              ImplicitLocOpBuilder gb(loc, gBuilder);
              Value k0 = arith::MulIOp::create(gb, kb, cIdx(gb, g.desc.blockK));
              Value k1 = minIdx(gb, g.reduction,
                                arith::AddIOp::create(gb, k0, cIdx(gb, g.desc.blockK)));
              Value len = arith::SubIOp::create(gb, k1, k0);
              Value whole = arith::AddIOp::create(
                  gb, k0,
                  arith::SubIOp::create(
                      gb, len, arith::RemSIOp::create(gb, len, cIdx(gb, kSumLanes))));
              auto lanesSum = scf::ForOp::create(
                  gb, k0, whole, cIdx(gb, kSumLanes),
                  ValueRange{arith::ConstantOp::create(gb, vt, DenseElementsAttr::get(vt, 0.0f))},
                  [&](OpBuilder &kBuilder, Location loc, Value k, ValueRange acc) {
                    ImplicitLocOpBuilder kb2(loc, kBuilder);
                    Value v = vector::LoadOp::create(kb2, eltVec, g.a, ValueRange{ivs[0], k});
                    if (!elt.isF32())
                      v = arith::ExtFOp::create(kb2, vt, v);
                    scf::YieldOp::create(kb2, ValueRange{arith::AddFOp::create(kb2, acc[0], v)});
                  });
              // Without fast-math flags the reduction is ordered: lane 0
              // first.
              Value total = vector::ReductionOp::create(
                  gb, vector::CombiningKind::ADD, lanesSum.getResult(0),
                  arith::ConstantOp::create(gb, gb.getF32FloatAttr(0.0f)));
              auto sum = scf::ForOp::create(
                  gb, whole, k1, cIdx(gb, 1), ValueRange{total},
                  [&](OpBuilder &kBuilder, Location loc, Value k, ValueRange acc) {
                    ImplicitLocOpBuilder kb2(loc, kBuilder);
                    Value a = toF32(kb2, memref::LoadOp::create(kb2, g.a, ValueRange{ivs[0], k}));
                    scf::YieldOp::create(kb2, ValueRange{arith::AddFOp::create(kb2, acc[0], a)});
                  });
              memref::StoreOp::create(gb, sum.getResult(0), sums, ValueRange{ivs[0], kb});
              scf::YieldOp::create(gb);
            });
      });
  return sums;
}

/// Whether `g` runs a tail of one row in a wide tile over two panels
/// (emitGroupedGemm): packed int4 weights on the FMA path (no dot product,
/// no AMX) in a forward GEMM.
bool hasWideTails(const GroupedGemm &g) {
  return g.bPacked && g.desc.format == WeightFormat::int4Group && !g.bf16Dot && !g.int8Dot &&
         !g.amx && !g.desc.weightGradient();
}

/// One micro-tile: `tileRows` rows (the configuration's micro_rows, or the
/// smaller tile of a row tail) from row0, clamped to `rowEnd` (the missing
/// rows read row0 and store nothing), output columns [col0, col0 + L * vecs)
/// of one packed panel or, with `wide` (packed int4 weights on the FMA path:
/// the wide tail tile, emitGroupedGemm), of two consecutive panels, twice
/// the accumulators per row.
void emitMicroTile(ImplicitLocOpBuilder &b, const GroupedGemm &g, Value group, Value row0,
                   int64_t tileRows, Value rowEnd, Value col0, Value kBegin, Value kEnd,
                   bool wide = false) {
  const bool weightGradient = g.desc.weightGradient();
  const int64_t lanes = g.config.getLanes();
  const int64_t microRows = tileRows;
  const int64_t numPanels = wide ? 2 : 1;
  assert((!wide || hasWideTails(g)) && "wide tiles are for packed int4 weights on the FMA path");
  // One panel's vectors, and the tile's.
  const int64_t panelVecs = g.config.getMicroVectors();
  const int64_t microVecs = panelVecs * numPanels;
  const int64_t prefetchRows = g.config.getPrefetchRows();
  const int64_t outVecs = g.gated() ? panelVecs / 2 : panelVecs;
  VectorType vt = f32Vec(b, lanes);

  // Rows: plan row r_i (clamped to an existing row for the tail) and the row
  // of A it reads.
  // (Weight gradient: the rows are A's columns m, read at every k.)
  SmallVector<Value> rows, aRows, rowValid;
  for (int64_t i = 0; i < microRows; ++i) {
    Value r = arith::AddIOp::create(b, row0, cIdx(b, i));
    Value valid = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, r, rowEnd);
    Value clamped = arith::SelectOp::create(b, valid, r, row0);
    rows.push_back(r);
    rowValid.push_back(valid);
    aRows.push_back(g.aRowMap && !weightGradient ? loadIndex(b, g.aRowMap, {clamped})
                                                 : clamped);
  }
  // Columns of B read by every accumulator vector, and their masks (per
  // panel: outVecs output vectors).
  const int64_t tileCols = g.config.getTileColumns(g.gated());
  SmallVector<Value> outCols, bCols, masks;
  for (int64_t p = 0; p < numPanels; ++p)
    for (int64_t v = 0; v < outVecs; ++v) {
      Value c = arith::AddIOp::create(b, col0, cIdx(b, p * tileCols + v * lanes));
      outCols.push_back(c);
      masks.push_back(columnMask(b, c, g.columns, lanes));
    }
  for (int64_t v = 0; v < outVecs; ++v)
    bCols.push_back(outCols[v]);
  if (g.gated())
    for (int64_t v = 0; v < outVecs; ++v)
      bCols.push_back(arith::AddIOp::create(b, outCols[v], g.columns));

  Value panel = g.bPacked || g.bPackedRows
                    ? arith::DivSIOp::create(b, col0, cIdx(b, tileCols)).getResult()
                    : Value();
  SmallVector<Value> panels{panel};
  if (wide)
    panels.push_back(arith::AddIOp::create(b, panel, cIdx(b, 1)));
  // The packed A of a weight gradient: the micro-tile's panel of columns
  // (row0 is a multiple of micro_rows; the rows of a smaller tail tile are
  // the first of their panel).
  Value aPanel = g.aPackedColumns
                     ? arith::DivSIOp::create(b, row0, cIdx(b, g.config.getMicroRows())).getResult()
                     : Value();
  // The reduction: every accumulator in a register.
  Value zero = arith::ConstantOp::create(b, vt, DenseElementsAttr::get(vt, 0.0f));
  SmallVector<Value> init(microRows * microVecs, zero);
  SmallVector<Value> accs;
  if (g.amx) {
    assert(lanes == 16 && microRows <= 16 && "AMX micro-tiles are 16 rows of 16-lane vectors");
    accs = emitAmxProducts(b, g, group, panel, row0, microRows, microVecs);
  } else if (g.desc.format == WeightFormat::int4Group && g.bPacked && g.int8Dot) {
    emitInt8DotProducts(b, g, group, panel, aRows, microRows, kEnd, accs);
  } else if (g.desc.format == WeightFormat::int4Group && g.bPacked) {
    emitInt4PackedProducts(b, g, group, panels, aRows, microRows, kEnd, init, accs);
  } else if (g.desc.format == WeightFormat::fp8Block && g.bPacked && g.bf16Dot) {
    emitFp8DotProducts(b, g, group, panel, aRows, microRows, kEnd, init, accs);
  } else if (g.desc.format == WeightFormat::fp8Block && g.bPacked) {
    // FP8 from packed panels: per block of K, the partial sums of a * (q *
    // 2^-8) from the codes (fp8TimesTwoToMinus8), then the block's panel
    // scales (s * 256, or NaN for a column with a NaN code) times the
    // partial sums are added to the accumulators: the scale once per
    // block, as the block-scaled kernels do (docs/spec.md §2.1). LLVM keeps
    // the partial sums in registers and the accumulators around the
    // block's loop.
    const int64_t blockK = g.desc.blockK;
    // Prefetch as many bytes ahead as the f32 panels do (measured, Qwen3-30B
    // shape at T = 1 on the AMD EPYC: 1.22 -> 1.10 ms per layer).
    const int64_t fp8PrefetchScale = 4;
    emitBlockLoop(
        b, kEnd, blockK, init,
        [&](ImplicitLocOpBuilder &ob, Value kb, Value k0, Value k1, ValueRange acc) {
          auto inner = scf::ForOp::create(
              ob, k0, k1, cIdx(ob, 1), init,
              [&](OpBuilder &nested, Location loc, Value k, ValueRange part) {
                ImplicitLocOpBuilder nb(loc, nested);
                // The configuration's distance is in rows of f32 panels: the
                // same bytes ahead are 4x as many rows of codes.
                prefetchPanelRow(nb, g.b, group, panel, k, prefetchRows * fp8PrefetchScale,
                                 microVecs * lanes);
                Type elt = cast<MemRefType>(g.b.getType()).getElementType();
                SmallVector<Value> bVecs;
                for (int64_t v = 0; v < microVecs; ++v)
                  bVecs.push_back(fp8TimesTwoToMinus8(
                      nb, vector::LoadOp::create(nb, VectorType::get({lanes}, elt), g.b,
                                                 ValueRange{group, panel, k,
                                                            cIdx(nb, v * lanes)})));
                SmallVector<Value> next;
                for (int64_t i = 0; i < microRows; ++i) {
                  Value aVec = broadcastF32(nb, g.a, aRows[i], k, lanes);
                  for (int64_t v = 0; v < microVecs; ++v)
                    next.push_back(
                        vector::FMAOp::create(nb, aVec, bVecs[v], part[i * microVecs + v]));
                }
                scf::YieldOp::create(nb, next);
              });
          return addScaledBlock(ob, g, group, panel, kb, inner.getResults(), acc, microRows);
        },
        accs);
  } else if (g.bf16Dot) {
    // AVX512_BF16: one vdpbf16ps per (row, vector) adds the products of a
    // pair of k (B packed pairwise, VNNI layout), exact products and one f32
    // rounding per product as with FMAs. An odd K ends with the pair (x, 0).
    auto pairType = VectorType::get({2 * lanes}, b.getBF16Type());
    auto dotStep = [&](ImplicitLocOpBuilder &nb, Value kk, Value k, bool single,
                       ValueRange acc) {
      SmallVector<Value> bVecs;
      // Stream the panel (pairs of rows): prefetch ahead as the FMA path.
      prefetchPanelRow(nb, g.b, group, panel, kk, prefetchRows / 2, 2 * microVecs * lanes);
      for (int64_t v = 0; v < microVecs; ++v)
        bVecs.push_back(vector::LoadOp::create(nb, pairType, g.b,
                                               ValueRange{group, panel, kk,
                                                          cIdx(nb, 2 * v * lanes)}));
      return dotPairRows(nb, g, aRows, k, single, bVecs, acc);
    };
    Value pairs = arith::DivSIOp::create(b, g.reduction, cIdx(b, 2));
    auto loop = scf::ForOp::create(
        b, cIdx(b, 0), pairs, cIdx(b, 1), init,
        [&](OpBuilder &nested, Location loc, Value kk, ValueRange acc) {
          ImplicitLocOpBuilder nb(loc, nested);
          Value k = arith::MulIOp::create(nb, kk, cIdx(nb, 2));
          scf::YieldOp::create(nb, dotStep(nb, kk, k, /*single=*/false, acc));
        });
    Value odd = arith::CmpIOp::create(
        b, arith::CmpIPredicate::ne, arith::RemSIOp::create(b, g.reduction, cIdx(b, 2)),
        cIdx(b, 0));
    auto tail = scf::IfOp::create(
        b, odd,
        [&](OpBuilder &nested, Location loc) {
          ImplicitLocOpBuilder nb(loc, nested);
          Value k = arith::SubIOp::create(nb, g.reduction, cIdx(nb, 1));
          scf::YieldOp::create(nb, dotStep(nb, pairs, k, /*single=*/true, loop.getResults()));
        },
        [&](OpBuilder &nested, Location loc) {
          scf::YieldOp::create(nested, loc, loop.getResults());
        });
    accs.assign(tail.getResults().begin(), tail.getResults().end());
  } else {
    auto loop = scf::ForOp::create(
        b, kBegin, kEnd, cIdx(b, 1), init,
        [&](OpBuilder &nested, Location loc, Value k, ValueRange acc) {
          ImplicitLocOpBuilder nb(loc, nested);
          SmallVector<Value> bVecs;
          if (g.bPacked) {
            // Stream the panel: prefetch the row prefetchRows ahead (a
            // prefetch past the end is harmless).
            prefetchPanelRow(nb, g.b, group, panel, k, prefetchRows, microVecs * lanes);
          } else if (!g.bPackedRows && !weightGradient && !g.desc.bTransposed &&
                     g.desc.format == WeightFormat::dense && prefetchRows > 0) {
            // B as it is (the router's weights, unpackable ones): its rows
            // are far apart, so the row prefetchRows ahead, one prefetch per
            // 64-byte line of the tile's columns. Measured on the AMD EPYC:
            // the router of the Qwen3-30B-A3B shape at T = 1 waited on its
            // loads of Wr (a third of the int4 layer's time outside the
            // expert GEMMs).
            int64_t bytes = cast<MemRefType>(g.b.getType()).getElementTypeBitWidth() / 8;
            int64_t vecsPerLine = std::max<int64_t>(1, 64 / (lanes * bytes));
            Value ahead = arith::AddIOp::create(nb, k, cIdx(nb, prefetchRows));
            for (int64_t v = 0; v < microVecs; v += vecsPerLine)
              memref::PrefetchOp::create(nb, g.b, bIndices(g.b, group, ahead, bCols[v]),
                                         /*isWrite=*/false, /*localityHint=*/3,
                                         /*isDataCache=*/true);
          }
          for (int64_t v = 0; v < microVecs; ++v) {
            if (g.bPacked) {
              // One contiguous panel row: no masks (the panel is zero-padded).
              Type elt = cast<MemRefType>(g.b.getType()).getElementType();
              Value vec = vector::LoadOp::create(
                  nb, VectorType::get({lanes}, elt), g.b,
                  ValueRange{group, panel, k, cIdx(nb, v * lanes)});
              bVecs.push_back(elt.isF32() ? vec
                                          : arith::ExtFOp::create(nb, vt, vec).getResult());
              continue;
            }
            if (g.bPackedRows) {
              // One row of a packed panel: contiguous, zero-padded, f32.
              bVecs.push_back(vector::LoadOp::create(nb, vt, g.b,
                                                     ValueRange{panel, k, cIdx(nb, v * lanes)}));
              continue;
            }
            bVecs.push_back(weightGradient
                                ? loadF32Vector(nb, g.b, {k, bCols[v]}, masks[v % outVecs])
                                : loadBVector(nb, g, group, k, bCols[v], masks[v % outVecs]));
          }
          // The weight gradient reads A's row of plan row k, at the columns
          // that are this tile's rows.
          Value aRowOfK;
          if (weightGradient)
            aRowOfK = g.aRowMap ? loadIndex(nb, g.aRowMap, {k}) : k;
          SmallVector<Value> next;
          for (int64_t i = 0; i < microRows; ++i) {
            Value aVec;
            if (g.aPackedColumns)
              aVec = vector::BroadcastOp::create(
                  nb, vt, memref::LoadOp::create(nb, g.a, ValueRange{aPanel, k, cIdx(nb, i)}));
            else
              aVec = weightGradient ? broadcastF32(nb, g.a, aRowOfK, aRows[i], lanes)
                                    : broadcastF32(nb, g.a, aRows[i], k, lanes);
            for (int64_t v = 0; v < microVecs; ++v)
              next.push_back(
                  vector::FMAOp::create(nb, aVec, bVecs[v], acc[i * microVecs + v]));
          }
          scf::YieldOp::create(nb, next);
        });
    accs.assign(loop.getResults().begin(), loop.getResults().end());
  }

  // Epilogues of the rows that exist: per panel, its outVecs output vectors
  // (gated: the up half's after the gate's).
  for (int64_t i = 0; i < microRows; ++i) {
    scf::IfOp::create(b, rowValid[i], [&](OpBuilder &nested, Location loc) {
      ImplicitLocOpBuilder nb(loc, nested);
      for (int64_t p = 0; p < numPanels; ++p)
        for (int64_t v = 0; v < outVecs; ++v) {
          int64_t at = i * microVecs + p * panelVecs + v;
          Value acc = accs[at];
          Value accUp = g.gated() ? accs[at + outVecs] : Value();
          emitEpilogue(nb, g, group, rows[i], outCols[p * outVecs + v], masks[p * outVecs + v],
                       acc, accUp);
        }
      scf::YieldOp::create(nb);
    });
  }
}

} // namespace

Value cpu::toF32(ImplicitLocOpBuilder &b, Value scalar) {
  if (scalar.getType().isF32())
    return scalar;
  return arith::ExtFOp::create(b, b.getF32Type(), scalar);
}

Value cpu::columnMask(ImplicitLocOpBuilder &b, Value col, Value limit, int64_t lanes) {
  Value remaining = arith::SubIOp::create(b, limit, col);
  return vector::CreateMaskOp::create(b, VectorType::get({lanes}, b.getI1Type()),
                                      ValueRange{remaining});
}

Value cpu::loadF32Vector(ImplicitLocOpBuilder &b, Value memref, ValueRange indices,
                         Value mask) {
  Type elt = cast<MemRefType>(memref.getType()).getElementType();
  int64_t lanes = cast<VectorType>(mask.getType()).getDimSize(0);
  auto vt = VectorType::get({lanes}, elt);
  Value pass = arith::ConstantOp::create(b, vt, DenseElementsAttr::get(vt, b.getZeroAttr(elt)));
  Value v = vector::MaskedLoadOp::create(b, vt, memref, indices, mask, pass);
  if (elt.isF32())
    return v;
  return arith::ExtFOp::create(b, f32Vec(b, lanes), v);
}

void cpu::storeVector(ImplicitLocOpBuilder &b, Value v, Value memref, ValueRange indices,
                      Value mask) {
  Type elt = cast<MemRefType>(memref.getType()).getElementType();
  if (!elt.isF32())
    v = arith::TruncFOp::create(b, VectorType::get(cast<VectorType>(v.getType()).getShape(), elt),
                                v);
  vector::MaskedStoreOp::create(b, memref, indices, mask, v);
}

void cpu::emitGroupedGemm(ImplicitLocOpBuilder &b, const GroupedGemm &g) {
  assert(g.config && "a grouped GEMM needs its configuration");
  assert(!g.desc.epilogue.has(EpilogueStep::combine) && "the CPU combines in its own kernel");
  assert(g.desc.gathered() == (g.aRowMap != nullptr) && "a gathered GEMM needs its row map");
  assert(g.desc.invalidReason().empty() && "not a grouped GEMM");
  assert(g.desc.epilogue.has(EpilogueStep::activationGrad) == (g.activationOut != nullptr) &&
         "the activation gradient's second output");
  const bool weightGradient = g.desc.weightGradient();
  assert((!weightGradient || (g.groupOffsets && !g.bPacked && !g.bf16Dot)) &&
         "the weight gradient reads B by plan row, over groups");
  assert((!g.desc.bTransposed || !g.bf16Dot || g.bPacked) &&
         "an unpacked transposed B is read element by element");
  assert((g.desc.format == WeightFormat::dense ||
          (g.bScales && !g.amx && !g.bPackedRows &&
           (!g.bf16Dot || g.bPacked))) &&
         "quantized weights are dequantized on the FMA path (packed: or the bf16 dot "
         "product), with their scales");
  assert(g.desc.zeroPoint == (g.bZeroPoints != nullptr) && "zero points of int4 weights");
  assert((!g.int8Dot || (g.desc.format == WeightFormat::int4Group && g.bPacked && !g.bf16Dot &&
                         g.aScales && g.aCodeSums)) &&
         "the int8 dot product reads packed int4 weights and the codes of A");
  const int64_t tileCols = g.config.getTileColumns(g.gated());
  // AMX: tiles of 16 rows (the configuration's verifier makes row_block a
  // multiple of 16), and no smaller tail tile: the tile unit computes 16
  // rows in the time the FMA path takes for a few.
  const int64_t microRows = g.amx ? 16 : g.config.getMicroRows();
  const int64_t rowBlock = g.config.getRowBlock();
  const int64_t colBlock = g.config.getColBlock();
  // The attribute's verifier guarantees whole tiles per block.

  Value groups = g.numGroups ? g.numGroups : cIdx(b, 1);
  // The largest group bounds the row blocks of the iteration space (the
  // weight gradient: every group has numRows rows, A's columns).
  // The forward's work items cover only the groups that have rows, listed
  // in `active` by the same scan: at decode most experts of a large layer
  // have none (8 of Qwen3-30B-A3B's 128 at T = 1), and the runtime cuts the
  // work items into blocks of consecutive items, so that with every group
  // in the iteration space a block held 0, 1 or 2 of the busy experts and
  // the two threads of a 2-core machine finished far apart. A group without
  // rows has no output rows: nothing of it is skipped that would be written
  // (the weight gradient, which writes every group, keeps them all).
  Value maxRows;
  Value active;
  Value workGroups = groups; // the first dimension of the work items
  if (g.groupOffsets && !weightGradient) {
    active = memref::AllocOp::create(
        b, MemRefType::get({ShapedType::kDynamic}, b.getIndexType()), ValueRange{groups},
        IntegerAttr());
    auto scan = scf::ForOp::create(
        b, cIdx(b, 0), groups, cIdx(b, 1), ValueRange{cIdx(b, 0), cIdx(b, 0)},
        [&](OpBuilder &nested, Location loc, Value grp, ValueRange acc) {
          ImplicitLocOpBuilder nb(loc, nested);
          Value begin = loadIndex(nb, g.groupOffsets, {grp});
          Value end = loadIndex(nb, g.groupOffsets,
                                {arith::AddIOp::create(nb, grp, cIdx(nb, 1))});
          Value n = arith::SubIOp::create(nb, end, begin);
          // Stored at the next free place in any case, kept only if the
          // group has rows.
          memref::StoreOp::create(nb, grp, active, ValueRange{acc[1]});
          Value busy = arith::CmpIOp::create(nb, arith::CmpIPredicate::sgt, n, cIdx(nb, 0));
          Value next = arith::AddIOp::create(
              nb, acc[1], arith::SelectOp::create(nb, busy, cIdx(nb, 1), cIdx(nb, 0)));
          scf::YieldOp::create(nb,
                               ValueRange{arith::MaxSIOp::create(nb, acc[0], n), next});
        });
    maxRows = scan.getResult(0);
    workGroups = scan.getResult(1);
  } else {
    maxRows = g.numRows;
  }
  Value rowBlocks = ceilDiv(b, maxRows, rowBlock);
  // Column blocks of col_block columns (B's slab reused by a block's rows),
  // or of one tile (two with wide tails, below) where that leaves fewer
  // than kMinWorkItems work items (a few rows: decode, the router of one
  // token), so that every core gets columns to stream. Nothing is reused
  // across a decode row block anyway.
  constexpr int64_t kMinWorkItems = 16;
  // Packed int4 weights on the FMA path: the columns in pairs of panels, so
  // that a one-row tail runs in a wide tile over both. (Measured with AVX2
  // code on the AMD EPYC, 4 Qwen3-30B-A3B layers at T = 1: int4 5.4-5.8 ->
  // 4.3-4.7 ms, but FP8 6.6-7.2 -> 7.2-7.4 ms; measured again after the
  // bf16 stores stopped calling __truncsfbf2: FP8 unchanged, its
  // conversions bound the loop, docs/quantization.md.)
  const bool wideTails = hasWideTails(g);
  const int64_t colStep = wideTails ? 2 * tileCols : tileCols;
  Value groupRowBlocks = arith::MulIOp::create(b, workGroups, rowBlocks);
  Value coarseItems =
      arith::MulIOp::create(b, groupRowBlocks, ceilDiv(b, g.columns, colBlock));
  Value colBlockSize = arith::SelectOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::slt, coarseItems, cIdx(b, kMinWorkItems)),
      cIdx(b, std::min(colStep, colBlock)), cIdx(b, colBlock));
  Value colBlocks = arith::CeilDivSIOp::create(b, g.columns, colBlockSize);
  // AMX: the left operand as the tiles read it, built once per call.
  GroupedGemm withA = g;
  if (g.amx)
    withA.amxA = emitAmxPackA(b, g);
  // Packed FP8 on the dot product: the byte lookup's declaration.
  if (g.desc.format == WeightFormat::fp8Block && g.bPacked && g.bf16Dot)
    declareVpermi2b(b);
  // Packed int4: the rows' sums of A per group of K, built once per call
  // (the int8 dot product's come with its codes).
  if (g.desc.format == WeightFormat::int4Group && g.bPacked && !g.int8Dot)
    withA.aGroupSums = emitGroupSums(b, g);
  if (g.int8Dot)
    declareInt8Dot(b, g.config.getLanes(), g.config.getInt8Dot());

  // Work items (group, column block, row block): row blocks innermost, so
  // that consecutive items share one column slab of B in the cache.
  scf::ParallelOp::create(
      b, ValueRange{cIdx(b, 0), cIdx(b, 0), cIdx(b, 0)},
      ValueRange{workGroups, colBlocks, rowBlocks},
      ValueRange{cIdx(b, 1), cIdx(b, 1), cIdx(b, 1)},
      [&](OpBuilder &nested, Location loc, ValueRange ivs) {
        ImplicitLocOpBuilder nb(loc, nested);
        Value group = active ? memref::LoadOp::create(nb, active, ValueRange{ivs[0]}).getResult()
                             : ivs[0];
        Value cb = ivs[1], rb = ivs[2];
        Value groupBegin = g.groupOffsets ? loadIndex(nb, g.groupOffsets, {group}) : cIdx(nb, 0);
        Value groupEnd =
            g.groupOffsets
                ? loadIndex(nb, g.groupOffsets, {arith::AddIOp::create(nb, group, cIdx(nb, 1))})
                : g.numRows;
        // The forward: rows of the group, the whole K. The weight gradient:
        // rows of A's columns, K over the group's plan rows.
        Value kBegin = weightGradient ? groupBegin : cIdx(nb, 0);
        Value kEnd = weightGradient ? groupEnd : g.reduction;
        Value firstRow = weightGradient ? cIdx(nb, 0) : groupBegin;
        Value lastRow = weightGradient ? g.numRows : groupEnd;
        Value rowBegin = arith::AddIOp::create(
            nb, firstRow, arith::MulIOp::create(nb, rb, cIdx(nb, rowBlock)));
        Value rowEnd =
            minIdx(nb, lastRow, arith::AddIOp::create(nb, rowBegin, cIdx(nb, rowBlock)));
        Value colBegin = arith::MulIOp::create(nb, cb, colBlockSize);
        Value colEnd = minIdx(nb, g.columns, arith::AddIOp::create(nb, colBegin, colBlockSize));
        Value hasRows = arith::CmpIOp::create(nb, arith::CmpIPredicate::slt, rowBegin, rowEnd);
        scf::IfOp::create(nb, hasRows, [&](OpBuilder &ifBuilder, Location loc) {
          ImplicitLocOpBuilder ib(loc, ifBuilder);
          // Micro-tiles of micro_rows rows, except a row tail that a
          // smaller tile holds: at decode a group has a few rows, and a
          // 6-row tile computing 4 spends a third of its FMAs on missing
          // rows. Dense weights: a tail of at most half as many rows
          // (rounded up to a power of two: 4 of 6) in one such tile, two
          // micro-kernels per GEMM (more would cost compile time). Quantized
          // weights: every tail in a tile of its size, since the weights'
          // decoding is shared by a tile's rows and the products of missing
          // rows are not (at T = 16 on Mixtral's shape, 4 rows per expert on
          // average, the bf16 dot products bound the quantized GEMMs: a tail
          // of 2 in a 4-row tile doubled them, and tails of 3 and 5 in 4- and
          // 6-row tiles spent 8% of them on missing rows).
          const bool exactTails = g.desc.quantized() && !g.amx;
          const int64_t small =
              g.amx ? 0 : exactTails ? microRows - 1 : llvm::PowerOf2Ceil(microRows) / 2;
          Value count = arith::SubIOp::create(ib, rowEnd, rowBegin);
          Value tail = arith::RemSIOp::create(ib, count, cIdx(ib, microRows));
          Value smallTail = arith::AndIOp::create(
              ib, arith::CmpIOp::create(ib, arith::CmpIPredicate::sgt, tail, cIdx(ib, 0)),
              arith::CmpIOp::create(ib, arith::CmpIPredicate::sle, tail, cIdx(ib, small)));
          Value bigEnd = arith::SelectOp::create(
              ib, smallTail, arith::SubIOp::create(ib, rowEnd, tail), rowEnd);
          // The full micro-tiles of the panel at column c.
          auto fullTiles = [&](ImplicitLocOpBuilder &at, Value c) {
            scf::ForOp::create(
                at, rowBegin, bigEnd, cIdx(at, microRows), ValueRange{},
                [&](OpBuilder &rowBuilder, Location loc, Value row0, ValueRange) {
                  ImplicitLocOpBuilder rb2(loc, rowBuilder);
                  emitMicroTile(rb2, withA, group, row0, microRows, rowEnd, c, kBegin, kEnd);
                  scf::YieldOp::create(rb2);
                });
          };
          // The tail's tile of the panel at column c.
          auto tailTiles = [&](ImplicitLocOpBuilder &at, Value c) {
            if (small < 1 || small >= microRows)
              return;
            scf::IfOp::create(at, smallTail, [&](OpBuilder &tailBuilder, Location loc) {
              ImplicitLocOpBuilder tb(loc, tailBuilder);
              auto tile = [&](ImplicitLocOpBuilder &tileBuilder, int64_t rows) {
                emitMicroTile(tileBuilder, withA, group, bigEnd, rows, rowEnd, c, kBegin, kEnd);
                scf::YieldOp::create(tileBuilder);
              };
              if (!exactTails) {
                tile(tb, small);
                return;
              }
              // if tail == 1 ... else if tail == small - 1 ... else the
              // small tile.
              std::function<void(ImplicitLocOpBuilder &, int64_t)> exact =
                  [&](ImplicitLocOpBuilder &eb0, int64_t rows) {
                    if (rows == small) {
                      tile(eb0, rows);
                      return;
                    }
                    Value is = arith::CmpIOp::create(eb0, arith::CmpIPredicate::eq, tail,
                                                     cIdx(eb0, rows));
                    scf::IfOp::create(
                        eb0, is,
                        [&](OpBuilder &exactBuilder, Location loc) {
                          ImplicitLocOpBuilder eb(loc, exactBuilder);
                          tile(eb, rows);
                        },
                        [&](OpBuilder &otherBuilder, Location loc) {
                          ImplicitLocOpBuilder xb(loc, otherBuilder);
                          exact(xb, rows + 1);
                        });
                    scf::YieldOp::create(eb0);
                  };
              exact(tb, 1);
            });
          };
          scf::ForOp::create(
              ib, colBegin, colEnd, cIdx(ib, colStep), ValueRange{},
              [&](OpBuilder &colBuilder, Location loc, Value col0, ValueRange) {
                ImplicitLocOpBuilder cb2(loc, colBuilder);
                if (!wideTails) {
                  fullTiles(cb2, col0);
                  tailTiles(cb2, col0);
                  scf::YieldOp::create(cb2);
                  return;
                }
                // Two panels: their full tiles, then a tail of one row in
                // one wide tile over both (twice the independent
                // accumulators of a one-row tile: at decode, one row per
                // expert, the FMA latency bound the one-panel tile on AVX2,
                // two accumulators per row), other tails per panel. The
                // second panel may be missing at the block's end.
                Value col1 = arith::AddIOp::create(cb2, col0, cIdx(cb2, tileCols));
                Value hasSecond =
                    arith::CmpIOp::create(cb2, arith::CmpIPredicate::slt, col1, colEnd);
                fullTiles(cb2, col0);
                scf::IfOp::create(cb2, hasSecond, [&](OpBuilder &nested, Location loc) {
                  ImplicitLocOpBuilder sb(loc, nested);
                  fullTiles(sb, col1);
                  scf::YieldOp::create(sb);
                });
                Value oneRow = arith::AndIOp::create(
                    cb2, hasSecond,
                    arith::CmpIOp::create(cb2, arith::CmpIPredicate::eq, tail, cIdx(cb2, 1)));
                scf::IfOp::create(
                    cb2, oneRow,
                    [&](OpBuilder &nested, Location loc) {
                      ImplicitLocOpBuilder wb(loc, nested);
                      emitMicroTile(wb, withA, group, bigEnd, 1, rowEnd, col0, kBegin, kEnd,
                                    /*wide=*/true);
                      scf::YieldOp::create(wb);
                    },
                    [&](OpBuilder &nested, Location loc) {
                      ImplicitLocOpBuilder ob(loc, nested);
                      tailTiles(ob, col0);
                      scf::IfOp::create(ob, hasSecond, [&](OpBuilder &nested2, Location loc2) {
                        ImplicitLocOpBuilder sb(loc2, nested2);
                        tailTiles(sb, col1);
                        scf::YieldOp::create(sb);
                      });
                      scf::YieldOp::create(ob);
                    });
                scf::YieldOp::create(cb2);
              });
          scf::YieldOp::create(ib);
        });
        // scf.parallel's body ends in scf.reduce, which the builder adds.
      });
}

PackedWeights cpu::declarePackedWeights(ImplicitLocOpBuilder &b, Operation *symbolTableOp,
                                        Value w, CpuConfigAttr config, bool gated,
                                        bool vnni, bool transposed) {
  const int64_t panelWidth = config.getMicroVectors() * config.getLanes();
  MLIRContext *ctx = b.getContext();
  auto srcType = cast<MemRefType>(w.getType());
  assert(srcType.getRank() == 3 && srcType.hasStaticShape() && "static [G, K, N] weights");
  assert(!(gated && transposed) && "gated weights are packed from [G, K, 2H]");
  int64_t groups = srcType.getDimSize(0), red = srcType.getDimSize(transposed ? 2 : 1),
          cols = srcType.getDimSize(transposed ? 1 : 2);
  int64_t outCols = gated ? cols / 2 : cols;
  int64_t tile = config.getTileColumns(gated);
  int64_t panels = (outCols + tile - 1) / tile;
  const bool int4 = srcType.getElementType().isInteger(4);
  assert(!(int4 && transposed) && "int4 panels hold pairs of rows");
  auto packedType =
      int4 && vnni ? MemRefType::get({groups, panels, (red + 7) / 8, panelWidth}, b.getI32Type())
      : int4 ? MemRefType::get({groups, panels, (red + 1) / 2, panelWidth}, b.getI8Type())
      : vnni ? MemRefType::get({groups, panels, (red + 1) / 2, 2 * panelWidth},
                               srcType.getElementType())
             : MemRefType::get({groups, panels, red, panelWidth},
                               srcType.getElementType());
  auto keyType = MemRefType::get({2}, b.getI64Type());
  SymbolTable symbols(symbolTableOp);
  auto declare = [&](StringRef name, MemRefType type, Attribute init) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&symbolTableOp->getRegion(0).front());
    auto global = memref::GlobalOp::create(
        b, StringAttr::get(ctx, name), StringAttr::get(ctx, "private"), TypeAttr::get(type),
        init, /*constant=*/UnitAttr(), b.getI64IntegerAttr(64));
    symbols.insert(global); // renames on collision
    return global;
  };
  auto packedGlobal = declare("__moe_cpu_packed_weights", packedType, b.getUnitAttr());
  auto keyGlobal = declare("__moe_cpu_packed_weights_key", keyType,
                           DenseElementsAttr::get(RankedTensorType::get({2}, b.getI64Type()),
                                                  b.getI64IntegerAttr(0).getValue()));
  return {memref::GetGlobalOp::create(b, packedType, packedGlobal.getSymName()),
          memref::GetGlobalOp::create(b, keyType, keyGlobal.getSymName())};
}

/// The panel column c of panel p (first output column `base`): the output
/// column it computes and the column of B it reads (gated panels: W/2 gate
/// columns, then the W/2 matching up ones), and whether it exists.
static std::tuple<Value, Value, Value> panelColumn(ImplicitLocOpBuilder &b, Value base, Value c,
                                                   Value outCols, int64_t width, bool gated) {
  Value out = arith::AddIOp::create(b, base, c);
  Value n = out;
  if (gated) {
    Value half = cIdx(b, width / 2);
    Value up = arith::CmpIOp::create(b, arith::CmpIPredicate::sge, c, half);
    out = arith::SelectOp::create(b, up, arith::SubIOp::create(b, out, half), out);
    n = arith::SelectOp::create(b, up, arith::AddIOp::create(b, out, outCols), out);
  }
  Value valid = arith::CmpIOp::create(b, arith::CmpIPredicate::slt, out, outCols);
  return {out, n, valid};
}

/// The panel scales of declarePackedScales from `scales` (memref<G x KB x
/// NB x f32>) and the codes `w` (memref<G x K x N x f8E4M3FN>): every (group,
/// panel) on its own core; a column's NaN codes are found by reading its
/// codes once (packing runs once per weight buffer).
static void emitPackScales(ImplicitLocOpBuilder &b, Value w, Value scales, Value packed,
                           CpuConfigAttr config, bool gated, int64_t blockK, int64_t blockN,
                           float codeScale) {
  auto dim = [&](Value m, int64_t i) -> Value { return memref::DimOp::create(b, m, i); };
  const int64_t width = config.getMicroVectors() * config.getLanes();
  const int64_t tile = config.getTileColumns(gated);
  Value red = dim(w, 1), cols = dim(w, 2);
  Value outCols = gated ? arith::DivSIOp::create(b, cols, cIdx(b, 2)).getResult() : cols;
  Value blocks = dim(packed, 2);
  scf::ParallelOp::create(
      b, ValueRange{cIdx(b, 0), cIdx(b, 0)}, ValueRange{dim(w, 0), dim(packed, 1)},
      ValueRange{cIdx(b, 1), cIdx(b, 1)}, [&](OpBuilder &pb, Location loc, ValueRange ivs) {
        ImplicitLocOpBuilder ib(loc, pb);
        Value grp = ivs[0], p = ivs[1];
        Value base = arith::MulIOp::create(ib, p, cIdx(ib, tile));
        scf::ForOp::create(
            ib, cIdx(ib, 0), blocks, cIdx(ib, 1), ValueRange{},
            [&](OpBuilder &kbBuilder, Location loc, Value kb, ValueRange) {
              ImplicitLocOpBuilder kbb(loc, kbBuilder);
              Value k0 = arith::MulIOp::create(kbb, kb, cIdx(kbb, blockK));
              Value k1 = minIdx(kbb, red, arith::AddIOp::create(kbb, k0, cIdx(kbb, blockK)));
              scf::ForOp::create(
                  kbb, cIdx(kbb, 0), cIdx(kbb, width), cIdx(kbb, 1), ValueRange{},
                  [&](OpBuilder &cBuilder, Location loc, Value c, ValueRange) {
                ImplicitLocOpBuilder cb(loc, cBuilder);
                // (Not a structured binding: the lambdas below capture n.)
                Value out, n, valid;
                std::tie(out, n, valid) = panelColumn(cb, base, c, outCols, width, gated);
                auto value = scf::IfOp::create(
                    cb, valid,
                    [&](OpBuilder &thenBuilder, Location loc) {
                      ImplicitLocOpBuilder tb(loc, thenBuilder);
                      Value s = memref::LoadOp::create(
                          tb, scales,
                          ValueRange{grp, kb, arith::DivUIOp::create(tb, n, cIdx(tb, blockN))});
                      Value scaled =
                          codeScale == 1.0f
                              ? s
                              : arith::MulFOp::create(
                                    tb, s,
                                    arith::ConstantOp::create(tb, tb.getF32FloatAttr(codeScale)))
                                    .getResult();
                      auto scan = scf::ForOp::create(
                          tb, k0, k1, cIdx(tb, 1),
                          ValueRange{arith::ConstantOp::create(tb, tb.getBoolAttr(false))},
                          [&](OpBuilder &kBuilder, Location loc, Value k, ValueRange any) {
                            ImplicitLocOpBuilder kb2(loc, kBuilder);
                            Value code = arith::BitcastOp::create(
                                kb2, kb2.getI8Type(),
                                memref::LoadOp::create(kb2, w, ValueRange{grp, k, n}));
                            Value mag = arith::AndIOp::create(
                                kb2, code,
                                arith::ConstantOp::create(kb2, kb2.getI8IntegerAttr(0x7F)));
                            Value isNan = arith::CmpIOp::create(
                                kb2, arith::CmpIPredicate::eq, mag,
                                arith::ConstantOp::create(kb2, kb2.getI8IntegerAttr(0x7F)));
                            scf::YieldOp::create(
                                kb2, ValueRange{arith::OrIOp::create(kb2, any[0], isNan)});
                          });
                      Value nan = arith::ConstantOp::create(
                          tb, tb.getF32FloatAttr(std::numeric_limits<float>::quiet_NaN()));
                      scf::YieldOp::create(
                          tb, ValueRange{arith::SelectOp::create(tb, scan.getResult(0), nan,
                                                                 scaled)});
                    },
                    [&](OpBuilder &elseBuilder, Location loc) {
                      scf::YieldOp::create(elseBuilder, loc,
                                           ValueRange{arith::ConstantOp::create(
                                               elseBuilder, loc,
                                               elseBuilder.getF32FloatAttr(0.0f))});
                    });
                memref::StoreOp::create(cb, value.getResult(0), packed,
                                        ValueRange{grp, p, kb, c});
                scf::YieldOp::create(cb);
              });
              scf::YieldOp::create(kbb);
            });
      });
}

Value cpu::declarePackedScales(ImplicitLocOpBuilder &b, Operation *symbolTableOp, Value w,
                               CpuConfigAttr config, bool gated, int64_t blockK,
                               bool zeroPoints) {
  auto srcType = cast<MemRefType>(w.getType());
  assert(srcType.getRank() == 3 && srcType.hasStaticShape() && "static [G, K, N] weights");
  int64_t groups = srcType.getDimSize(0), red = srcType.getDimSize(1),
          cols = srcType.getDimSize(2);
  int64_t outCols = gated ? cols / 2 : cols;
  int64_t tile = config.getTileColumns(gated);
  int64_t panelWidth = config.getMicroVectors() * config.getLanes();
  auto type = MemRefType::get(
      {groups, (outCols + tile - 1) / tile, (red + blockK - 1) / blockK, panelWidth},
      b.getF32Type());
  Location loc = b.getLoc();
  SymbolTable symbols(symbolTableOp);
  OpBuilder top(symbolTableOp->getContext());
  top.setInsertionPointToStart(&symbolTableOp->getRegion(0).front());
  auto global = memref::GlobalOp::create(
      top, loc,
      StringAttr::get(b.getContext(),
                      zeroPoints ? "__moe_cpu_packed_zero_points" : "__moe_cpu_packed_scales"),
      StringAttr::get(b.getContext(), "private"), TypeAttr::get(type), top.getUnitAttr(),
      /*constant=*/UnitAttr(), top.getI64IntegerAttr(64));
  symbols.insert(global); // renames on collision
  return memref::GetGlobalOp::create(b, type, global.getSymName());
}

/// The key hash of packed operands: `seed` mixed (FNV-1a steps) with the
/// bits of 64 elements sampled evenly from `m`, seen as [groups, rows,
/// cols]; `at` maps (group, row, col) to m's indices.
static Value hashSamples(ImplicitLocOpBuilder &b, Value m, Value groups, Value rows, Value cols,
                         Value seed,
                         function_ref<SmallVector<Value>(Value, Value, Value)> at) {
  Type i64 = b.getI64Type();
  Value plane = arith::MulIOp::create(b, rows, cols);
  Value total = arith::MulIOp::create(b, groups, plane);
  Value samples = minIdx(b, total, cIdx(b, 64));
  Value step = arith::MaxSIOp::create(b, arith::DivSIOp::create(b, total, cIdx(b, 64)),
                                      cIdx(b, 1));
  Type bitsType =
      b.getIntegerType(cast<MemRefType>(m.getType()).getElementType().getIntOrFloatBitWidth());
  auto loop = scf::ForOp::create(
      b, cIdx(b, 0), samples, cIdx(b, 1), ValueRange{seed},
      [&](OpBuilder &nested, Location loc, Value s, ValueRange acc) {
        ImplicitLocOpBuilder nb(loc, nested);
        Value lin = arith::MulIOp::create(nb, s, step);
        Value grp = arith::DivSIOp::create(nb, lin, plane);
        Value rem = arith::RemSIOp::create(nb, lin, plane);
        Value k = arith::DivSIOp::create(nb, rem, cols);
        Value c = arith::RemSIOp::create(nb, rem, cols);
        Value v = memref::LoadOp::create(nb, m, at(grp, k, c));
        Value bits = arith::ExtUIOp::create(nb, i64, arith::BitcastOp::create(nb, bitsType, v));
        Value mixed = arith::MulIOp::create(
            nb, arith::XOrIOp::create(nb, acc[0], bits),
            arith::ConstantOp::create(nb, nb.getI64IntegerAttr(0x100000001b3)));
        scf::YieldOp::create(nb, ValueRange{mixed});
      });
  return loop.getResult(0);
}


/// Panel p of group grp of i4 weights `w` (memref<G x K x N x i4>) into
/// `packed` (declarePackedWeights' int4 layout): for every pair row kk and
/// panel column, the codes of rows 2kk and 2kk + 1 in one byte; with
/// `vnni`, for every word row kk, the codes of rows 8kk .. 8kk + 7 in one
/// 32-bit word (byte j: rows 8kk + j and 8kk + 4 + j). Element by element:
/// an i4 occupies a byte, and packing runs once per buffer.
static void emitPackInt4Panel(ImplicitLocOpBuilder &b, Value w, Value packed, Value grp, Value p,
                              Value base, Value red, Value outCols, CpuConfigAttr config,
                              bool gated, bool vnni) {
  const int64_t width = config.getMicroVectors() * config.getLanes();
  const int64_t rowsPerElement = vnni ? 8 : 2;
  Value packedRows = memref::DimOp::create(b, packed, 2);
  Type word = vnni ? b.getI32Type() : b.getI8Type();
  scf::ForOp::create(
      b, cIdx(b, 0), packedRows, cIdx(b, 1), ValueRange{},
      [&](OpBuilder &kBuilder, Location loc, Value kk, ValueRange) {
        ImplicitLocOpBuilder kb(loc, kBuilder);
        Value k0 = arith::MulIOp::create(kb, kk, cIdx(kb, rowsPerElement));
        Value zero = arith::ConstantOp::create(kb, kb.getIntegerAttr(word, 0));
        scf::ForOp::create(
            kb, cIdx(kb, 0), cIdx(kb, width), cIdx(kb, 1), ValueRange{},
            [&](OpBuilder &cBuilder, Location loc, Value c, ValueRange) {
              ImplicitLocOpBuilder cb(loc, cBuilder);
              auto [out, n, valid] = panelColumn(cb, base, c, outCols, width, gated);
              Value nc = arith::SelectOp::create(cb, valid, n, cIdx(cb, 0));
              // Row k0 + i's code in the layout's nibble, 0 past K.
              // (Row k0 exists: kk < ceil(K / rows per element).)
              Value packedWord = arith::ExtUIOp::create(
                  cb, word, memref::LoadOp::create(cb, w, ValueRange{grp, k0, nc}));
              for (int64_t i = 1; i < rowsPerElement; ++i) {
                Value k = arith::AddIOp::create(cb, k0, cIdx(cb, i));
                Value inside = arith::CmpIOp::create(cb, arith::CmpIPredicate::slt, k, red);
                Value kc = arith::SelectOp::create(cb, inside, k, k0);
                Value code = arith::ExtUIOp::create(
                    cb, word, memref::LoadOp::create(cb, w, ValueRange{grp, kc, nc}));
                code = arith::SelectOp::create(cb, inside, code, zero);
                // Two rows: low, high nibble; eight: byte i % 4, nibble i / 4.
                int64_t shift = vnni ? 8 * (i % 4) + 4 * (i / 4) : 4 * i;
                Value shifted = arith::ShLIOp::create(
                    cb, code, arith::ConstantOp::create(cb, cb.getIntegerAttr(word, shift)));
                packedWord = arith::OrIOp::create(cb, packedWord, shifted);
              }
              packedWord = arith::SelectOp::create(cb, valid, packedWord, zero);
              memref::StoreOp::create(cb, packedWord, packed, ValueRange{grp, p, kk, c});
              scf::YieldOp::create(cb);
            });
        scf::YieldOp::create(kb);
      });
}

/// The panel scales and zero points of int4 weights (declarePackedScales):
/// s[g][kb][n] and z[g][kb][n] (or nothing without zero points) per panel
/// column; padding columns get the scale 0 and the zero point 8.
static void emitPackInt4Scales(ImplicitLocOpBuilder &b, Value w, Value scales, Value zeroPoints,
                               Value packed, Value packedZeroPoints, CpuConfigAttr config,
                               bool gated) {
  auto dim = [&](Value m, int64_t i) -> Value { return memref::DimOp::create(b, m, i); };
  const int64_t width = config.getMicroVectors() * config.getLanes();
  const int64_t tile = config.getTileColumns(gated);
  Value cols = dim(w, 2);
  Value outCols = gated ? arith::DivSIOp::create(b, cols, cIdx(b, 2)).getResult() : cols;
  scf::ParallelOp::create(
      b, ValueRange{cIdx(b, 0), cIdx(b, 0), cIdx(b, 0)},
      ValueRange{dim(w, 0), dim(packed, 1), dim(packed, 2)},
      ValueRange{cIdx(b, 1), cIdx(b, 1), cIdx(b, 1)},
      [&](OpBuilder &pb, Location loc, ValueRange ivs) {
        ImplicitLocOpBuilder ib(loc, pb);
        Value grp = ivs[0], p = ivs[1], kb = ivs[2];
        Value base = arith::MulIOp::create(ib, p, cIdx(ib, tile));
        scf::ForOp::create(
            ib, cIdx(ib, 0), cIdx(ib, width), cIdx(ib, 1), ValueRange{},
            [&](OpBuilder &cBuilder, Location loc, Value c, ValueRange) {
              ImplicitLocOpBuilder cb(loc, cBuilder);
              auto [out, n, valid] = panelColumn(cb, base, c, outCols, width, gated);
              Value nc = arith::SelectOp::create(cb, valid, n, cIdx(cb, 0));
              Value s = memref::LoadOp::create(cb, scales, ValueRange{grp, kb, nc});
              s = arith::SelectOp::create(cb, valid, s,
                                          arith::ConstantOp::create(cb, cb.getF32FloatAttr(0.0f)));
              memref::StoreOp::create(cb, s, packed, ValueRange{grp, p, kb, c});
              if (zeroPoints) {
                Value z = arith::SIToFPOp::create(
                    cb, cb.getF32Type(),
                    arith::ExtUIOp::create(
                        cb, cb.getI32Type(),
                        memref::LoadOp::create(cb, zeroPoints, ValueRange{grp, kb, nc})));
                z = arith::SelectOp::create(
                    cb, valid, z, arith::ConstantOp::create(cb, cb.getF32FloatAttr(8.0f)));
                memref::StoreOp::create(cb, z, packedZeroPoints, ValueRange{grp, p, kb, c});
              }
              scf::YieldOp::create(cb);
            });
      });
}

void cpu::emitPackWeights(ImplicitLocOpBuilder &b, Value w, Value packed, Value key,
                          CpuConfigAttr config, bool gated, bool vnni, bool transposed,
                          Value scales, Value packedScales, int64_t blockK, int64_t blockN,
                          Value zeroPoints, Value packedZeroPoints) {
  const int64_t lanes = config.getLanes();
  const bool int4 = cast<MemRefType>(w.getType()).getElementType().isInteger(4);
  const int64_t microVecs = config.getMicroVectors();
  Type elt = cast<MemRefType>(w.getType()).getElementType();
  Type i64 = b.getI64Type();
  auto dim = [&](Value m, int64_t i) -> Value { return memref::DimOp::create(b, m, i); };
  Value groups = dim(w, 0), red = dim(w, transposed ? 2 : 1), cols = dim(w, transposed ? 1 : 2),
        panels = dim(packed, 1);
  // Element (k, c) of a group: w[g][k][c], or w[g][c][k] transposed.
  auto at = [&](Value grp, Value k, Value c) -> SmallVector<Value> {
    if (transposed)
      return {grp, c, k};
    return {grp, k, c};
  };
  Value outCols = gated ? arith::DivSIOp::create(b, cols, cIdx(b, 2)).getResult() : cols;
  int64_t tile = config.getTileColumns(gated);

  // Key of this call's buffer: its address and a hash of 64 sampled elements.
  Value address = arith::IndexCastOp::create(
      b, i64, memref::ExtractAlignedPointerAsIndexOp::create(b, w));
  Value hash = hashSamples(b, w, groups, red, cols,
                           arith::ConstantOp::create(b, b.getI64IntegerAttr(0x811c9dc5)), at);
  // FP8: the scales' buffer and 64 sampled scales are part of the key.
  if (scales) {
    Value sAddress = arith::IndexCastOp::create(
        b, i64, memref::ExtractAlignedPointerAsIndexOp::create(b, scales));
    Value seeded = arith::MulIOp::create(
        b, arith::XOrIOp::create(b, hash, sAddress),
        arith::ConstantOp::create(b, b.getI64IntegerAttr(0x100000001b3)));
    hash = hashSamples(b, scales, dim(scales, 0), dim(scales, 1), dim(scales, 2), seeded,
                       [](Value grp, Value k, Value c) -> SmallVector<Value> {
                         return {grp, k, c};
                       });
  }
  // int4: the zero points' too.
  if (zeroPoints) {
    Value zAddress = arith::IndexCastOp::create(
        b, i64, memref::ExtractAlignedPointerAsIndexOp::create(b, zeroPoints));
    Value seeded = arith::MulIOp::create(
        b, arith::XOrIOp::create(b, hash, zAddress),
        arith::ConstantOp::create(b, b.getI64IntegerAttr(0x100000001b3)));
    hash = hashSamples(b, zeroPoints, dim(zeroPoints, 0), dim(zeroPoints, 1),
                       dim(zeroPoints, 2), seeded,
                       [](Value grp, Value k, Value c) -> SmallVector<Value> {
                         return {grp, k, c};
                       });
  }
  Value sameAddress = arith::CmpIOp::create(
      b, arith::CmpIPredicate::eq, memref::LoadOp::create(b, key, ValueRange{cIdx(b, 0)}),
      address);
  Value sameHash = arith::CmpIOp::create(
      b, arith::CmpIPredicate::eq, memref::LoadOp::create(b, key, ValueRange{cIdx(b, 1)}),
      hash);
  Value stale = arith::XOrIOp::create(b, arith::AndIOp::create(b, sameAddress, sameHash),
                                      arith::ConstantOp::create(b, b.getBoolAttr(true)));

  scf::IfOp::create(b, stale, [&](OpBuilder &nested, Location loc) {
    ImplicitLocOpBuilder nb(loc, nested);
    // Pack: every (group, panel) on its own core, rows copied as vectors.
    scf::ParallelOp::create(
        nb, ValueRange{cIdx(nb, 0), cIdx(nb, 0)}, ValueRange{groups, panels},
        ValueRange{cIdx(nb, 1), cIdx(nb, 1)},
        [&](OpBuilder &pb, Location loc, ValueRange ivs) {
          ImplicitLocOpBuilder ib(loc, pb);
          Value grp = ivs[0], p = ivs[1];
          Value base = arith::MulIOp::create(ib, p, cIdx(ib, tile));
          auto vt = VectorType::get({lanes}, elt);
          // Row k of the panel's columns, vector v (masked, zero-padded).
          auto loadRow = [&](ImplicitLocOpBuilder &rb, Value k, int64_t v) -> Value {
            Value zero = arith::ConstantOp::create(
                rb, vt, DenseElementsAttr::get(vt, rb.getZeroAttr(elt)));
            // Gated panels: W/2 gate columns, then the W/2 matching up ones.
            int64_t half = microVecs / 2;
            bool up = gated && v >= half;
            int64_t offset = (gated ? (up ? v - half : v) : v) * lanes;
            Value col = arith::AddIOp::create(rb, base, cIdx(rb, offset));
            Value mask = columnMask(rb, col, outCols, lanes);
            if (up)
              col = arith::AddIOp::create(rb, col, outCols);
            if (!transposed)
              return vector::MaskedLoadOp::create(rb, vt, w, ValueRange{grp, k, col}, mask,
                                                  zero);
            // A column of the stored [N, K] matrix: one element per lane
            // (packing runs once per weight buffer).
            Value column = zero;
            for (int64_t l = 0; l < lanes; ++l) {
              Value on = vector::ExtractOp::create(rb, mask, ArrayRef<int64_t>{l});
              Value c = arith::SelectOp::create(rb, on, arith::AddIOp::create(rb, col, cIdx(rb, l)),
                                                cIdx(rb, 0));
              Value x = memref::LoadOp::create(rb, w, at(grp, k, c));
              Value z = arith::ConstantOp::create(rb, rb.getZeroAttr(elt));
              Value lane = arith::SelectOp::create(rb, on, x, z);
              column = vector::InsertOp::create(rb, lane, column, ArrayRef<int64_t>{l});
            }
            return column;
          };
          if (int4) {
            emitPackInt4Panel(ib, w, packed, grp, p, base, red, outCols, config, gated, vnni);
            return;
          }
          Value rowsOut = vnni ? arith::CeilDivSIOp::create(ib, red, cIdx(ib, 2)).getResult()
                               : red;
          // FP8 codes packed pairwise are stored in the lane order of the
          // micro-kernel's byte unpacks (fp8DotPairs): per 128-bit lane L
          // of a 64-byte chunk, the bytes 8L..8L+7 of vector 2j's pairs and
          // then those of vector 2j + 1's.
          const bool unpackOrder = vnni && isa<Float8E4M3FNType>(elt);
          SmallVector<int64_t> unpackMask;
          for (int64_t l = 0; l < 4; ++l)
            for (int64_t half = 0; half < 2; ++half)
              for (int64_t i = 0; i < 8; ++i)
                unpackMask.push_back(half * 2 * lanes + 8 * l + i);
          scf::ForOp::create(
              ib, cIdx(ib, 0), rowsOut, cIdx(ib, 1), ValueRange{},
              [&](OpBuilder &kb, Location loc, Value k, ValueRange) {
                ImplicitLocOpBuilder rb(loc, kb);
                Value previousPair;
                for (int64_t v = 0; v < microVecs; ++v) {
                  if (!vnni) {
                    vector::StoreOp::create(rb, loadRow(rb, k, v), packed,
                                            ValueRange{grp, p, k, cIdx(rb, v * lanes)});
                    continue;
                  }
                  // Pairs (row 2k, row 2k+1) interleaved column by column; a
                  // missing last odd row reads as zeros.
                  Value k0 = arith::MulIOp::create(rb, k, cIdx(rb, 2));
                  Value k1 = arith::AddIOp::create(rb, k0, cIdx(rb, 1));
                  Value even = loadRow(rb, k0, v);
                  Value hasOdd = arith::CmpIOp::create(rb, arith::CmpIPredicate::slt, k1, red);
                  Value oddRow = minIdx(rb, k1, arith::SubIOp::create(rb, red, cIdx(rb, 1)));
                  Value oddVec = arith::SelectOp::create(
                      rb, hasOdd, loadRow(rb, oddRow, v),
                      arith::ConstantOp::create(
                          rb, vt, DenseElementsAttr::get(vt, rb.getZeroAttr(elt))));
                  SmallVector<int64_t> interleave;
                  for (int64_t l = 0; l < lanes; ++l) {
                    interleave.push_back(l);
                    interleave.push_back(lanes + l);
                  }
                  Value pair = vector::ShuffleOp::create(rb, even, oddVec, interleave);
                  if (unpackOrder) {
                    // Vectors 2j and 2j + 1 make one chunk.
                    if (v % 2 == 0) {
                      previousPair = pair;
                      continue;
                    }
                    pair = vector::ShuffleOp::create(rb, previousPair, pair, unpackMask);
                    vector::StoreOp::create(
                        rb, pair, packed, ValueRange{grp, p, k, cIdx(rb, 2 * (v - 1) * lanes)});
                    continue;
                  }
                  vector::StoreOp::create(rb, pair, packed,
                                          ValueRange{grp, p, k, cIdx(rb, 2 * v * lanes)});
                }
                scf::YieldOp::create(rb);
              });
        });
    if (scales && int4)
      emitPackInt4Scales(nb, w, scales, zeroPoints, packedScales, packedZeroPoints, config,
                         gated);
    else if (scales)
      // The FMA path's codes are q * 2^-8 (fp8TimesTwoToMinus8), the dot
      // product's q (fp8DotPairs).
      emitPackScales(nb, w, scales, packedScales, config, gated, blockK, blockN,
                     vnni ? 1.0f : 256.0f);
    memref::StoreOp::create(nb, address, key, ValueRange{cIdx(nb, 0)});
    memref::StoreOp::create(nb, hash, key, ValueRange{cIdx(nb, 1)});
    scf::YieldOp::create(nb);
  });
}

namespace {
/// The loops of the per-call packings: (row block, panel) pairs on all
/// cores, then the block's rows in order; `body(b, panel, row)`.
void forEachPanelRow(ImplicitLocOpBuilder &b, Value rows, Value panels, int64_t rowBlock,
                     function_ref<void(ImplicitLocOpBuilder &, Value, Value)> body) {
  scf::ParallelOp::create(
      b, ValueRange{cIdx(b, 0), cIdx(b, 0)}, ValueRange{ceilDiv(b, rows, rowBlock), panels},
      ValueRange{cIdx(b, 1), cIdx(b, 1)}, [&](OpBuilder &nested, Location loc, ValueRange ivs) {
        ImplicitLocOpBuilder nb(loc, nested);
        Value begin = arith::MulIOp::create(nb, ivs[0], cIdx(nb, rowBlock));
        Value end = minIdx(nb, rows, arith::AddIOp::create(nb, begin, cIdx(nb, rowBlock)));
        Value p = ivs[1];
        scf::ForOp::create(nb, begin, end, cIdx(nb, 1), ValueRange{},
                           [&](OpBuilder &rowBuilder, Location loc, Value r, ValueRange) {
                             ImplicitLocOpBuilder rb(loc, rowBuilder);
                             body(rb, p, r);
                             scf::YieldOp::create(rb);
                           });
      });
}
} // namespace

void cpu::emitPackRows(ImplicitLocOpBuilder &b, Value src, Value packed, CpuConfigAttr config) {
  const int64_t lanes = config.getLanes();
  const int64_t width = config.getMicroVectors() * lanes;
  Value cols = memref::DimOp::create(b, src, 1);
  forEachPanelRow(b, memref::DimOp::create(b, src, 0), memref::DimOp::create(b, packed, 0),
                  config.getRowBlock(), [&](ImplicitLocOpBuilder &rb, Value p, Value r) {
                    Value base = arith::MulIOp::create(rb, p, cIdx(rb, width));
                    for (int64_t v = 0; v < width / lanes; ++v) {
                      Value col = arith::AddIOp::create(rb, base, cIdx(rb, v * lanes));
                      Value x = loadF32Vector(rb, src, {r, col}, columnMask(rb, col, cols, lanes));
                      vector::StoreOp::create(rb, x, packed,
                                              ValueRange{p, r, cIdx(rb, v * lanes)});
                    }
                  });
}

void cpu::emitPackColumns(ImplicitLocOpBuilder &b, Value src, Value packed,
                          CpuConfigAttr config, bool appendOnes) {
  const int64_t microRows = config.getMicroRows();
  Value cols = memref::DimOp::create(b, src, 1);
  forEachPanelRow(
      b, memref::DimOp::create(b, src, 0), memref::DimOp::create(b, packed, 0),
      config.getRowBlock(), [&](ImplicitLocOpBuilder &rb, Value p, Value r) {
        Value base = arith::MulIOp::create(rb, p, cIdx(rb, microRows));
        Value zero = arith::ConstantOp::create(rb, rb.getF32FloatAttr(0.0f));
        Value one = arith::ConstantOp::create(rb, rb.getF32FloatAttr(1.0f));
        for (int64_t i = 0; i < microRows; ++i) {
          Value col = arith::AddIOp::create(rb, base, cIdx(rb, i));
          Value inside = arith::CmpIOp::create(rb, arith::CmpIPredicate::slt, col, cols);
          Value at = arith::SelectOp::create(rb, inside, col, cIdx(rb, 0));
          Value x = toF32(rb, memref::LoadOp::create(rb, src, ValueRange{r, at}));
          Value pad = zero;
          if (appendOnes)
            pad = arith::SelectOp::create(
                rb, arith::CmpIOp::create(rb, arith::CmpIPredicate::eq, col, cols), one, zero);
          memref::StoreOp::create(rb, arith::SelectOp::create(rb, inside, x, pad), packed,
                                  ValueRange{p, r, cIdx(rb, i)});
        }
      });
}

void cpu::declareFunction(OpBuilder &b, Location loc, ModuleOp module, StringRef name,
                          FunctionType type) {
  if (module.lookupSymbol(name))
    return;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(module.getBody());
  func::FuncOp::create(b, loc, name, type).setPrivate();
}

MemRefType cpu::kernelArgumentType(MemRefType type) {
  SmallVector<int64_t> shape(type.getRank(), ShapedType::kDynamic);
  SmallVector<int64_t> strides(type.getRank(), ShapedType::kDynamic);
  if (!strides.empty())
    strides.back() = 1;
  auto layout = StridedLayoutAttr::get(type.getContext(), ShapedType::kDynamic, strides);
  return MemRefType::get(shape, type.getElementType(), layout);
}

void cpu::callKernel(ImplicitLocOpBuilder &b, Operation *symbolTableOp, StringRef name,
                     ValueRange args,
                     function_ref<void(ImplicitLocOpBuilder &, ValueRange)> body) {
  SmallVector<Value> callArgs;
  SmallVector<Type> types;
  std::string signature;
  llvm::raw_string_ostream os(signature);
  for (Value v : args) {
    Type t = v.getType();
    if (auto mt = dyn_cast<MemRefType>(t)) {
      MemRefType kt = kernelArgumentType(mt);
      if (kt != mt)
        v = memref::CastOp::create(b, kt, v);
      t = kt;
    }
    callArgs.push_back(v);
    types.push_back(t);
    os << t << ";";
  }
  // One function per body variant (the name) and argument types.
  std::string symbol = (name + "_" + llvm::utohexstr(llvm::xxh3_64bits(signature))).str();
  auto fnType = FunctionType::get(b.getContext(), types, {});
  auto fn = dyn_cast_or_null<func::FuncOp>(SymbolTable::lookupSymbolIn(symbolTableOp, symbol));
  if (!fn) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(&symbolTableOp->getRegion(0).front());
    fn = func::FuncOp::create(b, symbol, fnType);
    fn.setPrivate();
    Block *entry = fn.addEntryBlock();
    b.setInsertionPointToStart(entry);
    body(b, entry->getArguments());
    func::ReturnOp::create(b);
  }
  func::CallOp::create(b, fn, callArgs);
}

//===----------------------------------------------------------------------===//
// Configurations
//===----------------------------------------------------------------------===//

CpuConfigAttr cpu::defaultCpuConfig(MLIRContext *ctx) {
  return CpuConfigAttr::get(ctx, /*vector_bits=*/512, /*registers=*/32, /*micro_rows=*/6,
                            /*micro_vectors=*/4, /*row_block=*/48, /*col_block=*/256,
                            /*prefetch_rows=*/32, /*bf16_dot=*/false, /*amx=*/false,
                            /*fp8_dot=*/false, /*int8_dot=*/Int8Dot::none);
}

CpuConfigAttr cpu::chooseCpuConfig(MLIRContext *ctx, const llvm::StringMap<bool> &features) {
  auto has = [&](StringRef name) { return features.lookup(name); };
  if (has("avx512f")) {
    // 32 zmm: 6 x 4 accumulators + 4 panel vectors + 1 broadcast = 29.
    // AMX (Sapphire Rapids and later): the bf16 GEMMs on the tile unit,
    // measured on 2 cores there at 24x the vdpbf16ps rate per core (which
    // is no faster than FMA: one port).
    // AVX512_VBMI: FP8 codes become bf16 by byte lookups (vpermi2b), so FP8
    // GEMMs take the dot product too.
    // AVX512_VNNI: int4 GEMMs of the int8-activation mode on vpdpbusd.
    bool dot = has("avx512bf16");
    return CpuConfigAttr::get(ctx, 512, 32, 6, 4, 48, 256, 32, dot,
                              dot && has("amx-bf16") && has("amx-tile"),
                              dot && has("avx512vbmi"),
                              has("avx512vnni") ? Int8Dot::vpdpbusd : Int8Dot::none);
  }
  // 16 ymm (AVX2) or xmm (SSE, NEON's 128-bit view): 6 x 2 accumulators + 2
  // panel vectors + 1 broadcast = 15, the 6 x 16 micro-kernel of BLIS and
  // OpenBLAS on Haswell. Its panel rows are 4x shorter than AVX-512's, so
  // the prefetch runs 4x as many rows ahead (the same 8 KiB of f32 weights;
  // measured at decode, bf16 on the AVX2 configuration: 10.4 ms at 32 rows,
  // 8.6 ms at 128).
  // AVX2: int4 GEMMs of the int8-activation mode on vpmaddubsw + vpmaddwd,
  // or with AVX-VNNI (Alder Lake and later clients) on 256-bit vpdpbusd.
  int64_t bits = has("avx2") && has("fma") ? 256 : 128;
  Int8Dot int8Dot = bits != 256        ? Int8Dot::none
                    : has("avxvnni") ? Int8Dot::vpdpbusd
                                     : Int8Dot::vpmaddubsw;
  return CpuConfigAttr::get(ctx, bits, 16, 6, 2, 48, 256, 128, /*bf16_dot=*/false,
                            /*amx=*/false, /*fp8_dot=*/false, int8Dot);
}

FailureOr<llvm::StringMap<bool>> cpu::cpuFeatures(StringRef cpuName) {
  if (cpuName == "native")
    return llvm::StringMap<bool>(llvm::sys::getHostCPUFeatures());
  if (llvm::X86::parseArchX86(cpuName) == llvm::X86::CK_None)
    return failure();
  SmallVector<StringRef> names;
  llvm::X86::getFeaturesForCPU(cpuName, names, /*NeedPlus=*/false);
  llvm::StringMap<bool> features;
  // With the features each one implies: LLVM lists some CPUs' features
  // without them (alderlake: avxvnni but not avx2 or fma), which made such
  // a CPU look like an SSE one.
  for (StringRef name : names) {
    features[name] = true;
    llvm::X86::updateImpliedFeatures(name, /*Enabled=*/true, features);
  }
  return features;
}

CpuConfigAttr cpu::cpuConfigOf(Operation *op) {
  for (Operation *o = op; o; o = o->getParentOp())
    if (auto config = o->getAttrOfType<CpuConfigAttr>(CpuConfigAttr::getAttrName()))
      return config;
  return defaultCpuConfig(op->getContext());
}
