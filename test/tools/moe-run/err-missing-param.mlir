// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-npy write %t/w.npy f32 4x8 1
// RUN: moe-npy pack %t/p.safetensors router.weight=%t/w.npy
// RUN: moe-npy write %t/x.npy f32 2x4 1
// RUN: %expect_error moe-run %s --device=cpu --input=%t/x.npy --params=%t/p.safetensors \
// RUN:   | FileCheck %s
//
// With --fill-random the missing parameter gets random values instead.
// RUN: moe-run %s --device=cpu --input=%t/x.npy --params=%t/p.safetensors --fill-random \
// RUN:   | FileCheck %s --check-prefix=FILL

// CHECK: moe-run: parameter 'router.bias' (argument #2) not found in {{.*}}p.safetensors
// FILL: result #0: tensor<2x4xf32>

func.func @forward(%x: tensor<2x4xf32>,
                   %wr: tensor<4x8xf32> {moe.param = "router.weight"},
                   %br: tensor<8xf32> {moe.param = "router.bias"}) -> tensor<2x4xf32> {
  return %x : tensor<2x4xf32>
}
