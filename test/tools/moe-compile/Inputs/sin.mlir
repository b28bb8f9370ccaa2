// A function with an op that has no adjoint (vjp.test).
func.func @g(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = math.sin %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
