//===- MoEAttrs.td - moe dialect attributes ----------------*- tablegen -*-===//

#ifndef MOE_ATTRS_TD
#define MOE_ATTRS_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "dialect/MoEDialect.td"
include "dialect/MoEInterfaces.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def MoE_ActivationKind : I32EnumAttr<"Activation",
    "expert activation function", [
      I32EnumAttrCase<"gelu", 0>,
      I32EnumAttrCase<"gelu_tanh", 1>,
      I32EnumAttrCase<"relu", 2>,
      I32EnumAttrCase<"silu", 3>,
      I32EnumAttrCase<"swiglu", 4>,
      I32EnumAttrCase<"geglu", 5>]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}

def MoE_MoesartAdjust : I32EnumAttr<"MoesartAdjust",
    "MOESART training-mode weight adjustment", [
      I32EnumAttrCase<"small_random", 0>,
      I32EnumAttrCase<"zero", 1>,
      I32EnumAttrCase<"large", 2>]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}

def MoE_RouterScore : I32EnumAttr<"RouterScore",
    "the per-expert score of #moe.top_k", [
      I32EnumAttrCase<"softmax", 0>,
      I32EnumAttrCase<"sigmoid", 1>]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}

def MoE_GpuEngine : I32EnumAttr<"GpuEngine",
    "what computes the bf16/f16 expert GEMMs of the GPU lowering", [
      I32EnumAttrCase<"cuda_core", 0>,
      I32EnumAttrCase<"mma_sync", 1>,
      I32EnumAttrCase<"wgmma", 2>]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}

def MoE_Int8Dot : I32EnumAttr<"Int8Dot",
    "the integer dot product of the CPU's int8-activation GEMMs", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"vpdpbusd", 1>,
      I32EnumAttrCase<"vpmaddubsw", 2>]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}

def MoE_QuantKind : I32EnumAttr<"QuantKind",
    "the storage format of quantized expert weights", [
      I32EnumAttrCase<"fp8_e4m3", 0>,
      I32EnumAttrCase<"int4", 1>]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}

def MoE_Int4Packing : I32EnumAttr<"Int4Packing",
    "how a checkpoint packs 4-bit codes into I32 words", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"gptq", 1>,
      I32EnumAttrCase<"gptq_zeros", 2>,
      I32EnumAttrCase<"awq", 3>,
      I32EnumAttrCase<"pack_quantized", 4>]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}

