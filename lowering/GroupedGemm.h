//===- GroupedGemm.h - one description of a grouped GEMM --------*- C++ -*-===//
//
// What a grouped GEMM of the moe lowering computes, independent of the
// generator that emits it. The three generators take it: the CPU
// micro-kernels (cpu/ExpertKernels.h, emitGroupedGemm), the GPU CUDA-core
// kernels (gpu/Kernels.h, KernelLibrary::gemm1/gemm2) and the tensor-core
// kernels (gpu/MmaGemm.h, MmaGemmConfig's constructor). Each one names its
// kernel variants after it and applies its epilogue with buildEpilogue,
// the one definition of the epilogue math (docs/spec.md §3 and §7). How a
// target computes it (tiles, engine, vector width, stages) is the target's
// lowering configuration (#moe.cpu_config, #moe.gpu_config), not part of the
// description.
//
//   C[r, n] = epilogue(sum_k A[row(r), k] * B[group(r)][k, n])
//
// for every row r of every group (group g owns the rows [offsets[g],
// offsets[g + 1]) of the routing plan), where
//  - row(r) is r (GemmRows::direct) or the row map's entry for r
//    (GemmRows::gathered: the token gather folded into the loads of A);
//  - B holds one K x N matrix per group (GemmWeights::perGroup, the experts)
//    or one for every row (GemmWeights::shared, the router);
//  - B's elements are stored dense in B's element type (WeightFormat::dense),
//    row-major [K, N], or (bTransposed) as its transpose [N, K] (the
//    backward's dX = dZ W^T reads the forward's weights so);
//  - a gated GEMM (activation swiglu or geglu) has 2N columns in B and pairs
//    output column n (the gate) with column N + n (the up projection).
// The weight-gradient form (GemmReduction::groupRows) reduces over a
// group's rows instead, so its K is the group's row count:
//
//   C[g][m, n] = epilogue(sum_{r in group g} A[row(r), m] * B[r, n])
//
// A read transposed (its columns are C's rows), B one row per plan row
// (GemmWeights::planRows: dZ), C one M x N matrix per group (dW1, dW2);
// the sum runs in increasing r, and a group without rows gives exact
// zeros.
// Operands are extended to f32 as they are loaded, the products accumulate
// in f32 in increasing k, the epilogue computes in f32 and the result is
// rounded once to C's element type when it is stored.
//
// Quantized B (WeightFormat::fp8Block, int4Group) is dequantized exactly to
// f32 as it is loaded, before the products (buildDequantized; the CPU
// micro-kernels and the GPU's CUDA-core kernels; the CPU's packed panels
// apply the scales once per block or group instead, docs/quantization.md).
// Adding a variant (a transposed operand, a weight-gradient GEMM whose K is
// a group's row count, packed weights with scales) is a new field here and
// its implementation in each generator.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_GROUPEDGEMM_H
#define MOE_LOWERING_GROUPEDGEMM_H

