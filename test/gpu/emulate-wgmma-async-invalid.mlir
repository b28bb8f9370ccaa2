// The emulation's model of wgmma's asynchrony (--moe-test-emulate-gpu;
// docs/gpu.md, "What the emulation checks for wgmma"), rule by rule, on
// small hand-written kernels: one warpgroup, one m64n8k16 wgmma per group
// (A 64 x 16 K-major, B 16 x 8 MN-major, two stages of each in shared
// memory; a barrier before each overwrite, as a kernel would need). Each
// entry point launches one kernel: the correct ones (@ok, @ok_wait1) run
// clean; each broken one fails with a one-line error naming the kernel and
// the op, exit status 1.
//
// RUN: moe-opt %s --pass-pipeline="%moe_emulate_mma_pipeline" --emit-bytecode -o %t.ll.mlir
// DEFINE: %{run} = moe-test-runner %t.ll.mlir -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp
// RUN: %{run} -e ok | FileCheck %s --check-prefix=OK
// RUN: %{run} -e ok_wait1 | FileCheck %s --check-prefix=OK
// OK: done
//
// A missing wgmma.wait_group: the accumulators are read in flight (b).
// RUN: not %{run} -e nowait 2>&1 | FileCheck %s --check-prefix=NOWAIT
// NOWAIT: emulated wgmma: kernel nowait: llvm.extractvalue accesses accumulator registers while a wgmma.mma_async is in flight (no wgmma.wait_group retired it)
//
// No wgmma.fence before the first wgmma (d), or one before the
// accumulators' initialisation only (d).
// RUN: not %{run} -e nofence 2>&1 | FileCheck %s --check-prefix=NOFENCE
// NOFENCE: emulated wgmma: kernel nofence: nvvm.wgmma.mma_async #0: the accumulator registers were accessed after the last wgmma.fence (or no wgmma.fence before the first wgmma)
// RUN: not %{run} -e touch_after_fence 2>&1 | FileCheck %s --check-prefix=TOUCH
// TOUCH: emulated wgmma: kernel touch_after_fence: nvvm.wgmma.mma_async #0: the accumulator registers were accessed after the last wgmma.fence
//
// st.shared writes of the operands not followed by fence.proxy.async in the
// writing thread: none (c), or one before the writes (c).
// RUN: not %{run} -e noproxy 2>&1 | FileCheck %s --check-prefix=NOPROXY
// NOPROXY: emulated wgmma: kernel noproxy: nvvm.wgmma.mma_async #0 reads shared memory written through the generic proxy (st.shared, cp.async) with no later fence.proxy.async by the writing thread
// RUN: not %{run} -e proxy_too_early 2>&1 | FileCheck %s --check-prefix=EARLY
// EARLY: emulated wgmma: kernel proxy_too_early: nvvm.wgmma.mma_async #0 reads shared memory written through the generic proxy
//
// An operand overwritten while its wgmma is in flight (a): by st.shared or
// a cp.async (the write checks the element's pending readers), or by an op
// the emulation does not watch (vector.store: the wgmma's D computed again
// at retirement differs from D at issue).
// RUN: not %{run} -e store_in_flight 2>&1 | FileCheck %s --check-prefix=INFLIGHT -DK=store_in_flight
// RUN: not %{run} -e copy_in_flight 2>&1 | FileCheck %s --check-prefix=INFLIGHT -DK=copy_in_flight
// INFLIGHT: emulated wgmma: kernel [[K]]: a generic-proxy write (st.shared, cp.async) to shared memory that an nvvm.wgmma.mma_async in flight reads (a stage overwritten before wgmma.wait_group retired its reader)
// RUN: not %{run} -e vector_in_flight 2>&1 | FileCheck %s --check-prefix=RETIRE
// RETIRE: emulated wgmma: kernel vector_in_flight: nvvm.wgmma.wait.group.sync.aligned retiring nvvm.wgmma.mma_async #0: its shared operands changed between issue and the wgmma.wait_group that retired it (a stage overwritten while the wgmma was in flight)
//
// wait_group 1 after two groups retires the older one only: overwriting its
// stage is fine (@ok_wait1), the younger one's is not (a).
// RUN: not %{run} -e wait1_overwrite_pending 2>&1 | FileCheck %s --check-prefix=INFLIGHT -DK=wait1_overwrite_pending

