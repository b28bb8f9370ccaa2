//===- MmaGemm.cpp - tensor-core grouped expert GEMMs ---------------------===//
//
// See MmaGemm.h. One builder emits gemm1 and gemm2 in every variant; the
// structure of a kernel:
//
//   tile order -> (pidM, pidN)            (groups of kMmaGroupM M-tiles)
//   rows[tileM] <- the plan's A rows       (the gather)
//   prologue: stages 0..S-2 issued         (cp.async, one group per stage)
//   for kt: wait_group(S-2); barrier;      (stage kt landed, stage kt-1 free)
//           issue stage kt+S-1; commit;
//           2 x (ldmatrix A, ldmatrix.trans B, mma.sync m16n8k16)
//   epilogue from the accumulator fragments (bias, activation / weight)
//
//===----------------------------------------------------------------------===//

#include "lowering/gpu/MmaGemm.h"

#include "lowering/gpu/IRBuilder.h"
#include "lowering/gpu/Kernels.h"
#include "lowering/gpu/WarpLayouts.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

using warp_layout::M16N8K16;

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

std::string MmaGemmConfig::name() const {
  std::string n = "moe_mma_";
  if (kind == Kind::gemm1) {
    n += "gemm1_";
    if (gather)
      n += "gather_";
    n += stringifyActivation(act).str();
  } else {
    n += "gemm2";
    if (weighted)
      n += "_weighted";
    if (combine)
      n += shared ? "_combine_shared" : "_combine";
  }
  if (bias)
    n += "_bias";
  n += elt == MmaElt::bf16 ? "_bf16" : "_f16";
  n += "_m" + std::to_string(tileM);
  if (kind == Kind::gemm2 && outF32)
    n += "_outf32";
  if (wgmma)
    n += "_wgmma";
  return n;
}

std::optional<MmaGemmConfig> MmaGemmConfig::parse(StringRef fullName) {
  // The inverse of name(), by enumeration (a few hundred variants).
  bool wgmma = fullName.ends_with("_wgmma");
  for (MmaElt elt : {MmaElt::bf16, MmaElt::f16})
    for (int64_t tileM : {16, 32, 64, 128})
      for (bool bias : {false, true}) {
        if (wgmma ? tileM < 64 : tileM > 64)
          continue;
        MmaGemmConfig c;
        c.elt = elt;
        c.tileM = tileM;
        c.bias = bias;
        c.wgmma = wgmma;
        c.kind = Kind::gemm1;
        for (bool gather : {false, true})
          for (uint32_t a = 0; a <= getMaxEnumValForActivation(); ++a) {
            c.gather = gather;
            c.act = *symbolizeActivation(a);
            if (c.name() == fullName)
              return c;
          }
        c = MmaGemmConfig();
        c.wgmma = wgmma;
        c.elt = elt;
        c.tileM = tileM;
        c.bias = bias;
        c.kind = Kind::gemm2;
        for (bool weighted : {false, true})
          for (bool outF32 : {false, true})
            for (int combine = 0; combine < (outF32 ? 3 : 1); ++combine) {
              c.weighted = weighted;
              c.outF32 = outF32;
              c.combine = combine > 0;
              c.shared = combine == 2;
              if (c.name() == fullName)
                return c;
            }
      }
  return std::nullopt;
}

Type gpu_lowering::mmaElementType(MLIRContext *ctx, MmaElt elt) {
  return elt == MmaElt::bf16 ? Type(BFloat16Type::get(ctx)) : Type(Float16Type::get(ctx));
}

