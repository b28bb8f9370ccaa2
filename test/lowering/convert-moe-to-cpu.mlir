// RUN: moe-opt %s --convert-moe-to-cpu -split-input-file -verify-diagnostics | FileCheck %s
//
// Every spec example lowers to upstream dialects only, and the result
// verifies in the stock mlir-opt without the plugin.
// RUN: for f in block dense moesart moesart_train soft top2_swiglu; do \
// RUN:   moe-opt %examples/$f.mlir --convert-moe-to-cpu -o %t.$f.mlir && \
// RUN:   %stock_mlir_opt %t.$f.mlir -o /dev/null && \
// RUN:   not grep -qE 'moe\.(layer|soft_layer|route|gate|dispatch|expert_ffn|combine|soft_dispatch|soft_combine) ' %t.$f.mlir || exit 1; \
// RUN: done
// RUN: FileCheck %s --check-prefix=TRAIN < %t.moesart_train.mlir
// RUN: FileCheck %s --check-prefix=SOFT < %t.soft.mlir
// RUN: FileCheck %s --check-prefix=SWIGLU < %t.top2_swiglu.mlir

// MOESART training: Philox4x32-10 (multipliers 0xD2511F53, 0xCD9E8D57 as
// signed i32) on a counter derived from the token and draw, keyed by the seed.
// The softmax exp and the adjustment log are the routing math of
// lowering/RoutingMath (f64 fma, the GPU kernels' code), never libm's.
// TRAIN: func.func private @__moe_cpu_gate_
// TRAIN-NOT: math.{{exp|log}}
// TRAIN: memref.load %{{.*}}[] : memref<i64, {{.*}}>
// TRAIN: scf.forall
// TRAIN-NOT: math.{{exp|log}}
// TRAIN: math.fma %{{.*}}, %cst{{.*}}, %cst{{.*}} : f64
// TRAIN-DAG: arith.constant -766435501 : i32
// TRAIN-DAG: arith.constant -845247145 : i32
// TRAIN-NOT: math.{{exp|log}}
// TRAIN: arith.mului_extended
// TRAIN-NOT: math.{{exp|log}}
// The trimmed-lasso loss is lambda * mean over tokens, stored into the
// caller's 0-d buffer.
// TRAIN: arith.constant 1.000000e-03 : f32
// TRAIN-NOT: math.{{exp|log}}
// TRAIN: memref.store %{{.*}}, %{{.*}}[] : memref<f32, {{.*}}>

// Soft MoE: normalization (rsqrt), two softmaxes (exp), slot rows collapsed
// expert-major, and the grouped FFN over experts.
// SOFT: math.rsqrt
// SOFT: math.exp
// SOFT: tensor.collapse_shape {{.*}} {{\[}}[0, 1, 2], [3]] : tensor<8x4x2x128xf32> into tensor<64x128xf32>
// SOFT: call @[[G1:__moe_cpu_gemm1_gelu_bias_packed_v512_6x4_b48x256_p32_[0-9A-F]+]](
// SOFT: call @__moe_cpu_gemm2_bias_packed_
// SOFT: tensor.expand_shape
// SOFT: func.func private @[[G1]](
// SOFT: math.erf {{.*}} : vector<16xf32>

// SwiGLU: route -> gate -> fused experts; GEMM1's epilogue multiplies
// silu(gate half) by the up half (the up accumulators read B at column H + c).
// SWIGLU-LABEL: func.func @forward
// SWIGLU: scf.parallel
// SWIGLU: vector.fma
// SWIGLU: math.exp {{.*}} : vector<16xf32>
// SWIGLU: arith.divf {{.*}} : vector<16xf32>
// SWIGLU-NEXT: arith.mulf {{.*}} : vector<16xf32>
// SWIGLU-NEXT: vector.maskedstore

// -----

