// --convert-moe-to-linalg, the former name of --convert-moe-to-cpu, is a
// deprecated alias for one release: the same pass with the same options
// (the same output), plus one warning line on stderr; a bad option is still
// one error.
// RUN: moe-opt %s --convert-moe-to-cpu="check-indices=false" -o %t.new
// RUN: moe-opt %s --convert-moe-to-linalg="check-indices=false" -o %t.old 2> %t.err
// RUN: cmp %t.new %t.old
// RUN: FileCheck %s --input-file=%t.err
// RUN: not moe-opt %s --convert-moe-to-linalg="pack-weights=maybe" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD
// The option changes the output as it does for the new name.
// RUN: moe-opt %s --convert-moe-to-linalg -o %t.checked 2> /dev/null
// RUN: not cmp -s %t.new %t.checked

// CHECK: warning: --convert-moe-to-linalg is deprecated; use --convert-moe-to-cpu (the same pass and options)
// CHECK-NOT: {{.}}
// BAD: pack-weights
// BAD-NOT: warning

func.func @ffn(%rows: tensor<8x16xf32>, %off: tensor<5xi32>, %w1: tensor<4x16x32xf32>,
               %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %y = moe.expert_ffn %rows, %off experts(%w1, %w2) {activation = #moe.activation<relu>}
         : (tensor<8x16xf32>, tensor<5xi32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
