// RUN: moe-opt %s --moe-shard-experts="ranks=2" -split-input-file -verify-diagnostics | FileCheck %s
// RUN: moe-opt %s --moe-shard-experts="ranks=2" -split-input-file -verify-diagnostics | moe-opt -split-input-file | FileCheck %s
// RUN: moe-opt %examples/top2_swiglu.mlir --moe-shard-experts="ranks=4" --moe-print-cost -o /dev/null | FileCheck %s --check-prefix=COST
// RUN: moe-opt %examples/deepseek_style.mlir --moe-shard-experts="ranks=4" --moe-print-cost -o /dev/null | FileCheck %s --check-prefix=COST-BF16
// RUN: not moe-opt %examples/top2_swiglu.mlir --moe-shard-experts="ranks=0" 2>&1 | FileCheck %s --check-prefix=RANKS
// RANKS: error: --moe-shard-experts: option 'ranks' must be >= 1, got 0
//
// --moe-print-cost on the SPMD IR adds the all-to-all volume per rank and
// layer: of a rank's k routed rows per token, (N-1)/N go to other ranks
// under uniform routing; the dispatch sends D * sizeof(T) bytes per row, the
// combine gets D * 4 back (f32 expert outputs).
// top2_swiglu: k = 2, D = 256, f32, N = 4: 2 * 3/4 * 256 * 4 = 1536 both ways.
// COST: all-to-all per rank and layer (uniform routing; per token row of the rank; the same again received for the rank's experts):
// COST-NEXT: top2_swiglu.mlir:{{[0-9]+}}: ranks 4, experts/rank 2, k 2, D 256: dispatch sends 1536.0 B, combine receives 1536.0 B
// deepseek_style: k = 4, D = 256, bf16: 4 * 3/4 * 256 * 2 = 1536, f32 back: 3072.
// COST-BF16: deepseek_style.mlir:{{[0-9]+}}: ranks 4, experts/rank 8, k 4, D 256: dispatch sends 1536.0 B, combine receives 3072.0 B
//
// --moe-shard-experts (docs/spec.md §8): every moe.layer becomes the
// SPMD program of one rank of a 1-D shard.grid. Expert weights are split on
// the expert dimension (E/N per rank), token rows on dimension 0 (dynamic);
// the counts of all ranks are summed with shard.all_reduce; dispatch and
// combine become the ragged exchanges moe.exchange_dispatch/_combine.

