//===- MmaGemm.h - tensor-core grouped expert GEMMs -------------*- C++ -*-===//
//
// The expert GEMMs of the GPU path for bf16/f16 data on tensor cores
// (sm_80+): warp-level `mma.sync.m16n8k16` with f32 accumulation, operands
// staged in shared memory by a multi-stage `cp.async` pipeline and read with
// `ldmatrix`. They have the interface of KernelLibrary::gemm1/gemm2
// (Kernels.h): rows gathered through the routing plan (`sorted`, and the
// source rows for the gather), the expert of every M-tile in `tileExpert`,
// bias, activation (gated pairs too) and the rounding of h to the data type
// in gemm1's epilogue, bias and the routed weight in gemm2's epilogue.
//
// Ops used (docs/spec.md §7): `nvgpu.device_async_copy` (cp.async, 16
// bytes, zero fill of tails), `nvvm.cp.async.commit.group` /
// `nvvm.cp.async.wait.group`, `nvgpu.ldmatrix` (x4, and x4.trans for B) and
// `nvvm.mma.sync` (bf16 cannot go through nvgpu.mma.sync in MLIR 22; f16
// uses the same op for one code path). `--moe-test-emulate-gpu` runs all of
// them on the host with their documented fragment layouts (EmulateGPU.cpp,
// WarpLayouts.h).
//
// Tiles (see docs/gpu.md, "Tensor-core GEMMs"): a block of kMmaThreads (4
// warps; 8 warps = 2 warpgroups for the 128-row wgmma tile) computes tileM x
// 128 outputs (gated: 64 gate + 64 up columns), tileM = the routing plan's
// tile (64 or 128 for prefill, 16/32 for decode), depth
// kMmaTileK = 32 per stage, kMmaStages stages (kMmaStagesM16 at 16 rows).
// At decode a GEMM may split K over the grid's z dimension with a
// deterministic reduction (MmaGemmConfig::splitK; docs/gpu.md, "Split-K at
// decode"). Shared-memory rows are padded
// by 8 elements (16 bytes), which makes every ldmatrix phase and every
// cp.async row conflict-free. Blocks are visited in groups of
// kMmaGroupM M-tiles per weight column slice (an L2-friendly order).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_GPU_MMAGEMM_H
#define MOE_LOWERING_GPU_MMAGEMM_H

#include "dialect/MoEAttrs.h"
#include "dialect/MoEDialect.h"
#include "lowering/GroupedGemm.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <optional>
#include <string>