// The router GEMM: the tokens and Wr viewed as memrefs and passed to an
// outlined kernel: one parallel loop over row blocks, f32 vector FMAs,
// masked stores of the E columns.
// CHECK-LABEL: func.func @route_matmul
// CHECK: %[[O:.*]] = memref.alloc(%{{.*}}) {alignment = 64 : i64} : memref<?x4xf32>
// CHECK-NEXT: %[[X:.*]] = bufferization.to_buffer %arg0 read_only : tensor<8x16xf32> to memref<8x16xf32, strided<[?, 1], offset: ?>>
// CHECK-NEXT: %[[WR:.*]] = bufferization.to_buffer %arg1 read_only : tensor<16x4xf32> to memref<16x4xf32, strided<[?, 1], offset: ?>>
// CHECK: call @[[ROUTER:__moe_cpu_router_v512_6x4_b48x256_p32_[0-9A-F]+]](
// CHECK-NEXT: %[[T:.*]] = bufferization.to_tensor %[[O]] restrict writable
// CHECK-NEXT: %[[C:.*]] = tensor.cast %[[T]] : tensor<?x4xf32> to tensor<8x4xf32>
// CHECK-NEXT: return %[[C]]
// Column blocks of col_block (256) columns, or of one tile (64) where that
// leaves fewer than 16 work items (here: 1 row block x 1 column block).
// B as it is: the row prefetch_rows (32) ahead, one prefetch per 64-byte
// line of the tile (4 vectors of 16 f32).
// CHECK: func.func private @[[ROUTER]](
// CHECK: %[[RB:.*]] = arith.ceildivsi %{{.*}}, %c48 : index
// CHECK: %[[CB:.*]] = arith.ceildivsi %[[N:.*]], %c256 : index
// CHECK-NEXT: %[[ITEMS:.*]] = arith.muli %{{.*}}, %[[CB]] : index
// CHECK-NEXT: %[[C16:.*]] = arith.constant 16 : index
// CHECK-NEXT: %[[FEW:.*]] = arith.cmpi slt, %[[ITEMS]], %[[C16]] : index
// CHECK-NEXT: %[[C64:.*]] = arith.constant 64 : index
// CHECK-NEXT: %[[C256:.*]] = arith.constant 256 : index
// CHECK-NEXT: %[[SIZE:.*]] = arith.select %[[FEW]], %[[C64]], %[[C256]] : index
// CHECK-NEXT: %[[COLS:.*]] = arith.ceildivsi %[[N]], %[[SIZE]] : index
// CHECK: scf.parallel (%{{.*}}, %[[CBI:.*]], %{{.*}}) = ({{.*}}) to (%{{.*}}, %[[COLS]], %[[RB]])
// CHECK: arith.muli %[[CBI]], %[[SIZE]] : index
// CHECK: scf.for %[[K:.*]] = %{{.*}} iter_args
// CHECK-NEXT: %[[C32:.*]] = arith.constant 32 : index
// CHECK-NEXT: %[[AHEAD:.*]] = arith.addi %[[K]], %[[C32]] : index
// CHECK-NEXT: memref.prefetch %arg1[%[[AHEAD]], %[[COL0:.*]]], read, locality<3>, data
// CHECK-NEXT: memref.prefetch %arg1[%[[AHEAD]], %{{.*}}], read, locality<3>, data
// CHECK-NEXT: memref.prefetch %arg1[%[[AHEAD]], %{{.*}}], read, locality<3>, data
// CHECK-NEXT: memref.prefetch %arg1[%[[AHEAD]], %{{.*}}], read, locality<3>, data
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<16xf32>
// CHECK-NEXT: vector.maskedload %arg1[%[[K]], %[[COL0]]], %{{.*}}, %[[ZERO]]
// CHECK: vector.fma
// CHECK: vector.maskedstore %arg2
// CHECK-NOT: moe.
func.func @route_matmul(%x: tensor<8x16xf32>, %wr: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %o = moe.route %x router(%wr) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %o : tensor<8x4xf32>
}

// -----

