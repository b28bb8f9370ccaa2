// RUN: moe-opt %s -split-input-file -verify-diagnostics
//
// #moe.checkpoint: one case per verifier rule (the attribute's own rules,
// then what {e} asks of the argument), and its syntax errors.

// expected-error @+1 {{#moe.checkpoint must name at least one tensor}}
func.func @empty_list(%w: tensor<4xf32> {moe.param = #moe.checkpoint<[]>}) {
  return
}

// -----

// expected-error @+1 {{#moe.checkpoint tensor name #1 is empty}}
func.func @empty_name(%w: tensor<4xf32> {moe.param = #moe.checkpoint<["a", ""]>}) {
  return
}

// -----

// expected-error @+1 {{#moe.checkpoint names must all contain the expert placeholder {e} or none: "a.{e}.w1" has it, "a.w3" does not}}
func.func @mixed_placeholder(%w: tensor<8x4xf32> {moe.param = #moe.checkpoint<["a.{e}.w1", "a.w3"]>}) {
  return
}

// -----

// expected-error @+1 {{'moe.param' on argument #0 stacks per-expert tensors ({e}), so the argument must be a ranked tensor whose leading dimension (the expert count) is static, got 'tensor<?x4xf32>'}}
func.func @dynamic_experts(%w: tensor<?x4xf32> {moe.param = #moe.checkpoint<["e.{e}"]>}) {
  return
}

// -----

// expected-error @+1 {{'moe.param' on argument #0 stacks per-expert tensors ({e}), so the argument must be a ranked tensor whose leading dimension (the expert count) is static, got 'tensor<f32>'}}
func.func @scalar_experts(%w: tensor<f32> {moe.param = #moe.checkpoint<["e.{e}"]>}) {
  return
}

// -----

// expected-error @+1 {{'moe.param' on argument #0 must be a non-empty string naming a tensor of the parameters file or a #moe.checkpoint<...>, got #moe.activation<relu>}}
func.func @other_attr(%w: tensor<4xf32> {moe.param = #moe.activation<relu>}) {
  return
}

// -----

// expected-error @+1 {{expected 'transpose', 'fp8_scales', 'block', 'int4', 'int4_scales', 'int4_zeros' or 'group' (each at most once)}}
func.func @bad_keyword(%w: tensor<4xf32> {moe.param = #moe.checkpoint<["a"], transposed>}) {
  return
}

// -----

// expected-error @+1 {{expected string}}
func.func @not_a_string(%w: tensor<4xf32> {moe.param = #moe.checkpoint<[3]>}) {
  return
}

// -----

// FP8 weights dequantized at load (fp8_scales, block): their own rules.
// expected-error @+1 {{#moe.checkpoint fp8_scales and block go together}}
func.func @scales_without_block(%w: tensor<4x4xf32> {moe.param = #moe.checkpoint<["w"], fp8_scales = ["s"]>}) {
  return
}

// -----

// expected-error @+1 {{#moe.checkpoint has 2 tensor name(s) but 1 fp8_scales: one scale tensor per weight}}
func.func @scale_count(%w: tensor<4x8xf32> {moe.param = #moe.checkpoint<["a", "b"], transpose, fp8_scales = ["as"], block = [2, 2]>}) {
  return
}

// -----

// expected-error @+1 {{#moe.checkpoint fp8_scales name #1 is empty}}
func.func @empty_scale(%w: tensor<4x8xf32> {moe.param = #moe.checkpoint<["a", "b"], fp8_scales = ["as", ""], block = [2, 2]>}) {
  return
}

// -----

// expected-error @+1 {{#moe.checkpoint fp8_scales must contain the expert placeholder {e} exactly when the tensor names do}}
func.func @scale_placeholder(%w: tensor<2x4x4xf32> {moe.param = #moe.checkpoint<["w.{e}"], fp8_scales = ["s"], block = [2, 2]>}) {
  return
}

// -----

// expected-error @+1 {{#moe.checkpoint block must be [bN, bK], two sizes >= 1, got [128, 0]}}
func.func @bad_block(%w: tensor<4x4xf32> {moe.param = #moe.checkpoint<["w"], fp8_scales = ["s"], block = [128, 0]>}) {
  return
}

// -----

// expected-error @+1 {{#moe.checkpoint block must be [bN, bK], two sizes >= 1, got [128]}}
func.func @short_block(%w: tensor<4x4xf32> {moe.param = #moe.checkpoint<["w"], fp8_scales = ["s"], block = [128]>}) {
  return
}

// -----

// The values go into a float argument, not FP8 codes.
// expected-error @+1 {{'moe.param' on argument #0 dequantizes FP8 tensors (fp8_scales), so the argument must be a tensor of f32, f16 or bf16, got 'tensor<4x4xf8E4M3FN>'}}
func.func @codes_argument(%w: tensor<4x4xf8E4M3FN> {moe.param = #moe.checkpoint<["w"], fp8_scales = ["s"], block = [2, 2]>}) {
  return
}

// -----

// expected-error @+1 {{expected 'transpose', 'fp8_scales', 'block', 'int4', 'int4_scales', 'int4_zeros' or 'group' (each at most once)}}
func.func @unknown_keyword(%w: tensor<4x4xf32> {moe.param = #moe.checkpoint<["w"], scales = ["s"]>}) {
  return
}

// -----

// expected-error @+1 {{expected an int4 packing (gptq, gptq_zeros, awq or pack_quantized), got 'marlin'}}
func.func private @int4_kind(%w: tensor<2x8x8xi4> {moe.param = #moe.checkpoint<["e.{e}.qweight"], int4 = marlin>})

// -----

// expected-error @+1 {{#moe.checkpoint takes fp8_scales or int4, not both}}
func.func private @int4_fp8(%w: tensor<8x8xf32> {moe.param = #moe.checkpoint<["w"], fp8_scales = ["s"], block = [4, 4], int4 = gptq>})

// -----

// expected-error @+1 {{'moe.param' on argument #0 unpacks int4 codes (int4 = awq), so the argument must be a tensor of i4, got 'tensor<8x8xf32>'}}
func.func private @int4_type(%w: tensor<8x8xf32> {moe.param = #moe.checkpoint<["w.qweight"], int4 = awq>})

// -----

// int4 weights dequantized at load (int4_scales, int4_zeros, group): their
// own rules.
// expected-error @+1 {{#moe.checkpoint int4_zeros need int4_scales}}
func.func private @zeros_alone(%w: tensor<8x8xf32> {moe.param = #moe.checkpoint<["w"], int4 = gptq, int4_zeros = ["z"]>})

// -----

// expected-error @+1 {{#moe.checkpoint group needs int4_scales}}
func.func private @group_alone(%w: tensor<8x8xi4> {moe.param = #moe.checkpoint<["w"], int4 = gptq, group = 8>})

// -----

// expected-error @+1 {{#moe.checkpoint int4_scales dequantize weights packed as int4 = gptq, awq or pack_quantized, got gptq_zeros}}
func.func private @scales_zeros_packing(%w: tensor<8x8xf32> {moe.param = #moe.checkpoint<["w"], int4 = gptq_zeros, int4_scales = ["s"], int4_zeros = ["z"], group = 8>})

// -----

// expected-error @+1 {{#moe.checkpoint int4_scales dequantize weights packed as int4 = gptq, awq or pack_quantized, got no int4}}
func.func private @scales_no_packing(%w: tensor<8x8xf32> {moe.param = #moe.checkpoint<["w"], int4_scales = ["s"], group = 8>})

// -----

// expected-error @+1 {{#moe.checkpoint int4_scales need group >= 1, got 0}}
func.func private @scales_no_group(%w: tensor<8x8xf32> {moe.param = #moe.checkpoint<["w"], int4 = awq, int4_scales = ["s"], int4_zeros = ["z"]>})

// -----

// expected-error @+1 {{#moe.checkpoint int4_scales dequantize to [in, out]; transpose does not apply}}
func.func private @scales_transpose(%w: tensor<8x8xf32> {moe.param = #moe.checkpoint<["w"], transpose, int4 = pack_quantized, int4_scales = ["s"], group = 8>})

// -----

// expected-error @+1 {{#moe.checkpoint has 2 tensor name(s) but 1 int4_scales: one per weight}}
func.func private @scales_count(%w: tensor<8x16xf32> {moe.param = #moe.checkpoint<["a", "b"], int4 = pack_quantized, int4_scales = ["s"], group = 8>})

// -----

// expected-error @+1 {{#moe.checkpoint int4 = gptq stores zero points: int4_zeros are required}}
func.func private @zeros_required(%w: tensor<8x8xf32> {moe.param = #moe.checkpoint<["w"], int4 = gptq, int4_scales = ["s"], group = 8>})

// -----

// expected-error @+1 {{#moe.checkpoint has 1 tensor name(s) but 2 int4_zeros: one per weight}}
func.func private @zeros_count(%w: tensor<8x8xf32> {moe.param = #moe.checkpoint<["w"], int4 = awq, int4_scales = ["s"], int4_zeros = ["y", "z"], group = 8>})

// -----

// expected-error @+1 {{#moe.checkpoint int4_zeros must contain the expert placeholder {e} exactly when the tensor names do}}
func.func private @zeros_placeholder(%w: tensor<2x8x8xf32> {moe.param = #moe.checkpoint<["w.{e}"], int4 = awq, int4_scales = ["s.{e}"], int4_zeros = ["z"], group = 8>})

// -----

// expected-error @+1 {{#moe.checkpoint int4_scales name #0 is empty}}
func.func private @scales_empty(%w: tensor<8x8xf32> {moe.param = #moe.checkpoint<["w"], int4 = pack_quantized, int4_scales = [""], group = 8>})

// -----

// expected-error @+1 {{'moe.param' on argument #0 dequantizes int4 weights (int4_scales), so the argument must be a tensor of f32, f16 or bf16, got 'tensor<8x8xi4>'}}
func.func private @scales_codes_type(%w: tensor<8x8xi4> {moe.param = #moe.checkpoint<["w"], int4 = pack_quantized, int4_scales = ["s"], group = 8>})
