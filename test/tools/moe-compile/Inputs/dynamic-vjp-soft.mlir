// A Soft MoE layer over a dynamic number of groups (G = ?, M = 6): the
// gradient's dynamic result dimensions (y, dx: [G, 6, 16]) tie to x's groups
// through moe.soft_dispatch's combine weights (dynamic-vjp.test).
func.func @f(%x: tensor<?x6x16xf32>,
    %phi: tensor<16x4x2xf32> {moe.param = "router.phi"},
    %scale: tensor<f32> {moe.param = "router.scale"},
    %w1: tensor<4x16x16xf32> {moe.param = "experts.w1"},
    %w2: tensor<4x8x16xf32> {moe.param = "experts.w2"}) -> tensor<?x6x16xf32> {
  %y = moe.soft_layer %x slots(%phi) scale(%scale) experts(%w1, %w2)
      {activation = #moe.activation<swiglu>, normalize}
      : (tensor<?x6x16xf32>, tensor<16x4x2xf32>, tensor<f32>, tensor<4x16x16xf32>, tensor<4x8x16xf32>)
      -> tensor<?x6x16xf32>
  return %y : tensor<?x6x16xf32>
}
