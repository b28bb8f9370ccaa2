// RUN: moe-opt %s --moe-cpu-configure=cpu=skylake-avx512 | FileCheck %s --check-prefixes=CHECK,AVX512
// RUN: moe-opt %s --moe-cpu-configure=cpu=sapphirerapids | FileCheck %s --check-prefixes=CHECK,AMX
// RUN: moe-opt %s --moe-cpu-configure="cpu=sapphirerapids features=-amx-tile" | FileCheck %s --check-prefixes=CHECK,FP8DOT
// AVX512_BF16 and AVX512_VBMI: FP8 on the dot product (fp8_dot); either
// one missing: not. AVX512_VNNI (or AVX2 at 256 bits): the int8-activation
// mode on the integer dot product (int8_dot); skylake-avx512 has no VNNI.
// RUN: moe-opt %s --moe-cpu-configure=cpu=znver4 | FileCheck %s --check-prefixes=CHECK,FP8DOT
// RUN: moe-opt %s --moe-cpu-configure="cpu=znver4 features=-avx512vbmi" | FileCheck %s --check-prefixes=CHECK,BF16VNNI
// RUN: moe-opt %s --moe-cpu-configure=cpu=cooperlake | FileCheck %s --check-prefixes=CHECK,BF16VNNI
// RUN: moe-opt %s --moe-cpu-configure=cpu=icelake-server | FileCheck %s --check-prefixes=CHECK,AVX512VNNI
// RUN: moe-opt %s --moe-cpu-configure=cpu=znver3 | FileCheck %s --check-prefixes=CHECK,AVX2
// RUN: moe-opt %s --moe-cpu-configure=cpu=haswell | FileCheck %s --check-prefixes=CHECK,AVX2
// RUN: moe-opt %s --moe-cpu-configure=cpu=x86-64-v3 | FileCheck %s --check-prefixes=CHECK,AVX2
// AVX-VNNI without AVX-512 (Alder Lake): vpdpbusd at 256 bits.
// RUN: moe-opt %s --moe-cpu-configure=cpu=alderlake | FileCheck %s --check-prefixes=CHECK,AVX2VNNI
// RUN: moe-opt %s --moe-cpu-configure=cpu=x86-64 | FileCheck %s --check-prefixes=CHECK,SSE
// Removing a feature removes those that imply it: an AVX-512 CPU without
// avx512f is configured as an AVX2 one; without fma, as a 128-bit one.
// RUN: moe-opt %s --moe-cpu-configure="cpu=sapphirerapids features=-avx512f" | FileCheck %s --check-prefixes=CHECK,AVX2VNNI
// RUN: moe-opt %s --moe-cpu-configure="cpu=haswell features=-fma" | FileCheck %s --check-prefixes=CHECK,SSE
// RUN: moe-opt %s --moe-cpu-configure="cpu=haswell features=+avx512bf16" | FileCheck %s --check-prefixes=CHECK,BF16
// RUN: moe-opt %s --moe-cpu-configure="cpu=skylake-avx512 features=+avx512bf16" | FileCheck %s --check-prefixes=CHECK,BF16
// The host: some configuration, on every op that takes one.
// RUN: moe-opt %s --moe-cpu-configure | FileCheck %s --check-prefixes=CHECK,NATIVE
// The CPU pipeline runs the pass first, with its cpu / cpu-features options.
// RUN: moe-opt %s --moe-cpu-pipeline="cpu=haswell" --dump-pass-pipeline -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PIPE
// Bad options: one error each, exit code 1.
// RUN: not moe-opt %s --moe-cpu-configure=cpu=pentium9 2>&1 | FileCheck %s --check-prefix=BADCPU
// RUN: not moe-opt %s --moe-cpu-configure="cpu=haswell features=avx2" 2>&1 | FileCheck %s --check-prefix=BADSIGN
// RUN: not moe-opt %s --moe-cpu-configure="cpu=haswell features=+avx9000" 2>&1 | FileCheck %s --check-prefix=BADFEAT


// PIPE:      moe-cpu-decompose-aggregates
// PIPE-NEXT: ),
// PIPE-NEXT: moe-cpu-configure{cpu=haswell features=},
// PIPE-NEXT: convert-moe-to-cpu{

// BADCPU: error: moe-cpu-configure: cpu=pentium9 is not an x86 CPU LLVM knows (e.g. skylake-avx512, znver3, haswell, x86-64-v3) nor native
// BADSIGN: error: moe-cpu-configure: features=avx2: 'avx2' is not +NAME or -NAME
// BADFEAT: error: moe-cpu-configure: features=+avx9000: 'avx9000' is not an x86 feature LLVM knows

