// RUN: moe-opt %s -split-input-file --convert-moe-to-cpu | FileCheck %s
// RUN: moe-opt %s -split-input-file --convert-moe-to-cpu=pack-weights=false | FileCheck %s --check-prefix=UNPACKED
// RUN: moe-opt %s -split-input-file --moe-cpu-pipeline -o /dev/null
//
// int4 group-quantized expert weights (#moe.quant<int4, group = G[,
// zero_point]>, docs/spec.md §2.1) on the CPU (docs/quantization.md, "On
// the CPU"). An i4 element occupies a byte in memory.
//
// Packed (the default, for an even group): the pack kernel puts the codes
// of rows 2kk and 2kk + 1 of a panel column into one byte (low, high 4
// bits) and the scales and zero points (as f32) into panels per group of
// K. Each GEMM first sums every row of A over every group of K (16 running
// sums over the group's whole chunks of 16, reduced in lane order, then the
// last elements one by one). The GEMMs
// loop over the groups; per pair of rows they load the bytes, widen them to
// i32 and take the low (& 15) and the high (>> 4) codes, converted exactly;
// the products with the two rows of A accumulate into partial sums P, and
// per group the accumulators get (P - z A) s: fma(-z, A, P), then
// fma(that, s, acc).

// CHECK-LABEL: func.func @forward
// CHECK: call @__moe_cpu_pack_gated_int4g16_zp_v512
// CHECK: call @__moe_cpu_pack_int4g16_zp_v512
// CHECK: call @__moe_cpu_gemm1_swiglu_gather_packed_int4g16_zp_v512
// CHECK: call @__moe_cpu_gemm2_scaled_packed_int4g16_zp_v512

// CHECK-LABEL: func.func private @__moe_cpu_pack_gated_int4g16_zp_v512
// CHECK: scf.parallel
// CHECK: %[[LO:.*]] = memref.load %{{.*}} : memref<?x?x?xi4, {{.*}}>
// CHECK-NEXT: %[[LO8:.*]] = arith.extui %[[LO]] : i4 to i8
// CHECK-NEXT: %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT: %[[K1:.*]] = arith.addi %{{.*}}, %[[C1]] : index
// CHECK-NEXT: %[[IN:.*]] = arith.cmpi slt, %[[K1]], %{{.*}} : index
// CHECK-NEXT: %[[K1C:.*]] = arith.select %[[IN]], %[[K1]], %{{.*}} : index
// CHECK-NEXT: %[[HI:.*]] = memref.load %{{.*}}[%{{.*}}, %[[K1C]], %{{.*}}] : memref<?x?x?xi4, {{.*}}>
// CHECK-NEXT: %[[HI8:.*]] = arith.extui %[[HI]] : i4 to i8
// CHECK-NEXT: %[[ODD:.*]] = arith.select %[[IN]], %[[HI8]], %{{.*}} : i8
// CHECK-NEXT: %[[C4:.*]] = arith.constant 4 : i8
// CHECK-NEXT: %[[H:.*]] = arith.shli %[[ODD]], %[[C4]] : i8
// CHECK-NEXT: %[[BYTE:.*]] = arith.ori %[[LO8]], %[[H]] : i8
// CHECK-NEXT: %[[PAD:.*]] = arith.select %{{.*}}, %[[BYTE]], %{{.*}} : i8
// CHECK-NEXT: memref.store %[[PAD]], %{{.*}} : memref<?x?x?x?xi8, {{.*}}>
// The zero points, as f32 (8 for padding columns).
// CHECK: %[[Z:.*]] = memref.load %{{.*}} : memref<?x?x?xi4, {{.*}}>
// CHECK-NEXT: %[[Z32:.*]] = arith.extui %[[Z]] : i4 to i32
// CHECK-NEXT: %[[ZF:.*]] = arith.sitofp %[[Z32]] : i32 to f32
// CHECK-NEXT: %[[C8:.*]] = arith.constant 8.000000e+00 : f32
// CHECK-NEXT: %[[ZP:.*]] = arith.select %{{.*}}, %[[ZF]], %[[C8]] : f32
// CHECK-NEXT: memref.store %[[ZP]], %{{.*}} : memref<?x?x?x?xf32, {{.*}}>

