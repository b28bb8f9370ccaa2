// A Soft MoE layer without scale and normalization, with odd sizes (M = 7,
// D = 20, E*S = 6 slots): the other branch of the Soft MoE backward's
// kernels (emulated-vjp-examples-f32.test).
func.func @forward(%x: tensor<3x7x20xf32>, %phi: tensor<20x3x2xf32>,
                   %w1: tensor<3x20x24xf32>, %w2: tensor<3x24x20xf32>) -> tensor<3x7x20xf32> {
  %y = moe.soft_layer %x slots(%phi) experts(%w1, %w2) {activation = #moe.activation<silu>}
         : (tensor<3x7x20xf32>, tensor<20x3x2xf32>, tensor<3x20x24xf32>, tensor<3x24x20xf32>)
         -> tensor<3x7x20xf32>
  return %y : tensor<3x7x20xf32>
}
