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
//   (wgmma, sm_90a: for kt: wait_group(S-2); fence.proxy.async; barrier;
//           wgmma.fence; 2 x wgmma.mma_async; commit; wgmma wait_group 1
//           (wgmmaGroupsInFlight; 0: every stage's group retired here);
//           barrier (stage kt-1 retired everywhere); issue stage kt+S-1;
//    then wgmma wait_group 0)
//   [split-K: kt over the block's slice z of S; partial tile -> workspace,
//    arrival on the tile counter; the last block sums the S partials in
//    slice order]
//   epilogue from the accumulator fragments (bias, activation / weight)
//
//===----------------------------------------------------------------------===//

#include "lowering/gpu/MmaGemm.h"
#include "lowering/Activations.h"
#include "lowering/GroupedGemm.h"

#include "lowering/gpu/IRBuilder.h"
#include "lowering/gpu/Kernels.h"
#include "lowering/gpu/WarpLayouts.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/Regex.h"

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

using warp_layout::M16N8K16;

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

MmaGemmConfig MmaGemmConfig::of(const GroupedGemmDesc &d) {
  const GemmEpilogue &ep = d.epilogue;
  MmaGemmConfig c;
  std::optional<MmaElt> elt = mmaEltOf(d.aType);
  assert(elt && (d.bType == d.aType || quantizedOk(d)) && d.weights == GemmWeights::perGroup &&
         "tensor-core GEMMs take bf16/f16 operands of one type (or quantized B), per-group "
         "weights");
  c.elt = *elt;
  c.format = d.format;
  c.blockK = d.blockK;
  c.blockN = d.blockN;
  c.zeroPoint = d.zeroPoint;
  c.bias = ep.has(EpilogueStep::bias);
  if (ep.has(EpilogueStep::activation)) {
    assert(d.cType == d.aType && !ep.has(EpilogueStep::routedWeight) &&
           !ep.has(EpilogueStep::combine) && "gemm1 stores h in the data type");
    c.kind = Kind::gemm1;
    c.gather = d.gathered();
    c.act = ep.activation;
  } else {
    assert(!d.gathered() && (d.cType.isF32() || d.cType == d.aType) &&
           "gemm2 reads h by plan row and stores f32 or the data type");
    c.kind = Kind::gemm2;
    c.weighted = ep.has(EpilogueStep::routedWeight);
    c.combine = ep.has(EpilogueStep::combine);
    c.outF32 = d.cType.isF32();
  }
  return c;
}

std::optional<MmaGemmConfig> MmaGemmConfig::ofBackward(const GroupedGemmDesc &d) {
  if (!d.invalidReason().empty() || d.gathered() || !d.cType.isF32())
    return std::nullopt;
  MmaGemmConfig c;
  if (d.weightGradient()) {
    // bf16/f16 rows A, the f32 cotangent rows B as two terms of that type.
    std::optional<MmaElt> elt = mmaEltOf(d.aType);
    if (!elt || !d.bType.isF32() || !d.epilogue.steps.empty())
      return std::nullopt;
    c.kind = Kind::weightGrad;
    c.elt = *elt;
    return c;
  }
  const GemmEpilogue &ep = d.epilogue;
  std::optional<MmaElt> elt = mmaEltOf(d.bType);
  if (!elt || d.weights != GemmWeights::perGroup ||
      !(d.aType == d.bType || d.aType.isF32()) || ep.has(EpilogueStep::activation) ||
      ep.has(EpilogueStep::routedWeight) || ep.has(EpilogueStep::combine) ||
      ep.has(EpilogueStep::round) ||
      (ep.has(EpilogueStep::activationGrad) && ep.roundTo != d.bType))
    return std::nullopt;
  c.kind = Kind::rowGrad;
  c.elt = *elt;
  c.bTransposed = d.bTransposed;
  c.splitA = d.aType.isF32();
  c.bias = ep.has(EpilogueStep::bias);
  c.actGrad = ep.has(EpilogueStep::activationGrad);
  if (c.actGrad)
    c.act = ep.activation;
  return c;
}

GroupedGemmDesc MmaGemmConfig::desc(MLIRContext *ctx) const {
  Type t = mmaElementType(ctx, elt);
  Type f32 = Float32Type::get(ctx);
  if (kind == Kind::weightGrad)
    return expertWeightGradient(false, t, f32, f32);
  if (kind == Kind::rowGrad) {
    GroupedGemmDesc d;
    d.aType = splitA ? f32 : t;
    d.bType = t;
    d.cType = f32;
    d.bTransposed = bTransposed;
    if (bias)
      d.epilogue.then(EpilogueStep::bias);
    if (actGrad) {
      d.epilogue.then(EpilogueStep::activationGrad);
      d.epilogue.activation = act;
      d.epilogue.roundTo = t;
    }
    return d;
  }
  // Quantized B: the codes' type and the format.
  Type w = t;
  if (format == WeightFormat::int4Group)
    w = IntegerType::get(ctx, 4);
  else if (format == WeightFormat::fp8Block)
    w = Float8E4M3FNType::get(ctx);
  GroupedGemmDesc d = kind == Kind::gemm1
                          ? expertGemm1(gather, act, bias, t, w, t)
                          : expertGemm2(bias, weighted, combine, t, w,
                                        outF32 ? Float32Type::get(ctx) : t);
  d.format = format;
  d.blockK = blockK;
  d.blockN = blockN;
  d.zeroPoint = zeroPoint;
  return d;
}

std::string MmaGemmConfig::name() const {
  std::string n = "moe_mma_";
  if (kind == Kind::rowGrad) {
    n += "rowgrad";
    if (bTransposed)
      n += "_bt";
    if (splitA)
      n += "_split";
    if (actGrad)
      n += "_actgrad_" + stringifyActivation(act).str();
  } else if (kind == Kind::weightGrad) {
    n += "wgrad";
  } else if (kind == Kind::gemm1) {
    n += "gemm1_";
    if (gather)
      n += "gather_";
    n += stringifyActivation(act).str();
    if (foldShared)
      n += "_foldshared";
  } else {
    n += "gemm2";
    if (weighted)
      n += "_weighted";
    if (combine)
      n += shared ? "_combine_shared" : "_combine";
    if (foldShared)
      n += sharedGated ? "_foldshared_gated" : "_foldshared";
  }
  if (bias)
    n += "_bias";
  n += elt == MmaElt::bf16 ? "_bf16" : "_f16";
  n += "_m" + std::to_string(tileM);
  if (kind == Kind::gemm2 && outF32)
    n += "_outf32";
  if (wgmma)
    n += "_wgmma";
  if (splitK)
    n += "_splitk";
  if (stages > 0 && stages != defaultStages())
    n += "_s" + std::to_string(stages);
  if (wgmma && wgmmaGroupsInFlight != kWgmmaGroupsInFlight)
    n += "_inflight" + std::to_string(wgmmaGroupsInFlight);
  return n + formatDesc().formatSuffix();
}

