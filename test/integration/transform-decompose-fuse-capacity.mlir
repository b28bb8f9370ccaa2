// `--moe-decompose --moe-fuse` on layers the spec examples do not cover:
//  * @capacity: #moe.top_k<k = 2> with a GShard capacity factor of 1.0
//    (T=128, E=4: C = ceil(1.0 * 128 * 2 / 4) = 64 assignments per expert,
//    kept in token order, the overflow dropped and the kept weights not
//    renormalised). The capacity factor must move onto moe.fused_experts,
//    whose routing plan applies it; moe-ref reports how many assignments
//    the data drops (FileCheck insists on some), and the last check shows
//    that the dropless reference differs.
//  * @top3: #moe.top_k<k = 3> on the same weights, dropless: three
//    contributions per token, summed by moe.combine in rank order but by
//    the fused op in expert order, so fused and unfused are not bit-equal
//    by construction.
// Each fused result must equal the unfused one within 1e-5 relative and the
// independent reference within 1e-4. D=32 H=64, relu, expert biases;
// moe-ref refuses data where a k-th/(k+1)-th logit gap is below 1e-4.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-opt %s --moe-decompose --moe-fuse -o %t/fused.mlir 2>&1 | count 0
// RUN: FileCheck %s --check-prefix=IR --input-file %t/fused.mlir \
// RUN:   --implicit-check-not=moe.dispatch --implicit-check-not=moe.expert_ffn \
// RUN:   --implicit-check-not=moe.combine --implicit-check-not=moe.layer
//
// RUN: moe-ref layer --tokens 128 --dim 32 --experts 4 --hidden 64 \
// RUN:   --activation relu --routing top_k --k 2 --expert-biases \
// RUN:   --capacity-factor 1.0 --data-seed 164 --min-margin 1e-4 \
// RUN:   --names wr,w1,w2,b1,b2 --params %t/p.safetensors --input %t/x.npy \
// RUN:   --expected %t/y_cap_ref.npy | FileCheck %s --check-prefix=DROPS
// RUN: moe-ref layer --tokens 128 --dim 32 --experts 4 --hidden 64 \
// RUN:   --activation relu --routing top_k --k 2 --expert-biases \
// RUN:   --data-seed 164 --min-margin 1e-4 \
// RUN:   --names wr,w1,w2,b1,b2 --params %t/p2.safetensors --input %t/x2.npy \
// RUN:   --expected %t/y_k2_ref.npy
// RUN: moe-ref layer --tokens 128 --dim 32 --experts 4 --hidden 64 \
// RUN:   --activation relu --routing top_k --k 3 --expert-biases \
// RUN:   --data-seed 164 --min-margin 1e-4 \
// RUN:   --names wr,w1,w2,b1,b2 --params %t/p3.safetensors --input %t/x3.npy \
// RUN:   --expected %t/y_top3_ref.npy
//
// RUN: moe-run %s --device=%moe_device --entry=capacity --input=%t/x.npy \
// RUN:   --params=%t/p.safetensors --output=%t/y_cap.npy | FileCheck %s
// RUN: moe-run %t/fused.mlir --device=%moe_device --entry=capacity --input=%t/x.npy \
// RUN:   --params=%t/p.safetensors --output=%t/y_cap_fused.npy | FileCheck %s
// RUN: moe-ref compare %t/y_cap_fused.npy %t/y_cap.npy --tol 1e-5
// RUN: moe-ref compare %t/y_cap_fused.npy %t/y_cap_ref.npy --tol 1e-4
// RUN: not moe-ref compare %t/y_cap_fused.npy %t/y_k2_ref.npy --tol 1e-4 2>&1 \
// RUN:   | FileCheck %s --check-prefix=DIFFERENT
//
// RUN: moe-run %s --device=%moe_device --entry=top3 --input=%t/x.npy \
// RUN:   --params=%t/p.safetensors --output=%t/y_top3.npy | FileCheck %s
// RUN: moe-run %t/fused.mlir --device=%moe_device --entry=top3 --input=%t/x.npy \
// RUN:   --params=%t/p.safetensors --output=%t/y_top3_fused.npy | FileCheck %s
// RUN: moe-ref compare %t/y_top3_fused.npy %t/y_top3.npy --tol 1e-5
// RUN: moe-ref compare %t/y_top3_fused.npy %t/y_top3_ref.npy --tol 1e-4
//
// DROPS: capacity 64, {{[1-9][0-9]*}} assignments dropped
// CHECK: result #0: tensor<128x32xf32> checksum:
// DIFFERENT: FAIL: {{.*}} rows over tolerance
//
// IR-LABEL: func.func @capacity
// IR: %[[O:.*]] = moe.route %arg0 router(%arg1)
// IR: %[[W:.*]], %[[I:.*]] = moe.gate %[[O]] {routing = #moe.top_k<k = 2>}
// IR: %[[Y:.*]] = moe.fused_experts %arg0, %[[I]], %[[W]] experts(%arg2, %arg3) expert_biases(%arg4, %arg5) {activation = #moe.activation<relu>, capacity_factor = 1.000000e+00 : f64, num_experts = 4 : i64}
// IR: return %[[Y]]
// IR-LABEL: func.func @top3
// IR: %[[W3:.*]], %[[I3:.*]] = moe.gate %{{.*}} {routing = #moe.top_k<k = 3>}
// IR: %[[Y3:.*]] = moe.fused_experts %arg0, %[[I3]], %[[W3]] experts(%arg2, %arg3) expert_biases(%arg4, %arg5) {activation = #moe.activation<relu>, num_experts = 4 : i64}
// IR: return %[[Y3]]

func.func @capacity(%x: tensor<128x32xf32>,
                    %wr: tensor<32x4xf32> {moe.param = "wr"},
                    %w1: tensor<4x32x64xf32> {moe.param = "w1"},
                    %w2: tensor<4x64x32xf32> {moe.param = "w2"},
                    %b1: tensor<4x64xf32> {moe.param = "b1"},
                    %b2: tensor<4x32xf32> {moe.param = "b2"}) -> tensor<128x32xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_biases(%b1, %b2)
      {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>,
       capacity_factor = 1.0 : f64}
      : (tensor<128x32xf32>, tensor<32x4xf32>, tensor<4x32x64xf32>, tensor<4x64x32xf32>,
         tensor<4x64xf32>, tensor<4x32xf32>) -> tensor<128x32xf32>
  return %y : tensor<128x32xf32>
}

func.func @top3(%x: tensor<128x32xf32>,
                %wr: tensor<32x4xf32> {moe.param = "wr"},
                %w1: tensor<4x32x64xf32> {moe.param = "w1"},
                %w2: tensor<4x64x32xf32> {moe.param = "w2"},
                %b1: tensor<4x64xf32> {moe.param = "b1"},
                %b2: tensor<4x32xf32> {moe.param = "b2"}) -> tensor<128x32xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_biases(%b1, %b2)
      {routing = #moe.top_k<k = 3>, activation = #moe.activation<relu>}
      : (tensor<128x32xf32>, tensor<32x4xf32>, tensor<4x32x64xf32>, tensor<4x64x32xf32>,
         tensor<4x64xf32>, tensor<4x32xf32>) -> tensor<128x32xf32>
  return %y : tensor<128x32xf32>
}
