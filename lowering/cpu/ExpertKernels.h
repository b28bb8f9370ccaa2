//===- ExpertKernels.h - CPU strategy for the expert GEMMs ------*- C++ -*-===//
//
// The CPU code generation strategy of the moe lowering (docs/spec.md §7):
// grouped GEMMs over the routing plan's row groups, emitted at the memref
// level as register-blocked vector micro-kernels (vector.fma on f32 vectors
// of the configured width, lowered by LLVM to AVX-512, AVX2 or SSE/NEON
// FMAs) inside a cache-blocked, all-cores scf.parallel loop nest. The token
// gather is folded into the loading of GEMM1's left operand (rows read
// through the plan), and every epilogue (bias, activation, rounding to the
// element type, routed weight) is applied to the accumulators before they
// are stored.
//
// Numerics (docs/spec.md §2-§3): operands of any element type (f32, bf16,
// f16) are extended to f32 as they are loaded; products accumulate in f32 in
// increasing k order; epilogues compute in f32 and round once when they
// store to a narrower type. The configuration changes the blocking, never
// the order of a sum: every configuration gives the same bits.
//
// The strategy is data: a #moe.cpu_config (chosen from the target CPU by
// --moe-cpu-configure, or written by the user) gives the vector width L,
// the register blocking (micro_rows x micro_vectors vectors of
// accumulators), the cache blocking and the prefetch distance.
//
// Work decomposition. A work item is (group, column block, row block), the
// forward's groups only those that have rows:
// `row_block` plan rows of one group times `col_block` output columns, the
// whole reduction dimension. Inside it, micro-tiles of micro_rows rows x
// (micro_vectors x L) columns keep every accumulator in a register; the
// column loop is outside the row loop, so one micro-panel of the right
// operand is reused from the cache by all row micro-tiles. Column tails are
// handled with masked loads and stores, row tails by clamping the rows that
// are read and skipping the stores of the missing rows; a tail that fits in
// a tile of half as many rows (rounded up to a power of two: 4 of 6) runs in
// such a tile, and with quantized weights every tail runs in a tile of its
// size, so that at decode (a few rows per group) few FMAs are spent on
// missing rows. Packed int4 weights on the FMA path (no dot product) take
// the columns two panels at a time, and a tail of one row runs in one
// wide tile over both: a one-row tile has micro_vectors independent
// accumulators (2 on AVX2), too few to hide the FMA latency at decode, when
// every expert has about one row. Decode (a few rows
// per expert) and prefill (hundreds) are the same loop nest: at decode the
// column blocks give every core work, at prefill the row blocks do.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_CPU_EXPERTKERNELS_H
#define MOE_LOWERING_CPU_EXPERTKERNELS_H

#include "dialect/MoEAttrs.h"
#include "lowering/GroupedGemm.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"
#include "mlir/Support/LLVM.h"