// CHECK-LABEL: shard.grid @moe_ranks(shape = 2)
// CHECK-LABEL: func.func @top2(
// CHECK-SAME: %[[X:[^:]*]]: tensor<?x16xf32> {moe.split = 0 : i64},
// CHECK-SAME: %[[WR:[^:]*]]: tensor<16x4xf32> {moe.param = "wr"},
// CHECK-SAME: %[[W1:[^:]*]]: tensor<2x16x32xf32> {moe.param = "w1", moe.split = 0 : i64},
// CHECK-SAME: %[[W2:[^:]*]]: tensor<2x32x16xf32> {moe.param = "w2", moe.split = 0 : i64})
// CHECK-SAME: -> (tensor<?x16xf32> {moe.split = 0 : i64})
// CHECK: %[[RANK:.*]] = shard.process_linear_index on @moe_ranks : index
// CHECK: %[[O:.*]] = moe.route %[[X]] router(%[[WR]]) : (tensor<?x16xf32>, tensor<16x4xf32>) -> tensor<?x4xf32>
// CHECK-NEXT: %[[W:.*]], %[[I:.*]] = moe.gate %[[O]] {routing = #moe.top_k<k = 2>}
// CHECK-NEXT: %[[ROWS:.*]], %[[OFF:.*]], %{{.*}}, %[[POS:.*]] = moe.dispatch %[[X]], %[[I]] {num_experts = 4 : i64} : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?x16xf32>, tensor<5xi32>, tensor<?xi32>, tensor<?x2xi32>)
// The rank's counts on its row of an [N, E] tensor, summed over the grid.
// CHECK: %[[LOCAL:.*]] = tensor.generate
// CHECK: arith.cmpi eq, %{{.*}}, %[[RANK]] : index
// CHECK: } : tensor<2x4xi32>
// CHECK-NEXT: %[[COUNTS:.*]] = shard.all_reduce %[[LOCAL]] on @moe_ranks grid_axes = [0] : tensor<2x4xi32> -> tensor<2x4xi32>
// CHECK-NEXT: %[[RECV:.*]] = moe.exchange_dispatch %[[ROWS]], %[[OFF]], %[[COUNTS]] on @moe_ranks : (tensor<?x16xf32>, tensor<5xi32>, tensor<2x4xi32>) -> tensor<?x16xf32>
// CHECK: %[[LOFF:.*]] = tensor.generate
// CHECK: } : tensor<3xi32>
// CHECK-NEXT: %[[OUT:.*]] = moe.expert_ffn %[[RECV]], %[[LOFF]] experts(%[[W1]], %[[W2]]) {activation = #moe.activation<gelu>} : (tensor<?x16xf32>, tensor<3xi32>, tensor<2x16x32xf32>, tensor<2x32x16xf32>) -> tensor<?x16xf32>
// CHECK: %[[ZEROS:.*]] = linalg.fill
// CHECK-NEXT: %[[BACK:.*]] = moe.exchange_combine %[[OUT]], %[[OFF]], %[[COUNTS]] into %[[ZEROS]] on @moe_ranks
// CHECK-NEXT: %[[Y:.*]] = moe.combine %[[BACK]], %[[W]], %[[POS]] : (tensor<?x16xf32>, tensor<?x2xf32>, tensor<?x2xi32>) -> tensor<?x16xf32>
// CHECK-NEXT: return %[[Y]] : tensor<?x16xf32>
func.func @top2(%x: tensor<10x16xf32>, %wr: tensor<16x4xf32> {moe.param = "wr"},
                %w1: tensor<4x16x32xf32> {moe.param = "w1"},
                %w2: tensor<4x32x16xf32> {moe.param = "w2"}) -> tensor<10x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu>}
         : (tensor<10x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<10x16xf32>
  return %y : tensor<10x16xf32>
}

// -----

// A capacity counts assignments in global order: C from the global T (the
// sum of the grid's row counts), and rank q keeps
// min(cnt[q, e], max(C - sum_{q' < q} cnt[q', e], 0)) rows.
// The shared expert runs where the token lives (replicated weights, no
// moe.split), and joins the combine.
// CHECK-LABEL: func.func @capacity_shared(
// CHECK-SAME: %[[S1:[^:]*]]: tensor<8x12xf32>, %[[S2:[^:]*]]: tensor<12x8xf32>)
// CHECK: %[[ONEHOT:.*]] = tensor.insert %{{.*}} into %{{.*}}[%{{.*}}] : tensor<2xi64>
// CHECK-NEXT: %[[ROWS:.*]] = shard.all_reduce %[[ONEHOT]] on @moe_ranks grid_axes = [0] : tensor<2xi64> -> tensor<2xi64>
// CHECK: moe.dispatch
// CHECK-NOT: capacity_factor
// CHECK: %[[ALL:.*]] = shard.all_reduce %{{.*}} on @moe_ranks grid_axes = [0] : tensor<2x4xi32>
// CHECK: arith.constant 5.000000e-01 : f64
// CHECK: math.ceil
// CHECK: %[[KEPT:.*]] = tensor.generate
// CHECK: scf.for
// CHECK: tensor.extract %[[ALL]]
// CHECK: arith.minsi
// CHECK: } : tensor<2x4xi32>
// CHECK: moe.exchange_dispatch %{{.*}}, %{{.*}}, %[[KEPT]] on @moe_ranks
// CHECK: moe.exchange_combine %{{.*}}, %{{.*}}, %[[KEPT]] into
// CHECK: %[[S:.*]] = moe.shared_expert %{{.*}} shared(%[[S1]], %[[S2]])
// CHECK-NEXT: moe.combine %{{.*}}, %{{.*}}, %{{.*}} shared_output(%[[S]])
func.func @capacity_shared(%x: tensor<?x8xf32>, %wr: tensor<8x4xf32>,
                           %w1: tensor<4x8x12xf32>, %w2: tensor<4x12x8xf32>,
                           %s1: tensor<8x12xf32>, %s2: tensor<12x8xf32>) -> tensor<?x8xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) shared(%s1, %s2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>,
          capacity_factor = 0.5 : f64}
         : (tensor<?x8xf32>, tensor<8x4xf32>, tensor<4x8x12xf32>, tensor<4x12x8xf32>,
            tensor<8x12xf32>, tensor<12x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

// Two layers: the second takes the first's rows as they are on the rank.
// CHECK-LABEL: func.func @two_layers(
// CHECK-SAME: tensor<?x8xf32> {moe.split = 0 : i64}
// CHECK-SAME: -> (tensor<?x8xf32> {moe.split = 0 : i64})
// CHECK: %[[Y0:.*]] = moe.combine
// CHECK: moe.route %[[Y0]]
// CHECK: %[[Y1:.*]] = moe.combine
// CHECK-NEXT: return %[[Y1]]
func.func @two_layers(%x: tensor<?x8xf32>, %wr: tensor<8x4xf32>,
                      %w1: tensor<4x8x12xf32>, %w2: tensor<4x12x8xf32>,
                      %vr: tensor<8x4xf32>,
                      %v1: tensor<4x8x12xf32>, %v2: tensor<4x12x8xf32>) -> tensor<?x8xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 1>, activation = #moe.activation<relu>}
         : (tensor<?x8xf32>, tensor<8x4xf32>, tensor<4x8x12xf32>, tensor<4x12x8xf32>) -> tensor<?x8xf32>
  %z = moe.layer %y router(%vr) experts(%v1, %v2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<?x8xf32>, tensor<8x4xf32>, tensor<4x8x12xf32>, tensor<4x12x8xf32>) -> tensor<?x8xf32>
  return %z : tensor<?x8xf32>
}

