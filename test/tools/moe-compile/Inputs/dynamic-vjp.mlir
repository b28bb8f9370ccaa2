// A layer with a dynamic token count, a MOESART router (inference form) and
// a shared SwiGLU expert, for dynamic-vjp.test (its gradient f_vjp).
func.func @f(%x: tensor<?x16xf32>, %wr: tensor<16x4xf32> {moe.param = "wr"},
             %w1: tensor<4x16x32xf32> {moe.param = "w1"},
             %w2: tensor<4x16x16xf32> {moe.param = "w2"},
             %s1: tensor<16x24xf32> {moe.param = "s1"},
             %s2: tensor<12x16xf32> {moe.param = "s2"}) -> tensor<?x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2)
         {routing = #moe.moesart<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<?x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x16x16xf32>,
            tensor<16x24xf32>, tensor<12x16xf32>) -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}
