// The backward's tensor-core GEMMs (lowering/gpu/MmaGemm.cpp, kinds rowGrad
// and weightGrad: ldmatrix with and without .trans on k-major A^T and
// n-major B stages, split f32 operands as two bf16 terms), run on the host
// by --moe-test-emulate-gpu with the PTX ISA's fragment layouts, against
// plain loops (@ref) on the routing plan of Inputs/mma-plan.mlir (three
// experts with 150, 7 and 10 rows, padding rows, inactive tiles).
//
// Cases (the first of each pair takes the 16-byte cp.async path, the second
// the element-load fallback, sizes not multiples of 8):
//  1. rowgrad bias (the recomputed z = A W + b), tile 64, K=48 N=40
//  2. rowgrad bias, tile 16, K=36 N=20
//  3. rowgrad bt split (dX = dZ W^T, dZ as hi + lo), tile 64, K=48 N=136
//     (two column blocks)
//  4. rowgrad bt split, tile 16, K=36 N=20
//  5. rowgrad bt split actgrad relu (dH: C holds z; dZ's two terms and h
//     out), tile 64, K=48 N=40
//  6. wgrad bias (dW = A^T dZ over each group's rows, dZ as hi + lo, the
//     bias gradient as row M), M=72 N=48 (two row blocks, the ones column
//     in the second), groups of 150, 0 and 17 rows (an empty expert: zeros)
//  7. wgrad, M=36 N=20, groups of 150, 7 and 10 rows
//
// Tolerance: none. The emulated mma.sync adds the 16 products of each step
// to C in ascending k, in f32, and bf16 products are exact in f32; a split
// operand's step is the hi term's 16 products, then the lo term's. @ref
// adds the same products in that order, so any difference is a wrong
// fragment, address, stage, term or tail.
//
// RUN: cat %s %S/Inputs/mma-plan.mlir > %t.src.mlir
// RUN: moe-opt %t.src.mlir --pass-pipeline="%moe_emulate_mma_pipeline" -o %t.ll.mlir
// RUN: moe-test-runner %t.ll.mlir -e ref -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.ref
// RUN: moe-test-runner %t.ll.mlir -e gpu -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.gpu
// RUN: %python %S/Inputs/compare-memrefs.py --atol 0 --rtol 0 %t.ref %t.gpu | FileCheck %s
// The same bits with the blocks in a shuffled order (no block reads another's
// output: every gradient element is one block's).
// RUN: MOE_EMULATE_OPTIONS="block-order=shuffle seed=5" \
// RUN:   moe-opt %t.src.mlir --pass-pipeline="%moe_emulate_mma_pipeline" --emit-bytecode \
// RUN:   | moe-test-runner -e gpu -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.shuffled.gpu
// RUN: %python %S/Inputs/compare-memrefs.py --atol 0 --rtol 0 %t.ref %t.shuffled.gpu | FileCheck %s
// The 64-row kernels on sm_90a's wgmma (the stages in the canonical
// core-matrix layouts: B = W^T K-major for the row GEMMs, A^T MN-major for
// the weight gradients; a split operand's terms two wgmmas of each k16
// step): the same bits.
// RUN: sed -e 's/grad\(_[a-z0-9_]*\)\{0,1\}_m64\([(}]\)/grad\1_m64_wgmma\2/g' %t.src.mlir > %t.wgmma.mlir
// RUN: moe-opt %t.wgmma.mlir --pass-pipeline="%moe_emulate_mma_pipeline" --emit-bytecode \
// RUN:   | moe-test-runner -e gpu -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.wgmma.gpu
// RUN: %python %S/Inputs/compare-memrefs.py --atol 0 --rtol 0 %t.ref %t.wgmma.gpu | FileCheck %s
// RUN: moe-opt %t.wgmma.mlir --moe-test-build-mma-kernels | FileCheck %s --check-prefix=WGMMA
// WGMMA-LABEL: gpu.func @moe_mma_rowgrad_bt_split_bf16_m64_wgmma(
// WGMMA: %[[HI:.*]] = nvvm.wgmma.mma_async {{.*}} B[<bf16>, <one>, <col>]
// WGMMA-NOT: nvvm.wgmma.mma_async
// WGMMA: nvvm.wgmma.mma_async %{{.*}}, %{{.*}}, %[[HI]], {{.*}} B[<bf16>, <one>, <col>]
// WGMMA-LABEL: gpu.func @moe_mma_wgrad_bias_bf16_m64_wgmma(
// WGMMA: %[[HI:.*]] = nvvm.wgmma.mma_async {{.*}} A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// WGMMA-NOT: nvvm.wgmma.mma_async
// WGMMA: nvvm.wgmma.mma_async %{{.*}}, %{{.*}}, %[[HI]], {{.*}} A[<bf16>, <one>, <col>]
//
// The kernels' structure: the operands' ldmatrix forms and the two MMAs of
// a split step.
// RUN: moe-opt %t.src.mlir --moe-test-build-mma-kernels | FileCheck %s --check-prefix=IR
//
// CHECK: compare: OK, 75464 values, max abs diff 0{{$}}
//
// IR-LABEL: gpu.func @moe_mma_rowgrad_bias_bf16_m64(
// IR: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false}
// IR: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true}
// IR-LABEL: gpu.func @moe_mma_rowgrad_bt_split_bf16_m64(
// IR-NOT: transpose = true
// IR: %[[HI:.*]] = nvvm.mma.sync A{{\[}}{{[^]]+}}]  B{{\[}}[[B:[%0-9, ]+]]]  C
// IR-NEXT: %[[C0:.*]] = llvm.extractvalue %[[HI]][0]
// IR-NOT: nvvm.mma.sync
// IR: nvvm.mma.sync A{{.*}}B{{\[}}[[B]]]  C{{\[}}%[[C0]],
// IR-LABEL: gpu.func @moe_mma_wgrad_bias_bf16_m64(
// IR: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true}
// IR: %[[HI:.*]] = nvvm.mma.sync A{{\[}}[[A:[%0-9, ]+]]]  B
// IR-NEXT: %[[C0:.*]] = llvm.extractvalue %[[HI]][0]
// IR-NOT: nvvm.mma.sync
// IR: nvvm.mma.sync A{{\[}}[[A]]]  B{{.*}}C{{\[}}%[[C0]],

