// Capacity drops (capacity 0.25 T k / E = 1 row per expert at T = 16): the
// tokens whose every slot is dropped get the shared expert's output alone,
// completed by the shared tiles' arrivals.
func.func @forward(%x: tensor<16x64xf32>, %wr: tensor<64x8xf32>, %w1: tensor<8x64x32xf32>,
                   %w2: tensor<8x32x64xf32>, %s1: tensor<64x24xf32>, %s2: tensor<24x64xf32>,
                   %sg: tensor<64x1xf32>) -> tensor<16x64xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2) shared_gate(%sg)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>,
          capacity_factor = 0.25 : f64}
         : (tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x32xf32>, tensor<8x32x64xf32>,
            tensor<64x24xf32>, tensor<24x64xf32>, tensor<64x1xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}