std::optional<MmaGemmConfig> MmaGemmConfig::parse(StringRef fullName) {
  // Quantized B: the format suffix ends the name; the rest is a dense
  // forward variant's.
  static const llvm::Regex quantSuffix("^(.+)(_int4g([0-9]+)(_zp)?|_fp8b([0-9]+)x([0-9]+))$");
  SmallVector<StringRef, 7> m;
  if (quantSuffix.match(fullName, &m)) {
    std::optional<MmaGemmConfig> c = parse(m[1]);
    if (!c || (c->kind != Kind::gemm1 && c->kind != Kind::gemm2))
      return std::nullopt;
    bool int4 = !m[3].empty();
    c->format = int4 ? WeightFormat::int4Group : WeightFormat::fp8Block;
    if ((int4 ? m[3] : m[5]).getAsInteger(10, c->blockK))
      return std::nullopt;
    c->blockN = 1;
    if (!int4 && m[6].getAsInteger(10, c->blockN))
      return std::nullopt;
    c->zeroPoint = !m[4].empty();
    if (c->blockK <= 0 || c->blockK % kMmaTileK != 0 || c->blockN <= 0 || c->name() != fullName)
      return std::nullopt;
    return c;
  }
  // The inverse of name(), by enumeration (a few hundred variants) after
  // the suffixes of the wgmma groups in flight, the stage count and split-K.
  StringRef rest = fullName;
  int64_t inFlight = kWgmmaGroupsInFlight;
  size_t inFlightAt = rest.rfind("_inflight");
  if (inFlightAt != StringRef::npos &&
      !rest.drop_front(inFlightAt + 9).getAsInteger(10, inFlight))
    rest = rest.take_front(inFlightAt);
  else
    inFlight = kWgmmaGroupsInFlight;
  int64_t stages = 0;
  size_t at = rest.rfind("_s");
  if (at != StringRef::npos && !rest.drop_front(at + 2).getAsInteger(10, stages) && stages > 0)
    rest = rest.take_front(at);
  else
    stages = 0;
  bool splitK = rest.consume_back("_splitk");
  bool wgmma = rest.ends_with("_wgmma");
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
        c.splitK = splitK;
        c.stages = stages;
        c.wgmmaGroupsInFlight = inFlight;
        c.kind = Kind::gemm1;
        for (bool fold : {false, true})
          for (bool gather : {false, true})
            for (uint32_t a = 0; a <= getMaxEnumValForActivation(); ++a) {
              c.foldShared = fold;
              c.gather = gather;
              c.act = *symbolizeActivation(a);
              if (c.name() == fullName)
                return c;
            }
        // The backward's kinds (mma.sync only, no split-K).
        for (bool bT : {false, true})
          if (!splitK)
          for (bool split : {false, true})
            for (uint32_t a = 0; a <= getMaxEnumValForActivation() + 1; ++a) {
              c = MmaGemmConfig();
              c.elt = elt;
              c.tileM = tileM;
              c.bias = bias;
              c.wgmma = wgmma;
              c.splitK = splitK;
              c.stages = stages;
              c.wgmmaGroupsInFlight = inFlight;
              c.kind = Kind::rowGrad;
              c.bTransposed = bT;
              c.splitA = split;
              c.actGrad = a > 0;
              if (c.actGrad)
                c.act = *symbolizeActivation(a - 1);
              if (c.name() == fullName)
                return c;
            }
        c.bTransposed = c.splitA = c.actGrad = false;
        c.act = Activation::relu;
        c.kind = Kind::weightGrad;
        c.wgmma = wgmma;
        if (!splitK && c.name() == fullName)
          return c;
        c = MmaGemmConfig();
        c.wgmma = wgmma;
        c.splitK = splitK;
        c.stages = stages;
        c.wgmmaGroupsInFlight = inFlight;
        c.elt = elt;
        c.tileM = tileM;
        c.bias = bias;
        c.kind = Kind::gemm2;
        for (bool weighted : {false, true})
          for (bool outF32 : {false, true})
            for (int combine = 0; combine < (outF32 ? 5 : 1); ++combine) {
              // 0: none, 1: combine, 2: + shared output, 3-4: + the folded
              // shared expert (ungated, gated).
              c.weighted = weighted;
              c.outF32 = outF32;
              c.combine = combine > 0;
              c.shared = combine == 2;
              c.foldShared = combine >= 3;
              c.sharedGated = combine == 4;
              if (c.name() == fullName)
                return c;
            }
      }
  return std::nullopt;
}

/// The staging buffers' element size: bf16 and f16 alike.
constexpr int64_t kEltBytes = 2;

