// Options of --convert-moe-to-cpu: pack-weights=false reads the weights
// where they are (masked loads, no globals); run as a function pass (it may
// not add module symbols then) the kernels are inline and nothing is packed.
//
// RUN: moe-opt %s --convert-moe-to-cpu=pack-weights=false | FileCheck %s --check-prefix=NOPACK
// RUN: moe-opt %s --pass-pipeline='builtin.module(func.func(convert-moe-to-cpu))' \
// RUN:   | FileCheck %s --check-prefix=NESTED
// RUN: moe-opt %s --convert-moe-to-cpu | FileCheck %s --check-prefix=PACK
// The AVX2 configuration (--moe-cpu-configure=cpu=haswell): 16-column panels,
// 6 x 2 vectors of 8 lanes, and a short row tail in a 4-row tile.
// RUN: moe-opt %s --moe-cpu-configure=cpu=haswell --convert-moe-to-cpu | FileCheck %s --check-prefix=AVX2

// NOPACK-NOT: memref.global
// NOPACK-LABEL: func.func @layer
// NOPACK-NOT: memref.get_global
// NOPACK: call @[[G1:__moe_cpu_gemm1_silu_gather_v512_6x4_b48x256_p32_[0-9A-F]+]](
// NOPACK: func.func private @[[G1]](
// NOPACK: vector.maskedload %arg1

// NESTED-NOT: memref.global
// NESTED-LABEL: func.func @layer
// NESTED-NOT: call
// NESTED: scf.parallel
// NESTED: vector.fma
// NESTED-NOT: func.func private

// PACK-COUNT-4: memref.global "private" @__moe_cpu_packed_weights
// PACK-LABEL: func.func @layer
// PACK: call @__moe_cpu_gemm1_silu_gather_packed_

// AVX2-DAG: memref.global "private" @{{.*}} : memref<4x3x16x16xf32> = uninitialized
// AVX2-DAG: memref.global "private" @{{.*}} : memref<4x1x40x16xf32> = uninitialized
// AVX2-LABEL: func.func @layer
// AVX2: call @[[G1:__moe_cpu_gemm1_silu_gather_packed_v256_6x2_b48x256_p128_[0-9A-F]+]](
// AVX2: func.func private @[[G1]](
// AVX2: scf.for %{{.*}} step %c16
// A row tail of 1 to 4 rows runs in the 4-row tile, anything else in 6-row tiles.
// AVX2: %[[TAIL:.*]] = arith.remsi %{{.*}}, %c6
// AVX2: arith.cmpi sle, %[[TAIL]], %c4 : index
// AVX2: %[[SMALL:.*]] = arith.andi
// AVX2: scf.for %{{.*}} step %c6
// AVX2: scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// AVX2-COUNT-12: vector.fma {{.*}} : vector<8xf32>
// AVX2: scf.if %[[SMALL]] {
// AVX2: scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>) {
// AVX2-COUNT-8: vector.fma {{.*}} : vector<8xf32>
// AVX2-NOT: vector<16xf32>
func.func @layer(%x: tensor<?x16xf32>, %wr: tensor<16x4xf32>, %w1: tensor<4x16x40xf32>, %w2: tensor<4x40x16xf32>) -> tensor<?x16xf32> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {routing = #moe.top_k<k = 2>, activation = #moe.activation<silu>}
         : (tensor<?x16xf32>, tensor<16x4xf32>, tensor<4x16x40xf32>, tensor<4x40x16xf32>) -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}
