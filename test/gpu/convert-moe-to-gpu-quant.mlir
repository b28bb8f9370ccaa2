// Quantized expert weights (#moe.quant, docs/spec.md §2.1) on the GPU path
// (docs/gpu.md, "Quantized expert weights"). --moe-gpu-configure gives a
// quantized op the chip's tensor-core engine without 128-row tiles (sm_90a:
// wgmma, big_tile_rows = 0; a bf16 layer beside it gets 128-row tiles),
// and
// --convert-moe-to-gpu lowers it
//  * on the CUDA-core grouped GEMMs when its blocks or groups along K are
//    not whole k-tiles of 32 (@int4, groups of 16; @fp8, blocks of 16 x
//    128), whose kernels (named after the format: _int4g<G>[_zp],
//    _fp8b<BK>x<BN>) take the scales (and zero points) as their last
//    arguments and dequantize each weight as they load it
//    (buildDequantized): int4 (q - z) * s from the i4 code and zero point,
//    FP8 the code's exact value (its 7 magnitude bits shifted into an f16,
//    the sign to bit 15, the NaN code to the f16 NaN, widened, * 256) times
//    its block's scale;
//  * on the tensor-core GEMMs otherwise (@int4_mma, groups of 32;
//    @fp8_mma, blocks of 128 x 128; mma.sync for 16-row tiles, wgmma for
//    64-row ones): the codes are staged as their exact bf16 factors
//    (buildQuantizedFactor: q - z, or the E4M3 value), and each block's or
//    group's f32 partial sums are added to the sums times their scales,
//    after its last k-tile (fp8_mma: every 4th, an scf.if).
// The emulated runs against the CPU path: test/gpu/emulated-quant.test
// (CUDA cores) and emulated-quant-mma.test (mma.sync).
// REQUIRES: host-supports-nvptx
// RUN: moe-opt %s %moe_gpu_target_sm90a --moe-gpu-configure | FileCheck %s --check-prefix=CONFIG
// RUN: moe-opt %s %moe_gpu_target_sm90a --moe-gpu-configure --convert-moe-to-gpu -canonicalize -cse | FileCheck %s
// The whole NVPTX pipeline to PTX (ptxas: test/gpu/ptxas-quant.test).
// RUN: moe-opt %s --moe-nvptx-pipeline="chip=sm_90a features=+ptx80 format=isa" -o /dev/null

// CONFIG-LABEL: func.func @int4
// CONFIG: moe.layer {{.*}}moe.gpu_config = #moe.gpu_config<engine = wgmma, big_tile_rows = 0,
// CONFIG-LABEL: func.func @fp8
// CONFIG: moe.layer {{.*}}moe.gpu_config = #moe.gpu_config<engine = wgmma, big_tile_rows = 0,
// CONFIG-LABEL: func.func @int4_mma
// CONFIG: moe.layer {{.*}}moe.gpu_config = #moe.gpu_config<engine = wgmma, big_tile_rows = 0,
// CONFIG-LABEL: func.func @dense
// CONFIG: moe.layer {{.*}}moe.gpu_config = #moe.gpu_config<engine = wgmma, big_tile_rows = 128,