MmaGemmConfig::SmemLayout MmaGemmConfig::smemLayout() const {
  // The stages at multiples of kSmemAlign (16-byte cp.async destinations,
  // wgmma's 16-byte aligned core matrices; the base is 16-byte aligned),
  // then the i32 buffers.
  SmemLayout l;
  int64_t at = numStages() * aStageElems() * kEltBytes;
  l.b = llvm::alignTo(at, kSmemAlign);
  at = l.b + numStages() * bStageElems() * kEltBytes;
  l.rows = llvm::alignTo(at, kSmemAlign);
  at = l.rows + tileM * 4;
  if (combine) {
    l.lastOf = at;
    at += tileM * 4;
  }
  if (splitK) {
    l.splitFlag = at;
    at += 4;
  }
  l.bytes = llvm::alignTo(at, 16);
  return l;
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
  int64_t aStride, bStride; // elements per A / B row in shared memory
  int64_t aTerm, bTerm;     // elements of one term of a stage (MmaGemmConfig)
  int64_t aStageElems, bStageElems;
  int64_t aStage() const { return aStageElems; }
  int64_t bStage() const { return bStageElems; }
  int64_t accIndex(int part, int64_t mt, int64_t nt, int64_t i) const {
    return ((part * mTiles + mt) * nTiles + nt) * M16N8K16::kCRegs + i;
  }
  int64_t numAcc() const { return parts * mTiles * nTiles * M16N8K16::kCRegs; }

  explicit Geometry(const MmaGemmConfig &c) {
    tileM = c.tileM;
    tileN = c.tileN();
    parts = c.parts();
    threads = c.threads();
    stages = c.numStages();
    aStride = c.aStride();
    bStride = c.bStride();
    aTerm = c.aTermElems();
    bTerm = c.bTermElems();
    aStageElems = c.aStageElems();
    bStageElems = c.bStageElems();
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
  /// `smem`: the views of the dynamic shared memory, in the order of
  /// MmaGemmConfig::SmemLayout (the absent ones left out).
  MmaGemmBuilder(IRB &e, const MmaGemmConfig &c, ValueRange args, ArrayRef<Value> smem)
      : e(e), b(e.b), c(c), g(c), args(args.begin(), args.end()) {
    ctx = b.getContext();
    numArgs = args.size();
    if (c.quantized()) {
      // The scales (and zero points) follow every other argument.
      numArgs -= c.zeroPoint ? 2 : 1;
      scales = args[numArgs];
      zeros = c.zeroPoint ? args[numArgs + 1] : Value();
    }
    T = mmaElementType(ctx, c.elt);
    epilogueDesc = c.desc(ctx).epilogue;
    aSmem = smem[0];
    bSmem = smem[1];
    rows = smem[2];
    lastOf = c.combine ? smem[3] : Value();
    splitFlag = c.splitK ? smem[c.combine ? 4 : 3] : Value();
  }

  void build();

private:
  IRB &e;
  ImplicitLocOpBuilder &b;
  const MmaGemmConfig &c;
  Geometry g;
  SmallVector<Value> args;
  /// The arguments before the quantized weights' scales and zero points.
  size_t numArgs;
  Value scales, zeros;
  Value aSmem, bSmem; // the staging buffers (views of the dynamic shared memory)
  MLIRContext *ctx;
  Type T;
  /// The epilogue of the GEMM this variant computes (MmaGemmConfig::desc).
  GemmEpilogue epilogueDesc;
  Value rows, lastOf, splitFlag;
  // Set in build().
  Value tid, lane, groupID, tig, wm, wn;
  Value A, Bw, bias, out, K, N, W, pidM, rowBase, n0, ex, wBase, aligned;
  // The folded shared expert (foldShared): this block's tiles are its rows.
  Value isShared, numTokens;
  // The backward (rowGrad, weightGrad): the split terms' second buffers,
  // rowGrad's outputs of the activation gradient, weightGrad's group (its
  // rows first .. first + K), C's rows M and the bias gradient.
  Value aLo, bLo, hOut, dzHi, dzLo, M, first, group, biasOut;
  // f16 split operands (MmaGemmConfig::scaledSplit): the bits of the split
  // tensor's largest finite magnitude, whose scale the sums are divided by.
  Value splitMax;

  Value idx(int64_t v) { return e.idx(v); }
  /// The first argument of the folded shared expert's (MmaGemm.h).
  size_t foldArgs() const {
    return c.kind == MmaGemmConfig::Kind::gemm1 ? 10 : 15;
  }
  Value zeroT() { return arith::ConstantOp::create(b, b.getFloatAttr(T, 0.0)); }

  Value aRowOf(Value lr);
  Value planRowOf(Value p);
  Value aIndex(Value r, Value k);
  Value bIndex(Value k, Value n);
  Value computeStageWgmma(Value stage, Value acc);
  Value descriptor(Value smem, Value byteOffset, int64_t lbo, int64_t sbo);
  void issueStage(Value kt, Value stage);
  SmallVector<Value> computeStage(Value stage, ValueRange acc);
  Value scaleOf(Value row, int part, Value n);
  SmallVector<Value> applyScales(Value kTile, ValueRange acc, ValueRange partial);
  void epilogue(ArrayRef<Value> acc);
  void epilogueBackward(ArrayRef<Value> acc);
  void finishSplitK(ArrayRef<Value> acc, Value z, Value S, Value pidN, Value gx,
                    function_ref<void(ArrayRef<Value>)> finish);
  Value alignedTo16(Value memref);
};

/// The A row (i32; -1 for a padding row) of tile row `lr`.
Value MmaGemmBuilder::aRowOf(Value lr) {
  Value p = e.addi(rowBase, lr);
  if (c.foldShared)
    return e.ifElse(
        isShared, {e.i32()},
        [&](IRB &e) {
          return SmallVector<Value>{e.rowOrNone(p, numTokens)};
        },
        [&](IRB &e) { return SmallVector<Value>{planRowOf(p)}; })[0];
  return planRowOf(p);
}

/// The A row of plan row `p`.
Value MmaGemmBuilder::planRowOf(Value p) {
  Value sorted = args[1];
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
  if (c.kind == MmaGemmConfig::Kind::weightGrad) {
    // A^T k-major. wgmma: the MN-major canonical layout, core (m/8, k/8) at
    // ((k/8) * tileM/8 + m/8) * 64, its rows 8 consecutive m of one k: SBO =
    // 128 bytes, LBO = tileM * 16 bytes, as for the K-major A.
    if (!c.wgmma)
      return e.addi(e.muli(k, idx(g.aStride)), r);
    Value core = e.addi(e.muli(e.divui(k, idx(8)), idx(g.tileM / 8)), e.divui(r, idx(8)));
    return e.addi(e.addi(e.muli(core, idx(64)), e.muli(e.remui(k, idx(8)), idx(8))),
                  e.remui(r, idx(8)));
  }
  if (!c.wgmma)
    return e.addi(e.muli(r, idx(g.aStride)), k);
  Value core = e.addi(e.muli(e.divui(k, idx(8)), idx(g.tileM / 8)), e.divui(r, idx(8)));
  return e.addi(e.addi(e.muli(core, idx(64)), e.muli(e.remui(r, idx(8)), idx(8))),
                e.remui(k, idx(8)));
}

Value MmaGemmBuilder::bIndex(Value k, Value n) {
  if (!c.wgmma)
    return c.bTransposed ? e.addi(e.muli(n, idx(g.bStride)), k)
                         : e.addi(e.muli(k, idx(g.bStride)), n);
  if (c.bTransposed) {
    // K-major B (B = W^T): core (n/8, k/8) at ((k/8) * kMmaTileN/8 + n/8) *
    // 64, its rows 8 consecutive k of one n: SBO = 128 bytes, LBO =
    // kMmaTileN * 16 bytes, as for the MN-major B.
    Value core = e.addi(e.muli(e.divui(k, idx(8)), idx(kMmaTileN / 8)), e.divui(n, idx(8)));
    return e.addi(e.addi(e.muli(core, idx(64)), e.muli(e.remui(n, idx(8)), idx(8))),
                  e.remui(k, idx(8)));
  }
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
/// element loads and shared-memory stores. A split operand's two terms go
/// to the two halves of its stage (hi first).
void MmaGemmBuilder::issueStage(Value kt, Value stage) {
  constexpr int64_t kChunk = 8; // elements of 16 bytes
  Value k0 = e.muli(kt, idx(kMmaTileK));
  Value c8 = idx(kChunk);
  // `element(e, h)`: element h of the chunk on the element-load path;
  // `async`: whether the chunk may take the cp.async path.
  auto copyWith = [&](Value async, Value src, Value srcIndex, Value dst, Value dstIndex,
                      Value valid, function_ref<Value(IRB &, Value)> element) {
    e.ifElse(
        async, {},
        [&](IRB &e) {
          // Out-of-range chunks read nothing (src-size 0) from a valid address.
          Value n = e.select(valid, c8, idx(0));
          Value at = e.select(valid, srcIndex, idx(0));
          auto issue = [&](IRB &e, Value from) {
            nvgpu::DeviceAsyncCopyOp::create(
                e.b, nvgpu::DeviceAsyncTokenType::get(ctx), dst, ValueRange{dstIndex}, from,
                ValueRange{at}, e.b.getIndexAttr(kChunk), n, e.b.getUnitAttr());
            return SmallVector<Value>{};
          };
          // A selected (folded shared expert) source: one cp.async per
          // buffer, so that each copies from a kernel argument (what the
          // host emulation's copy queue needs; the same on the GPU).
          if (auto sel = src.getDefiningOp<arith::SelectOp>())
            return e.ifElse(
                sel.getCondition(), {},
                [&](IRB &e) { return issue(e, sel.getTrueValue()); },
                [&](IRB &e) { return issue(e, sel.getFalseValue()); });
          return issue(e, src);
        },
        [&](IRB &e) {
          for (int64_t h = 0; h < kChunk; ++h) {
            Value hv = e.idx(h);
            e.store(element(e, hv), dst, e.addi(dstIndex, hv));
          }
          return SmallVector<Value>{};
        });
  };
  auto copy = [&](Value src, Value srcIndex, Value dst, Value dstIndex, Value valid,
                  function_ref<Value(IRB &, Value)> elementValid) {
    copyWith(aligned, src, srcIndex, dst, dstIndex, valid, [&](IRB &e, Value h) {
      return e.guardedLoad(elementValid(e, h), T,
                           [&](IRB &e) { return e.load(src, e.addi(srcIndex, h)); });
    });
  };
  // The terms of a split operand: (buffer, element offset in the stage).
  auto terms = [&](Value hi, Value lo, bool split, int64_t termElems) {
    SmallVector<std::pair<Value, int64_t>, 2> t{{hi, 0}};
    if (split)
      t.push_back({lo, termElems});
    return t;
  };
  Value aBase = e.muli(stage, idx(g.aStage())), bBase = e.muli(stage, idx(g.bStage()));

  if (c.kind == MmaGemmConfig::Kind::weightGrad) {
    // A^T, k-major: kMmaTileK rows (the group's rows first + k) of tileM
    // columns m = A's columns, and with the bias gradient column M of ones
    // (row M of the product); k past the group's rows reads zeros.
    int64_t rowChunks = g.tileM / kChunk, aChunks = kMmaTileK * rowChunks;
    for (int64_t q = 0; q * g.threads < aChunks; ++q) {
      Value ch = e.addi(tid, idx(q * g.threads));
      auto body = [&](IRB &e) {
        Value kr = e.divui(ch, idx(rowChunks));
        Value mc = e.muli(e.remui(ch, idx(rowChunks)), c8);
        Value k = e.addi(k0, kr), m = e.addi(rowBase, mc);
        Value kOk = e.ult(k, K);
        Value srcIndex = e.addi(e.muli(e.addi(first, e.select(kOk, k, idx(0))), M), m);
        Value dstIndex = e.addi(aBase, aIndex(mc, kr));
        // The chunk holding column M of the ones takes the element path
        // (cp.async cannot write them; the other chunks are A's or zeros).
        Value async = aligned;
        if (c.bias)
          async = e.andi(async, e.noti(e.andi(e.ule(m, M), e.ult(M, e.addi(m, c8)))));
        copyWith(async, A, srcIndex, aSmem, dstIndex, e.andi(kOk, e.ult(m, M)),
                 [&](IRB &e, Value h) {
                   Value col = e.addi(m, h);
                   Value v = e.guardedLoad(e.andi(kOk, e.ult(col, M)), T, [&](IRB &e) {
                     return e.load(A, e.addi(srcIndex, h));
                   });
                   if (!c.bias)
                     return v;
                   Value one = arith::ConstantOp::create(e.b, e.b.getFloatAttr(T, 1.0));
                   return e.select(e.andi(kOk, e.eq(col, M)), one, v);
                 });
      };
      if ((q + 1) * g.threads > aChunks)
        e.ifThen(e.ult(ch, idx(aChunks)), body);
      else
        body(e);
    }
    // B: the group's rows of the cotangent, kMmaTileK x kMmaTileN, both terms.
    int64_t bRowChunks = kMmaTileN / kChunk, bChunks = kMmaTileK * bRowChunks;
    for (int64_t q = 0; q * g.threads < bChunks; ++q) {
      Value ch = e.addi(tid, idx(q * g.threads));
      Value kr = e.divui(ch, idx(bRowChunks));
      Value nc = e.muli(e.remui(ch, idx(bRowChunks)), c8);
      Value k = e.addi(k0, kr), n = e.addi(n0, nc);
      Value kOk = e.ult(k, K);
      Value srcIndex = e.addi(e.muli(e.addi(first, e.select(kOk, k, idx(0))), N), n);
      for (auto [buf, off] : terms(Bw, bLo, true, g.bTerm)) {
        Value dstIndex = e.addi(bBase, e.addi(idx(off), bIndex(kr, nc)));
        copy(buf, srcIndex, bSmem, dstIndex, e.andi(kOk, e.ult(n, N)),
             [&](IRB &e, Value h) { return e.andi(kOk, e.ult(e.addi(n, h), N)); });
      }
    }
    return;
  }

  // A: tileM rows x kMmaTileK columns = tileM * 4 chunks (per term).
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
      for (auto [buf, off] : terms(A, aLo, c.splitA, g.aTerm)) {
        Value dstIndex = e.addi(aBase, e.addi(idx(off), aIndex(r, col)));
        copy(buf, srcIndex, aSmem, dstIndex, e.andi(rowOk, e.ult(k, K)),
             [&](IRB &e, Value h) { return e.andi(rowOk, e.ult(e.addi(k, h), K)); });
      }
    };
    if ((q + 1) * g.threads > aChunks)
      e.ifThen(e.ult(ch, idx(aChunks)), body);
    else
      body(e);
  }

  if (c.bTransposed) {
    // B = W[g]^T: kMmaTileN rows n of W[g] ([N, K], k-contiguous), kMmaTileK
    // columns k each, staged n-major.
    int64_t rowChunks = kMmaTileK / kChunk, bChunks = kMmaTileN * rowChunks;
    for (int64_t q = 0; q * g.threads < bChunks; ++q) {
      Value ch = e.addi(tid, idx(q * g.threads));
      Value nr = e.divui(ch, idx(rowChunks));
      Value kc = e.muli(e.remui(ch, idx(rowChunks)), c8);
      Value n = e.addi(n0, nr), k = e.addi(k0, kc);
      Value nOk = e.ult(n, N);
      Value srcIndex = e.addi(wBase, e.addi(e.muli(e.select(nOk, n, idx(0)), K), k));
      Value dstIndex = e.addi(bBase, bIndex(kc, nr));
      copy(Bw, srcIndex, bSmem, dstIndex, e.andi(nOk, e.ult(k, K)),
           [&](IRB &e, Value h) { return e.andi(nOk, e.ult(e.addi(k, h), K)); });
    }
    return;
  }

  // B: kMmaTileK rows x kMmaTileN columns (part p's columns at p * tileN).
  // Quantized B: element loads of the codes (one per byte), staged as
  // their exact factors in T (buildQuantizedFactor; zeros outside B).
  GroupedGemmDesc format = c.formatDesc();
  Value zeroRow;
  if (c.zeroPoint)
    zeroRow = e.addi(e.muli(ex, e.ceildiv(K, idx(c.blockK))), e.divui(k0, idx(c.blockK)));
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
    Value dstIndex = e.addi(bBase, bIndex(kr, e.muli(cc, c8)));
    if (c.quantized()) {
      for (int64_t h = 0; h < kChunk; ++h) {
        Value hv = idx(h), n = e.addi(col, hv);
        Value v = e.guardedLoad(e.andi(kOk, e.ult(n, N)), T, [&](IRB &e) {
          Value code = e.load(Bw, e.addi(srcIndex, hv));
          // A stage lies in one group (MmaGemmConfig::quantizedOk).
          Value zero = c.zeroPoint ? e.load(zeros, e.addi(e.muli(zeroRow, W),
                                                          e.addi(e.muli(part, N), n)))
                                   : Value();
          return arith::TruncFOp::create(e.b, T,
                                         buildQuantizedFactor(e.b, format, code, zero));
        });
        e.store(v, bSmem, e.addi(dstIndex, hv));
      }
      continue;
    }
    copy(Bw, srcIndex, bSmem, dstIndex, e.andi(kOk, e.ult(col, N)),
         [&](IRB &e, Value h) { return e.andi(kOk, e.ult(e.addi(col, h), N)); });
  }
}

