// RUN: moe-opt %s -split-input-file --convert-moe-to-cpu | FileCheck %s
// RUN: moe-opt %s -split-input-file --moe-cpu-pipeline -o /dev/null
//
// The int8-activation mode of int4 weights (#moe.quant<int4, group = G[,
// zero_point], int8_activations>, docs/spec.md §2.1) on the CPU
// (docs/quantization.md, "int8 activations"). Before each GEMM a kernel
// quantizes its left operand (the tokens, then h) per row and group: the
// group's max |a| (maximumf, NaN propagating), s = max / 127, q = a / s
// rounded to nearest even, 0 unless s is finite and positive. With the
// configuration's int8_dot, packed weights and a group of whole 8-k words,
// the codes are stored as i8 (the group rounded up to 8, zeros) with their
// scales and sums, the weights are packed eight rows to a 32-bit word
// (`vnni`), and the GEMMs multiply codes on the integer dot product:
// per word row and panel vector, one load, the low nibbles (& 0x0F0F0F0F)
// and the high ones (>> 4, & 0x0F0F0F0F), then per row two vpdpbusd
// (512 bits) or two vpmaddubsw, an add and a vpmaddwd (256 bits) into
// 32-bit sums I; per group the accumulators get (I - z S) s_w s_a. Else the
// quantized values, q * s in f32, go to the FMA path.

// AVX-512 with int8_dot = vpdpbusd (AVX512_VNNI).
// CHECK-LABEL: func.func @vnni
// CHECK: call @__moe_cpu_pack_gated_vnni_int4g16_zp_a8_v512
// CHECK: call @__moe_cpu_pack_vnni_int4g16_zp_a8_v512
// CHECK: call @__moe_cpu_quantize_a8_codes_g16_v512_{{.*}}(%{{.*}}) : (memref<?x?xbf16, {{.*}}>, memref<?x?xi8, {{.*}}>, memref<?x?xf32, {{.*}}>, memref<?x?xf32, {{.*}}>) -> ()
// CHECK: call @__moe_cpu_gemm1_swiglu_gather_packed_vpdpbusd_int4g16_zp_a8_v512
// CHECK: call @__moe_cpu_quantize_a8_codes_g16_v512
// CHECK: call @__moe_cpu_gemm2_scaled_packed_vpdpbusd_int4g16_zp_a8_v512

// The packing: rows 8kk .. 8kk + 7 of a panel column into one i32, row
// 8kk + i at bit 8 (i % 4) + 4 (i / 4); a row past K is 0.
// CHECK-LABEL: func.func private @__moe_cpu_pack_gated_vnni_int4g16_zp_a8_v512
// CHECK: %[[W0:.*]] = arith.extui %{{.*}} : i4 to i32
// CHECK: %[[IN1:.*]] = arith.cmpi slt, %{{.*}}, %{{.*}} : index
// CHECK: %[[C1:.*]] = arith.extui %{{.*}} : i4 to i32
// CHECK-NEXT: %[[Z1:.*]] = arith.select %[[IN1]], %[[C1]], %{{.*}} : i32
// CHECK-NEXT: %[[S8:.*]] = arith.constant 8 : i32
// CHECK-NEXT: %[[SH1:.*]] = arith.shli %[[Z1]], %[[S8]] : i32
// CHECK-NEXT: %{{.*}} = arith.ori %[[W0]], %[[SH1]] : i32
// CHECK: arith.constant 16 : i32
// CHECK: arith.constant 24 : i32
// CHECK: arith.constant 4 : i32
// CHECK: arith.constant 12 : i32
// CHECK: arith.constant 20 : i32
// CHECK: arith.constant 28 : i32
// CHECK: memref.store %{{.*}} : memref<?x?x?x?xi32, {{.*}}>

