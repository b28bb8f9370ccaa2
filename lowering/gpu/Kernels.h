//===- Kernels.h - the MoE GPU kernels --------------------------*- C++ -*-===//
//
// Builders of the kernels of the GPU path (DESIGN.md section 4), emitted as
// gpu.func ops into one `gpu.module @moe_kernels`. Every kernel takes flat
// (1-D, dynamically sized) memrefs plus index sizes, so one kernel serves every
// shape; the launch configuration is fixed per kernel (see the constants
// below and the comment of each builder) and recorded as `known_block_size`.
//
// The GEMM kernels are tiled through workgroup (shared) memory: a block
// computes a kTileM x kTileN tile of C with kGemmThreads threads, each
// owning a kMicro x kMicro micro-tile; A and B tiles of depth kTileK are
// staged in workgroup memory between gpu.barrier ops (the tensor-core hook is
// marked "TENSOR CORES" in Kernels.cpp). Each output element
// accumulates its k-sum sequentially in ascending k (the CPU path's order).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_GPU_KERNELS_H
#define MOE_LOWERING_GPU_KERNELS_H

#include "dialect/MoEAttrs.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>

namespace mlir {
namespace moe {
namespace gpu_lowering {

/// GEMM tiling (grouped GEMMs, router and Soft MoE GEMMs).
constexpr int64_t kTileM = 64;     // rows of A / C per block; also the alignment
                                   // of every expert's row group (moe_align)
constexpr int64_t kTileN = 64;     // columns of B / C per block
constexpr int64_t kTileK = 16;     // depth of the staged A and B tiles
constexpr int64_t kMicro = 4;      // each thread: kMicro x kMicro outputs
constexpr int64_t kGemmThreads = (kTileM / kMicro) * (kTileN / kMicro); // 256
/// Other kernels.
constexpr int64_t kGateThreads = 128;  // one thread per token
constexpr int64_t kAlignThreads = 256; // one block
constexpr int64_t kEltThreads = 256;   // element-wise kernels

class IRB;
/// The activations of DESIGN.md section 3 on an f32 value (the CPU path's
/// formulas), for kernels built outside Kernels.cpp (MmaGemm.cpp).
Value emitActivation(IRB &e, Activation act, Value x);

/// The routing kernel variants.
enum class GateKind { Dense, TopK, MoesartInference, MoesartTraining };

/// The production #moe.top_k routers of DESIGN.md 3.1.1 (a GateKind::TopK
/// gate whose attribute is not classic, or that has a selection bias): the
/// compile-time parts of the variant; groups, kept groups and the scale are
/// kernel arguments.
struct ProductionGate {
  RouterScore score = RouterScore::softmax;
  bool normalize = true;
  bool grouped = false; // groups > 1
  bool bias = false;    // a selection_bias buffer
};

/// Name of the gpu.module holding the kernels.
inline constexpr llvm::StringLiteral kKernelModuleName = "moe_kernels";

class KernelLibrary {
public:
  /// Finds or creates `gpu.module @moe_kernels` in `module` (and marks the
  /// module as a GPU container).
  explicit KernelLibrary(ModuleOp module);

  gpu::GPUModuleOp getModule() { return gpuModule; }

  // Every builder returns the existing kernel when it was built before.
  // Argument lists (memrefs are 1-D memref<?xT>; sizes are index):

  /// (x, wr, br, logits, T, D, E); grid (ceil(E/kTileN), ceil(T/kTileM)).
  gpu::GPUFuncOp route(bool bias);
  /// (logits, weights, indices:i32, p scratch [T*E], partials, T, E, K,
  /// key0:i32, key1:i32); grid ceil(T/kGateThreads).
  /// With `production` (kind TopK only) four more arguments follow:
  /// (selectionBias [E], groups, keptGroups, scale:f32), and p is the scratch
  /// [T*2E] of the group scores and kept-group flags when grouped.
  gpu::GPUFuncOp gate(GateKind kind, MoesartAdjust adjust, bool loss,
                      std::optional<ProductionGate> production = std::nullopt);
  /// (partials, numPartials, T, lambda:f32, loss[1]); one thread.
  gpu::GPUFuncOp lossReduce();
  /// (indices:i32, weights, T, K, E, capacity:i32, offsets:i32[E+1],
  /// paddedOffsets:i32[E+1], positions:i32[T*K], sourceRows:i32[T*K],
  /// rowWeights[T*K], sorted:i32[Pmax], tileExpert:i32[maxTiles],
  /// numTiles:i32[1], Pmax, maxTiles); one block of kAlignThreads.
  gpu::GPUFuncOp align(bool weighted);
  /// (offsets:i32[E+1], E, paddedOffsets, sorted, tileExpert, numTiles, Pmax,
  /// maxTiles); one block of kAlignThreads.
  gpu::GPUFuncOp tileMap();
  /// (x, sourceRows:i32, rows, N, D); 1-D over N*D.
  gpu::GPUFuncOp dispatchRows();
  /// (A, sorted:i32, sourceRows:i32, tileExpert:i32, numTiles:i32, w1, b1, h,
  /// D, H); grid (ceil(H/kTileN), maxTiles).
  gpu::GPUFuncOp gemm1(bool gather, Activation act, bool bias);
  /// (h, sorted:i32, rowWeights, tileExpert:i32, numTiles:i32, w2, b2, out,
  /// H, D); grid (ceil(D/kTileN), maxTiles).
  gpu::GPUFuncOp gemm2(bool weighted, bool bias);
  /// (rowsOut, positions:i32, y, T, K, D[, shared]); 1-D over T*D. With
  /// `shared` the sum of a token starts at shared[t, :] (the shared expert's
  /// f32 output, DESIGN.md 3.1.1), as on the CPU path.
  gpu::GPUFuncOp reduce(bool shared = false);
  /// (expertOut, weights, positions:i32, y, T, K, D[, shared]); 1-D over T*D.
  gpu::GPUFuncOp combine(bool shared = false);
  /// (o, s, N): s[i] = 1 / (1 + exp(-o[i])); 1-D over N (the shared
  /// expert's gate).
  gpu::GPUFuncOp sigmoid();
  /// (x, phi, rx, rphi, GM, ES, D); 1-D over GM+ES.
  gpu::GPUFuncOp softNorms();
  /// (x, phi, rx, rphi, L, GM, ES, D, scale:f32); grid (ceil(ES/kTileN),
  /// ceil(GM/kTileM)).
  gpu::GPUFuncOp softLogits(bool normalize);
  /// (L, Dw, G, M, ES); 1-D over G*ES.
  gpu::GPUFuncOp softDispatchWeights();
  /// (L, Cw, G, M, ES); 1-D over G*M.
  gpu::GPUFuncOp softCombineWeights();
  /// (Dw, x, rows, G, M, ES, S, D); grid (ceil(D/kTileN), ceil(ES/kTileM), G).
  gpu::GPUFuncOp softSlots();
  /// (Cw, expertOut, y, G, M, ES, S, D); grid (ceil(D/kTileN),
  /// ceil(M/kTileM), G).
  gpu::GPUFuncOp softCombine();

private:
  ModuleOp module;
  gpu::GPUModuleOp gpuModule;
};

} // namespace gpu_lowering
} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_GPU_KERNELS_H