// CHECK-LABEL: func.func private @__moe_cpu_gemm1_swiglu_gather_packed_int4g16_zp_v512
// CHECK: %[[SUMS:.*]] = memref.alloc(%{{.*}}, %{{.*}}) : memref<?x?xf32>
// CHECK: scf.parallel
// CHECK: %[[LANES:.*]] = scf.for %{{.*}} iter_args(%[[VACC:.*]] = %{{.*}}) -> (vector<16xf32>) {
// CHECK-NEXT: %[[AV:.*]] = vector.load %{{.*}} : memref<?x?xf32, {{.*}}>, vector<16xf32>
// CHECK-NEXT: %[[VNEXT:.*]] = arith.addf %[[VACC]], %[[AV]] : vector<16xf32>
// CHECK-NEXT: scf.yield %[[VNEXT]] : vector<16xf32>
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[TOTAL:.*]] = vector.reduction <add>, %[[LANES]], %[[ZERO]] : vector<16xf32> into f32
// CHECK: %[[SUM:.*]] = scf.for %{{.*}} iter_args(%[[ACC:.*]] = %[[TOTAL]]) -> (f32) {
// CHECK-NEXT: %[[AK:.*]] = memref.load
// CHECK-NEXT: %[[NEXT:.*]] = arith.addf %[[ACC]], %[[AK]] : f32
// CHECK-NEXT: scf.yield %[[NEXT]] : f32
// CHECK: memref.store %[[SUM]], %[[SUMS]]
// CHECK: %{{.*}}:24 = scf.for %[[KB:[a-z0-9_]+]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(
// CHECK: %[[PART:.*]]:24 = scf.for %[[KK:[a-z0-9_]+]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(
// CHECK: %[[BYTES:.*]] = vector.load %{{.*}}[%{{.*}}, %{{.*}}, %[[KK]], %{{.*}}] : memref<?x?x?x?xi8, {{.*}}>, vector<16xi8>
// CHECK-NEXT: %[[X:.*]] = arith.extui %[[BYTES]] : vector<16xi8> to vector<16xi32>
// CHECK-NEXT: %[[M15:.*]] = arith.constant dense<15> : vector<16xi32>
// CHECK-NEXT: %[[QLO:.*]] = arith.andi %[[X]], %[[M15]] : vector<16xi32>
// CHECK-NEXT: %[[FLO:.*]] = arith.sitofp %[[QLO]] : vector<16xi32> to vector<16xf32>
// CHECK-NEXT: %[[S4:.*]] = arith.constant dense<4> : vector<16xi32>
// CHECK-NEXT: %[[QHI:.*]] = arith.shrui %[[X]], %[[S4]] : vector<16xi32>
// CHECK-NEXT: %[[FHI:.*]] = arith.sitofp %[[QHI]] : vector<16xi32> to vector<16xf32>
// CHECK: %[[A0:.*]] = vector.broadcast %{{.*}} : f32 to vector<16xf32>
// CHECK: %[[A1:.*]] = vector.broadcast %{{.*}} : f32 to vector<16xf32>
// CHECK-NEXT: %[[P0:.*]] = vector.fma %[[A0]], %[[FLO]], %{{.*}} : vector<16xf32>
// CHECK-NEXT: vector.fma %[[A1]], %[[FHI]], %[[P0]] : vector<16xf32>
// CHECK: scf.yield
// An odd K ends with one row: the low halves of the last pair row.
// CHECK: %[[LAST:.*]]:24 = scf.if
// CHECK: arith.andi
// CHECK: scf.yield
// CHECK: %[[PS:.*]] = vector.load %{{.*}}[%{{.*}}, %{{.*}}, %[[KB]], %{{.*}}] : memref<?x?x?x?xf32, {{.*}}>, vector<16xf32>
// CHECK-NEXT: %[[PZ:.*]] = vector.load %{{.*}}[%{{.*}}, %{{.*}}, %[[KB]], %{{.*}}] : memref<?x?x?x?xf32, {{.*}}>, vector<16xf32>
// CHECK-NEXT: %[[NEGZ:.*]] = arith.negf %[[PZ]] : vector<16xf32>
// CHECK: %[[AS:.*]] = memref.load %[[SUMS]][%{{.*}}, %[[KB]]] : memref<?x?xf32>
// CHECK-NEXT: %[[ASV:.*]] = vector.broadcast %[[AS]] : f32 to vector<16xf32>
// CHECK-NEXT: %[[CORR:.*]] = vector.fma %[[NEGZ]], %[[ASV]], %[[LAST]]#0 : vector<16xf32>
// CHECK-NEXT: vector.fma %[[CORR]], %[[PS]], %{{.*}} : vector<16xf32>

