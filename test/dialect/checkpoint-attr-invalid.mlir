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

// expected-error @+1 {{expected 'transpose'}}
func.func @bad_keyword(%w: tensor<4xf32> {moe.param = #moe.checkpoint<["a"], transposed>}) {
  return
}

// -----

// expected-error @+1 {{expected string}}
func.func @not_a_string(%w: tensor<4xf32> {moe.param = #moe.checkpoint<[3]>}) {
  return
}
