//===- MoEOps.td - moe dialect operations ------------------*- tablegen -*-===//

#ifndef MOE_OPS_TD
#define MOE_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "dialect/MoEDialect.td"
include "dialect/MoEAttrs.td"
include "dialect/MoEAdjointInterface.td"
include "dialect/MoETypeConstraints.td"

//===----------------------------------------------------------------------===//
// moe.layer
//===----------------------------------------------------------------------===//

// The ops that hold expert weights, which may be quantized (docs/spec.md
// §2.1): moe.layer, moe.expert_ffn, moe.fused_experts.
defvar MoE_QuantizedExpertsDecls = [{
    /// Whether its expert weights are quantized (the `quant` attribute).
    bool isQuantized() { return static_cast<bool>(getQuantAttr()); }
    /// Fails with one error on the op when it is quantized: `what` (a pass
    /// or lowering) does not support quantized expert weights yet.
    ::mlir::LogicalResult checkNotQuantized(::llvm::StringRef what) {
      return ::mlir::moe::checkNotQuantized(getOperation(), getQuantAttr(), what);
    }
}];

def MoE_LayerOp : MoE_Op<"layer", [Pure, AttrSizedOperandSegments, InferTypeOpAdaptorWithIsCompatible,
    DeclareOpInterfaceMethods<ReifyRankedShapedTypeOpInterface, ["reifyResultShapes"]>]> {
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
    inference mode it takes no seed and returns only `y`. The optional
    `capacity_factor` (f64, > 0) limits every expert to
    `ceil(capacity_factor * T * k / E)` tokens, GShard-style (see
    `moe.dispatch`); without it the layer is dropless. The capacity is an
    i32: the verifier rejects a non-finite factor or one above 2^31 - 1, and,
    when T is static, a capacity above 2^31 - 1. Expert ids are i32 too: E
    (when static), k and the group counts are at most 2^31 - 1, and E >= 1. The layer is pure
    in both modes: a seeded training layer is deterministic.

    Routers as production models use them (docs/spec.md §3.1.1): the routing
    `#moe.top_k` has score/normalize/scale/group parameters, and the optional
    `selection_bias(%b)` (`[E]`, f32 or the element type, `#moe.top_k` only)
    is added to the scores to choose experts (DeepSeek-V3's aux-loss-free
    balancing). Shared experts: `shared(%s1, %s2)` (`s1: [D, Hs]`, or
    `[D, 2Hs]` for gated activations, `s2: [Hs, D]`, the layer's activation,
    no biases) adds `gate_t * (act(x_t s1) s2)` to every token, where
    `gate_t = sigmoid(x_t sg)` with `shared_gate(%sg)` (`[D, 1]`) and 1
    without it (several shared experts are one wider shared FFN).

    Quantized expert weights (docs/spec.md §2.1): with the attribute
    `quant = #moe.quant<...>`, `w1` and `w2` have the format's storage type
    (f8E4M3FN or i4) and the layer takes their f32 scales,
    `expert_scales(%s1, %s2)`, and, for `#moe.quant<int4, ..., zero_point>`,
    their i4 zero points, `expert_zero_points(%z1, %z2)`, shaped as the
    attribute says. Passes and lowerings that do not handle them yet reject
    such a layer with one error.

    All floating-point operands and the result `y` share one element type
    (f32, f16 or bf16; quantized weights excepted); shapes may be static or dynamic, and every relation
    between known sizes (D, E, H or 2H, bias lengths, `1 <= k <= E`, the
    group rules, shared expert widths) is verified.

    The result types follow from the operands (`y` is typed like `input`;
    in training mode the aux loss is `tensor<f32>`): builders infer them, and
    a declared type may only refine a dynamic size. Canonicalization drops
    constant-zero biases (`router_bias`, `selection_bias`, the
    `expert_biases` pair), drops a `capacity_factor >= E` (the capacity is
    then at least T*k, so nothing is dropped), and turns a classic
    `#moe.top_k<k = E>` without a capacity into `#moe.dense` (equal up to
    the rounding of the weights' renormalization).

    Example:

    ```mlir
    %y = moe.layer %x router(%wr) experts(%w1, %w2)
           {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
           : (tensor<32x256xf32>, tensor<256x8xf32>, tensor<8x256x1024xf32>,
              tensor<8x512x256xf32>) -> tensor<32x256xf32>
    ```
  }];

  let arguments = (ins
    MoE_Data2D<"[T, D]">:$input,
    MoE_Data2D<"[D, E]">:$router_weight,
    Optional<MoE_FloatTensorOfRank<1, "[E]">>:$router_bias,
    Optional<MoE_FloatTensorOfRank<1, "[E]">>:$selection_bias,
    MoE_LayerW1Tensor:$w1,
    MoE_LayerW2Tensor:$w2,
    Optional<MoE_QuantScaleTensor>:$w1_scale,
    Optional<MoE_QuantScaleTensor>:$w2_scale,
    Optional<MoE_ZeroPointTensor>:$w1_zero_point,
    Optional<MoE_ZeroPointTensor>:$w2_zero_point,
    Optional<MoE_B1Tensor>:$b1,
    Optional<MoE_B2Tensor>:$b2,
    Optional<MoE_Data2D<"[D, Hs] (gated: [D, 2Hs])">>:$shared_w1,
    Optional<MoE_Data2D<"[Hs, D]">>:$shared_w2,
    Optional<MoE_Data2D<"[D, 1]">>:$shared_gate,
    Optional<MoE_SeedTensor>:$seed,
    MoE_RoutingAttrInterface:$routing,
    MoE_ActivationAttr:$activation,
    UnitAttr:$training,
    OptionalAttr<F64Attr>:$capacity_factor,
    OptionalAttr<MoE_QuantAttr>:$quant);
  let results = (outs
    MoE_Data2D<"[T, D]">:$output,
    Optional<MoE_AuxLossTensor>:$aux_loss);

  let assemblyFormat = [{
    $input `router` `(` $router_weight (`,` $router_bias^)? `)`
    (`selection_bias` `(` $selection_bias^ `)`)?
    `experts` `(` $w1 `,` $w2 `)`
    (`expert_scales` `(` $w1_scale^ `,` $w2_scale `)`)?
    (`expert_zero_points` `(` $w1_zero_point^ `,` $w2_zero_point `)`)?
    (`expert_biases` `(` $b1^ `,` $b2 `)`)?
    (`shared` `(` $shared_w1^ `,` $shared_w2 `)`)?
    (`shared_gate` `(` $shared_gate^ `)`)?
    (`seed` `(` $seed^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;

  let extraClassDeclaration = MoE_QuantizedExpertsDecls # [{
    /// Number of experts E, or ShapedType::kDynamic.
    int64_t getNumExperts();
    /// Whether the layer carries the `moe.causal` marker.
    bool isCausal();
  }];
}