func.func private @__moe_launch_moe_mma_rowgrad_bias_bf16_m64(index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, index, index, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_rowgrad_bias_bf16_m64}
func.func private @__moe_launch_moe_mma_rowgrad_bias_bf16_m16(index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, index, index, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_rowgrad_bias_bf16_m16}
func.func private @__moe_launch_moe_mma_rowgrad_bt_split_bf16_m64(index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, index, index, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_rowgrad_bt_split_bf16_m64}
func.func private @__moe_launch_moe_mma_rowgrad_bt_split_bf16_m16(index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, index, index, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_rowgrad_bt_split_bf16_m16}
func.func private @__moe_launch_moe_mma_rowgrad_bt_split_actgrad_relu_bf16_m64(index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, index, index, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_rowgrad_bt_split_actgrad_relu_bf16_m64}
func.func private @__moe_launch_moe_mma_wgrad_bias_bf16_m64(index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, memref<?xf32>, index, index, index) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_wgrad_bias_bf16_m64}
func.func private @__moe_launch_moe_mma_wgrad_bf16_m64(index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, memref<?xf32>, index, index, index) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_wgrad_bf16_m64}

/// x as two bf16 terms: hi = bf16(x), lo = bf16(x - hi).
func.func @split(%x: memref<?xf32>) -> (memref<?xbf16>, memref<?xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %hi = memref.alloc(%n) : memref<?xbf16>
  %lo = memref.alloc(%n) : memref<?xbf16>
  scf.for %i = %c0 to %n step %c1 {
    %v = memref.load %x[%i] : memref<?xf32>
    %h = arith.truncf %v : f32 to bf16
    %hf = arith.extf %h : bf16 to f32
    %d = arith.subf %v, %hf : f32
    %l = arith.truncf %d : f32 to bf16
    memref.store %h, %hi[%i] : memref<?xbf16>
    memref.store %l, %lo[%i] : memref<?xbf16>
  }
  return %hi, %lo : memref<?xbf16>, memref<?xbf16>
}

