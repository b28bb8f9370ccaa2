// Quantized layers (#moe.quant, docs/spec.md §2.1) in the passes and
// lowerings that do not handle them yet: one error naming the pass, on the
// layer (or the chain op that holds the weights); and the ones that carry
// them: --moe-decompose and --moe-fuse pass the scales, zero points and
// the attribute on to moe.expert_ffn and moe.fused_experts,
// --moe-dense-to-moesart changes the routing only, --canonicalize keeps the
// scales.
//
// RUN: moe-opt %s --moe-decompose | FileCheck %s --check-prefix=DECOMPOSE
// RUN: moe-opt %s --moe-decompose --moe-fuse | FileCheck %s --check-prefix=FUSE
// RUN: not moe-opt %s --moe-generate-vjp 2>&1 | FileCheck %s --check-prefix=VJP
// RUN: moe-opt %s --moe-decompose | not moe-opt --moe-generate-vjp 2>&1 | FileCheck %s --check-prefix=VJP-CHAIN
// RUN: moe-opt %s --moe-decompose --moe-fuse | not moe-opt --moe-generate-vjp 2>&1 | FileCheck %s --check-prefix=VJP-FUSED
// RUN: not moe-opt %s --moe-shard-experts=ranks=2 2>&1 | FileCheck %s --check-prefix=SHARD
// RUN: not moe-opt %s --moe-dense-to-soft 2>&1 | FileCheck %s --check-prefix=SOFT
// RUN: not moe-opt %s --moe-print-cost 2>&1 | FileCheck %s --check-prefix=COST
// The CPU lowers them (test/lowering/convert-moe-to-cpu-int4.mlir), the GPU
// the layer and the fused chain (test/gpu/convert-moe-to-gpu-quant.mlir,
// emulated-quant.test), and moe-run binds the i4 storage type
// (--fill-random: uniform codes):
// RUN: moe-opt %s --moe-cpu-pipeline -o /dev/null
// RUN: moe-opt %s --moe-nvptx-pipeline="chip=sm_90a features=+ptx80 format=isa" -o /dev/null
// RUN: moe-opt %s --moe-decompose --moe-fuse | moe-opt --moe-nvptx-pipeline="chip=sm_90a features=+ptx80 format=isa" -o /dev/null
// RUN: moe-opt %s --moe-dense-to-moesart="k=2" --canonicalize | FileCheck %s --check-prefix=KEEP
// RUN: moe-run %s --fill-random --device=cpu 2>&1 | FileCheck %s --check-prefix=TOOL
//
// DECOMPOSE-LABEL: func.func @layer
// DECOMPOSE:      moe.dispatch
// DECOMPOSE-NEXT: moe.expert_ffn %rows, %offsets experts(%arg2, %arg3) expert_scales(%arg4, %arg5) expert_zero_points(%arg6, %arg7) {activation = #moe.activation<relu>, quant = #moe.quant<int4, group = 8, zero_point>}
// DECOMPOSE-NEXT: moe.combine
// FUSE-LABEL: func.func @layer
// FUSE:       moe.fused_experts %arg0, %indices, %weights experts(%arg2, %arg3) expert_scales(%arg4, %arg5) expert_zero_points(%arg6, %arg7) {activation = #moe.activation<relu>, num_experts = 4 : i64, quant = #moe.quant<int4, group = 8, zero_point>}
// VJP-CHAIN: error: 'moe.expert_ffn' op has quantized expert weights (#moe.quant<int4, group = 8, zero_point>), which --moe-generate-vjp does not support yet
// VJP-FUSED: error: 'moe.fused_experts' op has quantized expert weights (#moe.quant<int4, group = 8, zero_point>), which --moe-generate-vjp does not support yet
// VJP: error: 'moe.layer' op has quantized expert weights (#moe.quant<int4, group = 8, zero_point>), which --moe-generate-vjp does not support yet
// SHARD: error: 'moe.layer' op has quantized expert weights ({{.*}}), which --moe-shard-experts does not support yet
// SOFT: error: 'moe.layer' op has quantized expert weights ({{.*}}), which --moe-dense-to-soft does not support yet
// COST: error: 'moe.layer' op has quantized expert weights ({{.*}}), which --moe-print-cost does not support yet
// TOOL: result #0: tensor<4x16xf32> checksum: sum={{.*}} abs_sum={{.*}}
//
// KEEP-LABEL: func.func @layer
// KEEP-NEXT: %output = moe.layer %arg0 router(%arg1) experts(%arg2, %arg3) expert_scales(%arg4, %arg5) expert_zero_points(%arg6, %arg7) {
// KEEP-SAME: quant = #moe.quant<int4, group = 8, zero_point>
// KEEP-SAME: routing = #moe.moesart<k = 2>

func.func @layer(%x: tensor<4x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x8xi4>,
                 %w2: tensor<4x8x16xi4>, %s1: tensor<4x2x8xf32>, %s2: tensor<4x1x16xf32>,
                 %z1: tensor<4x2x8xi4>, %z2: tensor<4x1x16xi4>) -> tensor<4x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         expert_zero_points(%z1, %z2)
         {routing = #moe.dense, activation = #moe.activation<relu>,
          quant = #moe.quant<int4, group = 8, zero_point>}
         : (tensor<4x16xf32>, tensor<16x4xf32>, tensor<4x16x8xi4>, tensor<4x8x16xi4>,
            tensor<4x2x8xf32>, tensor<4x1x16xf32>, tensor<4x2x8xi4>, tensor<4x1x16xi4>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
