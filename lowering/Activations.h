//===- Activations.h - the expert activations, for every target -*- C++ -*-===//
//
// The element-wise numerics of an expert FFN (docs/spec.md §3): the
// activations gelu (erf), gelu_tanh, relu, silu, and the element-wise part of
// the gated ones (silu for swiglu, gelu for geglu), built once for the CPU
// kernels (on vectors) and the GPU kernels (on scalars). Part of
// MoELoweringCommon.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_ACTIVATIONS_H
#define MOE_LOWERING_ACTIVATIONS_H

#include "dialect/MoEAttrs.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir {
namespace moe {

/// act(x) on an f32 scalar or a vector of f32, with arith and math ops
/// (math.erf, math.exp, math.tanh; each target lowers them its own way).
Value buildActivation(ImplicitLocOpBuilder &b, Activation act, Value x);

/// act'(x), the derivative of buildActivation's function (for the gated
/// activations, of their element-wise part on the gate), on the same
/// operands: relu'(0) = 0, gelu the erf form's derivative, gelu_tanh its
/// own (docs/spec.md §9).
Value buildActivationDerivative(ImplicitLocOpBuilder &b, Activation act, Value x);

} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_ACTIVATIONS_H