// The quantization of A: the group's maximum, then its codes.
// CHECK-LABEL: func.func private @__moe_cpu_quantize_a8_codes_g16_v512
// CHECK: scf.parallel
// CHECK: %[[MAX:.*]] = scf.for {{.*}} -> (vector<16xf32>) {
// CHECK: %[[ABS:.*]] = math.absf %{{.*}} : vector<16xf32>
// CHECK-NEXT: %[[M:.*]] = arith.maximumf %{{.*}}, %[[ABS]] : vector<16xf32>
// CHECK-NEXT: scf.yield %[[M]] : vector<16xf32>
// CHECK: %[[AMAX:.*]] = vector.reduction <maximumf>, %[[MAX]] : vector<16xf32> into f32
// CHECK-NEXT: %[[C127:.*]] = arith.constant 1.270000e+02 : f32
// CHECK-NEXT: %[[S:.*]] = arith.divf %[[AMAX]], %[[C127]] : f32
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[POS:.*]] = arith.cmpf ogt, %[[S]], %[[ZERO]] : f32
// CHECK-NEXT: %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK-NEXT: %[[FIN:.*]] = arith.cmpf olt, %[[S]], %[[INF]] : f32
// CHECK-NEXT: %[[OK:.*]] = arith.andi %[[POS]], %[[FIN]] : i1
// CHECK-NEXT: %[[SV:.*]] = vector.broadcast %[[S]] : f32 to vector<16xf32>
// CHECK: %[[SUMS:.*]] = scf.for {{.*}} -> (vector<16xi32>) {
// CHECK: %[[X:.*]] = arith.extf %{{.*}} : vector<16xbf16> to vector<16xf32>
// CHECK-NEXT: %[[D:.*]] = arith.divf %[[X]], %[[SV]] : vector<16xf32>
// CHECK-NEXT: %[[R:.*]] = math.roundeven %[[D]] : vector<16xf32>
// CHECK-NEXT: %[[Q:.*]] = arith.select %[[OK]], %[[R]], %{{.*}} : vector<16xf32>
// CHECK: %[[QI:.*]] = arith.fptosi %[[Q]] : vector<16xf32> to vector<16xi32>
// CHECK-NEXT: %[[Q8:.*]] = arith.trunci %[[QI]] : vector<16xi32> to vector<16xi8>
// CHECK-NEXT: vector.maskedstore %{{.*}}, %[[Q8]] : memref<?x?xi8, {{.*}}>, vector<16xi1>, vector<16xi8>
// CHECK-NEXT: %[[NEXT:.*]] = arith.addi %{{.*}}, %[[QI]] : vector<16xi32>
// CHECK-NEXT: scf.yield %[[NEXT]] : vector<16xi32>
// CHECK: memref.store %[[S]], %{{.*}} : memref<?x?xf32, {{.*}}>
// CHECK-NEXT: %[[TOTAL:.*]] = vector.reduction <add>, %[[SUMS]] : vector<16xi32> into i32
// CHECK-NEXT: %[[TF:.*]] = arith.sitofp %[[TOTAL]] : i32 to f32
// CHECK-NEXT: memref.store %[[TF]], %{{.*}} : memref<?x?xf32, {{.*}}>

