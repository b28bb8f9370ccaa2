//===- MoEReferenceGrad.h - Reverse mode of the reference -------*- C++ -*-===//
//
// Hand-derived vector-Jacobian products (VJPs) of moeLayer and softMoELayer
// (MoEReference.h), in double, written with plain loops and no MLIR: the
// reference for the gradients that --moe-generate-vjp makes (the design's
// reverse-mode contract, "Training: gradients").
//
// What is differentiated: the exact derivative of the forward of
// docs/spec.md §3 with its discrete choices held fixed (LayerDecisions):
// the chosen sets S_t (dense, top-k, groups, MOESART's sampled set),
// small_random's unadjusted index j, the capacity drops (a dropped
// assignment passes no gradient, though its weight still enters the
// normalization of the others) and the K largest g_t of the trimmed lasso.
// In particular:
//   - MOESART: w depends on o directly and through g = softmax(o); the
//     log g term of the adjusted logits is not detached;
//   - the trimmed lasso lambda mean_t(1 - sum of the K largest g_t) sends
//     -lambda dAux / T to each of those g, then through the softmax;
//   - #moe.top_k: through s (softmax or sigmoid) of the chosen experts, the
//     normalization and the scale; the selection bias only chooses: its
//     gradient is exactly 0;
//   - relu'(0) = 0; gelu is the erf form's derivative, gelu_tanh its own;
//   - b2[e] is weighted like the expert's output: d b2[e] = sum_t w_t,e dy_t;
//   - an expert that receives no token (or whose assignments all dropped)
//     gets gradients that are exactly 0.
//
// Element types: for T = bf16/f16 the inputs must be values of T (as made by
// randomLayerInputs; the VJPs do not round them). The derivative is computed
// in double from those values with the forward's rounding points (h, the
// Soft MoE slots, y) taken as the identity; the values flowing on are the
// forward's rounded ones (h in dW2, the slots in the experts' backward).
//
// Layout: every gradient is a row-major std::vector<double> in the shape of
// its operand (MoEReference.h); it is empty where the operand is absent.
//
// Errors in the inputs print one line to stderr and abort(), as in
// MoEReference.h.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TEST_REFERENCE_MOEREFERENCEGRAD_H
#define MOE_TEST_REFERENCE_MOEREFERENCEGRAD_H

#include "test/reference/MoEReference.h"

#include <vector>

namespace moe {
namespace ref {

/// act'(v) of the element-wise activation (for the gated ones: of their gate
/// half, silu / gelu (erf)). relu'(0) = 0.
double activationDerivative(Activation act, double v);

//===----------------------------------------------------------------------===//
// moe.layer
//===----------------------------------------------------------------------===//

/// The cotangents of moe.layer's results.
struct LayerCotangents {
  std::vector<double> dy; // [T, D]
  /// The aux loss's cotangent (it only matters for MOESART training, the
  /// only routing whose aux loss depends on the inputs).
  double dAuxLoss = 0;
};

/// The gradients of moe.layer's floating-point operands.
struct LayerGradients {
  std::vector<double> dx;             // [T, D]
  std::vector<double> dwr;            // [D, E]
  std::vector<double> dbr;            // [E] with a router bias
  std::vector<double> dSelectionBias; // [E] of exact zeros, with the bias
  std::vector<double> dw1;            // [E, D, H] or [E, D, 2H]
  std::vector<double> dw2;            // [E, H, D]
  std::vector<double> db1;            // [E, H] or [E, 2H] with expert biases
  std::vector<double> db2;            // [E, D] with expert biases
  std::vector<double> dSharedW1;      // [D, Hs] or [D, 2Hs] with shared experts
  std::vector<double> dSharedW2;      // [Hs, D] with shared experts
  std::vector<double> dSharedGate;    // [D] with the shared gate
};

/// The VJP of moe.layer at `in` with the discrete choices of `decisions`:
/// the gradient of sum(dy * y) + dAuxLoss * auxLoss, where y and auxLoss are
/// moeLayerWithDecisions' (y before its rounding to T).
LayerGradients moeLayerVjp(const LayerInputs &in, const LayerOptions &options,
                           const LayerDecisions &decisions,
                           const LayerCotangents &cotangents);

/// The same with the choices of the forward itself:
/// layerDecisions(moeLayer(in, options), options).
LayerGradients moeLayerVjp(const LayerInputs &in, const LayerOptions &options,
                           const LayerCotangents &cotangents);

//===----------------------------------------------------------------------===//
// moe.soft_layer
//===----------------------------------------------------------------------===//

/// The gradients of moe.soft_layer's floating-point operands.
struct SoftLayerGradients {
  std::vector<double> dx;   // [G, M, D]
  std::vector<double> dphi; // [D, E, S]
  /// The gradient with respect to the scale (the optional scale operand's).
  double dscale = 0;
  std::vector<double> dw1; // [E, D, H] or [E, D, 2H]
  std::vector<double> dw2; // [E, H, D]
  std::vector<double> db1; // [E, H] or [E, 2H] with expert biases
  std::vector<double> db2; // [E, D] with expert biases
};

/// The VJP of moe.soft_layer at `in`: the gradient of sum(dy * y), where y
/// is softMoELayer's output before its rounding to T. dy is [G, M, D].
SoftLayerGradients softMoELayerVjp(const SoftLayerInputs &in,
                                   const std::vector<double> &dy);

} // namespace ref
} // namespace moe

#endif // MOE_TEST_REFERENCE_MOEREFERENCEGRAD_H