std::optional<MmaElt> gpu_lowering::mmaEltOf(Type type) {
  if (type.isBF16())
    return MmaElt::bf16;
  if (type.isF16())
    return MmaElt::f16;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// The kernel
//===----------------------------------------------------------------------===//

namespace {

MemRefType flat(Type elt) { return MemRefType::get({ShapedType::kDynamic}, elt); }

MemRefType workgroup(MLIRContext *ctx, int64_t n, Type elt) {
  auto space = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  return MemRefType::get({n}, elt, MemRefLayoutAttrInterface(), space);
}

/// Warp geometry of a variant: warpsM x warpsN warps, each computing
/// mTiles x nTiles m16n8 tiles of every part.
struct Geometry {
  int64_t tileM, tileN, parts;
  int64_t warpsM, warpsN, warpM, warpN, mTiles, nTiles;
  int64_t threads, stages;
  int64_t aStride = kMmaTileK + kMmaPad;  // elements per A row in shared memory
  int64_t bStride = kMmaTileN + kMmaPad;  // elements per B row (all parts)
  int64_t aStage() const { return tileM * aStride; }
  int64_t bStage() const { return kMmaTileK * bStride; }
  int64_t accIndex(int part, int64_t mt, int64_t nt, int64_t i) const {
    return ((part * mTiles + mt) * nTiles + nt) * M16N8K16::kCRegs + i;
  }
  int64_t numAcc() const { return parts * mTiles * nTiles * M16N8K16::kCRegs; }

  explicit Geometry(const MmaGemmConfig &c) {
    tileM = c.tileM;
    tileN = c.tileN();
    parts = c.parts();
    threads = c.threads();
    stages = c.stages();
    if (c.wgmma) {
      // One m64n128k16 per warpgroup and k16 step: warp w of warpgroup v
      // owns rows 64 v + 16 w .. 64 v + 16 w + 15 of every column
      // (Wgmma::dRowOffset), i.e. warp 4 v + w of the block owns rows
      // 16 (4 v + w): the accumulators are those of a (tileM / 16) x 1 warp
      // grid of 16 x tileN warp tiles, in the wgmma register order
      // (accIndex = the d_i index). The stages hold core matrices without
      // padding (wgmmaA/BIndex).
      warpsM = tileM / 16;
      warpsN = 1;
      warpM = 16;
      warpN = tileN;
      mTiles = 1;
      nTiles = tileN / M16N8K16::N;
      aStride = kMmaTileK;
      bStride = kMmaTileN;
      return;
    }
    warpsM = tileM >= 32 ? 2 : 1;
    warpsN = (kMmaThreads / warp_layout::kWarpSize) / warpsM;
    warpM = tileM / warpsM;
    warpN = tileN / warpsN;
    mTiles = warpM / M16N8K16::M;
    nTiles = warpN / M16N8K16::N;
  }
};

class MmaGemmBuilder {
public:
  MmaGemmBuilder(IRB &e, const MmaGemmConfig &c, ValueRange args, ArrayRef<BlockArgument> wg)
      : e(e), b(e.b), c(c), g(c), args(args.begin(), args.end()) {
    ctx = b.getContext();
    T = mmaElementType(ctx, c.elt);
    aSmem = wg[0];
    bSmem = wg[1];
    rows = wg[2];
    lastOf = c.combine ? Value(wg[3]) : Value();
  }

  void build();

private:
  IRB &e;
  ImplicitLocOpBuilder &b;
  const MmaGemmConfig &c;
  Geometry g;
  SmallVector<Value> args;
  MLIRContext *ctx;
  Type T;
  Value aSmem, bSmem, rows, lastOf;
  // Set in build().
  Value tid, lane, groupID, tig, wm, wn;
  Value A, Bw, bias, out, K, N, W, pidM, rowBase, n0, ex, wBase, aligned;

  Value idx(int64_t v) { return e.idx(v); }
  Value zeroT() { return arith::ConstantOp::create(b, b.getFloatAttr(T, 0.0)); }

  Value aRowOf(Value lr);
  Value aIndex(Value r, Value k);
  Value bIndex(Value k, Value n);
  SmallVector<Value> computeStageWgmma(Value stage, ValueRange acc);
  Value descriptor(Value smem, Value byteOffset, int64_t lbo, int64_t sbo);
  void issueStage(Value kt, Value stage);
  SmallVector<Value> computeStage(Value stage, ValueRange acc);
  void epilogue(ArrayRef<Value> acc);
  Value alignedTo16(Value memref);
};

/// The A row (i32; -1 for a padding row) of tile row `lr`.
Value MmaGemmBuilder::aRowOf(Value lr) {
  Value sorted = args[1];
  Value p = e.addi(rowBase, lr);
  Value r = e.load(sorted, p);
  if (c.kind == MmaGemmConfig::Kind::gemm2)
    return e.select(e.ge(r, e.ci32(0)), e.toI32(p), e.ci32(-1));
  if (!c.gather)
    return r;
  Value src = args[2];
  return e.ifElse(
      e.ge(r, e.ci32(0)), {e.i32()},
      [&](IRB &e) { return SmallVector<Value>{e.load(src, e.toIndex(r))}; },
      [&](IRB &e) { return SmallVector<Value>{e.ci32(-1)}; })[0];
}

// Shared-memory placement of a stage's elements (k = 0..kMmaTileK-1; k of
// A and n of B multiples of 8 at a chunk's start). mma.sync: padded rows
// (ldmatrix). wgmma: the canonical no-swizzle layout of 8 x 16-byte core
// matrices (WarpLayouts.h, Wgmma): A K-major, core (m/8, k/8) at element
// ((k/8) * tileM/8 + m/8) * 64, so SBO = 128 bytes and LBO = tileM * 16
// bytes; B MN-major, core (n/8, k/8) at ((k/8) * kMmaTileN/8 + n/8) * 64, so
// SBO = 128 bytes and LBO = kMmaTileN * 16 bytes.
Value MmaGemmBuilder::aIndex(Value r, Value k) {
  if (!c.wgmma)
    return e.addi(e.muli(r, idx(g.aStride)), k);
  Value core = e.addi(e.muli(e.divui(k, idx(8)), idx(g.tileM / 8)), e.divui(r, idx(8)));
  return e.addi(e.addi(e.muli(core, idx(64)), e.muli(e.remui(r, idx(8)), idx(8))),
                e.remui(k, idx(8)));
}

Value MmaGemmBuilder::bIndex(Value k, Value n) {
  if (!c.wgmma)
    return e.addi(e.muli(k, idx(g.bStride)), n);
  Value core = e.addi(e.muli(e.divui(k, idx(8)), idx(kMmaTileN / 8)), e.divui(n, idx(8)));
  return e.addi(e.addi(e.muli(core, idx(64)), e.muli(e.remui(k, idx(8)), idx(8))),
                e.remui(n, idx(8)));
}

Value MmaGemmBuilder::alignedTo16(Value memref) {
  Value ptr = memref::ExtractAlignedPointerAsIndexOp::create(b, memref);
  return e.eq(e.remui(ptr, idx(16)), idx(0));
}

/// Issues the loads of k-tile `kt` into pipeline stage `stage`: 16-byte
/// cp.async chunks (zero-filled outside the matrices) when `aligned`, else
/// element loads and shared-memory stores.
void MmaGemmBuilder::issueStage(Value kt, Value stage) {
  constexpr int64_t kChunk = 8; // elements of 16 bytes
  Value k0 = e.muli(kt, idx(kMmaTileK));
  Value c8 = idx(kChunk);
  auto copy = [&](Value src, Value srcIndex, Value dst, Value dstIndex, Value valid,
                  function_ref<Value(IRB &, Value)> elementValid) {
    e.ifElse(
        aligned, {},
        [&](IRB &e) {
          // Out-of-range chunks read nothing (src-size 0) from a valid address.
          Value n = e.select(valid, c8, idx(0));
          Value at = e.select(valid, srcIndex, idx(0));
          nvgpu::DeviceAsyncCopyOp::create(
              e.b, nvgpu::DeviceAsyncTokenType::get(ctx), dst, ValueRange{dstIndex}, src,
              ValueRange{at}, e.b.getIndexAttr(kChunk), n, e.b.getUnitAttr());
          return SmallVector<Value>{};
        },
        [&](IRB &e) {
          for (int64_t h = 0; h < kChunk; ++h) {
            Value hv = e.idx(h);
            Value v = e.guardedLoad(elementValid(e, hv), T, [&](IRB &e) {
              return e.load(src, e.addi(srcIndex, hv));
            });
            e.store(v, dst, e.addi(dstIndex, hv));
          }
          return SmallVector<Value>{};
        });
  };

  // A: tileM rows x kMmaTileK columns = tileM * 4 chunks.
  int64_t aChunks = g.tileM * (kMmaTileK / kChunk);
  for (int64_t q = 0; q * g.threads < aChunks; ++q) {
    Value ch = e.addi(tid, idx(q * g.threads));
    auto body = [&](IRB &e) {
      Value r = e.divui(ch, idx(kMmaTileK / kChunk));
      Value col = e.muli(e.remui(ch, idx(kMmaTileK / kChunk)), c8);
      Value ar = e.load(rows, r);
      Value k = e.addi(k0, col);
      Value rowOk = e.ge(ar, e.ci32(0));
      Value arIdx = e.toIndex(e.select(rowOk, ar, e.ci32(0)));
      Value srcIndex = e.addi(e.muli(arIdx, K), k);
      Value dstIndex = e.addi(e.muli(stage, idx(g.aStage())), aIndex(r, col));
      copy(A, srcIndex, aSmem, dstIndex, e.andi(rowOk, e.ult(k, K)),
           [&](IRB &e, Value h) { return e.andi(rowOk, e.ult(e.addi(k, h), K)); });
    };
    if ((q + 1) * g.threads > aChunks)
      e.ifThen(e.ult(ch, idx(aChunks)), body);
    else
      body(e);
  }

  // B: kMmaTileK rows x kMmaTileN columns (part p's columns at p * tileN).
  int64_t rowChunks = kMmaTileN / kChunk, partChunks = g.tileN / kChunk;
  int64_t bChunks = kMmaTileK * rowChunks;
  for (int64_t q = 0; q * g.threads < bChunks; ++q) {
    Value ch = e.addi(tid, idx(q * g.threads));
    Value kr = e.divui(ch, idx(rowChunks)), cc = e.remui(ch, idx(rowChunks));
    Value part = e.divui(cc, idx(partChunks));
    Value col = e.addi(n0, e.muli(e.remui(cc, idx(partChunks)), c8));
    Value k = e.addi(k0, kr);
    Value kOk = e.ult(k, K);
    Value srcIndex =
        e.addi(wBase, e.addi(e.muli(e.select(kOk, k, idx(0)), W),
                             e.addi(e.muli(part, N), col)));
    Value dstIndex = e.addi(e.muli(stage, idx(g.bStage())), bIndex(kr, e.muli(cc, c8)));
    copy(Bw, srcIndex, bSmem, dstIndex, e.andi(kOk, e.ult(col, N)),
         [&](IRB &e, Value h) { return e.andi(kOk, e.ult(e.addi(col, h), N)); });
  }
}

/// The MMAs of one stage: for each k16 step, A fragments by ldmatrix.x4, B
/// fragments by ldmatrix.x4.trans (two n8 tiles per load), then mma.sync.
SmallVector<Value> MmaGemmBuilder::computeStage(Value stage, ValueRange accIn) {
  SmallVector<Value> acc(accIn.begin(), accIn.end());
  Type i32 = e.i32();
  Value l16 = e.remui(lane, idx(16)), hi8 = e.muli(e.divui(lane, idx(16)), idx(8));
  Value aBase = e.muli(stage, idx(g.aStage())), bBase = e.muli(stage, idx(g.bStage()));
  auto operand = [&](Value frag, int64_t i) -> Value {
    Value v = vector::ExtractOp::create(b, frag, ArrayRef<int64_t>{i});
    if (c.elt == MmaElt::bf16) // nvvm.mma.sync takes bf16 pairs as i32
      return LLVM::BitcastOp::create(b, i32, v);
    return v;
  };
  NVVM::MMATypes ptxType = c.elt == MmaElt::bf16 ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  Type f32 = e.f32();
  Type resType = LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});

  for (int64_t kk = 0; kk < kMmaTileK; kk += M16N8K16::K) {
    // A: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
    // (rows 8-15, k 8-15) = registers a0a1, a2a3, a4a5, a6a7. Lane l gives
    // row l % 16, column 8 * (l / 16).
    SmallVector<SmallVector<Value, 4>> aFrag;
    for (int64_t mt = 0; mt < g.mTiles; ++mt) {
      Value row = e.addi(e.addi(e.muli(wm, idx(g.warpM)), idx(mt * M16N8K16::M)), l16);
      Value at = e.addi(aBase, e.addi(e.muli(row, idx(g.aStride)), e.addi(idx(kk), hi8)));
      Value frag = nvgpu::LdMatrixOp::create(b, VectorType::get({4, 2}, T), aSmem,
                                             ValueRange{at}, false, 4);
      SmallVector<Value, 4> regs;
      for (int64_t r = 0; r < M16N8K16::kARegs; ++r)
        regs.push_back(operand(frag, r));
      aFrag.push_back(regs);
    }
    // B (row-major k x n in shared memory), transposed by ldmatrix:
    // matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15),
    // (k 8-15, n 8-15) = b0b1, b2b3 of n-tile 2q, then of n-tile 2q+1. Lane l
    // gives k row l % 16, column 8 * (l / 16).
    for (int part = 0; part < g.parts; ++part) {
      for (int64_t q = 0; q < g.nTiles / 2; ++q) {
        Value krow = e.addi(idx(kk), l16);
        Value col = e.addi(
            e.addi(idx(part * g.tileN + q * 16), e.muli(wn, idx(g.warpN))), hi8);
        Value at = e.addi(bBase, e.addi(e.muli(krow, idx(g.bStride)), col));
        Value frag = nvgpu::LdMatrixOp::create(b, VectorType::get({4, 2}, T), bSmem,
                                               ValueRange{at}, true, 4);
        for (int64_t half = 0; half < 2; ++half) {
          int64_t nt = 2 * q + half;
          SmallVector<Value, 2> bRegs{operand(frag, 2 * half), operand(frag, 2 * half + 1)};
          for (int64_t mt = 0; mt < g.mTiles; ++mt) {
            SmallVector<Value, 4> cRegs;
            for (int64_t i = 0; i < M16N8K16::kCRegs; ++i)
              cRegs.push_back(acc[g.accIndex(part, mt, nt, i)]);
            auto mma = NVVM::MmaOp::create(
                b, resType, aFrag[mt], bRegs, cRegs, {M16N8K16::M, M16N8K16::N, M16N8K16::K},
                std::nullopt, std::nullopt,
                std::array<NVVM::MMATypes, 2>{ptxType, ptxType},
                std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row, NVVM::MMALayout::col});
            for (int64_t i = 0; i < M16N8K16::kCRegs; ++i)
              acc[g.accIndex(part, mt, nt, i)] =
                  LLVM::ExtractValueOp::create(b, mma, ArrayRef<int64_t>{i});
          }
        }
      }
    }
  }
  return acc;
}

