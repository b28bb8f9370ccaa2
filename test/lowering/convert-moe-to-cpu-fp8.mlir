// RUN: moe-opt %s --convert-moe-to-cpu | FileCheck %s
// RUN: moe-opt %s --convert-moe-to-cpu=pack-weights=false | FileCheck %s --check-prefix=UNPACKED
// RUN: moe-opt %s --convert-moe-to-cpu | FileCheck %s --check-prefix=DOT
// RUN: moe-opt %s --moe-cpu-pipeline -o /dev/null
//
// FP8 block-scaled expert weights (#moe.quant<fp8_e4m3>, docs/spec.md §2.1)
// on the CPU (docs/quantization.md, "On the CPU").
//
// Packed (the default): the pack kernel copies the E4M3 codes into the
// micro-kernels' panels as bytes and builds the panel scales, s * 256 per
// column and block of K, NaN (0x7FC00000) where the column has a NaN code
// (S.1111.111: & 127 == 127) in the block. The GEMMs loop over the blocks
// of K: the codes sign-extended, << 7 and & 0xBFFF (49151) are the f16 of
// q * 2^-8, widened to f32 and summed with FMAs; each block's partial sums
// times its panel scales are added to the accumulators.

// CHECK-LABEL: func.func @forward
// CHECK: call @__moe_cpu_pack_gated_fp8b16x32_v512
// CHECK: call @__moe_cpu_pack_fp8b16x32_v512
// CHECK: call @__moe_cpu_gemm1_swiglu_gather_packed_fp8b16x32_v512
// CHECK: call @__moe_cpu_gemm2_scaled_packed_fp8b16x32_v512

// CHECK-LABEL: func.func private @__moe_cpu_pack_gated_fp8b16x32_v512
// CHECK: vector.maskedload {{.*}} into vector<16xf8E4M3FN>
// CHECK: %[[S:.*]] = memref.load %{{.*}} : memref<?x?x?xf32, {{.*}}>
// CHECK-NEXT: %[[C256:.*]] = arith.constant 2.560000e+02 : f32
// CHECK-NEXT: %[[SCALED:.*]] = arith.mulf %[[S]], %[[C256]] : f32
// CHECK: %[[CODE:.*]] = arith.bitcast %{{.*}} : f8E4M3FN to i8
// CHECK-NEXT: %[[C127:.*]] = arith.constant 127 : i8
// CHECK-NEXT: %[[MAG:.*]] = arith.andi %[[CODE]], %[[C127]] : i8
// CHECK-NEXT: arith.constant 127 : i8
// CHECK-NEXT: arith.cmpi eq, %[[MAG]]
// CHECK: %[[NAN:.*]] = arith.constant 0x7FC00000 : f32
// CHECK-NEXT: arith.select %{{.*}}, %[[NAN]], %[[SCALED]] : f32

// CHECK-LABEL: func.func private @__moe_cpu_gemm1_swiglu_gather_packed_fp8b16x32_v512
// CHECK: %{{.*}}:24 = scf.for %[[KB:[a-z0-9_]+]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(
// CHECK: %{{.*}}:24 = scf.for %[[K:[a-z0-9_]+]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(
// CHECK: %[[CODES:.*]] = vector.load %{{.*}}[%{{.*}}, %{{.*}}, %[[K]], %{{.*}}] : memref<?x?x?x?xf8E4M3FN, {{.*}}>, vector<16xf8E4M3FN>
// CHECK-NEXT: %[[I8:.*]] = arith.bitcast %[[CODES]] : vector<16xf8E4M3FN> to vector<16xi8>
// CHECK-NEXT: %[[I16:.*]] = arith.extsi %[[I8]] : vector<16xi8> to vector<16xi16>
// CHECK-NEXT: %[[C7:.*]] = arith.constant dense<7> : vector<16xi16>
// CHECK-NEXT: %[[SH:.*]] = arith.shli %[[I16]], %[[C7]] : vector<16xi16>
// CHECK-NEXT: %[[MASK:.*]] = arith.constant dense<-16385> : vector<16xi16>
// CHECK-NEXT: %[[BITS:.*]] = arith.andi %[[SH]], %[[MASK]] : vector<16xi16>
// CHECK-NEXT: %[[HALF:.*]] = arith.bitcast %[[BITS]] : vector<16xi16> to vector<16xf16>
// CHECK-NEXT: arith.extf %[[HALF]] : vector<16xf16> to vector<16xf32>
// CHECK: vector.fma
// CHECK: scf.yield
// CHECK: %[[PS:.*]] = vector.load %{{.*}}[%{{.*}}, %{{.*}}, %[[KB]], %{{.*}}] : memref<?x?x?x?xf32, {{.*}}>, vector<16xf32>
// CHECK: vector.fma %{{.*}}, %[[PS]], %{{.*}} : vector<16xf32>

