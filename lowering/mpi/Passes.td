//===- Passes.td - expert-parallel lowering to MPI ---------*- tablegen -*-===//

#ifndef MOE_LOWERING_MPI_PASSES_TD
#define MOE_LOWERING_MPI_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertMoESpmdToMPI : Pass<"convert-moe-spmd-to-mpi", "::mlir::ModuleOp"> {
  let summary = "Lower the SPMD IR of --moe-shard-experts to the mpi dialect";
  let description = [{
    The communication of expert parallelism (docs/spec.md §8), at tensor
    level, before bufferization:

    * `moe.exchange_dispatch` / `moe.exchange_combine` (ragged all-to-all,
      like MPI_Alltoallv; not covered by upstream) become our own schedule
      of blocking `mpi.send` / `mpi.recv` on 1-D row-range views of the
      buffers (`bufferization.to_buffer` / `to_tensor`, as upstream's
      `--convert-shard-to-mpi` does): the rank pairs (i < j) in one global
      order, i sending its chunks to j then receiving j's, j the reverse, so
      blocking sends never deadlock; a rank's own chunks are copied. One
      message per (pair, expert). 16-bit floats travel as i16 (MPI has no
      bf16 datatype; the upstream MPI-to-LLVM lowering knows none).
    * then upstream `--convert-shard-to-mpi` lowers the shard dialect ops
      (`shard.process_linear_index` -> `mpi.comm_rank`, `shard.all_reduce`
      -> `mpi.allreduce`), and the `shard.grid` symbols are erased;
    * the module gets `dlti.map<"MPI:Implementation" = IMPL>`, which
      upstream's mpi-to-LLVM conversion (part of `--convert-to-llvm`) reads
      to pick the MPI ABI (OpenMPI's or MPICH's handles).
  }];
  let options = [
    Option<"implementation", "implementation", "std::string", "\"OpenMPI\"",
           "MPI ABI of the generated calls: OpenMPI or MPICH">
  ];
  let dependentDialects = ["::mlir::mpi::MPIDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::shard::ShardDialect",
                           "::mlir::affine::AffineDialect",
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