// The gate: an outlined function (per routing and K, any token count)
// writing the caller's buffers; inside, an scf.forall over tokens running
// the shared token-routing builder (lowering/RoutingBuilder.h): top-k in
// O(E*k): pick r is the best (ties keep the lower index) among the experts
// after pick r-1 in (larger logit, lower index) order, NaN ranking below
// every number (x < y: olt, or x is NaN and y is not; equal: oeq, or both
// NaN); each token writes its own rows of the caller's buffers.
// CHECK-LABEL: func.func @topk_gate
// CHECK: call @[[GATE:__moe_cpu_gate_[0-9A-F_]+]](
// CHECK: func.func private @[[GATE]](%[[L:.*]]: memref<?x?xf32, {{.*}}>, %[[WB:.*]]: memref<?x?xf32, {{.*}}>, %[[IB:.*]]: memref<?x?xi32, {{.*}}>)
// CHECK: scf.forall (%[[T:.*]]) in (%{{.*}}) {
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[PO:.*]] = %{{.*}}, %[[PI:.*]] = %{{.*}}) -> (f32, i32)
// CHECK: scf.for %[[EX:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[BO:.*]] = %{{.*}}, %[[BI:.*]] = %{{.*}}) -> (f32, i32)
// CHECK-NEXT: %[[O:.*]] = memref.load %[[L]][%[[T]], %[[EX]]]
// CHECK-NEXT: %[[EXI:.*]] = arith.index_cast %[[EX]] : index to i32
// CHECK-NEXT: %[[ONAN:.*]] = arith.cmpf uno, %[[O]], %[[O]] : f32
// CHECK-NEXT: %[[PNAN:.*]] = arith.cmpf uno, %[[PO]], %[[PO]] : f32
// CHECK-NEXT: %[[LT:.*]] = arith.cmpf olt, %[[O]], %[[PO]] : f32
// CHECK-NEXT: %[[FALSE:.*]] = arith.constant false
// CHECK-NEXT: %[[PNUM:.*]] = arith.cmpi eq, %[[PNAN]], %[[FALSE]] : i1
// CHECK-NEXT: %[[NANLT:.*]] = arith.andi %[[ONAN]], %[[PNUM]] : i1
// CHECK-NEXT: %[[LESS:.*]] = arith.ori %[[LT]], %[[NANLT]] : i1
// CHECK-NEXT: %[[EQ:.*]] = arith.cmpf oeq, %[[O]], %[[PO]] : f32
// CHECK:      arith.cmpi sgt, %[[EXI]], %[[PI]] : i32
// CHECK:      arith.cmpi slt, %[[BI]], %{{.*}} : i32
// CHECK-NEXT: arith.cmpf uno, %[[BO]], %[[BO]] : f32
// CHECK-NEXT: arith.cmpf uno, %[[O]], %[[O]] : f32
// CHECK-NEXT: arith.cmpf olt, %[[BO]], %[[O]] : f32
// CHECK: memref.store %{{.*}}, %[[IB]][%[[T]], %{{.*}}]
// CHECK: memref.store %{{.*}}, %[[WB]][%[[T]], %{{.*}}]
// CHECK-NOT: moe.gate
func.func @topk_gate(%o: tensor<8x4xf32>) -> (tensor<8x2xf32>, tensor<8x2xi32>) {
  %w, %i = moe.gate %o {routing = #moe.top_k<k = 2>} : (tensor<8x4xf32>) -> (tensor<8x2xf32>, tensor<8x2xi32>)
  return %w, %i : tensor<8x2xf32>, tensor<8x2xi32>
}

// -----

// GShard capacity: C = ceil(cf * T * K / E) in f64.
// CHECK-LABEL: func.func @capacity_dispatch
// CHECK: arith.constant 1.250000e+00 : f64
// CHECK: math.ceil
// CHECK: arith.fptosi
// CHECK: arith.minsi
func.func @capacity_dispatch(%x: tensor<8x16xf32>, %i: tensor<8x2xi32>) -> tensor<16x16xf32> {
  %r, %off, %src, %pos = moe.dispatch %x, %i {num_experts = 4 : i64, capacity_factor = 1.25 : f64}
      : (tensor<8x16xf32>, tensor<8x2xi32>) -> (tensor<16x16xf32>, tensor<5xi32>, tensor<16xi32>, tensor<8x2xi32>)
  return %r : tensor<16x16xf32>
}

// -----

// f16 data: expert weights packed once into module globals (keyed on the
// buffer) and extended to f32 as they are loaded; the tokens widened to f32
// once (the widen kernel) so that the micro-kernels broadcast f32; h rounded
// to f16 in GEMM1's epilogue and kept in f32 for GEMM2 (`_hround`); GEMM2's
// weighted rows kept in f32; y rounded once.
// CHECK-DAG: memref.global "private" @[[P1:__moe_cpu_packed_weights[_0-9]*]] : memref<4x1x16x64xf16> = uninitialized {alignment = 64 : i64}
// CHECK-DAG: memref.global "private" @[[P2:__moe_cpu_packed_weights[_0-9]*]] : memref<4x1x32x64xf16> = uninitialized {alignment = 64 : i64}
// CHECK-LABEL: func.func @f16_layer
// CHECK: call @__moe_cpu_router_
// CHECK: call @__moe_cpu_gate_
// CHECK: memref.get_global @[[P1]]
// CHECK: call @[[PACK:__moe_cpu_pack_v512_6x4_b48x256_p32_[0-9A-F]+]](
// CHECK: memref.get_global @[[P2]]
// CHECK: call @[[PACK]](
// CHECK: call @[[WIDEN:__moe_cpu_widen_v512_[0-9A-F]+]](%{{.*}}, %{{.*}}) : (memref<?x?xf16, strided<[?, 1], offset: ?>>, memref<?x?xf32, strided<[?, 1], offset: ?>>) -> ()
// CHECK: call @[[G1:__moe_cpu_gemm1_relu_gather_packed_hround_v512_6x4_b48x256_p32_[0-9A-F]+]](%{{.*}}) : (memref<?x?xf32, strided<[?, 1], offset: ?>>, memref<?x?x?x?xf16, {{.*}}>, memref<?xi32, {{.*}}>, memref<?x?xf32, {{.*}}>, memref<?xi32, {{.*}}>) -> ()
// CHECK: call @[[G2:__moe_cpu_gemm2_scaled_packed_v512_6x4_b48x256_p32_[0-9A-F]+]](
// CHECK: call @[[COMBINE:__moe_cpu_combine_v512_[0-9A-F]+]](
// CHECK: func.func private @[[PACK]](
// CHECK: memref.extract_aligned_pointer_as_index %arg0
// CHECK: scf.if
// CHECK: scf.parallel
// CHECK: %[[ROW:.*]] = vector.maskedload %arg0
// CHECK: vector.store %[[ROW]], %arg1
// CHECK: func.func private @[[WIDEN]](
// CHECK: %[[X:.*]] = vector.maskedload %arg0
// CHECK-NEXT: %[[XW:.*]] = arith.extf %[[X]] : vector<16xf16> to vector<16xf32>
// CHECK-NEXT: vector.maskedstore %arg1[{{.*}}], %{{.*}}, %[[XW]]
// CHECK: func.func private @[[G1]](
// CHECK: vector.load %arg1
// CHECK-NEXT: arith.extf {{.*}} : vector<16xf16> to vector<16xf32>
// CHECK: arith.maximumf {{.*}} : vector<16xf32>
// CHECK-NEXT: arith.truncf {{.*}} : vector<16xf32> to vector<16xf16>
// CHECK-NEXT: arith.extf {{.*}} : vector<16xf16> to vector<16xf32>
// CHECK-NEXT: vector.maskedstore %arg3{{.*}} : memref<?x?xf32, strided<[?, 1], offset: ?>>
// CHECK: func.func private @[[G2]](
// CHECK: arith.mulf {{.*}} : vector<16xf32>
// CHECK-NEXT: vector.maskedstore %arg3{{.*}} : memref<?x?xf32, strided<[?, 1], offset: ?>>
// CHECK: func.func private @[[COMBINE]](
// CHECK: arith.truncf {{.*}} : vector<16xf32> to vector<16xf16>
// CHECK-NEXT: vector.maskedstore %arg2{{.*}} : memref<?x?xf16, strided<[?, 1], offset: ?>>
// CHECK-NOT: moe.
func.func @f16_layer(%x: tensor<8x16xf16>, %wr: tensor<16x4xf16>, %w1: tensor<4x16x32xf16>, %w2: tensor<4x32x16xf16>) -> tensor<8x16xf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x16xf16>, tensor<16x4xf16>, tensor<4x16x32xf16>, tensor<4x32x16xf16>) -> tensor<8x16xf16>
  return %y : tensor<8x16xf16>
}