namespace mlir {
namespace moe {
namespace cpu {

/// The configuration of an op without a `moe.cpu_config`: AVX-512 (16 f32
/// lanes, 6 x 4 vectors of accumulators, 48 x 256 work items).
CpuConfigAttr defaultCpuConfig(MLIRContext *ctx);
/// The configuration `--moe-cpu-configure` chooses for a CPU with these
/// features (LLVM's names: "avx512f", "avx2", "fma", "avx512bf16", ...):
/// AVX-512 -> 512-bit vectors, 32 registers, 6 x 4; AVX2 + FMA -> 256-bit, 16
/// registers, 6 x 2; anything else -> 128-bit, 16 registers, 6 x 2.
CpuConfigAttr chooseCpuConfig(MLIRContext *ctx, const llvm::StringMap<bool> &features);
/// The features of the named CPU (LLVM's x86 CPU names, "native" for the
/// host); failure for a name LLVM does not know.
FailureOr<llvm::StringMap<bool>> cpuFeatures(StringRef cpu);
/// The configuration an op is lowered with: its `moe.cpu_config`, else the
/// nearest enclosing op's, else defaultCpuConfig.
CpuConfigAttr cpuConfigOf(Operation *op);

/// One grouped GEMM of the description `desc` (lowering/GroupedGemm.h):
/// C[r, :] = epilogue(A[row(r), :] x B[group(r)]) for the rows r of every
/// group, with the operands below and the CPU strategy (packing, the bf16
/// dot product, the configuration). The weight-gradient form
/// (GemmReduction::groupRows): C[g] = A[rows of g]^T x B[rows of g], its
/// rows the `numRows` columns of A, its K the group's row count.
struct GroupedGemm {
  GroupedGemmDesc desc;
  /// Left operand, memref<? x K x T> (rows contiguous; the weight gradient:
  /// memref<? x M x T>, read down its columns).
  Value a;
  /// With GemmRows::gathered, memref<? x i32>: the row of `a` that plan row
  /// r reads (the gather).
  Value aRowMap;
  /// Right operand: memref<G x K x N x T> (GemmWeights::perGroup) or
  /// memref<K x N x T> (GemmWeights::shared), [.., N, K] with bTransposed
  /// (unpacked: read element by element; packed: see declarePackedWeights);
  /// the weight gradient: memref<P x N x T>, one row per plan row.
  Value b;
  /// memref<G+1 x i32>: group g owns plan rows [offsets[g], offsets[g+1]).
  /// Null: one group of `numRows` rows.
  Value groupOffsets;
  /// Without groupOffsets, the rows; in the weight-gradient form, the rows
  /// of every group's C (A's columns M).
  Value numRows;
  /// The number of groups (index; with groupOffsets).
  Value numGroups;
  /// The reduction size K and the number of output columns (H for a gated
  /// GEMM whose B has 2H columns), as index values.
  Value reduction;
  Value columns;
  /// The epilogue's operands: with EpilogueStep::bias, memref<G x N'>
  /// (perGroup; N' = 2H when gated) or memref<N'> (shared); with
  /// routedWeight, memref<? x T> (one weight per plan row).
  Value bias, rowWeights;
  /// The result, memref<? x N x T'> (the weight gradient: memref<G x M x N
  /// x T'>, M = numRows): rounded to T' when stored.
  Value c;
  /// With EpilogueStep::activationGrad: C (memref<? x N x f32>, gated
  /// memref<? x 2N x f32>) holds the pre-activation and receives dZ, and
  /// this memref<? x N x f32> receives H.
  Value activationOut;
  /// B is in the packed layout of emitPackWeights (then rank 4).
  bool bPacked = false;
  /// WeightFormat::fp8Block: the scales. Unpacked B: memref<G x KB x NB x
  /// f32> (B's [G, K, N] in blocks of the description's blockK x blockN),
  /// each weight dequantized exactly as it is loaded. Packed B: the panel
  /// scales of declarePackedScales, applied to each block's partial sums.
  Value bScales;
  /// WeightFormat::int4Group with zero points: unpacked B, memref<G x KB x
  /// N x i4> (KB = ceil(K / group)); packed B, the panel zero points of
  /// declarePackedScales (as f32). Null: the zero point is 8.
  Value bZeroPoints;
  /// WeightFormat::fp8Block: every vector of L columns that the micro-kernel
  /// loads lies in one block (blockN a multiple of L and, gated, H too): one
  /// scale per vector instead of one per lane.
  bool fp8VectorScale = false;
  /// The weight gradient: B (one row per plan row) is in the layout of
  /// emitPackRows, memref<panels x P x W x f32>.
  bool bPackedRows = false;
  /// The weight gradient: A is in the layout of emitPackColumns,
  /// memref<ceil(M / R) x P x R x f32>, R the configuration's micro_rows.
  bool aPackedColumns = false;
  /// The weight gradient with the bias gradient fused (memref<G x N x f32>):
  /// A's last column (numRows - 1, emitPackColumns' column of ones) is not
  /// a row of C; its sums, the group's column sums of B, go here.
  Value biasGradient;
  /// A and B are bf16, B is packed pairwise (VNNI): products through the
  /// AVX512_BF16 dot product (x86vector.avx512.dot). Packed int4 B (bytes
  /// of two codes) and packed FP8 B (pairwise, in the unpacks' order; the
  /// configuration's fp8_dot) become bf16 pairs in registers.
  bool bf16Dot = false;
  /// With bf16Dot: the products on the AMX tile unit (amx.tile_mulf) in
  /// micro-tiles of 16 rows; amxPairs is B's (static) pair count, ceil(K/2).
  bool amx = false;
  int64_t amxPairs = 0;
  /// Set by emitGroupedGemm: A as the AMX tiles read it (emitAmxPackA).
  Value amxA;
  /// The int8-activation mode (#moe.quant's int8_activations) with packed
  /// int4 B in the `vnni` layout of declarePackedWeights: A holds the rows'
  /// int8 codes, memref<? x K8 x i8> (K rounded up to 8, zero-padded), and
  /// the products run on the configuration's int8 dot product (vpdpbusd at
  /// 512 or 256 bits, or vpmaddubsw + vpmaddwd at 256).
  bool int8Dot = false;
  /// With int8Dot: the codes' scales and sums per row of A and group of K,
  /// memref<? x ceil(K / group) x f32> each.
  Value aScales, aCodeSums;
  /// Set by emitGroupedGemm for packed int4 weights: each row of A summed
  /// over each group of K, memref<rows x groups x f32>.
  Value aGroupSums;
  /// Vector width, register and cache blocking.
  CpuConfigAttr config;