/// The matrix descriptor of the operand at `byteOffset` bytes into the
/// workgroup buffer `smem` (no swizzle, base offset 0; WarpLayouts.h): the
/// buffer's shared-window address comes from its aligned pointer.
Value MmaGemmBuilder::descriptor(Value smem, Value byteOffset, int64_t lbo, int64_t sbo) {
  using W = warp_layout::Wgmma;
  Type i64 = b.getI64Type();
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, smem);
  Value addr = arith::IndexCastUIOp::create(b, i64, e.addi(base, byteOffset));
  auto c64 = [&](uint64_t v) { return arith::ConstantIntOp::create(b, i64, v).getResult(); };
  Value start = arith::AndIOp::create(b, arith::ShRUIOp::create(b, addr, c64(4)),
                                      c64(W::kFieldMask));
  return arith::OrIOp::create(b, start, c64(W::descriptor(0, lbo, sbo)));
}

/// The MMAs of one stage on sm_90a: wgmma.fence (the accumulator registers
/// were written by the previous stage's wgmma), one wgmma.mma_async
/// m64n128k16 per k16 step (A K-major "row", B MN-major "row", i.e.
/// transposed), commit, and wait for this group (the next stage's loads
/// overwrite the buffer these read, after the next barrier).
SmallVector<Value> MmaGemmBuilder::computeStageWgmma(Value stage, ValueRange accIn) {
  using W = warp_layout::Wgmma;
  Type f32 = e.f32();
  SmallVector<Type> accTypes(accIn.size(), f32);
  Type structType = LLVM::LLVMStructType::getLiteral(ctx, accTypes);
  Value acc = LLVM::PoisonOp::create(b, structType);
  for (auto [i, v] : llvm::enumerate(accIn))
    acc = LLVM::InsertValueOp::create(b, acc, v, ArrayRef<int64_t>{static_cast<int64_t>(i)});
  NVVM::WgmmaFenceAlignedOp::create(b);
  int64_t eltBytes = 2;
  NVVM::WGMMATypes ptxType =
      c.elt == MmaElt::bf16 ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
  // This thread's warpgroup reads the A rows 64 v .. 64 v + 63 of the
  // stage (the same B for both warpgroups of a 128-row tile).
  Value firstRow = e.muli(e.divui(tid, idx(W::kWarpgroupSize)), idx(W::M));
  for (int64_t kk = 0; kk < kMmaTileK; kk += W::K) {
    Value aOff = e.muli(e.addi(e.muli(stage, idx(g.aStage())), aIndex(firstRow, idx(kk))),
                        idx(eltBytes));
    Value bOff = e.muli(e.addi(e.muli(stage, idx(g.bStage())), bIndex(idx(kk), idx(0))),
                        idx(eltBytes));
    Value descA = descriptor(aSmem, aOff, /*lbo=*/g.tileM * W::kCoreRowBytes,
                             /*sbo=*/W::kCoreRows * W::kCoreRowBytes);
    Value descB = descriptor(bSmem, bOff, /*lbo=*/kMmaTileN * W::kCoreRowBytes,
                             /*sbo=*/W::kCoreRows * W::kCoreRowBytes);
    acc = NVVM::WgmmaMmaAsyncOp::create(
        b, structType, acc, descA, descB,
        NVVM::MMAShapeAttr::get(ctx, W::M, kMmaTileN, W::K),
        NVVM::WGMMATypesAttr::get(ctx, ptxType), NVVM::WGMMATypesAttr::get(ctx, ptxType),
        NVVM::WGMMATypesAttr::get(ctx, NVVM::WGMMATypes::f32),
        NVVM::WGMMAScaleOutAttr::get(ctx, NVVM::WGMMAScaleOut::one),
        NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
        NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
        NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::row),
        NVVM::MMALayoutAttr::get(ctx, NVVM::MMALayout::row), NVVM::MMAIntOverflowAttr());
  }
  NVVM::WgmmaGroupSyncAlignedOp::create(b);
  NVVM::WgmmaWaitGroupSyncOp::create(b, b.getI64IntegerAttr(0));
  SmallVector<Value> out;
  for (int64_t i = 0; i < static_cast<int64_t>(accIn.size()); ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, acc, ArrayRef<int64_t>{i}));
  return out;
}

