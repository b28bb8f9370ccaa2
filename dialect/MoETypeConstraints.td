//===- MoETypeConstraints.td - operand types of the moe ops -*- tablegen -*-===//
//
// The tensor types the moe ops take and return (docs/spec.md §2-§3): data in
// f32, f16 or bf16 with a fixed rank per operand (its layout in the spec's
// notation, T tokens, D model width, E experts, H hidden width, K experts per
// token), i32 for expert ids, row positions, offsets and counts, a scalar
// i64 seed and a scalar f32 auxiliary loss. ODS checks these one operand at a
// time; the op verifiers check the relations between operands (shared
// element type, equal sizes).
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TYPE_CONSTRAINTS_TD
#define MOE_TYPE_CONSTRAINTS_TD

include "mlir/IR/CommonTypeConstraints.td"

/// The floating-point element types of a layer's data.
def MoE_FloatElement : AnyTypeOf<[F32, F16, BF16], "f32, f16 or bf16">;
/// Element types under their IR names, so that the generated docs and the
/// diagnostics read as types ("i32", not "32-bit signless integer").
def MoE_F32Element : AnyTypeOf<[F32], "f32">;
def MoE_I32Element : AnyTypeOf<[I32], "i32">;
def MoE_I64Element : AnyTypeOf<[I64], "i64">;

/// A ranked tensor of rank `rank` whose element type satisfies `elt`;
/// `layout` names its dimensions in the spec's notation ("[T, D]").
class MoE_TensorOfRank<Type elt, int rank, string layout>
    : Type<And<[IsRankedTensorTypePred, HasAnyRankOfPred<[rank]>,
                SubstLeaves<"$_self",
                            "::llvm::cast<::mlir::ShapedType>($_self).getElementType()",
                            elt.predicate>]>,
           !if(!eq(rank, 0), "0-D tensor (scalar) of " # elt.summary,
               rank # "-D tensor " # layout # " of " # elt.summary),
           "::mlir::RankedTensorType">;

/// Data: f32, f16 or bf16 of the given rank and layout.
class MoE_FloatTensorOfRank<int rank, string layout>
    : MoE_TensorOfRank<MoE_FloatElement, rank, layout>;
/// Always f32 (routing-independent f32 sums: shared expert outputs).
class MoE_F32TensorOfRank<int rank, string layout>
    : MoE_TensorOfRank<MoE_F32Element, rank, layout>;
/// Expert ids, row positions, offsets and counts: i32.
class MoE_I32TensorOfRank<int rank, string layout>
    : MoE_TensorOfRank<MoE_I32Element, rank, layout>;

/// Shorthands for the operands most ops share.
class MoE_Data2D<string layout> : MoE_FloatTensorOfRank<2, layout>;
class MoE_Data3D<string layout> : MoE_FloatTensorOfRank<3, layout>;
def MoE_W1Tensor : MoE_FloatTensorOfRank<3, "[E, D, H] (gated: [E, D, 2H])">;
/// A layer's expert weights may also be stored quantized (#moe.quant):
/// f8E4M3FN or i4.
def MoE_WeightElement : AnyTypeOf<[F32, F16, BF16, F8E4M3FN, I<4>],
                                  "f32, f16, bf16, f8E4M3FN or i4">;
def MoE_LayerW1Tensor : MoE_TensorOfRank<MoE_WeightElement, 3, "[E, D, H] (gated: [E, D, 2H])">;
def MoE_LayerW2Tensor : MoE_TensorOfRank<MoE_WeightElement, 3, "[E, H, D]">;
/// The scales and zero points of quantized weights (#moe.quant).
def MoE_QuantScaleTensor : MoE_F32TensorOfRank<3, "[E, K/BK or K/G, N/BN or N]">;
def MoE_I4Element : AnyTypeOf<[I<4>], "i4">;
def MoE_ZeroPointTensor : MoE_TensorOfRank<MoE_I4Element, 3, "[E, K/G, N]">;
def MoE_W2Tensor : MoE_FloatTensorOfRank<3, "[E, H, D]">;
def MoE_B1Tensor : MoE_FloatTensorOfRank<2, "[E, H] (gated: [E, 2H])">;
def MoE_B2Tensor : MoE_FloatTensorOfRank<2, "[E, D]">;
def MoE_ScaleTensor : MoE_FloatTensorOfRank<0, "">;
def MoE_OffsetsTensor : MoE_I32TensorOfRank<1, "[E+1]">;
def MoE_SeedTensor : MoE_TensorOfRank<MoE_I64Element, 0, "">;
def MoE_AuxLossTensor : MoE_TensorOfRank<MoE_F32Element, 0, "">;

#endif // MOE_TYPE_CONSTRAINTS_TD