/// One term's products of the k16 step from %k0: s + sum_k a[ai + k * as]
/// * b[bi + k * bs] for k0 <= k < min(k0 + 16, K), in ascending k.
func.func @step(%s: f32, %a: memref<?xbf16>, %ai: index, %as: index, %b: memref<?xbf16>, %bi: index, %bs: index, %k0: index, %K: index) -> f32 {
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %e0 = arith.addi %k0, %c16 : index
  %end = arith.minui %e0, %K : index
  %r = scf.for %k = %k0 to %end step %c1 iter_args(%acc = %s) -> f32 {
    %ka = arith.muli %k, %as : index
    %ia = arith.addi %ai, %ka : index
    %kb = arith.muli %k, %bs : index
    %ib = arith.addi %bi, %kb : index
    %av = memref.load %a[%ia] : memref<?xbf16>
    %bv = memref.load %b[%ib] : memref<?xbf16>
    %af = arith.extf %av : bf16 to f32
    %bf = arith.extf %bv : bf16 to f32
    %p = arith.mulf %af, %bf : f32
    %n = arith.addf %acc, %p : f32
    scf.yield %n : f32
  }
  return %r : f32
}

/// sum over k < K of (a1 + a2 when %two)[ai + k as] * (b1 + b2 when %twoB)[bi
/// + k bs], term by term within each k16 step: the kernels' order.
func.func @dot2(%a1: memref<?xbf16>, %a2: memref<?xbf16>, %two: i1, %ai: index, %as: index, %b1: memref<?xbf16>, %b2: memref<?xbf16>, %twoB: i1, %bi: index, %bs: index, %K: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0.0 : f32
  %r = scf.for %k0 = %c0 to %K step %c16 iter_args(%acc = %zero) -> f32 {
    %s1 = func.call @step(%acc, %a1, %ai, %as, %b1, %bi, %bs, %k0, %K) : (f32, memref<?xbf16>, index, index, memref<?xbf16>, index, index, index, index) -> f32
    %s2 = scf.if %two -> f32 {
      %v = func.call @step(%s1, %a2, %ai, %as, %b1, %bi, %bs, %k0, %K) : (f32, memref<?xbf16>, index, index, memref<?xbf16>, index, index, index, index) -> f32
      scf.yield %v : f32
    } else {
      scf.yield %s1 : f32
    }
    %s3 = scf.if %twoB -> f32 {
      %v = func.call @step(%s2, %a1, %ai, %as, %b2, %bi, %bs, %k0, %K) : (f32, memref<?xbf16>, index, index, memref<?xbf16>, index, index, index, index) -> f32
      scf.yield %v : f32
    } else {
      scf.yield %s2 : f32
    }
    scf.yield %s3 : f32
  }
  return %r : f32
}

/// A bf16 [167, K] (or its two terms from f32 data when %split), W [3, K, N]
/// (or [3, N, K] when %bt), b [3, N]; z [167, N] for the activation
/// gradient.
func.func @inputs(%K: index, %N: index, %split: i1) -> (memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>) {
  %c3 = arith.constant 3 : index
  %c167 = arith.constant 167 : index
  %f1 = arith.constant 0.37 : f32
  %f2 = arith.constant 0.11 : f32
  %f3 = arith.constant 0.23 : f32
  %f4 = arith.constant 0.53 : f32
  %s1 = arith.constant 1.0 : f32
  %s2 = arith.constant 0.25 : f32
  %an = arith.muli %c167, %K : index
  %a:2 = scf.if %split -> (memref<?xbf16>, memref<?xbf16>) {
    %x = func.call @fillF32(%an, %f1) : (index, f32) -> memref<?xf32>
    %hi, %lo = func.call @split(%x) : (memref<?xf32>) -> (memref<?xbf16>, memref<?xbf16>)
    scf.yield %hi, %lo : memref<?xbf16>, memref<?xbf16>
  } else {
    %x = func.call @fill(%an, %f1, %s1) : (index, f32, f32) -> memref<?xbf16>
    scf.yield %x, %x : memref<?xbf16>, memref<?xbf16>
  }
  %wn0 = arith.muli %K, %N : index
  %wn = arith.muli %wn0, %c3 : index
  %w = func.call @fill(%wn, %f2, %s2) : (index, f32, f32) -> memref<?xbf16>
  %bn = arith.muli %c3, %N : index
  %b = func.call @fill(%bn, %f3, %s2) : (index, f32, f32) -> memref<?xbf16>
  %zn = arith.muli %c167, %N : index
  %z = func.call @fillF32(%zn, %f4) : (index, f32) -> memref<?xf32>
  return %a#0, %a#1, %w, %b, %z : memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>
}