// The GEMM: no sums of A of its own; per word row the nibbles, per row the
// broadcast words of A and vpdpbusd; per group (I - z S) s_w s_a.
// CHECK-LABEL: func.func private @__moe_cpu_gemm1_swiglu_gather_packed_vpdpbusd_int4g16_zp_a8_v512
// CHECK-NOT: memref.alloc({{.*}}) : memref<?x?xf32>
// CHECK: scf.for {{.*}} -> (vector<16xi32>, vector<16xi32>,
// CHECK: %[[WORDS:.*]] = vector.load %{{.*}} : memref<?x?x?x?xi32, {{.*}}>, vector<16xi32>
// CHECK-NEXT: %[[NIB:.*]] = arith.constant dense<252645135> : vector<16xi32>
// CHECK-NEXT: %[[LOW:.*]] = arith.andi %[[WORDS]], %[[NIB]] : vector<16xi32>
// CHECK-NEXT: %[[LOWB:.*]] = vector.bitcast %[[LOW]] : vector<16xi32> to vector<64xi8>
// CHECK-NEXT: %[[FOUR:.*]] = arith.constant dense<4> : vector<16xi32>
// CHECK-NEXT: %[[SHR:.*]] = arith.shrui %[[WORDS]], %[[FOUR]] : vector<16xi32>
// CHECK-NEXT: %[[HIGH:.*]] = arith.andi %[[SHR]], %[[NIB]] : vector<16xi32>
// CHECK-NEXT: %[[HIGHB:.*]] = vector.bitcast %[[HIGH]] : vector<16xi32> to vector<64xi8>
// CHECK: %[[A4:.*]] = vector.load %{{.*}} : memref<?x?xi8, {{.*}}>, vector<4xi8>
// CHECK-NEXT: %[[A1:.*]] = vector.bitcast %[[A4]] : vector<4xi8> to vector<1xi32>
// CHECK-NEXT: %[[AW:.*]] = vector.extract %[[A1]][0] : i32 from vector<1xi32>
// CHECK-NEXT: %[[AB:.*]] = vector.broadcast %[[AW]] : i32 to vector<16xi32>
// CHECK-NEXT: %[[ALO:.*]] = vector.bitcast %[[AB]] : vector<16xi32> to vector<64xi8>
// CHECK: %[[AHI:.*]] = vector.bitcast %{{.*}} : vector<16xi32> to vector<64xi8>
// CHECK-NEXT: %[[P0:.*]] = func.call @llvm.x86.avx512.vpdpbusd.512(%{{.*}}, %[[LOWB]], %[[ALO]]) : (vector<16xi32>, vector<64xi8>, vector<64xi8>) -> vector<16xi32>
// CHECK-NEXT: %{{.*}} = func.call @llvm.x86.avx512.vpdpbusd.512(%[[P0]], %[[HIGHB]], %[[AHI]])
// CHECK: %[[NEGZ:.*]] = arith.negf %{{.*}} : vector<16xf32>
// CHECK: %[[SUMA:.*]] = memref.load %{{.*}} : memref<?x?xf32, {{.*}}>
// CHECK-NEXT: %[[SUMAV:.*]] = vector.broadcast %[[SUMA]] : f32 to vector<16xf32>
// CHECK-NEXT: %[[SA:.*]] = memref.load %{{.*}} : memref<?x?xf32, {{.*}}>
// CHECK-NEXT: %[[SAV:.*]] = vector.broadcast %[[SA]] : f32 to vector<16xf32>
// CHECK-NEXT: %[[I:.*]] = arith.sitofp %{{.*}}#0 : vector<16xi32> to vector<16xf32>
// CHECK-NEXT: %[[PZ:.*]] = vector.fma %[[NEGZ]], %[[SUMAV]], %[[I]] : vector<16xf32>
// CHECK-NEXT: %[[SS:.*]] = arith.mulf %{{.*}}, %[[SAV]] : vector<16xf32>
// CHECK-NEXT: %{{.*}} = vector.fma %[[PZ]], %[[SS]], %{{.*}} : vector<16xf32>
func.func @vnni(%x: tensor<?x40xbf16>, %wr: tensor<40x4xbf16>, %w1: tensor<4x40x48xi4>, %w2: tensor<4x24x40xi4>,
  %s1: tensor<4x3x48xf32>, %s2: tensor<4x2x40xf32>, %z1: tensor<4x3x48xi4>, %z2: tensor<4x2x40xi4>) -> tensor<?x40xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2) expert_zero_points(%z1, %z2)
    {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>, quant = #moe.quant<int4, group = 16, zero_point, int8_activations>,
     moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = true, int8_dot = vpdpbusd>}
    : (tensor<?x40xbf16>, tensor<40x4xbf16>, tensor<4x40x48xi4>, tensor<4x24x40xi4>,
       tensor<4x3x48xf32>, tensor<4x2x40xf32>, tensor<4x3x48xi4>, tensor<4x2x40xi4>) -> tensor<?x40xbf16>
  return %y : tensor<?x40xbf16>
}