// -----

func.func @uneven(%x: tensor<?x8xf32>, %wr: tensor<8x3xf32>,
                  %w1: tensor<3x8x12xf32>, %w2: tensor<3x12x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{layer #0 of @uneven: E = 3 experts cannot be split over 2 ranks (E % N != 0)}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 1>, activation = #moe.activation<relu>}
         : (tensor<?x8xf32>, tensor<8x3xf32>, tensor<3x8x12xf32>, tensor<3x12x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @residual(%x: tensor<?x8xf32>, %wr: tensor<8x4xf32>,
                    %w1: tensor<4x8x12xf32>, %w2: tensor<4x12x8xf32>) -> tensor<?x8xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 1>, activation = #moe.activation<relu>}
         : (tensor<?x8xf32>, tensor<8x4xf32>, tensor<4x8x12xf32>, tensor<4x12x8xf32>) -> tensor<?x8xf32>
  // expected-error @+1 {{'arith.addf' uses token rows that --moe-shard-experts splits over the ranks; only moe.layer inputs and the return may}}
  %r = arith.addf %x, %y : tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}

// -----

func.func @weights_not_arguments(%x: tensor<?x8xf32>, %wr: tensor<8x4xf32>,
                                 %w2: tensor<4x12x8xf32>) -> tensor<?x8xf32> {
  %w1 = arith.constant dense<1.0> : tensor<4x8x12xf32>
  // expected-error @+1 {{layer #0 of @weights_not_arguments: expert weights must be function arguments to be split over the ranks}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 1>, activation = #moe.activation<relu>}
         : (tensor<?x8xf32>, tensor<8x4xf32>, tensor<4x8x12xf32>, tensor<4x12x8xf32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @soft(%x: tensor<2x4x8xf32>, %phi: tensor<8x4x1xf32>,
                %w1: tensor<4x8x12xf32>, %w2: tensor<4x12x8xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'moe.soft_layer' cannot be made expert-parallel by --moe-shard-experts (Soft MoE mixes tokens of a group)}}
  %y = moe.soft_layer %x slots(%phi) experts(%w1, %w2) {activation = #moe.activation<relu>}
         : (tensor<2x4x8xf32>, tensor<8x4x1xf32>, tensor<4x8x12xf32>, tensor<4x12x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