// CHECK-LABEL: func.func @int4
// CHECK: call @__moe_launch_moe_gemm1_gather_kernel_swiglu_bf16_i4_bf16_int4g16_zp(
// CHECK-NEXT: call @__moe_launch_moe_gemm2_weighted_kernel_combine_bf16_i4_f32_bf16_int4g16_zp(
// CHECK-LABEL: func.func @fp8
// CHECK: call @__moe_launch_moe_gemm1_gather_kernel_relu_bf16_f8E4M3FN_bf16_fp8b16x128(
// CHECK-NEXT: call @__moe_launch_moe_gemm2_weighted_kernel_combine_bf16_f8E4M3FN_f32_bf16_fp8b16x128(
// The row tile of 16 (decode) or 64, chosen at run time (dynamic T):
// CHECK-LABEL: func.func @int4_mma
// CHECK: scf.if
// CHECK-NEXT: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m16_int4g32_zp(
// CHECK-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_bf16_m16_outf32_int4g32_zp(
// CHECK-NEXT: } else {
// CHECK-NEXT: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m64_wgmma_int4g32_zp(
// CHECK-NEXT: call @__moe_launch_moe_mma_gemm2_weighted_combine_bf16_m64_outf32_wgmma_int4g32_zp(
// CHECK-LABEL: func.func @fp8_mma
// CHECK: call @__moe_launch_moe_mma_gemm1_gather_relu_bf16_m16_fp8b128x128(
// CHECK-LABEL: func.func @dense
// CHECK: call @__moe_launch_moe_mma_gemm1_gather_swiglu_bf16_m

// int4: the code at [e][k][n] of [E, K, 2H], the scale and zero point at
// [e][k / 16][n] of [E, ceil(K / 16), 2H], then (q - z) * s.
// CHECK-LABEL: gpu.func @moe_gemm1_gather_kernel_swiglu_bf16_i4_bf16_int4g16_zp(
// CHECK-SAME: %[[W1:[a-z0-9]+]]: memref<?xi4>
// CHECK-SAME: %[[S1:[a-z0-9]+]]: memref<?xf32>, %[[Z1:[a-z0-9]+]]: memref<?xi4>)
// CHECK: %[[Q:.*]] = memref.load %[[W1]][%{{.*}}] : memref<?xi4>
// CHECK-NEXT: %[[GROUPS:.*]] = arith.ceildivui %{{.*}}, %c16 : index
// CHECK-NEXT: %[[BASE:.*]] = arith.muli %{{.*}}, %[[GROUPS]] : index
// CHECK-NEXT: %[[G:.*]] = arith.divui %{{.*}}, %c16 : index
// CHECK-NEXT: %[[ROW:.*]] = arith.addi %[[BASE]], %[[G]] : index
// CHECK-NEXT: %[[R:.*]] = arith.muli %[[ROW]], %{{.*}} : index
// CHECK-NEXT: %[[AT:.*]] = arith.addi %[[R]], %{{.*}} : index
// CHECK-NEXT: %[[S:.*]] = memref.load %[[S1]][%[[AT]]] : memref<?xf32>
// CHECK-NEXT: %[[Z:.*]] = memref.load %[[Z1]][%[[AT]]] : memref<?xi4>
// CHECK-NEXT: %[[Z32:.*]] = arith.extui %[[Z]] : i4 to i32
// CHECK-NEXT: %[[ZF:.*]] = arith.sitofp %[[Z32]] : i32 to f32
// CHECK-NEXT: %[[Q32:.*]] = arith.extui %[[Q]] : i4 to i32
// CHECK-NEXT: %[[QF:.*]] = arith.sitofp %[[Q32]] : i32 to f32
// CHECK-NEXT: %[[D:.*]] = arith.subf %[[QF]], %[[ZF]] : f32
// CHECK-NEXT: %[[W:.*]] = arith.mulf %[[D]], %[[S]] : f32
// CHECK-NEXT: scf.yield %[[W]] : f32

