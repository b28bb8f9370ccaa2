//===- Host.h - host code of convert-moe-to-gpu -----------------*- C++ -*-===//
//
// The host-side emission of convert-moe-to-gpu (ConvertMoEToGPU.cpp),
// internal to the GPU lowering library. `Host` builds the host code of one
// moe op on tensors: device buffers (upload, download, the results of the
// device-abi convention), kernel launches (the `@__moe_launch_<kernel>`
// placeholders), and the device-level building blocks of the ops (router,
// gate, routing plan, the grouped expert GEMMs, fused experts, shared expert,
// soft MoE). Its members are defined in Host.cpp, except the strategy (the
// row tile, the tensor-core engine and split-K of the GEMMs), which is in
// HostStrategy.cpp. The per-op conversions built on it are in ConvertOps.cpp
// (convertMoEOp).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_GPU_HOST_H
#define MOE_LOWERING_GPU_HOST_H

#include "dialect/MoEAttrs.h"
#include "lowering/gpu/IRBuilder.h"
#include "lowering/gpu/Kernels.h"
#include "lowering/gpu/MmaGemm.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>

namespace mlir {
namespace moe {
namespace gpu_lowering {

/// The element type of a tensor or a (device) memref.
inline Type eltOf(Value v) { return cast<ShapedType>(v.getType()).getElementType(); }

/// Host-side emission for one moe op.
class Host {
public:
  Host(ImplicitLocOpBuilder &b, KernelLibrary &lib, ModuleOp module)
      : b(b), e(b), lib(lib), module(module) {
    start = e.idx(0).getDefiningOp();
  }

  ImplicitLocOpBuilder &b;
  IRB e;
  KernelLibrary &lib;
  ModuleOp module;
  /// How this op's GEMMs are emitted (its moe.gpu_config, or the default).
  GpuConfigAttr config;
  /// Validate the index data chain ops take from their operands (the
  /// pass's check-indices; Kernels.h "Index checks").
  bool checkIndices = true;
  SmallVector<Value> deviceBuffers;
  /// The first op of this moe op's host code: static host allocations go
  /// before it, so that they do not split the GPU stream (gpu-async-region
  /// synchronizes before host ops with side effects).
  Operation *start;
  /// device-abi (in a public function): the tensors in device memory, see
  /// DeviceABI.cpp; null in the default (host) convention.
  llvm::DenseSet<Value> *deviceValues = nullptr;

  bool isDevice(Value tensor) const {
    return deviceValues && deviceValues->contains(tensor);
  }

  Value dim(Value tensor, int64_t i);
  Value numElements(Value tensor);

  /// A contiguous memref viewed as 1-D.
  Value flatten(Value memref);

  Value alloc(Type elt, Value n);
  /// Fills device buffer `buf` with zeros of its element type (a gpu.memset).
  void zero(Value buf);

  Value upload(Value tensor);

  /// Copies `dev` into a new host tensor of `resultType`; `dims` are the
  /// sizes of every dimension (only the dynamic ones are used).
  Value download(Value dev, Type resultType, ArrayRef<Value> dims = {});

  /// device-abi: `dev` (a device buffer of this op) as the tensor result of
  /// `type`; it is not freed here but marked for moe-gpu-device-abi.
  Value deviceResult(Value dev, RankedTensorType type, ArrayRef<Value> dyn);

  /// A host-computed tensor as a moe op result: itself, or (device-abi) an
  /// uploaded device copy.
  Value hostResult(Value tensor);

  /// `view`, a view of a device tensor, is one too.
  Value deviceView(Value view);

  /// A device error word of the index checks (Kernels.h): 4 x i32, zeroed
  /// (gpu.memset: no kernel launch) so that it reads "no violation" unless
  /// a checked kernel wrote it.
  Value errorWord();

  /// After the kernels of an op that checks index data: copies its error
  /// word `err` back (one 16-byte copy, which waits for the op's work) and,
  /// when it reports a violation, calls the CUDA runtime's
  /// moeRuntimeIndexError(kind, token, slot, value, numExperts) (one error
  /// line; the rest of the GPU work is skipped, the tool or the C ABI
  /// reports it). `K` (index) splits the flat element index of an expert
  /// index into token and slot.
  void reportIndexError(Value err, Value K, int64_t numExperts);

  /// The value of a 0-d tensor on the host (device-abi: copied back first,
  /// before this op's GPU work).
  Value hostScalar(Value tensor);

  /// `download` into a tensor of `resultType`, converting on the host when
  /// the device buffer holds f32 and the result is bf16/f16 (the routing
  /// weights of a hand-written moe.gate with T results).
  Value downloadAs(Value dev, Type resultType, ArrayRef<Value> dims = {});

