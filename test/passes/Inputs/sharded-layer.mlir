// A layer for --moe-shard-experts (moe-generate-vjp-invalid.mlir).
func.func @f(%x: tensor<?x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x24xf32>,
             %w2: tensor<4x24x16xf32>) -> tensor<?x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
      {routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu>}
      : (tensor<?x16xf32>, tensor<16x4xf32>, tensor<4x16x24xf32>, tensor<4x24x16xf32>) -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}