// FP8: the scale at [e][k / 16][n / 128] of [E, ceil(K / 16),
// ceil(N / 128)].
// CHECK-LABEL: gpu.func @moe_gemm1_gather_kernel_relu_bf16_f8E4M3FN_bf16_fp8b16x128(
// CHECK-SAME: %[[W8:[a-z0-9]+]]: memref<?xf8E4M3FN>
// CHECK-SAME: %[[S8:[a-z0-9]+]]: memref<?xf32>)
// CHECK: %[[C:.*]] = memref.load %[[W8]][%{{.*}}] : memref<?xf8E4M3FN>
// CHECK-NEXT: %[[KB:.*]] = arith.ceildivui %{{.*}}, %c16 : index
// CHECK-NEXT: %[[B0:.*]] = arith.muli %{{.*}}, %[[KB]] : index
// CHECK-NEXT: %[[KI:.*]] = arith.divui %{{.*}}, %c16 : index
// CHECK-NEXT: %[[B1:.*]] = arith.addi %[[B0]], %[[KI]] : index
// CHECK-NEXT: %[[NB:.*]] = arith.ceildivui %{{.*}}, %c128 : index
// CHECK-NEXT: %[[B2:.*]] = arith.muli %[[B1]], %[[NB]] : index
// CHECK-NEXT: %[[NI:.*]] = arith.divui %{{.*}}, %c128 : index
// CHECK-NEXT: %[[B3:.*]] = arith.addi %[[B2]], %[[NI]] : index
// CHECK-NEXT: %[[SC:.*]] = memref.load %[[S8]][%[[B3]]] : memref<?xf32>
// CHECK-NEXT: %[[BITS:.*]] = arith.bitcast %[[C]] : f8E4M3FN to i8
// CHECK-NEXT: %[[X:.*]] = arith.extui %[[BITS]] : i8 to i16
// CHECK-NEXT: %[[MAG:.*]] = arith.andi %[[X]], %c127_i16 : i16
// CHECK-NEXT: %[[SIGN:.*]] = arith.andi %[[X]], %c128_i16 : i16
// CHECK-NEXT: %[[SIGN15:.*]] = arith.shli %[[SIGN]], %c8_i16 : i16
// CHECK-NEXT: %[[MAG7:.*]] = arith.shli %[[MAG]], %c7_i16 : i16
// CHECK-NEXT: %[[H:.*]] = arith.ori %[[MAG7]], %[[SIGN15]] : i16
// CHECK-NEXT: %[[NAN:.*]] = arith.cmpi eq, %[[MAG]], %c127_i16 : i16
// CHECK-NEXT: %[[HB:.*]] = arith.select %[[NAN]], %c32256_i16, %[[H]] : i16
// CHECK-NEXT: %[[F16:.*]] = arith.bitcast %[[HB]] : i16 to f16
// CHECK-NEXT: %[[F:.*]] = arith.extf %[[F16]] : f16 to f32
// CHECK-NEXT: %[[QV:.*]] = arith.mulf %[[F]], %cst{{.*}} : f32
// CHECK-NEXT: %[[WV:.*]] = arith.mulf %[[QV]], %[[SC]] : f32
// CHECK-NEXT: scf.yield %[[WV]] : f32

// mma.sync, int4 in groups of 32 (one k-tile): the codes staged as their
// factors q - z in bf16 (zero past B), then, after every k-tile's MMAs,
// each sum plus the partial sum times the scale of its group and column
// (0 past N).
// CHECK-LABEL: gpu.func @moe_mma_gemm1_gather_swiglu_bf16_m16_int4g32_zp(
// CHECK-SAME: %[[MW:[a-z0-9]+]]: memref<?xi4>
// CHECK-SAME: %[[MS:[a-z0-9]+]]: memref<?xf32>, %[[MZ:[a-z0-9]+]]: memref<?xi4>)
// CHECK: %[[MQ:.*]] = memref.load %[[MW]][%{{.*}}] : memref<?xi4>
// CHECK-NEXT: arith.muli
// CHECK-NEXT: arith.addi
// CHECK-NEXT: %[[MZQ:.*]] = memref.load %[[MZ]][%{{.*}}] : memref<?xi4>
// CHECK-NEXT: %[[MZ32:.*]] = arith.extui %[[MZQ]] : i4 to i32
// CHECK-NEXT: %[[MZF:.*]] = arith.sitofp %[[MZ32]] : i32 to f32
// CHECK-NEXT: %[[MQ32:.*]] = arith.extui %[[MQ]] : i4 to i32
// CHECK-NEXT: %[[MQF:.*]] = arith.sitofp %[[MQ32]] : i32 to f32
// CHECK-NEXT: %[[MD:.*]] = arith.subf %[[MQF]], %[[MZF]] : f32
// CHECK-NEXT: %[[MDB:.*]] = arith.truncf %[[MD]] : f32 to bf16
// CHECK-NEXT: scf.yield %[[MDB]] : bf16
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield %{{.*}} : bf16
// CHECK: nvvm.mma.sync
// CHECK: %[[IN:.*]] = arith.cmpi ult, %{{.*}}, %{{.*}} : index
// CHECK-NEXT: %[[SV:.*]] = scf.if %[[IN]] -> (f32) {
// CHECK-NEXT: %[[SL:.*]] = memref.load %[[MS]][%{{.*}}] : memref<?xf32>
// CHECK-NEXT: scf.yield %[[SL]] : f32
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield %{{.*}} : f32
// CHECK-NEXT: }
// CHECK-NEXT: %[[PS:.*]] = arith.mulf %{{.*}}, %[[SV]] : f32
// CHECK-NEXT: arith.addf %{{.*}}, %[[PS]] : f32

