// The tensor-core expert GEMMs (lowering/gpu/MmaGemm.cpp: cp.async stages,
// ldmatrix, mma.sync m16n8k16), run on the host by --moe-test-emulate-gpu
// with the PTX ISA's fragment layouts, against plain loops (@ref) on a
// hand-made routing plan: three experts with 150, 7 and 10 rows, the gather
// of token r / 2 for assignment r, padding rows, inactive tiles past
// numTiles.
//
// Cases (kernel, shape; the first of each pair takes the 16-byte cp.async
// path, the second the element-load fallback, D and H not multiples of 8):
//  1. gemm1 gather swiglu bias, tile 64, D=48 H=40 (K tail: 48 = 32 + 16;
//     N tail: 40 of 64 columns per part)
//  2. gemm1 gather swiglu bias, tile 64, D=36 H=20
//  3. gemm2 weighted bias f32 rows, tile 16 (decode), H=40 D=48
//  4. gemm2 weighted bias f32 rows, tile 16, H=20 D=36
//  5. gemm1 gather gelu bias, tile 64, D=64 H=136 (two column blocks)
//  6. gemm1 relu (no gather, no bias), tile 32, D=40 H=24
//  7. gemm2 unweighted, no bias, data-type rows, tile 64, H=24 D=40
//
// Tolerance: none. The emulated mma.sync adds the 16 products of each step
// to C in ascending k, in f32, and bf16/f16 products are exact in f32, so
// the emulation reproduces the sequential f32 sum of @ref bit for bit; any
// difference is a wrong fragment, address, stage or tail.
//
// RUN: cat %s %S/Inputs/mma-plan.mlir > %t.src.mlir
// RUN: moe-opt %t.src.mlir --pass-pipeline="%moe_emulate_mma_pipeline" --emit-bytecode -o %t.bf16.ll.mlir
// RUN: moe-test-runner %t.bf16.ll.mlir -e ref -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.bf16.ref
// RUN: moe-test-runner %t.bf16.ll.mlir -e gpu -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.bf16.gpu
// RUN: %python %S/Inputs/compare-memrefs.py --atol 0 --rtol 0 %t.bf16.ref %t.bf16.gpu | FileCheck %s
// The same cases in f16.
// RUN: sed -e 's/bf16/f16/g' %t.src.mlir > %t.f16.mlir
// RUN: moe-opt %t.f16.mlir --pass-pipeline="%moe_emulate_mma_pipeline" --emit-bytecode -o %t.f16.ll.mlir
// RUN: moe-test-runner %t.f16.ll.mlir -e ref -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.f16.ref
// RUN: moe-test-runner %t.f16.ll.mlir -e gpu -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.f16.gpu
// RUN: %python %S/Inputs/compare-memrefs.py --atol 0 --rtol 0 %t.f16.ref %t.f16.gpu | FileCheck %s
// The four 64-row cases (1, 2, 5, 7) again, bf16, with the sm_90a wgmma
// kernels (the same builder with MmaGemmConfig::wgmma: canonical
// core-matrix stages, matrix descriptors, wgmma.mma_async m64n128k16;
// emulated from the PTX ISA layouts, WarpLayouts.h); cases 3, 4 and 6 keep
// their 16- and 32-row mma.sync kernels. Same plain loops, bit for bit.
// RUN: sed -e 's/_m64\([(}]\)/_m64_wgmma\1/g' %t.src.mlir > %t.wgmma.mlir
// RUN: moe-opt %t.wgmma.mlir --pass-pipeline="%moe_emulate_mma_pipeline" --emit-bytecode -o %t.wgmma.ll.mlir
// RUN: moe-test-runner %t.wgmma.ll.mlir -e gpu -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.wgmma.gpu
// RUN: %python %S/Inputs/compare-memrefs.py --atol 0 --rtol 0 %t.bf16.ref %t.wgmma.gpu | FileCheck %s
// RUN: moe-opt %t.wgmma.mlir --moe-test-build-mma-kernels | FileCheck %s --check-prefix=WGMMA
// The same four cases with the 128-row wgmma kernels (two consumer
// warpgroups, 256 threads, warpgroup w computing rows 64 w .. 64 w + 63
// against the same B stage; two cp.async stages): the plan's tile is 128
// rows (expert 0's 150 rows are a full tile and a 22-row tile, 4 tiles and
// 3 inactive ones), the blocks 256 threads; the plain loops of case 7 read
// h at that plan's padded positions. Bit for bit again.
// RUN: sed -e 's/_m64\([(}]\)/_m128_wgmma\1/g' -e '/_m128_wgmma(%%gx/s/%%c1, %%c128, %%c1, %%c1,/%%c1, %%c256, %%c1, %%c1,/' -e 's/%%c32, %%c64 : index/%%c32, %%c128 : index/' -e 's/%%c16, %%c64 : index/%%c16, %%c128 : index/' -e 's/@ref2(%%H24, %%D40, %%c64,/@ref2(%%H24, %%D40, %%c128,/' %t.src.mlir > %t.m128.mlir
// RUN: moe-opt %t.m128.mlir --pass-pipeline="%moe_emulate_mma_pipeline" --emit-bytecode -o %t.m128.ll.mlir
// RUN: moe-test-runner %t.m128.ll.mlir -e ref -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.m128.ref
// RUN: moe-test-runner %t.m128.ll.mlir -e gpu -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.m128.gpu
// RUN: %python %S/Inputs/compare-memrefs.py --atol 0 --rtol 0 %t.m128.ref %t.m128.gpu | FileCheck %s
// RUN: moe-opt %t.m128.mlir --moe-test-build-mma-kernels | FileCheck %s --check-prefix=M128
// The 64- and 128-row wgmma cases with wgmma-groups-in-flight = 0 (the
// `_inflight0` kernels: wait_group 0 at the end of every stage): the same
// bits as the plain loops (and so as the default kernels).
// RUN: sed -e 's/_wgmma\([(}]\)/_wgmma_inflight0\1/g' %t.wgmma.mlir > %t.wgmma0.mlir
// RUN: moe-opt %t.wgmma0.mlir --pass-pipeline="%moe_emulate_mma_pipeline" --emit-bytecode \
// RUN:   | moe-test-runner -e gpu -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.wgmma0.gpu
// RUN: %python %S/Inputs/compare-memrefs.py --atol 0 --rtol 0 %t.bf16.ref %t.wgmma0.gpu | FileCheck %s
// RUN: sed -e 's/_wgmma\([(}]\)/_wgmma_inflight0\1/g' %t.m128.mlir > %t.m128.0.mlir
// RUN: moe-opt %t.m128.0.mlir --pass-pipeline="%moe_emulate_mma_pipeline" --emit-bytecode \
// RUN:   | moe-test-runner -e gpu -entry-point-result=void -shared-libs=%mlir_runner_libs,%emulation_omp > %t.m128.0.gpu
// RUN: %python %S/Inputs/compare-memrefs.py --atol 0 --rtol 0 %t.m128.ref %t.m128.0.gpu | FileCheck %s
// RUN: moe-opt %t.wgmma0.mlir --moe-test-build-mma-kernels | FileCheck %s --check-prefix=INFLIGHT0
// INFLIGHT0-LABEL: gpu.func @moe_mma_gemm1_gather_swiglu_bias_bf16_m64_wgmma_inflight0(
// INFLIGHT0: scf.for
// INFLIGHT0: nvvm.wgmma.commit.group.sync.aligned
// INFLIGHT0-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// INFLIGHT0-NEXT: gpu.barrier
// INFLIGHT0-NOT: nvvm.wgmma.wait.group.sync.aligned 1
// INFLIGHT0-LABEL: gpu.func @moe_mma_gemm2_bf16_m64_wgmma_inflight0(
// INFLIGHT0: nvvm.wgmma.wait.group.sync.aligned 0
// INFLIGHT0-NOT: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: compare: OK, 57448 values, max abs diff 0{{$}}
// WGMMA-LABEL: gpu.func @moe_mma_gemm1_gather_swiglu_bias_bf16_m64_wgmma(
// WGMMA: nvvm.wgmma.mma_async
// WGMMA-LABEL: gpu.func @moe_mma_gemm2_weighted_bias_bf16_m16_outf32(
// WGMMA-NOT: wgmma
// WGMMA: nvvm.mma.sync
// M128-LABEL: gpu.func @moe_mma_gemm1_gather_swiglu_bias_bf16_m128_wgmma(
// M128-SAME: known_block_size = array<i32: 256, 1, 1>
// M128: nvvm.wgmma.mma_async
// M128-LABEL: gpu.func @moe_mma_gemm2_bf16_m128_wgmma(