/// Row GEMM reference (%kind: 0 bias, 1 bt split, 2 bt split relu
/// gradient): C [167, N]; with the gradient dZ's hi, lo and h, [167, N]
/// each, follow C in the printed order of @gpuRow.
func.func @refRow(%K: index, %N: index, %kind: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c167 = arith.constant 167 : index
  %zero = arith.constant 0.0 : f32
  %false = arith.constant false
  %split = arith.cmpi ne, %kind, %c0 : index
  %isGrad = arith.cmpi ugt, %kind, %c1 : index
  %a, %alo, %w, %b, %z = func.call @inputs(%K, %N, %split) : (index, index, i1) -> (memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>)
  %sorted, %te, %nt, %pos, %exOf, %mt = func.call @plan(%c64) : (index) -> (memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xindex>, memref<?xindex>, index)
  %on = arith.muli %c167, %N : index
  %c = memref.alloc(%on) : memref<?xf32>
  %hi = memref.alloc(%on) : memref<?xf32>
  %lo = memref.alloc(%on) : memref<?xf32>
  %h = memref.alloc(%on) : memref<?xf32>
  scf.for %r = %c0 to %c167 step %c1 {
    %e = memref.load %exOf[%r] : memref<?xindex>
    %ai = arith.muli %r, %K : index
    scf.for %n = %c0 to %N step %c1 {
      // W [3, K, N]: B[k, n] at (e K + k) N + n; W^T: W [3, N, K] at (e N + n) K + k.
      %eK = arith.muli %e, %K : index
      %eKN = arith.muli %eK, %N : index
      %bi = scf.if %split -> index {
        %en = arith.muli %e, %N : index
        %enn = arith.addi %en, %n : index
        %v = arith.muli %enn, %K : index
        scf.yield %v : index
      } else {
        %v = arith.addi %eKN, %n : index
        scf.yield %v : index
      }
      %bs = arith.select %split, %c1, %N : index
      %s = func.call @dot2(%a, %alo, %split, %ai, %c1, %w, %w, %false, %bi, %bs, %K) : (memref<?xbf16>, memref<?xbf16>, i1, index, index, memref<?xbf16>, memref<?xbf16>, i1, index, index, index) -> f32
      %i = arith.muli %r, %N : index
      %j = arith.addi %i, %n : index
      %v = scf.if %split -> f32 {
        scf.yield %s : f32
      } else {
        %en = arith.muli %e, %N : index
        %bj = arith.addi %en, %n : index
        %bv = memref.load %b[%bj] : memref<?xbf16>
        %bf = arith.extf %bv : bf16 to f32
        %t = arith.addf %s, %bf : f32
        scf.yield %t : f32
      }
      memref.store %v, %c[%j] : memref<?xf32>
      // relu: dz = z > 0 ? dh : 0 as two terms, h = bf16(max(z, 0)).
      %zv = memref.load %z[%j] : memref<?xf32>
      %pos0 = arith.cmpf ogt, %zv, %zero : f32
      %dz = arith.select %pos0, %s, %zero : f32
      %dh = arith.truncf %dz : f32 to bf16
      %dhf = arith.extf %dh : bf16 to f32
      %dd = arith.subf %dz, %dhf : f32
      %dl = arith.truncf %dd : f32 to bf16
      %dlf = arith.extf %dl : bf16 to f32
      %hv = arith.maximumf %zv, %zero : f32
      %hb = arith.truncf %hv : f32 to bf16
      %hf = arith.extf %hb : bf16 to f32
      memref.store %dhf, %hi[%j] : memref<?xf32>
      memref.store %dlf, %lo[%j] : memref<?xf32>
      memref.store %hf, %h[%j] : memref<?xf32>
    }
  }
  scf.if %isGrad {
    func.call @print(%z) : (memref<?xf32>) -> ()
    func.call @print(%hi) : (memref<?xf32>) -> ()
    func.call @print(%lo) : (memref<?xf32>) -> ()
    func.call @print(%h) : (memref<?xf32>) -> ()
  } else {
    func.call @print(%c) : (memref<?xf32>) -> ()
  }
  return
}

