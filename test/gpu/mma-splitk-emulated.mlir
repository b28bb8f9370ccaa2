// Split-K of the 16-row (decode) tensor-core GEMMs (lowering/gpu/MmaGemm.cpp,
// MmaGemmConfig::splitK): the grid's z dimension splits the K loop into S
// slices of ceil(ceil(K / 32) / S) k-tiles; every block stores its f32
// partial tile to the workspace and arrives on its tile's counter; the last
// block of a tile sums the S partials in slice order and runs the epilogue.
// Run on the host by --moe-test-emulate-gpu against plain loops (@ref) that
// sum every slice from 0 in ascending k and then the slices in order s = 0,
// 1, ..., S-1 from 0: bit for bit (no tolerance; the emulated mma.sync adds
// its products in ascending k). The routing plan is mma-gemm-emulated.mlir's
// (experts of 150, 7 and 10 rows, padding rows, three inactive tiles).
//
// Cases (the tile counters start at counterBase = 5 of a buffer whose
// first 5 entries are not the kernel's):
//  1. gemm2 weighted bias f32 rows, H=200 (7 k-tiles) D=48, S=3 (3, 3, 1)
//  2. the same, S=4 (2, 2, 2, 1)
//  3. gemm2, H=40 (2 k-tiles) D=48, S=3 (1, 1, and an empty slice)
//  4. gemm2, H=20 D=36 (element-load fallback; 1 k-tile), S=2 (one empty)
//  5. gemm2, H=200 D=48, S=1 (no workspace traffic: the plain result)
//  6. gemm1 gather swiglu bias, D=96 (3 k-tiles) H=40, S=2 (2, 1)
//  7. gemm1 gather swiglu bias, D=100 (fallback; 4 k-tiles) H=40, S=3 (2, 2, 0)
// and the counters after the launches: every tile's counter is S (the align
// kernel zeroes them before each layer's GEMMs), the first 5 untouched.
// The same bits whatever order the blocks run in (a GPU runs them in any):
// the emulation runs them forward, reverse and in two shuffles (block-order,
// test/lit.cfg.py's MOE_EMULATE_OPTIONS), so the last arriver of a tile is
// a different slice; a reduction in arrival order fails the last three.
//
// RUN: moe-opt %s --pass-pipeline="%moe_emulate_mma_pipeline" --emit-bytecode -o %t.ll.mlir
// RUN: moe-test-runner %t.ll.mlir -e ref -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.ref
// RUN: moe-test-runner %t.ll.mlir -e gpu -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.gpu
// RUN: %python %S/Inputs/compare-memrefs.py --atol 0 --rtol 0 %t.ref %t.gpu | FileCheck %s
// RUN: for o in reverse "shuffle seed=1" "shuffle seed=2"; do \
// RUN:   MOE_EMULATE_OPTIONS="block-order=$o"; echo "== $o"; \
// RUN:   moe-opt %s --pass-pipeline="%moe_emulate_mma_pipeline" --emit-bytecode \
// RUN:     | moe-test-runner -e gpu -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.order.gpu \
// RUN:     && %python %S/Inputs/compare-memrefs.py --atol 0 --rtol 0 %t.ref %t.order.gpu || exit 1; \
// RUN: done | FileCheck %s --check-prefix=ORDER
// CHECK: compare: OK, {{[0-9]+}} values, max abs diff 0{{$}}
// ORDER-LABEL: == reverse
// ORDER-NEXT: compare: OK, {{[0-9]+}} values, max abs diff 0{{$}}
// ORDER-LABEL: == shuffle seed=1
// ORDER-NEXT: compare: OK, {{[0-9]+}} values, max abs diff 0{{$}}
// ORDER-LABEL: == shuffle seed=2
// ORDER-NEXT: compare: OK, {{[0-9]+}} values, max abs diff 0{{$}}
// The kernels' structure: the z block index picks the slice, the partials
// go to the workspace, one arrival per block, the sums in slice order.
// RUN: moe-opt %s --moe-test-build-mma-kernels | FileCheck %s --check-prefix=IR
// IR-LABEL: gpu.func @moe_mma_gemm2_weighted_bias_bf16_m16_outf32_splitk(
// IR-SAME: %[[WS:arg10]]: memref<?xf32>, %[[CNT:arg11]]: memref<?xi32>, %[[BASE:arg12]]: index, %[[S:arg13]]: index)
// The split flag after the stages and the row map in the dynamic shared
// memory (MmaGemmConfig::smemLayout).
// IR-SAME: moe.gpu_dynamic_shared_memory = 40016 : i32
// IR: memref.view %{{.*}}[%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<2560xbf16, #gpu.address_space<workgroup>>
// IR: memref.view %{{.*}}[%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<17408xbf16, #gpu.address_space<workgroup>>
// IR: memref.view %{{.*}}[%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<16xi32, #gpu.address_space<workgroup>>
// IR: %[[FLAGAT:.*]] = arith.constant 40000 : index
// IR-NEXT: %[[FLAG:.*]] = memref.view %{{.*}}[%[[FLAGAT]]][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<1xi32, #gpu.address_space<workgroup>>
// IR: gpu.block_id z
// IR: nvvm.cp.async.wait.group 2
// IR: nvvm.mma.sync
// IR: nvvm.cp.async.wait.group 0
// IR: %[[SPLIT:.*]] = arith.cmpi ult, %{{.*}}, %[[S]]
// IR: scf.if %[[SPLIT]] -> (i1)
// IR: memref.store %{{.*}}, %[[WS]]
// IR: llvm.fence syncscope("device") acq_rel
// IR-NEXT: gpu.barrier
// IR: memref.atomic_rmw addi %{{.*}}, %[[CNT]]
// IR: memref.store %{{.*}}, %[[FLAG]]
// IR: gpu.barrier
// IR: memref.load %[[FLAG]]
// IR: llvm.fence syncscope("device") acq_rel
// IR: scf.for %{{.*}} = %{{.*}} to %[[S]]
// IR: memref.load %[[WS]]
// IR: arith.addf
// IR-LABEL: gpu.func @moe_mma_gemm1_gather_swiglu_bias_bf16_m16_splitk(