func.func private @__moe_launch_moe_mma_gemm1_gather_swiglu_bias_bf16_m64(index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, index, index) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm1_gather_swiglu_bias_bf16_m64}
func.func private @__moe_launch_moe_mma_gemm1_gather_gelu_bias_bf16_m64(index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, index, index) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm1_gather_gelu_bias_bf16_m64}
func.func private @__moe_launch_moe_mma_gemm1_relu_bf16_m32(index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, index, index) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm1_relu_bf16_m32}
func.func private @__moe_launch_moe_mma_gemm2_weighted_bias_bf16_m16_outf32(index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xf32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, index, index) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm2_weighted_bias_bf16_m16_outf32}
func.func private @__moe_launch_moe_mma_gemm2_bf16_m64(index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xf32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, index, index) attributes {moe.gpu_kernel = @moe_kernels::@moe_mma_gemm2_bf16_m64}

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

/// sum_k A[arow, k] * B[e, k, col] in ascending k from 0, in f32.
func.func @dot(%a: memref<?xbf16>, %arow: index, %w: memref<?xbf16>, %e: index, %col: index, %K: index, %W: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %s = scf.for %k = %c0 to %K step %c1 iter_args(%acc = %zero) -> f32 {
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
  return %s : f32
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

// Inputs of a case: x [84 tokens, D] (or the 167 dispatched rows when not
// gathering), W1 [3, D, W], b1 [3, W]; h [pMax, H] for gemm2.

/// GEMM1 reference: rows [167, H] = round(act(...)) as f32.
func.func @ref1(%D: index, %H: index, %code: index, %gated: i1, %gather: i1, %hasBias: i1) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c84 = arith.constant 84 : index
  %c167 = arith.constant 167 : index
  %f1 = arith.constant 0.37 : f32
  %f2 = arith.constant 0.11 : f32
  %f3 = arith.constant 0.23 : f32
  %s1 = arith.constant 1.0 : f32
  %s2 = arith.constant 0.25 : f32
  %W = arith.select %gated, %c2, %c1 : index
  %Wc = arith.muli %W, %H : index
  %xn = arith.muli %c167, %D : index
  %x = func.call @fill(%xn, %f1, %s1) : (index, f32, f32) -> memref<?xbf16>
  %wn0 = arith.muli %D, %Wc : index
  %c3 = arith.constant 3 : index
  %wn = arith.muli %wn0, %c3 : index
  %w = func.call @fill(%wn, %f2, %s2) : (index, f32, f32) -> memref<?xbf16>
  %bn = arith.muli %c3, %Wc : index
  %b = func.call @fill(%bn, %f3, %s2) : (index, f32, f32) -> memref<?xbf16>
  %tm = arith.constant 64 : index
  %sorted, %te, %nt, %pos, %exOf, %mt = func.call @plan(%tm) : (index) -> (memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xindex>, memref<?xindex>, index)
  %on = arith.muli %c167, %H : index
  %out = memref.alloc(%on) : memref<?xf32>
  scf.for %r = %c0 to %c167 step %c1 {
    %e = memref.load %exOf[%r] : memref<?xindex>
    %half = arith.divui %r, %c2 : index
    %arow = arith.select %gather, %half, %r : index
    scf.for %n = %c0 to %H step %c1 {
      %g0 = func.call @dot(%x, %arow, %w, %e, %n, %D, %Wc) : (memref<?xbf16>, index, memref<?xbf16>, index, index, index, index) -> f32
      %gb = func.call @biasAt(%b, %hasBias, %e, %n, %Wc) : (memref<?xbf16>, i1, index, index, index) -> f32
      %g = arith.addf %g0, %gb : f32
      %a = func.call @act(%code, %g) : (index, f32) -> f32
      %v = scf.if %gated -> f32 {
        %nu = arith.addi %n, %H : index
        %u0 = func.call @dot(%x, %arow, %w, %e, %nu, %D, %Wc) : (memref<?xbf16>, index, memref<?xbf16>, index, index, index, index) -> f32
        %ub = func.call @biasAt(%b, %hasBias, %e, %nu, %Wc) : (memref<?xbf16>, i1, index, index, index) -> f32
        %u = arith.addf %u0, %ub : f32
        %m = arith.mulf %a, %u : f32
        scf.yield %m : f32
      } else {
        scf.yield %a : f32
      }
      %t = arith.truncf %v : f32 to bf16
      %tf = arith.extf %t : bf16 to f32
      %i = arith.muli %r, %H : index
      %j = arith.addi %i, %n : index
      memref.store %tf, %out[%j] : memref<?xf32>
    }
  }
  return %out : memref<?xf32>
}

/// GEMM2 reference: rows [167, D] = w_r * (h[pos r] W2[e] + b2[e]), as f32
/// (or rounded to the data type when %round).
func.func @ref2(%H: index, %D: index, %tm: index, %weighted: i1, %hasBias: i1, %round: i1) -> memref<?xf32> {
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
      %s0 = func.call @dot(%h, %p, %w, %e, %n, %H, %D) : (memref<?xbf16>, index, memref<?xbf16>, index, index, index, index) -> f32
      %bb = func.call @biasAt(%b, %hasBias, %e, %n, %D) : (memref<?xbf16>, i1, index, index, index) -> f32
      %s = arith.addf %s0, %bb : f32
      %v = scf.if %weighted -> f32 {
        %wv = memref.load %rw[%r] : memref<?xf32>
        %m = arith.mulf %wv, %s : f32
        scf.yield %m : f32
      } else {
        scf.yield %s : f32
      }
      %vr = scf.if %round -> f32 {
        %t = arith.truncf %v : f32 to bf16
        %tf = arith.extf %t : bf16 to f32
        scf.yield %tf : f32
      } else {
        scf.yield %v : f32
      }
      %i = arith.muli %r, %D : index
      %j = arith.addi %i, %n : index
      memref.store %vr, %out[%j] : memref<?xf32>
    }
  }
  return %out : memref<?xf32>
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

