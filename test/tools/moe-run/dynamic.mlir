// RUN: rm -rf %t && mkdir -p %t
//
// A dynamic dimension takes its size from the .npy (3 rows here).
// RUN: moe-npy write %t/a.npy f32 3x4 1 2 3 4 5 6 7 8 9 10 11 12
// RUN: moe-npy write %t/b.npy f32 3x4 1
// RUN: moe-run %s --device=cpu --entry=add --input=%t/a.npy --input=%t/b.npy \
// RUN:   --output=%t/sum.npy | FileCheck %s --check-prefix=NPY
// RUN: moe-npy print %t/sum.npy | FileCheck %s --check-prefix=NPY-OUT
//
// With --fill-random a dynamic dimension gets --dynamic-size (default 16).
// RUN: moe-run %s --device=cpu --entry=add --fill-random | FileCheck %s --check-prefix=DEFAULT
// RUN: moe-run %s --device=cpu --entry=add --fill-random --dynamic-size=1 \
// RUN:   | FileCheck %s --check-prefix=ONE
// RUN: moe-run %s --device=cpu --entry=add --fill-random --dynamic-size=37 \
// RUN:   --repeat=2 --timing | FileCheck %s --check-prefix=BIG
//
// The same dynamic value returned twice: two results, one buffer freed once.
// RUN: moe-run %s --device=cpu --entry=twice --input=%t/a.npy \
// RUN:   --output=%t/t0.npy --output=%t/t1.npy --repeat=3 | FileCheck %s --check-prefix=TWICE
// RUN: cmp %t/t0.npy %t/t1.npy
//
// An argument returned unchanged (beside a static result and twice): the
// caller's input buffer is not freed, and stays intact across runs.
// RUN: moe-run %s --device=cpu --entry=identity --input=%t/a.npy --input=%t/b.npy \
// RUN:   --output=%t/i0.npy --output=%t/i1.npy --output=%t/i2.npy --repeat=3 \
// RUN:   | FileCheck %s --check-prefix=IDENT
// RUN: cmp %t/a.npy %t/i0.npy
// RUN: cmp %t/a.npy %t/i2.npy
//
// A strided view of an argument comes back as its own row-major copy.
// RUN: moe-run %s --device=cpu --entry=columns --input=%t/a.npy --output=%t/c.npy \
// RUN:   | FileCheck %s --check-prefix=COLS
// RUN: moe-npy print %t/c.npy | FileCheck %s --check-prefix=COLS-OUT
//
// Zero rows.
// RUN: moe-npy write %t/empty.npy f32 0x4
// RUN: moe-run %s --device=cpu --entry=twice --input=%t/empty.npy | FileCheck %s --check-prefix=EMPTY

// NPY: result #0: tensor<3x4xf32> checksum: sum=9.000000e+01 abs_sum=9.000000e+01
// NPY-NOT: result #1
// NPY-OUT: f32 [3, 4]: 2 3 4 5 6 7 8 9 10 11 12 13
// DEFAULT: result #0: tensor<16x4xf32> checksum:
// ONE: result #0: tensor<1x4xf32> checksum:
// BIG-LABEL: result #0: tensor<37x4xf32> checksum:
// BIG-NEXT: compile-ms: {{[0-9]+\.[0-9][0-9][0-9]$}}
// BIG-NEXT: median-ms: {{[0-9]+\.[0-9][0-9][0-9]$}}
// TWICE-LABEL: result #0: tensor<3x8xf32> checksum: sum=1.560000e+02 abs_sum=1.560000e+02
// TWICE-NEXT: result #1: tensor<3x8xf32> checksum: sum=1.560000e+02 abs_sum=1.560000e+02
// TWICE-NEXT: median-ms:
// IDENT-LABEL: result #0: tensor<3x4xf32> checksum: sum=7.800000e+01 abs_sum=7.800000e+01
// IDENT-NEXT: result #1: tensor<4xf32> checksum: sum=4.000000e+00 abs_sum=4.000000e+00
// IDENT-NEXT: result #2: tensor<3x4xf32> checksum: sum=7.800000e+01 abs_sum=7.800000e+01
// COLS: result #0: tensor<3x2xf32> checksum: sum=4.200000e+01 abs_sum=4.200000e+01
// COLS-OUT: f32 [3, 2]: 2 4 6 8 10 12
// EMPTY: result #0: tensor<0x8xf32> checksum: sum=0.000000e+00 abs_sum=0.000000e+00

func.func @add(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %c = arith.addf %a, %b : tensor<?x4xf32>
  return %c : tensor<?x4xf32>
}

// y = concat(a, a) along the columns, returned twice.
func.func @twice(%a: tensor<?x4xf32>) -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%n) : tensor<?x8xf32>
  %l = tensor.insert_slice %a into %e[0, 0] [%n, 4] [1, 1] : tensor<?x4xf32> into tensor<?x8xf32>
  %y = tensor.insert_slice %a into %l[0, 4] [%n, 4] [1, 1] : tensor<?x4xf32> into tensor<?x8xf32>
  return %y, %y : tensor<?x8xf32>, tensor<?x8xf32>
}

func.func @identity(%a: tensor<?x4xf32>, %s: tensor<?x4xf32>)
    -> (tensor<?x4xf32>, tensor<4xf32>, tensor<?x4xf32>) {
  %c0 = arith.constant 0 : index
  %row = tensor.extract_slice %s[0, 0] [1, 4] [1, 1] : tensor<?x4xf32> to tensor<4xf32>
  return %a, %row, %a : tensor<?x4xf32>, tensor<4xf32>, tensor<?x4xf32>
}

// Columns 1 and 3.
func.func @columns(%a: tensor<?x4xf32>) -> tensor<?x2xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?x4xf32>
  %s = tensor.extract_slice %a[0, 1] [%n, 2] [1, 2] : tensor<?x4xf32> to tensor<?x2xf32>
  return %s : tensor<?x2xf32>
}