namespace mlir {
namespace moe {
namespace gpu_lowering {

constexpr int64_t kMmaThreads = 128;  // 4 warps
constexpr int64_t kMmaTileN = 128;    // B columns per block (all parts)
constexpr int64_t kMmaTileK = 32;     // depth of one pipeline stage
/// wgmma (sm_90a): the default of MmaGemmConfig::wgmmaGroupsInFlight
/// (convert-moe-to-gpu's wgmma-groups-in-flight).
constexpr int64_t kWgmmaGroupsInFlight = 1;
constexpr int64_t kMmaStages = 3;     // cp.async pipeline depth (mma.sync 32/64-row tiles)
/// sm_90a wgmma tiles (docs/gpu.md, "Shared-memory budget"): 64 rows, 4
/// stages of 12 KiB (48 KiB of dynamic shared memory); 128 rows, 4 stages
/// of 16 KiB (64 KiB: three blocks' worth fit the 227 KiB of an SM, the
/// 255-register cap of two 256-thread blocks is the occupancy limit).
constexpr int64_t kWgmmaStages = 4;
constexpr int64_t kWgmmaStagesM128 = 4;
/// The range of #moe.gpu_config's stages (0: the defaults).
constexpr int64_t kMinMmaStages = kMinGpuStages;
constexpr int64_t kMaxMmaStages = kMaxGpuStages;
/// The most dynamic shared memory a block may opt in to on sm_90 (227 KiB;
/// sm_80: 163 KiB); the kernels' alignment of the staging buffers.
constexpr int64_t kMaxDynamicSharedSm90 = 232448;
constexpr int64_t kMaxDynamicSharedSm80 = 166912;
constexpr int64_t kSmemAlign = 128;
/// The kernel attribute (i32) holding a tensor-core GEMM's dynamic shared
/// memory bytes; moe-gpu-materialize-launches passes it to every launch.
constexpr llvm::StringLiteral kDynamicSmemAttr = MoEDialect::getGpuDynamicSharedMemoryAttrName();
/// The 16-row (decode) tiles: A is 16 rows, B dominates a stage (8.7 KB of
/// 10 KB), so four stages (three in flight) fit the 48 KB of static shared
/// memory: 40 KB per block.
constexpr int64_t kMmaStagesM16 = 4;
/// Split-K at decode (convert-moe-to-gpu, decode-split-k = 0): slices so
/// that a GEMM launches about this many blocks (about 4 per SM of a
/// 132-SM H100/H200), each slice at least kSplitKMinTiles k-tiles deep.
constexpr int64_t kSplitKTargetBlocks = 512;
constexpr int64_t kSplitKMinTiles = 8;
constexpr int64_t kMmaPad = 8;        // shared-memory row padding (elements)
/// The rows of C (A's columns) per block of the weight-gradient GEMMs.
constexpr int64_t kMmaWeightGradTileM = 64;
constexpr int64_t kMmaGroupM = 8;     // M-tiles per group of the tile order

/// The element type of the tensor-core GEMMs' operands.
enum class MmaElt { bf16, f16 };

/// One tensor-core GEMM kernel variant. Its name encodes it (name() and
/// parse() are inverse), so test passes can build a kernel from its name.
struct MmaGemmConfig {
  /// gemm1 and gemm2: the forward's two GEMMs. rowGrad and weightGrad: the
  /// backward's (docs/gpu.md, "Tensor cores in the backward"): a row GEMM
  /// over the plan's tiles (the recomputed z, dH with the activation's
  /// backward in its epilogue, dX through the transposed weights) and a
  /// variable-K weight gradient over each group's rows.
  enum class Kind { gemm1, gemm2, rowGrad, weightGrad };
  Kind kind = Kind::gemm1;
  MmaElt elt = MmaElt::bf16;
  int64_t tileM = 64; // the routing plan's tile: 16, 32, 64, or 128 (wgmma)
  // gemm1
  bool gather = false;
  Activation act = Activation::relu;
  // gemm1 and gemm2
  bool bias = false;
  // gemm2
  bool weighted = false;
  bool outF32 = true; // gemm2's rows: f32 (else the data type)
  /// gemm2 with the combine in its epilogue (Kernels.h, emitCombineEpilogue;
  /// needs outF32): the fused layer's per-token sums in slot order, after
  /// the shared expert's f32 output with `shared`.
  bool combine = false;
  bool shared = false;
  /// The shared expert folded into the launch (Kernels.h, SharedFold): the
  /// first ceil(T / tileM) row tiles are the shared expert's (gemm1: s1 into
  /// hs; gemm2, with `combine` and not `shared`: hs x s2 into sharedOut,
  /// times the gate with `sharedGated`, the first term of every token).
  bool foldShared = false;
  bool sharedGated = false;
  /// sm_90a: the MMAs are warpgroup-level `wgmma.mma_async` m64n128k16 on
  /// shared-memory matrix descriptors (tileM = 64 or 128), the stages in the
  /// canonical no-swizzle core-matrix layout (WarpLayouts.h, Wgmma). With
  /// tileM = 128 the block is two consumer warpgroups (kMmaThreads each):
  /// warpgroup w computes rows 64 w .. 64 w + 63 of the tile against the
  /// same B stage.
  bool wgmma = false;
  /// wgmma: commit groups of wgmma.mma_async left in flight at the end of
  /// a stage (wgmma.wait_group N; see computeStageWgmma and docs/gpu.md,
  /// "wgmma (sm_90a)"). 1 (kWgmmaGroupsInFlight): stage kt's group runs on
  /// while the loads of k-tile kt+2 are issued, stage kt-1's is retired;
  /// 0: every stage's group is retired before the barrier (the conservative
  /// order). Only 0 and 1 are valid (the loads reuse the buffer of stage
  /// kt-1). A value other than 1 is part of the name (`_inflight<N>`) of a
  /// wgmma variant; without wgmma it is ignored.
  int64_t wgmmaGroupsInFlight = kWgmmaGroupsInFlight;
  /// Split-K (decode): the grid's z dimension splits the K loop into S
  /// slices (S a run-time argument); every block stores its f32 partial
  /// tile to a workspace and arrives on its tile's counter; the last block
  /// of a tile sums the S partials in slice order s = 0..S-1 and runs the
  /// epilogue (docs/gpu.md, "Split-K"). Extra arguments after all others:
  /// (workspace:f32, counters:i32, counterBase, S).
  bool splitK = false;
  /// rowGrad: B is the transpose of the expert's matrix W[g] ([N, K] in
  /// memory, k-contiguous rows: staged as n rows, read by ldmatrix without
  /// .trans).
  bool bTransposed = false;
  /// rowGrad: A is an f32 operand given as two bf16 terms, hi = bf16(a) and
  /// lo = bf16(a - hi) (splitF32 of Kernels.h), both staged; every B
  /// fragment meets both (two mma.sync per step, hi first). The sum of the
  /// two terms is a to within 2^-16 |a|, and their products with bf16
  /// values are exact in f32. weightGrad's B (the f32 cotangent rows) is
  /// always given that way.
  bool splitA = false;
  /// rowGrad: the epilogue is EpilogueStep::activationGrad of `act`: C
  /// holds z, the split dZ and h (bf16) are written (MmaGemm.h, buildMmaGemm).
  bool actGrad = false;
  /// gemm1 and gemm2 with quantized B (docs/gpu.md, "Quantized expert
  /// weights"; the fields of GroupedGemmDesc): B holds codes (i4 or
  /// f8E4M3FN, one per byte), staged by element loads as their exact
  /// factors in the data type (buildQuantizedFactor: the E4M3 value, or
  /// q - z), and the scales are applied once per block or group of K to
  /// the f32 partial sums (docs/spec.md §2.1, the per-block form). The
  /// block or group along K is a multiple of kMmaTileK (quantizedOk), so a
  /// stage lies in one. The scales (f32) and the zero points (i4) are the
  /// last arguments; the name ends with GroupedGemmDesc::formatSuffix.
  WeightFormat format = WeightFormat::dense;
  int64_t blockK = 0, blockN = 0;
  bool zeroPoint = false;
  bool quantized() const { return format != WeightFormat::dense; }
  /// Whether the tensor-core GEMMs take a quantized `desc`: forward GEMMs
  /// whose block or group along K is a multiple of kMmaTileK.
  static bool quantizedOk(const GroupedGemmDesc &desc) {
    return desc.quantized() && desc.blockK % kMmaTileK == 0;
  }
  /// The description of this variant's weight format (format fields only).
  GroupedGemmDesc formatDesc() const {
    GroupedGemmDesc d;
    d.format = format;
    d.blockK = blockK;
    d.blockN = blockN;
    d.zeroPoint = zeroPoint;
    return d;
  }

