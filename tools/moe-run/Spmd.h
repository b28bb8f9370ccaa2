//===- Spmd.h - moe-run under mpirun (expert parallelism) -------*- C++ -*-===//
//
// A module made SPMD by --moe-shard-experts (it holds a 1-D shard.grid) runs
// as one process per rank under `mpirun -np N moe-run ...`. Every rank binds
// the arguments as usual, then keeps its part of the ones marked
// `moe.split = 0` (token rows, or experts of a parameter: dimension 0 split
// in N balanced parts, the first T % N ranks one row more); results marked
// `moe.split = 0` are gathered on rank 0, which alone writes and prints.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TOOLS_MOE_RUN_SPMD_H
#define MOE_TOOLS_MOE_RUN_SPMD_H

#include "Backend.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace moe {
namespace run {
namespace spmd {

/// The grid size N of an SPMD module (0: not SPMD). An error for a module
/// with more than one grid or one that is not 1-D and static.
llvm::Expected<int64_t> gridSize(mlir::ModuleOp module);

/// Starts MPI (once) and checks that the job has N processes. On success
/// `active()` is true.
llvm::Error start(int64_t ranks);
bool active();
int rank();
int size();
/// "rank R: " while active, else "".
std::string messagePrefix();
/// Ends the job: MPI_Finalize when `code` is 0, else MPI_Abort(code) so that
/// no other rank waits forever. Does nothing when not active.
int finish(int code);
/// Path of the MPI library for the JIT's symbol resolution ("" if unknown).
std::string mpiLibrary();

/// dim 0 of `total` split over `parts`: [begin, end) of part `index`.
std::pair<int64_t, int64_t> splitRange(int64_t total, int64_t parts, int64_t index);

/// Which arguments / results of `func` carry moe.split.
std::vector<bool> splitArguments(mlir::func::FuncOp func);
std::vector<bool> splitResults(mlir::func::FuncOp func);

/// This rank's part (dim 0) of `tensor`.
HostTensor slice(const HostTensor &tensor);
/// Rows of every rank concatenated in rank order, on rank 0 (other ranks
/// get an empty tensor).
llvm::Expected<HostTensor> gatherRows(const HostTensor &local);

} // namespace spmd
} // namespace run
} // namespace moe

#endif // MOE_TOOLS_MOE_RUN_SPMD_H
