// RUN: moe-opt %s --convert-moe-to-cpu | FileCheck %s
// RUN: moe-opt %s --moe-cpu-pipeline="cpu=sapphirerapids" -o /dev/null
// RUN: moe-opt %s --moe-generate-vjp --convert-moe-to-cpu | FileCheck %s --check-prefix=VJP
//
// #moe.cpu_config's amx (docs/MoEDialect.md): the bf16 expert GEMMs on the
// AMX tile unit. The host asks for the tile state first; each GEMM kernel
// (its name carries the pair count of its packed weights: K = 70 -> 35,
// K = 45 -> 23) first copies its left operand as the tiles read it (GEMM1:
// the gathered token rows, in chunks of 32, 32 and 6 columns, into
// memref<1 x (N + 16) x 70>), then runs micro-tiles of 16 rows x 4 tiles of
// 16 columns: the C tiles carried by the loop over steps of 16 pairs, A's
// tiles and B's (from the pairwise panel, row stride 2 x 64) loaded per
// step, the last step's tiles of 3 pairs (35 = 2 x 16 + 3), the C tiles
// stored once for the epilogue, in an alloca scope. The pipeline compiles
// it (for a CPU with AMX; the execution test is
// test/integration/cpu-amx.test).
func.func @f(%x: tensor<?x70xbf16>, %wr: tensor<70x4xbf16>, %w1: tensor<4x70x45xbf16>,
             %w2: tensor<4x45x70xbf16>) -> tensor<?x70xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
      {routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu>,
       moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6,
         micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32,
         bf16_dot = true, amx = true>}
      : (tensor<?x70xbf16>, tensor<70x4xbf16>, tensor<4x70x45xbf16>, tensor<4x45x70xbf16>) -> tensor<?x70xbf16>
  return %y : tensor<?x70xbf16>
}

// CHECK-LABEL: func.func @f(
// CHECK:       call @moeCpuRequestAmx() : () -> ()
// CHECK:       call @__moe_cpu_gemm1_gelu_gather_packed_bf16dot_amx35_
// CHECK:       call @__moe_cpu_gemm2_scaled_packed_bf16dot_amx23_
// CHECK-LABEL: func.func private @__moe_cpu_gemm1_gelu_gather_packed_bf16dot_amx35_
// CHECK:       %[[A:.*]] = memref.alloc(%{{.*}}) : memref<1x?x70xbf16>
// CHECK:       scf.parallel
// CHECK:         vector.maskedload %arg0[{{.*}} vector<32xi1>, vector<32xbf16> into vector<32xbf16>
// CHECK:         vector.maskedload %arg0[{{.*}} vector<32xi1>, vector<32xbf16> into vector<32xbf16>
// CHECK:         vector.maskedload %arg0[{{.*}} vector<6xi1>, vector<6xbf16> into vector<6xbf16>
// CHECK:       scf.parallel
// CHECK:         memref.alloca_scope
// CHECK-NEXT:      %[[C:.*]] = memref.alloca() : memref<16x64xf32>
// CHECK:           %[[Z0:.*]] = amx.tile_zero : !amx.tile<16x16xf32>
// CHECK-COUNT-3:   amx.tile_zero : !amx.tile<16x16xf32>
// CHECK:           scf.for %[[KK:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[Z0]],
// CHECK:             %[[AT:.*]] = amx.tile_load %[[A]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<1x?x70xbf16> into !amx.tile<16x32xbf16>
// CHECK:             %[[BT:.*]] = amx.tile_load %arg1[%{{.*}}, %{{.*}}, %[[KK]], %{{.*}}], %{{.*}} : memref<?x?x?x?xbf16, {{.*}}> into !amx.tile<16x32xbf16>
// CHECK-NEXT:        amx.tile_mulf %[[AT]], %[[BT]], %[[ACC]] : !amx.tile<16x32xbf16>, !amx.tile<16x32xbf16>, !amx.tile<16x16xf32>
// CHECK-COUNT-3:     amx.tile_mulf
// CHECK:             scf.yield
// CHECK:           amx.tile_load %[[A]][{{.*}}] : memref<1x?x70xbf16> into !amx.tile<16x6xbf16>
// CHECK:           amx.tile_load %arg1[{{.*}}], %{{.*}} : memref<?x?x?x?xbf16, {{.*}}> into !amx.tile<3x32xbf16>
// CHECK-NEXT:      amx.tile_mulf %{{.*}} : !amx.tile<16x6xbf16>, !amx.tile<3x32xbf16>, !amx.tile<16x16xf32>
// CHECK-COUNT-4:   amx.tile_store %[[C]]
// CHECK:           memref.alloca_scope.return
// CHECK-LABEL: func.func private @__moe_cpu_gemm2_scaled_packed_bf16dot_amx23_
// CHECK:         amx.tile_mulf

// The backward recomputes z = rows W1 on the tile unit too, from W1 packed
// pairwise, and runs its dX GEMMs there (dh = dout W2^T: K = 70; drows =
// dz W1^T: K = 45), their f32 cotangents split into three bf16 parts
// (hi, mid = bf16(a - hi), lo: memref<3 x (N + 16) x K'>), each part's
// tile multiplied into the same accumulators; the weight gradients read f32
// (FMA).
// VJP-LABEL: func.func @f_vjp(
// VJP:         call @moeCpuRequestAmx() : () -> ()
// VJP:         call @__moe_cpu_expert_ffn_grad_gelu_packed1_amx35_23_35_packed2_
// VJP-LABEL: func.func private @__moe_cpu_expert_ffn_grad_gelu_packed1_amx35_23_35_packed2_
// VJP:         memref.alloc(%{{.*}}) : memref<1x?x70xbf16>
// VJP:         amx.tile_mulf %{{.*}} : !amx.tile<16x32xbf16>, !amx.tile<16x32xbf16>, !amx.tile<16x16xf32>
// VJP:         %[[S:.*]] = memref.alloc(%{{.*}}) : memref<3x?x70xbf16>
// VJP:         %[[HI:.*]] = arith.truncf %[[V:.*]] : vector<32xf32> to vector<32xbf16>
// VJP:         %[[R1:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : vector<32xi1>, vector<32xf32>
// VJP-NEXT:    %[[MID:.*]] = arith.truncf %[[R1]] : vector<32xf32> to vector<32xbf16>
// VJP:         %[[LO:.*]] = arith.truncf %{{.*}} : vector<32xf32> to vector<32xbf16>
// VJP:         vector.store %[[HI]], %[[S]]
// VJP:         vector.store %[[MID]], %[[S]]
// VJP:         vector.store %[[LO]], %[[S]]
// VJP:         amx.tile_load %[[S]]{{.*}} into !amx.tile<16x32xbf16>
// VJP:         memref.alloc(%{{.*}}) : memref<3x?x46xbf16>