func.func private @printMemrefF32(memref<*xf32>)
func.func private @printMemrefI32(memref<*xi32>)

func.func private @__moe_launch_moe_mma_gemm2_weighted_bias_bf16_m16_outf32_splitk(index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xf32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, index, index, memref<?xf32>, memref<?xi32>, index, index) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm2_weighted_bias_bf16_m16_outf32_splitk}
func.func private @__moe_launch_moe_mma_gemm1_gather_swiglu_bias_bf16_m16_splitk(index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, index, index, memref<?xf32>, memref<?xi32>, index, index) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm1_gather_swiglu_bias_bf16_m16_splitk}

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

/// sourceRows: assignment r reads token r / 2.
func.func @sources() -> memref<?xi32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %R = arith.constant 167 : index
  %src = memref.alloc(%R) : memref<?xi32>
  scf.for %r = %c0 to %R step %c1 {
    %t = arith.divui %r, %c2 : index
    %ti = arith.index_cast %t : index to i32
    memref.store %ti, %src[%r] : memref<?xi32>
  }
  return %src : memref<?xi32>
}

/// Activation codes: 0 relu, 1 gelu (erf), 2 swiglu.
func.func @act(%code: index, %x: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %half = arith.constant 0.5 : f32
  %rs2 = arith.constant 0.707106769 : f32
  %isRelu = arith.cmpi eq, %code, %c0 : index
  %isGelu = arith.cmpi eq, %code, %c1 : index
  %r = scf.if %isRelu -> f32 {
    %v = arith.maximumf %x, %zero : f32
    scf.yield %v : f32
  } else {
    %g = scf.if %isGelu -> f32 {
      %s = arith.mulf %x, %rs2 : f32
      %e = math.erf %s : f32
      %hx = arith.mulf %half, %x : f32
      %p = arith.addf %one, %e : f32
      %v = arith.mulf %hx, %p : f32
      scf.yield %v : f32
    } else {
      %n = arith.negf %x : f32
      %e = math.exp %n : f32
      %d = arith.addf %one, %e : f32
      %v = arith.divf %x, %d : f32
      scf.yield %v : f32
    }
    scf.yield %g : f32
  }
  return %r : f32
}

