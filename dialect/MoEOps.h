//===- MoEOps.h - moe dialect operations ------------------------*- C++ -*-===//
#ifndef MOE_DIALECT_MOEOPS_H
#define MOE_DIALECT_MOEOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialect/MoEAttrs.h"
#include "dialect/MoEDialect.h"

#define GET_OP_CLASSES
#include "dialect/MoEOps.h.inc"

#endif // MOE_DIALECT_MOEOPS_H
