// Pass options are bounded, and passes that cannot apply say why instead of
// failing the verifier on their own output.
// RUN: not moe-opt %s --moe-dense-to-soft=slots-per-expert=2305843009213693952 -o /dev/null 2>&1 | FileCheck %s --check-prefix=SLOTS
// RUN: not moe-opt %s --moe-dense-to-soft="slots-per-expert=1073741824" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ROWS
// RUN: moe-opt %s --moe-decompose -o /dev/null 2>&1 | FileCheck %s --check-prefix=DECOMPOSE

// SLOTS: error: moe-dense-to-soft: slots-per-expert must be <= 2^31 - 1 (slot rows are indexed with i32), got 2305843009213693952
// ROWS: error: cannot turn this dense layer into Soft MoE: E * G * S = 4 * 1 * 1073741824 slot rows exceed 2^31 - 1 (they are indexed with i32)
// DECOMPOSE: warning: 'moe.layer' not decomposed: its T * K = 1073741824 * 4 dispatched rows exceed 2^31 - 1, and moe.dispatch indexes rows with i32
// DECOMPOSE-NOT: error

func.func @f(%x: tensor<1073741824x1xf32>, %wr: tensor<1x4xf32>, %w1: tensor<4x1x1xf32>, %w2: tensor<4x1x1xf32>) -> tensor<1073741824x1xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<1073741824x1xf32>, tensor<1x4xf32>, tensor<4x1x1xf32>, tensor<4x1x1xf32>) -> tensor<1073741824x1xf32>
  return %y : tensor<1073741824x1xf32>
}