func.func @biasAt(%b: memref<?xbf16>, %hasBias: i1, %e: index, %col: index, %W: index) -> f32 {
  %r = scf.if %hasBias -> f32 {
    %i = arith.muli %e, %W : index
    %j = arith.addi %i, %col : index
    %v = memref.load %b[%j] : memref<?xbf16>
    %f = arith.extf %v : bf16 to f32
    scf.yield %f : f32
  } else {
    %z = arith.constant 0.0 : f32
    scf.yield %z : f32
  }
  return %r : f32
}

func.func @print(%m: memref<?xf32>) {
  %u = memref.cast %m : memref<?xf32> to memref<*xf32>
  func.call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

/// h rows of the plan (positions) -> [167, H] f32.
func.func @gatherRows(%h: memref<?xbf16>, %pos: memref<?xindex>, %H: index) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c167 = arith.constant 167 : index
  %on = arith.muli %c167, %H : index
  %out = memref.alloc(%on) : memref<?xf32>
  scf.for %r = %c0 to %c167 step %c1 {
    %p = memref.load %pos[%r] : memref<?xindex>
    scf.for %n = %c0 to %H step %c1 {
      %i = arith.muli %p, %H : index
      %j = arith.addi %i, %n : index
      %v = memref.load %h[%j] : memref<?xbf16>
      %f = arith.extf %v : bf16 to f32
      %k = arith.muli %r, %H : index
      %l = arith.addi %k, %n : index
      memref.store %f, %out[%l] : memref<?xf32>
    }
  }
  return %out : memref<?xf32>
}

/// The split-K order: slice s of S covers k in [s c, min((s + 1) c, K)) with
/// c = 32 ceil(ceil(K / 32) / S); each slice summed from 0 in ascending k,
/// the slice sums added from 0 in slice order.
func.func @dot(%a: memref<?xbf16>, %arow: index, %w: memref<?xbf16>, %e: index, %col: index, %K: index, %W: index, %S: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c32 = arith.constant 32 : index
  %zero = arith.constant 0.0 : f32
  %numK = arith.ceildivui %K, %c32 : index
  %per = arith.ceildivui %numK, %S : index
  %chunk = arith.muli %per, %c32 : index
  %total = scf.for %s = %c0 to %S step %c1 iter_args(%t = %zero) -> f32 {
    %lo0 = arith.muli %s, %chunk : index
    %lo = arith.minui %lo0, %K : index
    %hi0 = arith.addi %lo, %chunk : index
    %hi = arith.minui %hi0, %K : index
    %part = scf.for %k = %lo to %hi step %c1 iter_args(%acc = %zero) -> f32 {
      %ai = arith.muli %arow, %K : index
      %aj = arith.addi %ai, %k : index
      %av = memref.load %a[%aj] : memref<?xbf16>
      %ek = arith.muli %e, %K : index
      %ekk = arith.addi %ek, %k : index
      %wr = arith.muli %ekk, %W : index
      %wj = arith.addi %wr, %col : index
      %wv = memref.load %w[%wj] : memref<?xbf16>
      %af = arith.extf %av : bf16 to f32
      %wf = arith.extf %wv : bf16 to f32
      %p = arith.mulf %af, %wf : f32
      %n = arith.addf %acc, %p : f32
      scf.yield %n : f32
    }
    %t2 = arith.addf %t, %part : f32
    scf.yield %t2 : f32
  }
  return %total : f32
}

