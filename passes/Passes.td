//===- Passes.td - moe-to-moe transformations --------------*- tablegen -*-===//
//
// The moe-to-moe passes of docs/spec.md §4.
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
    Option<"adjust", "adjust", "::mlir::moe::MoesartAdjust",
           "::mlir::moe::MoesartAdjust::small_random",
           "training-mode weight adjustment (docs/spec.md §3.1.2)",
           [{::llvm::cl::values(
             clEnumValN(::mlir::moe::MoesartAdjust::small_random, "small_random",
                        "one random member keeps its logit, the others are adjusted (default)"),
             clEnumValN(::mlir::moe::MoesartAdjust::zero, "zero",
                        "every member adjusted by log(K (g + 1e-10))"),
             clEnumValN(::mlir::moe::MoesartAdjust::large, "large",
                        "weights g_i / sum of g over the chosen experts"))}]>,
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

def MoEGenerateVJP : Pass<"moe-generate-vjp", "::mlir::ModuleOp"> {
  let summary = "Add f_vjp, the reverse-mode gradient, for every public function f";
  let description = [{
    For each public `func.func @f` (or those named by `entries`) adds a
    public `func.func @f_vjp` (docs/spec.md §9):

    * arguments: f's arguments in order, their attributes kept (so
      `moe.param` still binds), then one cotangent per result of f, of the
      result's type (for a training layer's aux loss a `tensor<f32>`);
    * results: f's results, then the gradient of every floating-point
      tensor argument of f, in argument order, of the argument's type (none
      for the `seed` or other integers).

    `@f` stays as it is. The body of `@f_vjp` is f's forward, with its
    layers decomposed (`--moe-decompose`) and its fused chains unfused, so
    that the forward runs once and the backward reads its routing and plan,
    followed by the adjoint of every op on a path from a floating-point
    argument to a result, in reverse order. Each op states its adjoint
    through `AdjointOpInterface`: the chain ops as the backward ops
    `moe.route_grad`, `moe.gate_grad`, `moe.dispatch_grad`,
    `moe.expert_ffn_grad`, `moe.shared_expert_grad` and `moe.combine_grad`
    (the soft chain: `moe.soft_dispatch_grad`, `moe.expert_ffn_grad` and
    `moe.soft_combine_grad`), upstream ops (elementwise `arith`/`math`, `linalg.matmul`, tensor
    reshapes) through external models. Cotangents are f32 and sum in f32;
    each gradient is rounded once to its argument's element type. The
    derivative holds the forward's discrete choices fixed (the chosen
    experts, MOESART's sampled set and j, capacity drops, the trimmed
    lasso's K largest g); `selection_bias` gets zeros.

    A function holding an op on such a path that has no adjoint, or control
    flow there, is one error naming the op, and the module is left
    unchanged.
  }];
  let options = [
    ListOption<"entries", "entries", "std::string",
               "The functions to differentiate (default: every public function "
               "with a body)">
  ];
  let dependentDialects = [
    "::mlir::moe::MoEDialect", "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect"
  ];
}

def MoEPrintCost : Pass<"moe-print-cost"> {
  let summary = "Print FLOPs, bytes and active parameters of every MoE layer";
  let description = [{
    For every `moe.layer` and `moe.soft_layer` (and their decomposed or fused
    forms), prints a table on stdout with T, D, H, E, k or slots, the FLOPs
    of the router, the experts and dispatch/combine, the expected bytes of
    expert weights touched (top-k under uniform routing touches
    `E (1 - (1 - k/E)^T)` experts), and the active parameters per token.
    With `backward=true`, a second table gives the same layers' backward
    (the `@f_vjp` of `--moe-generate-vjp`): its router, expert and
    dispatch/combine FLOPs, the bytes of expert weights it reads and of the
    weight gradients it writes, and the bytes `@f_vjp` keeps between its
    forward and its backward (the cost model is in passes/PrintCost.cpp).
    The IR is not changed.
  }];
  let options = [
    Option<"backward", "backward", "bool", /*default=*/"false",
           "Also print the backward's cost (FLOPs, weight and gradient bytes, saved bytes)">
  ];
}