/// Every lane's accumulators: c_i of m16n8 tile (mt, nt) is row
/// groupID + cRowOffset(i), column 2 * tig + cColOffset(i) of the tile.
void MmaGemmBuilder::epilogue(ArrayRef<Value> acc) {
  Type f32 = e.f32();
  bool gemm1 = c.kind == MmaGemmConfig::Kind::gemm1;
  Value sorted = args[1];
  for (int64_t mt = 0; mt < g.mTiles; ++mt)
    for (int64_t rh = 0; rh < 2; ++rh) {
      Value lr = e.addi(e.addi(e.muli(wm, idx(g.warpM)),
                               idx(mt * M16N8K16::M + M16N8K16::cRowOffset(2 * rh))),
                        groupID);
      Value p = e.addi(rowBase, lr);
      Value r = gemm1 ? Value() : e.load(sorted, p);
      for (int64_t nt = 0; nt < g.nTiles; ++nt)
        for (int64_t ch = 0; ch < 2; ++ch) {
          int64_t i = 2 * rh + ch;
          Value n = e.addi(e.addi(n0, e.addi(e.muli(wn, idx(g.warpN)),
                                             idx(nt * M16N8K16::N + M16N8K16::cColOffset(i)))),
                           e.muli(tig, idx(2)));
          Value inRange = e.ult(n, N);
          if (!gemm1)
            inRange = e.andi(inRange, e.ge(r, e.ci32(0)));
          e.ifThen(inRange, [&](IRB &e) {
            auto biasAt = [&](IRB &e, Value col) {
              return arith::ExtFOp::create(e.b, f32, e.load(bias, e.addi(e.muli(ex, W), col)));
            };
            Value v = acc[g.accIndex(0, mt, nt, i)];
            if (c.bias)
              v = e.addf(v, biasAt(e, n));
            if (gemm1) {
              v = emitActivation(e, c.act, v);
              if (g.parts == 2) {
                Value up = acc[g.accIndex(1, mt, nt, i)];
                if (c.bias)
                  up = e.addf(up, biasAt(e, e.addi(n, N)));
                v = e.mulf(v, up);
              }
              // h is rounded to the data type (docs/spec.md §2-§3).
              e.store(arith::TruncFOp::create(e.b, T, v), out, e.addi(e.muli(p, N), n));
            } else {
              Value rIdx = e.toIndex(r);
              if (c.weighted)
                v = e.mulf(e.load(args[2], rIdx), v);
              if (!c.outF32)
                v = arith::TruncFOp::create(e.b, T, v);
              e.store(v, out, e.addi(e.muli(rIdx, N), n));
            }
          });
        }
    }
}