/// GEMM1 (gather, swiglu, bias) reference: rows [167, H] = round(...) as f32.
func.func @ref1(%D: index, %H: index, %S: index) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c167 = arith.constant 167 : index
  %f1 = arith.constant 0.37 : f32
  %f2 = arith.constant 0.11 : f32
  %f3 = arith.constant 0.23 : f32
  %s1 = arith.constant 1.0 : f32
  %s2 = arith.constant 0.25 : f32
  %t = arith.constant true
  %Wc = arith.muli %c2, %H : index
  %xn = arith.muli %c167, %D : index
  %x = func.call @fill(%xn, %f1, %s1) : (index, f32, f32) -> memref<?xbf16>
  %wn0 = arith.muli %D, %Wc : index
  %wn = arith.muli %wn0, %c3 : index
  %w = func.call @fill(%wn, %f2, %s2) : (index, f32, f32) -> memref<?xbf16>
  %bn = arith.muli %c3, %Wc : index
  %b = func.call @fill(%bn, %f3, %s2) : (index, f32, f32) -> memref<?xbf16>
  %tm = arith.constant 16 : index
  %sorted, %te, %nt, %pos, %exOf, %mt = func.call @plan(%tm) : (index) -> (memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xindex>, memref<?xindex>, index)
  %on = arith.muli %c167, %H : index
  %out = memref.alloc(%on) : memref<?xf32>
  scf.for %r = %c0 to %c167 step %c1 {
    %e = memref.load %exOf[%r] : memref<?xindex>
    %arow = arith.divui %r, %c2 : index
    scf.for %n = %c0 to %H step %c1 {
      %g0 = func.call @dot(%x, %arow, %w, %e, %n, %D, %Wc, %S) : (memref<?xbf16>, index, memref<?xbf16>, index, index, index, index, index) -> f32
      %gb = func.call @biasAt(%b, %t, %e, %n, %Wc) : (memref<?xbf16>, i1, index, index, index) -> f32
      %g = arith.addf %g0, %gb : f32
      %a = func.call @act(%c2, %g) : (index, f32) -> f32
      %nu = arith.addi %n, %H : index
      %u0 = func.call @dot(%x, %arow, %w, %e, %nu, %D, %Wc, %S) : (memref<?xbf16>, index, memref<?xbf16>, index, index, index, index, index) -> f32
      %ub = func.call @biasAt(%b, %t, %e, %nu, %Wc) : (memref<?xbf16>, i1, index, index, index) -> f32
      %u = arith.addf %u0, %ub : f32
      %v = arith.mulf %a, %u : f32
      %tr = arith.truncf %v : f32 to bf16
      %tf = arith.extf %tr : bf16 to f32
      %i = arith.muli %r, %H : index
      %j = arith.addi %i, %n : index
      memref.store %tf, %out[%j] : memref<?xf32>
    }
  }
  return %out : memref<?xf32>
}

