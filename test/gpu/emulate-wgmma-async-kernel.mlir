// The emulation's wgmma asynchrony model (--moe-test-emulate-gpu, docs/gpu.md
// "What the emulation checks for wgmma") on the real sm_90a kernel
// (MmaGemm.cpp, a 64 x 128 gemm2 tile with three stages, `_s3`, K = 128:
// four k-tiles, so every stage buffer is reused): the kernel as built runs clean and equals the plain
// loops bit for bit; each mutation of its IR (one synchronisation op deleted
// or weakened) is reported by the emulation as a one-line error naming the
// kernel and the op, and the run fails.
//
// RUN: moe-opt %s --moe-test-build-mma-kernels -o %t.kernel.mlir
// RUN: moe-opt %t.kernel.mlir --pass-pipeline="%moe_emulate_mma_pipeline" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp \
// RUN:   | FileCheck %s --check-prefix=OK
// OK: mismatches
// OK-NEXT: 0
// OK-NEXT: nonzero
// OK-NEXT: 8192
//
// The kernel keeps one wgmma group in flight across stages (wait_group 1)
// and retires the last one before the epilogue (wait_group 0).
// RUN: FileCheck %s --check-prefix=WAITS --input-file=%t.kernel.mlir
// WAITS-LABEL: gpu.func @moe_mma_gemm2_bf16_m64_wgmma_s3(
// WAITS: scf.for
// WAITS: nvvm.wgmma.fence.aligned
// WAITS: nvvm.wgmma.mma_async
// WAITS: nvvm.wgmma.mma_async
// WAITS-NEXT: nvvm.wgmma.commit.group.sync.aligned
// WAITS-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// WAITS-NEXT: gpu.barrier
// WAITS: nvvm.cp.async.commit.group
// WAITS: scf.yield
// WAITS-NEXT: }
// WAITS-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// WAITS-NEXT: llvm.extractvalue
//
// The conservative pipeline (convert-moe-to-gpu's wgmma-groups-in-flight=0,
// the `_s3_inflight0` kernel): every stage's group retired before the barrier
// (wait_group 0); the emulation accepts it and the result is the same.
// RUN: sed -e 's/moe_mma_gemm2_bf16_m64_wgmma_s3\([(}]\)/moe_mma_gemm2_bf16_m64_wgmma_s3_inflight0\1/g' %s \
// RUN:   | moe-opt --moe-test-build-mma-kernels -o %t.kernel0.mlir
// RUN: FileCheck %s --check-prefix=WAITS0 --input-file=%t.kernel0.mlir
// RUN: moe-opt %t.kernel0.mlir --pass-pipeline="%moe_emulate_mma_pipeline" --emit-bytecode \
// RUN:   | moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp \
// RUN:   | FileCheck %s --check-prefix=OK
// WAITS0-LABEL: gpu.func @moe_mma_gemm2_bf16_m64_wgmma_s3_inflight0(
// WAITS0: scf.for
// WAITS0: nvvm.wgmma.mma_async
// WAITS0: nvvm.wgmma.mma_async
// WAITS0-NEXT: nvvm.wgmma.commit.group.sync.aligned
// WAITS0-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// WAITS0-NEXT: gpu.barrier
// WAITS0: nvvm.cp.async.commit.group
// WAITS0: scf.yield
// WAITS0-NEXT: }
// WAITS0-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// WAITS0-NEXT: llvm.extractvalue
//
// No final wgmma.wait_group 0: the epilogue reads the accumulators
// (llvm.extractvalue) while the last group is in flight.
// RUN: sed -e '/nvvm.wgmma.wait.group.sync.aligned 0/d' %t.kernel.mlir \
// RUN:   | moe-opt --pass-pipeline="%moe_emulate_mma_pipeline" -o %t.nowait.mlir
// RUN: not moe-test-runner %t.nowait.mlir -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOWAIT
// NOWAIT: emulated wgmma: kernel moe_mma_gemm2_bf16_m64_wgmma_s3: llvm.extractvalue accesses accumulator registers while a wgmma.mma_async is in flight (no wgmma.wait_group retired it)
//
// Two groups left in flight (wait_group 2) with three stages: the loads
// into the buffer of stage kt-1 start while its wgmmas are still running.
// RUN: sed -e 's/nvvm.wgmma.wait.group.sync.aligned 1/nvvm.wgmma.wait.group.sync.aligned 2/' %t.kernel.mlir \
// RUN:   | moe-opt --pass-pipeline="%moe_emulate_mma_pipeline" -o %t.wait2.mlir
// RUN: not moe-test-runner %t.wait2.mlir -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp 2>&1 \
// RUN:   | FileCheck %s --check-prefix=WAIT2
// WAIT2: emulated wgmma: kernel moe_mma_gemm2_bf16_m64_wgmma_s3: a generic-proxy write (st.shared, cp.async) to shared memory that an nvvm.wgmma.mma_async in flight reads (a stage overwritten before wgmma.wait_group retired its reader)
//
// No fence.proxy.async after the stage's copies landed: the wgmma reads
// generic-proxy writes its writers did not fence.
// RUN: sed -e '/nvvm.fence.proxy/d' %t.kernel.mlir \
// RUN:   | moe-opt --pass-pipeline="%moe_emulate_mma_pipeline" -o %t.noproxy.mlir
// RUN: not moe-test-runner %t.noproxy.mlir -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOPROXY
// NOPROXY: emulated wgmma: kernel moe_mma_gemm2_bf16_m64_wgmma_s3: nvvm.wgmma.mma_async #0 reads shared memory written through the generic proxy (st.shared, cp.async) with no later fence.proxy.async by the writing thread
//
// No wgmma.fence: the first wgmma follows the accumulators' initialisation
// (llvm.insertvalue) unfenced.
// RUN: sed -e '/nvvm.wgmma.fence.aligned/d' %t.kernel.mlir \
// RUN:   | moe-opt --pass-pipeline="%moe_emulate_mma_pipeline" -o %t.nofence.mlir
// RUN: not moe-test-runner %t.nofence.mlir -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOFENCE
// NOFENCE: emulated wgmma: kernel moe_mma_gemm2_bf16_m64_wgmma_s3: nvvm.wgmma.mma_async #0: the accumulator registers were accessed after the last wgmma.fence (or no wgmma.fence before the first wgmma)

