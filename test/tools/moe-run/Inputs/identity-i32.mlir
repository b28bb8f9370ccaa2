func.func @id(%x: tensor<4xi32>) -> tensor<4xi32> {
  return %x : tensor<4xi32>
}