/// The f32 scale at `row` (expert x blocks along K + the block) for column
/// `n` of part `part` (0 past N): int4 scales are [E, ceil(K / G), W],
/// FP8's [E, ceil(K / BK), ceil(W / BN)] (W = parts x N: gemm1's gate and up
/// columns side by side).
Value MmaGemmBuilder::scaleOf(Value row, int part, Value n) {
  Value col = part ? e.addi(e.muli(idx(part), N), n) : n;
  Value at = c.format == WeightFormat::int4Group
                 ? e.addi(e.muli(row, W), col)
                 : e.addi(e.muli(row, e.ceildiv(W, idx(c.blockN))), e.divui(col, idx(c.blockN)));
  return e.guardedLoad(e.ult(n, N), e.f32(), [&](IRB &e) { return e.load(scales, at); });
}

/// Quantized B: acc + partial x s for every accumulator, s the scale of
/// k-tile `kTile`'s block or group for the accumulator's column (the
/// layout of epilogue()).
SmallVector<Value> MmaGemmBuilder::applyScales(Value kTile, ValueRange acc,
                                               ValueRange partial) {
  SmallVector<Value> out(acc.begin(), acc.end());
  // The scales' row of this block or group, shared by every column.
  Value row = e.addi(e.muli(ex, e.ceildiv(K, idx(c.blockK))),
                     e.divui(e.muli(kTile, idx(kMmaTileK)), idx(c.blockK)));
  for (int part = 0; part < g.parts; ++part)
    for (int64_t nt = 0; nt < g.nTiles; ++nt)
      for (int64_t ch = 0; ch < 2; ++ch) {
        Value n = e.addi(e.addi(n0, e.addi(e.muli(wn, idx(g.warpN)),
                                           idx(nt * M16N8K16::N + M16N8K16::cColOffset(ch)))),
                         e.muli(tig, idx(2)));
        Value s = scaleOf(row, part, n);
        for (int64_t mt = 0; mt < g.mTiles; ++mt)
          for (int64_t rh = 0; rh < 2; ++rh) {
            int64_t i = g.accIndex(part, mt, nt, 2 * rh + ch);
            out[i] = arith::AddFOp::create(b, out[i], arith::MulFOp::create(b, partial[i], s));
          }
      }
  return out;
}