/// Launches a row GEMM case (%kind as @refRow; %small: the 16-row tiles)
/// and prints its outputs (C, or z unchanged and dZ's hi, lo and h).
func.func @gpuRow(%K: index, %N: index, %kind: index, %small: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %c167 = arith.constant 167 : index
  %split = arith.cmpi ne, %kind, %c0 : index
  %a, %alo, %w, %b, %z = func.call @inputs(%K, %N, %split) : (index, index, i1) -> (memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>)
  %tm = arith.select %small, %c16, %c64 : index
  %sorted, %te, %nt, %pos, %exOf, %maxTiles = func.call @plan(%tm) : (index) -> (memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xindex>, memref<?xindex>, index)
  %on = arith.muli %c167, %N : index
  %c = memref.alloc(%on) : memref<?xf32>
  %hi = memref.alloc(%on) : memref<?xbf16>
  %lo = memref.alloc(%on) : memref<?xbf16>
  %h = memref.alloc(%on) : memref<?xbf16>
  %gx = arith.ceildivui %N, %c128 : index
  %code = arith.addi %kind, %kind : index
  %sw = scf.if %small -> index {
    %v = arith.addi %code, %c1 : index
    scf.yield %v : index
  } else {
    scf.yield %code : index
  }
  // 0: bias m64, 1: bias m16, 2: bt split m64, 3: bt split m16, 4: relu grad m64.
  scf.index_switch %sw
  case 0 {
    func.call @__moe_launch_moe_mma_rowgrad_bias_bf16_m64(%gx, %maxTiles, %c1, %c128, %c1, %c1, %a, %sorted, %a, %te, %nt, %w, %b, %c, %K, %N, %a, %a, %a) : (index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, index, index, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>) -> ()
    scf.yield
  }
  case 1 {
    func.call @__moe_launch_moe_mma_rowgrad_bias_bf16_m16(%gx, %maxTiles, %c1, %c128, %c1, %c1, %a, %sorted, %a, %te, %nt, %w, %b, %c, %K, %N, %a, %a, %a) : (index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, index, index, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>) -> ()
    scf.yield
  }
  case 2 {
    func.call @__moe_launch_moe_mma_rowgrad_bt_split_bf16_m64(%gx, %maxTiles, %c1, %c128, %c1, %c1, %a, %sorted, %alo, %te, %nt, %w, %w, %c, %K, %N, %a, %a, %a) : (index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, index, index, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>) -> ()
    scf.yield
  }
  case 3 {
    func.call @__moe_launch_moe_mma_rowgrad_bt_split_bf16_m16(%gx, %maxTiles, %c1, %c128, %c1, %c1, %a, %sorted, %alo, %te, %nt, %w, %w, %c, %K, %N, %a, %a, %a) : (index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, index, index, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>) -> ()
    scf.yield
  }
  default {
    func.call @__moe_launch_moe_mma_rowgrad_bt_split_actgrad_relu_bf16_m64(%gx, %maxTiles, %c1, %c128, %c1, %c1, %a, %sorted, %alo, %te, %nt, %w, %w, %z, %K, %N, %h, %hi, %lo) : (index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, index, index, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>) -> ()
  }
  %isGrad = arith.cmpi ugt, %kind, %c1 : index
  scf.if %isGrad {
    %hif = func.call @toF32(%hi) : (memref<?xbf16>) -> memref<?xf32>
    %lof = func.call @toF32(%lo) : (memref<?xbf16>) -> memref<?xf32>
    %hf = func.call @toF32(%h) : (memref<?xbf16>) -> memref<?xf32>
    func.call @print(%z) : (memref<?xf32>) -> ()
    func.call @print(%hif) : (memref<?xf32>) -> ()
    func.call @print(%lof) : (memref<?xf32>) -> ()
    func.call @print(%hf) : (memref<?xf32>) -> ()
  } else {
    func.call @print(%c) : (memref<?xf32>) -> ()
  }
  return
}

