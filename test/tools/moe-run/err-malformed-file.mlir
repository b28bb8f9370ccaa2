// RUN: rm -rf %t && mkdir -p %t
// RUN: printf 'garbage' > %t/magic.npy
// RUN: %expect_error moe-run %s --device=cpu --input=%t/magic.npy --fill-random | FileCheck %s --check-prefix=MAGIC
//
// A valid header whose data is cut short.
// RUN: moe-npy write %t/x.npy f32 16 1
// RUN: head -c 100 %t/x.npy > %t/short.npy
// RUN: %expect_error moe-run %s --device=cpu --input=%t/short.npy --fill-random | FileCheck %s --check-prefix=SHORT
//
// RUN: printf 'xxxxxxxxxxxxxxxx' > %t/bad.safetensors
// RUN: %expect_error moe-run %s --device=cpu --input=%t/x.npy --params=%t/bad.safetensors \
// RUN:   | FileCheck %s --check-prefix=ST

// MAGIC: moe-run: {{.*}}magic.npy: {{.+}}
// SHORT: moe-run: {{.*}}short.npy: {{.+}}
// ST: moe-run: {{.*}}bad.safetensors: {{.+}}

func.func @forward(%x: tensor<16xf32>, %w: tensor<4xf32> {moe.param = "w"}) -> tensor<16xf32> {
  return %x : tensor<16xf32>
}