// Every op whose CPU lowering emits grouped GEMMs gets the configuration;
// the gate, dispatch and combine do not; a configuration already there is
// kept (the user's override).
// CHECK-LABEL: func.func @chain
// AVX512: moe.route {{.*}} {moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = false>}
// AVX512VNNI: moe.route {{.*}} {moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = false, int8_dot = vpdpbusd>}
// BF16: moe.route {{.*}} {moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = true>}
// BF16VNNI: moe.route {{.*}} {moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = true, int8_dot = vpdpbusd>}
// FP8DOT: moe.route {{.*}} {moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = true, fp8_dot = true, int8_dot = vpdpbusd>}
// AMX: moe.route {{.*}} {moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = true, amx = true, fp8_dot = true, int8_dot = vpdpbusd>}
// AVX2: moe.route {{.*}} {moe.cpu_config = #moe.cpu_config<vector_bits = 256, registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 128, bf16_dot = false, int8_dot = vpmaddubsw>}
// AVX2VNNI: moe.route {{.*}} {moe.cpu_config = #moe.cpu_config<vector_bits = 256, registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 128, bf16_dot = false, int8_dot = vpdpbusd>}
// SSE: moe.route {{.*}} {moe.cpu_config = #moe.cpu_config<vector_bits = 128, registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 128, bf16_dot = false>}
// NATIVE: moe.route {{.*}} {moe.cpu_config = #moe.cpu_config<vector_bits =
// CHECK-NEXT: moe.gate
// CHECK-NOT: moe.cpu_config
// CHECK-NEXT: moe.dispatch
// CHECK-NOT: moe.cpu_config
// CHECK-NEXT: moe.expert_ffn {{.*}} {activation = #moe.activation<gelu>, moe.cpu_config = #moe.cpu_config<vector_bits = 128, registers = 16, micro_rows = 4, micro_vectors = 2, row_block = 8, col_block = 64, prefetch_rows = 0, bf16_dot = false>}
// CHECK-NEXT: moe.combine
// CHECK-NOT: moe.cpu_config
// CHECK-NEXT: return
// CHECK-LABEL: func.func @layers
// AVX512: moe.layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = false>
// AVX512VNNI: moe.layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = false, int8_dot = vpdpbusd>
// AVX512-NEXT: moe.soft_layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = false>
// AVX512VNNI-NEXT: moe.soft_layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = false, int8_dot = vpdpbusd>
// BF16: moe.layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = true>
// BF16VNNI: moe.layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = true, int8_dot = vpdpbusd>
// FP8DOT: moe.layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = true, fp8_dot = true, int8_dot = vpdpbusd>
// AMX: moe.layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = true, amx = true, fp8_dot = true, int8_dot = vpdpbusd>
// BF16-NEXT: moe.soft_layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = true>
// BF16VNNI-NEXT: moe.soft_layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = true, int8_dot = vpdpbusd>
// FP8DOT-NEXT: moe.soft_layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = true, fp8_dot = true, int8_dot = vpdpbusd>
// AMX-NEXT: moe.soft_layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6, micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32, bf16_dot = true, amx = true, fp8_dot = true, int8_dot = vpdpbusd>
// AVX2: moe.layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits = 256, registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 128, bf16_dot = false, int8_dot = vpmaddubsw>
// AVX2VNNI: moe.layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits = 256, registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 128, bf16_dot = false, int8_dot = vpdpbusd>
// AVX2-NEXT: moe.soft_layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits = 256, registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 128, bf16_dot = false, int8_dot = vpmaddubsw>
// AVX2VNNI-NEXT: moe.soft_layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits = 256, registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 128, bf16_dot = false, int8_dot = vpdpbusd>
// SSE: moe.layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits = 128, registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 128, bf16_dot = false>
// SSE-NEXT: moe.soft_layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits = 128, registers = 16, micro_rows = 6, micro_vectors = 2, row_block = 48, col_block = 256, prefetch_rows = 128, bf16_dot = false>
// NATIVE: moe.layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits =
// NATIVE-NEXT: moe.soft_layer {{.*}} moe.cpu_config = #moe.cpu_config<vector_bits =
func.func @chain(%x: tensor<16x64xf32>, %wr: tensor<64x8xf32>, %w1: tensor<8x64x128xf32>,
                 %w2: tensor<8x128x64xf32>) -> tensor<16x64xf32> {
  %o = moe.route %x router(%wr) : (tensor<16x64xf32>, tensor<64x8xf32>) -> tensor<16x8xf32>
  %w, %i = moe.gate %o {routing = #moe.top_k<k = 2>} : (tensor<16x8xf32>) -> (tensor<16x2xf32>, tensor<16x2xi32>)
  %rows, %offsets, %src, %pos = moe.dispatch %x, %i {num_experts = 8 : i64}
      : (tensor<16x64xf32>, tensor<16x2xi32>) -> (tensor<32x64xf32>, tensor<9xi32>, tensor<32xi32>, tensor<16x2xi32>)
  %out = moe.expert_ffn %rows, %offsets experts(%w1, %w2) {activation = #moe.activation<gelu>,
      moe.cpu_config = #moe.cpu_config<vector_bits = 128, registers = 16, micro_rows = 4,
        micro_vectors = 2, row_block = 8, col_block = 64, prefetch_rows = 0, bf16_dot = false>}
      : (tensor<32x64xf32>, tensor<9xi32>, tensor<8x64x128xf32>, tensor<8x128x64xf32>) -> tensor<32x64xf32>
  %y = moe.combine %out, %w, %pos : (tensor<32x64xf32>, tensor<16x2xf32>, tensor<16x2xi32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

func.func @layers(%x: tensor<16x64xf32>, %wr: tensor<64x8xf32>, %w1: tensor<8x64x128xf32>,
                  %w2: tensor<8x128x64xf32>, %xs: tensor<2x8x64xf32>,
                  %phi: tensor<64x8x1xf32>) -> (tensor<16x64xf32>, tensor<2x8x64xf32>) {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) {
      routing = #moe.top_k<k = 2>, activation = #moe.activation<gelu>}
      : (tensor<16x64xf32>, tensor<64x8xf32>, tensor<8x64x128xf32>, tensor<8x128x64xf32>)
      -> tensor<16x64xf32>
  %ys = moe.soft_layer %xs slots(%phi) experts(%w1, %w2) {activation = #moe.activation<gelu>}
      : (tensor<2x8x64xf32>, tensor<64x8x1xf32>, tensor<8x64x128xf32>, tensor<8x128x64xf32>)
      -> tensor<2x8x64xf32>
  return %y, %ys : tensor<16x64xf32>, tensor<2x8x64xf32>
}
