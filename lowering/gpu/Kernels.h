//===- Kernels.h - the MoE GPU kernels --------------------------*- C++ -*-===//
//
// Builders of the kernels of the GPU path (DESIGN.md section 4), emitted as
// gpu.func ops into one `gpu.module @moe_kernels`. Every kernel takes flat
// (1-D, dynamically sized) memrefs plus index sizes, so one kernel serves every
// shape; the launch configuration is fixed per kernel (see the constants
// below and the comment of each builder) and recorded as `known_block_size`.
//
// Element types (DESIGN.md 3): every floating-point buffer is a 1-D memref of
// f32, bf16 or f16, given per buffer to the builders below (a null Type means
// f32); kernels extend on load and round to nearest even on store, and all
// arithmetic is f32. A kernel's name gets the suffix of its non-f32 types
// ("_bf16", or one per buffer when they differ); the f32 kernels keep their
// names.
//
// The GEMM kernels are tiled through workgroup (shared) memory: a block
// computes a kTileM x kTileN tile of C with kGemmThreads threads, each
// owning a kMicro x kMicro micro-tile; A and B tiles of depth kTileK are
// staged in workgroup memory (as f32) between gpu.barrier ops, each thread
// staging 4 consecutive elements of A and of B with one vector load (128 bits
// for f32) where the run-time sizes make them aligned, element by element
// otherwise (the tensor-core hook is marked "TENSOR CORES" in Kernels.cpp).
// Each output element accumulates its k-sum sequentially in ascending k with
// fused multiply-adds, acc = fma(a_k, b_k, acc): the CPU path's order and
// rounding (its vector.fma).
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
  /// x, wr, br of type `data`, the logits of type `out`.
  gpu::GPUFuncOp route(bool bias, Type data, Type out);
  /// (logits, weights, indices:i32, p scratch [T*E], partials, T, E, K,
  /// key0:i32, key1:i32); grid ceil(T/kGateThreads).
  /// With `production` (kind TopK only) four more arguments follow:
  /// (selectionBias [E], groups, keptGroups, scale:f32), and p is the scratch
  /// [T*2E] of the group scores and kept-group flags when grouped;
  /// `selectionBias` is the bias's element type (null: f32). Every other
  /// buffer is f32.
  gpu::GPUFuncOp gate(GateKind kind, MoesartAdjust adjust, bool loss,
                      std::optional<ProductionGate> production = std::nullopt,
                      Type selectionBias = {});
  /// (partials, numPartials, T, lambda:f32, loss[1]); one thread.
  gpu::GPUFuncOp lossReduce();
  /// (indices:i32, weights, T, K, E, capacity:i32, offsets:i32[E+1],
  /// paddedOffsets:i32[E+1], positions:i32[T*K], sourceRows:i32[T*K],
  /// rowWeights[T*K], sorted:i32[Pmax], tileExpert:i32[maxTiles],
  /// numTiles:i32[1], Pmax, maxTiles); one block of kAlignThreads. The
  /// weights are of type `weights` (null: f32), rowWeights f32.
  gpu::GPUFuncOp align(bool weighted, Type weights = {});
  /// (offsets:i32[E+1], E, paddedOffsets, sorted, tileExpert, numTiles, Pmax,
  /// maxTiles); one block of kAlignThreads.
  gpu::GPUFuncOp tileMap();
  /// (x, sourceRows:i32, rows, N, D); 1-D over N*D; x and rows of `data`.
  gpu::GPUFuncOp dispatchRows(Type data);
  /// (A, sorted:i32, sourceRows:i32, tileExpert:i32, numTiles:i32, w1, b1, h,
  /// D, H); grid (ceil(H/kTileN), maxTiles). A of `a`, w1 and b1 of `w`, h of
  /// `h` (bias and activation in f32, then h rounded to its type).
  gpu::GPUFuncOp gemm1(bool gather, Activation act, bool bias, Type a, Type w, Type h);
  /// (h, sorted:i32, rowWeights, tileExpert:i32, numTiles:i32, w2, b2, out,
  /// H, D); grid (ceil(D/kTileN), maxTiles). h of `h`, w2 and b2 of `w`, out
  /// of `out`, rowWeights f32.
  gpu::GPUFuncOp gemm2(bool weighted, bool bias, Type h, Type w, Type out);
  /// (rowsOut, positions:i32, y, T, K, D[, shared]); 1-D over T*D. With
  /// `shared` the sum of a token starts at shared[t, :] (the shared expert's
  /// f32 output, DESIGN.md 3.1.1), as on the CPU path. The sum is f32,
  /// rounded once to y's type.
  gpu::GPUFuncOp reduce(bool shared, Type rows, Type y);
  /// (expertOut, weights, positions:i32, y, T, K, D[, shared]); 1-D over T*D.
  gpu::GPUFuncOp combine(bool shared, Type out, Type weights, Type y);
  /// (o, s, N): s[i] = 1 / (1 + exp(-o[i])); 1-D over N (the shared
  /// expert's gate).
  gpu::GPUFuncOp sigmoid();
  /// (x, phi, rx, rphi, GM, ES, D); 1-D over GM+ES; x, phi of `data`.
  gpu::GPUFuncOp softNorms(Type data);
  /// (x, phi, rx, rphi, L, GM, ES, D, scale:f32); grid (ceil(ES/kTileN),
  /// ceil(GM/kTileM)); x, phi of `data`, L f32.
  gpu::GPUFuncOp softLogits(bool normalize, Type data);
  /// (L, Dw, G, M, ES); 1-D over G*ES; f32.
  gpu::GPUFuncOp softDispatchWeights();
  /// (L, Cw, G, M, ES); 1-D over G*M; Cw of type `cw`.
  gpu::GPUFuncOp softCombineWeights(Type cw);
  /// (Dw, x, rows, G, M, ES, S, D); grid (ceil(D/kTileN), ceil(ES/kTileM), G);
  /// the slot inputs rounded to `rows`.
  gpu::GPUFuncOp softSlots(Type x, Type rows);
  /// (Cw, expertOut, y, G, M, ES, S, D); grid (ceil(D/kTileN),
  /// ceil(M/kTileM), G).
  gpu::GPUFuncOp softCombine(Type cw, Type out, Type y);

private:
  ModuleOp module;
  gpu::GPUModuleOp gpuModule;
};

} // namespace gpu_lowering
} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_GPU_KERNELS_H
