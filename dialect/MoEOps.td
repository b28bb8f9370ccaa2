//===- MoEOps.td - moe dialect operations ------------------*- tablegen -*-===//

#ifndef MOE_OPS_TD
#define MOE_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "dialect/MoEDialect.td"
include "dialect/MoEAttrs.td"

//===----------------------------------------------------------------------===//
// moe.layer
//===----------------------------------------------------------------------===//

def MoE_LayerOp : MoE_Op<"layer", [Pure, AttrSizedOperandSegments]> {
  let summary = "a token-choice Mixture-of-Experts layer";
  let description = [{
    A Mixture-of-Experts layer with token-choice routing over `input: [T, D]`.

    Router: `o = x Wr + br` (`router_weight Wr: [D, E]`, optional
    `router_bias br: [E]`), `g = softmax(o)` per token. The `routing`
    attribute (a `RoutingAttrInterface`: `#moe.dense`, `#moe.top_k<k = K>`,
    `#moe.moesart<...>`) chooses the experts S_t of each token and their
    weights w_t,i; the result is

        y_t = sum_{i in S_t} w_t,i f_i(x_t)

    where `f_e(x) = act(x W1[e] + b1[e]) W2[e] + b2[e]` with `w1: [E, D, H]`
    (`[E, D, 2H]` for gated activations), `w2: [E, H, D]` and the optional
    `expert_biases(b1: [E, H] or [E, 2H], b2: [E, D])`.

    With the unit attribute `training` the layer is in training mode: it
    takes a `seed` operand (`tensor<i64>`, keying the Philox stream of
    sampling routings) and returns a second result, the auxiliary loss
    `tensor<f32>` (the routing's regularizer, 0 where it has none). In
    inference mode it takes no seed and returns only `y`. The layer is pure
    in both modes: a seeded training layer is deterministic.

    All floating-point operands and the result `y` share one element type
    (f32, f16 or bf16); shapes may be static or dynamic, and every relation
    between known sizes (D, E, H or 2H, bias lengths, `1 <= k <= E`) is
    verified.

    Example:

    ```mlir
    %y = moe.layer %x router(%wr) experts(%w1, %w2)
           {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
           : (tensor<32x256xf32>, tensor<256x8xf32>, tensor<8x256x1024xf32>,
              tensor<8x512x256xf32>) -> tensor<32x256xf32>
    ```
  }];

  let arguments = (ins
    AnyRankedTensor:$input,
    AnyRankedTensor:$router_weight,
    Optional<AnyRankedTensor>:$router_bias,
    AnyRankedTensor:$w1,
    AnyRankedTensor:$w2,
    Optional<AnyRankedTensor>:$b1,
    Optional<AnyRankedTensor>:$b2,
    Optional<AnyRankedTensor>:$seed,
    MoE_RoutingAttrInterface:$routing,
    MoE_ActivationAttr:$activation,
    UnitAttr:$training);
  let results = (outs
    AnyRankedTensor:$output,
    Optional<AnyRankedTensor>:$aux_loss);

  let assemblyFormat = [{
    $input `router` `(` $router_weight (`,` $router_bias^)? `)`
    `experts` `(` $w1 `,` $w2 `)`
    (`expert_biases` `(` $b1^ `,` $b2 `)`)?
    (`seed` `(` $seed^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;

  let extraClassDeclaration = [{
    /// Number of experts E, or ShapedType::kDynamic.
    int64_t getNumExperts();
    /// Whether the layer carries the `moe.causal` marker.
    bool isCausal();
  }];
}

//===----------------------------------------------------------------------===//
// moe.soft_layer
//===----------------------------------------------------------------------===//

def MoE_SoftLayerOp : MoE_Op<"soft_layer", [Pure, AttrSizedOperandSegments]> {
  let summary = "a Soft Mixture-of-Experts layer (slots are token averages)";
  let description = [{
    A Soft MoE layer over `input x: [G, M, D]` (G groups of M tokens; one
    sequence or image is one group) with `slots Phi: [D, E, S]` (S slots per
    expert) and an optional `scale: tensor<>` (default 1).

    * logits `L[g,m,e,s] = sum_d xn[g,m,d] * scale * Phin[d,e,s]`, where with
      the unit attribute `normalize` `xn = x * rsqrt(sum_d x^2 + 1e-6)` and
      `Phin = Phi * rsqrt(sum_d Phi^2 + 1e-6)` (over d); without it `xn = x`
      and `Phin = Phi`;
    * dispatch weights `Dw = softmax of L over m`; combine weights
      `Cw = softmax of L over (e, s) jointly`;
    * slots `X~[g,e,s,:] = sum_m Dw[g,m,e,s] * x[g,m,:]` (raw x);
    * `Y~[g,e,s,:] = f_e(X~[g,e,s,:])` with the expert FFNs of `moe.layer`;
    * `y[g,m,:] = sum_{e,s} Cw[g,m,e,s] * Y~[g,e,s,:]`.

    Soft MoE mixes tokens inside a group, so it must not carry `moe.causal`.
    All floating-point operands share one element type.

    Example:

    ```mlir
    %y = moe.soft_layer %x slots(%phi) scale(%scale) experts(%w1, %w2)
           {activation = #moe.activation<gelu>, normalize}
           : (tensor<4x64x128xf32>, tensor<128x8x2xf32>, tensor<f32>,
              tensor<8x128x512xf32>, tensor<8x512x128xf32>) -> tensor<4x64x128xf32>
    ```
  }];

  let arguments = (ins
    AnyRankedTensor:$input,
    AnyRankedTensor:$slots,
    Optional<AnyRankedTensor>:$scale,
    AnyRankedTensor:$w1,
    AnyRankedTensor:$w2,
    Optional<AnyRankedTensor>:$b1,
    Optional<AnyRankedTensor>:$b2,
    MoE_ActivationAttr:$activation,
    UnitAttr:$normalize);
  let results = (outs AnyRankedTensor:$output);

  let assemblyFormat = [{
    $input `slots` `(` $slots `)`
    (`scale` `(` $scale^ `)`)?
    `experts` `(` $w1 `,` $w2 `)`
    (`expert_biases` `(` $b1^ `,` $b2 `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;

  let extraClassDeclaration = [{
    /// Number of experts E, or ShapedType::kDynamic.
    int64_t getNumExperts();
    /// Slots per expert S, or ShapedType::kDynamic.
    int64_t getSlotsPerExpert();
  }];
}

#endif // MOE_OPS_TD