  /// cp.async pipeline stages; 0: the default (defaultStages()). A
  /// non-default value is part of the name (`_s<N>`).
  int64_t stages = 0;

  /// The default pipeline depth: kMmaStagesM16 for the 16-row mma.sync
  /// tiles, kWgmmaStages / kWgmmaStagesM128 for the 64- / 128-row wgmma
  /// tiles, else kMmaStages (docs/gpu.md, "Shared-memory budget").
  int64_t defaultStages() const {
    if (wgmma)
      return tileM == 128 ? kWgmmaStagesM128 : kWgmmaStages;
    return tileM == 16 ? kMmaStagesM16 : kMmaStages;
  }
  int64_t numStages() const { return stages > 0 ? stages : defaultStages(); }

  /// Elements per row of a stage in shared memory: mma.sync pads rows by
  /// kMmaPad (ldmatrix without bank conflicts), wgmma's core matrices are
  /// dense.
  /// weightGrad stages A^T k-major (kMmaTileK rows of tileM m), rowGrad
  /// with bTransposed stages B n-major (kMmaTileN rows of kMmaTileK k).
  int64_t aStride() const {
    if (kind == Kind::weightGrad)
      return wgmma ? tileM : tileM + kMmaPad;
    return wgmma ? kMmaTileK : kMmaTileK + kMmaPad;
  }
  int64_t bStride() const {
    if (bTransposed)
      return wgmma ? kMmaTileK : kMmaTileK + kMmaPad;
    return wgmma ? kMmaTileN : kMmaTileN + kMmaPad;
  }
  /// Elements of one term of a stage of A (tileM x kMmaTileK) and of B
  /// (kMmaTileK x kMmaTileN, all parts); a split operand's stage holds two
  /// (hi, then lo).
  int64_t aTermElems() const {
    return (kind == Kind::weightGrad ? kMmaTileK : tileM) * aStride();
  }
  int64_t bTermElems() const { return (bTransposed ? kMmaTileN : kMmaTileK) * bStride(); }
  bool splitB() const { return kind == Kind::weightGrad; }
  /// f16 split operands: f16's range cannot hold an f32 cotangent, so the
  /// split operand is multiplied by a power of two s (IRB::splitScale of
  /// its largest finite magnitude, found by KernelLibrary::absMaxBits)
  /// before it is split, and the sums by 1/s in the epilogue; the kernel
  /// takes (maxBits:i32 [1]) after its other arguments. bf16 has f32's
  /// exponent range and needs no scale.
  bool scaledSplit() const {
    return elt == MmaElt::f16 &&
           (kind == Kind::weightGrad || (kind == Kind::rowGrad && splitA));
  }
  int64_t aStageElems() const { return aTermElems() * (splitA ? 2 : 1); }
  int64_t bStageElems() const { return bTermElems() * (splitB() ? 2 : 1); }
  /// Every shared buffer of the kernel is a view of its dynamic shared
  /// memory (`gpu.dynamic_shared_memory` + `memref.view`), at these byte
  /// offsets (-1: absent); `bytes` is what the kernel's launches ask for
  /// (kernel attribute kDynamicSmemAttr). No static shared memory: MLIR's
  /// NVVM lowering declares the dynamic base as a zero-length, non-extern
  /// .shared variable, which is only safe as the kernel's sole one.
  struct SmemLayout {
    int64_t a = 0;        // A's stages (stages x aStageElems, the data type)
    int64_t b = -1;       // B's stages (stages x bStageElems)
    int64_t rows = -1;    // i32 [tileM]: the A row of each tile row
    int64_t lastOf = -1;  // i32 [tileM]: the combine's token per row
    int64_t splitFlag = -1; // i32 [1]: split-K's last-block flag
    int64_t bytes = 0;
  };
  SmemLayout smemLayout() const;
  int64_t dynamicSharedBytes() const { return smemLayout().bytes; }

