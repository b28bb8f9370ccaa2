// REQUIRES: host-supports-nvptx
// RUN: moe-opt %s -split-input-file --pass-pipeline="builtin.module(convert-moe-to-gpu{device-abi=true},one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},buffer-results-to-out-params{modify-public-functions hoist-static-allocs},buffer-deallocation-pipeline,convert-bufferization-to-memref,moe-gpu-device-abi,moe-gpu-materialize-launches,func.func(gpu-async-region),canonicalize,cse)" \
// RUN:   | FileCheck %s

// device-abi: an element-wise tensor op that reads a device tensor (a
// residual add between layers, a linalg.generic, a math op) is one launch
// of a moe_elementwise_* kernel on the layers' stream: the operands are read
// where they are (no gpu.memcpy), and the last op writes the caller's
// out-parameter. A chain of element-wise ops is one kernel (fused as
// linalg.generic ops), constants live in the kernels (splats as scalars,
// dense constants as globals of the gpu.module): no upload, ever. Results
// numerically: emulated-device-abi-block.test.

// CHECK-LABEL: func.func @residual(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<8x16xf32>, %{{.*}}: memref<16x4xf32>, %{{.*}}: memref<4x16x32xf32>, %{{.*}}: memref<4x32x16xf32>, %[[OUT:[a-z0-9]+]]: memref<8x16xf32>)
// CHECK-NOT: gpu.memcpy
// CHECK: memref.collapse_shape %[[X]]
// CHECK-NEXT: %[[XD:.*]] = memref.cast
// CHECK-NOT: gpu.memcpy
// CHECK: %[[Y:.*]], %{{.*}} = gpu.alloc async {{.*}} {bufferization.manual_deallocation, moe.gpu_device_result} : memref<?xf32>
// CHECK-NOT: gpu.memcpy
// CHECK: gpu.launch_func async {{.*}} @moe_kernels::@moe_gemm2_weighted_kernel_combine
// CHECK-NOT: gpu.memcpy
// CHECK: %[[OUTC:.*]] = memref.collapse_shape %[[OUT]]
// CHECK-NEXT: %[[OUTD:.*]] = memref.cast %[[OUTC]]
// CHECK-NEXT: gpu.launch_func async [%{{.*}}] @moe_kernels::@[[ADD:moe_elementwise_addf_[0-9a-f]+]] blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%[[XD]] : memref<?xf32>, %[[Y]] : memref<?xf32>, %[[OUTD]] : memref<?xf32>, %c128 : index)
// CHECK-NEXT: gpu.dealloc async {{.*}} %[[Y]]
// CHECK-NOT: gpu.memcpy
// CHECK: gpu.wait [%{{.*}}]
// CHECK-NEXT: return
// CHECK: gpu.func @[[ADD]](%[[A:.*]]: memref<?xf32>, %[[B:.*]]: memref<?xf32>, %[[C:.*]]: memref<?xf32>, %[[N:.*]]: index) kernel
// CHECK: %[[I:.*]] = arith.addi
// CHECK-NEXT: %[[IN:.*]] = arith.cmpi ult, %[[I]], %[[N]]
// CHECK-NEXT: scf.if %[[IN]] {
// CHECK-NEXT: %[[VA:.*]] = memref.load %[[A]][%[[I]]]
// CHECK-NEXT: %[[VB:.*]] = memref.load %[[B]][%[[I]]]
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[VA]], %[[VB]] : f32
// CHECK-NEXT: memref.store %[[S]], %[[C]][%[[I]]]
func.func @residual(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
                    %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  %r = arith.addf %x, %y : tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// bf16 with a dynamic T: a generic that reads its init (x) and a captured
// constant, then (through tensor.casts, which end a chain) an add of a splat
// constant and math.exp into the out-parameter: three kernels. The splat
// %bias is a scalar in its kernel: nothing is uploaded. The grid is
// ceil(T*16/256) blocks, at least one.

// CHECK-LABEL: func.func @generic(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?x16xbf16>, %{{.*}}: memref<16x4xbf16>, %{{.*}}: memref<4x16x32xbf16>, %{{.*}}: memref<4x32x16xbf16>, %[[OUT:[a-z0-9]+]]: memref<?x16xbf16>)
// CHECK-NOT: gpu.memcpy
// CHECK: %[[XD:.*]] = memref.collapse_shape %[[X]]
// CHECK-NOT: gpu.memcpy
// CHECK: %[[Y:.*]], %{{.*}} = gpu.alloc async {{.*}} {bufferization.manual_deallocation, moe.gpu_device_result} : memref<?xbf16>
// CHECK-NOT: gpu.memcpy
// The layer's GEMM2 with the combine runs on tensor cores, one of the two
// row tiles chosen at run time (dynamic T).
// CHECK: scf.if
// CHECK: gpu.launch_func async {{.*}} @moe_kernels::@moe_mma_gemm2_weighted_combine_bf16_m16_outf32
// CHECK: } else {
// CHECK: gpu.launch_func async {{.*}} @moe_kernels::@moe_mma_gemm2_weighted_combine_bf16_m64_outf32
// CHECK-NOT: gpu.memcpy
// CHECK: %[[G:.*]], %{{.*}} = gpu.alloc async {{.*}} {bufferization.manual_deallocation, moe.gpu_device_result} : memref<?xbf16>
// CHECK-NEXT: %[[NB:.*]] = arith.ceildivui %[[N:.*]], %c256 : index
// CHECK-NEXT: %[[GRID:.*]] = arith.maxui %[[NB]], %c1 : index
// CHECK-NEXT: gpu.launch_func async {{.*}} @moe_kernels::@[[GEN:moe_elementwise_mulf_addf_[0-9a-f]+]] blocks in (%[[GRID]], %c1, %c1) threads in (%c256, %c1, %c1) args(%[[Y]] : memref<?xbf16>, %[[XD]] : memref<?xbf16>, %[[G]] : memref<?xbf16>, %[[N]] : index)
// CHECK-NOT: gpu.memcpy
// CHECK: %[[T:.*]], %{{.*}} = gpu.alloc async
// CHECK-NEXT: gpu.launch_func async {{.*}} @moe_kernels::@[[ADD:moe_elementwise_addf_[0-9a-f]+]] {{.*}} args(%{{.*}} : memref<?xbf16>, %[[T]] : memref<?xbf16>, %c128 : index)
// CHECK: %[[OUTD:.*]] = memref.collapse_shape %[[OUT]]
// CHECK-NEXT: gpu.launch_func async {{.*}} @moe_kernels::@[[EXP:moe_elementwise_exp_[0-9a-f]+]] {{.*}} args(%[[T]] : memref<?xbf16>, %[[OUTD]] : memref<?xbf16>,
// CHECK-NOT: gpu.memcpy
// CHECK: gpu.wait [%{{.*}}]
// CHECK-NEXT: return
// CHECK: gpu.func @[[GEN]](%[[A:.*]]: memref<?xbf16>, %[[O:.*]]: memref<?xbf16>, %[[C:.*]]: memref<?xbf16>, %{{.*}}: index) kernel
// CHECK: %[[HALF:.*]] = arith.constant 5.000000e-01 : bf16
// CHECK: scf.if
// CHECK-NEXT: %[[VA:.*]] = memref.load %[[A]]
// CHECK-NEXT: %[[VO:.*]] = memref.load %[[O]]
// CHECK-NEXT: %[[M:.*]] = arith.mulf %[[VA]], %[[HALF]] : bf16
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[M]], %[[VO]] : bf16
// CHECK-NEXT: memref.store %[[S]], %[[C]]
// CHECK: gpu.func @[[ADD]](%[[AI:.*]]: memref<?xbf16>, %[[AO:.*]]: memref<?xbf16>, %{{.*}}: index) kernel
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : bf16
// CHECK: scf.if
// CHECK-NEXT: %[[V:.*]] = memref.load %[[AI]]
// CHECK-NEXT: %[[P:.*]] = arith.addf %[[V]], %[[ONE]] : bf16
// CHECK-NEXT: memref.store %[[P]], %[[AO]]
// CHECK: gpu.func @[[EXP]](
// CHECK: math.exp %{{.*}} : bf16
#id = affine_map<(i, j) -> (i, j)>
func.func @generic(%x: tensor<?x16xbf16>, %wr: tensor<16x4xbf16>, %w1: tensor<4x16x32xbf16>,
                   %w2: tensor<4x32x16xbf16>) -> tensor<?x16xbf16> {
  %half = arith.constant 0.5 : bf16
  %bias = arith.constant dense<1.0> : tensor<8x16xbf16>
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<?x16xbf16>, tensor<16x4xbf16>, tensor<4x16x32xbf16>, tensor<4x32x16xbf16>) -> tensor<?x16xbf16>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
         ins(%y : tensor<?x16xbf16>) outs(%x : tensor<?x16xbf16>) {
  ^bb0(%a: bf16, %o: bf16):
    %m = arith.mulf %a, %half : bf16
    %s = arith.addf %m, %o : bf16
    linalg.yield %s : bf16
  } -> tensor<?x16xbf16>
  %gc = tensor.cast %g : tensor<?x16xbf16> to tensor<8x16xbf16>
  %t = arith.addf %gc, %bias : tensor<8x16xbf16>
  %tc = tensor.cast %t : tensor<8x16xbf16> to tensor<?x16xbf16>
  %e = math.exp %tc : tensor<?x16xbf16>
  return %e : tensor<?x16xbf16>
}