// wgmma (the 64-row tiles at sm_90a), int4 in groups of 32: a loop over
// the groups of the k-tiles carries the sums; in it, a loop over the
// group's k-tiles carries the partial sums' struct (zeros at first) through
// the wgmma stages, then its wgmmas are retired and each sum gets the
// partial sum times its scale.
// CHECK-LABEL: gpu.func @moe_mma_gemm1_gather_swiglu_bf16_m64_wgmma_int4g32_zp(
// CHECK: %[[SUMS:.*]]:65 = scf.for %{{.*}} iter_args(
// CHECK: %[[P:.*]]:2 = scf.for %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (!llvm.struct<(f32,
// CHECK: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: scf.yield %{{.*}}, %{{.*}} : !llvm.struct<(f32,
// CHECK-NEXT: }
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NEXT: %[[P0:.*]] = llvm.extractvalue %[[P]]#0[0]
// CHECK: %[[S0:.*]] = scf.if %{{.*}} -> (f32) {
// CHECK-NEXT: memref.load %{{.*}} : memref<?xf32>
// CHECK: %[[PS0:.*]] = arith.mulf %[[P0]], %[[S0]] : f32
// CHECK-NEXT: arith.addf %{{.*}}, %[[PS0]] : f32

// mma.sync, FP8 in blocks of 128 (4 k-tiles): the codes staged as their
// E4M3 values in bf16; the partial sums are scaled after the block's last
// k-tile (k-tile + 1 a multiple of 4) or the slice's last, else carried
// on.
// CHECK-LABEL: gpu.func @moe_mma_gemm1_gather_relu_bf16_m16_fp8b128x128(
// CHECK: memref.load %{{.*}} : memref<?xf8E4M3FN>
// CHECK: %[[FV:.*]] = arith.extf %{{.*}} : f16 to f32
// CHECK-NEXT: %[[FQ:.*]] = arith.mulf %[[FV]], %cst{{.*}} : f32
// CHECK-NEXT: %[[FB:.*]] = arith.truncf %[[FQ]] : f32 to bf16
// CHECK-NEXT: scf.yield %[[FB]] : bf16
// CHECK: nvvm.mma.sync
// CHECK: %[[NEXT:.*]] = arith.addi %{{.*}}, %c1 : index
// CHECK-NEXT: %[[R:.*]] = arith.remui %[[NEXT]], %c4 : index
// CHECK-NEXT: %[[END:.*]] = arith.cmpi eq, %[[R]], %c0 : index
// CHECK-NEXT: %[[SLICE:.*]] = arith.cmpi eq, %[[NEXT]], %{{.*}} : index
// CHECK-NEXT: %[[LAST:.*]] = arith.ori %[[END]], %[[SLICE]] : i1
// The partial sums restart at 0 after it (selects, after -canonicalize):
// CHECK-NEXT: arith.select %[[LAST]], %cst{{.*}}, %{{.*}} : f32
// CHECK: scf.if %[[LAST]] -> (f32, f32,
// CHECK: %[[FS:.*]] = scf.if %{{.*}} -> (f32) {
// CHECK-NEXT: memref.load %{{.*}} : memref<?xf32>
// CHECK: %[[FP:.*]] = arith.mulf %{{.*}}, %[[FS]] : f32
// CHECK-NEXT: arith.addf %{{.*}}, %[[FP]] : f32

