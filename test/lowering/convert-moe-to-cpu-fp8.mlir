// RUN: moe-opt %s --convert-moe-to-cpu | FileCheck %s
// RUN: moe-opt %s --moe-cpu-pipeline -o /dev/null
//
// FP8 block-scaled expert weights (#moe.quant<fp8_e4m3>, docs/spec.md §2.1)
// on the CPU: the E4M3 codes are packed into the micro-kernels' panels as
// bytes (a quarter of f32's), and both GEMMs dequantize a panel vector as
// they load it: the 7 magnitude bits shifted left by 7 and the sign into
// bit 15 give the f16 of q * 2^-8, S.1111.111 becomes the f16 NaN (0x7E00 =
// 32256), the f16 widens to f32, * 256 gives q, * s rounds q * s once.
// GEMM2's vectors (blocks of 32 columns, 16 lanes) each lie in one block:
// one scale, broadcast; GEMM1's up columns start at H = 24, so its scales
// are read per lane (vector.insert). The kernel names carry the blocks.

// CHECK-LABEL: func.func @forward
// CHECK: call @__moe_cpu_gemm1_swiglu_gather_packed_fp8b16x32_v512
// CHECK: call @__moe_cpu_gemm2_scaled_packed_fp8b16x32_vs_v512

// CHECK-LABEL: func.func private @__moe_cpu_pack_gated
// CHECK: memref<?x?x?x?xf8E4M3FN

// CHECK-LABEL: func.func private @__moe_cpu_gemm1_swiglu_gather_packed_fp8b16x32_v512
// CHECK: vector.load %{{.*}} : memref<?x?x?x?xf8E4M3FN, {{.*}}>, vector<16xf8E4M3FN>
// CHECK: arith.divui %{{.*}}, %c16{{.*}} : index
// CHECK: memref.load
// CHECK: vector.insert %{{.*}} [15] : f32 into vector<16xf32>
// CHECK-NEXT: arith.bitcast %{{.*}} : vector<16xf8E4M3FN> to vector<16xi8>
// CHECK-NEXT: arith.extui %{{.*}} : vector<16xi8> to vector<16xi16>
// CHECK:      %[[MAG:.*]] = arith.andi %{{.*}}, %{{.*}} : vector<16xi16>
// CHECK:      %[[SIGN:.*]] = arith.shli
// CHECK:      %[[SHIFTED:.*]] = arith.shli %[[MAG]]
// CHECK-NEXT: %[[BITS:.*]] = arith.ori %[[SHIFTED]], %[[SIGN]]
// CHECK-NEXT: arith.constant dense<127> : vector<16xi16>
// CHECK-NEXT: %[[NAN:.*]] = arith.cmpi eq, %[[MAG]]
// CHECK-NEXT: %[[QNAN:.*]] = arith.constant dense<32256> : vector<16xi16>
// CHECK-NEXT: %[[SEL:.*]] = arith.select %[[NAN]], %[[QNAN]], %[[BITS]]
// CHECK-NEXT: %[[HALF:.*]] = arith.bitcast %[[SEL]] : vector<16xi16> to vector<16xf16>
// CHECK-NEXT: %[[F:.*]] = arith.extf %[[HALF]] : vector<16xf16> to vector<16xf32>
// CHECK-NEXT: %[[C256:.*]] = arith.constant dense<2.560000e+02> : vector<16xf32>
// CHECK-NEXT: %[[Q:.*]] = arith.mulf %[[F]], %[[C256]]
// CHECK-NEXT: arith.mulf %[[Q]], %{{.*}} : vector<16xf32>
// CHECK: vector.fma

// CHECK-LABEL: func.func private @__moe_cpu_gemm2_scaled_packed_fp8b16x32_vs_v512
// CHECK: vector.load %{{.*}} : memref<?x?x?x?xf8E4M3FN, {{.*}}>, vector<16xf8E4M3FN>
// CHECK: %[[S:.*]] = memref.load %{{.*}} : memref<?x?x?xf32, {{.*}}>
// CHECK-NEXT: %[[SV:.*]] = vector.broadcast %[[S]] : f32 to vector<16xf32>
// CHECK-NEXT: arith.bitcast %{{.*}} : vector<16xf8E4M3FN> to vector<16xi8>
// CHECK: vector.fma

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