/// Launches GEMM1 case (%kind: 0 swiglu bias gather m64, 1 gelu bias gather
/// m64, 2 relu m32) and returns the rows [167, H].
func.func @gpu1(%D: index, %H: index, %kind: index) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %c256 = arith.constant 256 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c128 = arith.constant 128 : index
  %c167 = arith.constant 167 : index
  %f1 = arith.constant 0.37 : f32
  %f2 = arith.constant 0.11 : f32
  %f3 = arith.constant 0.23 : f32
  %s1 = arith.constant 1.0 : f32
  %s2 = arith.constant 0.25 : f32
  %gated = arith.cmpi eq, %kind, %c0 : index
  %isRelu = arith.cmpi eq, %kind, %c2 : index
  %W = arith.select %gated, %c2, %c1 : index
  %Wc = arith.muli %W, %H : index
  %xn = arith.muli %c167, %D : index
  %x = func.call @fill(%xn, %f1, %s1) : (index, f32, f32) -> memref<?xbf16>
  %wn0 = arith.muli %D, %Wc : index
  %wn = arith.muli %wn0, %c3 : index
  %w = func.call @fill(%wn, %f2, %s2) : (index, f32, f32) -> memref<?xbf16>
  %bn = arith.muli %c3, %Wc : index
  %b = func.call @fill(%bn, %f3, %s2) : (index, f32, f32) -> memref<?xbf16>
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %tm = arith.select %isRelu, %c32, %c64 : index
  %sorted, %te, %nt, %pos, %exOf, %maxTiles = func.call @plan(%tm) : (index) -> (memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xindex>, memref<?xindex>, index)
  %src = func.call @sources() : () -> memref<?xi32>
  %pMax = arith.muli %maxTiles, %tm : index
  %hn = arith.muli %pMax, %H : index
  %h = memref.alloc(%hn) : memref<?xbf16>
  %tn = arith.divui %c128, %W : index
  %gx = arith.ceildivui %H, %tn : index
  scf.index_switch %kind
  case 0 {
    func.call @__moe_launch_moe_mma_gemm1_gather_swiglu_bias_bf16_m64(%gx, %maxTiles, %c1, %c128, %c1, %c1, %x, %sorted, %src, %te, %nt, %w, %b, %h, %D, %H) : (index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, index, index) -> ()
    scf.yield
  }
  case 1 {
    func.call @__moe_launch_moe_mma_gemm1_gather_gelu_bias_bf16_m64(%gx, %maxTiles, %c1, %c128, %c1, %c1, %x, %sorted, %src, %te, %nt, %w, %b, %h, %D, %H) : (index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, index, index) -> ()
    scf.yield
  }
  default {
    func.call @__moe_launch_moe_mma_gemm1_relu_bf16_m32(%gx, %maxTiles, %c1, %c128, %c1, %c1, %x, %sorted, %sorted, %te, %nt, %w, %w, %h, %D, %H) : (index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, index, index) -> ()
  }
  %rows = func.call @gatherRows(%h, %pos, %H) : (memref<?xbf16>, memref<?xindex>, index) -> memref<?xf32>
  return %rows : memref<?xf32>
}