func.func @int4(%x: tensor<?x64xbf16>, %wr: tensor<64x8xbf16>, %w1: tensor<8x64x64xi4>,
                %w2: tensor<8x32x64xi4>, %s1: tensor<8x4x64xf32>, %s2: tensor<8x2x64xf32>,
                %z1: tensor<8x4x64xi4>, %z2: tensor<8x2x64xi4>) -> tensor<?x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         expert_zero_points(%z1, %z2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>,
          quant = #moe.quant<int4, group = 16, zero_point>}
         : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8x64x64xi4>, tensor<8x32x64xi4>,
            tensor<8x4x64xf32>, tensor<8x2x64xf32>, tensor<8x4x64xi4>, tensor<8x2x64xi4>) -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

func.func @fp8(%x: tensor<?x64xbf16>, %wr: tensor<64x8xbf16>, %w1: tensor<8x64x32xf8E4M3FN>,
               %w2: tensor<8x32x64xf8E4M3FN>, %s1: tensor<8x4x1xf32>,
               %s2: tensor<8x2x1xf32>) -> tensor<?x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>,
          quant = #moe.quant<fp8_e4m3, block = [16, 128]>}
         : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8x64x32xf8E4M3FN>,
            tensor<8x32x64xf8E4M3FN>, tensor<8x4x1xf32>, tensor<8x2x1xf32>) -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

func.func @int4_mma(%x: tensor<?x64xbf16>, %wr: tensor<64x8xbf16>, %w1: tensor<8x64x64xi4>,
                    %w2: tensor<8x32x64xi4>, %s1: tensor<8x2x64xf32>, %s2: tensor<8x1x64xf32>,
                    %z1: tensor<8x2x64xi4>, %z2: tensor<8x1x64xi4>) -> tensor<?x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         expert_zero_points(%z1, %z2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>,
          quant = #moe.quant<int4, group = 32, zero_point>}
         : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8x64x64xi4>, tensor<8x32x64xi4>,
            tensor<8x2x64xf32>, tensor<8x1x64xf32>, tensor<8x2x64xi4>, tensor<8x1x64xi4>) -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}

func.func @fp8_mma(%x: tensor<16x256xbf16>, %wr: tensor<256x8xbf16>,
                   %w1: tensor<8x256x32xf8E4M3FN>, %w2: tensor<8x32x256xf8E4M3FN>,
                   %s1: tensor<8x2x1xf32>, %s2: tensor<8x1x2xf32>) -> tensor<16x256xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>,
          quant = #moe.quant<fp8_e4m3, block = [128, 128]>}
         : (tensor<16x256xbf16>, tensor<256x8xbf16>, tensor<8x256x32xf8E4M3FN>,
            tensor<8x32x256xf8E4M3FN>, tensor<8x2x1xf32>, tensor<8x1x2xf32>) -> tensor<16x256xbf16>
  return %y : tensor<16x256xbf16>
}

func.func @dense(%x: tensor<?x64xbf16>, %wr: tensor<64x8xbf16>, %w1: tensor<8x64x64xbf16>,
                 %w2: tensor<8x32x64xbf16>) -> tensor<?x64xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<?x64xbf16>, tensor<64x8xbf16>, tensor<8x64x64xbf16>,
            tensor<8x32x64xbf16>) -> tensor<?x64xbf16>
  return %y : tensor<?x64xbf16>
}