/// GEMM2 (weighted, bias, f32 rows) reference: rows [167, D].
func.func @ref2(%H: index, %D: index, %S: index) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c167 = arith.constant 167 : index
  %f1 = arith.constant 0.29 : f32
  %f2 = arith.constant 0.13 : f32
  %f3 = arith.constant 0.31 : f32
  %f4 = arith.constant 0.7 : f32
  %s1 = arith.constant 1.0 : f32
  %s2 = arith.constant 0.25 : f32
  %t = arith.constant true
  %tm = arith.constant 16 : index
  %sorted, %te, %nt, %pos, %exOf, %maxTiles = func.call @plan(%tm) : (index) -> (memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xindex>, memref<?xindex>, index)
  %pMax = arith.muli %maxTiles, %tm : index
  %hn = arith.muli %pMax, %H : index
  %h = func.call @fill(%hn, %f1, %s1) : (index, f32, f32) -> memref<?xbf16>
  %wn0 = arith.muli %H, %D : index
  %wn = arith.muli %wn0, %c3 : index
  %w = func.call @fill(%wn, %f2, %s2) : (index, f32, f32) -> memref<?xbf16>
  %bn = arith.muli %c3, %D : index
  %b = func.call @fill(%bn, %f3, %s2) : (index, f32, f32) -> memref<?xbf16>
  %rw = func.call @fillF32(%c167, %f4) : (index, f32) -> memref<?xf32>
  %on = arith.muli %c167, %D : index
  %out = memref.alloc(%on) : memref<?xf32>
  scf.for %r = %c0 to %c167 step %c1 {
    %e = memref.load %exOf[%r] : memref<?xindex>
    %p = memref.load %pos[%r] : memref<?xindex>
    scf.for %n = %c0 to %D step %c1 {
      %s0 = func.call @dot(%h, %p, %w, %e, %n, %H, %D, %S) : (memref<?xbf16>, index, memref<?xbf16>, index, index, index, index, index) -> f32
      %bb = func.call @biasAt(%b, %t, %e, %n, %D) : (memref<?xbf16>, i1, index, index, index) -> f32
      %s = arith.addf %s0, %bb : f32
      %wv = memref.load %rw[%r] : memref<?xf32>
      %v = arith.mulf %wv, %s : f32
      %i = arith.muli %r, %D : index
      %j = arith.addi %i, %n : index
      memref.store %v, %out[%j] : memref<?xf32>
    }
  }
  return %out : memref<?xf32>
}

/// Tile counters: 5 entries that are not the kernel's (7), then zeros.
func.func @counters(%n: index) -> memref<?xi32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %seven = arith.constant 7 : i32
  %zero = arith.constant 0 : i32
  %all = arith.addi %n, %c5 : index
  %m = memref.alloc(%all) : memref<?xi32>
  scf.for %i = %c0 to %all step %c1 {
    %before = arith.cmpi ult, %i, %c5 : index
    %v = arith.select %before, %seven, %zero : i32
    memref.store %v, %m[%i] : memref<?xi32>
  }
  return %m : memref<?xi32>
}

/// The counters of the tiles that ran (numTiles of every column tile, S
/// each), the others 0, after the first 5 (7): as the kernel must leave
/// them.
func.func @expectedCounters(%tiles: index, %used: index, %gx: index, %S: index) -> memref<?xi32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %n = arith.muli %tiles, %gx : index
  %m = func.call @counters(%n) : (index) -> memref<?xi32>
  %Si = arith.index_cast %S : index to i32
  %one = arith.cmpi eq, %S, %c1 : index
  %zero = arith.constant 0 : i32
  %v = arith.select %one, %zero, %Si : i32
  %un = arith.muli %used, %gx : index
  scf.for %i = %c0 to %un step %c1 {
    %j = arith.addi %i, %c5 : index
    memref.store %v, %m[%j] : memref<?xi32>
  }
  return %m : memref<?xi32>
}

func.func @printI(%m: memref<?xi32>) {
  %u = memref.cast %m : memref<?xi32> to memref<*xi32>
  func.call @printMemrefI32(%u) : (memref<*xi32>) -> ()
  return
}