module attributes {gpu.container_module} {
  gpu.module @kernels {

    gpu.func @ok(%a: memref<?xbf16>, %b: memref<?xbf16>, %out: memref<?xf32>)
        workgroup(%sa: memref<2048xbf16, #gpu.address_space<workgroup>>, %sb: memref<256xbf16, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %c1024 = arith.constant 1024 : index
      %c128 = arith.constant 128 : index
      %tid = gpu.thread_id x
      %z = arith.constant 0.0 : f32
      // Stage 0 of A (64 x 16, K-major core matrices: 1024 elements) and B
      // (16 x 8, MN-major: 128 elements); stage 1 right after each.
      %a0 = arith.muli %tid, %c8 : index
      scf.for %j = %c0 to %c8 step %c1 {
        %i = arith.addi %a0, %j : index
        %v = memref.load %a[%i] : memref<?xbf16>
        memref.store %v, %sa[%i] : memref<2048xbf16, #gpu.address_space<workgroup>>
        %i1 = arith.addi %i, %c1024 : index
        memref.store %v, %sa[%i1] : memref<2048xbf16, #gpu.address_space<workgroup>>
      }
      %vb = memref.load %b[%tid] : memref<?xbf16>
      memref.store %vb, %sb[%tid] : memref<256xbf16, #gpu.address_space<workgroup>>
      %tb1 = arith.addi %tid, %c128 : index
      memref.store %vb, %sb[%tb1] : memref<256xbf16, #gpu.address_space<workgroup>>
      // Descriptors: A LBO 1024 B, SBO 128 B; B LBO 128 B, SBO 128 B.
      %pa = memref.extract_aligned_pointer_as_index %sa : memref<2048xbf16, #gpu.address_space<workgroup>> -> index
      %pb = memref.extract_aligned_pointer_as_index %sb : memref<256xbf16, #gpu.address_space<workgroup>> -> index
      %pa64 = arith.index_cast %pa : index to i64
      %pb64 = arith.index_cast %pb : index to i64
      %c4 = arith.constant 4 : i64
      %fa = arith.constant 34363932672 : i64
      %fb = arith.constant 34360262656 : i64
      %sa4 = arith.shrui %pa64, %c4 : i64
      %sb4 = arith.shrui %pb64, %c4 : i64
      %da0 = arith.ori %sa4, %fa : i64
      %db0 = arith.ori %sb4, %fb : i64
      // Stage 1: 2048 bytes further for A (>> 4: 128), 256 for B (16).
      %s1a = arith.constant 128 : i64
      %s1b = arith.constant 16 : i64
      %da1 = arith.addi %da0, %s1a : i64
      %db1 = arith.addi %db0, %s1b : i64
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      gpu.barrier
      %p = llvm.mlir.poison : !llvm.struct<(f32, f32, f32, f32)>
      %q0 = llvm.insertvalue %z, %p[0] : !llvm.struct<(f32, f32, f32, f32)>
      %q1 = llvm.insertvalue %z, %q0[1] : !llvm.struct<(f32, f32, f32, f32)>
      %q2 = llvm.insertvalue %z, %q1[2] : !llvm.struct<(f32, f32, f32, f32)>
      %acc = llvm.insertvalue %z, %q2[3] : !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.fence.aligned
      %d = nvvm.wgmma.mma_async %da0, %db0, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>] : !llvm.struct<(f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 0
      %c4i = arith.constant 4 : index
      %o = arith.muli %tid, %c4i : index
      %e0 = llvm.extractvalue %d[0] : !llvm.struct<(f32, f32, f32, f32)>
      memref.store %e0, %out[%o] : memref<?xf32>
      gpu.return
    }

    gpu.func @nowait(%a: memref<?xbf16>, %b: memref<?xbf16>, %out: memref<?xf32>)
        workgroup(%sa: memref<2048xbf16, #gpu.address_space<workgroup>>, %sb: memref<256xbf16, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %c1024 = arith.constant 1024 : index
      %c128 = arith.constant 128 : index
      %tid = gpu.thread_id x
      %z = arith.constant 0.0 : f32
      // Stage 0 of A (64 x 16, K-major core matrices: 1024 elements) and B
      // (16 x 8, MN-major: 128 elements); stage 1 right after each.
      %a0 = arith.muli %tid, %c8 : index
      scf.for %j = %c0 to %c8 step %c1 {
        %i = arith.addi %a0, %j : index
        %v = memref.load %a[%i] : memref<?xbf16>
        memref.store %v, %sa[%i] : memref<2048xbf16, #gpu.address_space<workgroup>>
        %i1 = arith.addi %i, %c1024 : index
        memref.store %v, %sa[%i1] : memref<2048xbf16, #gpu.address_space<workgroup>>
      }
      %vb = memref.load %b[%tid] : memref<?xbf16>
      memref.store %vb, %sb[%tid] : memref<256xbf16, #gpu.address_space<workgroup>>
      %tb1 = arith.addi %tid, %c128 : index
      memref.store %vb, %sb[%tb1] : memref<256xbf16, #gpu.address_space<workgroup>>
      // Descriptors: A LBO 1024 B, SBO 128 B; B LBO 128 B, SBO 128 B.
      %pa = memref.extract_aligned_pointer_as_index %sa : memref<2048xbf16, #gpu.address_space<workgroup>> -> index
      %pb = memref.extract_aligned_pointer_as_index %sb : memref<256xbf16, #gpu.address_space<workgroup>> -> index
      %pa64 = arith.index_cast %pa : index to i64
      %pb64 = arith.index_cast %pb : index to i64
      %c4 = arith.constant 4 : i64
      %fa = arith.constant 34363932672 : i64
      %fb = arith.constant 34360262656 : i64
      %sa4 = arith.shrui %pa64, %c4 : i64
      %sb4 = arith.shrui %pb64, %c4 : i64
      %da0 = arith.ori %sa4, %fa : i64
      %db0 = arith.ori %sb4, %fb : i64
      // Stage 1: 2048 bytes further for A (>> 4: 128), 256 for B (16).
      %s1a = arith.constant 128 : i64
      %s1b = arith.constant 16 : i64
      %da1 = arith.addi %da0, %s1a : i64
      %db1 = arith.addi %db0, %s1b : i64
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      gpu.barrier
      %p = llvm.mlir.poison : !llvm.struct<(f32, f32, f32, f32)>
      %q0 = llvm.insertvalue %z, %p[0] : !llvm.struct<(f32, f32, f32, f32)>
      %q1 = llvm.insertvalue %z, %q0[1] : !llvm.struct<(f32, f32, f32, f32)>
      %q2 = llvm.insertvalue %z, %q1[2] : !llvm.struct<(f32, f32, f32, f32)>
      %acc = llvm.insertvalue %z, %q2[3] : !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.fence.aligned
      %d = nvvm.wgmma.mma_async %da0, %db0, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>] : !llvm.struct<(f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.commit.group.sync.aligned
      %c4i = arith.constant 4 : index
      %o = arith.muli %tid, %c4i : index
      %e0 = llvm.extractvalue %d[0] : !llvm.struct<(f32, f32, f32, f32)>
      memref.store %e0, %out[%o] : memref<?xf32>
      gpu.return
    }

    gpu.func @nofence(%a: memref<?xbf16>, %b: memref<?xbf16>, %out: memref<?xf32>)
        workgroup(%sa: memref<2048xbf16, #gpu.address_space<workgroup>>, %sb: memref<256xbf16, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %c1024 = arith.constant 1024 : index
      %c128 = arith.constant 128 : index
      %tid = gpu.thread_id x
      %z = arith.constant 0.0 : f32
      // Stage 0 of A (64 x 16, K-major core matrices: 1024 elements) and B
      // (16 x 8, MN-major: 128 elements); stage 1 right after each.
      %a0 = arith.muli %tid, %c8 : index
      scf.for %j = %c0 to %c8 step %c1 {
        %i = arith.addi %a0, %j : index
        %v = memref.load %a[%i] : memref<?xbf16>
        memref.store %v, %sa[%i] : memref<2048xbf16, #gpu.address_space<workgroup>>
        %i1 = arith.addi %i, %c1024 : index
        memref.store %v, %sa[%i1] : memref<2048xbf16, #gpu.address_space<workgroup>>
      }
      %vb = memref.load %b[%tid] : memref<?xbf16>
      memref.store %vb, %sb[%tid] : memref<256xbf16, #gpu.address_space<workgroup>>
      %tb1 = arith.addi %tid, %c128 : index
      memref.store %vb, %sb[%tb1] : memref<256xbf16, #gpu.address_space<workgroup>>
      // Descriptors: A LBO 1024 B, SBO 128 B; B LBO 128 B, SBO 128 B.
      %pa = memref.extract_aligned_pointer_as_index %sa : memref<2048xbf16, #gpu.address_space<workgroup>> -> index
      %pb = memref.extract_aligned_pointer_as_index %sb : memref<256xbf16, #gpu.address_space<workgroup>> -> index
      %pa64 = arith.index_cast %pa : index to i64
      %pb64 = arith.index_cast %pb : index to i64
      %c4 = arith.constant 4 : i64
      %fa = arith.constant 34363932672 : i64
      %fb = arith.constant 34360262656 : i64
      %sa4 = arith.shrui %pa64, %c4 : i64
      %sb4 = arith.shrui %pb64, %c4 : i64
      %da0 = arith.ori %sa4, %fa : i64
      %db0 = arith.ori %sb4, %fb : i64
      // Stage 1: 2048 bytes further for A (>> 4: 128), 256 for B (16).
      %s1a = arith.constant 128 : i64
      %s1b = arith.constant 16 : i64
      %da1 = arith.addi %da0, %s1a : i64
      %db1 = arith.addi %db0, %s1b : i64
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      gpu.barrier
      %p = llvm.mlir.poison : !llvm.struct<(f32, f32, f32, f32)>
      %q0 = llvm.insertvalue %z, %p[0] : !llvm.struct<(f32, f32, f32, f32)>
      %q1 = llvm.insertvalue %z, %q0[1] : !llvm.struct<(f32, f32, f32, f32)>
      %q2 = llvm.insertvalue %z, %q1[2] : !llvm.struct<(f32, f32, f32, f32)>
      %acc = llvm.insertvalue %z, %q2[3] : !llvm.struct<(f32, f32, f32, f32)>
      %d = nvvm.wgmma.mma_async %da0, %db0, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>] : !llvm.struct<(f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 0
      %c4i = arith.constant 4 : index
      %o = arith.muli %tid, %c4i : index
      %e0 = llvm.extractvalue %d[0] : !llvm.struct<(f32, f32, f32, f32)>
      memref.store %e0, %out[%o] : memref<?xf32>
      gpu.return
    }

    gpu.func @touch_after_fence(%a: memref<?xbf16>, %b: memref<?xbf16>, %out: memref<?xf32>)
        workgroup(%sa: memref<2048xbf16, #gpu.address_space<workgroup>>, %sb: memref<256xbf16, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %c1024 = arith.constant 1024 : index
      %c128 = arith.constant 128 : index
      %tid = gpu.thread_id x
      %z = arith.constant 0.0 : f32
      // Stage 0 of A (64 x 16, K-major core matrices: 1024 elements) and B
      // (16 x 8, MN-major: 128 elements); stage 1 right after each.
      %a0 = arith.muli %tid, %c8 : index
      scf.for %j = %c0 to %c8 step %c1 {
        %i = arith.addi %a0, %j : index
        %v = memref.load %a[%i] : memref<?xbf16>
        memref.store %v, %sa[%i] : memref<2048xbf16, #gpu.address_space<workgroup>>
        %i1 = arith.addi %i, %c1024 : index
        memref.store %v, %sa[%i1] : memref<2048xbf16, #gpu.address_space<workgroup>>
      }
      %vb = memref.load %b[%tid] : memref<?xbf16>
      memref.store %vb, %sb[%tid] : memref<256xbf16, #gpu.address_space<workgroup>>
      %tb1 = arith.addi %tid, %c128 : index
      memref.store %vb, %sb[%tb1] : memref<256xbf16, #gpu.address_space<workgroup>>
      // Descriptors: A LBO 1024 B, SBO 128 B; B LBO 128 B, SBO 128 B.
      %pa = memref.extract_aligned_pointer_as_index %sa : memref<2048xbf16, #gpu.address_space<workgroup>> -> index
      %pb = memref.extract_aligned_pointer_as_index %sb : memref<256xbf16, #gpu.address_space<workgroup>> -> index
      %pa64 = arith.index_cast %pa : index to i64
      %pb64 = arith.index_cast %pb : index to i64
      %c4 = arith.constant 4 : i64
      %fa = arith.constant 34363932672 : i64
      %fb = arith.constant 34360262656 : i64
      %sa4 = arith.shrui %pa64, %c4 : i64
      %sb4 = arith.shrui %pb64, %c4 : i64
      %da0 = arith.ori %sa4, %fa : i64
      %db0 = arith.ori %sb4, %fb : i64
      // Stage 1: 2048 bytes further for A (>> 4: 128), 256 for B (16).
      %s1a = arith.constant 128 : i64
      %s1b = arith.constant 16 : i64
      %da1 = arith.addi %da0, %s1a : i64
      %db1 = arith.addi %db0, %s1b : i64
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      gpu.barrier
      nvvm.wgmma.fence.aligned
      %p = llvm.mlir.poison : !llvm.struct<(f32, f32, f32, f32)>
      %q0 = llvm.insertvalue %z, %p[0] : !llvm.struct<(f32, f32, f32, f32)>
      %q1 = llvm.insertvalue %z, %q0[1] : !llvm.struct<(f32, f32, f32, f32)>
      %q2 = llvm.insertvalue %z, %q1[2] : !llvm.struct<(f32, f32, f32, f32)>
      %acc = llvm.insertvalue %z, %q2[3] : !llvm.struct<(f32, f32, f32, f32)>
      %d = nvvm.wgmma.mma_async %da0, %db0, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>] : !llvm.struct<(f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 0
      %c4i = arith.constant 4 : index
      %o = arith.muli %tid, %c4i : index
      %e0 = llvm.extractvalue %d[0] : !llvm.struct<(f32, f32, f32, f32)>
      memref.store %e0, %out[%o] : memref<?xf32>
      gpu.return
    }

    gpu.func @noproxy(%a: memref<?xbf16>, %b: memref<?xbf16>, %out: memref<?xf32>)
        workgroup(%sa: memref<2048xbf16, #gpu.address_space<workgroup>>, %sb: memref<256xbf16, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %c1024 = arith.constant 1024 : index
      %c128 = arith.constant 128 : index
      %tid = gpu.thread_id x
      %z = arith.constant 0.0 : f32
      // Stage 0 of A (64 x 16, K-major core matrices: 1024 elements) and B
      // (16 x 8, MN-major: 128 elements); stage 1 right after each.
      %a0 = arith.muli %tid, %c8 : index
      scf.for %j = %c0 to %c8 step %c1 {
        %i = arith.addi %a0, %j : index
        %v = memref.load %a[%i] : memref<?xbf16>
        memref.store %v, %sa[%i] : memref<2048xbf16, #gpu.address_space<workgroup>>
        %i1 = arith.addi %i, %c1024 : index
        memref.store %v, %sa[%i1] : memref<2048xbf16, #gpu.address_space<workgroup>>
      }
      %vb = memref.load %b[%tid] : memref<?xbf16>
      memref.store %vb, %sb[%tid] : memref<256xbf16, #gpu.address_space<workgroup>>
      %tb1 = arith.addi %tid, %c128 : index
      memref.store %vb, %sb[%tb1] : memref<256xbf16, #gpu.address_space<workgroup>>
      // Descriptors: A LBO 1024 B, SBO 128 B; B LBO 128 B, SBO 128 B.
      %pa = memref.extract_aligned_pointer_as_index %sa : memref<2048xbf16, #gpu.address_space<workgroup>> -> index
      %pb = memref.extract_aligned_pointer_as_index %sb : memref<256xbf16, #gpu.address_space<workgroup>> -> index
      %pa64 = arith.index_cast %pa : index to i64
      %pb64 = arith.index_cast %pb : index to i64
      %c4 = arith.constant 4 : i64
      %fa = arith.constant 34363932672 : i64
      %fb = arith.constant 34360262656 : i64
      %sa4 = arith.shrui %pa64, %c4 : i64
      %sb4 = arith.shrui %pb64, %c4 : i64
      %da0 = arith.ori %sa4, %fa : i64
      %db0 = arith.ori %sb4, %fb : i64
      // Stage 1: 2048 bytes further for A (>> 4: 128), 256 for B (16).
      %s1a = arith.constant 128 : i64
      %s1b = arith.constant 16 : i64
      %da1 = arith.addi %da0, %s1a : i64
      %db1 = arith.addi %db0, %s1b : i64
      gpu.barrier
      %p = llvm.mlir.poison : !llvm.struct<(f32, f32, f32, f32)>
      %q0 = llvm.insertvalue %z, %p[0] : !llvm.struct<(f32, f32, f32, f32)>
      %q1 = llvm.insertvalue %z, %q0[1] : !llvm.struct<(f32, f32, f32, f32)>
      %q2 = llvm.insertvalue %z, %q1[2] : !llvm.struct<(f32, f32, f32, f32)>
      %acc = llvm.insertvalue %z, %q2[3] : !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.fence.aligned
      %d = nvvm.wgmma.mma_async %da0, %db0, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>] : !llvm.struct<(f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 0
      %c4i = arith.constant 4 : index
      %o = arith.muli %tid, %c4i : index
      %e0 = llvm.extractvalue %d[0] : !llvm.struct<(f32, f32, f32, f32)>
      memref.store %e0, %out[%o] : memref<?xf32>
      gpu.return
    }

    gpu.func @proxy_too_early(%a: memref<?xbf16>, %b: memref<?xbf16>, %out: memref<?xf32>)
        workgroup(%sa: memref<2048xbf16, #gpu.address_space<workgroup>>, %sb: memref<256xbf16, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %c1024 = arith.constant 1024 : index
      %c128 = arith.constant 128 : index
      %tid = gpu.thread_id x
      %z = arith.constant 0.0 : f32
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      // Stage 0 of A (64 x 16, K-major core matrices: 1024 elements) and B
      // (16 x 8, MN-major: 128 elements); stage 1 right after each.
      %a0 = arith.muli %tid, %c8 : index
      scf.for %j = %c0 to %c8 step %c1 {
        %i = arith.addi %a0, %j : index
        %v = memref.load %a[%i] : memref<?xbf16>
        memref.store %v, %sa[%i] : memref<2048xbf16, #gpu.address_space<workgroup>>
        %i1 = arith.addi %i, %c1024 : index
        memref.store %v, %sa[%i1] : memref<2048xbf16, #gpu.address_space<workgroup>>
      }
      %vb = memref.load %b[%tid] : memref<?xbf16>
      memref.store %vb, %sb[%tid] : memref<256xbf16, #gpu.address_space<workgroup>>
      %tb1 = arith.addi %tid, %c128 : index
      memref.store %vb, %sb[%tb1] : memref<256xbf16, #gpu.address_space<workgroup>>
      // Descriptors: A LBO 1024 B, SBO 128 B; B LBO 128 B, SBO 128 B.
      %pa = memref.extract_aligned_pointer_as_index %sa : memref<2048xbf16, #gpu.address_space<workgroup>> -> index
      %pb = memref.extract_aligned_pointer_as_index %sb : memref<256xbf16, #gpu.address_space<workgroup>> -> index
      %pa64 = arith.index_cast %pa : index to i64
      %pb64 = arith.index_cast %pb : index to i64
      %c4 = arith.constant 4 : i64
      %fa = arith.constant 34363932672 : i64
      %fb = arith.constant 34360262656 : i64
      %sa4 = arith.shrui %pa64, %c4 : i64
      %sb4 = arith.shrui %pb64, %c4 : i64
      %da0 = arith.ori %sa4, %fa : i64
      %db0 = arith.ori %sb4, %fb : i64
      // Stage 1: 2048 bytes further for A (>> 4: 128), 256 for B (16).
      %s1a = arith.constant 128 : i64
      %s1b = arith.constant 16 : i64
      %da1 = arith.addi %da0, %s1a : i64
      %db1 = arith.addi %db0, %s1b : i64
      gpu.barrier
      %p = llvm.mlir.poison : !llvm.struct<(f32, f32, f32, f32)>
      %q0 = llvm.insertvalue %z, %p[0] : !llvm.struct<(f32, f32, f32, f32)>
      %q1 = llvm.insertvalue %z, %q0[1] : !llvm.struct<(f32, f32, f32, f32)>
      %q2 = llvm.insertvalue %z, %q1[2] : !llvm.struct<(f32, f32, f32, f32)>
      %acc = llvm.insertvalue %z, %q2[3] : !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.fence.aligned
      %d = nvvm.wgmma.mma_async %da0, %db0, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>] : !llvm.struct<(f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 0
      %c4i = arith.constant 4 : index
      %o = arith.muli %tid, %c4i : index
      %e0 = llvm.extractvalue %d[0] : !llvm.struct<(f32, f32, f32, f32)>
      memref.store %e0, %out[%o] : memref<?xf32>
      gpu.return
    }

    gpu.func @store_in_flight(%a: memref<?xbf16>, %b: memref<?xbf16>, %out: memref<?xf32>)
        workgroup(%sa: memref<2048xbf16, #gpu.address_space<workgroup>>, %sb: memref<256xbf16, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %c1024 = arith.constant 1024 : index
      %c128 = arith.constant 128 : index
      %tid = gpu.thread_id x
      %z = arith.constant 0.0 : f32
      // Stage 0 of A (64 x 16, K-major core matrices: 1024 elements) and B
      // (16 x 8, MN-major: 128 elements); stage 1 right after each.
      %a0 = arith.muli %tid, %c8 : index
      scf.for %j = %c0 to %c8 step %c1 {
        %i = arith.addi %a0, %j : index
        %v = memref.load %a[%i] : memref<?xbf16>
        memref.store %v, %sa[%i] : memref<2048xbf16, #gpu.address_space<workgroup>>
        %i1 = arith.addi %i, %c1024 : index
        memref.store %v, %sa[%i1] : memref<2048xbf16, #gpu.address_space<workgroup>>
      }
      %vb = memref.load %b[%tid] : memref<?xbf16>
      memref.store %vb, %sb[%tid] : memref<256xbf16, #gpu.address_space<workgroup>>
      %tb1 = arith.addi %tid, %c128 : index
      memref.store %vb, %sb[%tb1] : memref<256xbf16, #gpu.address_space<workgroup>>
      // Descriptors: A LBO 1024 B, SBO 128 B; B LBO 128 B, SBO 128 B.
      %pa = memref.extract_aligned_pointer_as_index %sa : memref<2048xbf16, #gpu.address_space<workgroup>> -> index
      %pb = memref.extract_aligned_pointer_as_index %sb : memref<256xbf16, #gpu.address_space<workgroup>> -> index
      %pa64 = arith.index_cast %pa : index to i64
      %pb64 = arith.index_cast %pb : index to i64
      %c4 = arith.constant 4 : i64
      %fa = arith.constant 34363932672 : i64
      %fb = arith.constant 34360262656 : i64
      %sa4 = arith.shrui %pa64, %c4 : i64
      %sb4 = arith.shrui %pb64, %c4 : i64
      %da0 = arith.ori %sa4, %fa : i64
      %db0 = arith.ori %sb4, %fb : i64
      // Stage 1: 2048 bytes further for A (>> 4: 128), 256 for B (16).
      %s1a = arith.constant 128 : i64
      %s1b = arith.constant 16 : i64
      %da1 = arith.addi %da0, %s1a : i64
      %db1 = arith.addi %db0, %s1b : i64
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      gpu.barrier
      %p = llvm.mlir.poison : !llvm.struct<(f32, f32, f32, f32)>
      %q0 = llvm.insertvalue %z, %p[0] : !llvm.struct<(f32, f32, f32, f32)>
      %q1 = llvm.insertvalue %z, %q0[1] : !llvm.struct<(f32, f32, f32, f32)>
      %q2 = llvm.insertvalue %z, %q1[2] : !llvm.struct<(f32, f32, f32, f32)>
      %acc = llvm.insertvalue %z, %q2[3] : !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.fence.aligned
      %d = nvvm.wgmma.mma_async %da0, %db0, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>] : !llvm.struct<(f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.commit.group.sync.aligned
      gpu.barrier
      %w = arith.constant 5 : index
      %one = arith.constant 1.0 : bf16
      memref.store %one, %sa[%w] : memref<2048xbf16, #gpu.address_space<workgroup>>
      nvvm.wgmma.wait.group.sync.aligned 0
      %c4i = arith.constant 4 : index
      %o = arith.muli %tid, %c4i : index
      %e0 = llvm.extractvalue %d[0] : !llvm.struct<(f32, f32, f32, f32)>
      memref.store %e0, %out[%o] : memref<?xf32>
      gpu.return
    }

    gpu.func @copy_in_flight(%a: memref<?xbf16>, %b: memref<?xbf16>, %out: memref<?xf32>)
        workgroup(%sa: memref<2048xbf16, #gpu.address_space<workgroup>>, %sb: memref<256xbf16, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %c1024 = arith.constant 1024 : index
      %c128 = arith.constant 128 : index
      %tid = gpu.thread_id x
      %z = arith.constant 0.0 : f32
      // Stage 0 of A (64 x 16, K-major core matrices: 1024 elements) and B
      // (16 x 8, MN-major: 128 elements); stage 1 right after each.
      %a0 = arith.muli %tid, %c8 : index
      scf.for %j = %c0 to %c8 step %c1 {
        %i = arith.addi %a0, %j : index
        %v = memref.load %a[%i] : memref<?xbf16>
        memref.store %v, %sa[%i] : memref<2048xbf16, #gpu.address_space<workgroup>>
        %i1 = arith.addi %i, %c1024 : index
        memref.store %v, %sa[%i1] : memref<2048xbf16, #gpu.address_space<workgroup>>
      }
      %vb = memref.load %b[%tid] : memref<?xbf16>
      memref.store %vb, %sb[%tid] : memref<256xbf16, #gpu.address_space<workgroup>>
      %tb1 = arith.addi %tid, %c128 : index
      memref.store %vb, %sb[%tb1] : memref<256xbf16, #gpu.address_space<workgroup>>
      // Descriptors: A LBO 1024 B, SBO 128 B; B LBO 128 B, SBO 128 B.
      %pa = memref.extract_aligned_pointer_as_index %sa : memref<2048xbf16, #gpu.address_space<workgroup>> -> index
      %pb = memref.extract_aligned_pointer_as_index %sb : memref<256xbf16, #gpu.address_space<workgroup>> -> index
      %pa64 = arith.index_cast %pa : index to i64
      %pb64 = arith.index_cast %pb : index to i64
      %c4 = arith.constant 4 : i64
      %fa = arith.constant 34363932672 : i64
      %fb = arith.constant 34360262656 : i64
      %sa4 = arith.shrui %pa64, %c4 : i64
      %sb4 = arith.shrui %pb64, %c4 : i64
      %da0 = arith.ori %sa4, %fa : i64
      %db0 = arith.ori %sb4, %fb : i64
      // Stage 1: 2048 bytes further for A (>> 4: 128), 256 for B (16).
      %s1a = arith.constant 128 : i64
      %s1b = arith.constant 16 : i64
      %da1 = arith.addi %da0, %s1a : i64
      %db1 = arith.addi %db0, %s1b : i64
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      gpu.barrier
      %p = llvm.mlir.poison : !llvm.struct<(f32, f32, f32, f32)>
      %q0 = llvm.insertvalue %z, %p[0] : !llvm.struct<(f32, f32, f32, f32)>
      %q1 = llvm.insertvalue %z, %q0[1] : !llvm.struct<(f32, f32, f32, f32)>
      %q2 = llvm.insertvalue %z, %q1[2] : !llvm.struct<(f32, f32, f32, f32)>
      %acc = llvm.insertvalue %z, %q2[3] : !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.fence.aligned
      %d = nvvm.wgmma.mma_async %da0, %db0, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>] : !llvm.struct<(f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.commit.group.sync.aligned
      gpu.barrier
      %w = arith.constant 0 : index
      %t = nvgpu.device_async_copy %a[%c0], %sa[%w], 8 : memref<?xbf16> to memref<2048xbf16, #gpu.address_space<workgroup>>
      nvvm.cp.async.commit.group
      nvvm.wgmma.wait.group.sync.aligned 0
      nvvm.cp.async.wait.group 0
      %c4i = arith.constant 4 : index
      %o = arith.muli %tid, %c4i : index
      %e0 = llvm.extractvalue %d[0] : !llvm.struct<(f32, f32, f32, f32)>
      memref.store %e0, %out[%o] : memref<?xf32>
      gpu.return
    }

    gpu.func @vector_in_flight(%a: memref<?xbf16>, %b: memref<?xbf16>, %out: memref<?xf32>)
        workgroup(%sa: memref<2048xbf16, #gpu.address_space<workgroup>>, %sb: memref<256xbf16, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %c1024 = arith.constant 1024 : index
      %c128 = arith.constant 128 : index
      %tid = gpu.thread_id x
      %z = arith.constant 0.0 : f32
      // Stage 0 of A (64 x 16, K-major core matrices: 1024 elements) and B
      // (16 x 8, MN-major: 128 elements); stage 1 right after each.
      %a0 = arith.muli %tid, %c8 : index
      scf.for %j = %c0 to %c8 step %c1 {
        %i = arith.addi %a0, %j : index
        %v = memref.load %a[%i] : memref<?xbf16>
        memref.store %v, %sa[%i] : memref<2048xbf16, #gpu.address_space<workgroup>>
        %i1 = arith.addi %i, %c1024 : index
        memref.store %v, %sa[%i1] : memref<2048xbf16, #gpu.address_space<workgroup>>
      }
      %vb = memref.load %b[%tid] : memref<?xbf16>
      memref.store %vb, %sb[%tid] : memref<256xbf16, #gpu.address_space<workgroup>>
      %tb1 = arith.addi %tid, %c128 : index
      memref.store %vb, %sb[%tb1] : memref<256xbf16, #gpu.address_space<workgroup>>
      // Descriptors: A LBO 1024 B, SBO 128 B; B LBO 128 B, SBO 128 B.
      %pa = memref.extract_aligned_pointer_as_index %sa : memref<2048xbf16, #gpu.address_space<workgroup>> -> index
      %pb = memref.extract_aligned_pointer_as_index %sb : memref<256xbf16, #gpu.address_space<workgroup>> -> index
      %pa64 = arith.index_cast %pa : index to i64
      %pb64 = arith.index_cast %pb : index to i64
      %c4 = arith.constant 4 : i64
      %fa = arith.constant 34363932672 : i64
      %fb = arith.constant 34360262656 : i64
      %sa4 = arith.shrui %pa64, %c4 : i64
      %sb4 = arith.shrui %pb64, %c4 : i64
      %da0 = arith.ori %sa4, %fa : i64
      %db0 = arith.ori %sb4, %fb : i64
      // Stage 1: 2048 bytes further for A (>> 4: 128), 256 for B (16).
      %s1a = arith.constant 128 : i64
      %s1b = arith.constant 16 : i64
      %da1 = arith.addi %da0, %s1a : i64
      %db1 = arith.addi %db0, %s1b : i64
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      gpu.barrier
      %p = llvm.mlir.poison : !llvm.struct<(f32, f32, f32, f32)>
      %q0 = llvm.insertvalue %z, %p[0] : !llvm.struct<(f32, f32, f32, f32)>
      %q1 = llvm.insertvalue %z, %q0[1] : !llvm.struct<(f32, f32, f32, f32)>
      %q2 = llvm.insertvalue %z, %q1[2] : !llvm.struct<(f32, f32, f32, f32)>
      %acc = llvm.insertvalue %z, %q2[3] : !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.fence.aligned
      %d = nvvm.wgmma.mma_async %da0, %db0, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>] : !llvm.struct<(f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.commit.group.sync.aligned
      gpu.barrier
      %w = arith.constant 0 : index
      %ones = arith.constant dense<1.0> : vector<8xbf16>
      vector.store %ones, %sa[%w] : memref<2048xbf16, #gpu.address_space<workgroup>>, vector<8xbf16>
      nvvm.wgmma.wait.group.sync.aligned 0
      %c4i = arith.constant 4 : index
      %o = arith.muli %tid, %c4i : index
      %e0 = llvm.extractvalue %d[0] : !llvm.struct<(f32, f32, f32, f32)>
      memref.store %e0, %out[%o] : memref<?xf32>
      gpu.return
    }

    gpu.func @ok_wait1(%a: memref<?xbf16>, %b: memref<?xbf16>, %out: memref<?xf32>)
        workgroup(%sa: memref<2048xbf16, #gpu.address_space<workgroup>>, %sb: memref<256xbf16, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %c1024 = arith.constant 1024 : index
      %c128 = arith.constant 128 : index
      %tid = gpu.thread_id x
      %z = arith.constant 0.0 : f32
      // Stage 0 of A (64 x 16, K-major core matrices: 1024 elements) and B
      // (16 x 8, MN-major: 128 elements); stage 1 right after each.
      %a0 = arith.muli %tid, %c8 : index
      scf.for %j = %c0 to %c8 step %c1 {
        %i = arith.addi %a0, %j : index
        %v = memref.load %a[%i] : memref<?xbf16>
        memref.store %v, %sa[%i] : memref<2048xbf16, #gpu.address_space<workgroup>>
        %i1 = arith.addi %i, %c1024 : index
        memref.store %v, %sa[%i1] : memref<2048xbf16, #gpu.address_space<workgroup>>
      }
      %vb = memref.load %b[%tid] : memref<?xbf16>
      memref.store %vb, %sb[%tid] : memref<256xbf16, #gpu.address_space<workgroup>>
      %tb1 = arith.addi %tid, %c128 : index
      memref.store %vb, %sb[%tb1] : memref<256xbf16, #gpu.address_space<workgroup>>
      // Descriptors: A LBO 1024 B, SBO 128 B; B LBO 128 B, SBO 128 B.
      %pa = memref.extract_aligned_pointer_as_index %sa : memref<2048xbf16, #gpu.address_space<workgroup>> -> index
      %pb = memref.extract_aligned_pointer_as_index %sb : memref<256xbf16, #gpu.address_space<workgroup>> -> index
      %pa64 = arith.index_cast %pa : index to i64
      %pb64 = arith.index_cast %pb : index to i64
      %c4 = arith.constant 4 : i64
      %fa = arith.constant 34363932672 : i64
      %fb = arith.constant 34360262656 : i64
      %sa4 = arith.shrui %pa64, %c4 : i64
      %sb4 = arith.shrui %pb64, %c4 : i64
      %da0 = arith.ori %sa4, %fa : i64
      %db0 = arith.ori %sb4, %fb : i64
      // Stage 1: 2048 bytes further for A (>> 4: 128), 256 for B (16).
      %s1a = arith.constant 128 : i64
      %s1b = arith.constant 16 : i64
      %da1 = arith.addi %da0, %s1a : i64
      %db1 = arith.addi %db0, %s1b : i64
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      gpu.barrier
      %p = llvm.mlir.poison : !llvm.struct<(f32, f32, f32, f32)>
      %q0 = llvm.insertvalue %z, %p[0] : !llvm.struct<(f32, f32, f32, f32)>
      %q1 = llvm.insertvalue %z, %q0[1] : !llvm.struct<(f32, f32, f32, f32)>
      %q2 = llvm.insertvalue %z, %q1[2] : !llvm.struct<(f32, f32, f32, f32)>
      %acc = llvm.insertvalue %z, %q2[3] : !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.fence.aligned
      %d0 = nvvm.wgmma.mma_async %da0, %db0, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>] : !llvm.struct<(f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.commit.group.sync.aligned
      %d = nvvm.wgmma.mma_async %da1, %db1, %d0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>] : !llvm.struct<(f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 1
      gpu.barrier
      %w = arith.constant 5 : index
      %one = arith.constant 1.0 : bf16
      memref.store %one, %sa[%w] : memref<2048xbf16, #gpu.address_space<workgroup>>
      nvvm.wgmma.wait.group.sync.aligned 0
      %c4i = arith.constant 4 : index
      %o = arith.muli %tid, %c4i : index
      %e0 = llvm.extractvalue %d[0] : !llvm.struct<(f32, f32, f32, f32)>
      memref.store %e0, %out[%o] : memref<?xf32>
      gpu.return
    }

    gpu.func @wait1_overwrite_pending(%a: memref<?xbf16>, %b: memref<?xbf16>, %out: memref<?xf32>)
        workgroup(%sa: memref<2048xbf16, #gpu.address_space<workgroup>>, %sb: memref<256xbf16, #gpu.address_space<workgroup>>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      %c1024 = arith.constant 1024 : index
      %c128 = arith.constant 128 : index
      %tid = gpu.thread_id x
      %z = arith.constant 0.0 : f32
      // Stage 0 of A (64 x 16, K-major core matrices: 1024 elements) and B
      // (16 x 8, MN-major: 128 elements); stage 1 right after each.
      %a0 = arith.muli %tid, %c8 : index
      scf.for %j = %c0 to %c8 step %c1 {
        %i = arith.addi %a0, %j : index
        %v = memref.load %a[%i] : memref<?xbf16>
        memref.store %v, %sa[%i] : memref<2048xbf16, #gpu.address_space<workgroup>>
        %i1 = arith.addi %i, %c1024 : index
        memref.store %v, %sa[%i1] : memref<2048xbf16, #gpu.address_space<workgroup>>
      }
      %vb = memref.load %b[%tid] : memref<?xbf16>
      memref.store %vb, %sb[%tid] : memref<256xbf16, #gpu.address_space<workgroup>>
      %tb1 = arith.addi %tid, %c128 : index
      memref.store %vb, %sb[%tb1] : memref<256xbf16, #gpu.address_space<workgroup>>
      // Descriptors: A LBO 1024 B, SBO 128 B; B LBO 128 B, SBO 128 B.
      %pa = memref.extract_aligned_pointer_as_index %sa : memref<2048xbf16, #gpu.address_space<workgroup>> -> index
      %pb = memref.extract_aligned_pointer_as_index %sb : memref<256xbf16, #gpu.address_space<workgroup>> -> index
      %pa64 = arith.index_cast %pa : index to i64
      %pb64 = arith.index_cast %pb : index to i64
      %c4 = arith.constant 4 : i64
      %fa = arith.constant 34363932672 : i64
      %fb = arith.constant 34360262656 : i64
      %sa4 = arith.shrui %pa64, %c4 : i64
      %sb4 = arith.shrui %pb64, %c4 : i64
      %da0 = arith.ori %sa4, %fa : i64
      %db0 = arith.ori %sb4, %fb : i64
      // Stage 1: 2048 bytes further for A (>> 4: 128), 256 for B (16).
      %s1a = arith.constant 128 : i64
      %s1b = arith.constant 16 : i64
      %da1 = arith.addi %da0, %s1a : i64
      %db1 = arith.addi %db0, %s1b : i64
      nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
      gpu.barrier
      %p = llvm.mlir.poison : !llvm.struct<(f32, f32, f32, f32)>
      %q0 = llvm.insertvalue %z, %p[0] : !llvm.struct<(f32, f32, f32, f32)>
      %q1 = llvm.insertvalue %z, %q0[1] : !llvm.struct<(f32, f32, f32, f32)>
      %q2 = llvm.insertvalue %z, %q1[2] : !llvm.struct<(f32, f32, f32, f32)>
      %acc = llvm.insertvalue %z, %q2[3] : !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.fence.aligned
      %d0 = nvvm.wgmma.mma_async %da0, %db0, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>] : !llvm.struct<(f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.commit.group.sync.aligned
      %d = nvvm.wgmma.mma_async %da1, %db1, %d0, <m = 64, n = 8, k = 16>, D[<f32>, <one>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>] : !llvm.struct<(f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 1
      gpu.barrier
      %w = arith.constant 1029 : index
      %one = arith.constant 1.0 : bf16
      memref.store %one, %sa[%w] : memref<2048xbf16, #gpu.address_space<workgroup>>
      nvvm.wgmma.wait.group.sync.aligned 0
      %c4i = arith.constant 4 : index
      %o = arith.muli %tid, %c4i : index
      %e0 = llvm.extractvalue %d[0] : !llvm.struct<(f32, f32, f32, f32)>
      memref.store %e0, %out[%o] : memref<?xf32>
      gpu.return
    }

  }


  func.func @ok() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %c512 = arith.constant 512 : index
    %f = arith.constant 0.5 : bf16
    %c1024 = arith.constant 1024 : index
    %aa = memref.alloc(%c1024) : memref<?xbf16>
    %b = memref.alloc(%c128) : memref<?xbf16>
    %out = memref.alloc(%c512) : memref<?xf32>
    scf.for %i = %c0 to %c1024 step %c1 {
      memref.store %f, %aa[%i] : memref<?xbf16>
    }
    scf.for %i = %c0 to %c128 step %c1 {
      memref.store %f, %b[%i] : memref<?xbf16>
    }
    gpu.launch_func @kernels::@ok blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1)
        args(%aa : memref<?xbf16>, %b : memref<?xbf16>, %out : memref<?xf32>)
    vector.print str "done\n"
    return
  }

  func.func @nowait() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %c512 = arith.constant 512 : index
    %f = arith.constant 0.5 : bf16
    %c1024 = arith.constant 1024 : index
    %aa = memref.alloc(%c1024) : memref<?xbf16>
    %b = memref.alloc(%c128) : memref<?xbf16>
    %out = memref.alloc(%c512) : memref<?xf32>
    scf.for %i = %c0 to %c1024 step %c1 {
      memref.store %f, %aa[%i] : memref<?xbf16>
    }
    scf.for %i = %c0 to %c128 step %c1 {
      memref.store %f, %b[%i] : memref<?xbf16>
    }
    gpu.launch_func @kernels::@nowait blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1)
        args(%aa : memref<?xbf16>, %b : memref<?xbf16>, %out : memref<?xf32>)
    vector.print str "done\n"
    return
  }

  func.func @nofence() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %c512 = arith.constant 512 : index
    %f = arith.constant 0.5 : bf16
    %c1024 = arith.constant 1024 : index
    %aa = memref.alloc(%c1024) : memref<?xbf16>
    %b = memref.alloc(%c128) : memref<?xbf16>
    %out = memref.alloc(%c512) : memref<?xf32>
    scf.for %i = %c0 to %c1024 step %c1 {
      memref.store %f, %aa[%i] : memref<?xbf16>
    }
    scf.for %i = %c0 to %c128 step %c1 {
      memref.store %f, %b[%i] : memref<?xbf16>
    }
    gpu.launch_func @kernels::@nofence blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1)
        args(%aa : memref<?xbf16>, %b : memref<?xbf16>, %out : memref<?xf32>)
    vector.print str "done\n"
    return
  }

  func.func @touch_after_fence() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %c512 = arith.constant 512 : index
    %f = arith.constant 0.5 : bf16
    %c1024 = arith.constant 1024 : index
    %aa = memref.alloc(%c1024) : memref<?xbf16>
    %b = memref.alloc(%c128) : memref<?xbf16>
    %out = memref.alloc(%c512) : memref<?xf32>
    scf.for %i = %c0 to %c1024 step %c1 {
      memref.store %f, %aa[%i] : memref<?xbf16>
    }
    scf.for %i = %c0 to %c128 step %c1 {
      memref.store %f, %b[%i] : memref<?xbf16>
    }
    gpu.launch_func @kernels::@touch_after_fence blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1)
        args(%aa : memref<?xbf16>, %b : memref<?xbf16>, %out : memref<?xf32>)
    vector.print str "done\n"
    return
  }

  func.func @noproxy() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %c512 = arith.constant 512 : index
    %f = arith.constant 0.5 : bf16
    %c1024 = arith.constant 1024 : index
    %aa = memref.alloc(%c1024) : memref<?xbf16>
    %b = memref.alloc(%c128) : memref<?xbf16>
    %out = memref.alloc(%c512) : memref<?xf32>
    scf.for %i = %c0 to %c1024 step %c1 {
      memref.store %f, %aa[%i] : memref<?xbf16>
    }
    scf.for %i = %c0 to %c128 step %c1 {
      memref.store %f, %b[%i] : memref<?xbf16>
    }
    gpu.launch_func @kernels::@noproxy blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1)
        args(%aa : memref<?xbf16>, %b : memref<?xbf16>, %out : memref<?xf32>)
    vector.print str "done\n"
    return
  }

  func.func @proxy_too_early() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %c512 = arith.constant 512 : index
    %f = arith.constant 0.5 : bf16
    %c1024 = arith.constant 1024 : index
    %aa = memref.alloc(%c1024) : memref<?xbf16>
    %b = memref.alloc(%c128) : memref<?xbf16>
    %out = memref.alloc(%c512) : memref<?xf32>
    scf.for %i = %c0 to %c1024 step %c1 {
      memref.store %f, %aa[%i] : memref<?xbf16>
    }
    scf.for %i = %c0 to %c128 step %c1 {
      memref.store %f, %b[%i] : memref<?xbf16>
    }
    gpu.launch_func @kernels::@proxy_too_early blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1)
        args(%aa : memref<?xbf16>, %b : memref<?xbf16>, %out : memref<?xf32>)
    vector.print str "done\n"
    return
  }

  func.func @store_in_flight() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %c512 = arith.constant 512 : index
    %f = arith.constant 0.5 : bf16
    %c1024 = arith.constant 1024 : index
    %aa = memref.alloc(%c1024) : memref<?xbf16>
    %b = memref.alloc(%c128) : memref<?xbf16>
    %out = memref.alloc(%c512) : memref<?xf32>
    scf.for %i = %c0 to %c1024 step %c1 {
      memref.store %f, %aa[%i] : memref<?xbf16>
    }
    scf.for %i = %c0 to %c128 step %c1 {
      memref.store %f, %b[%i] : memref<?xbf16>
    }
    gpu.launch_func @kernels::@store_in_flight blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1)
        args(%aa : memref<?xbf16>, %b : memref<?xbf16>, %out : memref<?xf32>)
    vector.print str "done\n"
    return
  }

  func.func @copy_in_flight() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %c512 = arith.constant 512 : index
    %f = arith.constant 0.5 : bf16
    %c1024 = arith.constant 1024 : index
    %aa = memref.alloc(%c1024) : memref<?xbf16>
    %b = memref.alloc(%c128) : memref<?xbf16>
    %out = memref.alloc(%c512) : memref<?xf32>
    scf.for %i = %c0 to %c1024 step %c1 {
      memref.store %f, %aa[%i] : memref<?xbf16>
    }
    scf.for %i = %c0 to %c128 step %c1 {
      memref.store %f, %b[%i] : memref<?xbf16>
    }
    gpu.launch_func @kernels::@copy_in_flight blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1)
        args(%aa : memref<?xbf16>, %b : memref<?xbf16>, %out : memref<?xf32>)
    vector.print str "done\n"
    return
  }

  func.func @vector_in_flight() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %c512 = arith.constant 512 : index
    %f = arith.constant 0.5 : bf16
    %c1024 = arith.constant 1024 : index
    %aa = memref.alloc(%c1024) : memref<?xbf16>
    %b = memref.alloc(%c128) : memref<?xbf16>
    %out = memref.alloc(%c512) : memref<?xf32>
    scf.for %i = %c0 to %c1024 step %c1 {
      memref.store %f, %aa[%i] : memref<?xbf16>
    }
    scf.for %i = %c0 to %c128 step %c1 {
      memref.store %f, %b[%i] : memref<?xbf16>
    }
    gpu.launch_func @kernels::@vector_in_flight blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1)
        args(%aa : memref<?xbf16>, %b : memref<?xbf16>, %out : memref<?xf32>)
    vector.print str "done\n"
    return
  }

  func.func @ok_wait1() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %c512 = arith.constant 512 : index
    %f = arith.constant 0.5 : bf16
    %c1024 = arith.constant 1024 : index
    %aa = memref.alloc(%c1024) : memref<?xbf16>
    %b = memref.alloc(%c128) : memref<?xbf16>
    %out = memref.alloc(%c512) : memref<?xf32>
    scf.for %i = %c0 to %c1024 step %c1 {
      memref.store %f, %aa[%i] : memref<?xbf16>
    }
    scf.for %i = %c0 to %c128 step %c1 {
      memref.store %f, %b[%i] : memref<?xbf16>
    }
    gpu.launch_func @kernels::@ok_wait1 blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1)
        args(%aa : memref<?xbf16>, %b : memref<?xbf16>, %out : memref<?xf32>)
    vector.print str "done\n"
    return
  }

  func.func @wait1_overwrite_pending() {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c128 = arith.constant 128 : index
    %c512 = arith.constant 512 : index
    %f = arith.constant 0.5 : bf16
    %c1024 = arith.constant 1024 : index
    %aa = memref.alloc(%c1024) : memref<?xbf16>
    %b = memref.alloc(%c128) : memref<?xbf16>
    %out = memref.alloc(%c512) : memref<?xf32>
    scf.for %i = %c0 to %c1024 step %c1 {
      memref.store %f, %aa[%i] : memref<?xbf16>
    }
    scf.for %i = %c0 to %c128 step %c1 {
      memref.store %f, %b[%i] : memref<?xbf16>
    }
    gpu.launch_func @kernels::@wait1_overwrite_pending blocks in (%c1, %c1, %c1) threads in (%c128, %c1, %c1)
        args(%aa : memref<?xbf16>, %b : memref<?xbf16>, %out : memref<?xf32>)
    vector.print str "done\n"
    return
  }
}
