//===- RoutingMath.h - the routing exp/log in IR ----------------*- C++ -*-===//
//
// The one definition of the transcendental functions of routing (docs/spec.md
// section 7): exp and log as used by the router's softmax, the sigmoid score,
// the MOESART adjustments (log) and the shared expert's sigmoid gate. They
// are emitted as arith/math ops only (no libm call on the CPU, no libdevice
// call on the GPU), so the CPU and GPU lowerings compute the same f32 bits
// and choose the same experts.
//
// The algorithm (docs/routing-numerics.md is the written definition the
// independent reference test/reference/RoutingMath.cpp implements):
//
//   exp(x): x -> f64, clamped to [-160, 100] (NaN kept for the end);
//     kf = fma(x, log2(e), 0x1.8p52) - 0x1.8p52   (round to nearest integer)
//     r  = fma(-kf, LN2_LO, fma(-kf, LN2_HI, x))
//     p  = Horner of sum_{i=0}^{13} r^i / i! with fma, from the top term
//     y  = p * 2^kf (exponent bits), then rounded to f32 (nearest even);
//     NaN in -> NaN out.
//   log(x): x -> f64 = m * 2^e with m in [1, 2) (from the bits; f32
//     subnormals are normal in f64); if m > sqrt(2): m /= 2, e += 1;
//     f = m - 1, s = f / (2 + f), z = s * s,
//     log(m) = 2s + s * z * P(z), P(z) = Horner of sum_{i=0}^{10} 2/(2i+3) z^i
//     with fma, y = fma(e, LN2_HI, fma(e, LN2_LO, log(m))), rounded to f32;
//     x < 0 or NaN -> NaN, +-0 -> -inf, +inf -> +inf.
//   sigmoid(x) = 1 / (1 + exp(-x)) in f32.
//
// Every multiply-add is an explicit math.fma, so no backend contraction can
// change a result; the other f64 operations are single IEEE operations. The
// f64 result is within a few f64 ulps of the exact value, so the f32 result
// is the correctly rounded one except when the exact value lies within
// ~2^-50 (relative) of a midpoint between two floats (see the unit test
// test/unit/lowering/RoutingMathIRTest.cpp for the measured agreement).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_ROUTINGMATH_H
#define MOE_LOWERING_ROUTINGMATH_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace mlir {
namespace moe {

/// exp of the f32 value `x` (see above).
Value buildRoutingExp(OpBuilder &b, Location loc, Value x);
/// log of the f32 value `x` (see above).
Value buildRoutingLog(OpBuilder &b, Location loc, Value x);
/// 1 / (1 + exp(-x)) in f32 with the routing exp.
Value buildRoutingSigmoid(OpBuilder &b, Location loc, Value x);

} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_ROUTINGMATH_H