// Unpacked (pack-weights=false): each weight is dequantized exactly as it
// is loaded (q * s rounded once to f32): the 7 magnitude bits << 7 and the
// sign into bit 15, the NaN code to the f16 NaN (0x7E00 = 32256), widened,
// * 256 gives q, * s. GEMM2's vectors (blocks of 32 columns, 16 lanes) each
// lie in one block: one scale, broadcast (`_vs`); GEMM1's up columns start
// at H = 24, so its scales are read per lane (vector.insert).
// UNPACKED-LABEL: func.func private @__moe_cpu_gemm1_swiglu_gather_fp8b16x32_v512
// UNPACKED: vector.maskedload {{.*}} into vector<16xf8E4M3FN>
// UNPACKED: vector.insert %{{.*}} [15] : f32 into vector<16xf32>
// UNPACKED-NEXT: arith.bitcast %{{.*}} : vector<16xf8E4M3FN> to vector<16xi8>
// UNPACKED-NEXT: arith.extui %{{.*}} : vector<16xi8> to vector<16xi16>
// UNPACKED:      %[[MAG:.*]] = arith.andi %{{.*}}, %{{.*}} : vector<16xi16>
// UNPACKED:      %[[SIGN:.*]] = arith.shli
// UNPACKED:      %[[SHIFTED:.*]] = arith.shli %[[MAG]]
// UNPACKED-NEXT: %[[BITS:.*]] = arith.ori %[[SHIFTED]], %[[SIGN]]
// UNPACKED-NEXT: arith.constant dense<127> : vector<16xi16>
// UNPACKED-NEXT: %[[NAN:.*]] = arith.cmpi eq, %[[MAG]]
// UNPACKED-NEXT: %[[QNAN:.*]] = arith.constant dense<32256> : vector<16xi16>
// UNPACKED-NEXT: %[[SEL:.*]] = arith.select %[[NAN]], %[[QNAN]], %[[BITS]]
// UNPACKED-NEXT: %[[HALF:.*]] = arith.bitcast %[[SEL]] : vector<16xi16> to vector<16xf16>
// UNPACKED-NEXT: %[[F:.*]] = arith.extf %[[HALF]] : vector<16xf16> to vector<16xf32>
// UNPACKED-NEXT: %[[C256:.*]] = arith.constant dense<2.560000e+02> : vector<16xf32>
// UNPACKED-NEXT: %[[Q:.*]] = arith.mulf %[[F]], %[[C256]]
// UNPACKED-NEXT: arith.mulf %[[Q]], %{{.*}} : vector<16xf32>
// UNPACKED: vector.fma
// UNPACKED-LABEL: func.func private @__moe_cpu_gemm2_scaled_fp8b16x32_vs_v512
// UNPACKED: %[[S:.*]] = memref.load %{{.*}} : memref<?x?x?xf32, {{.*}}>
// UNPACKED-NEXT: vector.broadcast %[[S]] : f32 to vector<16xf32>
// UNPACKED: vector.fma

func.func @forward(%x: tensor<?x40xf32>, %wr: tensor<40x4xf32>,
                   %w1: tensor<4x40x48xf8E4M3FN>, %w2: tensor<4x24x40xf8E4M3FN>,
                   %s1: tensor<4x3x2xf32>, %s2: tensor<4x2x2xf32>) -> tensor<?x40xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>,
          quant = #moe.quant<fp8_e4m3, block = [16, 32]>,
          moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = false>}
         : (tensor<?x40xf32>, tensor<40x4xf32>, tensor<4x40x48xf8E4M3FN>, tensor<4x24x40xf8E4M3FN>,
            tensor<4x3x2xf32>, tensor<4x2x2xf32>) -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}

