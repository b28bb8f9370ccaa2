//===- Passes.td - moe-to-moe transformations --------------*- tablegen -*-===//
//
// The moe-to-moe passes of DESIGN.md section 4.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_TD
#define MOE_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoEDecompose : Pass<"moe-decompose"> {
  let summary = "Decompose MoE layers into the route/gate/dispatch/expert/combine chain";
  let description = [{
    Rewrites every `moe.layer` into

        %o = moe.route %x router(%wr[, %br])
        %w, %i[, %loss] = moe.gate %o [seed(%seed)] {routing, [training]}
        %rows, %offsets, %src, %pos = moe.dispatch %x, %i {num_experts = E[, capacity_factor]}
        %out = moe.expert_ffn %rows, %offsets experts(%w1, %w2) [expert_biases(%b1, %b2)]
        %y = moe.combine %out, %w, %pos

    and every `moe.soft_layer` into `moe.soft_dispatch`, `moe.expert_ffn`,
    `moe.soft_combine`. Results are equal by construction: each chain op is
    defined as the corresponding part of the layer's semantics. A layer whose
    number of experts E is not static is left unchanged with a warning (the
    dispatch plan needs E).
  }];
  let dependentDialects = ["::mlir::moe::MoEDialect"];
}

def MoEDenseToMoESART : Pass<"moe-dense-to-moesart"> {
  let summary = "Turn dense softmax-gated layers into MOESART-sparse layers";
  let description = [{
    Every `moe.layer` with `routing = #moe.dense` gets
    `routing = #moe.moesart<k = K, adjust = A, trimmed_lasso = L>`: at
    inference each token runs the top-k experts with MOESART's adjusted
    weights; a training-mode layer (seed, aux loss) stays in training mode
    with the same seed and now samples k experts and returns the trimmed-lasso
    loss. Everything else (weights, biases, activation, capacity factor) is
    unchanged. A layer that cannot take the routing (k > E, or
    `adjust = small_random` with k = 1 in training mode) is left unchanged
    with a warning that says why.

    Example: `--moe-dense-to-moesart="k=2 adjust=small_random trimmed-lasso=0.001"`
  }];
  let options = [
    Option<"k", "k", "int64_t", "2", "experts per token (>= 1)">,
    Option<"adjust", "adjust", "std::string", "\"small_random\"",
           "training-mode weight adjustment: small_random, zero or large">,
    Option<"trimmedLasso", "trimmed-lasso", "double", "1.0e-3",
           "trimmed-lasso coefficient lambda (>= 0)">
  ];
  let dependentDialects = ["::mlir::moe::MoEDialect"];
}

def MoEDenseToSoft : Pass<"moe-dense-to-soft"> {
  let summary = "Turn dense softmax-gated layers into Soft MoE layers";
  let description = [{
    Every `moe.layer` with `routing = #moe.dense` becomes a `moe.soft_layer`
    with the same experts: `Phi[:, e, s] = Wr[:, e]` for every slot s
    (a `linalg.broadcast` of the router weight, no new parameters), scale 1,
    the router bias dropped, and the `[T, D]` input regrouped to
    `[T/M, M, D]` (and the output back), so the function's types do not
    change. `group-size` M defaults to T (one group); it must divide T. A
    training-mode layer's aux loss becomes the constant 0 (Soft MoE has no
    routing regularizer) and its seed is no longer used.

    Layers marked `moe.causal` are left unchanged with a warning: Soft MoE
    mixes tokens across positions inside a group, which a causal (decoder)
    layer must not do.

    Example: `--moe-dense-to-soft="slots-per-expert=2 group-size=32 normalize=true"`
  }];
  let options = [
    Option<"slotsPerExpert", "slots-per-expert", "int64_t", "1",
           "slots per expert S (>= 1)">,
    Option<"groupSize", "group-size", "int64_t", "0",
           "tokens per group M (0: all T tokens form one group)">,
    Option<"normalize", "normalize", "bool", "true",
           "L2-normalize tokens and slot parameters before the logits">
  ];
  let dependentDialects = ["::mlir::moe::MoEDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
}

def MoEFuse : Pass<"moe-fuse"> {
  let summary = "Fuse dispatch -> expert_ffn -> combine chains into one op";
  let description = [{
    A single-use chain `moe.dispatch -> moe.expert_ffn -> moe.combine` (the
    FFN reads the dispatch's rows and offsets, the combine reads the FFN's
    output and the dispatch's positions, and nothing else reads them) becomes
    one `moe.fused_experts`; a `moe.soft_dispatch -> moe.expert_ffn ->
    moe.soft_combine` chain becomes `moe.fused_soft_experts`. Chains that
    cannot fuse stay as they are, with a remark that says why (an
    intermediate used elsewhere, offsets or positions from another op).
  }];
  let dependentDialects = ["::mlir::moe::MoEDialect"];
}

def MoEPrintCost : Pass<"moe-print-cost"> {
  let summary = "Print FLOPs, bytes and active parameters of every MoE layer";
  let description = [{
    For every `moe.layer` and `moe.soft_layer` (and their decomposed or fused
    forms), prints a table on stdout with T, D, H, E, k or slots, the FLOPs
    of the router, the experts and dispatch/combine, the expected bytes of
    expert weights touched (top-k under uniform routing touches
    `E (1 - (1 - k/E)^T)` experts), and the active parameters per token. The
    IR is not changed.
  }];
}

#endif // MOE_PASSES_TD