// -----

// AVX2 with int8_dot = vpmaddubsw (256 bits): vpmaddubsw twice, their 16-bit sum, then
// vpmaddwd by ones, added to the 32-bit sums. Symmetric: z = 8.
// CHECK-LABEL: func.func @avx2
// CHECK: call @__moe_cpu_gemm1_relu_gather_packed_vpmaddubsw_int4g8_a8_v256
// CHECK-LABEL: func.func private @__moe_cpu_gemm1_relu_gather_packed_vpmaddubsw_int4g8_a8_v256
// CHECK: %[[ONES:.*]] = arith.constant dense<1> : vector<16xi16>
// CHECK: %[[PL:.*]] = func.call @llvm.x86.avx2.pmadd.ub.sw(%{{.*}}, %{{.*}}) : (vector<32xi8>, vector<32xi8>) -> vector<16xi16>
// CHECK-NEXT: %[[PH:.*]] = func.call @llvm.x86.avx2.pmadd.ub.sw(%{{.*}}, %{{.*}}) : (vector<32xi8>, vector<32xi8>) -> vector<16xi16>
// CHECK-NEXT: %[[PS:.*]] = arith.addi %[[PL]], %[[PH]] : vector<16xi16>
// CHECK-NEXT: %[[W:.*]] = func.call @llvm.x86.avx2.pmadd.wd(%[[PS]], %[[ONES]]) : (vector<16xi16>, vector<16xi16>) -> vector<8xi32>
// CHECK-NEXT: %{{.*}} = arith.addi %{{.*}}, %[[W]] : vector<8xi32>
// CHECK: arith.constant dense<8.000000e+00> : vector<8xf32>
func.func @avx2(%x: tensor<?x40xf32>, %wr: tensor<40x4xf32>, %w1: tensor<4x40x24xi4>, %w2: tensor<4x24x40xi4>,
  %s1: tensor<4x5x24xf32>, %s2: tensor<4x3x40xf32>) -> tensor<?x40xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
    {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>, quant = #moe.quant<int4, group = 8, int8_activations>,
     moe.cpu_config = #moe.cpu_config<vector_bits = 256, registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 128, bf16_dot = false, int8_dot = vpmaddubsw>}
    : (tensor<?x40xf32>, tensor<40x4xf32>, tensor<4x40x24xi4>, tensor<4x24x40xi4>,
       tensor<4x5x24xf32>, tensor<4x3x40xf32>) -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}

// -----

// AVX-VNNI (256 bits, int8_dot = vpdpbusd): the 256-bit vpdpbusd, two per
// row and panel vector, no vpmaddubsw.
// CHECK-LABEL: func.func @avx_vnni
// CHECK: call @__moe_cpu_gemm1_relu_gather_packed_vpdpbusd_int4g8_a8_v256
// CHECK-LABEL: func.func private @__moe_cpu_gemm1_relu_gather_packed_vpdpbusd_int4g8_a8_v256
// CHECK-NOT: pmadd
// CHECK: %[[P:.*]] = func.call @llvm.x86.avx512.vpdpbusd.256(%{{.*}}, %{{.*}}, %{{.*}}) : (vector<8xi32>, vector<32xi8>, vector<32xi8>) -> vector<8xi32>
// CHECK-NEXT: %{{.*}} = func.call @llvm.x86.avx512.vpdpbusd.256(%[[P]], %{{.*}}, %{{.*}}) : (vector<8xi32>, vector<32xi8>, vector<32xi8>) -> vector<8xi32>
func.func @avx_vnni(%x: tensor<?x40xf32>, %wr: tensor<40x4xf32>, %w1: tensor<4x40x24xi4>, %w2: tensor<4x24x40xi4>,
  %s1: tensor<4x5x24xf32>, %s2: tensor<4x3x40xf32>) -> tensor<?x40xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
    {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>, quant = #moe.quant<int4, group = 8, int8_activations>,
     moe.cpu_config = #moe.cpu_config<vector_bits = 256, registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 128, bf16_dot = false, int8_dot = vpdpbusd>}
    : (tensor<?x40xf32>, tensor<40x4xf32>, tensor<4x40x24xi4>, tensor<4x24x40xi4>,
       tensor<4x5x24xf32>, tensor<4x3x40xf32>) -> tensor<?x40xf32>
  return %y : tensor<?x40xf32>
}

