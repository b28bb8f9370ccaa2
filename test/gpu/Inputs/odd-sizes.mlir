// A layer whose sizes are not multiples of 4 (D = 30, H = 18, E = 5) and whose
// T is dynamic: the GEMMs' vector loads are never aligned here, so every tile
// is staged element by element (the fallback of docs/gpu.md).
func.func @forward(%x: tensor<?x30xf32>,
                   %wr: tensor<30x5xf32>, %br: tensor<5xf32>,
                   %w1: tensor<5x30x36xf32>, %w2: tensor<5x18x30xf32>,
                   %b1: tensor<5x36xf32>, %b2: tensor<5x30xf32>) -> tensor<?x30xf32> {
  %y = moe.layer %x router(%wr, %br) experts(%w1, %w2) expert_biases(%b1, %b2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<?x30xf32>, tensor<30x5xf32>, tensor<5xf32>, tensor<5x30x36xf32>,
            tensor<5x18x30xf32>, tensor<5x36xf32>, tensor<5x30xf32>) -> tensor<?x30xf32>
  return %y : tensor<?x30xf32>
}
