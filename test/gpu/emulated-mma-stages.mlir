// Pipeline depths of the tensor-core GEMMs (MmaGemmConfig::stages, the
// `_s<N>` kernel names; convert-moe-to-gpu's mma-stages), their buffers in
// dynamic shared memory: the 64 x 128 gemm2 tile of
// emulate-wgmma-async-kernel.mlir with K = 200 (seven k-tiles, the last one
// 8 deep and zero-filled, so every stage buffer of a 2- to 5-stage pipeline
// is reused) for mma.sync (64 rows) and wgmma (64 rows, and 128 rows with
// two warpgroups) at 2, 3, 4 and 5 stages (the unsuffixed names are the
// defaults: 3 for mma.sync, 4 for wgmma). Each is run by the host emulation
// (--moe-test-emulate-gpu, with its wgmma asynchrony checks) and compared
// with the plain loops bit for bit (0 mismatches; every output nonzero),
// and each kernel declares the dynamic shared memory its launches pass:
// stages x (A + B stage) bytes plus the 4-byte row map (mma.sync: A 64 x 40
// and B 32 x 136 bf16, 13824 bytes a stage; wgmma 64 rows: 12288; 128 rows:
// 16384).
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: for v in m64_s2 m64 m64_s4 m64_s5 m64_wgmma_s2 m64_wgmma_s3 m64_wgmma m64_wgmma_s5 m128_wgmma_s2 m128_wgmma_s3 m128_wgmma m128_wgmma_s5; do \
// RUN:   echo "variant $v"; \
// RUN:   sed -e "s/moe_mma_gemm2_bf16_m64_wgmma_s3/moe_mma_gemm2_bf16_$v/g" -e 's/%%K = arith.constant 128 : index/%%K = arith.constant 200 : index/' %S/emulate-wgmma-async-kernel.mlir > %t/$v.mlir; \
// RUN:   case $v in m128*) sed -i -e 's/%%c64 = arith.constant 64 : index/%%c64 = arith.constant 128 : index/' -e 's/%%c128 = arith.constant 128 : index/%%c128 = arith.constant 256 : index/' %t/$v.mlir;; esac; \
// RUN:   moe-opt %t/$v.mlir --moe-test-build-mma-kernels | grep -o 'moe.gpu_dynamic_shared_memory = [0-9]*' || exit 1; \
// RUN:   moe-opt %t/$v.mlir --pass-pipeline="%moe_emulate_mma_pipeline" -o %t/$v.ll.mlir || exit 1; \
// RUN:   moe-test-runner %t/$v.ll.mlir -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp || exit 1; \
// RUN: done > %t/out.txt
// RUN: FileCheck %s --input-file=%t/out.txt
//
// CHECK-LABEL: variant m64_s2
// CHECK-NEXT: moe.gpu_dynamic_shared_memory = 27904
// CHECK-NEXT: mismatches
// CHECK-NEXT: 0
// CHECK-NEXT: nonzero
// CHECK-NEXT: 8192
// CHECK-LABEL: variant m64
// CHECK-NEXT: moe.gpu_dynamic_shared_memory = 41728
// CHECK-NEXT: mismatches
// CHECK-NEXT: 0
// CHECK-NEXT: nonzero
// CHECK-NEXT: 8192
// CHECK-LABEL: variant m64_s4
// CHECK-NEXT: moe.gpu_dynamic_shared_memory = 55552
// CHECK-NEXT: mismatches
// CHECK-NEXT: 0
// CHECK-NEXT: nonzero
// CHECK-NEXT: 8192
// CHECK-LABEL: variant m64_s5
// CHECK-NEXT: moe.gpu_dynamic_shared_memory = 69376
// CHECK-NEXT: mismatches
// CHECK-NEXT: 0
// CHECK-NEXT: nonzero
// CHECK-NEXT: 8192
// CHECK-LABEL: variant m64_wgmma_s2
// CHECK-NEXT: moe.gpu_dynamic_shared_memory = 24832
// CHECK-NEXT: mismatches
// CHECK-NEXT: 0
// CHECK-NEXT: nonzero
// CHECK-NEXT: 8192
// CHECK-LABEL: variant m64_wgmma_s3
// CHECK-NEXT: moe.gpu_dynamic_shared_memory = 37120
// CHECK-NEXT: mismatches
// CHECK-NEXT: 0
// CHECK-NEXT: nonzero
// CHECK-NEXT: 8192
// CHECK-LABEL: variant m64_wgmma
// CHECK-NEXT: moe.gpu_dynamic_shared_memory = 49408
// CHECK-NEXT: mismatches
// CHECK-NEXT: 0
// CHECK-NEXT: nonzero
// CHECK-NEXT: 8192
// CHECK-LABEL: variant m64_wgmma_s5
// CHECK-NEXT: moe.gpu_dynamic_shared_memory = 61696
// CHECK-NEXT: mismatches
// CHECK-NEXT: 0
// CHECK-NEXT: nonzero
// CHECK-NEXT: 8192
// CHECK-LABEL: variant m128_wgmma_s2
// CHECK-NEXT: moe.gpu_dynamic_shared_memory = 33280
// CHECK-NEXT: mismatches
// CHECK-NEXT: 0
// CHECK-NEXT: nonzero
// CHECK-NEXT: 16384
// CHECK-LABEL: variant m128_wgmma_s3
// CHECK-NEXT: moe.gpu_dynamic_shared_memory = 49664
// CHECK-NEXT: mismatches
// CHECK-NEXT: 0
// CHECK-NEXT: nonzero
// CHECK-NEXT: 16384
// CHECK-LABEL: variant m128_wgmma
// CHECK-NEXT: moe.gpu_dynamic_shared_memory = 66048
// CHECK-NEXT: mismatches
// CHECK-NEXT: 0
// CHECK-NEXT: nonzero
// CHECK-NEXT: 16384
// CHECK-LABEL: variant m128_wgmma_s5
// CHECK-NEXT: moe.gpu_dynamic_shared_memory = 82432
// CHECK-NEXT: mismatches
// CHECK-NEXT: 0
// CHECK-NEXT: nonzero
// CHECK-NEXT: 16384
//
// A launch passing less dynamic shared memory than the kernel's views
// span: the emulation stops with a one-line error (the GPU would fault).
// RUN: moe-opt %t/m64_wgmma.mlir --pass-pipeline="builtin.module(moe-test-build-mma-kernels,moe-gpu-materialize-launches)" -o %t/launch.mlir
// RUN: FileCheck %s --check-prefix=LAUNCH --input-file=%t/launch.mlir
// LAUNCH: %[[SMEM:.*]] = arith.constant 49408 : i32
// LAUNCH: gpu.launch_func @moe_kernels::@moe_mma_gemm2_bf16_m64_wgmma blocks in (%{{.*}}, %{{.*}}, %{{.*}}) threads in (%{{.*}}, %{{.*}}, %{{.*}}) dynamic_shared_memory_size %[[SMEM]] args(
// RUN: sed -e 's/arith.constant 49408 : i32/arith.constant 49152 : i32/' %t/launch.mlir \
// RUN:   | moe-opt --pass-pipeline="%moe_emulate_mma_pipeline" -o %t/short.ll.mlir
// RUN: not moe-test-runner %t/short.ll.mlir -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp 2>&1 | FileCheck %s --check-prefix=SHORT
// SHORT: emulated launch of kernel moe_mma_gemm2_bf16_m64_wgmma: memref.view of bytes 49152..49408 of gpu.dynamic_shared_memory is past the launch's dynamic_shared_memory_size