void MmaGemmBuilder::build() {
  bool gemm1 = c.kind == MmaGemmConfig::Kind::gemm1;
  A = args[0];
  Value tileExpert = args[3], numTiles = args[4];
  Bw = args[5];
  bias = args[6];
  out = args[7];
  K = args[8];
  N = args[9];
  W = gemm1 ? e.muli(N, idx(g.parts)) : N; // columns of one expert's matrix

  tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  lane = e.remui(tid, idx(warp_layout::kWarpSize));
  Value warp = e.divui(tid, idx(warp_layout::kWarpSize));
  wm = e.divui(warp, idx(g.warpsN));
  wn = e.remui(warp, idx(g.warpsN));
  groupID = e.divui(lane, idx(4));
  tig = e.remui(lane, idx(4));

  // The tile order: the linear block index walks kMmaGroupM consecutive
  // M-tiles (mostly of one expert: the plan sorts tiles by expert) for each
  // column slice of the weights before moving to the next slice, so a slice
  // is fetched from DRAM once per group and served from L2 to the others.
  Value gx = gpu::GridDimOp::create(b, gpu::Dimension::x);
  Value gy = gpu::GridDimOp::create(b, gpu::Dimension::y);
  Value linear = e.addi(e.muli(gpu::BlockIdOp::create(b, gpu::Dimension::y), gx),
                        gpu::BlockIdOp::create(b, gpu::Dimension::x));
  Value perGroup = e.muli(idx(kMmaGroupM), gx);
  Value firstM = e.muli(e.divui(linear, perGroup), idx(kMmaGroupM));
  Value groupRows = e.mini(e.subi(gy, firstM), idx(kMmaGroupM));
  Value inGroup = e.remui(linear, perGroup);
  pidM = e.addi(firstM, e.remui(inGroup, groupRows));
  Value pidN = e.divui(inGroup, groupRows);
  n0 = e.muli(pidN, idx(g.tileN));

  Value active = e.ult(pidM, e.toIndex(e.load(numTiles, idx(0))));
  e.ifThen(active, [&](IRB &) {
    rowBase = e.muli(pidM, idx(g.tileM));
    ex = e.toIndex(e.load(tileExpert, pidM));
    wBase = e.muli(ex, e.muli(K, W));
    // 16-byte cp.async needs 16-byte aligned chunks: row lengths that are
    // multiples of 8 elements and 16-byte aligned buffers (checked at run
    // time; otherwise the same pipeline with element loads).
    aligned = e.andi(e.andi(e.eq(e.remui(K, idx(8)), idx(0)), e.eq(e.remui(N, idx(8)), idx(0))),
                     e.andi(alignedTo16(A), alignedTo16(Bw)));

    e.ifThen(e.ult(tid, idx(g.tileM)), [&](IRB &e) { e.store(aRowOf(tid), rows, tid); });
    gpu::BarrierOp::create(b);

    Value numK = e.ceildiv(K, idx(kMmaTileK));
    for (int64_t s = 0; s + 1 < g.stages; ++s) {
      e.ifThen(e.ult(idx(s), numK), [&](IRB &) { issueStage(idx(s), idx(s)); });
      NVVM::CpAsyncCommitGroupOp::create(b);
    }
    SmallVector<Value> init(g.numAcc(), e.cf32(0.0));
    SmallVector<Value> acc = e.forLoop(
        idx(0), numK, init, [&](IRB &le, Value kt, ValueRange accIn) {
          // Same builder state, nested insertion point.
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(le.b.getInsertionBlock(), le.b.getInsertionPoint());
          // Stage kt's group is complete (at most S-2 younger ones pending);
          // the barrier publishes it and retires stage kt-1's readers.
          NVVM::CpAsyncWaitGroupOp::create(b, g.stages - 2);
          // wgmma reads shared memory through the async proxy: this
          // thread's (generic proxy) writes of the stage are fenced before
          // the barrier that publishes them.
          if (c.wgmma)
            NVVM::FenceProxyOp::create(
                b, NVVM::ProxyKind::async_shared,
                NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
          gpu::BarrierOp::create(b);
          Value next = e.addi(kt, idx(g.stages - 1));
          e.ifThen(e.ult(next, numK),
                   [&](IRB &) { issueStage(next, e.remui(next, idx(g.stages))); });
          NVVM::CpAsyncCommitGroupOp::create(b);
          Value stage = e.remui(kt, idx(g.stages));
          SmallVector<Value> res =
              c.wgmma ? computeStageWgmma(stage, accIn) : computeStage(stage, accIn);
          le.b.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
          return res;
        });
    NVVM::CpAsyncWaitGroupOp::create(b, 0);
    epilogue(acc);
    if (c.combine) {
      // The fused layer's combine, shared with the CUDA-core GEMM2: the
      // same arrival protocol and the same f32 sums in slot order.
      CombineEpilogue ce;
      ce.sorted = args[1];
      ce.sourceRows = args[10];
      ce.positions = args[11];
      ce.counters = args[12];
      ce.y = args[13];
      ce.K = args[14];
      ce.sharedOut = c.shared ? args[15] : Value();
      ce.rows = out;
      ce.D = N;
      ce.lastOf = lastOf;
      emitCombineEpilogue(e, ce, tid, rowBase, g.tileM, pidN, g.tileN, g.threads);
    }
  });
}

} // namespace