def MoE_Regularizer : I32EnumAttr<"Regularizer",
    "auxiliary-loss regularizer of a routing policy", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"trimmed_lasso", 1>]> {
  let cppNamespace = "::mlir::moe";
  let genSpecializedAttr = 0;
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

class MoE_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<MoE_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def MoE_ActivationAttr : EnumAttr<MoE_Dialect, MoE_ActivationKind, "activation"> {
  let summary = "expert activation: gelu, gelu_tanh, relu, silu, swiglu, geglu";
  let description = [{
    The activation of every expert FFN of a layer.

    * `gelu`: `0.5 x (1 + erf(x / sqrt(2)))`
    * `gelu_tanh`: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`
    * `relu`: `max(x, 0)`
    * `silu`: `x * sigmoid(x)`
    * `swiglu` (gated): `W1: [E, D, 2H]`, `u = x W1[e] + b1[e]`,
      `h = silu(u[:, :H]) * u[:, H:]`
    * `geglu` (gated): as `swiglu` with `gelu` (erf) in place of `silu`

    Example: `#moe.activation<swiglu>`
  }];
  let assemblyFormat = "`<` $value `>`";
  let extraClassDeclaration = [{
    /// Whether the activation is gated (W1 holds the gate and up projections
    /// side by side: [E, D, 2H]).
    bool isGated() const {
      return getValue() == Activation::swiglu ||
             getValue() == Activation::geglu;
    }
  }];
}

def MoE_DenseRoutingAttr : MoE_Attr<"DenseRouting", "dense",
    [DeclareAttrInterfaceMethods<MoE_RoutingAttrInterface>]> {
  let summary = "dense softmax gating: every expert runs on every token";
  let description = [{
    Every token runs all E experts: `S_t = {0, ..., E-1}`, with weights
    `w_t,i = g_t,i = softmax(o_t)_i`. No regularizer: in training mode the
    layer's auxiliary loss is 0.

    Example: `#moe.dense`
  }];
}

def MoE_ScaleParameter
    : AttrOrTypeParameter<"::llvm::APFloat", "routed weight scale"> {
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
  let defaultValue = "::llvm::APFloat(1.0)";
  let printer = "$_printer.printFloat($_self)";
}

def MoE_TopKRoutingAttr : MoE_Attr<"TopKRouting", "top_k",
    [DeclareAttrInterfaceMethods<MoE_RoutingAttrInterface>]> {
  let summary = "top-k routing as production routers use it";
  let description = [{
    Each token runs K experts. With the defaults this is the classic top-k
    router: the K experts with the largest router logits `o_t` (ties: the
    lower expert index first), weighted by the softmax restricted to them,
    `w_t,i = exp(o_i) / sum_{j in S_t} exp(o_j)`. The parameters cover the
    routers of Switch, Mixtral, Qwen2/Qwen3-MoE, OLMoE and DeepSeek-V2/V3
    (defaults in brackets):

    * `score = softmax|sigmoid` [softmax]: `s = softmax(o)` or `sigmoid(o)`.
    * Selection uses `c = s + b`, where `b` is the layer's optional
      `selection_bias` operand (else 0); c only chooses, it never weights.
    * `groups = G` [1], `group_k = GK` [G]: experts `[g*E/G, (g+1)*E/G)` form
      group g; a group's score is the sum of its top-min(2, E/G) values of
      c; the GK best groups are kept (ties: lower index) and experts of the
      other groups cannot be chosen. Needs `E % G == 0`, `1 <= GK <= G` and
      `K <= GK * E/G`.
    * S_t = the top-K of c among the choosable experts (ties: lower index).
    * `w_i = s_i`; with `normalize = true` [true]
      `w_i /= (sum_{j in S_t} s_j + 1e-20)`; then `w_i *= scale` [1.0,
      must be > 0 and finite].

    No regularizer: in training mode the layer's auxiliary loss is 0.

    Examples: `#moe.top_k<k = 2>` (Mixtral), `#moe.top_k<k = 4, normalize =
    false>` (Qwen2-MoE), `#moe.top_k<k = 8, score = sigmoid, scale = 2.5,
    groups = 8, group_k = 4>` (DeepSeek-V3).
  }];
  let parameters = (ins
    "int64_t":$k,
    DefaultValuedParameter<"::mlir::moe::RouterScore",
        "::mlir::moe::RouterScore::softmax", "per-expert score">:$score,
    DefaultValuedParameter<"bool", "true", "renormalize the K weights">:$normalize,
    MoE_ScaleParameter:$scale,
    DefaultValuedParameter<"int64_t", "1", "expert groups G">:$groups,
    DefaultValuedParameter<"int64_t", "0", "groups kept GK (0: all G)">:$group_k);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The classic top-k (all other parameters at their defaults), or null
    /// after reporting through `emitError` when k is invalid.
    static TopKRoutingAttr getClassicChecked(
        ::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError,
        ::mlir::MLIRContext *context, int64_t k);
    /// GK, with the default (all groups) resolved.
    int64_t getKeptGroups() const { return getGroupK() > 0 ? getGroupK() : getGroups(); }
    /// True when the parameters are the defaults: the classic softmax top-k.
    bool isClassic() const {
      return getScore() == RouterScore::softmax && getNormalize() &&
             getScale().convertToDouble() == 1.0 && getGroups() == 1;
    }
  }];
}

def MoE_TrimmedLassoParameter
    : AttrOrTypeParameter<"::llvm::APFloat", "trimmed-lasso coefficient lambda"> {
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
  let defaultValue = "::llvm::APFloat(1.0e-3)";
  let printer = "$_printer.printFloat($_self)";
}