#include "dialect/MoEAttrs.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace mlir {
namespace moe {

/// Which row of A a row of the plan reads.
enum class GemmRows : uint8_t {
  direct,   // row r
  gathered, // rowMap[r] (the tokens, read through the plan)
};

/// How B is shared among the groups.
enum class GemmWeights : uint8_t {
  perGroup, // B[g]: one matrix per group (expert)
  shared,   // one matrix for every row (the router)
  planRows, // B[r]: one row per plan row (GemmReduction::groupRows only)
};

/// What the sum runs over.
enum class GemmReduction : uint8_t {
  columns,   // A's columns (K fixed): the forward GEMMs
  groupRows, // the group's rows (K = its row count): the weight gradients
};

/// How B's elements are stored.
enum class WeightFormat : uint8_t {
  dense,    // B's element type, row-major [K, N]
  /// FP8 E4M3 codes (f8E4M3FN), row-major [K, N] per group, with one f32
  /// scale per block of blockK x blockN (docs/spec.md §2.1): B[k][n] =
  /// q[k][n] * s[k / blockK][n / blockN], rounded once to f32, as B is
  /// loaded. (A gated GEMM's up column N + n has the scale of column N + n.)
  fp8Block,
  /// 4-bit integer codes (i4, read unsigned, one per byte as LLVM stores
  /// i4), row-major [K, N] per group, with one f32 scale per group of
  /// blockK rows and column, and a zero point z (i4 codes [K / blockK, N],
  /// or 8 without them: symmetric) (docs/spec.md §2.1): B[k][n] = (q[k][n]
  /// - z[k / blockK][n]) * s[k / blockK][n], rounded once to f32, as B is
  /// loaded. blockN is 1.
  int4Group,
};

/// One step of an epilogue. The steps run in the order of the list, on the
/// f32 sum of each output element.
enum class EpilogueStep : uint8_t {
  /// + bias[g][n] (gated: the up half gets + bias[g][N + n]).
  bias,
  /// act(v) (gated: act(gate) * up, the activation's element-wise part on
  /// the gate).
  activation,
  /// * w[r], the routed weight of the plan row (f32).
  routedWeight,
  /// Rounded to C's element type and carried on in f32 (h of the expert
  /// FFN, docs/spec.md §2: the value the next GEMM reads).
  round,
  /// The fused combine: the rows of a token summed in slot order into y
  /// (docs/spec.md §7). A GPU GEMM2 step; the CPU combines in its own kernel.
  combine,
  /// The activation's backward, in the epilogue of the expert FFN's dH =
  /// dOut W2^T (docs/spec.md §9): with the pre-activation z (gated: gate g
  /// at column n, up u at N + n), dZ = dH * act'(z) (gated: dG = dH * u *
  /// act'(g), dU = dH * act(g)) and H = act(z) (gated: act(g) * u) rounded
  /// to roundTo, the value GEMM2 read. C holds z and receives dZ in place;
  /// H is the epilogue's second output. The epilogue's only step.
  activationGrad,
};

/// An epilogue: its steps, and what they need.
struct GemmEpilogue {
  llvm::SmallVector<EpilogueStep, 4> steps;
  /// With EpilogueStep::activation or activationGrad.
  Activation activation = Activation::relu;
  /// With EpilogueStep::round or activationGrad: the element type rounded to.
  Type roundTo;

  bool has(EpilogueStep step) const;
  /// The activation step of a gated activation (swiglu, geglu).
  bool gated() const;
  /// The activation-gradient step of a gated activation: C (z, dZ) has 2N
  /// columns, B and the sum N.
  bool gatedGrad() const;
  GemmEpilogue &then(EpilogueStep step);
  /// The same epilogue without `step` (the shared expert's rows folded into
  /// a launch have no bias).
  GemmEpilogue without(EpilogueStep step) const;
};

/// What a grouped GEMM computes (see the file comment).
struct GroupedGemmDesc {
  GemmRows rows = GemmRows::direct;
  GemmWeights weights = GemmWeights::perGroup;
  GemmReduction reduction = GemmReduction::columns;
  WeightFormat format = WeightFormat::dense;
  /// B stored as its transpose, [N, K] (per group with perGroup).
  bool bTransposed = false;
  /// WeightFormat::fp8Block: the block sizes along K and N; int4Group:
  /// the group along K, and blockN = 1.
  int64_t blockK = 0, blockN = 0;
  /// WeightFormat::int4Group: zero points are operands (else 8).
  bool zeroPoint = false;
  /// WeightFormat::int4Group: #moe.quant's int8-activation mode (A is the
  /// activations' int8 quantization; see the CPU's GroupedGemm::int8Dot).
  bool int8Activations = false;
  /// Element types of A, B (and the bias), C: f32, bf16 or f16 (i8: the
  /// codes of the int8-activation mode).
  Type aType, bType, cType;
  GemmEpilogue epilogue;

