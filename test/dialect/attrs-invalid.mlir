// RUN: moe-opt %s -split-input-file -verify-diagnostics
//
// Parse and verification errors of the moe attributes.

// expected-error @+1 {{#moe.top_k needs k >= 1, got k = 0}}
func.func private @top_k_zero() attributes {r = #moe.top_k<k = 0>}

// -----

// expected-error @+1 {{#moe.moesart needs k >= 1, got k = -1}}
func.func private @moesart_negative_k() attributes {r = #moe.moesart<k = -1>}

// -----

// expected-error @+1 {{#moe.moesart needs a finite trimmed_lasso >= 0, got -1.000000e-03}}
func.func private @negative_lasso() attributes {r = #moe.moesart<k = 2, trimmed_lasso = -1.0e-3>}

// -----

// expected-error @+2 {{expected valid keyword}}
// expected-error @+1 {{expected a parameter name in struct}}
func.func private @top_k_missing_k() attributes {r = #moe.top_k<>}

// -----

// expected-error @+2 {{expected one of [small_random, zero, large] for MOESART training-mode weight adjustment, got: medium}}
// expected-error @+1 {{failed to parse MoE_MoesartRoutingAttr parameter 'adjust' which is to be a `::mlir::moe::MoesartAdjust`}}
func.func private @unknown_adjust() attributes {r = #moe.moesart<k = 2, adjust = medium>}

// -----

// expected-error @+2 {{expected ::mlir::moe::Activation to be one of: gelu, gelu_tanh, relu, silu, swiglu, geglu}}
// expected-error @+1 {{failed to parse MoE_ActivationAttr parameter 'value' which is to be a `::mlir::moe::Activation`}}
func.func private @unknown_activation() attributes {a = #moe.activation<tanh>}

// -----

// expected-error @+1 {{unknown attribute `expert_choice` in dialect `moe`}}
func.func private @unknown_routing() attributes {r = #moe.expert_choice<k = 2>}

// -----

// expected-error @+1 {{struct is missing required parameter: k}}
func.func private @moesart_missing_k() attributes {r = #moe.moesart<adjust = zero>}

// -----

// expected-error @+1 {{duplicate or unknown struct parameter name: kk}}
func.func private @unknown_param() attributes {r = #moe.top_k<kk = 2>}

// -----

// expected-error @+2 {{expected floating point literal}}
// expected-error @+1 {{failed to parse MoE_MoesartRoutingAttr parameter 'trimmed_lasso' which is to be a `::llvm::APFloat`}}
func.func private @lasso_not_a_number() attributes {r = #moe.moesart<k = 2, trimmed_lasso = "big">}

// -----

// expected-error @+3 {{unexpected decimal integer literal for a floating point value}}
// expected-note @+2 {{add a trailing dot to make the literal a float}}
// expected-error @+1 {{failed to parse MoE_MoesartRoutingAttr parameter 'trimmed_lasso'}}
func.func private @lasso_integer() attributes {r = #moe.moesart<k = 2, trimmed_lasso = 1>}

// -----

// expected-error @+1 {{#moe.top_k needs a finite scale > 0, got 0}}
func.func private @top_k_zero_scale() attributes {r = #moe.top_k<k = 2, scale = 0.0>}

// -----

// expected-error @+1 {{#moe.top_k needs groups >= 1, got groups = 0}}
func.func private @top_k_zero_groups() attributes {r = #moe.top_k<k = 2, groups = 0>}

// -----

// expected-error @+1 {{#moe.top_k needs 1 <= group_k <= groups (2), got group_k = 3}}
func.func private @top_k_group_k_too_large() attributes {r = #moe.top_k<k = 2, groups = 2, group_k = 3>}

// -----

// expected-error @+2 {{expected one of [softmax, sigmoid] for the per-expert score of #moe.top_k, got: tanh}}
// expected-error @+1 {{failed to parse MoE_TopKRoutingAttr parameter 'score' which is to be a `::mlir::moe::RouterScore`}}
func.func private @top_k_unknown_score() attributes {r = #moe.top_k<k = 2, score = tanh>}
