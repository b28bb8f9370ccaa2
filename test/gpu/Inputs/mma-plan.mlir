// Helpers of the kernel-level tensor-core GEMM tests (mma-gemm-emulated.mlir,
// mma-grad-emulated.mlir), appended to each test's module: a hand-made
// routing plan of three experts with 150, 7 and 10 rows, deterministic bf16
// and f32 data, and printing.

func.func private @printMemrefF32(memref<*xf32>)

// Rows: 167 assignments, expert e owns a contiguous run (150, 7, 10).
func.func @count(%e: index) -> index {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n0 = arith.constant 150 : index
  %n1 = arith.constant 7 : index
  %n2 = arith.constant 10 : index
  %is0 = arith.cmpi eq, %e, %c0 : index
  %is1 = arith.cmpi eq, %e, %c1 : index
  %a = arith.select %is1, %n1, %n2 : index
  %r = arith.select %is0, %n0, %a : index
  return %r : index
}

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

func.func @fillF32(%n: index, %freq: f32) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = memref.alloc(%n) : memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    %ii = arith.index_cast %i : index to i64
    %f = arith.sitofp %ii : i64 to f32
    %g = arith.mulf %f, %freq : f32
    %s = math.cos %g : f32
    memref.store %s, %m[%i] : memref<?xf32>
  }
  return %m : memref<?xf32>
}

/// The routing plan for tiles of %tm rows: sorted (padded position -> row
/// or -1), tileExpert, numTiles, and per row its position and expert. Three
/// inactive tiles follow the used ones (maxTiles = numTiles + 3).
func.func @plan(%tm: index) -> (memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xindex>, memref<?xindex>, index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %R = arith.constant 167 : index
  %m1 = arith.constant -1 : i32
  %z = arith.constant 0 : i32
  %used = scf.for %e = %c0 to %c3 step %c1 iter_args(%t = %c0) -> index {
    %n = func.call @count(%e) : (index) -> index
    %k = arith.ceildivui %n, %tm : index
    %t2 = arith.addi %t, %k : index
    scf.yield %t2 : index
  }
  %maxTiles = arith.addi %used, %c3 : index
  %pMax = arith.muli %maxTiles, %tm : index
  %sorted = memref.alloc(%pMax) : memref<?xi32>
  %tileExpert = memref.alloc(%maxTiles) : memref<?xi32>
  %numTiles = memref.alloc(%c1) : memref<?xi32>
  %pos = memref.alloc(%R) : memref<?xindex>
  %exOf = memref.alloc(%R) : memref<?xindex>
  scf.for %p = %c0 to %pMax step %c1 {
    memref.store %m1, %sorted[%p] : memref<?xi32>
  }
  scf.for %t = %c0 to %maxTiles step %c1 {
    memref.store %z, %tileExpert[%t] : memref<?xi32>
  }
  %r1:2 = scf.for %e = %c0 to %c3 step %c1 iter_args(%pbase = %c0, %rbase = %c0) -> (index, index) {
    %n = func.call @count(%e) : (index) -> index
    %ei = arith.index_cast %e : index to i32
    scf.for %j = %c0 to %n step %c1 {
      %p = arith.addi %pbase, %j : index
      %r = arith.addi %rbase, %j : index
      %ri = arith.index_cast %r : index to i32
      memref.store %ri, %sorted[%p] : memref<?xi32>
      memref.store %p, %pos[%r] : memref<?xindex>
      memref.store %e, %exOf[%r] : memref<?xindex>
    }
    %k = arith.ceildivui %n, %tm : index
    %t0 = arith.divui %pbase, %tm : index
    scf.for %t = %c0 to %k step %c1 {
      %ti = arith.addi %t0, %t : index
      memref.store %ei, %tileExpert[%ti] : memref<?xi32>
    }
    %kp = arith.muli %k, %tm : index
    %pnext = arith.addi %pbase, %kp : index
    %rnext = arith.addi %rbase, %n : index
    scf.yield %pnext, %rnext : index, index
  }
  %nt = arith.index_cast %used : index to i32
  memref.store %nt, %numTiles[%c0] : memref<?xi32>
  return %sorted, %tileExpert, %numTiles, %pos, %exOf, %maxTiles : memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xindex>, memref<?xindex>, index
}

func.func @print(%m: memref<?xf32>) {
  %u = memref.cast %m : memref<?xf32> to memref<*xf32>
  func.call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

func.func @toF32(%m: memref<?xbf16>) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %m, %c0 : memref<?xbf16>
  %out = memref.alloc(%n) : memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %m[%i] : memref<?xbf16>
    %f = arith.extf %v : bf16 to f32
    memref.store %f, %out[%i] : memref<?xf32>
  }
  return %out : memref<?xf32>
}