// -----


// No int8_dot (AVX-512 without VNNI), or a group that is not a multiple of
// 8: the quantized values (q * s, f32) on the FMA path, the weights packed
// two rows to a byte; no integer dot product.
// CHECK-LABEL: func.func @no_int8_dot
// CHECK: call @__moe_cpu_pack_gated_int4g16_a8_v512
// CHECK: call @__moe_cpu_quantize_a8_values_g16_v512_{{.*}}(%{{.*}}) : (memref<?x?xbf16, {{.*}}>, memref<?x?xf32, {{.*}}>) -> ()
// CHECK: call @__moe_cpu_gemm1_swiglu_gather_packed_int4g16_a8_v512_{{.*}}(%{{.*}}) : (memref<?x?xf32, {{.*}}>,
// CHECK: call @__moe_cpu_quantize_a8_values_g16_v512
// CHECK: call @__moe_cpu_gemm2_scaled_packed_int4g16_a8_v512
// CHECK-LABEL: func.func @group_12
// CHECK: call @__moe_cpu_quantize_a8_values_g12_v512
// CHECK: call @__moe_cpu_gemm1_swiglu_gather_packed_int4g12_a8_v512
// CHECK-NOT: vpdpbusd
// The values: q * s stored as f32.
// CHECK-LABEL: func.func private @__moe_cpu_quantize_a8_values_g16_v512
// CHECK: %[[R:.*]] = math.roundeven %{{.*}} : vector<16xf32>
// CHECK-NEXT: %[[Q:.*]] = arith.select %{{.*}}, %[[R]], %{{.*}} : vector<16xf32>
// CHECK-NEXT: %{{.*}} = arith.subi
// CHECK-NEXT: %[[M:.*]] = vector.create_mask %{{.*}} : vector<16xi1>
// CHECK-NEXT: %[[V:.*]] = arith.mulf %[[Q]], %{{.*}} : vector<16xf32>
// CHECK-NEXT: vector.maskedstore %{{.*}}, %[[M]], %[[V]] : memref<?x?xf32, {{.*}}>, vector<16xi1>, vector<16xf32>
func.func @no_int8_dot(%x: tensor<?x32xbf16>, %wr: tensor<32x4xbf16>, %w1: tensor<4x32x48xi4>, %w2: tensor<4x24x32xi4>,
  %s1: tensor<4x2x48xf32>, %s2: tensor<4x2x32xf32>) -> tensor<?x32xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
    {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>, quant = #moe.quant<int4, group = 16, int8_activations>,
     moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = true>}
    : (tensor<?x32xbf16>, tensor<32x4xbf16>, tensor<4x32x48xi4>, tensor<4x24x32xi4>,
       tensor<4x2x48xf32>, tensor<4x2x32xf32>) -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}
func.func @group_12(%x: tensor<?x32xbf16>, %wr: tensor<32x4xbf16>, %w1: tensor<4x32x48xi4>, %w2: tensor<4x24x32xi4>,
  %s1: tensor<4x3x48xf32>, %s2: tensor<4x2x32xf32>) -> tensor<?x32xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
    {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>, quant = #moe.quant<int4, group = 12, int8_activations>,
     moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = true, int8_dot = vpdpbusd>}
    : (tensor<?x32xbf16>, tensor<32x4xbf16>, tensor<4x32x48xi4>, tensor<4x24x32xi4>,
       tensor<4x3x48xf32>, tensor<4x2x32xf32>) -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}