def MoE_MoesartRoutingAttr : MoE_Attr<"MoesartRouting", "moesart",
    [DeclareAttrInterfaceMethods<MoE_RoutingAttrInterface>]> {
  let summary = "MOESART: sampling-based routing with adjusted weights";
  let description = [{
    MOESART routing with k experts per token (`1 <= k <= E`).

    Inference: S_t is the top-k of `o_t` (ties: lower index first) and
    `w = softmax_S(o_i - log(max(k (g_i + 1e-10), 1e-10)))` (about 1/k).

    Training (`training` on the layer, which then needs a `seed`): k experts
    are sampled without replacement in proportion to g. Draw r uses a uniform
    u and the current distribution p (starting at g): it picks the first i
    with `u < cumsum(p)_i` (if rounding leaves none, the last i with
    `p_i > 0`), then sets `p_i = 0` and renormalizes `p /= (sum(p) + 1e-10)`.
    The weights depend on `adjust`:

    * `small_random` (default; needs k >= 2): one more uniform u picks j, the
      `floor(u k)`-th (0-based) member of S_t in ascending expert index;
      `õ_j = o_j`, `õ_i = o_i - log(max((k-1)(g_i + 1e-10), 1e-10))` for the
      other i in S_t, `w = softmax_S(õ)`
      (closed form: `w_j = g_j / (1 + g_j)`, `w_i = 1 / ((k-1)(1 + g_j))`).
    * `zero`: `õ_i = o_i - log(max(k (g_i + 1e-10), 1e-10))`, `w = softmax_S(õ)`.
    * `large`: `w_i = g_i / sum_{j in S_t} g_j`.

    The auxiliary loss (second result in training mode) is the trimmed lasso
    `trimmed_lasso * mean_t (1 - sum of the k largest g_t,i)`
    (`trimmed_lasso` defaults to 1e-3, must be finite and >= 0).

    Random numbers: Philox4x32-10 keyed by the 64-bit seed (low word, high
    word), counter `(t, r, 0, 0)`, `u = (out[0] >> 8) * 2^-24`; draws
    r = 0..k-1 sample S_t, draw r = k picks j.

    Examples: `#moe.moesart<k = 2>`,
    `#moe.moesart<k = 4, adjust = large, trimmed_lasso = 1.0e-2>`
  }];
  let parameters = (ins
    "int64_t":$k,
    DefaultValuedParameter<"::mlir::moe::MoesartAdjust",
        "::mlir::moe::MoesartAdjust::small_random",
        "training-mode weight adjustment">:$adjust,
    MoE_TrimmedLassoParameter:$trimmed_lasso);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Checkpoint binding
//===----------------------------------------------------------------------===//

def MoE_CheckpointAttr : MoE_Attr<"Checkpoint", "checkpoint"> {
  let summary = "a parameter assembled from checkpoint tensors at load time";
  let description = [{
    The value of `moe.param` on a function argument that is assembled from
    the tensors of a checkpoint as they are on disk (for example a Hugging
    Face checkpoint: per-expert `nn.Linear` weights in `[out, in]` layout).
    `moe-run --params=CHECKPOINT` does it once, when it binds the
    parameters, from memory-mapped files; nothing is converted on disk and
    nothing is redone per call.

    * Each name is a tensor of the checkpoint. If the names contain the
      placeholder `{e}` (all of them, or none), the argument's leading
      dimension is the expert count E: for e in [0, E), `{e}` is replaced by
      the decimal e, and the per-expert results are stacked along a new
      leading dimension.
    * With `transpose`, every tensor must have two or more dimensions and
      its last two are swapped (`nn.Linear` `[out, in]` -> `[in, out]`;
      a fused expert tensor `[E, out, in]`, one matrix per expert, ->
      `[E, in, out]`, bound by a name without `{e}`).
    * The tensors of one expert are concatenated along their last
      dimension, in order (for gated activations the gate and up
      projections: `[D, H] ++ [D, H] -> [D, 2H]`).
    * The result must have exactly the argument's shape (a dynamic
      dimension takes the assembled size), else loading fails with one
      error naming the tensors and both shapes. F32, F16 and BF16 tensors
      are converted to the argument's element type (widening exactly,
      narrowing to nearest even).

    * With `fp8_scales = [...]` and `block = [bN, bK]`, every named tensor
      is FP8 E4M3 codes (`F8_E4M3`, 2-D, `[rows, cols]` as stored; for
      `nn.Linear` `[out, in]`) and the scale tensor in the same position
      (F32, BF16 or F16, `[ceil(rows/bN), ceil(cols/bK)]`, DeepSeek-V3's
      `weight_scale_inv`, which multiplies) scales its blocks of `bN x bK`:
      each weight is dequantized once, at load, to `q * s` computed exactly
      and rounded once to the argument's element type (F32, F16 or BF16),
      then transposed, stacked and concatenated as above. This is how FP8
      weights that the layer takes as values of its type (a shared expert)
      are bound; routed experts keep their codes (`f8E4M3FN` arguments with
      `expert_scales`, `#moe.quant`). Without `fp8_scales`, `F8_E4M3`
      tensors assemble only into `f8E4M3FN` arguments, bit for bit.

    * With `int4 = KIND`, every named tensor is a 2-D I32 tensor of 4-bit
      codes packed 8 to a word (little-endian words), unpacked at load to
      one code per byte before the transposition (an `i4` argument, one
      code per byte in memory; docs/spec.md §2.1, docs/quantization.md):
      `gptq`: `[R/8, C]` packed along the rows, code (r, c) in bits
      `4*(r%8)` of word `[r/8][c]` (AutoGPTQ's `qweight`); `gptq_zeros`:
      `[R, C/8]` along the columns, code (r, c) in bits `4*(c%8)` of word
      `[r][c/8]`, plus one (AutoGPTQ's `qzeros` store the zero point minus
      one; a stored 15 is an error); `awq`: `[R, C/8]` along the columns in
      AutoAWQ's order, the 4 bits at `4*p` of word `[r][w]` holding column
      `8w + [0, 2, 4, 6, 1, 3, 5, 7][p]` (its `qweight` and `qzeros`);
      `pack_quantized`: `[R, C/8]` along the columns in order
      (compressed-tensors' `weight_packed`, `[out, in/8]`).

    * With `int4 = KIND`, `int4_scales = [...]` and `group = G`, every named
      tensor is an `nn.Linear` weight of a writer's int4 format
      (docs/quantization.md, "The formats"): `gptq` (AutoGPTQ `qweight`
      `[in/8, out]`, zero points `qzeros` `[in/G, out/8]` stored minus
      one), `awq` (AutoAWQ `qweight` `[in, out/8]`, `qzeros` in its nibble
      order) or `pack_quantized` (compressed-tensors `weight_packed`
      `[out, in/8]` of the codes plus 8, zero points `weight_zero_point`
      `[out/8, in/G]` packed along out, or none: symmetric, zero 8). The
      scale tensor in the same position (F32, BF16 or F16; `[in/G, out]`,
      compressed-tensors `[out, in/G]`) and the zero-point tensor of
      `int4_zeros` (required for `gptq` and `awq`) dequantize it once, at
      load: `W[k][n] = (q - z) * s` of row k's group `k / G`, computed
      exactly and rounded once to the argument's element type (F32, F16
      or BF16), `[in, out]` (no `transpose`), then stacked and concatenated
      as above. This is how int4 weights that the layer takes as values of
      its type (a shared expert) are bound; routed experts keep their codes
      (`i4` arguments with `expert_scales`, `#moe.quant`).

    The plain string form `moe.param = "name"` binds one tensor as it is.

    Examples (a Mixtral layer of layer index 3, `D = 4096`, `H = 14336`):

    ```mlir
    %wr: tensor<4096x8xbf16> {moe.param = #moe.checkpoint<
        ["model.layers.3.block_sparse_moe.gate.weight"], transpose>},
    %w1: tensor<8x4096x28672xbf16> {moe.param = #moe.checkpoint<
        ["model.layers.3.block_sparse_moe.experts.{e}.w1.weight",
         "model.layers.3.block_sparse_moe.experts.{e}.w3.weight"], transpose>},
    %w2: tensor<8x14336x4096xbf16> {moe.param = #moe.checkpoint<
        ["model.layers.3.block_sparse_moe.experts.{e}.w2.weight"], transpose>}
    ```

    DeepSeek-V3's FP8 shared experts, dequantized to bf16 at load:

    ```mlir
    %s1: tensor<7168x4096xbf16> {moe.param = #moe.checkpoint<
        ["model.layers.3.mlp.shared_experts.gate_proj.weight",
         "model.layers.3.mlp.shared_experts.up_proj.weight"], transpose,
        fp8_scales = ["model.layers.3.mlp.shared_experts.gate_proj.weight_scale_inv",
                      "model.layers.3.mlp.shared_experts.up_proj.weight_scale_inv"],
        block = [128, 128]>}
    ```

    A Qwen2-MoE GPTQ shared expert, dequantized to bf16 at load:

    ```mlir
    %s1: tensor<2048x11264xbf16> {moe.param = #moe.checkpoint<
        ["model.layers.3.mlp.shared_expert.gate_proj.qweight",
         "model.layers.3.mlp.shared_expert.up_proj.qweight"], int4 = gptq,
        int4_scales = ["model.layers.3.mlp.shared_expert.gate_proj.scales",
                       "model.layers.3.mlp.shared_expert.up_proj.scales"],
        int4_zeros = ["model.layers.3.mlp.shared_expert.gate_proj.qzeros",
                      "model.layers.3.mlp.shared_expert.up_proj.qzeros"],
        group = 128>}
    ```

    Verified: at least one name, no empty name, `{e}` in all names or none
    (the scales' and zero points' names likewise, and with the names); as
    many scales as names, and `block` (two sizes >= 1) exactly when there
    are FP8 scales; not both `fp8_scales` and `int4`; `int4_scales` with
    `int4 = gptq`, `awq` or `pack_quantized`, `group` >= 1 exactly when
    there are int4 scales, `int4_zeros` only with them (as many as names,
    required for `gptq` and `awq`), no `transpose` with them; on an
    argument with `{e}`, a ranked tensor with a static leading dimension;
    on one with FP8 or int4 scales, a tensor of f32, f16 or bf16; on one
    with `int4` alone, a tensor of i4.
  }];
  let parameters = (ins
    ArrayRefParameter<"::mlir::StringAttr", "tensor names">:$names,
    DefaultValuedParameter<"bool", "false", "transpose each tensor">:$transpose,
    OptionalArrayRefParameter<"::mlir::StringAttr",
                              "FP8 block scales, one per name">:$fp8_scales,
    OptionalArrayRefParameter<"int64_t",
                              "the scales' block [bN, bK] (rows, columns as stored)">:$block,
    DefaultValuedParameter<"::mlir::moe::Int4Packing", "::mlir::moe::Int4Packing::none",
                           "how the tensors pack int4 codes">:$int4,
    OptionalArrayRefParameter<"::mlir::StringAttr",
                              "int4 scales, one per name (dequantized at load)">:$int4_scales,
    OptionalArrayRefParameter<"::mlir::StringAttr",
                              "packed int4 zero points, one per name">:$int4_zeros,
    DefaultValuedParameter<"int64_t", "0",
                           "the int4 group along the input dimension">:$group);
  // `<["a", "b"], transpose, fp8_scales = [...], block = [bN, bK],
  // int4 = KIND, int4_scales = [...], int4_zeros = [...], group = G>`: the
  // unit keyword needs a custom directive.
  let assemblyFormat =
      "`<` custom<CheckpointParams>($names, $transpose, $fp8_scales, $block, $int4, "
      "$int4_scales, $int4_zeros, $group) `>`";
  let builders = [
    AttrBuilder<(ins "::llvm::ArrayRef<::mlir::StringAttr>":$names,
                     "bool":$transpose), [{
      return $_get($_ctxt, names, transpose, ::llvm::ArrayRef<::mlir::StringAttr>(),
                   ::llvm::ArrayRef<int64_t>(), ::mlir::moe::Int4Packing::none,
                   ::llvm::ArrayRef<::mlir::StringAttr>(),
                   ::llvm::ArrayRef<::mlir::StringAttr>(), 0);
    }]>
  ];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Whether the names contain the expert placeholder `{e}`.
    bool isPerExpert() const;
  }];
}