  bool gated() const { return desc.gated(); }
};

/// Expert weights prepared once for the micro-kernels: B [G, K, N] (gated:
/// [G, K, 2H]) repacked into panels [G, P, K, W] (W = lanes x micro_vectors
/// of the configuration, P = ceil(N / W), gated: ceil(H / (W/2)) panels
/// holding W/2 gate and the W/2 matching up columns), zero-padded, so that a micro-kernel streams one
/// contiguous panel. The packed copy lives in a module global, with a key
/// global recording the buffer it was built from (base address and a hash
/// of 64 sampled elements); it is rebuilt only when a call passes a buffer
/// with another key. Expert weights are thus read once per buffer, not per
/// call; a caller that rewrites a weight buffer in place such that those
/// samples keep their values must turn packing off (`pack-weights=false`).
struct PackedWeights {
  Value packed; // memref<G x P x K x W x T>
  Value key;    // memref<2 x i64>
};
/// Declares the globals for weights of `w`'s (static) type in the symbol
/// table `symbolTableOp` and returns them (memref.get_global).
/// With `vnni` (bf16 for the AVX512_BF16 dot product) the panels hold pairs
/// of rows interleaved: [G, P, ceil(K / 2), 2 * W], element (k, c) at
/// [k / 2][2 * c + k % 2], a missing last odd row as zeros. FP8 E4M3 codes
/// packed pairwise (the configuration's fp8_dot) are stored in the order of
/// the micro-kernel's byte unpacks instead: per 64-byte chunk j (vectors 2j
/// and 2j + 1 of the pair row) and 128-bit lane L, the bytes 8L..8L+7 of
/// vector 2j's interleaved pairs, then those of vector 2j + 1's.
/// With `transposed`, `w` is stored [G, N, K] (GroupedGemmDesc::bTransposed)
/// and packed into the same panels as its transpose would be.
/// i4 weights (WeightFormat::int4Group) are packed two rows to a byte:
/// memref<G x P x ceil(K / 2) x W x i8>, byte (kk, c) holding the code of
/// row 2kk in its low and that of row 2kk + 1 in its high 4 bits (0 for a
/// missing last odd row and for padding columns). With `vnni` (the int8
/// dot product of the int8-activation mode), eight rows to a 32-bit word:
/// memref<G x P x ceil(K / 8) x W x i32>, byte j of word (kk, c) holding
/// the code of row 8kk + j in its low and that of row 8kk + 4 + j in its
/// high 4 bits (0 past K and for padding columns).
PackedWeights declarePackedWeights(ImplicitLocOpBuilder &b, Operation *symbolTableOp,
                                   Value w, CpuConfigAttr config, bool gated,
                                   bool vnni = false, bool transposed = false);
/// FP8 block-scaled weights (WeightFormat::fp8Block): the scales of the
/// packed panels, one f32 per (group, panel, block of K, panel column),
/// memref<G x P x ceil(K / blockK) x W x f32>: for the weight column n the
/// panel column holds, s[g][kb][n / blockN] * 256, or NaN when a code of
/// that column in block kb is NaN (S.1111.111), 0 for padding. The
/// micro-kernel multiplies each block's partial sums of a * q * 2^-8 by it.
/// Weights packed pairwise for the dot product (fp8_dot) sum a * q: their
/// panel scales are s, not s * 256.
/// Declared next to the weights' panels (declarePackedWeights).
/// int4 (WeightFormat::int4Group, blockK the group): s[g][kb][n] per
/// panel column (0 for padding); with `zeroPoints`, a second global of the
/// same shape named for them, holding z[g][kb][n] as f32.
Value declarePackedScales(ImplicitLocOpBuilder &b, Operation *symbolTableOp, Value w,
                          CpuConfigAttr config, bool gated, int64_t blockK,
                          bool zeroPoints = false);
/// Checks the key and repacks `w` into `packed` when it is stale. With
/// `scales` (FP8: memref<G x KB x NB x f32>; int4: memref<G x KB x N x
/// f32>), also packs them into `packedScales` (declarePackedScales), and
/// the key covers them too; int4 `zeroPoints` (memref<G x KB x N x i4>)
/// likewise into `packedZeroPoints`.
void emitPackWeights(ImplicitLocOpBuilder &b, Value w, Value packed, Value key,
                     CpuConfigAttr config, bool gated, bool vnni = false,
                     bool transposed = false, Value scales = Value(),
                     Value packedScales = Value(), int64_t blockK = 0, int64_t blockN = 0,
                     Value zeroPoints = Value(), Value packedZeroPoints = Value());

/// The weight gradient's right operand `src` (memref<P x N>, one row per
/// plan row) copied as f32 into `packed` (memref<panels x P x W x f32>, W
/// the micro-tile's columns, panels = ceil(N / W), zero-padded): panel p,
/// row r holds src[r, p*W .. p*W + W). A tile then streams consecutive
/// rows of one panel (W contiguous floats each) instead of striding N
/// floats from row to row. Parallel over row blocks; a copy, so exact.
void emitPackRows(ImplicitLocOpBuilder &b, Value src, Value packed, CpuConfigAttr config);

/// The weight gradient's left operand `src` (memref<P x M>, read down its
/// columns) copied as f32 into `packed` (memref<ceil(M' / R) x P x R x f32>,
/// M' = M, or M + 1 with `appendOnes`,
/// R = micro_rows, zero-padded): the R columns of one micro-tile are
/// contiguous for each plan row, and consecutive plan rows are adjacent.
/// With `appendOnes`, column M (one past src's last) holds 1.0: the GEMM's
/// row M is then the column sums of B, the bias gradient (biasGradient).
void emitPackColumns(ImplicitLocOpBuilder &b, Value src, Value packed, CpuConfigAttr config,
                     bool appendOnes = false);

/// Declares the private function `name` of type `type` at the start of
/// `module` unless a symbol of that name is there (runtime functions the
/// lowered code calls; LLVM intrinsics called by their names).
void declareFunction(OpBuilder &b, Location loc, ModuleOp module, StringRef name,
                     FunctionType type);

/// Kernels are outlined: every call site of one kernel variant calls one
/// private function, so a model of many layers compiles each kernel once.
/// `callKernel` emits `func.call @<name>_<hash of the argument types>(args)`,
/// creating the function in `symbolTableOp` with `body` (which receives the
/// function's arguments) on first use. Memref arguments are passed as
/// kernelArgumentType (every size dynamic, unit innermost stride); `name`
/// must tell apart every body variant the argument types do not.
MemRefType kernelArgumentType(MemRefType type);
void callKernel(ImplicitLocOpBuilder &b, Operation *symbolTableOp, StringRef name,
                ValueRange args, llvm::function_ref<void(ImplicitLocOpBuilder &, ValueRange)> body);

/// Emits the grouped GEMM as one scf.parallel loop nest over the work items
/// at the builder's insertion point. Its epilogue (buildEpilogue, on
/// vector<Lxf32>) runs on the accumulators of every row that exists, before
/// they are stored under the column mask. The combine step is not the CPU
/// GEMM's (asserted).
void emitGroupedGemm(ImplicitLocOpBuilder &b, const GroupedGemm &gemm);

/// Loads as many elements as `mask` has lanes at `indices` of `memref` under
/// `mask` (masked lanes read 0) and extends them to f32.
Value loadF32Vector(ImplicitLocOpBuilder &b, Value memref, ValueRange indices, Value mask);
/// Rounds `v` (vector<Lxf32>) to the element type of `memref` and stores it
/// at `indices` under `mask`.
void storeVector(ImplicitLocOpBuilder &b, Value v, Value memref, ValueRange indices,
                 Value mask);
/// vector<lanes x i1> with the lanes [0, limit - col) set.
Value columnMask(ImplicitLocOpBuilder &b, Value col, Value limit, int64_t lanes);
/// A scalar of any float type extended to f32.
Value toF32(ImplicitLocOpBuilder &b, Value scalar);

} // namespace cpu
} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_CPU_EXPERTKERNELS_H
