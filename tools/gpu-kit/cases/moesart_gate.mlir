// GPU check kit: MOESART training selection. The chosen experts (#1) of
// 4096 tokens must equal the CPU path's bit for bit (Philox draws and the
// routing exp/log are one definition on both paths, DESIGN 7).
func.func @moesart_gate(%o: tensor<4096x16xf32>, %seed: tensor<i64>)
    -> (tensor<4096x2xf32>, tensor<4096x2xi32>, tensor<f32>) {
  %w, %i, %loss = moe.gate %o seed(%seed) {routing = #moe.moesart<k = 2>, training}
      : (tensor<4096x16xf32>, tensor<i64>) -> (tensor<4096x2xf32>, tensor<4096x2xi32>, tensor<f32>)
  return %w, %i, %loss : tensor<4096x2xf32>, tensor<4096x2xi32>, tensor<f32>
}
