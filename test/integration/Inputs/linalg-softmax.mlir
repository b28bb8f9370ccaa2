// linalg.softmax as a frontend emits it (over the last dimension).
func.func @sm(%x: tensor<37x19xf32>) -> tensor<37x19xf32> {
  %e = tensor.empty() : tensor<37x19xf32>
  %y = linalg.softmax dimension(1) ins(%x : tensor<37x19xf32>) outs(%e : tensor<37x19xf32>) -> tensor<37x19xf32>
  return %y : tensor<37x19xf32>
}