/// The MMAs of one stage: for each k16 step, A fragments by ldmatrix.x4, B
/// fragments by ldmatrix.x4.trans (two n8 tiles per load), then mma.sync.
/// A k-major A^T (weightGrad) is read with .trans, an n-major B
/// (bTransposed) without; a split operand gives two fragments, each met by
/// the other operand's (hi, then lo).
SmallVector<Value> MmaGemmBuilder::computeStage(Value stage, ValueRange accIn) {
  SmallVector<Value> acc(accIn.begin(), accIn.end());
  Type i32 = e.i32();
  Value l16 = e.remui(lane, idx(16)), hi8 = e.muli(e.divui(lane, idx(16)), idx(8));
  // Lanes 8-15 and 24-31: the second matrix of each pair (the .trans A^T
  // and non-.trans B address orders).
  Value l8 = e.remui(lane, idx(8)), odd8 = e.muli(e.remui(e.divui(lane, idx(8)), idx(2)), idx(8));
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
  const bool wgrad = c.kind == MmaGemmConfig::Kind::weightGrad;
  const int64_t aTerms = c.splitA ? 2 : 1, bTerms = c.splitB() ? 2 : 1;

  for (int64_t kk = 0; kk < kMmaTileK; kk += M16N8K16::K) {
    // A: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
    // (rows 8-15, k 8-15) = registers a0a1, a2a3, a4a5, a6a7. Lane l gives
    // row l % 16, column 8 * (l / 16); from A^T stored k-major (.trans):
    // k row 8 * (l / 16) + l % 8, m column 8 * ((l / 8) % 2).
    SmallVector<SmallVector<SmallVector<Value, 4>>> aFrag(aTerms); // [term][mt]
    for (int64_t t = 0; t < aTerms; ++t)
      for (int64_t mt = 0; mt < g.mTiles; ++mt) {
        Value row0 = e.addi(e.muli(wm, idx(g.warpM)), idx(mt * M16N8K16::M));
        Value at = wgrad ? e.addi(e.muli(e.addi(idx(kk), e.addi(hi8, l8)), idx(g.aStride)),
                                  e.addi(row0, odd8))
                         : e.addi(e.muli(e.addi(row0, l16), idx(g.aStride)),
                                  e.addi(idx(kk), hi8));
        at = e.addi(aBase, e.addi(idx(t * g.aTerm), at));
        Value frag = nvgpu::LdMatrixOp::create(b, VectorType::get({4, 2}, T), aSmem,
                                               ValueRange{at}, wgrad, 4);
        SmallVector<Value, 4> regs;
        for (int64_t r = 0; r < M16N8K16::kARegs; ++r)
          regs.push_back(operand(frag, r));
        aFrag[t].push_back(regs);
      }
    // B (row-major k x n in shared memory), transposed by ldmatrix:
    // matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15),
    // (k 8-15, n 8-15) = b0b1, b2b3 of n-tile 2q, then of n-tile 2q+1. Lane l
    // gives k row l % 16, column 8 * (l / 16). From B stored n-major
    // (bTransposed, no .trans): n row 8 * (l / 16) + l % 8, k column
    // 8 * ((l / 8) % 2).
    for (int part = 0; part < g.parts; ++part) {
      for (int64_t q = 0; q < g.nTiles / 2; ++q) {
        Value col0 = e.addi(idx(part * g.tileN + q * 16), e.muli(wn, idx(g.warpN)));
        SmallVector<Value, 2> frags;
        for (int64_t t = 0; t < bTerms; ++t) {
          Value at = c.bTransposed
                         ? e.addi(e.muli(e.addi(col0, e.addi(hi8, l8)), idx(g.bStride)),
                                  e.addi(idx(kk), odd8))
                         : e.addi(e.muli(e.addi(idx(kk), l16), idx(g.bStride)),
                                  e.addi(col0, hi8));
          at = e.addi(bBase, e.addi(idx(t * g.bTerm), at));
          frags.push_back(nvgpu::LdMatrixOp::create(b, VectorType::get({4, 2}, T), bSmem,
                                                    ValueRange{at}, !c.bTransposed, 4));
        }
        for (int64_t half = 0; half < 2; ++half) {
          int64_t nt = 2 * q + half;
          SmallVector<SmallVector<Value, 2>, 2> bRegs;
          for (int64_t tb = 0; tb < bTerms; ++tb)
            bRegs.push_back({operand(frags[tb], 2 * half), operand(frags[tb], 2 * half + 1)});
          for (int64_t mt = 0; mt < g.mTiles; ++mt)
            for (int64_t ta = 0; ta < aTerms; ++ta)
              for (int64_t tb = 0; tb < bTerms; ++tb) {
                SmallVector<Value, 4> cRegs;
                for (int64_t i = 0; i < M16N8K16::kCRegs; ++i)
                  cRegs.push_back(acc[g.accIndex(part, mt, nt, i)]);
                auto mma = NVVM::MmaOp::create(
                    b, resType, aFrag[ta][mt], bRegs[tb], cRegs,
                    {M16N8K16::M, M16N8K16::N, M16N8K16::K}, std::nullopt, std::nullopt,
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

/// The MMAs of one stage on sm_90a: wgmma.fence (orders the accumulator
/// registers' earlier accesses: their initialisation before the first
/// stage), one wgmma.mma_async m64n128k16 per k16 step (A K-major "row", B
/// MN-major "row", i.e. transposed) chained on the accumulator struct,
/// commit, and wait until at most c.wgmmaGroupsInFlight groups (1: this
/// one) are pending: the previous stage's wgmmas are retired, so its buffer
/// can take new loads after the next barrier (0: this stage's too). The accumulators stay in the
/// struct (the registers of the in-flight group) until build() retires
/// everything after the last stage.
Value MmaGemmBuilder::computeStageWgmma(Value stage, Value acc) {
  using W = warp_layout::Wgmma;
  Type structType = acc.getType();
  NVVM::WgmmaFenceAlignedOp::create(b);
  int64_t eltBytes = 2;
  NVVM::WGMMATypes ptxType =
      c.elt == MmaElt::bf16 ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
  // This thread's warpgroup reads the A rows 64 v .. 64 v + 63 of the
  // stage (the same B for both warpgroups of a 128-row tile).
  Value firstRow = e.muli(e.divui(tid, idx(W::kWarpgroupSize)), idx(W::M));
  // B MN-major ("row": transposed) from a [k][n] stage, K-major ("col")
  // from the n-major stage of a transposed B; a split A's two terms are two
  // wgmmas of the same k16 step on the same B (hi first).
  // The weight gradient's A^T is MN-major ("col": transposed) and its B's
  // two terms two wgmmas of each step on the same A.
  NVVM::MMALayout layoutB = c.bTransposed ? NVVM::MMALayout::col : NVVM::MMALayout::row;
  NVVM::MMALayout layoutA = c.kind == MmaGemmConfig::Kind::weightGrad ? NVVM::MMALayout::col
                                                                      : NVVM::MMALayout::row;
  const int64_t aTerms = c.splitA ? 2 : 1, bTerms = c.splitB() ? 2 : 1;
  for (int64_t kk = 0; kk < kMmaTileK; kk += W::K)
    for (int64_t term = 0; term < aTerms * bTerms; ++term) {
    int64_t ta = term / bTerms, tb = term % bTerms;
    Value aOff = e.muli(e.addi(e.muli(stage, idx(g.aStage())),
                               e.addi(idx(ta * g.aTerm), aIndex(firstRow, idx(kk)))),
                        idx(eltBytes));
    Value bOff = e.muli(e.addi(e.muli(stage, idx(g.bStage())),
                               e.addi(idx(tb * g.bTerm), bIndex(idx(kk), idx(0)))),
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
        NVVM::MMALayoutAttr::get(ctx, layoutA),
        NVVM::MMALayoutAttr::get(ctx, layoutB), NVVM::MMAIntOverflowAttr());
    }
  NVVM::WgmmaGroupSyncAlignedOp::create(b);
  NVVM::WgmmaWaitGroupSyncOp::create(b, b.getI64IntegerAttr(c.wgmmaGroupsInFlight));
  return acc;
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
      // gemm2's output row: the assignment of plan row p, or (a folded
      // shared tile) the token p; -1: none.
      Value r;
      if (!gemm1) {
        r = c.foldShared
                ? e.ifElse(
                       isShared, {e.i32()},
                       [&](IRB &e) {
                         return SmallVector<Value>{
                             e.rowOrNone(p, numTokens)};
                       },
                       [&](IRB &e) { return SmallVector<Value>{e.load(sorted, p)}; })[0]
                : e.load(sorted, p);
      }
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
            // The description's epilogue (buildEpilogue) on this output;
            // a folded shared tile's rows have no bias, and gemm2's are
            // weighed by the shared gate in place of the routed weight.
            auto apply = [&](IRB &e, const GemmEpilogue &ep, Value weights) {
              EpilogueValues in;
              in.acc = acc[g.accIndex(0, mt, nt, i)];
              if (g.parts == 2)
                in.accUp = acc[g.accIndex(1, mt, nt, i)];
              if (ep.has(EpilogueStep::bias)) {
                Value at = e.addi(e.muli(ex, W), n);
                in.bias = arith::ExtFOp::create(e.b, f32, e.load(bias, at));
                if (g.parts == 2)
                  in.biasUp = arith::ExtFOp::create(e.b, f32, e.load(bias, e.addi(at, N)));
              }
              if (ep.has(EpilogueStep::routedWeight))
                in.weight = e.load(weights, e.toIndex(r));
              return buildEpilogue(e.b, ep, in);
            };
            Value v;
            if (c.foldShared) {
              GemmEpilogue shared = epilogueDesc.without(EpilogueStep::bias);
              Value gate;
              if (!gemm1) {
                shared = GemmEpilogue();
                if (c.sharedGated)
                  shared.then(EpilogueStep::routedWeight);
                gate = args[foldArgs() + 2];
              }
              v = e.ifElse(
                  isShared, {f32},
                  [&](IRB &e) { return SmallVector<Value>{apply(e, shared, gate)}; },
                  [&](IRB &e) {
                    return SmallVector<Value>{apply(e, epilogueDesc, args[2])};
                  })[0];
            } else {
              v = apply(e, epilogueDesc, args[2]);
            }
            if (gemm1) {
              // h is stored in the data type (rounded by the epilogue).
              e.store(arith::TruncFOp::create(e.b, T, v), out, e.addi(e.muli(p, N), n));
            } else {
              if (!c.outF32)
                v = arith::TruncFOp::create(e.b, T, v);
              e.store(v, out, e.addi(e.muli(e.toIndex(r), N), n));
            }
          });
        }
    }
}

/// The backward's epilogues from the accumulator fragments (the layout of
/// epilogue()): rowGrad stores row r = rows[lr] of C (+ bias), or with
/// actGrad turns z into dZ (split into its two terms) and writes h;
/// weightGrad stores rows m < M of C[group] and row M as the bias gradient.
void MmaGemmBuilder::epilogueBackward(ArrayRef<Value> acc) {
  Type f32 = e.f32();
  const bool wgrad = c.kind == MmaGemmConfig::Kind::weightGrad;
  const bool gated = c.actGrad && epilogueDesc.gatedGrad();
  // f16: the split operand was scaled by s before it was split; the sums
  // are scaled back by 1/s (exact: a power of two).
  Value unscale = splitMax ? e.splitScale(e.load(splitMax, idx(0))).second : Value();
  for (int64_t mt = 0; mt < g.mTiles; ++mt)
    for (int64_t rh = 0; rh < 2; ++rh) {
      Value lr = e.addi(e.addi(e.muli(wm, idx(g.warpM)),
                               idx(mt * M16N8K16::M + M16N8K16::cRowOffset(2 * rh))),
                        groupID);
      // weightGrad: C's row m; rowGrad: A's (and C's) row r, -1 for padding.
      Value m = e.addi(rowBase, lr);
      Value r = wgrad ? Value() : e.load(rows, lr);
      for (int64_t nt = 0; nt < g.nTiles; ++nt)
        for (int64_t ch = 0; ch < 2; ++ch) {
          int64_t i = 2 * rh + ch;
          Value n = e.addi(e.addi(n0, e.addi(e.muli(wn, idx(g.warpN)),
                                             idx(nt * M16N8K16::N + M16N8K16::cColOffset(i)))),
                           e.muli(tig, idx(2)));
          Value v = acc[g.accIndex(0, mt, nt, i)];
          if (unscale)
            v = e.mulf(v, unscale);
          if (wgrad) {
            e.ifThen(e.andi(e.ult(n, N), e.ult(m, M)), [&](IRB &e) {
              e.store(v, out, e.addi(e.muli(e.addi(e.muli(group, M), m), N), n));
            });
            if (c.bias)
              e.ifThen(e.andi(e.ult(n, N), e.eq(m, M)), [&](IRB &e) {
                e.store(v, biasOut, e.addi(e.muli(group, N), n));
              });
            continue;
          }
          e.ifThen(e.andi(e.ult(n, N), e.ge(r, e.ci32(0))), [&](IRB &e) {
            Value row = e.toIndex(r);
            if (c.actGrad) {
              Value ldz = gated ? e.muli(N, idx(2)) : N;
              Value at = e.addi(e.muli(row, ldz), n);
              Value zUp = gated ? e.load(out, e.addi(at, N)) : Value();
              ActivationGradValues dv =
                  buildActivationGradEpilogue(e.b, epilogueDesc, v, e.load(out, at), zUp);
              // dZ as its two terms; with a scaled split (f16) dZ in f32 in
              // place of z (its terms need the scale of all of dZ: Host
              // splits it).
              auto storeTerms = [&](Value x, Value at) {
                if (c.scaledSplit())
                  return e.store(x, out, at);
                auto [hi, lo] = e.splitTerms(x, T);
                e.store(hi, dzHi, at);
                e.store(lo, dzLo, at);
              };
              storeTerms(dv.dz, at);
              if (gated)
                storeTerms(dv.dzUp, e.addi(at, N));
              // h is already rounded to T: exact.
              e.store(arith::TruncFOp::create(e.b, T, dv.h), hOut, e.addi(e.muli(row, N), n));
              return;
            }
            EpilogueValues in;
            in.acc = v;
            if (c.bias)
              in.bias = arith::ExtFOp::create(e.b, f32, e.load(bias, e.addi(e.muli(ex, N), n)));
            e.store(buildEpilogue(e.b, epilogueDesc, in), out, e.addi(e.muli(row, N), n));
          });
        }
    }
}

/// Split-K: with S > 1 every block stores its f32 partial tile (thread
/// tid's accumulator i at slot + i * kMmaThreads + tid of the workspace, so
/// the stores are coalesced and the same thread reads the slot back),
/// fences (release), and thread 0 arrives on the tile's counter; the block
/// whose arrival is the S-th sums the S partials of its tile in slice order
/// s = 0, 1, ..., S-1 from 0 (its own slice from its registers), after an
/// acquire fence, and runs `finish` on the sums. So the result does not
/// depend on which block arrives last, and no float atomics are used. With
/// S = 1 `finish` runs on the block's own accumulators.
void MmaGemmBuilder::finishSplitK(ArrayRef<Value> acc, Value z, Value S, Value pidN, Value gx,
                                  function_ref<void(ArrayRef<Value>)> finish) {
  size_t n = numArgs;
  Value workspace = args[n - 4], counters = args[n - 3], counterBase = args[n - 2];
  int64_t slotSize = g.numAcc() * kMmaThreads;
  Value tileIndex = e.addi(e.muli(pidM, gx), pidN);
  auto slotOf = [&](IRB &e, Value s) {
    return e.addi(e.muli(e.addi(e.muli(tileIndex, S), s), e.idx(slotSize)), tid);
  };
  Value split = e.ult(idx(1), S);
  Value last = e.ifElse(
      split, {b.getI1Type()},
      [&](IRB &e) {
        Value slot = slotOf(e, z);
        for (auto [i, v] : llvm::enumerate(acc))
          e.store(v, workspace, e.addi(slot, e.idx(static_cast<int64_t>(i) * kMmaThreads)));
        // Release: every thread's partial before the block's arrival.
        LLVM::FenceOp::create(e.b, LLVM::AtomicOrdering::acq_rel, "device");
        gpu::BarrierOp::create(e.b);
        e.ifThen(e.eq(tid, e.idx(0)), [&](IRB &e) {
          Value old = memref::AtomicRMWOp::create(e.b, arith::AtomicRMWKind::addi, e.ci32(1),
                                                  counters,
                                                  ValueRange{e.addi(counterBase, tileIndex)});
          e.store(e.select(e.eq(e.addi(old, e.ci32(1)), e.toI32(S)), e.ci32(1), e.ci32(0)),
                  splitFlag, e.idx(0));
        });
        gpu::BarrierOp::create(e.b);
        Value isLast = e.eq(e.load(splitFlag, e.idx(0)), e.ci32(1));
        // Acquire: the other blocks' partials.
        LLVM::FenceOp::create(e.b, LLVM::AtomicOrdering::acq_rel, "device");
        return SmallVector<Value>{isLast};
      },
      [&](IRB &e) { return SmallVector<Value>{e.ci1(true)}; })[0];
  e.ifThen(last, [&](IRB &) {
    SmallVector<Value> init(acc.size(), e.cf32(0.0));
    SmallVector<Value> sums =
        e.forLoop(idx(0), S, init, [&](IRB &le, Value s, ValueRange part) {
          // This block's own slice from its registers (with S = 1 nothing
          // was stored), the others from the workspace.
          Value slot = slotOf(le, s);
          SmallVector<Type> types(acc.size(), le.f32());
          SmallVector<Value> p = le.ifElse(
              le.eq(s, z), types,
              [&](IRB &) { return SmallVector<Value>(acc.begin(), acc.end()); },
              [&](IRB &le) {
                SmallVector<Value> loaded;
                for (size_t i = 0; i < acc.size(); ++i)
                  loaded.push_back(le.load(
                      workspace, le.addi(slot, le.idx(static_cast<int64_t>(i) * kMmaThreads))));
                return loaded;
              });
          SmallVector<Value> next;
          for (size_t i = 0; i < acc.size(); ++i)
            next.push_back(le.addf(part[i], p[i]));
          return next;
        });
    finish(sums);
  });
}

void MmaGemmBuilder::build() {
  bool gemm1 = c.kind == MmaGemmConfig::Kind::gemm1;
  const bool wgrad = c.kind == MmaGemmConfig::Kind::weightGrad;
  const bool backward = wgrad || c.kind == MmaGemmConfig::Kind::rowGrad;
  Value tileExpert, numTiles, offsets, numRows;
  A = args[0];
  if (wgrad) {
    offsets = args[1];
    Bw = args[2];
    bLo = args[3];
    out = args[4];
    biasOut = args[5];
    M = args[6];
    N = args[7];
    numRows = args[8];
    if (c.scaledSplit())
      splitMax = args[9];
  } else {
    tileExpert = args[3];
    numTiles = args[4];
    Bw = args[5];
    bias = args[6];
    out = args[7];
    K = args[8];
    N = args[9];
    if (c.kind == MmaGemmConfig::Kind::rowGrad) {
      aLo = args[2];
      hOut = args[10];
      dzHi = args[11];
      dzLo = args[12];
      if (c.scaledSplit())
        splitMax = args[13];
    }
  }
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

  Value active;
  if (wgrad) {
    // The group's rows [begin, end): K of this block. Offsets outside
    // [0, numRows] or decreasing (reported by the checked tile map) give an
    // empty group: nothing out of bounds is read.
    group = gpu::BlockIdOp::create(b, gpu::Dimension::z);
    Value begin = e.load(offsets, group), end = e.load(offsets, e.addi(group, idx(1)));
    Value valid = e.andi(e.andi(e.ge(begin, e.ci32(0)), e.ge(end, begin)),
                         e.ge(e.toI32(numRows), end));
    K = e.toIndex(e.select(valid, e.subi(end, begin), e.ci32(0)));
    first = e.toIndex(e.select(valid, begin, e.ci32(0)));
    active = e.ult(e.muli(pidM, idx(g.tileM)), c.bias ? e.addi(M, idx(1)) : M);
  } else {
    active = e.ult(pidM, e.toIndex(e.load(numTiles, idx(0))));
  }
  Value tile = pidM;
  isShared = e.ci1(false);
  Value rowsOut = out; // gemm2's routed rows (the combine reads them)
  if (c.foldShared) {
    // The folded shared expert's tiles come first: every size and buffer
    // that differs is selected per block (uniform over the block).
    size_t f = foldArgs();
    numTokens = args[f + 3 + (gemm1 ? 0 : 2)];
    SharedFold split = splitSharedTiles(e, pidM, numTokens, idx(g.tileM), numTiles);
    isShared = split.isShared;
    tile = split.tile;
    active = split.active;
    if (gemm1) {
      Bw = e.select(isShared, args[f], Bw);
      out = e.select(isShared, args[f + 1], out);
      N = e.select(isShared, args[f + 2], N);
      W = e.muli(N, idx(g.parts));
      // Columns past this tile's expert (H != Hs): nothing to do.
      active = e.andi(active, e.ult(n0, N));
    } else {
      A = e.select(isShared, args[f], A);
      Bw = e.select(isShared, args[f + 1], Bw);
      out = e.select(isShared, args[f + 3], out);
      K = e.select(isShared, args[f + 4], K);
    }
  }
  e.ifThen(active, [&](IRB &) {
    rowBase = e.muli(tile, idx(g.tileM));
    // 16-byte cp.async needs 16-byte aligned chunks: row lengths that are
    // multiples of 8 elements and 16-byte aligned buffers (checked at run
    // time; otherwise the same pipeline with element loads).
    auto multipleOf8 = [&](Value v) { return e.eq(e.remui(v, idx(8)), idx(0)); };
    if (wgrad) {
      aligned = e.andi(e.andi(multipleOf8(M), multipleOf8(N)),
                       e.andi(alignedTo16(A), e.andi(alignedTo16(Bw), alignedTo16(bLo))));
    } else {
      ex = e.toIndex(e.guardedLoad(e.noti(isShared), e.i32(),
                                   [&](IRB &e) { return e.load(tileExpert, tile); }));
      wBase = e.muli(ex, e.muli(K, W));
      // (Quantized B is read by element loads: only A's chunks matter.)
      aligned = c.quantized() ? e.andi(multipleOf8(K), alignedTo16(A))
                              : e.andi(e.andi(multipleOf8(K), multipleOf8(N)),
                                       e.andi(alignedTo16(A), alignedTo16(Bw)));
      if (c.splitA)
        aligned = e.andi(aligned, alignedTo16(aLo));
      e.ifThen(e.ult(tid, idx(g.tileM)), [&](IRB &e) { e.store(aRowOf(tid), rows, tid); });
      gpu::BarrierOp::create(b);
    }

    // The k-tiles of this block: all of them, or with split-K the slice
    // z of S (ceil(numK / S) tiles each; the last slices may be short or
    // empty when S does not divide numK).
    const int64_t stages = g.stages;
    Value numKAll = e.ceildiv(K, idx(kMmaTileK));
    Value kBegin = idx(0), numK = numKAll;
    Value z, S;
    if (c.splitK) {
      z = gpu::BlockIdOp::create(b, gpu::Dimension::z);
      S = args[numArgs - 1];
      Value per = e.ceildiv(numKAll, S);
      kBegin = e.mini(e.muli(z, per), numKAll);
      numK = e.subi(e.mini(e.addi(kBegin, per), numKAll), kBegin);
    }
    for (int64_t s = 0; s + 1 < stages; ++s) {
      e.ifThen(e.ult(idx(s), numK), [&](IRB &) { issueStage(e.addi(kBegin, idx(s)), idx(s)); });
      NVVM::CpAsyncCommitGroupOp::create(b);
    }
    SmallVector<Value> init(g.numAcc(), e.cf32(0.0));
    // wgmma: the loop carries the accumulator registers as one struct (no
    // access to them while a group is in flight), of zeros at first.
    auto zeroStruct = [&]() -> Value {
      SmallVector<Type> accTypes(g.numAcc(), e.f32());
      Value acc = LLVM::PoisonOp::create(b, LLVM::LLVMStructType::getLiteral(ctx, accTypes));
      Value zero = e.cf32(0.0);
      for (int64_t i = 0; i < g.numAcc(); ++i)
        acc = LLVM::InsertValueOp::create(b, acc, zero, ArrayRef<int64_t>{i});
      return acc;
    };
    if (c.wgmma)
      init = {zeroStruct()};
    // Quantized B: the loop carries the sums and the partial sums of the
    // current block or group (MmaGemmConfig::format), which its last k-tile
    // (or the slice's last) adds to the sums times their scales (mma.sync:
    // the sums, then the partial sums; wgmma: a loop per block or group,
    // below).
    const bool quant = c.quantized();
    const int64_t tilesPerGroup = quant ? c.blockK / kMmaTileK : 0;
    if (quant && !c.wgmma)
      init.append(g.numAcc(), e.cf32(0.0));
    // The stage buffer of k-tile kt (kt mod S) is carried by the loop: a
    // remainder by a stage count that is not a power of two cost the
    // 128-row combine kernels registers they do not have (spills at 3, 5, 6).
    init.push_back(idx(0));
    auto stageBody = [&](IRB &le, Value kt, ValueRange carried) -> SmallVector<Value> {
          ValueRange accIn = carried.drop_back();
          Value stage = carried.back();
          // Same builder state, nested insertion point.
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(le.b.getInsertionBlock(), le.b.getInsertionPoint());
          // Stage kt's group is complete (at most S-2 younger ones pending);
          // the barrier publishes it and retires stage kt-1's readers.
          NVVM::CpAsyncWaitGroupOp::create(b, stages - 2);
          // wgmma reads shared memory through the async proxy: this
          // thread's (generic proxy) writes of the stage are fenced before
          // the barrier that publishes them.
          if (c.wgmma)
            NVVM::FenceProxyOp::create(
                b, NVVM::ProxyKind::async_shared,
                NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
          gpu::BarrierOp::create(b);
          Value next = e.addi(kt, idx(stages - 1));
          // (kt + S - 1) mod S: the buffer of stage kt - 1.
          Value nextStage = e.select(e.eq(stage, idx(0)), idx(stages - 1), e.subi(stage, idx(1)));
          auto issueNext = [&] {
            e.ifThen(e.ult(next, numK), [&](IRB &) {
              issueStage(e.addi(kBegin, next), nextStage);
            });
            NVVM::CpAsyncCommitGroupOp::create(b);
          };
          SmallVector<Value> res;
          if (c.wgmma) {
            // The wgmmas of stage kt first (they stay in flight while the
            // loads are issued, with wgmmaGroupsInFlight = 1), then the
            // loads into the buffer of stage kt-1, once every thread retired
            // its wgmmas (wait_group 1 or 0 in computeStageWgmma, then this
            // barrier).
            res = {computeStageWgmma(stage, accIn[0])};
            gpu::BarrierOp::create(b);
            issueNext();
          } else if (quant) {
            issueNext();
            int64_t n = g.numAcc();
            SmallVector<Value> partial = computeStage(stage, accIn.drop_front(n));
            Value kTile = e.addi(kBegin, kt);
            Value last = e.ori(e.eq(e.remui(e.addi(kTile, idx(1)), idx(tilesPerGroup)), idx(0)),
                               e.eq(e.addi(kt, idx(1)), numK));
            SmallVector<Type> types(2 * n, e.f32());
            res = e.ifElse(
                last, types,
                [&](IRB &) {
                  SmallVector<Value> r = applyScales(kTile, accIn.take_front(n), partial);
                  r.append(n, e.cf32(0.0));
                  return r;
                },
                [&](IRB &) {
                  SmallVector<Value> r(accIn.take_front(n));
                  r.append(partial);
                  return r;
                });
          } else {
            issueNext();
            res = computeStage(stage, accIn);
          }
          Value following = e.addi(stage, idx(1));
          res.push_back(e.select(e.eq(following, idx(stages)), idx(0), following));
          le.b.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
          return res;
        };
    SmallVector<Value> acc;
    if (quant && c.wgmma) {
      // wgmma with quantized B: one loop per block or group of the slice
      // (the partial sums' struct carried by it, as the dense kernels carry
      // theirs: never read or written while its wgmmas are in flight), then
      // its wgmmas retired and the partial sums, times their scales, added
      // to the sums; the next starts from zeros.
      Value perGroup = idx(tilesPerGroup), kEnd = e.addi(kBegin, numK);
      SmallVector<Value> outer(g.numAcc(), e.cf32(0.0));
      outer.push_back(idx(0));
      acc = e.forLoop(
          e.divui(kBegin, perGroup), e.ceildiv(kEnd, perGroup), outer,
          [&](IRB &oe, Value group, ValueRange carried) -> SmallVector<Value> {
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPoint(oe.b.getInsertionBlock(), oe.b.getInsertionPoint());
            Value start = e.muli(group, perGroup);
            Value lo = e.subi(arith::MaxUIOp::create(b, start, kBegin), kBegin);
            Value hi = e.subi(e.mini(e.addi(start, perGroup), kEnd), kBegin);
            SmallVector<Value> inner =
                e.forLoop(lo, hi, ValueRange{zeroStruct(), carried.back()}, stageBody);
            NVVM::WgmmaWaitGroupSyncOp::create(b, b.getI64IntegerAttr(0));
            SmallVector<Value> partial;
            for (int64_t i = 0; i < g.numAcc(); ++i)
              partial.push_back(LLVM::ExtractValueOp::create(b, inner[0], ArrayRef<int64_t>{i}));
            SmallVector<Value> res =
                applyScales(e.addi(kBegin, lo), carried.drop_back(), partial);
            res.push_back(inner[1]);
            oe.b.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
            return res;
          });
    } else {
      acc = e.forLoop(idx(0), numK, init, stageBody);
    }
    acc.pop_back();
    if (quant && !c.wgmma)
      acc.resize(g.numAcc()); // the sums (the partial sums are 0)
    if (c.wgmma && !quant) { // (quantized: retired after every group)
      // Retire the last groups before the epilogue reads the accumulators.
      NVVM::WgmmaWaitGroupSyncOp::create(b, b.getI64IntegerAttr(0));
      Value accStruct = acc[0];
      acc.clear();
      for (int64_t i = 0; i < g.numAcc(); ++i)
        acc.push_back(LLVM::ExtractValueOp::create(b, accStruct, ArrayRef<int64_t>{i}));
    }
    NVVM::CpAsyncWaitGroupOp::create(b, 0);
    auto finish = [&](ArrayRef<Value> sums) {
      if (backward)
        return epilogueBackward(sums);
      epilogue(sums);
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
        if (c.foldShared) {
          ce.sharedOut = args[foldArgs() + 3];
          ce.sharedTile = isShared;
          ce.T = numTokens;
        }
        ce.rows = rowsOut;
        ce.D = N;
        ce.lastOf = lastOf;
        emitCombineEpilogue(e, ce, tid, rowBase, g.tileM, pidN, g.tileN, g.threads);
      }
    };
    if (!c.splitK)
      return finish(acc);
    finishSplitK(acc, z, S, pidN, gx, finish);
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
  [[maybe_unused]] bool backward = c.kind == MmaGemmConfig::Kind::rowGrad ||
                  c.kind == MmaGemmConfig::Kind::weightGrad;
  assert((!backward ||
          (!c.splitK && !c.foldShared && !c.combine &&
           (c.kind == MmaGemmConfig::Kind::rowGrad || (c.wgmma ? c.tileM == 64 : c.tileM <= 64)))) &&
         "the backward's tensor-core GEMMs have no split-K or fold (the weight gradient: 64-row wgmma tiles)");
  assert((!c.bTransposed && !c.splitA && !c.actGrad) ||
         c.kind == MmaGemmConfig::Kind::rowGrad);
  SmallVector<Type> args;
  if (c.kind == MmaGemmConfig::Kind::rowGrad)
    args = {flat(T), flat(i32), flat(T), flat(i32), flat(i32), flat(T), flat(T),
            flat(f32), ix, ix, flat(T), flat(T), flat(T)};
  else if (c.kind == MmaGemmConfig::Kind::weightGrad)
    args = {flat(T), flat(i32), flat(T), flat(T), flat(f32), flat(f32), ix, ix, ix};
  else
    args = {flat(T),   flat(i32), gemm1 ? flat(i32) : flat(f32),
            flat(i32), flat(i32), c.quantized() ? flat(c.desc(ctx).bType) : flat(T),
            flat(T),   gemm1 || !c.outF32 ? flat(T) : flat(f32),
            ix,        ix};
  if (c.scaledSplit()) // the split operand's largest finite magnitude (bits)
    args.push_back(flat(i32));
  assert((!c.combine || (!gemm1 && c.outF32)) && "the combine sums gemm2's f32 rows");
  assert((!c.shared || c.combine) && "the shared output goes with the combine");
  if (c.combine) {
    args.append({flat(i32), flat(i32), flat(i32), flat(T), ix});
    if (c.shared)
      args.push_back(flat(f32));
  }
  assert((!c.foldShared || gemm1 || (c.combine && !c.shared)) &&
         "gemm2 folds the shared expert into the combine");
  assert((!c.sharedGated || (!gemm1 && c.foldShared)) && "the shared gate weighs gemm2");
  // Split-K's workspace and tile counters are sized for the plan's tiles
  // only (ConvertMoEToGPU.cpp, splitK): a layer with a folded shared expert
  // keeps the kernels without split-K.
  assert(!(c.foldShared && c.splitK) && "split-K does not cover the folded shared tiles");
  if (c.foldShared) {
    if (gemm1)
      args.append({flat(T), flat(T), ix, ix});
    else
      args.append({flat(T), flat(T), flat(f32), flat(f32), ix, ix});
  }
  if (c.splitK) // workspace, tile counters, counterBase, S
    args.append({flat(f32), flat(i32), ix, ix});
  assert((!c.quantized() || ((gemm1 || c.kind == MmaGemmConfig::Kind::gemm2) &&
                             (!c.wgmma || c.tileM == warp_layout::Wgmma::M) &&
                             !c.foldShared && c.blockK % kMmaTileK == 0 && c.blockN > 0)) &&
         "quantized B: forward GEMMs (wgmma: 64-row tiles), blocks or groups of whole "
         "k-tiles, no fold");
  if (c.quantized()) { // the scales, and the int4 zero points
    args.push_back(flat(f32));
    if (c.zeroPoint)
      args.push_back(flat(IntegerType::get(ctx, 4)));
  }
  assert((c.wgmma ? c.tileM == warp_layout::Wgmma::M || c.tileM == 2 * warp_layout::Wgmma::M
                  : c.tileM <= 64) &&
         "wgmma computes 64- or 128-row tiles, mma.sync 16 to 64");
  Geometry g(c);

  OpBuilder ob(ctx);
  ob.setInsertionPointToEnd(module.getBody());
  ImplicitLocOpBuilder b(module.getLoc(), ob);
  auto func = gpu::GPUFuncOp::create(b, name, FunctionType::get(ctx, args, {}), TypeRange{},
                                     TypeRange{});
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), ob.getUnitAttr());
  func.setKnownBlockSizeAttr(
      ob.getDenseI32ArrayAttr({static_cast<int32_t>(c.threads()), 1, 1}));
  // The occupancy ptxas targets (.minnctapersm): one block, two of the
  // 256-thread 128-row wgmma tiles (at most 128 registers a thread). Without
  // a hint and with no static shared memory, ptxas assumes a high occupancy
  // and spills some variants (mma.sync m32 at sm_80: 72 registers).
  func->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                ob.getI32IntegerAttr(c.wgmma && c.tileM == 128 ? 2 : 1));
  // What every launch of the kernel asks for (MaterializeLaunchesPass).
  MmaGemmConfig::SmemLayout layout = c.smemLayout();
  func->setAttr(kDynamicSmemAttr, ob.getI32IntegerAttr(layout.bytes));
  Block &entry = func.getBody().front();
  b.setInsertionPointToStart(&entry);
  IRB e(b);
  // The shared buffers: views of the dynamic shared memory (SmemLayout).
  auto space = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  Value dyn = gpu::DynamicSharedMemoryOp::create(
      b, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(), MemRefLayoutAttrInterface(),
                         space));
  SmallVector<Value> smem;
  auto view = [&](int64_t byteOffset, int64_t elements, Type elt) {
    if (byteOffset >= 0)
      smem.push_back(memref::ViewOp::create(b, workgroup(ctx, elements, elt), dyn,
                                            e.idx(byteOffset), ValueRange{}));
  };
  view(layout.a, g.stages * g.aStage(), T);
  view(layout.b, g.stages * g.bStage(), T);
  view(layout.rows, c.tileM, i32);      // the A row of each tile row
  view(layout.lastOf, c.tileM, i32);    // the combine: the token a row completes, or -1
  view(layout.splitFlag, 1, i32);       // split-K: 1 when this block completes its tile
  MmaGemmBuilder(e, c, entry.getArguments().take_front(args.size()), smem).build();
  gpu::ReturnOp::create(b);
  return func;
}
