//===- MoEAdjointInterface.h - reverse-mode rules of ops ---------*- C++ -*-===//
//
// AdjointOpInterface (MoEAdjointInterface.td): the reverse-mode rule of an
// op, which --moe-generate-vjp differentiates through (docs/spec.md §9).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_DIALECT_MOEADJOINTINTERFACE_H
#define MOE_DIALECT_MOEADJOINTINTERFACE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"

#include <string>

#include "dialect/MoEAdjointInterface.h.inc"

namespace mlir {
class DialectRegistry;
namespace moe {

/// The type of the cotangent of `v` (AdjointOpInterface's convention): an
/// f32 tensor of v's shape for a floating-point tensor, null otherwise.
Type cotangentType(Value v);

/// `v` (a floating-point tensor) as f32: `arith.extf` unless it is f32.
Value castToF32(OpBuilder &b, Location loc, Value v);

/// An f32 zero tensor shaped like `like` (dynamic sizes from tensor.dim).
Value zerosLike(OpBuilder &b, Location loc, Value like);

/// Attaches AdjointOpInterface to the upstream ops --moe-generate-vjp
/// differentiates (dialect/UpstreamAdjoints.cpp).
void registerUpstreamAdjoints(DialectRegistry &registry);

} // namespace moe
} // namespace mlir

#endif // MOE_DIALECT_MOEADJOINTINTERFACE_H
