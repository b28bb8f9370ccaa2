// --output never names an input or another output (it would be overwritten
// or lose a result) and is a regular file; checked before anything runs.
// RUN: rm -rf %t && mkdir -p %t/ckpt && cp %s %t/f.mlir
// RUN: moe-npy write %t/x.npy f32 4 1
// RUN: %expect_error moe-run %t/f.mlir --device=cpu --fill-random --output=%t/f.mlir --output=%t/b.npy | FileCheck %s --check-prefix=MLIR
// RUN: %expect_error moe-run %t/f.mlir --device=cpu --input=%t/x.npy --fill-random --output=%t/../%basename_t.tmp/x.npy --output=%t/b.npy | FileCheck %s --check-prefix=INPUT
// RUN: %expect_error moe-run %t/f.mlir --device=cpu --fill-random --params=%t/ckpt --output=%t/ckpt/y.npy --output=%t/b.npy | FileCheck %s --check-prefix=PARAMS
// RUN: %expect_error moe-run %t/f.mlir --device=cpu --fill-random --output=%t/a.npy --output=%t/./a.npy | FileCheck %s --check-prefix=TWICE
// RUN: %expect_error moe-run %t/f.mlir --device=cpu --fill-random --output=%t --output=%t/b.npy | FileCheck %s --check-prefix=DIR
// RUN: cmp %s %t/f.mlir
// RUN: not ls %t/a.npy %t/b.npy

// MLIR: moe-run: --output {{.*}}f.mlir is the input {{.*}}f.mlir; it would be overwritten
// INPUT: moe-run: --output {{.*}}x.npy is the --input {{.*}}x.npy; it would be overwritten
// PARAMS: moe-run: --output {{.*}}ckpt/y.npy is inside the --params directory {{.*}}ckpt; write results elsewhere
// TWICE: moe-run: --output {{.*}}/./a.npy is also --output #0 ({{.*}}a.npy); give each result its own file
// DIR: moe-run: --output {{.*}} is a directory; --output writes a regular file

func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %y = arith.addf %x, %x : tensor<4xf32>
  return %x, %y : tensor<4xf32>, tensor<4xf32>
}
