// Outputs are written to a temporary file in the same folder and renamed:
// a failed write (here: past the file size limit) keeps the existing file
// and leaves no temporary behind; a successful one replaces it.
// RUN: rm -rf %t && mkdir -p %t && echo keep > %t/y.npy
// RUN: (ulimit -f 8; %expect_error moe-run %s --device=cpu --fill-random --output=%t/y.npy) | FileCheck %s
// RUN: echo keep | cmp - %t/y.npy
// RUN: ls -A %t | FileCheck %s --check-prefix=LS --implicit-check-not=tmp
// RUN: moe-run %s --device=cpu --fill-random --output=%t/y.npy
// RUN: echo keep | not cmp - %t/y.npy

// CHECK: moe-run: --output {{.*}}y.npy: cannot write: File too large
// LS: y.npy

func.func @f(%x: tensor<8192xf32>) -> tensor<8192xf32> {
  return %x : tensor<8192xf32>
}