/// Launches GEMM2 case (%kind: 0 weighted bias f32 rows m16, 1 plain
/// data-type rows m64) and returns the rows [167, D].
func.func @gpu2(%H: index, %D: index, %kind: index) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %c256 = arith.constant 256 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %c128 = arith.constant 128 : index
  %c167 = arith.constant 167 : index
  %f1 = arith.constant 0.29 : f32
  %f2 = arith.constant 0.13 : f32
  %f3 = arith.constant 0.31 : f32
  %f4 = arith.constant 0.7 : f32
  %s1 = arith.constant 1.0 : f32
  %s2 = arith.constant 0.25 : f32
  %first = arith.cmpi eq, %kind, %c0 : index
  %tm = arith.select %first, %c16, %c64 : index
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
  %gx = arith.ceildivui %D, %c128 : index
  %res = scf.if %first -> memref<?xf32> {
    %out = memref.alloc(%on) : memref<?xf32>
    func.call @__moe_launch_moe_mma_gemm2_weighted_bias_bf16_m16_outf32(%gx, %maxTiles, %c1, %c128, %c1, %c1, %h, %sorted, %rw, %te, %nt, %w, %b, %out, %H, %D) : (index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xf32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xf32>, index, index) -> ()
    scf.yield %out : memref<?xf32>
  } else {
    %out = memref.alloc(%on) : memref<?xbf16>
    func.call @__moe_launch_moe_mma_gemm2_bf16_m64(%gx, %maxTiles, %c1, %c128, %c1, %c1, %h, %sorted, %rw, %te, %nt, %w, %w, %out, %H, %D) : (index, index, index, index, index, index, memref<?xbf16>, memref<?xi32>, memref<?xf32>, memref<?xi32>, memref<?xi32>, memref<?xbf16>, memref<?xbf16>, memref<?xbf16>, index, index) -> ()
    %f = func.call @toF32(%out) : (memref<?xbf16>) -> memref<?xf32>
    scf.yield %f : memref<?xf32>
  }
  return %res : memref<?xf32>
}