// GEMM2 on the FMA path: the columns two panels (2 x 64) at a time, their
// full 6-row tiles, then a tail of one row in one wide tile over both
// panels (1 x 8 accumulators: the codes of panel P and P + 1), where the
// second panel is in the column block.
// CHECK-LABEL: func.func private @__moe_cpu_gemm2_scaled_packed_int4g16_zp_v512
// CHECK: scf.for %[[COL0:.*]] = %{{.*}} to %[[COLEND:.*]] step %c128{{(_[0-9]+)?}} {
// CHECK-NEXT: %[[C64:.*]] = arith.constant 64 : index
// CHECK-NEXT: %[[COL1:.*]] = arith.addi %[[COL0]], %[[C64]] : index
// CHECK-NEXT: %[[SECOND:.*]] = arith.cmpi slt, %[[COL1]], %[[COLEND]] : index
// CHECK: %{{.*}}:24 = scf.for
// CHECK: scf.if %[[SECOND]] {
// CHECK: %{{.*}}:24 = scf.for
// CHECK: %[[ONE:.*]] = arith.cmpi eq, %{{.*}}, %{{.*}} : index
// CHECK-NEXT: %[[WIDE:.*]] = arith.andi %[[SECOND]], %[[ONE]] : i1
// CHECK-NEXT: scf.if %[[WIDE]] {
// CHECK: %[[P0:.*]] = arith.divsi %[[COL0]], %{{.*}} : index
// CHECK-NEXT: %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT: %[[P1:.*]] = arith.addi %[[P0]], %[[C1]] : index
// CHECK: %{{.*}}:8 = scf.for
// CHECK: %{{.*}}:8 = scf.for %[[KK:[a-z0-9_]+]] =
// CHECK: vector.load %{{.*}}[%{{.*}}, %[[P0]], %[[KK]], %{{.*}}] : memref<?x?x?x?xi8, {{.*}}>, vector<16xi8>
// CHECK: vector.load %{{.*}}[%{{.*}}, %[[P1]], %[[KK]], %{{.*}}] : memref<?x?x?x?xi8, {{.*}}>, vector<16xi8>
// CHECK: } else {

// Unpacked (pack-weights=false): each weight (q - z) * s exactly as it is
// loaded, the codes and zero points one per lane (an i4 vector would be
// packed 2 to a byte, unlike the i4 memref), the scales one masked vector
// load (contiguous along N).
// UNPACKED-LABEL: func.func private @__moe_cpu_gemm1_swiglu_gather_int4g16_zp_v512
// UNPACKED: %[[S:.*]] = vector.maskedload %{{.*}} : memref<?x?x?xf32, {{.*}}>, vector<16xi1>, vector<16xf32> into vector<16xf32>
// UNPACKED: %[[Q:.*]] = memref.load %{{.*}} : memref<?x?x?xi4, {{.*}}>
// UNPACKED-NEXT: %[[Q32:.*]] = arith.extui %[[Q]] : i4 to i32
// UNPACKED-NEXT: %[[QF:.*]] = arith.sitofp %[[Q32]] : i32 to f32
// UNPACKED-NEXT: %[[Z:.*]] = memref.load %{{.*}} : memref<?x?x?xi4, {{.*}}>
// UNPACKED-NEXT: %[[Z32:.*]] = arith.extui %[[Z]] : i4 to i32
// UNPACKED-NEXT: %[[ZF:.*]] = arith.sitofp %[[Z32]] : i32 to f32
// UNPACKED-NEXT: %[[D:.*]] = arith.subf %[[QF]], %[[ZF]] : f32
// UNPACKED-NEXT: vector.insert %[[D]], %{{.*}} [0] : f32 into vector<16xf32>
// UNPACKED: %[[DIFF:.*]] = vector.insert %{{.*}}, %{{.*}} [15] : f32 into vector<16xf32>
// UNPACKED-NEXT: %[[W:.*]] = arith.mulf %[[DIFF]], %[[S]] : vector<16xf32>
// UNPACKED: vector.fma
// UNPACKED-LABEL: func.func private @__moe_cpu_gemm2_scaled_int4g16_zp_v512

func.func @forward(%x: tensor<?x40xf32>, %wr: tensor<40x4xf32>, %w1: tensor<4x40x48xi4>,
                   %w2: tensor<4x24x40xi4>, %s1: tensor<4x3x48xf32>, %s2: tensor<4x2x40xf32>,
                   %z1: tensor<4x3x48xi4>, %z2: tensor<4x2x40xi4>) -> tensor<?x40xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         expert_zero_points(%z1, %z2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>,
          quant = #moe.quant<int4, group = 16, zero_point>}
         : (tensor<?x40xf32>, tensor<40x4xf32>, tensor<4x40x48xi4>, tensor<4x24x40xi4>,
            tensor<4x3x48xf32>, tensor<4x2x40xf32>, tensor<4x3x48xi4>, tensor<4x2x40xi4>) -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}

// -----

