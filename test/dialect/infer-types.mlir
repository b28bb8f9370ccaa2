// RUN: moe-opt %s --resolve-ranked-shaped-type-result-dims | FileCheck %s
//
// The chain ops reify their result shapes (ReifyRankedShapedTypeOpInterface,
// dialect/MoEOps.cpp): a tensor.dim of a dynamic result size becomes the
// operand sizes it follows from (docs/spec.md §3.3): dispatch rows T*K from
// the ids, positions T, dense gate K = E, route E, combine T from the weights,
// expert_ffn N from its rows.

// CHECK-LABEL: func.func @dims
// CHECK-SAME:    (%[[X:.*]]: tensor<?x16xf32>, %[[I:.*]]: tensor<?x2xi32>, %[[O:.*]]: tensor<?x?xf32>, %[[WR:.*]]: tensor<16x?xf32>, %{{.*}}: tensor<4x16x32xf32>, %{{.*}}: tensor<4x32x16xf32>, %[[W:.*]]: tensor<?x2xf32>)
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2 : index
// CHECK:         %[[T:.*]] = tensor.dim %[[I]], %[[C0]] : tensor<?x2xi32>
// CHECK-NEXT:    %[[N:.*]] = arith.muli %[[T]], %[[C2]] : index
// CHECK-NEXT:    %[[T2:.*]] = tensor.dim %[[I]], %[[C0]] : tensor<?x2xi32>
// CHECK-NEXT:    %[[K:.*]] = tensor.dim %[[O]], %[[C1]] : tensor<?x?xf32>
// CHECK-NEXT:    %[[E:.*]] = tensor.dim %[[WR]], %[[C1]] : tensor<16x?xf32>
// CHECK-NEXT:    %[[TY:.*]] = tensor.dim %[[W]], %[[C0]] : tensor<?x2xf32>
// CHECK-NEXT:    %[[T3:.*]] = tensor.dim %[[I]], %[[C0]] : tensor<?x2xi32>
// CHECK-NEXT:    %[[NF:.*]] = arith.muli %[[T3]], %[[C2]] : index
// CHECK-NEXT:    return %[[N]], %[[T2]], %[[K]], %[[E]], %[[TY]], %[[NF]]
func.func @dims(%x: tensor<?x16xf32>, %i: tensor<?x2xi32>, %o: tensor<?x?xf32>, %wr: tensor<16x?xf32>,
                %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>, %w: tensor<?x2xf32>) -> (index, index, index, index, index, index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %rows, %off, %src, %pos = moe.dispatch %x, %i {num_experts = 4 : i64}
      : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?x16xf32>, tensor<5xi32>, tensor<?xi32>, tensor<?x2xi32>)
  %n = tensor.dim %rows, %c0 : tensor<?x16xf32>
  %t = tensor.dim %pos, %c0 : tensor<?x2xi32>
  %gw, %gi = moe.gate %o {routing = #moe.dense} : (tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xi32>)
  %k = tensor.dim %gi, %c1 : tensor<?x?xi32>
  %l = moe.route %x router(%wr) : (tensor<?x16xf32>, tensor<16x?xf32>) -> tensor<?x?xf32>
  %e = tensor.dim %l, %c1 : tensor<?x?xf32>
  %out = moe.expert_ffn %rows, %off experts(%w1, %w2) {activation = #moe.activation<relu>}
      : (tensor<?x16xf32>, tensor<5xi32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<?x16xf32>
  %y = moe.combine %out, %w, %pos : (tensor<?x16xf32>, tensor<?x2xf32>, tensor<?x2xi32>) -> tensor<?x16xf32>
  %ty = tensor.dim %y, %c0 : tensor<?x16xf32>
  %nf = tensor.dim %out, %c0 : tensor<?x16xf32>
  return %n, %t, %k, %e, %ty, %nf : index, index, index, index, index, index
}

// A layer's y and a shared expert's f32 output follow the input's T.
// CHECK-LABEL: func.func @layer_dims
// CHECK-SAME:    (%[[X:.*]]: tensor<?x16xbf16>
// CHECK:         %[[T:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<?x16xbf16>
// CHECK-NEXT:    %[[T2:.*]] = tensor.dim %[[X]], %{{.*}} : tensor<?x16xbf16>
// CHECK-NEXT:    return %[[T]], %[[T2]]
func.func @layer_dims(%x: tensor<?x16xbf16>, %wr: tensor<16x4xbf16>, %w1: tensor<4x16x64xbf16>, %w2: tensor<4x32x16xbf16>,
                      %s1: tensor<16x64xbf16>, %s2: tensor<32x16xbf16>) -> (index, index) {
  %c0 = arith.constant 0 : index
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<?x16xbf16>, tensor<16x4xbf16>, tensor<4x16x64xbf16>, tensor<4x32x16xbf16>) -> tensor<?x16xbf16>
  %t = tensor.dim %y, %c0 : tensor<?x16xbf16>
  %s = moe.shared_expert %x shared(%s1, %s2) {activation = #moe.activation<swiglu>}
         : (tensor<?x16xbf16>, tensor<16x64xbf16>, tensor<32x16xbf16>) -> tensor<?x16xf32>
  %t2 = tensor.dim %s, %c0 : tensor<?x16xf32>
  return %t, %t2 : index, index
}
