#!/usr/bin/env bash
# Prints a Mixtral-style moe.layer (top-k of E SwiGLU experts, f32) with the
# given T D H E K, for benchmarks: make-layer.sh T D H E K > layer.mlir
set -euo pipefail
T=$1 D=$2 H=$3 E=$4 K=$5
H2=$((2 * H))
cat <<MLIR
func.func @forward(%x: tensor<${T}x${D}xf32>,
                   %wr: tensor<${D}x${E}xf32> {moe.param = "gate.weight"},
                   %w1: tensor<${E}x${D}x${H2}xf32> {moe.param = "experts.gate_up"},
                   %w2: tensor<${E}x${H}x${D}xf32> {moe.param = "experts.down"}) -> tensor<${T}x${D}xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = ${K}>, activation = #moe.activation<swiglu>}
         : (tensor<${T}x${D}xf32>, tensor<${D}x${E}xf32>, tensor<${E}x${D}x${H2}xf32>, tensor<${E}x${H}x${D}xf32>)
         -> tensor<${T}x${D}xf32>
  return %y : tensor<${T}x${D}xf32>
}
MLIR