def MoE_QuantAttr : MoE_Attr<"Quant", "quant"> {
  let summary = "how a layer's expert weights are quantized";
  let description = [{
    The attribute `quant` of a `moe.layer` whose expert weights `w1` and
    `w2` are stored quantized (docs/spec.md §2.1, docs/quantization.md): the
    weights' element type is the format's storage type, and the layer takes
    their scales, `expert_scales(%s1, %s2)` (f32), and with `zero_point`
    their zero points, `expert_zero_points(%z1, %z2)` (i4). A weight of
    shape `[E, K, N]` (`w1: [E, D, H or 2H]`, `w2: [E, H, D]`) dequantizes
    to `W[e][k][n]`:

    * `#moe.quant<fp8_e4m3, block = [BK, BN]>`: storage `f8E4M3FN`, one
      scale per block of BK x BN weights: scales `[E, ceil(K/BK),
      ceil(N/BN)]`, `W = q * s[e][k/BK][n/BN]` (DeepSeek-V3's 128 x 128
      blocks).
    * `#moe.quant<int4, group = G>`: storage `i4`, read as unsigned (0..15),
      one scale per group of G consecutive k: scales `[E, ceil(K/G), N]`,
      `W = (q - 8) * s[e][k/G][n]` (symmetric).
    * `#moe.quant<int4, group = G, zero_point>`: the same with a zero point
      per scale: `W = (q - z[e][k/G][n]) * s[e][k/G][n]` (GPTQ, AWQ).

    Each product is of two exact factors, rounded once to f32; the rest of
    the layer computes as for its element type (docs/spec.md §2).

    * `int8_activations` (int4 only; docs/spec.md §2.1, "int8 activations"):
      a second numerics mode, llama.cpp's Q8 activations: each GEMM's left
      operand (the tokens, then h rounded to the element type, f32
      included) is replaced by its symmetric int8 quantization per row and
      group of G consecutive k, `a^ = q_a * s_a` with `s_a = max|a| / 127`
      (f32) and `q_a` = `a / s_a` (f32) rounded to nearest even (0 where
      `s_a` is 0), so that the CPU multiplies codes with integer dot
      products (`vpdpbusd`, `vpmaddubsw`). The products are then exact
      integers; each group's sum is scaled once.

    Verified: fp8 takes `block` (two sizes >= 1) and neither `group` nor
    `zero_point` nor `int8_activations`; int4 takes `group` (>= 1) and no
    `block`.
  }];
  let parameters = (ins
    EnumParameter<MoE_QuantKind>:$kind,
    OptionalArrayRefParameter<"int64_t", "fp8: block sizes [BK, BN]">:$block,
    DefaultValuedParameter<"int64_t", "0", "int4: group size along K">:$group,
    DefaultValuedParameter<"bool", "false", "int4: zero points given">:$zero_point,
    DefaultValuedParameter<"bool", "false", "int4: activations quantized to int8">:$int8_activations);
  // `<fp8_e4m3, block = [128, 128]>`, `<int4, group = 128, zero_point>`,
  // `<int4, group = 128, int8_activations>`.
  let assemblyFormat = "`<` custom<QuantParams>($kind, $block, $group, $zero_point, $int8_activations) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The weights' element type: f8E4M3FN or i4.
    ::mlir::Type getStorageType() const;
    /// The shape of the scales (and zero points) of a weight of shape
    /// [E, K, N]; dynamic sizes stay dynamic.
    ::llvm::SmallVector<int64_t> getScaleShape(::llvm::ArrayRef<int64_t> weightShape) const;
  }];
}

