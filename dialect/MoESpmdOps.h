//===- MoESpmdOps.h - moe expert-parallel exchange ops ----------*- C++ -*-===//
#ifndef MOE_DIALECT_MOESPMDOPS_H
#define MOE_DIALECT_MOESPMDOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialect/MoEDialect.h"

#define GET_OP_CLASSES
#include "dialect/MoESpmdOps.h.inc"

namespace mlir::moe {
/// The number of ranks of the 1-D `shard.grid` named `grid` visible from
/// `from`, or failure (with an error on `from`) if there is none.
FailureOr<int64_t> lookupGridSize(Operation *from, FlatSymbolRefAttr grid);
} // namespace mlir::moe

#endif // MOE_DIALECT_MOESPMDOPS_H