/// Launches the split GEMM2 and returns the rows [167, D]; prints the counters.
func.func @gpu2(%H: index, %D: index, %S: index) -> memref<?xf32> {
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %c16 = arith.constant 16 : index
  %c128 = arith.constant 128 : index
  %c167 = arith.constant 167 : index
  %c2048 = arith.constant 2048 : index
  %f1 = arith.constant 0.29 : f32
  %f2 = arith.constant 0.13 : f32
  %f3 = arith.constant 0.31 : f32
  %f4 = arith.constant 0.7 : f32
  %s1 = arith.constant 1.0 : f32
  %s2 = arith.constant 0.25 : f32
  %sorted, %te, %nt, %pos, %exOf, %maxTiles = func.call @plan(%c16) : (index) -> (memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xindex>, memref<?xindex>, index)
  %pMax = arith.muli %maxTiles, %c16 : index
  %hn = arith.muli %pMax, %H : index
  %h = func.call @fill(%hn, %f1, %s1) : (index, f32, f32) -> memref<?xbf16>
  %wn0 = arith.muli %H, %D : index
  %wn = arith.muli %wn0, %c3 : index
  %w = func.call @fill(%wn, %f2, %s2) : (index, f32, f32) -> memref<?xbf16>
  %bn = arith.muli %c3, %D : index
  %b = func.call @fill(%bn, %f3, %s2) : (index, f32, f32) -> memref<?xbf16>
  %rw = func.call @fillF32(%c167, %f4) : (index, f32) -> memref<?xf32>
  %on = arith.muli %c167, %D : index
  %gx = arith.ceildivui %D, %c128 : index
  %out = memref.alloc(%on) : memref<?xf32>
  %tiles = arith.muli %maxTiles, %gx : index
  %wsn0 = arith.muli %tiles, %S : index
  %wsn = arith.muli %wsn0, %c2048 : index
  %ws = memref.alloc(%wsn) : memref<?xf32>
  %cnt = func.call @counters(%tiles) : (index) -> memref<?xi32>
  func.call @__moe_launch_moe_mma_gemm2_weighted_bias_bf16_m16_outf32_splitk(%gx, %maxTiles, %S, %c128, %c1, %c1, %h, %sorted, %rw, %te, %nt, %w, %b, %out, %H, %D, %ws, %cnt, %c5, %S) : (index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xf32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, index, index, memref<?xf32>, memref<?xi32>, index, index) -> ()
  func.call @printI(%cnt) : (memref<?xi32>) -> ()
  return %out : memref<?xf32>
}

/// Launches the split GEMM1 and returns the rows [167, H]; prints the counters.
func.func @gpu1(%D: index, %H: index, %S: index) -> memref<?xf32> {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %c167 = arith.constant 167 : index
  %c2048 = arith.constant 2048 : index
  %f1 = arith.constant 0.37 : f32
  %f2 = arith.constant 0.11 : f32
  %f3 = arith.constant 0.23 : f32
  %s1 = arith.constant 1.0 : f32
  %s2 = arith.constant 0.25 : f32
  %Wc = arith.muli %c2, %H : index
  %xn = arith.muli %c167, %D : index
  %x = func.call @fill(%xn, %f1, %s1) : (index, f32, f32) -> memref<?xbf16>
  %wn0 = arith.muli %D, %Wc : index
  %wn = arith.muli %wn0, %c3 : index
  %w = func.call @fill(%wn, %f2, %s2) : (index, f32, f32) -> memref<?xbf16>
  %bn = arith.muli %c3, %Wc : index
  %b = func.call @fill(%bn, %f3, %s2) : (index, f32, f32) -> memref<?xbf16>
  %sorted, %te, %nt, %pos, %exOf, %maxTiles = func.call @plan(%c16) : (index) -> (memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xindex>, memref<?xindex>, index)
  %src = func.call @sources() : () -> memref<?xi32>
  %pMax = arith.muli %maxTiles, %c16 : index
  %hn = arith.muli %pMax, %H : index
  %h = memref.alloc(%hn) : memref<?xbf16>
  %gx = arith.ceildivui %H, %c64 : index
  %tiles = arith.muli %maxTiles, %gx : index
  %wsn0 = arith.muli %tiles, %S : index
  %wsn = arith.muli %wsn0, %c2048 : index
  %ws = memref.alloc(%wsn) : memref<?xf32>
  %cnt = func.call @counters(%tiles) : (index) -> memref<?xi32>
  func.call @__moe_launch_moe_mma_gemm1_gather_swiglu_bias_bf16_m16_splitk(%gx, %maxTiles, %S, %c128, %c1, %c1, %x, %sorted, %src, %te, %nt, %w, %b, %h, %D, %H, %ws, %cnt, %c5, %S) : (index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, index, index, memref<?xf32>, memref<?xi32>, index, index) -> ()
  func.call @printI(%cnt) : (memref<?xi32>) -> ()
  %rows = func.call @gatherRows(%h, %pos, %H) : (memref<?xbf16>, memref<?xindex>, index) -> memref<?xf32>
  return %rows : memref<?xf32>
}