  /// `tensor` as f32 (extended on the host when it is bf16/f16).
  Value toF32(Value tensor);

  void releaseAll();

  func::FuncOp launchDecl(gpu::GPUFuncOp kernel);

  void launch(gpu::GPUFuncOp kernel, ArrayRef<Value> grid, int64_t block, ArrayRef<Value> args);
  Value blocks(Value n, int64_t per) { return e.ceildiv(n, e.idx(per)); }

  /// A one-element f32 device buffer for the unused f32 arguments of a
  /// kernel variant (one per moe op).
  Value dummyF32();
  Value dummy;

  //===--------------------------------------------------------------------===//
  // Device-level building blocks (operands and results are device buffers)
  //===--------------------------------------------------------------------===//

  /// The router logits [T, E] of type `out` (null: f32, the routing type).
  Value route(Value x, Value wr, Value br, Value T, Value D, Value E, Type out = {});

  struct Gate {
    Value weights, indices, loss; // loss: device [1], or null
    /// The aux loss not reduced yet (gate(..., deferLoss = true)): the
    /// gate's per-block partials, their count and lambda; `loss` is
    /// allocated, and the align kernel of the layer reduces them into it.
    Value partials, numPartials, lambda;
  };
  /// The layer's router inside the gate kernel (one launch for both).
  struct FusedRouter {
    Value x, wr, br, D; // br may be null
    /// The shared expert's gate: sg [D] (x's type) in, gate [T] f32 out
    /// (sigmoid(x sg), computed by the same kernel); null: none.
    Value sg, sharedGate;
  };
  /// `selectionBias`: the device buffer of the selection_bias operand, or
  /// null. A #moe.top_k that is not classic, or that has a selection bias,
  /// runs the production router of docs/spec.md §3.1.1. With `router` the
  /// logits are computed by the gate kernel into `logits` (uninitialized).
  Gate gate(Value logits, Value T, Value E, int64_t k, RoutingAttrInterface routing,
            bool training, Value seed, Value selectionBias = {},
            std::optional<FusedRouter> router = std::nullopt, bool deferLoss = false);

  /// The routing plan on the device, padded to the GEMM row tile.
  struct Plan {
    Value offsets, positions, sourceRows, rowWeights, sorted, tileExpert, numTiles;
    Value pMax, maxTiles, tileRows;
    /// tileRows may be kBigTileM (the GEMMs are the wgmma kernels).
    bool bigTiles = false;
  };
  void sizePlan(Plan &plan, Value rows, int64_t numExperts, bool big);

  Value capacity(Value T, Value K, int64_t numExperts, std::optional<llvm::APFloat> cf);

  /// What the align kernel does besides the plan in a fused layer: the
  /// combine's bookkeeping (counters zeroed, y of the tokens without a kept
  /// assignment) and the aux loss reduction.
  struct AlignExtras {
    Value counters, numCounters, y, D, shared; // counters null: no combine
    const Gate *loss = nullptr;                // with deferred partials
    Value err;                                 // the index check's error word
    int32_t checkKind = 0;                     // with `err`: a MoeIndexErrorKind
  };
  Plan align(Value indices, Value weights, Value T, Value K, int64_t numExperts, Value cap,
             const AlignExtras *extrasOrNull = nullptr, bool big = false);

  /// With `err`, the offsets come from an operand: they are validated
  /// against `rows` (the checked tile map, Kernels.h).
  Plan tileMap(Value offsets, Value rows, int64_t numExperts, Value err = {},
               bool big = false);

  struct Experts {
    Value w1, w2, b1, b2; // device
    Activation act;
    Value D, H;
    /// Quantized weights (#moe.quant, docs/spec.md §2.1): w1 and w2 hold
    /// the codes, s1 and s2 their f32 scales, z1 and z2 (int4 with
    /// zero_point) their zero points; all on the device. Null: dense.
    QuantAttr quant;
    Value s1, s2, z1, z2;
  };
  Experts experts(Value w1, Value w2, Value b1, Value b2, ActivationAttr act);
  /// experts() with the quantization of an op (its expert_scales and
  /// expert_zero_points, uploaded).
  Experts experts(Value w1, Value w2, Value b1, Value b2, ActivationAttr act, QuantAttr quant,
                  Value s1, Value s2, Value z1, Value z2);