//===----------------------------------------------------------------------===//
// moe.soft_layer
//===----------------------------------------------------------------------===//

def MoE_SoftLayerOp : MoE_Op<"soft_layer", [Pure, AttrSizedOperandSegments,
    InferTypeOpAdaptorWithIsCompatible]> {
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
    MoE_Data3D<"[G, M, D]">:$input,
    MoE_Data3D<"[D, E, S]">:$slots,
    Optional<MoE_ScaleTensor>:$scale,
    MoE_W1Tensor:$w1,
    MoE_W2Tensor:$w2,
    Optional<MoE_B1Tensor>:$b1,
    Optional<MoE_B2Tensor>:$b2,
    MoE_ActivationAttr:$activation,
    UnitAttr:$normalize);
  let results = (outs MoE_Data3D<"[G, M, D]">:$output);

  let assemblyFormat = [{
    $input `slots` `(` $slots `)`
    (`scale` `(` $scale^ `)`)?
    `experts` `(` $w1 `,` $w2 `)`
    (`expert_biases` `(` $b1^ `,` $b2 `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;

  let extraClassDeclaration = [{
    /// Number of experts E, or ShapedType::kDynamic.
    int64_t getNumExperts();
    /// Slots per expert S, or ShapedType::kDynamic.
    int64_t getSlotsPerExpert();
  }];
}

//===----------------------------------------------------------------------===//
// The decomposed chain (docs/spec.md §3.3)
//===----------------------------------------------------------------------===//

def MoE_RouteOp : MoE_Op<"route", [Pure, DeclareOpInterfaceMethods<MoE_AdjointOpInterface, ["buildAdjoint"]>,
    DeclareOpInterfaceMethods<ReifyRankedShapedTypeOpInterface, ["reifyResultShapes"]>]> {
  let summary = "router logits o = x Wr + br";
  let description = [{
    Computes the router logits `o = x Wr + br` of a token-choice layer:
    `input: [T, D]`, `router_weight: [D, E]`, optional `router_bias: [E]`,
    result `[T, E]`.

    ```mlir
    %o = moe.route %x router(%wr, %br)
           : (tensor<64x128xf32>, tensor<128x8xf32>, tensor<8xf32>) -> tensor<64x8xf32>
    ```
  }];
  let arguments = (ins MoE_Data2D<"[T, D]">:$input, MoE_Data2D<"[D, E]">:$router_weight,
                       Optional<MoE_FloatTensorOfRank<1, "[E]">>:$router_bias);
  let results = (outs MoE_Data2D<"[T, E]">:$logits);
  let assemblyFormat = [{
    $input `router` `(` $router_weight (`,` $router_bias^)? `)`
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def MoE_GateOp : MoE_Op<"gate", [Pure, DeclareOpInterfaceMethods<MoE_AdjointOpInterface, ["buildAdjoint"]>,
    AttrSizedOperandSegments, InferTypeOpAdaptorWithIsCompatible,
    DeclareOpInterfaceMethods<ReifyRankedShapedTypeOpInterface, ["reifyResultShapes"]>]> {
  let summary = "routing weights and expert indices per token";
  let description = [{
    Applies a routing policy to router logits `logits: [T, E]`: computes
    `g = softmax(o)` and, for each token, the K experts it runs
    (`K = routing.getExpertsPerToken(E)`: E for `#moe.dense`, k otherwise)
    with their weights, exactly as docs/spec.md §3.1 and `moe.layer`.
    The optional `selection_bias` (`[E]`, `#moe.top_k` only) is added to the
    scores to choose the experts, never to weight them.

    Results: `weights: [T, K]` (the logits' element type), `indices: [T, K]`
    (i32 expert ids), and in training mode (`training`, which needs `seed`)
    the auxiliary loss `tensor<f32>`. The order of the K entries of a token is
    the order of S_t: ascending expert index for `#moe.dense`, descending
    logit (ties: lower index) for top-k selections, draw order for MOESART
    training samples. A capacity-limited `moe.dispatch` drops assignments in
    this order.

    ```mlir
    %w, %i = moe.gate %o {routing = #moe.top_k<k = 2>}
               : (tensor<64x8xf32>) -> (tensor<64x2xf32>, tensor<64x2xi32>)
    ```
  }];
  let arguments = (ins MoE_Data2D<"[T, E]">:$logits,
                       Optional<MoE_FloatTensorOfRank<1, "[E]">>:$selection_bias,
                       Optional<MoE_SeedTensor>:$seed,
                       MoE_RoutingAttrInterface:$routing, UnitAttr:$training);
  let results = (outs MoE_Data2D<"[T, K]">:$weights,
                      MoE_I32TensorOfRank<2, "[T, K]">:$indices,
                      Optional<MoE_AuxLossTensor>:$aux_loss);
  let extraClassDeclaration = [{
    /// Number of experts E (logits dimension 1), or ShapedType::kDynamic.
    int64_t getNumExperts();
  }];
  let assemblyFormat = [{
    $logits (`selection_bias` `(` $selection_bias^ `)`)? (`seed` `(` $seed^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MoE_DispatchOp : MoE_Op<"dispatch", [Pure, DeclareOpInterfaceMethods<MoE_AdjointOpInterface, ["buildAdjoint"]>,
    InferTypeOpAdaptorWithIsCompatible,
    DeclareOpInterfaceMethods<ReifyRankedShapedTypeOpInterface, ["reifyResultShapes"]>]> {
  let summary = "permute tokens into per-expert groups";
  let description = [{
    Groups the assignments `(t, i)` of `indices: [T, K]` by expert: the
    result `rows: [T*K, D]` holds `input[t]` for every kept assignment,
    expert 0's rows first, then expert 1's, and so on; inside an expert's
    group rows keep token order (t, then i). The routing plan:

    * `offsets: [E+1]` (i32): expert e's rows are `offsets[e] ..
      offsets[e+1]-1`; `offsets[E]` is the number of kept assignments;
    * `source_rows: [T*K]` (i32): the token of each permuted row (-1 for the
      unused rows after `offsets[E]`);
    * `positions: [T, K]` (i32): the permuted row of assignment (t, i), or -1
      if it was dropped.

    Dropless by default. With `capacity_factor = cf` (GShard; finite, > 0,
    at most 2^31 - 1, and with T static `C` at most 2^31 - 1, since it is an
    i32), every expert keeps at most `C = ceil(cf * T * K / E)` assignments; assignments are
    taken in token order (t ascending, then i ascending) and those arriving at
    a full expert are dropped (they contribute zero to the combined output;
    the remaining weights are not renormalized). Unused rows are zero.
    Canonicalization drops a `capacity_factor >= E` (`C >= T*K`: nothing is
    dropped, whatever the ids).

    ```mlir
    %rows, %offsets, %src, %pos = moe.dispatch %x, %i {num_experts = 8 : i64}
        : (tensor<64x128xf32>, tensor<64x2xi32>)
        -> (tensor<128x128xf32>, tensor<9xi32>, tensor<128xi32>, tensor<64x2xi32>)
    ```
  }];
  let arguments = (ins MoE_Data2D<"[T, D]">:$input,
                       MoE_I32TensorOfRank<2, "[T, K]">:$indices,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_experts,
                       OptionalAttr<F64Attr>:$capacity_factor);
  let results = (outs MoE_Data2D<"[T*K, D]">:$rows, MoE_OffsetsTensor:$offsets,
                      MoE_I32TensorOfRank<1, "[T*K]">:$source_rows,
                      MoE_I32TensorOfRank<2, "[T, K]">:$positions);
  let assemblyFormat = [{
    $input `,` $indices attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def MoE_ExpertFFNOp : MoE_Op<"expert_ffn", [Pure, DeclareOpInterfaceMethods<MoE_AdjointOpInterface, ["buildAdjoint"]>,
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<ReifyRankedShapedTypeOpInterface, ["reifyResultShapes"]>]> {
  let summary = "grouped expert FFN over per-expert row groups";
  let description = [{
    Applies expert e's FFN `f_e(x) = act(x W1[e] + b1[e]) W2[e] + b2[e]` to
    rows `offsets[e] .. offsets[e+1]-1` of `rows: [N, D]` (a grouped GEMM
    pair); rows from `offsets[E]` on are zero in the result `[N, D]`.
    Weights and biases as for `moe.layer` (gated activations take
    `W1: [E, D, 2H]`).

    ```mlir
    %out = moe.expert_ffn %rows, %offsets experts(%w1, %w2)
             {activation = #moe.activation<gelu>}
             : (tensor<128x128xf32>, tensor<9xi32>, tensor<8x128x512xf32>,
                tensor<8x512x128xf32>) -> tensor<128x128xf32>
    ```
  }];
  let arguments = (ins MoE_Data2D<"[N, D]">:$rows, MoE_OffsetsTensor:$offsets,
                       MoE_LayerW1Tensor:$w1, MoE_LayerW2Tensor:$w2,
                       Optional<MoE_QuantScaleTensor>:$w1_scale,
                       Optional<MoE_QuantScaleTensor>:$w2_scale,
                       Optional<MoE_ZeroPointTensor>:$w1_zero_point,
                       Optional<MoE_ZeroPointTensor>:$w2_zero_point,
                       Optional<MoE_B1Tensor>:$b1, Optional<MoE_B2Tensor>:$b2,
                       MoE_ActivationAttr:$activation,
                       OptionalAttr<MoE_QuantAttr>:$quant);
  let results = (outs MoE_Data2D<"[N, D]">:$output);
  let assemblyFormat = [{
    $rows `,` $offsets `experts` `(` $w1 `,` $w2 `)`
    (`expert_scales` `(` $w1_scale^ `,` $w2_scale `)`)?
    (`expert_zero_points` `(` $w1_zero_point^ `,` $w2_zero_point `)`)?
    (`expert_biases` `(` $b1^ `,` $b2 `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = MoE_QuantizedExpertsDecls;
}

def MoE_SharedExpertOp : MoE_Op<"shared_expert", [Pure, DeclareOpInterfaceMethods<MoE_AdjointOpInterface, ["buildAdjoint"]>,
    InferTypeOpAdaptorWithIsCompatible,
    DeclareOpInterfaceMethods<ReifyRankedShapedTypeOpInterface, ["reifyResultShapes"]>]> {
  let summary = "the shared expert of a layer, on every token";
  let description = [{
    `out[t] = gate_t * (act(x_t s1) s2)` for every token of `input: [T, D]`,
    with `s1: [D, Hs]` (`[D, 2Hs]` for gated activations: `h = act(u[:Hs]) *
    u[Hs:]`), `s2: [Hs, D]` and `gate_t = sigmoid(x_t sg)` with the optional
    `gate(%sg)` (`sg: [D, 1]`), else 1. The result is f32 whatever the
    element type T of the inputs (GEMMs accumulate in f32, `h` is rounded to
    T as in the routed experts), so that `moe.combine` / `moe.fused_experts`
    add it before the one rounding of `y`. Produced by `--moe-decompose`
    from a `moe.layer` with `shared(...)`.

    ```mlir
    %s = moe.shared_expert %x shared(%s1, %s2) gate(%sg)
           {activation = #moe.activation<swiglu>}
           : (tensor<48x128xf32>, tensor<128x384xf32>, tensor<192x128xf32>,
              tensor<128x1xf32>) -> tensor<48x128xf32>
    ```
  }];
  let arguments = (ins MoE_Data2D<"[T, D]">:$input,
                       MoE_Data2D<"[D, Hs] (gated: [D, 2Hs])">:$shared_w1,
                       MoE_Data2D<"[Hs, D]">:$shared_w2,
                       Optional<MoE_Data2D<"[D, 1]">>:$shared_gate,
                       MoE_ActivationAttr:$activation);
  let results = (outs MoE_F32TensorOfRank<2, "[T, D]">:$output);
  let assemblyFormat = [{
    $input `shared` `(` $shared_w1 `,` $shared_w2 `)` (`gate` `(` $shared_gate^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MoE_CombineOp : MoE_Op<"combine", [Pure, DeclareOpInterfaceMethods<MoE_AdjointOpInterface, ["buildAdjoint"]>,
    DeclareOpInterfaceMethods<ReifyRankedShapedTypeOpInterface, ["reifyResultShapes"]>]> {
  let summary = "weighted scatter of expert outputs back to tokens";
  let description = [{
    `y[t] = sum_{i : positions[t, i] >= 0} weights[t, i] * expert_out[positions[t, i]]`
    with `expert_out: [N, D]`, `weights: [T, K]`, `positions: [T, K]` (i32,
    from `moe.dispatch`); result `[T, D]`. With `shared_output(%s)` (`[T, D]`
    f32, from `moe.shared_expert`) `s[t]` is added to the sum before it is
    rounded to the result's element type.

    ```mlir
    %y = moe.combine %out, %w, %pos
           : (tensor<128x128xf32>, tensor<64x2xf32>, tensor<64x2xi32>) -> tensor<64x128xf32>
    ```
  }];
  let arguments = (ins MoE_Data2D<"[N, D]">:$expert_output,
                       MoE_Data2D<"[T, K]">:$weights,
                       MoE_I32TensorOfRank<2, "[T, K]">:$positions,
                       Optional<MoE_F32TensorOfRank<2, "[T, D]">>:$shared_output);
  let results = (outs MoE_Data2D<"[T, D]">:$output);
  let assemblyFormat = [{
    $expert_output `,` $weights `,` $positions (`shared_output` `(` $shared_output^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MoE_SoftDispatchOp : MoE_Op<"soft_dispatch", [Pure, DeclareOpInterfaceMethods<MoE_AdjointOpInterface, ["buildAdjoint"]>, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "Soft MoE slots: softmax(over tokens)-weighted token averages";
  let description = [{
    The dispatch half of `moe.soft_layer` over `input x: [G, M, D]` and
    `slots Phi: [D, E, S]` (optional `scale`, unit attribute `normalize`):
    logits `L[g,m,e,s]` as in `moe.soft_layer`, `Dw = softmax_m(L)`,
    `Cw = softmax_(e,s)(L)`.

    Results:
    * `rows: [E*G*S, D]`: slot `X~[g,e,s,:] = sum_m Dw[g,m,e,s] x[g,m,:]` at
      row `(e*G + g)*S + s` (expert-major, so each expert's slots are one
      contiguous group for `moe.expert_ffn`);
    * `offsets: [E+1]` (i32): `offsets[e] = e*G*S`;
    * `combine_weights: [G, M, E, S]`: `Cw`.
  }];
  let arguments = (ins MoE_Data3D<"[G, M, D]">:$input, MoE_Data3D<"[D, E, S]">:$slots,
                       Optional<MoE_ScaleTensor>:$scale, UnitAttr:$normalize);
  let results = (outs MoE_Data2D<"[E*G*S, D]">:$rows, MoE_OffsetsTensor:$offsets,
                      MoE_FloatTensorOfRank<4, "[G, M, E, S]">:$combine_weights);
  let assemblyFormat = [{
    $input `slots` `(` $slots `)` (`scale` `(` $scale^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MoE_SoftCombineOp : MoE_Op<"soft_combine", [Pure, DeclareOpInterfaceMethods<MoE_AdjointOpInterface, ["buildAdjoint"]>, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "Soft MoE outputs: softmax(over slots)-weighted slot averages";
  let description = [{
    `y[g,m,:] = sum_{e,s} combine_weights[g,m,e,s] * expert_output[(e*G + g)*S + s, :]`
    with `expert_output: [E*G*S, D]` and `combine_weights: [G, M, E, S]`;
    result `[G, M, D]`.
  }];
  let arguments = (ins MoE_Data2D<"[E*G*S, D]">:$expert_output,
                       MoE_FloatTensorOfRank<4, "[G, M, E, S]">:$combine_weights);
  let results = (outs MoE_Data3D<"[G, M, D]">:$output);
  let assemblyFormat = [{
    $expert_output `,` $combine_weights attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused ops (--moe-fuse)
//===----------------------------------------------------------------------===//

def MoE_FusedExpertsOp : MoE_Op<"fused_experts", [Pure, AttrSizedOperandSegments,
    InferTypeOpAdaptorWithIsCompatible, DeclareOpInterfaceMethods<ReifyRankedShapedTypeOpInterface, ["reifyResultShapes"]>]> {
  let summary = "fused dispatch -> expert FFN -> combine";
  let description = [{
    The fusion of `moe.dispatch`, `moe.expert_ffn` and `moe.combine`:

        y[t] = sum_{i : (t, i) kept} weights[t, i] * f_{indices[t, i]}(input[t])

    with `input: [T, D]`, `indices: [T, K]` (i32), `weights: [T, K]`, the
    expert weights and optional biases of `moe.layer`, `num_experts = E` and
    the optional GShard `capacity_factor` of `moe.dispatch` (an assignment is
    kept unless its expert already holds `ceil(cf * T * K / E)` earlier
    assignments in token order). Results are exactly those of the unfused
    chain.

    With `shared_output(%s)` (`[T, D]` f32, from `moe.shared_expert`) `s[t]`
    is added to every token's sum before the one rounding to the element
    type.

    Code generation treats it as one kernel family: rows are gathered
    through the routing plan inside GEMM1 (no permuted copy of the tokens),
    the activation is applied in GEMM1's epilogue, the routed weight in
    GEMM2's, and contributions are reduced per token in a fixed order
    (deterministic). The CPU lowering tiles each expert's rows so that the
    `[T*K, H]` intermediate is never materialized for all tokens at once.

    ```mlir
    %y = moe.fused_experts %x, %i, %w experts(%w1, %w2)
           {num_experts = 8 : i64, activation = #moe.activation<swiglu>}
           : (tensor<32x256xf32>, tensor<32x2xi32>, tensor<32x2xf32>,
              tensor<8x256x1024xf32>, tensor<8x512x256xf32>) -> tensor<32x256xf32>
    ```
  }];
  let arguments = (ins MoE_Data2D<"[T, D]">:$input,
                       MoE_I32TensorOfRank<2, "[T, K]">:$indices,
                       MoE_Data2D<"[T, K]">:$weights,
                       MoE_LayerW1Tensor:$w1, MoE_LayerW2Tensor:$w2,
                       Optional<MoE_QuantScaleTensor>:$w1_scale,
                       Optional<MoE_QuantScaleTensor>:$w2_scale,
                       Optional<MoE_ZeroPointTensor>:$w1_zero_point,
                       Optional<MoE_ZeroPointTensor>:$w2_zero_point,
                       Optional<MoE_B1Tensor>:$b1, Optional<MoE_B2Tensor>:$b2,
                       Optional<MoE_F32TensorOfRank<2, "[T, D]">>:$shared_output,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_experts,
                       MoE_ActivationAttr:$activation,
                       OptionalAttr<F64Attr>:$capacity_factor,
                       OptionalAttr<MoE_QuantAttr>:$quant);
  let results = (outs MoE_Data2D<"[T, D]">:$output);
  let assemblyFormat = [{
    $input `,` $indices `,` $weights `experts` `(` $w1 `,` $w2 `)`
    (`expert_scales` `(` $w1_scale^ `,` $w2_scale `)`)?
    (`expert_zero_points` `(` $w1_zero_point^ `,` $w2_zero_point `)`)?
    (`expert_biases` `(` $b1^ `,` $b2 `)`)?
    (`shared_output` `(` $shared_output^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
  let extraClassDeclaration = MoE_QuantizedExpertsDecls;
}

def MoE_FusedSoftExpertsOp : MoE_Op<"fused_soft_experts", [Pure, AttrSizedOperandSegments,
    InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "fused soft_dispatch -> expert FFN -> soft_combine";
  let description = [{
    The fusion of `moe.soft_dispatch`, `moe.expert_ffn` and
    `moe.soft_combine`; its value is that of `moe.soft_layer` with the same
    operands and attributes. Code generation computes the slot averages, the
    expert FFNs of the slots and the combine in one kernel family, without
    materializing the `[E*G*S, D]` slot rows in memory between them on the
    GPU path.
  }];
  let arguments = (ins MoE_Data3D<"[G, M, D]">:$input, MoE_Data3D<"[D, E, S]">:$slots,
                       Optional<MoE_ScaleTensor>:$scale,
                       MoE_W1Tensor:$w1, MoE_W2Tensor:$w2,
                       Optional<MoE_B1Tensor>:$b1, Optional<MoE_B2Tensor>:$b2,
                       MoE_ActivationAttr:$activation, UnitAttr:$normalize);
  let results = (outs MoE_Data3D<"[G, M, D]">:$output);
  let assemblyFormat = [{
    $input `slots` `(` $slots `)` (`scale` `(` $scale^ `)`)?
    `experts` `(` $w1 `,` $w2 `)`
    (`expert_biases` `(` $b1^ `,` $b2 `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

include "dialect/MoEGradOps.td"

#endif // MOE_OPS_TD
