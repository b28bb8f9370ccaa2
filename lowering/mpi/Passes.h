//===- Passes.h - expert-parallel lowering to MPI ---------------*- C++ -*-===//
//
// The passes of Passes.td (MoEMPILowering) and the pipeline
// `--convert-moe-spmd-to-mpi` built from them.
//
//===----------------------------------------------------------------------===//
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
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::moe {

#define GEN_PASS_DECL
#include "lowering/mpi/Passes.h.inc"

/// Options of `--convert-moe-spmd-to-mpi`.
struct SpmdToMPIPipelineOptions
    : public PassPipelineOptions<SpmdToMPIPipelineOptions> {
  PassOptions::Option<std::string> implementation{
      *this, "implementation",
      llvm::cl::desc("MPI ABI of the generated calls: OpenMPI or MPICH"),
      llvm::cl::init("OpenMPI")};
};

/// Builds `--convert-moe-spmd-to-mpi` into `pm` (anchored on, or implicitly
/// nesting to, builtin.module): `--moe-lower-spmd-exchanges` (the ragged
/// exchanges -> mpi.send / mpi.recv), upstream `--convert-shard-to-mpi` (the
/// shard ops -> mpi) and `--moe-finish-spmd-to-mpi` with `implementation`
/// (leftover check, grids erased, comm_split -> the world, the MPI ABI as a
/// DLTI entry), every pass from its typed constructor. Building cannot fail:
/// an `implementation` other than OpenMPI or MPICH fails the last pass's run
/// with one error. Our two passes leave a module without exchanges and
/// shard.grid as it is; upstream's conversion then has nothing to convert
/// (it still runs its greedy folding over the module).
void buildSpmdToMPIPipeline(OpPassManager &pm,
                            llvm::StringRef implementation = "OpenMPI");

/// Registers the pipeline `--convert-moe-spmd-to-mpi` (options:
/// SpmdToMPIPipelineOptions). Idempotent.
void registerSpmdToMPIPipeline();

/// Registers every pass of Passes.td and the pipeline
/// `--convert-moe-spmd-to-mpi` (registerSpmdToMPIPipeline). Idempotent;
/// registerAllMoEPasses() (lowering/InitAllMoE.h) calls it.
void registerMoEMPIPasses();

} // namespace mlir::moe

#endif // MOE_LOWERING_MPI_PASSES_H