  /// The combine fused into GEMM2 (fusedExperts).
  struct FusedCombine {
    Value positions, counters, y, T, K, shared; // shared may be null
    /// Split-K of the 16-row GEMMs (null: none): slices of GEMM1 and GEMM2,
    /// their f32 workspaces, and where their tile counters start in
    /// `counters` (after the combine's T * ceil(D / 128)).
    Value split1, split2, workspace1, workspace2, counterBase1, counterBase2;
  };
  /// The shared expert folded into a fused layer's GEMM launches
  /// (Kernels.h, SharedFold): its weights as one expert (H = Hs, no
  /// biases), its gate [T] f32 from the gate kernel (null: ungated), and T.
  struct SharedExpertFold {
    Experts ex;
    Value gate, T;
  };
  /// The shared expert's weights as Experts (one expert, [D, Ws] and
  /// [Hs, D], the layer's activation).
  Experts sharedWeights(Value s1, Value s2, Value D, ActivationAttr act);
  /// The folded shared expert's buffers of one launch pair: hs (rows padded
  /// to kBigTileM, so that every shared tile row has a place) and its f32
  /// output [T, D].
  struct SharedFoldBuffers {
    Value hs, out;
  };
  SharedFoldBuffers sharedFoldBuffers(const SharedExpertFold &f, Type hType);
  /// GEMM1 (+ gather, bias, activation) and GEMM2 (+ bias, routed weight)
  /// over the padded tiles of `plan`, writing one row of `out` per kept row
  /// (and, with `combine`, the per-token sums into combine->y). h has A's
  /// element type (the CPU path's rounding point); `out` receives GEMM2's f32
  /// result in its own element type. bf16/f16 GEMMs take the tensor-core
  /// kernels (mmaElt), GEMM2 with the combine epilogue in a fused layer; the
  /// kernels are specialised on the plan's row tile: a dynamic T launches
  /// the pair of its run-time tile (forRowTile).
  ///
  /// With `fold` (needs `combine`), the shared expert's tiles come first in
  /// both launches (grid rows ceil(T / R) + maxTiles, GEMM1 columns over
  /// max(H, Hs)) and its output starts every token's sum.
  void ffn(Value A, bool gather, const Plan &plan, const Experts &x, Value out,
           const FusedCombine *combine = nullptr, const SharedExpertFold *fold = nullptr);

  /// The fused token-choice expert family in three launches: align (+ the
  /// combine's bookkeeping, + the aux loss of `loss`), GEMM1 with the
  /// gather, GEMM2 with the routed weight and the deterministic per-token
  /// combine in its epilogue (starting from `shared`, the shared expert's
  /// f32 output, when given). GEMM2's rows stay f32 (the CPU path's
  /// fused_experts); y, of type `yType`, is their f32 sum rounded once.
  Value fusedExperts(Value x, Value indices, Value weights, Value T, Value K, int64_t numExperts,
                     std::optional<llvm::APFloat> cf, const Experts &ex, Type yType,
                     Value shared = {}, const Gate *loss = nullptr,
                     const SharedExpertFold *fold = nullptr, Value err = {});

  /// The shared expert of docs/spec.md §3.1.1 on the device buffer `x` ([T, D]):
  /// the grouped GEMM kernels with one group of all T rows (offsets [0, T],
  /// no gather), the gate sigmoid(x sg) (router GEMM + moe_sigmoid_kernel)
  /// as GEMM2's row weight. Returns the f32 output [T, D] on the device.
  Value sharedExpert(Value x, Value T, Value D, Value s1, Value s2, Value sg,
                     ActivationAttr act);

  /// A one-group plan's offsets {0, rows} (device i32 [2], written by a
  /// kernel: no copy): the shared expert's GEMMs and the router's and the
  /// shared expert's backward GEMMs run over all rows as one group.
  Value oneGroup(Value rows);

  /// The gradient buffers of ffnBackward (device, f32): drows [N, D]
  /// (zeroed by the caller where no group has rows), dw1 [E, D, W], dw2
  /// [E, H, D], and with expert biases db1 [E, W], db2 [E, D] (else null).
  struct FFNGrads {
    Value drows, dw1, dw2, db1, db2;
  };
  /// The expert FFN's backward (moe.expert_ffn_grad, docs/spec.md §9) over
  /// `rows` [N, D] in group order, grouped by `offsets` (device i32 [E+1])
  /// and tiled by `plan` (its tile map), for the cotangent `dout` [N, D]
  /// f32: z = rows W1 + b1 recomputed; dH = dout W2^T with the activation's
  /// backward in its epilogue (dZ into z in place, h = round(act(z)));
  /// dW2 = h^T dout and dW1 = rows^T dZ as variable-K weight-gradient GEMMs
  /// (the bias gradients their row of ones); drows = dZ W1^T. Five launches,
  /// the CPU path's GEMMs and rounding points (ConvertMoEToCPU.cpp,
  /// emitExpertFFNBackward).
  /// With bf16 rows and weights and tensor cores (mmaElt), the same steps
  /// on the tensor-core kernels (ffnBackwardMma; MmaGemm.h, rowGrad and
  /// weightGrad): dout and dZ enter the GEMMs as two bf16 terms each.
  void ffnBackward(Value rows, Value offsets, const Plan &plan, const Experts &x,
                   int64_t numExperts, Value dout, Value N, const FFNGrads &grads);
  void ffnBackwardMma(Value rows, Value offsets, const Plan &plan, const Experts &x,
                      int64_t numExperts, Value dout, Value N, const FFNGrads &grads);