// With bf16 tokens and #moe.cpu_config's fp8_dot (AVX512_VBMI and
// AVX512_BF16) the FP8 GEMMs take the dot product. The pack kernels
// (`_vnni`) interleave pairs of rows column by column and store two
// vectors' pairs per 64-byte chunk in the byte unpacks' lane order (per
// 128-bit lane L: bytes 8L..8L+7 of the first vector's pairs, then the
// second's); the panel scales are s itself (no * 256: the codes are q).
// The GEMMs loop over the blocks of K and, inside, over pairs of rows: a
// chunk of 64 codes, its signs (& -128), the high bytes of the codes' exact
// bf16s by vpermi2b from two 64-entry tables (code 1 = 2^-9 = 0x3B00: 59;
// codes 2, 3 = 0x3B80, 0x3BC0: 59; codes 4..15 = 0x3C00..0x3CF0: 60; code 0
// and the NaN code: 0) or'ed with the signs, the low bytes by a second
// lookup (codes 2, 3: 0x80, 0xC0 = -128, -64; 5: 0x20 = 32), the two
// unpacks of each 128-bit lane making the pairs of two vectors, then one
// vdpbf16ps per row and vector. K = 40 has no odd pair; each block's
// partial sums times its panel scales go to the accumulators.
// DOT-LABEL: func.func private @llvm.x86.avx512.vpermi2var.qi.512(vector<64xi8>, vector<64xi8>, vector<64xi8>) -> vector<64xi8>
// DOT-LABEL: func.func @dot_forward
// DOT: call @__moe_cpu_pack_gated_vnni_fp8b16x32_v512
// DOT: call @__moe_cpu_pack_vnni_fp8b16x32_v512
// DOT: call @__moe_cpu_gemm1_swiglu_gather_packed_bf16dot_fp8b16x32_v512
// DOT: call @__moe_cpu_gemm2_scaled_packed_bf16dot_fp8b16x32_v512

// DOT-LABEL: func.func private @__moe_cpu_pack_gated_vnni_fp8b16x32_v512
// DOT: %[[P0:.*]] = vector.shuffle %{{.*}}, %{{.*}} [0, 16, 1, 17, {{.*}}, 15, 31] : vector<16xf8E4M3FN>, vector<16xf8E4M3FN>
// DOT: %[[P1:.*]] = vector.shuffle %{{.*}}, %{{.*}} [0, 16, 1, 17, {{.*}}, 15, 31] : vector<16xf8E4M3FN>, vector<16xf8E4M3FN>
// DOT-NEXT: %[[CHUNK:.*]] = vector.shuffle %[[P0]], %[[P1]] [0, 1, 2, 3, 4, 5, 6, 7, 32, 33, 34, 35, 36, 37, 38, 39, 8, 9, 10, 11, 12, 13, 14, 15, 40, 41, 42, 43, 44, 45, 46, 47, 16, {{.*}}, 24, 25, 26, 27, 28, 29, 30, 31, 56, 57, 58, 59, 60, 61, 62, 63] : vector<32xf8E4M3FN>, vector<32xf8E4M3FN>
// DOT-NEXT: %[[C0:.*]] = arith.constant 0 : index
// DOT-NEXT: vector.store %[[CHUNK]], %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %[[C0]]] : memref<?x?x?x?xf8E4M3FN, {{.*}}>, vector<64xf8E4M3FN>
// DOT: %[[S:.*]] = memref.load %{{.*}} : memref<?x?x?xf32, {{.*}}>
// DOT-NOT: arith.mulf
// DOT: %[[NAN:.*]] = arith.constant 0x7FC00000 : f32
// DOT-NEXT: arith.select %{{.*}}, %[[NAN]], %[[S]] : f32

