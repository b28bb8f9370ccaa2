// The structure of the tensor-core expert GEMMs (lowering/gpu/MmaGemm.cpp),
// built by --moe-test-build-mma-kernels from the names of launch
// placeholders: the 3-stage cp.async pipeline (two stages issued before the
// loop, one group committed per stage; in the loop: wait for all but the
// newest group, barrier, issue the stage after next, compute), ldmatrix of A
// and (transposed) B, bf16 mma.sync on i32 pairs, then the epilogue (the
// activation, h rounded to bf16). Numerics: mma-gemm-emulated.mlir.
// RUN: moe-opt %s -split-input-file -verify-diagnostics --moe-test-build-mma-kernels | FileCheck %s

func.func private @__moe_launch_moe_mma_gemm1_gather_swiglu_bias_bf16_m64(index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, index, index) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm1_gather_swiglu_bias_bf16_m64}

// CHECK-LABEL: gpu.func @moe_mma_gemm1_gather_swiglu_bias_bf16_m64(
// Every shared buffer is a view of the dynamic shared memory
// (MmaGemmConfig::smemLayout), no workgroup attribution: 3 stages of A
// (64 x (32+8)) at byte 0 and B (32 x (128+8)) at 15360, padded rows,
// 128-byte aligned offsets (16-byte cp.async destinations); the gathered
// rows at 41472; 41728 bytes in all, the size every launch passes.
// CHECK-SAME: %{{.*}}: index) kernel attributes {known_block_size = array<i32: 128, 1, 1>, moe.gpu_dynamic_shared_memory = 41728 : i32, nvvm.minctasm = 1 : i32}
// CHECK-NEXT: %[[DYN:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK-NEXT: %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[A:.*]] = memref.view %[[DYN]][%[[C0]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<7680xbf16, #gpu.address_space<workgroup>>
// CHECK-NEXT: %[[CB:.*]] = arith.constant 15360 : index
// CHECK-NEXT: %[[B:.*]] = memref.view %[[DYN]][%[[CB]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<13056xbf16, #gpu.address_space<workgroup>>
// CHECK-NEXT: %[[CR:.*]] = arith.constant 41472 : index
// CHECK-NEXT: %[[ROWS:.*]] = memref.view %[[DYN]][%[[CR]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64xi32, #gpu.address_space<workgroup>>
// CHECK-NOT: gpu.dynamic_shared_memory
// CHECK: gpu.grid_dim x
// CHECK: memref.store %{{.*}}, %[[ROWS]]
// CHECK: gpu.barrier
// Prologue: stages 0 and 1.
// CHECK: nvgpu.device_async_copy %arg0[%{{.*}}], %[[A]][%{{.*}}], 8, %{{.*}} {bypassL1}
// CHECK: nvgpu.device_async_copy %arg5[%{{.*}}], %[[B]][%{{.*}}], 8, %{{.*}} {bypassL1}
// CHECK: nvvm.cp.async.commit.group
// CHECK: nvgpu.device_async_copy %arg0[%{{.*}}], %[[A]]
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.for
// CHECK-NEXT: nvvm.cp.async.wait.group 1
// CHECK-NEXT: gpu.barrier
// CHECK: nvgpu.device_async_copy %arg0[%{{.*}}], %[[A]]
// CHECK: nvgpu.device_async_copy %arg5[%{{.*}}], %[[B]]
// CHECK: nvvm.cp.async.commit.group
// CHECK: nvgpu.ldmatrix %[[A]][%{{.*}}] {numTiles = 4 : i32, transpose = false} : memref<7680xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK: nvgpu.ldmatrix %[[A]][%{{.*}}] {numTiles = 4 : i32, transpose = false}
// CHECK: nvgpu.ldmatrix %[[B]][%{{.*}}] {numTiles = 4 : i32, transpose = true} : memref<13056xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK: llvm.bitcast %{{.*}} : vector<2xbf16> to i32
// CHECK: nvvm.mma.sync A[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}]  B[%{{.*}}, %{{.*}}]  C[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}]  {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK: scf.yield
// CHECK: nvvm.cp.async.wait.group 0
// Epilogue: bias, silu(gate) * up, h rounded to bf16.
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: math.exp
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: gpu.return

// -----

func.func private @__moe_launch_moe_mma_gemm2_weighted_f16_m16_outf32(index, index, index, index, index, index, memref<?xf16>, memref<?xi32>, memref<?xf32>, memref<?xi32>, memref<?xi32>, memref<?xf16>, memref<?xf16>, memref<?xf32>, index, index) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm2_weighted_f16_m16_outf32}