// -----

// A dynamic token count: every size comes from the operands (tensor.dim of
// the input), nothing from the results being replaced.
// CHECK-LABEL: func.func @dynamic_tokens
// CHECK: %[[T:.*]] = tensor.dim %arg0, %{{.*}} : tensor<?x16xf32>
// CHECK: memref.alloc(%[[T]]) {alignment = 64 : i64} : memref<?x4xf32>
// CHECK: tensor.cast %{{.*}} : tensor<?x16xf32> to tensor<?x16xf32>
// CHECK-NOT: moe.
func.func @dynamic_tokens(%x: tensor<?x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<?x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu>}
         : (tensor<?x16xf32>, tensor<16x4xf32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// -----

// A hand-written grouped FFN: rows read in place (no gather), GEMM2's result
// stored without a routed weight. Each GEMM's work items cover only the
// groups with rows: one scan of the offsets finds the largest group and
// lists the others (each group stored at the next free place, which moves
// on only if the group has rows), and the parallel loop's first index
// reads that list.
// CHECK-LABEL: func.func @expert_ffn
// CHECK: linalg.fill
// CHECK: call @[[G1:__moe_cpu_gemm1_relu_packed_v512_6x4_b48x256_p32_[0-9A-F]+]](
// CHECK: call @[[G2:__moe_cpu_gemm2_packed_v512_6x4_b48x256_p32_[0-9A-F]+]](
// CHECK: func.func private @[[G1]](%{{.*}}: memref<?x?xf32, {{.*}}>, %{{.*}}: memref<?x?x?x?xf32, {{.*}}>, %[[OFF:[a-z0-9]+]]: memref<?xi32, {{.*}}>,
// CHECK: %[[ACTIVE:.*]] = memref.alloc(%{{.*}}) : memref<?xindex>
// CHECK: %[[SCAN:.*]]:2 = scf.for %[[GRP:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[MAX:.*]] = %{{.*}}, %[[NEXT:.*]] = %{{.*}}) -> (index, index) {
// CHECK: %[[ROWS:.*]] = arith.subi
// CHECK-NEXT: memref.store %[[GRP]], %[[ACTIVE]][%[[NEXT]]] : memref<?xindex>
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[BUSY:.*]] = arith.cmpi sgt, %[[ROWS]], %[[Z]] : index
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[STEP:.*]] = arith.select %[[BUSY]], %[[ONE]], %[[ZERO]] : index
// CHECK-NEXT: %[[MOVED:.*]] = arith.addi %[[NEXT]], %[[STEP]] : index
// CHECK-NEXT: %[[LARGEST:.*]] = arith.maxsi %[[MAX]], %[[ROWS]] : index
// CHECK-NEXT: scf.yield %[[LARGEST]], %[[MOVED]] : index, index
// CHECK: scf.parallel (%[[ITEM:.*]], %{{.*}}, %{{.*}}) = ({{.*}}) to (%[[SCAN]]#1, %{{.*}}, %{{.*}})
// CHECK-NEXT: %[[G:.*]] = memref.load %[[ACTIVE]][%[[ITEM]]] : memref<?xindex>
// CHECK-NEXT: memref.load %[[OFF]][%[[G]]]
// CHECK: vector.fma
// CHECK: func.func private @[[G2]](
// CHECK: scf.parallel
// CHECK: vector.fma
// CHECK-NOT: moe.
func.func @expert_ffn(%rows: tensor<16x16xf32>, %off: tensor<5xi32>, %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<16x16xf32> {
  %o = moe.expert_ffn %rows, %off experts(%w1, %w2) {activation = #moe.activation<relu>}
         : (tensor<16x16xf32>, tensor<5xi32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<16x16xf32>
  return %o : tensor<16x16xf32>
}

// -----

func.func @f16_soft(%x: tensor<2x4x16xf16>, %phi: tensor<16x4x1xf16>, %w1: tensor<4x16x32xf16>, %w2: tensor<4x32x16xf16>) -> tensor<2x4x16xf16> {
  // expected-error @+1 {{cannot lower 'moe.soft_layer' with element type 'f16': the CPU lowering computes this op in f32 only}}
  %y = moe.soft_layer %x slots(%phi) experts(%w1, %w2) {activation = #moe.activation<relu>}
         : (tensor<2x4x16xf16>, tensor<16x4x1xf16>, tensor<4x16x32xf16>, tensor<4x32x16xf16>) -> tensor<2x4x16xf16>
  return %y : tensor<2x4x16xf16>
}

// -----

func.func @dynamic_experts(%x: tensor<8x16xf32>, %wr: tensor<16x?xf32>, %w1: tensor<?x16x32xf32>, %w2: tensor<?x32x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{cannot lower 'moe.layer' to the CPU: the number of experts is dynamic}}
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<16x?xf32>, tensor<?x16x32xf32>, tensor<?x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// The expert FFN's backward: z = rows W1 recomputed, then dh = dout W2^T
// with the activation's backward in its epilogue (dh is never stored): the
// epilogue reads z's gate and up columns, writes dz over them and h (the
// rounded activation) to its own buffer, with the same column mask.
// CHECK-LABEL: func.func @expert_ffn_grad(
// CHECK:       call @[[K:__moe_cpu_expert_ffn_grad_swiglu_[^(]*]](
// CHECK:       func.func private @[[K]](
// CHECK:       %[[Z:.*]] = memref.alloc({{.*}}) {{.*}} : memref<?x?xf32>
// CHECK:       scf.parallel
// CHECK:       %[[H:.*]] = memref.alloc({{.*}}) {{.*}} : memref<?x?xf32>
// CHECK-NOT:   memref.alloc({{.*}}) {{.*}} : memref<?x?xf32>
// CHECK:       scf.parallel
// CHECK:       vector.fma
// CHECK:       scf.if
// CHECK-NEXT:    arith.constant
// CHECK-NEXT:    %[[G:.*]] = vector.maskedload %[[Z]][%[[R:.*]], %[[C:.*]]], %[[M:.*]], %{{.*}} :
// CHECK-NEXT:    %[[UC:.*]] = arith.addi %[[C]], %{{.*}} : index
// CHECK-NEXT:    arith.constant
// CHECK-NEXT:    %[[U:.*]] = vector.maskedload %[[Z]][%[[R]], %[[UC]]], %[[M]], %{{.*}} :
// CHECK:         math.exp
// CHECK:         %[[HV:.*]] = arith.mulf %{{.*}}, %[[U]] : vector<16xf32>
// CHECK-NEXT:    %[[DU:.*]] = arith.mulf %[[DH:.*]], %[[U]] : vector<16xf32>
// CHECK-NEXT:    %[[DG:.*]] = arith.mulf %[[DU]], %{{.*}} : vector<16xf32>
// CHECK-NEXT:    %[[DUP:.*]] = arith.mulf %[[DH]], %{{.*}} : vector<16xf32>
// CHECK-NEXT:    vector.maskedstore %[[Z]][%[[R]], %[[C]]], %[[M]], %[[DG]]
// CHECK-NEXT:    vector.maskedstore %[[Z]][%[[R]], %[[UC]]], %[[M]], %[[DUP]]
// CHECK-NEXT:    vector.maskedstore %[[H]][%[[R]], %[[C]]], %[[M]], %[[HV]]
func.func @expert_ffn_grad(%rows: tensor<16x16xf32>, %off: tensor<5xi32>, %drows: tensor<16x16xf32>,
                           %w1: tensor<4x16x64xf32>, %w2: tensor<4x32x16xf32>)
    -> (tensor<16x16xf32>, tensor<4x16x64xf32>, tensor<4x32x16xf32>) {
  %g:3 = moe.expert_ffn_grad %rows, %off, %drows experts(%w1, %w2)
      {activation = #moe.activation<swiglu>}
      : (tensor<16x16xf32>, tensor<5xi32>, tensor<16x16xf32>, tensor<4x16x64xf32>, tensor<4x32x16xf32>)
      -> (tensor<16x16xf32>, tensor<4x16x64xf32>, tensor<4x32x16xf32>)
  return %g#0, %g#1, %g#2 : tensor<16x16xf32>, tensor<4x16x64xf32>, tensor<4x32x16xf32>
}
