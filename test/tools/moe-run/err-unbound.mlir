// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-npy write %t/x.npy f32 2x4 1
// RUN: %expect_error moe-run %s --device=cpu --input=%t/x.npy | FileCheck %s

// CHECK: moe-run: argument #1 (%arg1) of @forward, parameter 'router.weight', is not bound: pass --params=FILE.safetensors or --fill-random

func.func @forward(%x: tensor<2x4xf32>,
                   %wr: tensor<4x8xf32> {moe.param = "router.weight"}) -> tensor<2x4xf32> {
  return %x : tensor<2x4xf32>
}