gpu::GPUFuncOp gpu_lowering::buildMmaGemm(gpu::GPUModuleOp module, const MmaGemmConfig &c) {
  std::string name = c.name();
  if (auto existing = module.lookupSymbol<gpu::GPUFuncOp>(name))
    return existing;
  MLIRContext *ctx = module.getContext();
  Type T = mmaElementType(ctx, c.elt);
  Type f32 = Float32Type::get(ctx), i32 = IntegerType::get(ctx, 32), ix = IndexType::get(ctx);
  bool gemm1 = c.kind == MmaGemmConfig::Kind::gemm1;
  SmallVector<Type> args{flat(T),   flat(i32), gemm1 ? flat(i32) : flat(f32),
                         flat(i32), flat(i32), flat(T),
                         flat(T),   gemm1 || !c.outF32 ? flat(T) : flat(f32),
                         ix,        ix};
  assert((!c.combine || (!gemm1 && c.outF32)) && "the combine sums gemm2's f32 rows");
  assert((!c.shared || c.combine) && "the shared output goes with the combine");
  if (c.combine) {
    args.append({flat(i32), flat(i32), flat(i32), flat(T), ix});
    if (c.shared)
      args.push_back(flat(f32));
  }
  assert((c.wgmma ? c.tileM == warp_layout::Wgmma::M || c.tileM == 2 * warp_layout::Wgmma::M
                  : c.tileM <= 64) &&
         "wgmma computes 64- or 128-row tiles, mma.sync 16 to 64");
  Geometry g(c);
  SmallVector<Type> wg{workgroup(ctx, g.stages * g.aStage(), T),
                       workgroup(ctx, g.stages * g.bStage(), T),
                       workgroup(ctx, c.tileM, i32)};
  if (c.combine) // per tile row: the token this block completes, or -1
    wg.push_back(workgroup(ctx, c.tileM, i32));

  OpBuilder ob(ctx);
  ob.setInsertionPointToEnd(module.getBody());
  ImplicitLocOpBuilder b(module.getLoc(), ob);
  auto func = gpu::GPUFuncOp::create(b, name, FunctionType::get(ctx, args, {}), wg, TypeRange{});
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), ob.getUnitAttr());
  // 16-byte cp.async destinations and wgmma's 16-byte-aligned core
  // matrices (a stage is a multiple of 128 bytes): 128-byte aligned buffers.
  for (unsigned i = 0; i < 2; ++i)
    func.setWorkgroupAttributionAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                                     ob.getI64IntegerAttr(128));
  func.setKnownBlockSizeAttr(
      ob.getDenseI32ArrayAttr({static_cast<int32_t>(c.threads()), 1, 1}));
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  IRB e(b);
  MmaGemmBuilder(e, c, entry.getArguments().take_front(args.size()),
                 func.getWorkgroupAttributions())
      .build();
  gpu::ReturnOp::create(b);
  return func;
}
