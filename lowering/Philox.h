//===- Philox.h - Philox4x32-10 in IR ---------------------------*- C++ -*-===//
//
// The counter-based generator of docs/spec.md §3.1, emitted as arith ops
// so that the CPU and GPU lowerings draw the same numbers for the same seed.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_PHILOX_H
#define MOE_LOWERING_PHILOX_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

#include <array>

namespace mlir {
namespace moe {

/// Philox4x32-10 (Random123 constants) of the i32 counter words `ctr` under
/// the i32 key words `key` (key[0] = low word of the seed); returns the four
/// output words.
std::array<Value, 4> buildPhilox4x32x10(OpBuilder &b, Location loc,
                                        std::array<Value, 2> key,
                                        std::array<Value, 4> ctr);

/// u = (out[0] >> 8) * 2^-24 as f32, exactly representable in [0, 1).
Value buildPhiloxUniform(OpBuilder &b, Location loc, Value out0);

} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_PHILOX_H