  /// Soft MoE dispatch on the device: slot rows [E*G*S, D] and Cw.
  struct SoftFront {
    Value rows, combineWeights, G, M, D, ES, S;
  };
  /// The slot inputs are rounded to `rowsType` (docs/spec.md §2-§3: to T before the
  /// experts), the combine weights stored as `cwType`.
  SoftFront softFront(Value xT, Value phiT, Value scaleT, bool normalize, Type rowsType,
                      Type cwType);

  /// offsets[e] = e * G * S as a host tensor<E+1 x i32>.
  Value softOffsets(int64_t numExperts, Value G, Value S);

  Value softCombine(Value expertOut, Value cw, Value G, Value M, Value ES, Value S, Value D,
                    Type yType);

  //===--------------------------------------------------------------------===//
  // Strategy: row tiles, tensor cores, split-K (HostStrategy.cpp)
  //===--------------------------------------------------------------------===//

  /// `v` as a constant when it is one or a product of constants (static
  /// sizes are built as arith.muli of constants here).
  static std::optional<int64_t> foldedIndex(Value v);

  /// The row tile of the grouped GEMMs for `rows` plan rows over
  /// `numExperts` groups (see Kernels.h): kSmallTileM when the average
  /// group has fewer than kTileM rows (decode), else kTileM (prefill), or
  /// kBigTileM with `big` when it has at least bigTileRows rows.
  Value chooseRowTile(Value rows, int64_t numExperts, bool big);

  /// Whether the GEMMs of a plan may take 128-row tiles: the sm_90a wgmma
  /// kernels with bigTileRows set, for `elt` (the GEMMs' tensor-core type)
  /// and dense experts `x` (quantized ones run on mma.sync).
  bool bigTiles(std::optional<MmaElt> elt, const Experts &x) const;

  /// maxTiles = max(1, min(ceil(rows / R) + E, rows)): every tile holds at
  /// least one row, so the launched grid has at most rows + R (E + 1)
  /// padded rows (Kernels.h).
  Value maxTilesFor(Value rows, Value tileRows, int64_t numExperts);

  /// The element type of the tensor-core kernels (MmaGemm.h) for ffn()'s
  /// GEMMs, or nullopt for the CUDA-core kernels: tensor cores on; A, the
  /// weights and the biases of one bf16/f16 type T (or quantized weights
  /// whose blocks or groups along K are whole k-tiles, without 128-row
  /// tiles); GEMM2's rows f32 or T (f32 with a combine, whose y is T).
  std::optional<MmaElt> mmaElt(Value A, const Experts &x, Type out, Type y);

  /// Emits `body(R)` for the plan's row tile R: once when R is a constant
  /// (static T), else under an scf.if on its run-time value, once per
  /// possible tile (kSmallTileM, kTileM, and kBigTileM when the plan may
  /// take it): the launches of one branch run.
  void forRowTile(const Plan &plan, function_ref<void(int64_t)> body);

  /// Output columns per block of the tensor-core GEMM1 of `act`.
  static int64_t mmaTileN1(Activation act);

  /// Split-K of the fused layer's 16-row GEMMs (MmaGemm.h, splitK).
  struct SplitK {
    Value S1, S2; // null: the plan's tile is never 16 rows
    Value tileRows, maxTiles, base1, base2, ws1, ws2;
  };

  /// The slices S of GEMM1 and GEMM2 at decode: `decode-split-k` when set,
  /// else enough for about kSplitKTargetBlocks blocks, assuming min(rows, E)
  /// active tiles (decode: an expert's rows fit one 16-row tile), with at
  /// least kSplitKMinTiles k-tiles of kMmaTileK per slice. Index arithmetic
  /// on the host, so a dynamic T chooses at run time.
  SplitK splitK(Value rows, int64_t numExperts, const Experts &x);
};

/// Converts the moe op `op` with `h`: its host code is emitted before it
/// and its uses are replaced by the results (the caller erases it). An op
/// without a GPU lowering is an error ("no GPU lowering for this moe op").
/// The per-op conversions, ConvertOps.cpp.
LogicalResult convertMoEOp(Operation *op, Host &h);

} // namespace gpu_lowering
} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_GPU_HOST_H
