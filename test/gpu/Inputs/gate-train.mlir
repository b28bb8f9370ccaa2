// The MOESART training gate alone (used by exec-moesart-cpu-vs-gpu.test).
func.func @gate(%o: tensor<4096x16xf32>, %seed: tensor<i64>)
    -> (tensor<4096x2xf32>, tensor<4096x2xi32>, tensor<f32>) {
  %w, %i, %l = moe.gate %o seed(%seed) {routing = #moe.moesart<k = 2>, training}
      : (tensor<4096x16xf32>, tensor<i64>) -> (tensor<4096x2xf32>, tensor<4096x2xi32>, tensor<f32>)
  return %w, %i, %l : tensor<4096x2xf32>, tensor<4096x2xi32>, tensor<f32>
}