// The decode tile: 16 rows, one warp row of four warps; four stages of A
// (16 x 40) and B (32 x 136) and the rows: 40000 bytes; three stages in
// flight (wait_group 2).
// CHECK-LABEL: gpu.func @moe_mma_gemm2_weighted_f16_m16_outf32(
// CHECK-SAME: %{{.*}}: memref<?xf16>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xf16>, %{{.*}}: memref<?xf16>, %{{.*}}: memref<?xf32>, %{{.*}}: index, %{{.*}}: index)
// CHECK-SAME: moe.gpu_dynamic_shared_memory = 40000 : i32
// CHECK: memref.view %{{.*}}[%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<2560xf16, #gpu.address_space<workgroup>>
// CHECK: memref.view %{{.*}}[%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<17408xf16, #gpu.address_space<workgroup>>
// CHECK: memref.view %{{.*}}[%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16xi32, #gpu.address_space<workgroup>>
// CHECK-COUNT-3: nvvm.cp.async.commit.group
// CHECK: scf.for
// CHECK-NEXT: nvvm.cp.async.wait.group 2
// CHECK: nvgpu.ldmatrix
// CHECK: nvvm.mma.sync {{.*}}shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
// CHECK: scf.yield
// The routed weight (f32) scales the f32 row.
// CHECK: memref.load %arg2
// CHECK: arith.mulf
// CHECK: memref.store %{{.*}}, %arg7[%{{.*}}] : memref<?xf32>
// CHECK: gpu.return

// -----

func.func private @__moe_launch_moe_mma_gemm2_weighted_combine_shared_bf16_m16_outf32(index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xf32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, index, index, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, index, memref<?xf32>) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm2_weighted_combine_shared_bf16_m16_outf32}

// The fused layer's GEMM2: after the rows (f32), the combine epilogue
// shared with the CUDA-core GEMM2 (Kernels.cpp, emitCombineEpilogue):
// release fence, barrier, one atomic arrival per valid row on counter
// (token, column tile of 128), barrier, acquire fence, then the token's rows
// summed in slot order from the shared expert's f32 output, y rounded once.
// CHECK-LABEL: gpu.func @moe_mma_gemm2_weighted_combine_shared_bf16_m16_outf32(
// CHECK-SAME: %[[SRC:[^:]*]]: memref<?xi32>, %[[POS:[^:]*]]: memref<?xi32>, %[[CNT:[^:]*]]: memref<?xi32>, %[[Y:[^:]*]]: memref<?xbf16>, %[[K:[^:]*]]: index, %[[SH:[^:]*]]: memref<?xf32>)
// The combine's per-row tokens after the rows (16 x 4 bytes at 40000).
// CHECK-SAME: moe.gpu_dynamic_shared_memory = 40064 : i32
// CHECK: %[[C40000:.*]] = arith.constant 40000 : index
// CHECK-NEXT: %[[LAST:.*]] = memref.view %{{.*}}[%[[C40000]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16xi32, #gpu.address_space<workgroup>>
// CHECK: nvvm.mma.sync
// CHECK: memref.store %{{.*}}, %arg7[%{{.*}}] : memref<?xf32>
// CHECK: %[[CT:.*]] = arith.ceildivui %arg9, %c128
// CHECK-NEXT: llvm.fence syncscope("device") acq_rel
// CHECK-NEXT: gpu.barrier
// CHECK: memref.atomic_rmw addi %{{.*}}, %[[CNT]][%{{.*}}] : (i32, memref<?xi32>) -> i32
// CHECK: memref.store %{{.*}}, %[[LAST]][%{{.*}}]
// CHECK: gpu.barrier
// CHECK-NEXT: llvm.fence syncscope("device") acq_rel
// CHECK: memref.load %[[SH]]
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[K]]
// CHECK: memref.load %[[POS]]
// CHECK: arith.addf
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: memref.store %{{.*}}, %[[Y]]
// CHECK: gpu.return

// -----

func.func private @__moe_launch_moe_mma_gemm1_gather_swiglu_bias_bf16_m64_wgmma(index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, index, index) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm1_gather_swiglu_bias_bf16_m64_wgmma}

