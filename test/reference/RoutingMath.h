//===- RoutingMath.h - the routing exp/log of docs/routing-numerics.md ----===//
//
// Plain C++ implementation of the routing exp, log and sigmoid defined in
// docs/routing-numerics.md (docs/spec.md §7): f32 in, f32 out, computed
// in double with explicit std::fma, as the compiler emits them on the CPU
// and the GPU. Written from the document, independently of the compiler's
// IR builder (lowering/RoutingMath.cpp); the unit tests check that both give
// the same bits and how far they are from the correctly rounded values.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TEST_REFERENCE_ROUTINGMATH_H
#define MOE_TEST_REFERENCE_ROUTINGMATH_H

namespace moe {
namespace ref {

float routingExp(float x);
float routingLog(float x);
/// 1 / (1 + routingExp(-x)) in f32.
float routingSigmoid(float x);

} // namespace ref
} // namespace moe

#endif // MOE_TEST_REFERENCE_ROUTINGMATH_H
