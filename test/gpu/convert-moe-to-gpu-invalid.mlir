// REQUIRES: host-supports-nvptx
// RUN: moe-opt %s -split-input-file -verify-diagnostics --convert-moe-to-gpu

// The kernels are specialised on the number of experts (the routing plan's
// size): a dynamic one is one error naming the op (any element type).
func.func @dynamic_experts(%w1: tensor<?x16x32xbf16>, %w2: tensor<?x32x16xbf16>) -> tensor<16x16xbf16> {
  %off = arith.constant dense<[0, 4, 8, 12, 16]> : tensor<5xi32>
  %rows = arith.constant dense<0.0> : tensor<16x16xbf16>
  // expected-error @below {{cannot lower to the GPU: the number of experts is dynamic}}
  %y = moe.expert_ffn %rows, %off experts(%w1, %w2) {activation = #moe.activation<relu>}
         : (tensor<16x16xbf16>, tensor<5xi32>, tensor<?x16x32xbf16>, tensor<?x32x16xbf16>)
         -> tensor<16x16xbf16>
  return %y : tensor<16x16xbf16>
}

// -----

// convert-moe-to-gpu's big-tile-rows (average rows per expert from which the
// sm_90a plan takes 128-row tiles) is a count: a negative one is one error.
// RUN: not moe-opt %s --convert-moe-to-gpu="wgmma=true big-tile-rows=-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BIGTILE
// BIGTILE: error: convert-moe-to-gpu: option big-tile-rows must be >= 0 (got -1)
// The wgmma kernels leave 0 or 1 commit groups in flight at the end of a
// stage (the next loads reuse the buffer of the stage before): any other
// wgmma-groups-in-flight is one error.
// RUN: not moe-opt %s --convert-moe-to-gpu="wgmma=true wgmma-groups-in-flight=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=INFLIGHT
// RUN: not moe-opt %s --convert-moe-to-gpu="wgmma-groups-in-flight=-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=INFLIGHTNEG
// INFLIGHT: error: convert-moe-to-gpu: wgmma-groups-in-flight must be 0 or 1, got 2
// INFLIGHTNEG: error: convert-moe-to-gpu: wgmma-groups-in-flight must be 0 or 1, got -1
// mma-stages (cp.async stages of the prefill tensor-core GEMMs): 0 (the
// defaults) or 2 to 8; one stage is no pipeline, nine would not fit an
// sm_80 block's shared memory at 64 rows.
// RUN: not moe-opt %s --convert-moe-to-gpu="mma-stages=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=STAGES1
// RUN: not moe-opt %s --convert-moe-to-gpu="wgmma=true mma-stages=9" -o /dev/null 2>&1 | FileCheck %s --check-prefix=STAGES9
// STAGES1: error: convert-moe-to-gpu: option mma-stages must be 0 (the defaults) or in 2..8 (got 1)
// STAGES9: error: convert-moe-to-gpu: option mma-stages must be 0 (the defaults) or in 2..8 (got 9)
