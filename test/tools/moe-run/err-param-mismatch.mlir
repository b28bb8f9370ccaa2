// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-npy write %t/w.npy f32 8x4 1
// RUN: moe-npy write %t/b.npy f32 8 1
// RUN: moe-npy write %t/i.npy i32 8 1
// RUN: moe-npy write %t/x.npy f32 2x4 1
// RUN: moe-npy pack %t/shape.safetensors router.weight=%t/w.npy router.bias=%t/b.npy
// RUN: %expect_error moe-run %s --device=cpu --input=%t/x.npy --params=%t/shape.safetensors \
// RUN:   | FileCheck %s --check-prefix=SHAPE
// RUN: moe-npy write %t/w.npy f32 4x8 1
// RUN: moe-npy pack %t/dtype.safetensors router.weight=%t/w.npy router.bias=%t/i.npy
// RUN: %expect_error moe-run %s --device=cpu --input=%t/x.npy --params=%t/dtype.safetensors \
// RUN:   | FileCheck %s --check-prefix=DTYPE

// SHAPE: moe-run: parameter 'router.weight' (argument #1, %arg1) in {{.*}}shape.safetensors: expected tensor<4x8xf32>, got F32 [8, 4]
// DTYPE: moe-run: parameter 'router.bias' (argument #2, %arg2) in {{.*}}dtype.safetensors: expected tensor<8xf32>, got I32 [8]

func.func @forward(%x: tensor<2x4xf32>,
                   %wr: tensor<4x8xf32> {moe.param = "router.weight"},
                   %br: tensor<8xf32> {moe.param = "router.bias"}) -> tensor<2x4xf32> {
  return %x : tensor<2x4xf32>
}
