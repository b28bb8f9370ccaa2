// RUN: rm -rf %t && mkdir -p %t
// RUN: moe-npy write %t/x.npy f32 4 1
// RUN: %expect_error moe-run %s --device=cpu --input=%t/nonexistent.npy --fill-random \
// RUN:   | FileCheck %s --check-prefix=NPY
// RUN: %expect_error moe-run %s --device=cpu --input=%t/x.npy --params=%t/nonexistent.safetensors \
// RUN:   | FileCheck %s --check-prefix=ST
// RUN: %expect_error moe-run %t/nonexistent.mlir --device=cpu | FileCheck %s --check-prefix=MLIR
// RUN: %expect_error moe-run %s --device=cpu --input=%t --params=%t/x.npy \
// RUN:   | FileCheck %s --check-prefix=DIR

// NPY: moe-run: {{.*}}nonexistent.npy: cannot open: No such file or directory
// ST: moe-run: {{.*}}nonexistent.safetensors: cannot open: No such file or directory
// MLIR: moe-run: cannot open input file '{{.*}}nonexistent.mlir': No such file or directory
// DIR: moe-run: --input {{.*}}.tmp is a directory; expected a regular file

func.func @forward(%x: tensor<4xf32>, %w: tensor<4xf32> {moe.param = "w"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
