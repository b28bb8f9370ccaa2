// RUN: moe-opt %s | FileCheck %s
// RUN: moe-opt %s | moe-opt | FileCheck %s
// RUN: moe-opt %s --mlir-print-op-generic | moe-opt | FileCheck %s
//
// Parsing and printing of the moe attributes, with and without defaults.

// CHECK-LABEL: func.func private @routings()
// CHECK-SAME: dense = #moe.dense
// CHECK-SAME: moesart_all_defaults = #moe.moesart<k = 2>
// CHECK-SAME: moesart_explicit_defaults = #moe.moesart<k = 2>
// CHECK-SAME: moesart_large = #moe.moesart<k = 3, adjust = large>
// CHECK-SAME: moesart_lasso = #moe.moesart<k = 4, trimmed_lasso = 1.000000e-02>
// CHECK-SAME: moesart_reordered = #moe.moesart<k = 2, adjust = zero, trimmed_lasso = 5.000000e-01>
// CHECK-SAME: moesart_zero_lasso = #moe.moesart<k = 1, trimmed_lasso = 0.000000e+00>
// CHECK-SAME: top_k = #moe.top_k<k = 2>
func.func private @routings() attributes {
  dense = #moe.dense,
  top_k = #moe.top_k<k = 2>,
  moesart_all_defaults = #moe.moesart<k = 2>,
  moesart_explicit_defaults = #moe.moesart<k = 2, adjust = small_random, trimmed_lasso = 1.0e-3>,
  moesart_large = #moe.moesart<k = 3, adjust = large>,
  moesart_lasso = #moe.moesart<k = 4, trimmed_lasso = 0.01>,
  moesart_reordered = #moe.moesart<trimmed_lasso = 0.5, adjust = zero, k = 2>,
  moesart_zero_lasso = #moe.moesart<k = 1, trimmed_lasso = 0.0>
}

// CHECK-LABEL: func.func private @activations()
// CHECK-SAME: a0 = #moe.activation<gelu>
// CHECK-SAME: a1 = #moe.activation<gelu_tanh>
// CHECK-SAME: a2 = #moe.activation<relu>
// CHECK-SAME: a3 = #moe.activation<silu>
// CHECK-SAME: a4 = #moe.activation<swiglu>
// CHECK-SAME: a5 = #moe.activation<geglu>
func.func private @activations() attributes {
  a0 = #moe.activation<gelu>, a1 = #moe.activation<gelu_tanh>,
  a2 = #moe.activation<relu>, a3 = #moe.activation<silu>,
  a4 = #moe.activation<swiglu>, a5 = #moe.activation<geglu>
}
