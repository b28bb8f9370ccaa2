//===- MoEDialect.h - the moe dialect ---------------------------*- C++ -*-===//
#ifndef MOE_DIALECT_MOEDIALECT_H
#define MOE_DIALECT_MOEDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialect/MoEDialect.h.inc"

#endif // MOE_DIALECT_MOEDIALECT_H
