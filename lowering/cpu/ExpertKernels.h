//===- ExpertKernels.h - CPU strategy for the expert GEMMs ------*- C++ -*-===//
//
// The CPU code generation strategy of the moe lowering (docs/spec.md §7):
// grouped GEMMs over the routing plan's row groups, emitted at the memref
// level as register-blocked vector micro-kernels (vector.fma on
// vector<16xf32>, lowered by LLVM to AVX-512 FMAs) inside a cache-blocked,
// all-cores scf.parallel loop nest. The token gather is folded into the
// loading of GEMM1's left operand (rows read through the plan), and every
// epilogue (bias, activation, rounding to the element type, routed weight)
// is applied to the accumulators before they are stored.
//
// Numerics (docs/spec.md §2-§3): operands of any element type (f32, bf16,
// f16) are extended to f32 as they are loaded; products accumulate in f32 in
// increasing k order; epilogues compute in f32 and round once when they
// store to a narrower type.
//
// Work decomposition. A work item is (group, column block, row block):
// `kRowBlock` plan rows of one group times `kColBlock` output columns, the
// whole reduction dimension. Inside it, micro-tiles of kMicroRows rows x
// (kMicroVecs x 16) columns keep every accumulator in a register; the column
// loop is outside the row loop, so one micro-panel of the right operand is
// reused from the cache by all row micro-tiles. Column tails are handled with
// masked loads and stores (free on AVX-512), row tails by clamping the rows
// that are read and skipping the stores of the missing rows. Decode (a few
// rows per expert) and prefill (hundreds) are the same loop nest: at decode
// the column blocks give every core work, at prefill the row blocks do.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_CPU_EXPERTKERNELS_H
#define MOE_LOWERING_CPU_EXPERTKERNELS_H

#include "dialect/MoEAttrs.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir {
namespace moe {
namespace cpu {

/// Lanes of one f32 vector register (AVX-512).
constexpr int64_t kLanes = 16;
/// Register blocking: rows x vectors of accumulators per micro-tile.
constexpr int64_t kMicroRows = 6;
constexpr int64_t kMicroVecs = 4;
/// Cache blocking of one parallel work item.
constexpr int64_t kRowBlock = 48;
constexpr int64_t kColBlock = 256;
/// Packed panels are streamed with a software prefetch this many rows ahead.
constexpr int64_t kPrefetchRows = 32;

/// Called once per (row, output vector) of a micro-tile after the reduction:
/// `acc` (vector<16xf32>) holds sum_k A[row, k] B[k, col..col+15]; for a
/// gated GEMM `accUp` holds the same sum at column `upOffset + col` (else it
/// is null). `mask` (vector<16xi1>) flags the columns below the limit. The
/// callback stores what it computes; it runs only for rows that exist.
using GemmEpilogue = llvm::function_ref<void(ImplicitLocOpBuilder &b, Value group,
                                             Value row, Value col, Value mask, Value acc,
                                             Value accUp)>;

/// C[r, :] = A[rowMap(r), :] x B[group(r)] for the rows r of every group.
struct GroupedGemm {
  /// Left operand, memref<? x K x T> (rows contiguous).
  Value a;
  /// Optional memref<? x i32>: the row of `a` that plan row r reads (the
  /// gather). Without it plan row r reads row r.
  Value aRowMap;
  /// Right operand: memref<G x K x N x T> (one matrix per group) or
  /// memref<K x N x T> (one matrix shared by all groups).
  Value b;
  /// memref<G+1 x i32>: group g owns plan rows [offsets[g], offsets[g+1]).
  /// Null: one group of `numRows` rows.
  Value groupOffsets;
  Value numRows;
  /// The number of groups (index; with groupOffsets).
  Value numGroups;
  /// The reduction size K and the number of output columns (H for a gated
  /// GEMM whose B has 2H columns), as index values.
  Value reduction;
  Value columns;
  /// Gated: output column c pairs B's columns c and `columns + c`.
  bool gated = false;
  /// B is in the packed layout of emitPackWeights (then rank 4).
  bool bPacked = false;
  /// A and B are bf16, B is packed pairwise (VNNI): products through the
  /// AVX512_BF16 dot product (x86vector.avx512.dot).
  bool bf16Dot = false;
};

/// Output columns of one micro-tile (and of one packed panel).
inline int64_t tileColumns(bool gated) { return (gated ? kMicroVecs / 2 : kMicroVecs) * kLanes; }

/// Expert weights prepared once for the micro-kernels: B [G, K, N] (gated:
/// [G, K, 2H]) repacked into panels [G, P, K, 16 * kMicroVecs] (P =
/// ceil(N / 64), gated: ceil(H / 32) panels holding 32 gate and the 32
/// matching up columns), zero-padded, so that a micro-kernel streams one
/// contiguous panel. The packed copy lives in a module global, with a key
/// global recording the buffer it was built from (base address and a hash
/// of 64 sampled elements); it is rebuilt only when a call passes a buffer
/// with another key. Expert weights are thus read once per buffer, not per
/// call; a caller that rewrites a weight buffer in place such that those
/// samples keep their values must turn packing off (`pack-weights=false`).
struct PackedWeights {
  Value packed; // memref<G x P x K x 64 x T>
  Value key;    // memref<2 x i64>
};
/// Declares the globals for weights of `w`'s (static) type in the symbol
/// table `symbolTableOp` and returns them (memref.get_global).
/// With `vnni` (bf16 for the AVX512_BF16 dot product) the panels hold pairs
/// of rows interleaved: [G, P, ceil(K / 2), 2 * 64], element (k, c) at
/// [k / 2][2 * c + k % 2], a missing last odd row as zeros.
PackedWeights declarePackedWeights(ImplicitLocOpBuilder &b, Operation *symbolTableOp,
                                   Value w, bool gated, bool vnni = false);
/// Checks the key and repacks `w` into `packed` when it is stale.
void emitPackWeights(ImplicitLocOpBuilder &b, Value w, Value packed, Value key, bool gated,
                     bool vnni = false);

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
/// at the builder's insertion point.
void emitGroupedGemm(ImplicitLocOpBuilder &b, const GroupedGemm &gemm,
                     GemmEpilogue epilogue);

/// Loads 16 elements at `indices` of `memref` under `mask` (masked lanes read
/// 0) and extends them to f32.
Value loadF32Vector(ImplicitLocOpBuilder &b, Value memref, ValueRange indices, Value mask);
/// Rounds `v` (vector<16xf32>) to the element type of `memref` and stores it
/// at `indices` under `mask`.
void storeVector(ImplicitLocOpBuilder &b, Value v, Value memref, ValueRange indices,
                 Value mask);
/// vector<16xi1> with the lanes [0, limit - col) set.
Value columnMask(ImplicitLocOpBuilder &b, Value col, Value limit);
/// A scalar of any float type extended to f32.
Value toF32(ImplicitLocOpBuilder &b, Value scalar);

/// The activations of docs/spec.md §2-§3 (the element-wise part: silu for
/// swiglu, gelu (erf) for geglu) on an f32 scalar or vector; the one
/// definition the CPU lowering uses for both.
Value activate(ImplicitLocOpBuilder &b, Activation act, Value x);

} // namespace cpu
} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_CPU_EXPERTKERNELS_H