// Symmetric int4 (zero point 8, no operands) with an odd group: the codes
// cannot be packed two rows to a byte within a group, so the GEMMs read the
// weights unpacked.
// CHECK-LABEL: func.func @symmetric_odd_group
// CHECK-NOT: call @__moe_cpu_pack
// CHECK: call @__moe_cpu_gemm1_gelu_gather_int4g5_v512
// CHECK: call @__moe_cpu_gemm2_scaled_int4g5_v512
// CHECK-LABEL: func.func private @__moe_cpu_gemm1_gelu_gather_int4g5_v512
// CHECK: %[[Q:.*]] = memref.load %{{.*}} : memref<?x?x?xi4, {{.*}}>
// CHECK-NEXT: %[[Q32:.*]] = arith.extui %[[Q]] : i4 to i32
// CHECK-NEXT: %[[QF:.*]] = arith.sitofp %[[Q32]] : i32 to f32
// CHECK-NEXT: arith.subf %[[QF]], %{{.*}} : f32
func.func @symmetric_odd_group(%x: tensor<?x40xf32>, %wr: tensor<40x4xf32>, %w1: tensor<4x40x20xi4>,
                               %w2: tensor<4x20x40xi4>, %s1: tensor<4x8x20xf32>,
                               %s2: tensor<4x4x40xf32>) -> tensor<?x40xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu>,
          quant = #moe.quant<int4, group = 5>}
         : (tensor<?x40xf32>, tensor<40x4xf32>, tensor<4x40x20xi4>, tensor<4x20x40xi4>,
            tensor<4x8x20xf32>, tensor<4x4x40xf32>) -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}

// -----

// bf16 tokens with AVX512_BF16 (bf16_dot): the bytes become bf16 pairs
// (128 + q_lo, 128 + q_hi): (x | x << 12) & 0x000F000F (983055) puts the
// codes at bits 0..3 and 16..19, or 0x43004300 (the bf16 of 128 twice;
// 1124090624); one
// vdpbf16ps per row and vector adds a_k (128 + q_k) + a_k+1 (128 +
// q_k+1); per group the zero points carry the 128: fma(-(z + 128), A, P).
// CHECK-LABEL: func.func @bf16_dot
// CHECK: call @__moe_cpu_gemm1_swiglu_gather_packed_bf16dot_int4g32_zp_v512
// CHECK-LABEL: func.func private @__moe_cpu_gemm1_swiglu_gather_packed_bf16dot_int4g32_zp_v512
// CHECK: %[[BYTES:.*]] = vector.load %{{.*}} : memref<?x?x?x?xi8, {{.*}}>, vector<16xi8>
// CHECK-NEXT: %[[X:.*]] = arith.extui %[[BYTES]] : vector<16xi8> to vector<16xi32>
// CHECK-NEXT: %[[S12:.*]] = arith.constant dense<12> : vector<16xi32>
// CHECK-NEXT: %[[SH:.*]] = arith.shli %[[X]], %[[S12]] : vector<16xi32>
// CHECK-NEXT: %[[BOTH:.*]] = arith.ori %[[X]], %[[SH]] : vector<16xi32>
// CHECK-NEXT: %[[M:.*]] = arith.constant dense<983055> : vector<16xi32>
// CHECK-NEXT: %[[CODES:.*]] = arith.andi %[[BOTH]], %[[M]] : vector<16xi32>
// CHECK-NEXT: %[[C128:.*]] = arith.constant dense<1124090624> : vector<16xi32>
// CHECK-NEXT: %[[BITS:.*]] = arith.ori %[[CODES]], %[[C128]] : vector<16xi32>
// CHECK-NEXT: %[[PAIRS:.*]] = vector.bitcast %[[BITS]] : vector<16xi32> to vector<32xbf16>
// CHECK: x86vector.avx512.dot %{{.*}}, %{{.*}}, %[[PAIRS]] : vector<32xbf16> -> vector<16xf32>
// CHECK: vector.load %{{.*}} : memref<?x?x?x?xf32, {{.*}}>, vector<16xf32>
// CHECK-NEXT: %[[Z:.*]] = vector.load %{{.*}} : memref<?x?x?x?xf32, {{.*}}>, vector<16xf32>
// CHECK-NEXT: %[[O:.*]] = arith.constant dense<1.280000e+02> : vector<16xf32>
// CHECK-NEXT: %[[ZO:.*]] = arith.addf %[[Z]], %[[O]] : vector<16xf32>
// CHECK-NEXT: arith.negf %[[ZO]] : vector<16xf32>
func.func @bf16_dot(%x: tensor<?x64xbf16>, %wr: tensor<64x8xbf16>, %w1: tensor<8x64x64xi4>,
                    %w2: tensor<8x32x64xi4>, %s1: tensor<8x2x64xf32>, %s2: tensor<8x1x64xf32>,
                    %z1: tensor<8x2x64xi4>, %z2: tensor<8x1x64xi4>) -> tensor<?x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         expert_zero_points(%z1, %z2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>,
          quant = #moe.quant<int4, group = 32, zero_point>,
          moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6,
            micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32,
            bf16_dot = true>}
         : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8x64x64xi4>, tensor<8x32x64xi4>,
            tensor<8x2x64xf32>, tensor<8x1x64xf32>, tensor<8x2x64xi4>, tensor<8x1x64xi4>) -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}