//===----------------------------------------------------------------------===//
// Lowering configurations (strategy as data)
//===----------------------------------------------------------------------===//

def MoE_CpuConfigAttr : MoE_Attr<"CpuConfig", "cpu_config"> {
  let summary = "how the CPU lowering emits one op's grouped GEMMs";
  let description = [{
    The CPU code-generation strategy of one op, as data: `--moe-cpu-configure`
    attaches it, as the discardable attribute `moe.cpu_config`, to every op
    whose CPU lowering emits grouped GEMMs (`moe.layer`, `moe.soft_layer`,
    `moe.route`, `moe.expert_ffn`, `moe.shared_expert`, `moe.fused_experts`,
    `moe.fused_soft_experts`), choosing it from the target CPU's features;
    `--convert-moe-to-cpu` reads it (a decomposed layer passes it on to its
    chain). An attribute already present is kept, so a user can override the
    choice in the IR; an op without one gets the AVX-512 configuration.

    * `vector_bits`: the width of one f32 vector register (128: SSE/NEON,
      256: AVX2, 512: AVX-512); a vector of accumulators holds
      `vector_bits / 32` columns.
    * `registers`: the vector registers of the instruction set (16 or 32).
    * `micro_rows` x `micro_vectors`: the register blocking of the
      micro-kernel: that many rows times vectors of accumulators, plus one
      register per vector of the right operand and one broadcast of the
      left, must fit in `registers`. `micro_vectors` is even (a gated GEMM
      pairs gate and up vectors).
    * `row_block` x `col_block`: one parallel work item (plan rows of one
      group times output columns); whole micro-tiles.
    * `prefetch_rows`: how far ahead the packed panel is prefetched.
    * `bf16_dot`: bf16 GEMMs with packed weights use the AVX512_BF16 dot
      product (`vdpbf16ps`; needs `vector_bits = 512`).
    * `amx` (default false; needs `bf16_dot` and a `row_block` that is a
      multiple of 16): those GEMMs run on the AMX tile unit instead
      (`tdpbf16ps`, Sapphire Rapids and later): micro-tiles of 16 rows times
      the panel's `micro_vectors` tiles of 16 columns, the reduction in
      steps of 32 k (16 pairs), f32 accumulation as with `vdpbf16ps`. The
      lowered code asks the kernel for the tile state once
      (`moeCpuRequestAmx`, one error line if it is refused).
    * `fp8_dot` (default false; needs `bf16_dot`): FP8 E4M3 GEMMs with
      packed weights and bf16 tokens use the dot product too: a code becomes
      its exact bf16 by two 128-entry byte lookups (`vpermi2b`,
      AVX512_VBMI), the high and low bytes, and the pairs of k are
      interleaved by byte unpacks (the packed panel stores the codes in that
      order).
    * `int8_dot` (default `none`): int4 GEMMs in the int8-activation mode
      (`#moe.quant<..., int8_activations>`) with packed weights multiply the
      activations' int8 codes by the weights' codes with an integer dot
      product: `vpdpbusd` (AVX512_VNNI at 512 bits, AVX-VNNI at 256) or
      `vpmaddubsw` + `vpmaddwd` (AVX2, 256 bits only). With `none` (or a
      group that is not a multiple of 8, or unpacked weights) the lowering
      computes the same mode with the quantized activations' f32 values on
      the FMA path.

    Example (the AVX2 + FMA choice, on a router GEMM):

    ```mlir
    %o = moe.route %x router(%wr) {moe.cpu_config = #moe.cpu_config<vector_bits = 256,
        registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48,
        col_block = 256, prefetch_rows = 128, bf16_dot = false>}
        : (tensor<?x4096xf32>, tensor<4096x8xf32>) -> tensor<?x8xf32>
    ```
  }];
  let parameters = (ins
    "int64_t":$vector_bits,
    "int64_t":$registers,
    "int64_t":$micro_rows,
    "int64_t":$micro_vectors,
    "int64_t":$row_block,
    "int64_t":$col_block,
    "int64_t":$prefetch_rows,
    "bool":$bf16_dot,
    DefaultValuedParameter<"bool", "false">:$amx,
    DefaultValuedParameter<"bool", "false">:$fp8_dot,
    DefaultValuedParameter<"::mlir::moe::Int8Dot", "::mlir::moe::Int8Dot::none">:$int8_dot);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// f32 lanes of one vector register.
    int64_t getLanes() const { return getVectorBits() / 32; }
    /// Output columns of one micro-tile (and of one packed panel).
    int64_t getTileColumns(bool gated) const {
      return (gated ? getMicroVectors() / 2 : getMicroVectors()) * getLanes();
    }
    /// The name of the discardable attribute that carries it.
    static constexpr ::llvm::StringLiteral getAttrName() {
      return ::llvm::StringLiteral("moe.cpu_config");
    }
    /// A short tag naming the configuration (kernel symbol suffixes).
    std::string getTag() const;
  }];
}