// -----

// A chain (residual add, scaling by a dense constant, compare with a splat
// zero, select) is one kernel: it reads x and the layer's result once and
// writes the two values used outside the chain, %s and %r, straight into
// the out-parameters. The dense constant is a constant global of the
// gpu.module (part of the module image: loaded with the module, no
// gpu.memcpy); the splat is a scalar.

// CHECK-LABEL: func.func @chain(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<4x4xf32>, %{{.*}}: memref<4x2xf32>, %{{.*}}: memref<2x4x8xf32>, %{{.*}}: memref<2x8x4xf32>, %[[R:[a-z0-9]+]]: memref<4x4xf32>, %[[S:[a-z0-9]+]]: memref<4x4xf32>)
// CHECK-NOT: gpu.memcpy
// CHECK: memref.collapse_shape %[[X]]
// CHECK-NEXT: %[[XD:.*]] = memref.cast
// CHECK-NOT: gpu.memcpy
// CHECK: %[[Y:.*]], %{{.*}} = gpu.alloc async {{.*}} {bufferization.manual_deallocation, moe.gpu_device_result} : memref<?xf32>
// CHECK-NOT: gpu.memcpy
// CHECK: %[[SC:.*]] = memref.collapse_shape %[[S]]
// CHECK-NEXT: %[[SD:.*]] = memref.cast %[[SC]]
// CHECK-NEXT: %[[RC:.*]] = memref.collapse_shape %[[R]]
// CHECK-NEXT: %[[RD:.*]] = memref.cast %[[RC]]
// CHECK-NEXT: gpu.launch_func async {{.*}} @moe_kernels::@[[CHAIN:moe_elementwise_addf_mulf_cmpf_select_[0-9a-f]+]] blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%[[XD]] : memref<?xf32>, %[[Y]] : memref<?xf32>, %[[SD]] : memref<?xf32>, %[[RD]] : memref<?xf32>, %c16 : index)
// CHECK-NOT: gpu.launch_func
// CHECK-NOT: gpu.memcpy
// CHECK: gpu.wait [%{{.*}}]
// CHECK-NEXT: return
// CHECK: gpu.module @moe_kernels
// CHECK-NEXT: memref.global "private" constant @[[CONST:moe_const_[0-9a-f]+]] : memref<16xf32> = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00, 6.000000e+00, 7.000000e+00, 8.000000e+00, -1.000000e+00, -2.000000e+00, -3.000000e+00, -4.000000e+00, 5.000000e-01, 2.500000e-01, 1.250000e-01, 0.000000e+00]> {alignment = 16 : i64}
// CHECK: gpu.func @[[CHAIN]](%[[A:.*]]: memref<?xf32>, %[[B:.*]]: memref<?xf32>, %[[OS:.*]]: memref<?xf32>, %[[OR:.*]]: memref<?xf32>, %[[N:.*]]: index) kernel
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[I:.*]] = arith.addi
// CHECK-NEXT: %[[IN:.*]] = arith.cmpi ult, %[[I]], %[[N]]
// CHECK-NEXT: scf.if %[[IN]] {
// CHECK-NEXT: %[[VA:.*]] = memref.load %[[A]][%[[I]]]
// CHECK-NEXT: %[[VB:.*]] = memref.load %[[B]][%[[I]]]
// CHECK-NEXT: %[[G:.*]] = memref.get_global @[[CONST]] : memref<16xf32>
// CHECK-NEXT: %[[VC:.*]] = memref.load %[[G]][%[[I]]]
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[VA]], %[[VB]] : f32
// CHECK-NEXT: %[[T:.*]] = arith.mulf %[[SUM]], %[[VC]] : f32
// CHECK-NEXT: %[[POS:.*]] = arith.cmpf ogt, %[[T]], %[[ZERO]] : f32
// CHECK-NEXT: %[[SEL:.*]] = arith.select %[[POS]], %[[T]], %[[SUM]] : f32
// CHECK-NEXT: memref.store %[[SUM]], %[[OS]][%[[I]]]
// CHECK-NEXT: memref.store %[[SEL]], %[[OR]][%[[I]]]
// CHECK-NEXT: }
func.func @chain(%x: tensor<4x4xf32>, %wr: tensor<4x2xf32>, %w1: tensor<2x4x8xf32>,
                 %w2: tensor<2x8x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %scale = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0],
                                 [-1.0, -2.0, -3.0, -4.0], [0.5, 0.25, 0.125, 0.0]]> : tensor<4x4xf32>
  %zero = arith.constant dense<0.0> : tensor<4x4xf32>
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 1>, activation = #moe.activation<relu>}
         : (tensor<4x4xf32>, tensor<4x2xf32>, tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<4x4xf32>
  %s = arith.addf %x, %y : tensor<4x4xf32>
  %t = arith.mulf %s, %scale : tensor<4x4xf32>
  %pos = arith.cmpf ogt, %t, %zero : tensor<4x4xf32>
  %r = arith.select %pos, %t, %s : tensor<4x4xi1>, tensor<4x4xf32>
  return %r, %s : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// What does not fuse (block.mlir's shape): the first residual sum is read
// by the next layer, which the second add needs, so the two adds stay two
// launches of one kernel, on either side of the layer's.

// CHECK-LABEL: func.func @two_blocks(
// CHECK: gpu.launch_func async {{.*}} @moe_kernels::@[[ADD:moe_elementwise_addf_[0-9a-f]+]] blocks
// CHECK: gpu.launch_func async {{.*}} @moe_kernels::@moe_gate_kernel
// CHECK: gpu.launch_func async {{.*}} @moe_kernels::@[[ADD]] blocks
// CHECK-NOT: gpu.launch_func
// CHECK: return
func.func @two_blocks(%x: tensor<4x4xf32>, %wr: tensor<4x2xf32>, %w1: tensor<2x4x8xf32>,
                      %w2: tensor<2x8x4xf32>) -> tensor<4x4xf32> {
  %h0 = moe.layer %x router(%wr) experts(%w1, %w2)
          {routing = #moe.top_k<k = 1>, activation = #moe.activation<relu>}
          : (tensor<4x4xf32>, tensor<4x2xf32>, tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<4x4xf32>
  %x1 = arith.addf %x, %h0 : tensor<4x4xf32>
  %h1 = moe.layer %x1 router(%wr) experts(%w1, %w2)
          {routing = #moe.top_k<k = 1>, activation = #moe.activation<relu>}
          : (tensor<4x4xf32>, tensor<4x2xf32>, tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<4x4xf32>
  %y = arith.addf %x1, %h1 : tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}