/// The cases' (kind, K, N, S): kind 2 = gemm2 (K = H, N = D), 1 = gemm1
/// (K = D, N = H).
func.func @case(%i: index) -> (index, index, index, index) {
  %k1 = arith.constant 1 : index
  %k2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c20 = arith.constant 20 : index
  %c36 = arith.constant 36 : index
  %c40 = arith.constant 40 : index
  %c48 = arith.constant 48 : index
  %c96 = arith.constant 96 : index
  %c100 = arith.constant 100 : index
  %c200 = arith.constant 200 : index
  %r:4 = scf.index_switch %i -> index, index, index, index
  case 0 { scf.yield %k2, %c200, %c48, %c3 : index, index, index, index }
  case 1 { scf.yield %k2, %c200, %c48, %c4 : index, index, index, index }
  case 2 { scf.yield %k2, %c40, %c48, %c3 : index, index, index, index }
  case 3 { scf.yield %k2, %c20, %c36, %c2 : index, index, index, index }
  case 4 { scf.yield %k2, %c200, %c48, %c1 : index, index, index, index }
  case 5 { scf.yield %k1, %c96, %c40, %c2 : index, index, index, index }
  default { scf.yield %k1, %c100, %c40, %c3 : index, index, index, index }
  return %r#0, %r#1, %r#2, %r#3 : index, index, index, index
}

func.func @ref() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c7 = arith.constant 7 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  scf.for %i = %c0 to %c7 step %c1 {
    %kind, %K, %N, %S = func.call @case(%i) : (index) -> (index, index, index, index)
    %sorted, %te, %nt, %pos, %exOf, %maxTiles = func.call @plan(%c16) : (index) -> (memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xindex>, memref<?xindex>, index)
    %c3 = arith.constant 3 : index
    %used = arith.subi %maxTiles, %c3 : index
    %g2 = arith.cmpi eq, %kind, %c2 : index
    %per = arith.select %g2, %c128, %c64 : index
    %gx = arith.ceildivui %N, %per : index
    %cnt = func.call @expectedCounters(%maxTiles, %used, %gx, %S) : (index, index, index, index) -> memref<?xi32>
    func.call @printI(%cnt) : (memref<?xi32>) -> ()
    %r = scf.if %g2 -> memref<?xf32> {
      %o = func.call @ref2(%K, %N, %S) : (index, index, index) -> memref<?xf32>
      scf.yield %o : memref<?xf32>
    } else {
      %o = func.call @ref1(%K, %N, %S) : (index, index, index) -> memref<?xf32>
      scf.yield %o : memref<?xf32>
    }
    func.call @print(%r) : (memref<?xf32>) -> ()
  }
  return
}

func.func @gpu() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c7 = arith.constant 7 : index
  scf.for %i = %c0 to %c7 step %c1 {
    %kind, %K, %N, %S = func.call @case(%i) : (index) -> (index, index, index, index)
    %g2 = arith.cmpi eq, %kind, %c2 : index
    %r = scf.if %g2 -> memref<?xf32> {
      %o = func.call @gpu2(%K, %N, %S) : (index, index, index) -> memref<?xf32>
      scf.yield %o : memref<?xf32>
    } else {
      %o = func.call @gpu1(%K, %N, %S) : (index, index, index) -> memref<?xf32>
      scf.yield %o : memref<?xf32>
    }
    func.call @print(%r) : (memref<?xf32>) -> ()
  }
  return
}