  bool gathered() const { return rows == GemmRows::gathered; }
  bool gated() const { return epilogue.gated(); }
  bool weightGradient() const { return reduction == GemmReduction::groupRows; }
  bool quantized() const { return format != WeightFormat::dense; }
  /// B's format, block sizes and zero points from an op's #moe.quant (null:
  /// dense): fp8_e4m3 blocks [bk, bn], or int4 groups of G along K.
  void setQuant(QuantAttr quant);
  /// The kernel-name part of a quantized format, whose block sizes are
  /// compile-time constants of a kernel: _int4g<G>[_zp][_a8], _fp8b<BK>x<BN>
  /// ("" for dense weights).
  std::string formatSuffix() const;
  /// Why this is not a grouped GEMM the file comment defines (empty: it is).
  /// The weight-gradient form takes B by plan row, untransposed, and no
  /// gated activation, routed weight or combine (each belongs to a row).
  std::string invalidReason() const;
};

/// The weight gradient of an expert GEMM (docs/spec.md §9): dW[g] = A[rows
/// of g]^T dZ[rows of g], A gathered or not, dZ of type `dz`, dW of `dw`.
GroupedGemmDesc expertWeightGradient(bool gathered, Type a, Type dz, Type dw);

/// The expert FFN's two GEMMs (docs/spec.md §3): GEMM1 h = round(act(A W1
/// + b1)) and GEMM2 rows = (h W2 + b2) * w, optionally combined.
GroupedGemmDesc expertGemm1(bool gathered, Activation act, bool bias, Type a, Type w, Type h);
GroupedGemmDesc expertGemm2(bool bias, bool routedWeight, bool combine, Type h, Type w,
                            Type out);

/// The operands of one epilogue evaluation, as the generator loads them: all
/// f32 and of the accumulator's type (a scalar on the GPU, a vector of f32
/// on the CPU), except `weight`, which may be a scalar for a vector
/// accumulator (it is broadcast).
struct EpilogueValues {
  Value acc;    // the sum (gated: of the gate column)
  Value accUp;  // gated: the sum of the up column
  Value bias;   // with bias: bias[g][n]
  Value biasUp; // with bias, gated: bias[g][N + n]
  Value weight; // with routedWeight: w[r]
};

/// Applies the element-wise steps of `epilogue` (every step but combine
/// and activationGrad) to `values` and returns the f32 value to store.
Value buildEpilogue(ImplicitLocOpBuilder &b, const GemmEpilogue &epilogue,
                    const EpilogueValues &values);

/// What EpilogueStep::activationGrad stores: dZ (gated: of the gate column),
/// dZ of the up column (gated only) and the rounded activation H.
struct ActivationGradValues {
  Value dz, dzUp, h;
};

/// EpilogueStep::activationGrad on `dh` (the sum) and the pre-activation
/// `z` (gated: `zUp` too), all f32 scalars or vectors of one type.
ActivationGradValues buildActivationGradEpilogue(ImplicitLocOpBuilder &b,
                                                 const GemmEpilogue &epilogue, Value dh,
                                                 Value z, Value zUp);

/// The value of FP8 E4M3 codes (f8E4M3FN, a scalar or a vector), exactly
/// as f32 (docs/spec.md §2.1): the 7 magnitude bits shifted left by 7 are
/// the f16 of q * 2^-8 (E4M3's bias is 7, f16's 15; subnormals included),
/// the sign moves to bit 15 and S.1111.111 (NaN) becomes the f16 NaN; the
/// f16 widens exactly to f32 and * 256 gives q.
Value buildFp8Value(ImplicitLocOpBuilder &b, Value codes);

/// The exact f32 factor of B's element that the scale multiplies
/// (WeightFormat::fp8Block: the E4M3 value q; int4Group: q - z, z = 8
/// without zero points); `code` and `zero` as for buildDequantized. Every
/// factor is exact in bf16 and f16 too (an E4M3 value, or an integer in
/// [-15, 15]): the tensor-core GEMMs stage it in the data type and apply
/// the scale once per block or group (docs/spec.md §2.1).
Value buildQuantizedFactor(ImplicitLocOpBuilder &b, const GroupedGemmDesc &desc, Value code,
                           Value zero);

/// B's element dequantized as the description's format defines it
/// (WeightFormat::fp8Block: q * s; int4Group: (q - z) * s, z = 8 without
/// zero points), computed exactly and rounded once to f32: `code` is the
/// stored code (f8E4M3FN or i4, read unsigned), `scale` its f32 scale,
/// `zero` (int4 with zero points) its i4 zero point; scalars, or vectors of
/// one shape: buildQuantizedFactor times the scale. Shared by the CPU's
/// per-element dequantization and the GPU's CUDA-core GEMMs.
Value buildDequantized(ImplicitLocOpBuilder &b, const GroupedGemmDesc &desc, Value code,
                       Value scale, Value zero);

} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_GROUPEDGEMM_H