func.func @ref() {
  %c0 = arith.constant 0 : index
  %c128 = arith.constant 128 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %D48 = arith.constant 48 : index
  %H40 = arith.constant 40 : index
  %D36 = arith.constant 36 : index
  %H20 = arith.constant 20 : index
  %D64 = arith.constant 64 : index
  %H136 = arith.constant 136 : index
  %D40 = arith.constant 40 : index
  %H24 = arith.constant 24 : index
  %t = arith.constant true
  %f = arith.constant false
  %r1 = func.call @ref1(%D48, %H40, %c2, %t, %t, %t) : (index, index, index, i1, i1, i1) -> memref<?xf32>
  func.call @print(%r1) : (memref<?xf32>) -> ()
  %r2 = func.call @ref1(%D36, %H20, %c2, %t, %t, %t) : (index, index, index, i1, i1, i1) -> memref<?xf32>
  func.call @print(%r2) : (memref<?xf32>) -> ()
  %r3 = func.call @ref2(%H40, %D48, %c16, %t, %t, %f) : (index, index, index, i1, i1, i1) -> memref<?xf32>
  func.call @print(%r3) : (memref<?xf32>) -> ()
  %r4 = func.call @ref2(%H20, %D36, %c16, %t, %t, %f) : (index, index, index, i1, i1, i1) -> memref<?xf32>
  func.call @print(%r4) : (memref<?xf32>) -> ()
  %r5 = func.call @ref1(%D64, %H136, %c1, %f, %t, %t) : (index, index, index, i1, i1, i1) -> memref<?xf32>
  func.call @print(%r5) : (memref<?xf32>) -> ()
  %r6 = func.call @ref1(%D40, %H24, %c0, %f, %f, %f) : (index, index, index, i1, i1, i1) -> memref<?xf32>
  func.call @print(%r6) : (memref<?xf32>) -> ()
  %r7 = func.call @ref2(%H24, %D40, %c64, %f, %f, %t) : (index, index, index, i1, i1, i1) -> memref<?xf32>
  func.call @print(%r7) : (memref<?xf32>) -> ()
  return
}