/// The weight-gradient case's inputs: A [167, M] bf16, B [167, N] as two
/// terms, offsets [4] (groups of 150, 0, 17 rows with %empty, else 150, 7,
/// 10).
func.func @wgradInputs(%M: index, %N: index, %empty: i1) -> (memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, memref<?xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c167 = arith.constant 167 : index
  %f1 = arith.constant 0.41 : f32
  %f2 = arith.constant 0.19 : f32
  %s1 = arith.constant 1.0 : f32
  %an = arith.muli %c167, %M : index
  %a = func.call @fill(%an, %f1, %s1) : (index, f32, f32) -> memref<?xbf16>
  %bn = arith.muli %c167, %N : index
  %x = func.call @fillF32(%bn, %f2) : (index, f32) -> memref<?xf32>
  %hi, %lo = func.call @split(%x) : (memref<?xf32>) -> (memref<?xbf16>, memref<?xbf16>)
  %off = memref.alloc(%c4) : memref<?xi32>
  %o0 = arith.constant 0 : i32
  %o1 = arith.constant 150 : i32
  %o2a = arith.constant 157 : i32
  %o3 = arith.constant 167 : i32
  %o2 = arith.select %empty, %o1, %o2a : i32
  memref.store %o0, %off[%c0] : memref<?xi32>
  memref.store %o1, %off[%c1] : memref<?xi32>
  memref.store %o2, %off[%c2] : memref<?xi32>
  memref.store %o3, %off[%c3] : memref<?xi32>
  return %a, %hi, %lo, %off : memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, memref<?xi32>
}

/// Weight-gradient reference: C [3, M, N] and (with %bias) the bias
/// gradient [3, N], the column of ones in A.
func.func @refWgrad(%M: index, %N: index, %bias: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %true = arith.constant true
  %false = arith.constant false
  %a, %hi, %lo, %off = func.call @wgradInputs(%M, %N, %bias) : (index, index, i1) -> (memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, memref<?xi32>)
  %ones = memref.alloc(%c1) : memref<?xbf16>
  %one = arith.constant 1.0 : bf16
  memref.store %one, %ones[%c0] : memref<?xbf16>
  %cn0 = arith.muli %M, %N : index
  %cn = arith.muli %cn0, %c3 : index
  %c = memref.alloc(%cn) : memref<?xf32>
  %bn = arith.muli %c3, %N : index
  %bg = memref.alloc(%bn) : memref<?xf32>
  scf.for %g = %c0 to %c3 step %c1 {
    %g1 = arith.addi %g, %c1 : index
    %b0 = memref.load %off[%g] : memref<?xi32>
    %b1 = memref.load %off[%g1] : memref<?xi32>
    %first = arith.index_cast %b0 : i32 to index
    %end = arith.index_cast %b1 : i32 to index
    %cnt = arith.subi %end, %first : index
    scf.for %n = %c0 to %N step %c1 {
      %bi0 = arith.muli %first, %N : index
      %bi = arith.addi %bi0, %n : index
      scf.for %m = %c0 to %M step %c1 {
        %ai0 = arith.muli %first, %M : index
        %ai = arith.addi %ai0, %m : index
        %s = func.call @dot2(%a, %a, %false, %ai, %M, %hi, %lo, %true, %bi, %N, %cnt) : (memref<?xbf16>, memref<?xbf16>, i1, index, index, memref<?xbf16>, memref<?xbf16>, i1, index, index, index) -> f32
        %gm = arith.muli %g, %M : index
        %gmm = arith.addi %gm, %m : index
        %ci0 = arith.muli %gmm, %N : index
        %ci = arith.addi %ci0, %n : index
        memref.store %s, %c[%ci] : memref<?xf32>
      }
      %t = func.call @dot2(%ones, %ones, %false, %c0, %c0, %hi, %lo, %true, %bi, %N, %cnt) : (memref<?xbf16>, memref<?xbf16>, i1, index, index, memref<?xbf16>, memref<?xbf16>, i1, index, index, index) -> f32
      %gn = arith.muli %g, %N : index
      %gi = arith.addi %gn, %n : index
      memref.store %t, %bg[%gi] : memref<?xf32>
    }
  }
  func.call @print(%c) : (memref<?xf32>) -> ()
  scf.if %bias {
    func.call @print(%bg) : (memref<?xf32>) -> ()
  }
  return
}

