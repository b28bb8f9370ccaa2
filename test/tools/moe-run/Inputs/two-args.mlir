// Two arguments that moe-run fills (an input and a [3, N] parameter, fan-in 3)
// and returns unchanged; used by fill-random-generator.test.
func.func @pass(%x: tensor<200003xf32>, %w: tensor<3x70001xf32> {moe.param = "w"})
    -> (tensor<200003xf32>, tensor<3x70001xf32>) {
  return %x, %w : tensor<200003xf32>, tensor<3x70001xf32>
}