// DOT-LABEL: func.func private @__moe_cpu_gemm1_swiglu_gather_packed_bf16dot_fp8b16x32_v512
// DOT: %[[TAIL:.*]] = arith.remsi %{{.*}}, %c6 : index
// DOT: %[[SMALL:.*]] = arith.andi
// DOT: %{{.*}}:24 = scf.for %[[KB:[a-z0-9_]+]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(
// DOT: %{{.*}}:24 = scf.for %[[KK:[a-z0-9_]+]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(
// DOT: %[[CODES:.*]] = vector.load %{{.*}}[%{{.*}}, %{{.*}}, %[[KK]], %{{.*}}] : memref<?x?x?x?xf8E4M3FN, {{.*}}>, vector<64xf8E4M3FN>
// DOT-NEXT: %[[I8:.*]] = arith.bitcast %[[CODES]] : vector<64xf8E4M3FN> to vector<64xi8>
// DOT-NEXT: %[[M128:.*]] = arith.constant dense<-128> : vector<64xi8>
// DOT-NEXT: %[[SIGNS:.*]] = arith.andi %[[I8]], %[[M128]] : vector<64xi8>
// DOT-NEXT: %[[HI0:.*]] = arith.constant dense<[0, 59, 59, 59, 60, 60, {{.*}}]> : vector<64xi8>
// DOT-NEXT: %[[HI1:.*]] = arith.constant dense<[{{.*}}]> : vector<64xi8>
// DOT-NEXT: %[[HI:.*]] = func.call @llvm.x86.avx512.vpermi2var.qi.512(%[[HI0]], %[[I8]], %[[HI1]])
// DOT-NEXT: %[[HIS:.*]] = arith.ori %[[HI]], %[[SIGNS]] : vector<64xi8>
// DOT-NEXT: %[[LO0:.*]] = arith.constant dense<[0, 0, -128, -64, 0, 32, {{.*}}]> : vector<64xi8>
// DOT-NEXT: %[[LO1:.*]] = arith.constant dense<[{{.*}}]> : vector<64xi8>
// DOT-NEXT: %[[LO:.*]] = func.call @llvm.x86.avx512.vpermi2var.qi.512(%[[LO0]], %[[I8]], %[[LO1]])
// DOT-NEXT: %[[U0:.*]] = vector.shuffle %[[LO]], %[[HIS]] [0, 64, 1, 65, 2, 66, 3, 67, 4, 68, 5, 69, 6, 70, 7, 71, 16, 80, {{.*}}, 55, 119] : vector<64xi8>, vector<64xi8>
// DOT-NEXT: %[[V0:.*]] = vector.bitcast %[[U0]] : vector<64xi8> to vector<32xbf16>
// DOT-NEXT: %[[U1:.*]] = vector.shuffle %[[LO]], %[[HIS]] [8, 72, 9, 73, {{.*}}, 63, 127] : vector<64xi8>, vector<64xi8>
// DOT-NEXT: %[[V1:.*]] = vector.bitcast %[[U1]] : vector<64xi8> to vector<32xbf16>
// DOT: %[[A:.*]] = vector.bitcast %{{.*}} : vector<16xi32> to vector<32xbf16>
// DOT-NEXT: x86vector.avx512.dot %{{.*}}, %[[A]], %[[V0]] : vector<32xbf16> -> vector<16xf32>
// DOT-NEXT: x86vector.avx512.dot %{{.*}}, %[[A]], %[[V1]] : vector<32xbf16> -> vector<16xf32>
// DOT: scf.yield
// DOT: %[[PS:.*]] = vector.load %{{.*}}[%{{.*}}, %{{.*}}, %[[KB]], %{{.*}}] : memref<?x?x?x?xf32, {{.*}}>, vector<16xf32>
// DOT: vector.fma %{{.*}}, %[[PS]], %{{.*}} : vector<16xf32>
// A row tail (quantized weights: the decoding is shared by a tile's rows,
// the dot products of missing rows are not) runs in a tile of its size:
// 1 to 4 rows by comparisons, 5 (micro_rows - 1) otherwise.
// DOT: scf.if %[[SMALL]] {
// DOT-NEXT: %[[C1:.*]] = arith.constant 1 : index
// DOT-NEXT: %[[ONE:.*]] = arith.cmpi eq, %[[TAIL]], %[[C1]] : index
// DOT-NEXT: scf.if %[[ONE]] {
// DOT: %{{.*}}:4 = scf.for
// DOT: } else {
// DOT: %[[TWO:.*]] = arith.cmpi eq, %[[TAIL]], %c2{{(_[0-9]+)?}} : index
// DOT-NEXT: scf.if %[[TWO]] {
// DOT: %{{.*}}:8 = scf.for
// DOT: } else {
// DOT: %[[THREE:.*]] = arith.cmpi eq, %[[TAIL]], %c3{{(_[0-9]+)?}} : index
// DOT-NEXT: scf.if %[[THREE]] {
// DOT: %{{.*}}:12 = scf.for
// DOT: } else {
// DOT: %[[FOUR:.*]] = arith.cmpi eq, %[[TAIL]], %c4{{(_[0-9]+)?}} : index
// DOT-NEXT: scf.if %[[FOUR]] {
// DOT: %{{.*}}:16 = scf.for
// DOT: } else {
// DOT-NOT: arith.cmpi eq, %[[TAIL]]
// DOT: %{{.*}}:20 = scf.for

func.func @dot_forward(%x: tensor<?x40xbf16>, %wr: tensor<40x4xbf16>,
                       %w1: tensor<4x40x48xf8E4M3FN>, %w2: tensor<4x24x40xf8E4M3FN>,
                       %s1: tensor<4x3x2xf32>, %s2: tensor<4x2x2xf32>) -> tensor<?x40xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>,
          quant = #moe.quant<fp8_e4m3, block = [16, 32]>,
          moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = true, fp8_dot = true>}
         : (tensor<?x40xbf16>, tensor<40x4xbf16>, tensor<4x40x48xf8E4M3FN>, tensor<4x24x40xf8E4M3FN>,
            tensor<4x3x2xf32>, tensor<4x2x2xf32>) -> tensor<?x40xbf16>
  return %y : tensor<?x40xbf16>
}