// sm_90a: the stages in the canonical core-matrix layout (no padding:
// 4 x 64 x 32 and 4 x 32 x 128, 49408 bytes with the rows); per stage (all
// but the two newest cp.async groups landed) the async-proxy fence before
// the barrier, then wgmma.fence, two m64n128k16 wgmma.mma_async on
// descriptors (A K-major "row", B MN-major "row") chained on the
// loop-carried accumulator struct, commit, wait 1 (one group left in
// flight), a barrier,
// and only then the next stage's loads; wait 0 after the loop, before the
// accumulators are read. The descriptors are built from the buffers'
// aligned pointers.
// CHECK-LABEL: gpu.func @moe_mma_gemm1_gather_swiglu_bias_bf16_m64_wgmma(
// CHECK-SAME: moe.gpu_dynamic_shared_memory = 49408 : i32
// CHECK: %[[A:.*]] = memref.view %{{.*}}[%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<8192xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[B:.*]] = memref.view %{{.*}}[%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16384xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[ACC0:.*]] = llvm.insertvalue %{{.*}}[63] : !llvm.struct<(f32, f32
// CHECK: %[[ACC:.*]]:2 = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[IN:[^ ]*]] = %[[ACC0]], %{{.*}} = %{{.*}}) -> (!llvm.struct<(f32, f32
// CHECK-NEXT: nvvm.cp.async.wait.group 2
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: nvvm.cp.async.commit.group
// CHECK: nvvm.wgmma.fence.aligned
// CHECK: memref.extract_aligned_pointer_as_index %[[A]]
// CHECK: memref.extract_aligned_pointer_as_index %[[B]]
// CHECK: %[[D0:.*]] = nvvm.wgmma.mma_async %{{.*}}, %{{.*}}, %[[IN]], <m = 64, n = 128, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// CHECK: %[[D1:.*]] = nvvm.wgmma.mma_async %{{.*}}, %{{.*}}, %[[D0]],
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK-NEXT: gpu.barrier
// CHECK-NOT: nvvm.mma.sync
// CHECK: nvvm.cp.async.commit.group
// The stage buffer of the next k-tile, carried (no remainder by S).
// CHECK: scf.yield %[[D1]], %{{.*}} : !llvm.struct<(f32, {{.*}}, index
// CHECK-NEXT: }
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NEXT: llvm.extractvalue %[[ACC]]#0[0]
// CHECK: gpu.return

// -----

// expected-error @+1 {{moe-test-build-mma-kernels: 'moe_mma_gemm3_bf16_m64' is not a tensor-core GEMM kernel name}}
func.func private @__moe_launch_moe_mma_gemm3_bf16_m64(index) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm3_bf16_m64}

// -----

// Quantized B (the name ends with GroupedGemmDesc::formatSuffix; docs/gpu.md,
// "Quantized expert weights"): B is the codes, the scales (and int4 zero
// points) are the last arguments, and the codes are staged by element loads
// (no cp.async of B) as their exact factors in bf16.
func.func private @__moe_launch_moe_mma_gemm2_bf16_m16_outf32_fp8b64x128(index) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm2_bf16_m16_outf32_fp8b64x128}
func.func private @__moe_launch_moe_mma_gemm1_relu_bf16_m64_int4g32_zp(index) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm1_relu_bf16_m64_int4g32_zp}

// CHECK-LABEL: gpu.func @moe_mma_gemm2_bf16_m16_outf32_fp8b64x128(
// CHECK-SAME: %arg5: memref<?xf8E4M3FN>
// CHECK-SAME: %arg9: index, %arg10: memref<?xf32>) kernel
// CHECK-NOT: nvgpu.device_async_copy %arg5
// CHECK: memref.load %arg5[%{{.*}}] : memref<?xf8E4M3FN>
// CHECK-LABEL: gpu.func @moe_mma_gemm1_relu_bf16_m64_int4g32_zp(
// CHECK-SAME: %arg5: memref<?xi4>
// CHECK-SAME: %arg9: index, %arg10: memref<?xf32>, %arg11: memref<?xi4>) kernel

// -----

// Blocks or groups along K must be whole k-tiles (32), and only the
// forward GEMMs take quantized B.
// expected-error @+1 {{moe-test-build-mma-kernels: 'moe_mma_gemm1_relu_bf16_m16_int4g48' is not a tensor-core GEMM kernel name}}
func.func private @__moe_launch_moe_mma_gemm1_relu_bf16_m16_int4g48(index) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm1_relu_bf16_m16_int4g48}

// -----

// expected-error @+1 {{moe-test-build-mma-kernels: 'moe_mma_wgrad_bf16_m64_fp8b128x128' is not a tensor-core GEMM kernel name}}
func.func private @__moe_launch_moe_mma_wgrad_bf16_m64_fp8b128x128(index) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_wgrad_bf16_m64_fp8b128x128}
