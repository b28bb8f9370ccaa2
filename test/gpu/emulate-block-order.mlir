// The emulation's block orders (--moe-test-emulate-gpu, option block-order;
// docs/gpu.md, "Block order in the emulation"): a kernel in which thread 0
// of every block takes a ticket from a global counter (atomic_rmw) and
// stores it at the block's linear id x + gx (y + gy z), launched twice on a
// 3 x 2 x 2 grid of 2-thread blocks. The tickets are the order the blocks
// ran in: Inputs/check-block-order.py checks forward (the linear id),
// reverse, and the shuffles (permutations, per launch, per seed, the same on
// a second run, equal to the documented algorithm).
//
// DEFINE: %{run} = moe-test-runner -e main -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp
// RUN: moe-opt %s --pass-pipeline="%moe_emulate_mma_pipeline" | %{run} > %t.forward
// RUN: MOE_EMULATE_OPTIONS="block-order=reverse"; moe-opt %s --pass-pipeline="%moe_emulate_mma_pipeline" | %{run} > %t.reverse
// RUN: MOE_EMULATE_OPTIONS="block-order=shuffle seed=1"; moe-opt %s --pass-pipeline="%moe_emulate_mma_pipeline" | %{run} > %t.s1
// RUN: MOE_EMULATE_OPTIONS="block-order=shuffle seed=1"; moe-opt %s --pass-pipeline="%moe_emulate_mma_pipeline" | %{run} > %t.s1again
// RUN: MOE_EMULATE_OPTIONS="block-order=shuffle seed=2"; moe-opt %s --pass-pipeline="%moe_emulate_mma_pipeline" | %{run} > %t.s2
// RUN: %python %S/Inputs/check-block-order.py %t.forward %t.reverse %t.s1 %t.s1again %t.s2 | FileCheck %s
// CHECK-NOT: FAIL
// CHECK: OK: forward: arrival = linear id (n = 12)
// CHECK-NEXT: OK: reverse: arrival = n - 1 - linear id
// CHECK-NEXT: OK: shuffle seed=1: every block once
// CHECK-NEXT: OK: shuffle seed=1: neither forward nor reverse
// CHECK-NEXT: OK: shuffle seed=1: the two launches differ
// CHECK-NEXT: OK: shuffle seed=1: launch 0 is the documented permutation
// CHECK-NEXT: OK: shuffle seed=1: launch 1 is the documented permutation
// CHECK-NEXT: OK: shuffle seed=2: every block once
// CHECK-NEXT: OK: shuffle seed=2: neither forward nor reverse
// CHECK-NEXT: OK: shuffle seed=2: the two launches differ
// CHECK-NEXT: OK: shuffle seed=2: launch 0 is the documented permutation
// CHECK-NEXT: OK: shuffle seed=2: launch 1 is the documented permutation
// CHECK-NEXT: OK: shuffle seed=1: the same on a second run
// CHECK-NEXT: OK: shuffle: seeds 1 and 2 differ
//
// The loop the pass emits: one scf.for over the linear ids; reverse reads
// them backwards, shuffle through the permutation built before the loop.
// RUN: moe-opt %s --moe-test-emulate-gpu="block-order=reverse" | FileCheck %s --check-prefix=REV
// REV-LABEL: func.func @main
// REV: %[[GXY:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// REV-NEXT: %[[N:.*]] = arith.muli %[[GXY]], %{{.*}} : index
// REV: scf.for %[[I:.*]] = %{{.*}} to %[[N]] step
// REV: %[[LAST:.*]] = arith.subi %[[N]], %{{.*}} : index
// REV-NEXT: %[[L:.*]] = arith.subi %[[LAST]], %[[I]] : index
// REV-NEXT: arith.remui %[[L]]
// REV-NEXT: arith.divui %[[L]]
// REV-NEXT: arith.remui
// REV-NEXT: arith.divui %[[L]], %[[GXY]]
// REV: omp.parallel
// RUN: moe-opt %s --moe-test-emulate-gpu="block-order=shuffle seed=5" | FileCheck %s --check-prefix=SHUF
// SHUF-LABEL: func.func @main
// SHUF: %[[PERM:.*]] = memref.alloc(%[[N:.*]]) : memref<?xindex>
// SHUF: scf.for
// SHUF: memref.store %{{.*}}, %[[PERM]]
// SHUF: arith.remui %{{.*}} : i64
// SHUF: scf.for %[[I:.*]] = %{{.*}} to %[[N]] step
// SHUF-NEXT: %[[L:.*]] = memref.load %[[PERM]][%[[I]]] : memref<?xindex>
// SHUF: omp.parallel
// SHUF: memref.dealloc %[[PERM]] : memref<?xindex>
//
// A bad value: one line, exit 1.
// RUN: not moe-opt %s --moe-test-emulate-gpu="block-order=sideways" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: for the --block-order option: Cannot find option named 'sideways'!

module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @ticket(%counter: memref<1xi32>, %order: memref<?xi32>) kernel {
      %c0 = arith.constant 0 : index
      %one = arith.constant 1 : i32
      %tid = gpu.thread_id x
      %is0 = arith.cmpi eq, %tid, %c0 : index
      scf.if %is0 {
        %x = gpu.block_id x
        %y = gpu.block_id y
        %z = gpu.block_id z
        %gx = gpu.grid_dim x
        %gy = gpu.grid_dim y
        %zy = arith.muli %z, %gy : index
        %zyy = arith.addi %zy, %y : index
        %row = arith.muli %zyy, %gx : index
        %lin = arith.addi %row, %x : index
        %t = memref.atomic_rmw addi %one, %counter[%c0] : (i32, memref<1xi32>) -> i32
        memref.store %t, %order[%lin] : memref<?xi32>
      }
      gpu.return
    }
  }

  func.func private @printMemrefI32(memref<*xi32>)

  func.func @main() {
    %c12 = arith.constant 12 : index
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %zero = arith.constant 0 : i32
    %none = arith.constant -1 : i32
    %a = memref.alloc(%c12) : memref<?xi32>
    %b = memref.alloc(%c12) : memref<?xi32>
    scf.for %i = %c0 to %c12 step %c1 {
      memref.store %none, %a[%i] : memref<?xi32>
      memref.store %none, %b[%i] : memref<?xi32>
    }
    %counter = memref.alloc() : memref<1xi32>
    memref.store %zero, %counter[%c0] : memref<1xi32>
    gpu.launch_func @kernels::@ticket blocks in (%c3, %c2, %c2) threads in (%c2, %c1, %c1)
        args(%counter : memref<1xi32>, %a : memref<?xi32>)
    memref.store %zero, %counter[%c0] : memref<1xi32>
    gpu.launch_func @kernels::@ticket blocks in (%c3, %c2, %c2) threads in (%c2, %c1, %c1)
        args(%counter : memref<1xi32>, %b : memref<?xi32>)
    %ua = memref.cast %a : memref<?xi32> to memref<*xi32>
    %ub = memref.cast %b : memref<?xi32> to memref<*xi32>
    call @printMemrefI32(%ua) : (memref<*xi32>) -> ()
    call @printMemrefI32(%ub) : (memref<*xi32>) -> ()
    memref.dealloc %counter : memref<1xi32>
    memref.dealloc %a : memref<?xi32>
    memref.dealloc %b : memref<?xi32>
    return
  }
}
