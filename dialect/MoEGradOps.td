//===- MoEGradOps.td - the adjoints of the chain ops -------*- tablegen -*-===//
//
// The backward ops --moe-generate-vjp builds (docs/spec.md §9): one per
// forward op of the decomposed chains (moe.route, moe.gate, moe.dispatch,
// moe.expert_ffn, moe.shared_expert, moe.combine; moe.soft_dispatch,
// moe.soft_combine). Each takes the values its
// forward op read and produced (the routing, the plan) plus the cotangents
// of its results, and returns f32 cotangents of its floating-point operands:
// gradients accumulate in f32 and the pass rounds them once. Included by
// MoEOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_GRAD_OPS_TD
#define MOE_GRAD_OPS_TD

def MoE_RouteGradOp : MoE_Op<"route_grad", [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "the adjoint of moe.route";
  let description = [{
    For `o = x Wr + br` and the cotangent `do: [T, E]` (f32):
    `dx = do Wr^T` (`[T, D]`), `dWr = x^T do` (`[D, E]`, a sum over tokens in
    increasing t) and `dbr = sum_t do[t]` (`[E]`). All results are f32.

    ```mlir
    %dx, %dwr, %dbr = moe.route_grad %x, %wr, %do
        : (tensor<64x128xf32>, tensor<128x8xf32>, tensor<64x8xf32>)
        -> (tensor<64x128xf32>, tensor<128x8xf32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins MoE_Data2D<"[T, D]">:$input, MoE_Data2D<"[D, E]">:$router_weight,
                       MoE_F32TensorOfRank<2, "[T, E]">:$logits_grad);
  let results = (outs MoE_F32TensorOfRank<2, "[T, D]">:$input_grad,
                      MoE_F32TensorOfRank<2, "[D, E]">:$router_weight_grad,
                      MoE_F32TensorOfRank<1, "[E]">:$router_bias_grad);
  let assemblyFormat = [{
    $input `,` $router_weight `,` $logits_grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MoE_GateGradOp : MoE_Op<"gate_grad", [Pure, AttrSizedOperandSegments,
    InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "the adjoint of moe.gate, its routing held fixed";
  let description = [{
    The cotangent of the router logits `do: [T, E]` (f32) of a `moe.gate`
    with the same `routing` and mode, given its `logits`, the experts it
    chose (`indices: [T, K]`, the forward gate's result, so the backward
    uses exactly the forward's routing), the cotangent of its weights
    (`weights_grad: [T, K]`, f32) and, in training mode, of its auxiliary
    loss (`aux_loss_grad`). The exact derivative of docs/spec.md §3.1 with
    the discrete choices held fixed (§9): through the softmax or sigmoid
    scores of the chosen experts, the normalization and the scale for
    `#moe.top_k` (the selection bias and the groups only choose); for
    MOESART through the adjusted logits, o directly and through
    g = softmax(o) (the log g term is not detached), small_random's
    unadjusted j recomputed from `seed` exactly as the forward drew it, and
    the trimmed lasso's `-lambda/T` on the K largest g of each token.
    `seed` is required for `#moe.moesart` in training mode with
    `adjust = small_random`, and `aux_loss_grad` only in training mode.
    Entries of `indices` that are -1 (a production router with fewer
    choosable experts than K) carry no gradient.

    ```mlir
    %do = moe.gate_grad %o, %i, %dw {routing = #moe.top_k<k = 2>}
        : (tensor<64x8xf32>, tensor<64x2xi32>, tensor<64x2xf32>) -> tensor<64x8xf32>
    ```
  }];
  let arguments = (ins MoE_Data2D<"[T, E]">:$logits,
                       MoE_I32TensorOfRank<2, "[T, K]">:$indices,
                       MoE_F32TensorOfRank<2, "[T, K]">:$weights_grad,
                       Optional<MoE_SeedTensor>:$seed,
                       Optional<MoE_AuxLossTensor>:$aux_loss_grad,
                       MoE_RoutingAttrInterface:$routing, UnitAttr:$training);
  let results = (outs MoE_F32TensorOfRank<2, "[T, E]">:$logits_grad);
  let assemblyFormat = [{
    $logits `,` $indices `,` $weights_grad (`seed` `(` $seed^ `)`)?
    (`aux_loss_grad` `(` $aux_loss_grad^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MoE_DispatchGradOp : MoE_Op<"dispatch_grad", [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "the adjoint of moe.dispatch: permuted rows summed back to tokens";
  let description = [{
    `dx[t] = sum_{i : positions[t, i] >= 0} rows_grad[positions[t, i]]` in
    increasing i (a fixed order: deterministic), for the cotangent of the
    permuted rows `rows_grad: [N, D]` (f32) and the forward dispatch's
    `positions: [T, K]`; a dropped assignment (-1) contributes nothing.
    Result `[T, D]`, f32.

    ```mlir
    %dx = moe.dispatch_grad %drows, %pos
        : (tensor<128x64xf32>, tensor<64x2xi32>) -> tensor<64x64xf32>
    ```
  }];
  let arguments = (ins MoE_F32TensorOfRank<2, "[N, D]">:$rows_grad,
                       MoE_I32TensorOfRank<2, "[T, K]">:$positions);
  let results = (outs MoE_F32TensorOfRank<2, "[T, D]">:$input_grad);
  let assemblyFormat = [{
    $rows_grad `,` $positions attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MoE_ExpertFFNGradOp : MoE_Op<"expert_ffn_grad", [Pure, AttrSizedOperandSegments,
    InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "the adjoint of moe.expert_ffn: grouped GEMMs over each expert's rows";
  let description = [{
    For `out[r] = act(rows[r] W1[e] + b1[e]) W2[e] + b2[e]` over expert e's
    rows `offsets[e] .. offsets[e+1]-1` and the cotangent `output_grad:
    [N, D]` (f32), with `z = rows W1 + b1` (recomputed) and `h = act(z)`
    rounded to the element type as in the forward:

    * `dh = dout W2[e]^T`, `dz = dh * act'(z)` (gated: `dz_gate = dh * up *
      act'(gate)`, `dz_up = dh * act(gate)`);
    * `rows_grad = dz W1[e]^T` (`[N, D]`; zero from `offsets[E]` on);
    * `w1_grad[e] = rows[rows of e]^T dz`, `w2_grad[e] = h^T dout` (the
      variable-K weight-gradient GEMMs, K = the expert's row count, summed in
      increasing row order), `b1_grad[e] = sum dz`, `b2_grad[e] = sum dout`
      over the expert's rows (only with `expert_biases`: the results
      `bias_grads`, both or none).

    An expert without rows gets exact zeros. All results are f32.

    ```mlir
    %drows, %dw1, %dw2 = moe.expert_ffn_grad %rows, %offsets, %dout experts(%w1, %w2)
        {activation = #moe.activation<gelu>}
        : (tensor<128x64xf32>, tensor<9xi32>, tensor<128x64xf32>, tensor<8x64x256xf32>,
           tensor<8x256x64xf32>)
        -> (tensor<128x64xf32>, tensor<8x64x256xf32>, tensor<8x256x64xf32>)
    ```
  }];
  let arguments = (ins MoE_Data2D<"[N, D]">:$rows, MoE_OffsetsTensor:$offsets,
                       MoE_F32TensorOfRank<2, "[N, D]">:$output_grad,
                       MoE_W1Tensor:$w1, MoE_W2Tensor:$w2,
                       Optional<MoE_B1Tensor>:$b1, Optional<MoE_B2Tensor>:$b2,
                       MoE_ActivationAttr:$activation);
  let results = (outs MoE_F32TensorOfRank<2, "[N, D]">:$rows_grad,
                      MoE_F32TensorOfRank<3, "[E, D, H] (gated: [E, D, 2H])">:$w1_grad,
                      MoE_F32TensorOfRank<3, "[E, H, D]">:$w2_grad,
                      Variadic<MoE_F32TensorOfRank<2, "[E, H] (gated: [E, 2H]), [E, D]">>:$bias_grads);
  let extraClassDeclaration = [{
    /// The gradients of b1 and b2 (null without expert_biases).
    ::mlir::Value getB1Grad() { return getBiasGrads().empty() ? nullptr : getBiasGrads()[0]; }
    ::mlir::Value getB2Grad() { return getBiasGrads().empty() ? nullptr : getBiasGrads()[1]; }
  }];
  let assemblyFormat = [{
    $rows `,` $offsets `,` $output_grad `experts` `(` $w1 `,` $w2 `)`
    (`expert_biases` `(` $b1^ `,` $b2 `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MoE_SharedExpertGradOp : MoE_Op<"shared_expert_grad", [Pure,
    InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "the adjoint of moe.shared_expert";
  let description = [{
    For `out[t] = gate_t * (act(x_t s1) s2)` (`gate_t = sigmoid(x_t sg)`
    with `gate(%sg)`, else 1) and the cotangent `output_grad: [T, D]` (f32):
    `input_grad` (`[T, D]`, through both GEMMs and the gate),
    `shared_w1_grad` (`[D, Hs]` or `[D, 2Hs]`), `shared_w2_grad` (`[Hs, D]`)
    and, with the gate, `shared_gate_grad` (`[D, 1]`). All results are f32.
  }];
  let arguments = (ins MoE_Data2D<"[T, D]">:$input,
                       MoE_F32TensorOfRank<2, "[T, D]">:$output_grad,
                       MoE_Data2D<"[D, Hs] (gated: [D, 2Hs])">:$shared_w1,
                       MoE_Data2D<"[Hs, D]">:$shared_w2,
                       Optional<MoE_Data2D<"[D, 1]">>:$shared_gate,
                       MoE_ActivationAttr:$activation);
  let results = (outs MoE_F32TensorOfRank<2, "[T, D]">:$input_grad,
                      MoE_F32TensorOfRank<2, "[D, Hs] (gated: [D, 2Hs])">:$shared_w1_grad,
                      MoE_F32TensorOfRank<2, "[Hs, D]">:$shared_w2_grad,
                      Optional<MoE_F32TensorOfRank<2, "[D, 1]">>:$shared_gate_grad);
  let assemblyFormat = [{
    $input `,` $output_grad `shared` `(` $shared_w1 `,` $shared_w2 `)`
    (`gate` `(` $shared_gate^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MoE_CombineGradOp : MoE_Op<"combine_grad", [Pure, InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "the adjoint of moe.combine";
  let description = [{
    For `y[t] = sum_i weights[t, i] * expert_output[positions[t, i]]` and the
    cotangent `output_grad: [T, D]` (f32):
    `expert_output_grad[positions[t, i]] = weights[t, i] * output_grad[t]`
    (`[N, D]`; rows no kept assignment names are zero) and
    `weights_grad[t, i] = <output_grad[t], expert_output[positions[t, i]]>`
    (`[T, K]`; 0 for a dropped assignment). Both f32. (The cotangent of the
    shared output is `output_grad` itself.)

    ```mlir
    %dout, %dw = moe.combine_grad %dy, %out, %w, %pos
        : (tensor<64x64xf32>, tensor<128x64xf32>, tensor<64x2xf32>, tensor<64x2xi32>)
        -> (tensor<128x64xf32>, tensor<64x2xf32>)
    ```
  }];
  let arguments = (ins MoE_F32TensorOfRank<2, "[T, D]">:$output_grad,
                       MoE_Data2D<"[N, D]">:$expert_output,
                       MoE_Data2D<"[T, K]">:$weights,
                       MoE_I32TensorOfRank<2, "[T, K]">:$positions);
  let results = (outs MoE_F32TensorOfRank<2, "[N, D]">:$expert_output_grad,
                      MoE_F32TensorOfRank<2, "[T, K]">:$weights_grad);
  let assemblyFormat = [{
    $output_grad `,` $expert_output `,` $weights `,` $positions
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MoE_SoftDispatchGradOp : MoE_Op<"soft_dispatch_grad", [Pure, AttrSizedOperandSegments,
    InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "the adjoint of moe.soft_dispatch";
  let description = [{
    For `moe.soft_dispatch` over `input x: [G, M, D]`, `slots Phi: [D, E, S]`
    (optional `scale`, unit attribute `normalize`) and the cotangents of its
    slot rows `rows_grad: [E*G*S, D]` and of its combine weights
    `combine_weights_grad: [G, M, E, S]` (f32; either may be absent, which
    means zero): the logits `L = scale * L0`, `L0 = xn . Phin`, and both
    softmaxes are recomputed exactly as the forward computes them, then

    * `dDw[g,m,e,s] = <rows_grad[(e*G + g)*S + s], x[g,m]>`;
    * `dL = Dw * (dDw - sum_m Dw dDw) + Cw * (dCw - sum_(e,s) Cw dCw)`;
    * `input_grad[g,m] = sum_(e,s) Dw[g,m,e,s] rows_grad[(e*G + g)*S + s]
      + dxn[g,m]` with `dxn = scale * dL Phin^T` taken through the
      normalization (`r (dxn - xn <dxn, xn>)`, `r = rsqrt(sum_d x^2 + 1e-6)`)
      when `normalize`;
    * `slots_grad[:,e,s] = scale * sum_(g,m) xn[g,m] dL[g,m,e,s]`, through
      Phi's normalization likewise;
    * `scale_grad = sum dL * L0` (a result only with `scale`).

    Results f32: `[G, M, D]`, `[D, E, S]` and, with `scale`, `tensor<f32>`.

    ```mlir
    %dx, %dphi, %dscale = moe.soft_dispatch_grad %x slots(%phi) scale(%scale)
        rows_grad(%drows) combine_weights_grad(%dcw) {normalize}
        : (tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<f32>, tensor<16x16xf32>,
           tensor<2x8x4x2xf32>)
        -> (tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<f32>)
    ```
  }];
  let arguments = (ins MoE_Data3D<"[G, M, D]">:$input, MoE_Data3D<"[D, E, S]">:$slots,
                       Optional<MoE_ScaleTensor>:$scale,
                       Optional<MoE_F32TensorOfRank<2, "[E*G*S, D]">>:$rows_grad,
                       Optional<MoE_F32TensorOfRank<4, "[G, M, E, S]">>:$combine_weights_grad,
                       UnitAttr:$normalize);
  let results = (outs MoE_F32TensorOfRank<3, "[G, M, D]">:$input_grad,
                      MoE_F32TensorOfRank<3, "[D, E, S]">:$slots_grad,
                      Optional<MoE_F32TensorOfRank<0, "">>:$scale_grad);
  let assemblyFormat = [{
    $input `slots` `(` $slots `)` (`scale` `(` $scale^ `)`)?
    (`rows_grad` `(` $rows_grad^ `)`)?
    (`combine_weights_grad` `(` $combine_weights_grad^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def MoE_SoftCombineGradOp : MoE_Op<"soft_combine_grad", [Pure,
    InferTypeOpAdaptorWithIsCompatible]> {
  let summary = "the adjoint of moe.soft_combine";
  let description = [{
    For `y[g,m] = sum_(e,s) Cw[g,m,e,s] expert_output[(e*G + g)*S + s]` and
    the cotangent `output_grad: [G, M, D]` (f32):
    `expert_output_grad[(e*G + g)*S + s] = sum_m Cw[g,m,e,s] output_grad[g,m]`
    (`[E*G*S, D]`, summed in increasing m) and
    `combine_weights_grad[g,m,e,s] = <output_grad[g,m], expert_output[(e*G + g)*S + s]>`
    (`[G, M, E, S]`). Both f32.

    ```mlir
    %dout, %dcw = moe.soft_combine_grad %dy, %out, %cw
        : (tensor<2x8x16xf32>, tensor<16x16xf32>, tensor<2x8x4x2xf32>)
        -> (tensor<16x16xf32>, tensor<2x8x4x2xf32>)
    ```
  }];
  let arguments = (ins MoE_F32TensorOfRank<3, "[G, M, D]">:$output_grad,
                       MoE_Data2D<"[E*G*S, D]">:$expert_output,
                       MoE_FloatTensorOfRank<4, "[G, M, E, S]">:$combine_weights);
  let results = (outs MoE_F32TensorOfRank<2, "[E*G*S, D]">:$expert_output_grad,
                      MoE_F32TensorOfRank<4, "[G, M, E, S]">:$combine_weights_grad);
  let assemblyFormat = [{
    $output_grad `,` $expert_output `,` $combine_weights
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // MOE_GRAD_OPS_TD
