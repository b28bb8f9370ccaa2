// moe.expert_ffn_grad on f16 rows and weights with an f32 cotangent and f32
// gradients (test/gpu/emulated-vjp-tiles.test drives it with cotangents of
// 1e-9 and 1e9: outside f16's range, inside the scaled terms').
func.func @g(%rows: tensor<64x32xf16>, %dout: tensor<64x32xf32>,
    %w1: tensor<4x32x96xf16>, %w2: tensor<4x48x32xf16>, %b1: tensor<4x96xf16>, %b2: tensor<4x32xf16>)
    -> (tensor<64x32xf32>, tensor<4x32x96xf32>, tensor<4x48x32xf32>, tensor<4x96xf32>, tensor<4x32xf32>) {
  %off = arith.constant dense<[0, 20, 20, 45, 64]> : tensor<5xi32>
  %dr, %dw1, %dw2, %db1, %db2 = moe.expert_ffn_grad %rows, %off, %dout experts(%w1, %w2) expert_biases(%b1, %b2)
      {activation = #moe.activation<swiglu>}
      : (tensor<64x32xf16>, tensor<5xi32>, tensor<64x32xf32>, tensor<4x32x96xf16>, tensor<4x48x32xf16>,
         tensor<4x96xf16>, tensor<4x32xf16>)
      -> (tensor<64x32xf32>, tensor<4x32x96xf32>, tensor<4x48x32xf32>, tensor<4x96xf32>, tensor<4x32xf32>)
  return %dr, %dw1, %dw2, %db1, %db2
      : tensor<64x32xf32>, tensor<4x32x96xf32>, tensor<4x48x32xf32>, tensor<4x96xf32>, tensor<4x32xf32>
}
