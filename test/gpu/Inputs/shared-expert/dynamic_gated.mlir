// A dynamic T (the row tile chosen at run time: 16 at T = 37, 64 at T = 300),
// relu, a gate, Hs = 96 > H = 32 (the shared expert's GEMM1 spans two column
// blocks of the CUDA-core kernel, the routed experts' only one).
func.func @forward(%x: tensor<?x64xf32>, %wr: tensor<64x8xf32>, %w1: tensor<8x64x32xf32>,
                   %w2: tensor<8x32x64xf32>, %s1: tensor<64x96xf32>, %s2: tensor<96x64xf32>,
                   %sg: tensor<64x1xf32>) -> tensor<?x64xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2) shared_gate(%sg)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<?x64xf32>, tensor<64x8xf32>, tensor<8x64x32xf32>, tensor<8x32x64xf32>,
            tensor<64x96xf32>, tensor<96x64xf32>, tensor<64x1xf32>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