func.func @gpu() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %D48 = arith.constant 48 : index
  %H40 = arith.constant 40 : index
  %D36 = arith.constant 36 : index
  %H20 = arith.constant 20 : index
  %D64 = arith.constant 64 : index
  %H136 = arith.constant 136 : index
  %D40 = arith.constant 40 : index
  %H24 = arith.constant 24 : index
  %r1 = func.call @gpu1(%D48, %H40, %c0) : (index, index, index) -> memref<?xf32>
  func.call @print(%r1) : (memref<?xf32>) -> ()
  %r2 = func.call @gpu1(%D36, %H20, %c0) : (index, index, index) -> memref<?xf32>
  func.call @print(%r2) : (memref<?xf32>) -> ()
  %r3 = func.call @gpu2(%H40, %D48, %c0) : (index, index, index) -> memref<?xf32>
  func.call @print(%r3) : (memref<?xf32>) -> ()
  %r4 = func.call @gpu2(%H20, %D36, %c0) : (index, index, index) -> memref<?xf32>
  func.call @print(%r4) : (memref<?xf32>) -> ()
  %r5 = func.call @gpu1(%D64, %H136, %c1) : (index, index, index) -> memref<?xf32>
  func.call @print(%r5) : (memref<?xf32>) -> ()
  %r6 = func.call @gpu1(%D40, %H24, %c2) : (index, index, index) -> memref<?xf32>
  func.call @print(%r6) : (memref<?xf32>) -> ()
  %r7 = func.call @gpu2(%H24, %D40, %c1) : (index, index, index) -> memref<?xf32>
  func.call @print(%r7) : (memref<?xf32>) -> ()
  return
}