def MoE_GpuConfigAttr : MoE_Attr<"GpuConfig", "gpu_config"> {
  let summary = "how the GPU lowering emits one op's grouped GEMMs";
  let description = [{
    The GPU code-generation strategy of one op, as data: `--moe-gpu-configure`
    attaches it, as the discardable attribute `moe.gpu_config`, to the same
    ops as `moe.cpu_config`, choosing it from the `#nvvm.target` of
    `gpu.module @moe_kernels` (the SM version's capabilities as upstream's
    NVVM dialect defines them: tensor cores from sm_80, `wgmma` on the
    arch-accelerated sm_90a); `--convert-moe-to-gpu` reads it (a decomposed
    layer passes it on to its chain). An attribute already present is kept,
    so a user can override the choice in the IR; an op without one gets
    `engine = mma_sync` with every other parameter at its default.

    * `engine`: what computes the expert GEMMs whose tokens, weights and
      biases are all bf16 (or all f16): `cuda_core` (FMA), `mma_sync`
      (warp-level m16n8k16, sm_80+), or `wgmma` (the 64- and 128-row tiles
      on warpgroup-level `wgmma.mma_async`, sm_90a; the 16-row decode tiles
      keep `mma.sync`). f32 GEMMs always run on CUDA cores. Quantized expert
      weights (`#moe.quant`) of bf16/f16 layers whose blocks or groups along
      K are multiples of 32 run on the tensor cores, without 128-row tiles;
      other quantized ones on CUDA cores. The configuration pass gives
      quantized ops `big_tile_rows = 0`.
    * `big_tile_rows`: with `wgmma`, a plan with at least this many rows per
      expert on average (T*k/E) takes 128-row tiles of two consumer
      warpgroups; 0: never (and always 0 without `wgmma`).
    * `split_k`: split-K slices of the fused layer's 16-row tensor-core
      GEMMs at decode; 0: chosen from the shape at run time; at most 1024.
    * `stages`: `cp.async` stages of the prefill (32- to 128-row)
      tensor-core GEMMs, 2 to 8; 0: the defaults (3 for `mma.sync`, 4 for
      `wgmma`).
    * `groups_in_flight`: with `wgmma`, commit groups of wgmmas left in
      flight at the end of a stage, 1 or 0 (every stage's wgmmas retired
      before the next loads).

    Example (the sm_90a choice, on a fused layer's chain):

    ```mlir
    %y = moe.expert_ffn %rows, %offsets experts(%w1, %w2)
        {activation = #moe.activation<silu>,
         moe.gpu_config = #moe.gpu_config<engine = wgmma, big_tile_rows = 128,
           split_k = 0, stages = 0, groups_in_flight = 1>}
        : (tensor<128x64xbf16>, tensor<5xi32>, tensor<4x64x128xbf16>,
           tensor<4x128x64xbf16>) -> tensor<128x64xbf16>
    ```
  }];
  let parameters = (ins
    EnumParameter<MoE_GpuEngine>:$engine,
    "int64_t":$big_tile_rows,
    "int64_t":$split_k,
    "int64_t":$stages,
    "int64_t":$groups_in_flight);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The name of the discardable attribute that carries it.
    static constexpr ::llvm::StringLiteral getAttrName() {
      return ::llvm::StringLiteral("moe.gpu_config");
    }
    /// What an op without `moe.gpu_config` is lowered with.
    static GpuConfigAttr getDefault(::mlir::MLIRContext *context);
    /// bf16/f16 expert GEMMs on tensor cores (mma_sync or wgmma).
    bool usesTensorCores() const { return getEngine() != GpuEngine::cuda_core; }
    bool usesWgmma() const { return getEngine() == GpuEngine::wgmma; }
  }];
}

#endif // MOE_ATTRS_TD
