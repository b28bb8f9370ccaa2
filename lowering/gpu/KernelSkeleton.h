//===- KernelSkeleton.h - building blocks of the MoE GPU kernels -*- C++ -*-===//
//
// What every kernel emitter of KernelLibrary (Kernels.h) builds on: kernel
// creation, typed loads and stores in f32, and the tiled GEMM skeleton that
// the CUDA-core grouped GEMMs plug their gather and epilogue into. Internal
// to lowering/gpu (KernelSkeleton.cpp; the emitters are RoutingKernels.cpp,
// PlanKernels.cpp, ExpertGemmKernels.cpp, SoftMoEKernels.cpp and
// Kernels.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_GPU_KERNELSKELETON_H
#define MOE_LOWERING_GPU_KERNELSKELETON_H

#include "lowering/gpu/IRBuilder.h"
#include "lowering/gpu/Kernels.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <functional>
#include <string>

namespace mlir::moe::gpu_lowering::kernels {

/// What a GEMM kernel plugs into the skeleton. All callbacks run inside the
/// kernel body; `lr` is a row of the block's tile (0..kTileM-1).
///
/// Operands are read either through `loadA` / `loadB` (one element at a
/// time) or, when `aBuf` / `bBuf` is set, from a buffer whose element
/// A[aRow, k] (B[k, n]) sits at `aIndex` (`bIndex`), contiguous in k (n):
/// then a thread stages kVec consecutive elements with one vector load when
/// `aVecOk` (`bVecOk`, uniform over the launch: every index of a k (n) that
/// is a multiple of kVec is a multiple of kVec) holds and the kVec elements
/// are in range, and element by element otherwise.
struct GemmHooks {
  Value active;     // i1, uniform over the block; null: always active
  Value rowBase;    // index of the tile's first row (block_id.y * kTileM)
  Value kDim, nDim; // index
  int parts = 1;    // 2: gated GEMM1 (gate and up columns side by side)
  /// The A row (i32, -1 for a zero row) of tile row `lr`: the gather.
  std::function<Value(IRB &, Value lr)> aRow;
  /// A[aRow, k] as f32 (aRow >= 0 and k < kDim hold).
  std::function<Value(IRB &, Value aRow, Value k)> loadA;
  Value aBuf, aVecOk;
  std::function<Value(IRB &, Value aRow, Value k)> aIndex;
  /// B[k, n] of `part` as f32 (k < kDim and n < nDim hold).
  std::function<Value(IRB &, Value k, Value n, int part)> loadB;
  Value bBuf, bVecOk;
  std::function<Value(IRB &, Value k, Value n, int part)> bIndex;
  /// The epilogue of one output (n < nDim holds): acc has `parts` values.
  std::function<void(IRB &, Value lr, Value aRow, Value n, ArrayRef<Value> acc)> store;
  /// The run-time row tile of the grouped GEMMs (kTileM or kSmallTileM, see
  /// Kernels.h); null: kTileM. `rowBase` must be block_id.y * tileRows.
  Value tileRows;
  /// Runs after the epilogue, in every thread (`tileM`: the tile's rows).
  std::function<void(IRB &, int64_t tileM)> finish;

  /// An ungathered A of `rows` rows in kTileM-row tiles along block_id.y:
  /// rowBase = block_id.y * kTileM, and tile row lr is A row rowBase + lr,
  /// none from `rows` on.
  void boundRows(IRB &e, Value rows);
};

/// A kernel argument: a 1-D dynamic memref of `elt`.
MemRefType flat(Type elt);

/// A workgroup (shared-memory) buffer of `n` elements of `elt`.
MemRefType workgroup(MLIRContext *ctx, int64_t n, Type elt);

/// Builds (or finds) kernel `name` with the given arguments and workgroup
/// attributions; `body` fills it (the gpu.return is added here).
gpu::GPUFuncOp buildKernel(
    gpu::GPUModuleOp module, StringRef name, ArrayRef<Type> args,
    ArrayRef<Type> workgroupBuffers, int64_t blockSize,
    function_ref<void(IRB &, ValueRange, ArrayRef<BlockArgument>)> body);

/// thread_id.x, block_id.<d>, and a block-wide barrier.
Value threadId(IRB &e);
Value blockId(IRB &e, gpu::Dimension d);
void barrier(IRB &e);

/// m[i] as f32: bf16/f16 data are extended on load (docs/spec.md §2-§3: the
/// arithmetic is f32 whatever the storage type).
Value loadF32(IRB &e, Value m, Value i);

/// Stores the f32 value `v` into m[i], rounded to nearest even to m's element
/// type.
void storeF32(IRB &e, Value v, Value m, Value i);

/// The kVec values m[i .. i+kVec) as f32 through one vector load (128 bits
/// for f32, 64 for bf16/f16); the caller guarantees that i is a multiple of
/// kVec (the alignment the load claims) and that the range is in bounds.
constexpr int64_t kVec = 4;
SmallVector<Value> loadVecF32(IRB &e, Value m, Value i);

/// i1: `v` (index) is a multiple of `m`.
Value multipleOf(IRB &e, Value v, int64_t m);

/// The suffix of a kernel variant for the element types of its data
/// buffers: "" when all are f32 (the f32 kernels keep their names), "_bf16"
/// when all are bf16, else every type in order ("_bf16_f32").
std::string typeSuffix(ArrayRef<Type> types);

/// Workgroup buffers of the skeleton: A tile, B tile(s) (f32 whatever the
/// storage type), the gathered rows.
SmallVector<Type> gemmWorkgroup(MLIRContext *ctx, int parts);

/// The kVec operand values at positions at, at+1, ... along the contiguous
/// dimension (zero past `limit`, and all zero when !valid): with a buffer,
/// one vector load from `baseIndex` when `vecOk` holds and all kVec are in
/// range (at + kVec <= limit); otherwise element by element through `scalar`.
SmallVector<Value> stageVec(IRB &e, Value valid, Value at, Value limit, Value vecOk,
                            function_ref<Value(IRB &)> baseIndex, Value buf,
                            function_ref<Value(IRB &, Value)> scalar);

/// The tiled GEMM skeleton: kTileM x kTileN output tiles (or the run-time
/// row tile of `h.tileRows`), A and B staged through the workgroup buffers
/// `wg` (gemmWorkgroup) kTileK at a time, each thread's outputs
/// accumulated with fused multiply-adds in ascending k, then `h.store` per
/// output and `h.finish`.
void buildGemm(IRB &e, ArrayRef<BlockArgument> wg, const GemmHooks &h);

/// The shared expert's gate sigmoid(o) = 1 / (1 + exp(-o)) (f32,
/// buildRoutingSigmoid of docs/routing-numerics.md, as on the CPU path):
/// moe_sigmoid_kernel and the router + gate kernel's shared gate compute the
/// same bits.
Value sharedGateSigmoid(IRB &e, Value o);

/// The linear thread index of a 1-D launch of kEltThreads-thread blocks.
Value globalThread(IRB &e);

/// The index check of a position `pos` (i32) read from an operand: it must
/// be -1 (dropped) or a row below N (index); otherwise err[0] (i32[4], the
/// op's error word) is set to MOE_INDEX_BAD_POSITION. Returns `kept`
/// (pos >= 0) and pos < N: a bad position is never read.
Value checkPosition(IRB &e, Value pos, Value kept, Value N, Value err);

} // namespace mlir::moe::gpu_lowering::kernels

#endif // MOE_LOWERING_GPU_KERNELSKELETON_H