func.func private @__moe_launch_moe_mma_gemm2_bf16_m64_wgmma_s3(index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xf32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, index, index) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm2_bf16_m64_wgmma_s3}

/// n values sin(i * freq) * scale, rounded to bf16.
func.func @fill(%n: index, %freq: f32, %scale: f32) -> memref<?xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = memref.alloc(%n) : memref<?xbf16>
  scf.for %i = %c0 to %n step %c1 {
    %ii = arith.index_cast %i : index to i64
    %f = arith.sitofp %ii : i64 to f32
    %g = arith.mulf %f, %freq : f32
    %s = math.sin %g : f32
    %v = arith.mulf %s, %scale : f32
    %t = arith.truncf %v : f32 to bf16
    memref.store %t, %m[%i] : memref<?xbf16>
  }
  return %m : memref<?xbf16>
}

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %K = arith.constant 128 : index
  %N = arith.constant 128 : index
  %z = arith.constant 0.0 : f32
  %na = arith.muli %c64, %K : index
  %nb = arith.muli %K, %N : index
  %no = arith.muli %c64, %N : index
  %fa = arith.constant 0.29 : f32
  %fb = arith.constant 0.13 : f32
  %s1 = arith.constant 1.0 : f32
  %s2 = arith.constant 0.25 : f32
  %a = func.call @fill(%na, %fa, %s1) : (index, f32, f32) -> memref<?xbf16>
  %b = func.call @fill(%nb, %fb, %s2) : (index, f32, f32) -> memref<?xbf16>
  // One tile of 64 rows (row p of A is output row p), expert 0.
  %sorted = memref.alloc(%c64) : memref<?xi32>
  scf.for %p = %c0 to %c64 step %c1 {
    %pi = arith.index_cast %p : index to i32
    memref.store %pi, %sorted[%p] : memref<?xi32>
  }
  %te = memref.alloc(%c1) : memref<?xi32>
  %nt = memref.alloc(%c1) : memref<?xi32>
  %zero = arith.constant 0 : i32
  %one = arith.constant 1 : i32
  memref.store %zero, %te[%c0] : memref<?xi32>
  memref.store %one, %nt[%c0] : memref<?xi32>
  %rw = memref.alloc(%c64) : memref<?xf32>
  %out = memref.alloc(%no) : memref<?xbf16>
  func.call @__moe_launch_moe_mma_gemm2_bf16_m64_wgmma_s3(%c1, %c1, %c1, %c128, %c1, %c1, %a, %sorted, %rw, %te, %nt, %b, %b, %out, %K, %N) : (index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xf32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, index, index) -> ()
  // The plain loops: the f32 sum in ascending k, rounded to bf16.
  %counts:2 = scf.for %r = %c0 to %c64 step %c1 iter_args(%bad = %c0, %nz = %c0) -> (index, index) {
    %rc:2 = scf.for %n = %c0 to %N step %c1 iter_args(%bad1 = %bad, %nz1 = %nz) -> (index, index) {
      %sum = scf.for %k = %c0 to %K step %c1 iter_args(%acc = %z) -> f32 {
        %ai = arith.addi %k, %c0 : index
        %ar = arith.muli %r, %K : index
        %aidx = arith.addi %ar, %k : index
        %av = memref.load %a[%aidx] : memref<?xbf16>
        %bk = arith.muli %k, %N : index
        %bidx = arith.addi %bk, %n : index
        %bv = memref.load %b[%bidx] : memref<?xbf16>
        %af = arith.extf %av : bf16 to f32
        %bf = arith.extf %bv : bf16 to f32
        %m = arith.mulf %af, %bf : f32
        %s = arith.addf %acc, %m : f32
        scf.yield %s : f32
      }
      %ref = arith.truncf %sum : f32 to bf16
      %orow = arith.muli %r, %N : index
      %oidx = arith.addi %orow, %n : index
      %got = memref.load %out[%oidx] : memref<?xbf16>
      %refi = arith.bitcast %ref : bf16 to i16
      %goti = arith.bitcast %got : bf16 to i16
      %same = arith.cmpi eq, %refi, %goti : i16
      %bad2 = arith.addi %bad1, %c1 : index
      %bad3 = arith.select %same, %bad1, %bad2 : index
      %isz = arith.cmpf oeq, %sum, %z : f32
      %nz2 = arith.addi %nz1, %c1 : index
      %nz3 = arith.select %isz, %nz1, %nz2 : index
      scf.yield %bad3, %nz3 : index, index
    }
    scf.yield %rc#0, %rc#1 : index, index
  }
  vector.print str "mismatches\n"
  vector.print %counts#0 : index
  vector.print str "nonzero\n"
  vector.print %counts#1 : index
  return
}
