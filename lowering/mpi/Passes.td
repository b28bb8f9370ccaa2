//===- Passes.td - expert-parallel lowering to MPI ---------*- tablegen -*-===//

#ifndef MOE_LOWERING_MPI_PASSES_TD
#define MOE_LOWERING_MPI_PASSES_TD

include "mlir/Pass/PassBase.td"

// `--convert-moe-spmd-to-mpi` is the pass pipeline of the two passes below
// with upstream `--convert-shard-to-mpi` between them
// (buildSpmdToMPIPipeline, lowering/mpi/Passes.h).

def MoELowerSpmdExchanges : Pass<"moe-lower-spmd-exchanges", "::mlir::ModuleOp"> {
  let summary = "Lower the ragged exchanges of --moe-shard-experts to mpi.send / mpi.recv";
  let description = [{
    The first stage of `--convert-moe-spmd-to-mpi` (a pass pipeline:
    this pass, upstream `--convert-shard-to-mpi`, then
    `--moe-finish-spmd-to-mpi`), the communication of expert parallelism
    (docs/spec.md §8) at tensor level, before bufferization.

    `moe.exchange_dispatch` / `moe.exchange_combine` (ragged all-to-all,
    like MPI_Alltoallv; not covered by upstream) become our own schedule
    of blocking `mpi.send` / `mpi.recv` on 1-D row-range views of the
    buffers (`bufferization.to_buffer` / `to_tensor`, as upstream's
    `--convert-shard-to-mpi` does): the rank pairs (i < j) in one global
    order, i sending its chunks to j then receiving j's, j the reverse, so
    blocking sends never deadlock; a rank's own chunks are copied. One
    message per (pair, expert). 16-bit floats travel as i16 (MPI has no
    bf16 datatype; the upstream MPI-to-LLVM lowering knows none). The
    calling rank is a `shard.process_linear_index` on the exchange's grid,
    which upstream `--convert-shard-to-mpi` then lowers to `mpi.comm_rank`.
    A module without exchanges is left as it is.
  }];
  let dependentDialects = ["::mlir::mpi::MPIDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::shard::ShardDialect"];
}

def MoEFinishSpmdToMPI : Pass<"moe-finish-spmd-to-mpi", "::mlir::ModuleOp"> {
  let summary = "Finish the mpi lowering of --moe-shard-experts after upstream --convert-shard-to-mpi";
  let description = [{
    The last stage of `--convert-moe-spmd-to-mpi` (a pass pipeline:
    `--moe-lower-spmd-exchanges`, upstream `--convert-shard-to-mpi`, then
    this pass), on a module with a `shard.grid`:

    * a shard dialect op other than `shard.grid` still in the module (one
      that upstream `--convert-shard-to-mpi` has no lowering for) is an
      error, and so is an exchange not lowered by
      `--moe-lower-spmd-exchanges`;
    * the `shard.grid` symbols are erased;
    * the `mpi.comm_split` of the world communicator that upstream emits
      for a collective over grid axes (a constant color: a 1-D grid) is
      replaced by `mpi.comm_world` (the same group in the same order);
      a rank-dependent split is an error;
    * the module gets `dlti.map<"MPI:Implementation" = IMPL>`, which
      upstream's mpi-to-LLVM conversion (part of `--convert-to-llvm`) reads
      to pick the MPI ABI (OpenMPI's or MPICH's handles);
    * the `moe.split` argument and result attributes (for moe-run's
      binding) are dropped.

    A module without a `shard.grid` is left as it is.
  }];
  let options = [
    Option<"implementation", "implementation", "std::string", "\"OpenMPI\"",
           "MPI ABI of the generated calls: OpenMPI or MPICH">
  ];
  let dependentDialects = ["::mlir::mpi::MPIDialect",
                           "::mlir::DLTIDialect"];
}

def MoEFixOpenMPISymbols : Pass<"moe-fix-openmpi-symbols", "::mlir::ModuleOp"> {
  let summary = "Rename the OpenMPI reduction handles MLIR 22's mpi-to-LLVM lowering misnames";
  let description = [{
    MLIR 22's mpi-to-LLVM conversion (OpenMPI ABI) refers to the reduction
    operation `MPI_SUM` as the global `ompi_mpi_sum`, but OpenMPI's
    `MPI_SUM` is `&ompi_mpi_op_sum` (likewise for the other predefined
    operations), so the code does not link. This pass renames every
    `llvm.mlir.global` `ompi_mpi_<op>` of a predefined reduction operation
    (and its `llvm.mlir.addressof` uses) to `ompi_mpi_op_<op>`. It runs after
    `--convert-to-llvm` in `--moe-cpu-pipeline` and does nothing to a
    module without such globals.
  }];
}

#endif // MOE_LOWERING_MPI_PASSES_TD