def MoEShardExperts : Pass<"moe-shard-experts", "::mlir::ModuleOp"> {
  let summary = "Make every moe.layer SPMD over a 1-D grid of ranks (expert parallelism)";
  let description = [{
    docs/spec.md §8. Adds `shard.grid @moe_ranks(shape = N)` to the
    module and rewrites every function that holds `moe.layer` ops into the
    program each of the N ranks runs:

    * expert weights and biases (function arguments) are split on the expert
      dimension: their type becomes `[E/N, ...]` and they carry
      `moe.split = 0` (rank q holds experts `[q*E/N, (q+1)*E/N)`);
    * token arguments and the layer outputs the function returns are split
      on rows (any T, uneven splits allowed): dimension 0 becomes dynamic
      and they carry `moe.split = 0`; router weights, shared experts and
      seeds stay replicated;
    * every layer becomes: `moe.route` and `moe.gate` on the rank's rows, a
      dropless local `moe.dispatch`, the per-expert row counts of all ranks
      (`shard.all_reduce` of a one-hot `[N, E]` tensor; with a capacity
      factor, the rows kept are decided from these counts in global token
      order with the global T), `moe.exchange_dispatch` (ragged all-to-all
      of token rows to the rank owning each expert), `moe.expert_ffn` on the
      local experts, `moe.exchange_combine` (the reverse exchange) and
      `moe.combine` (plus the shared expert) where the token lives, so each
      token's sum has the order of the 1-rank program. The routing weights
      stay with the token (the combine is done at home). A training-mode
      layer's aux loss is all-reduced (`shard.all_reduce`) and weighted by
      rows, so every rank returns the global value.

    A layer whose E is not a multiple of N is an error naming the layer; so
    are operands the pass cannot partition (an expert weight that is not a
    function argument, token rows used by an op other than a layer or the
    return).

    Example: `--moe-shard-experts="ranks=2"`
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", "0", "number of ranks N (>= 1)">
  ];
  let dependentDialects = ["::mlir::moe::MoEDialect",
                           "::mlir::shard::ShardDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

def MoERaiseLinalg : Pass<"moe-raise-linalg"> {
  let summary = "Raise dense MoE layers written in upstream ops to moe.layer";
  let description = [{
    Recognises a dense (softmax-gated, every-expert) Mixture-of-Experts layer
    written in upstream `linalg`/`arith`/`math` ops, the way frontends emit
    it, and rebuilds `moe.layer {routing = #moe.dense, activation = ...}`
    (docs/spec.md §3, §3.1) with the router bias and the expert biases when
    present. For `[T, D]` tokens `x`:

    - router: `l = x Wr (+ br)` with `Wr` as `[D, E]` or `[E, D]` (an
      `nn.Linear` weight; a `linalg.transpose` to `[D, E]` is built);
    - gate: `g = softmax(l)` over the experts: `linalg.softmax dimension(1)`,
      or its decomposition `exp(l - max l) / sum exp(l - max l)` as
      torch-mlir's DecomposeComplexOps writes it (max and sum reductions,
      keepdim through `tensor.expand_shape` or a `(t, 0)` map, `sub`/`add`
      scaling by alpha = 1), or `exp(l) / sum exp(l)`;
    - experts: `X = "td,edh->eth"(x, W1) (+ b1[e,h])`, `A = act(X)`,
      `Y = "eth,ehd->etd"(A, W2) (+ b2[e,d])`; each weight may also be in the
      `[E, out, in]` orientation (`"td,ehd->eth"`, `"eth,edh->etd"`), a
      transpose is then built;
    - gated activations from SEPARATE gate and up projections:
      `A = silu(x Wg (+ bg)) * (x Wu (+ bu))` (swiglu) or with gelu (geglu)
      become one `moe.layer` whose W1 is `tensor.concat` of the two weights
      along the last dimension (gate first, as docs/spec.md §3 says), built
      in the IR (the function signature does not change), and b1 the
      concatenation of the two biases;
    - weighted sum: `y = "te,etd->td"(g, Y)`.

    Each contraction may be any linalg op of the upstream contraction
    interface (`linalg.generic` with a mulf/addf body in any loop order,
    `linalg.matmul`, `linalg.batch_matmul`, `linalg.contract`), over
    `linalg.broadcast`/`linalg.transpose` of its operands; the weighted sum
    may also be a `linalg.reduce` over the experts of their elementwise
    product. Accumulators must start at zero. Elementwise steps may be
    `linalg.generic` payloads or named elementwise ops (`linalg.add`,
    `linalg.mul`, `linalg.div`, `linalg.exp`, `linalg.negf`, `linalg.max`,
    ...), split or fused in any way; their scalar ops are matched against:
    relu `max(X, 0)` (maximumf or maxnumf) or `select(X > 0, X, 0)`
    (torch-mlir's), gelu `0.5 X (1 + erf(X / sqrt 2))` (also torch-mlir's
    `X * cdf(X)` with mean 0 and sigma 1), gelu_tanh `0.5 X (1 + tanh(sqrt(2/pi) (X + 0.044715 X^3)))`, silu
    `X / (1 + exp(-X))` or `X * sigmoid(X)`, constants to 1e-5. With only
    one of b1/b2 present the other becomes zeros.

    The router's logits and probabilities may also be used elsewhere (e.g.
    returned, as Mixtral returns its router logits): that computation stays
    and the layer has its own router. The experts' intermediates must be
    used only inside the layer.

    Every linalg reduction that sums the product of a rank-2 and a rank-3
    tensor into a rank-2 result is a candidate; one that is not raised gets
    a remark naming the first mismatch, e.g. `not raised to moe.layer: the
    softmax is over dimension 0 (tokens), not over the experts`. Nothing is
    built unless the whole layer matched. Not recognised: top-k/MOESART
    routing, capacity factors, training mode, the scf-loop form that
    `--convert-moe-to-cpu` emits.

    Example: `moe-opt f.mlir --moe-raise-linalg`
  }];
  let dependentDialects = ["::mlir::moe::MoEDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // MOE_PASSES_TD
