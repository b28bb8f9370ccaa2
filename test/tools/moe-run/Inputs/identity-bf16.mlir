func.func @id(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  return %x : tensor<4xbf16>
}