func.func @gpuWgrad(%M: index, %N: index, %bias: i1) {
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %c167 = arith.constant 167 : index
  %a, %hi, %lo, %off = func.call @wgradInputs(%M, %N, %bias) : (index, index, i1) -> (memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, memref<?xi32>)
  %cn0 = arith.muli %M, %N : index
  %cn = arith.muli %cn0, %c3 : index
  %c = memref.alloc(%cn) : memref<?xf32>
  %bn = arith.muli %c3, %N : index
  %bg = memref.alloc(%bn) : memref<?xf32>
  %gx = arith.ceildivui %N, %c128 : index
  scf.if %bias {
    %M1 = arith.addi %M, %c1 : index
    %gy = arith.ceildivui %M1, %c64 : index
    func.call @__moe_launch_moe_mma_wgrad_bias_bf16_m64(%gx, %gy, %c3, %c128, %c1, %c1, %a, %off, %hi, %lo, %c, %bg, %M, %N, %c167) : (index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, memref<?xf32>, index, index, index) -> ()
    func.call @print(%c) : (memref<?xf32>) -> ()
    func.call @print(%bg) : (memref<?xf32>) -> ()
  } else {
    %gy = arith.ceildivui %M, %c64 : index
    func.call @__moe_launch_moe_mma_wgrad_bf16_m64(%gx, %gy, %c3, %c128, %c1, %c1, %a, %off, %hi, %lo, %c, %bg, %M, %N, %c167) : (index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, memref<?xf32>, index, index, index) -> ()
    func.call @print(%c) : (memref<?xf32>) -> ()
  }
  return
}

func.func @ref() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %K48 = arith.constant 48 : index
  %K36 = arith.constant 36 : index
  %N40 = arith.constant 40 : index
  %N20 = arith.constant 20 : index
  %N136 = arith.constant 136 : index
  %M72 = arith.constant 72 : index
  %N48 = arith.constant 48 : index
  %true = arith.constant true
  %false = arith.constant false
  func.call @refRow(%K48, %N40, %c0) : (index, index, index) -> ()
  func.call @refRow(%K36, %N20, %c0) : (index, index, index) -> ()
  func.call @refRow(%K48, %N136, %c1) : (index, index, index) -> ()
  func.call @refRow(%K36, %N20, %c1) : (index, index, index) -> ()
  func.call @refRow(%K48, %N40, %c2) : (index, index, index) -> ()
  func.call @refWgrad(%M72, %N48, %true) : (index, index, i1) -> ()
  func.call @refWgrad(%K36, %N20, %false) : (index, index, i1) -> ()
  return
}

func.func @gpu() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %K48 = arith.constant 48 : index
  %K36 = arith.constant 36 : index
  %N40 = arith.constant 40 : index
  %N20 = arith.constant 20 : index
  %N136 = arith.constant 136 : index
  %M72 = arith.constant 72 : index
  %N48 = arith.constant 48 : index
  %true = arith.constant true
  %false = arith.constant false
  func.call @gpuRow(%K48, %N40, %c0, %false) : (index, index, index, i1) -> ()
  func.call @gpuRow(%K36, %N20, %c0, %true) : (index, index, index, i1) -> ()
  func.call @gpuRow(%K48, %N136, %c1, %false) : (index, index, index, i1) -> ()
  func.call @gpuRow(%K36, %N20, %c1, %true) : (index, index, index, i1) -> ()
  func.call @gpuRow(%K48, %N40, %c2, %false) : (index, index, index, i1) -> ()
  func.call @gpuWgrad(%M72, %N48, %true) : (index, index, i1) -> ()
  func.call @gpuWgrad(%K36, %N20, %false) : (index, index, i1) -> ()
  return
}
