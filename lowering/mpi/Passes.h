//===- Passes.h - expert-parallel lowering to MPI ---------------*- C++ -*-===//
#ifndef MOE_LOWERING_MPI_PASSES_H
#define MOE_LOWERING_MPI_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/DLTI/DLTI.h"
#include "mlir/Dialect/MPI/IR/MPI.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::moe {

#define GEN_PASS_DECL
#include "lowering/mpi/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "lowering/mpi/Passes.h.inc"

} // namespace mlir::moe

#endif // MOE_LOWERING_MPI_PASSES_H