  int parts() const {
    return kind == Kind::gemm1 && (act == Activation::swiglu || act == Activation::geglu) ? 2
                                                                                          : 1;
  }
  /// Output columns per block (per part).
  int64_t tileN() const { return kMmaTileN / parts(); }
  /// Warpgroups of a block: one, two for a 128-row wgmma tile.
  int64_t warpgroups() const { return wgmma ? tileM / 64 : 1; }
  /// Threads of a block (the launch's block size).
  int64_t threads() const { return kMmaThreads * warpgroups(); }
  std::string name() const;
  static std::optional<MmaGemmConfig> parse(StringRef name);

  /// The variant that computes `desc` (lowering/GroupedGemm.h: expertGemm1
  /// or expertGemm2 of one bf16/f16 type); the strategy fields (tileM,
  /// wgmma, stages, split-K) and the shared-expert fold stay at their
  /// defaults.
  static MmaGemmConfig of(const GroupedGemmDesc &desc);
  /// The backward's variant that computes `desc`: a row GEMM (bf16/f16 B;
  /// A of B's type, or f32 taken as split terms; f32 C) or a weight
  /// gradient (bf16/f16 A, f32 B taken as split terms, f32 C); f16 split
  /// terms are scaled (scaledSplit). nullopt when no tensor-core variant
  /// computes it.
  static std::optional<MmaGemmConfig> ofBackward(const GroupedGemmDesc &desc);
  /// What this variant computes (the inverse of `of`).
  GroupedGemmDesc desc(MLIRContext *ctx) const;
};

/// Element type of `elt` in `ctx`.
Type mmaElementType(MLIRContext *ctx, MmaElt elt);
/// bf16/f16 -> MmaElt; nullopt for other types.
std::optional<MmaElt> mmaEltOf(Type type);

/// Builds (or finds) the kernel of `config` in `module`.
///
/// gemm1: (A:T, sorted:i32, sourceRows:i32, tileExpert:i32, numTiles:i32,
/// w1:T, b1:T, h:T, D, H); grid (ceil(H / tileN), maxTiles), threads().
/// gemm2: (h:T, sorted:i32, rowWeights:f32, tileExpert:i32, numTiles:i32,
/// w2:T, b2:T, out:f32|T, H, D); grid (ceil(D / tileN), maxTiles).
/// With `combine`: (sourceRows:i32 [T*K], positions:i32 [T*K], counters:i32
/// [T * ceil(D / tileN)], y:T [T, D], K[, shared:f32 [T, D]]) follow, as for
/// KernelLibrary::gemm2(..., combine = true) but with the counters of this
/// kernel's column tile.
/// With `splitK`: (workspace:f32 [maxTiles * ceil(N / tileN) * S * tileM *
/// kMmaTileN], counters:i32 [counterBase + maxTiles * ceil(N / tileN)],
/// counterBase, S) follow; grid (ceil(N / tileN), maxTiles, S); the tile
/// counters must be 0 at the launch (the last block of a tile leaves its
/// counter at S: the align kernel zeroes them every call).
/// rowGrad: (a:T, sorted:i32, aLo:T, tileExpert:i32, numTiles:i32, w:T,
/// b:T, c:f32, K, N, h:T, dzHi:T, dzLo:T); grid (ceil(N / kMmaTileN),
/// maxTiles). Row r = sorted[p] of A (a, and aLo with splitA) gives row r of
/// C: c[r, n] = A[r] B[:, n] (+ b[g, n]); with actGrad, c holds z ([R, 2N]
/// gated, else [R, N]) and the epilogue writes dZ as two terms into dzHi
/// and dzLo (z's shape) and h[r, n] (T). The unused buffers may be any of
/// their type.
/// weightGrad: (a:T, offsets:i32 [G+1], bHi:T, bLo:T, c:f32 [G, M, N],
/// bias:f32 [G, N], M, N, numRows); grid (ceil(N / kMmaTileN), ceil((M +
/// bias) / tileM), G): c[g] = A[rows of g]^T B[rows of g], summed over the
/// group's rows in k-tiles of kMmaTileK; with `bias` row M of the product
/// (a column of ones in A) is bias[g].
/// f16 (scaledSplit): (maxBits:i32 [1]) follows, and the sums are
/// multiplied by 1/s of IRB::splitScale(maxBits); an f16 rowGrad with
/// actGrad writes dZ in f32 into c, in place of z (Host splits it with the
/// scale of all of dZ), not into dzHi/dzLo.
/// maxTiles blocks of the y dimension are the plan's tiles of tileM rows.
/// With `foldShared`, gemm1: (s1:T [D, Ws], hs:T [>= ceil(T/tileM) tileM, Hs],
/// Hs, T) follow and the grid is (ceil(max(H, Hs) / tileN), ceil(T/tileM) +
/// maxTiles); gemm2: (hs:T, s2:T [Hs, D], gate:f32 [T], sharedOut:f32 [T, D],
/// Hs, T) follow the combine's and the grid is (ceil(D / tileN),
/// ceil(T/tileM) + maxTiles).
gpu::GPUFuncOp buildMmaGemm(gpu::GPUModuleOp module, const MmaGemmConfig &config);

} // namespace gpu_lowering
} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_GPU_MMAGEMM_H
