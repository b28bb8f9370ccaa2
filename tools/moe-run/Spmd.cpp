//===- Spmd.cpp - moe-run under mpirun (expert parallelism) ---------------===//

#include "Spmd.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstring>
#include <thread>

#ifdef MOE_HAVE_MPI
#include <mpi.h>
#endif

using namespace mlir;

namespace moe {
namespace run {
namespace spmd {

namespace {
bool isActive = false;
int myRank = 0, worldSize = 1;

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}
} // namespace

llvm::Expected<int64_t> gridSize(ModuleOp module) {
  int64_t ranks = 0;
  for (auto grid : module.getOps<shard::GridOp>()) {
    if (ranks)
      return error("the module has more than one shard.grid; moe-run runs "
                   "SPMD modules of one 1-D grid (--moe-shard-experts)");
    if (grid.getRank() != 1 || ShapedType::isDynamic(grid.getShape()[0]))
      return error("shard.grid @" + grid.getSymName() +
                   " must be 1-D with a static size for moe-run");
    ranks = grid.getShape()[0];
  }
  return ranks;
}

bool active() { return isActive; }
int rank() { return myRank; }
int size() { return worldSize; }
std::string messagePrefix() {
  return isActive ? "rank " + std::to_string(myRank) + ": " : "";
}

std::string mpiLibrary() {
#ifdef MOE_RUN_MPI_LIBRARY
  return MOE_RUN_MPI_LIBRARY;
#else
  return "";
#endif
}

#ifdef MOE_HAVE_MPI
llvm::Error start(int64_t ranks) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized && MPI_Init(nullptr, nullptr) != MPI_SUCCESS)
    return error("MPI_Init failed");
  MPI_Comm_rank(MPI_COMM_WORLD, &myRank);
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  isActive = true;
  if (worldSize != ranks)
    return error("the module is SPMD over " + llvm::Twine(ranks) +
                 " ranks (shard.grid), but the job has " + llvm::Twine(worldSize) +
                 " processes: run it with mpirun -np " + llvm::Twine(ranks));
  return llvm::Error::success();
}

int finish(int code) {
  if (!isActive)
    return code;
  if (code != 0) {
    // The message first: mpirun forwards the ranks' output asynchronously,
    // and an abort may kill the job before a just-written line is through.
    llvm::errs().flush();
    std::fflush(stdout);
    std::fflush(stderr);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    MPI_Abort(MPI_COMM_WORLD, code);
  }
  MPI_Finalize();
  isActive = false;
  return code;
}

llvm::Expected<HostTensor> gatherRows(const HostTensor &local) {
  const std::vector<int64_t> &shape = local.shape();
  int64_t rowBytes = static_cast<int64_t>(io::elementSize(local.dtype()));
  for (size_t d = 1; d < shape.size(); ++d)
    rowBytes *= shape[d];
  long long mine = shape.empty() ? 0 : shape[0];
  std::vector<long long> rows(worldSize);
  MPI_Gather(&mine, 1, MPI_LONG_LONG, rows.data(), 1, MPI_LONG_LONG, 0,
             MPI_COMM_WORLD);
  std::vector<int> counts(worldSize), displs(worldSize);
  int64_t total = 0;
  if (myRank == 0) {
    for (int q = 0; q < worldSize; ++q) {
      int64_t bytes = rows[q] * rowBytes, at = total * rowBytes;
      if (bytes > INT32_MAX || at > INT32_MAX)
        return error("the gathered result exceeds 2^31 - 1 bytes (MPI_Gatherv)");
      counts[q] = static_cast<int>(bytes);
      displs[q] = static_cast<int>(at);
      total += rows[q];
    }
  }
  std::vector<int64_t> fullShape = shape;
  if (!fullShape.empty())
    fullShape[0] = myRank == 0 ? total : 0;
  HostTensor full(local.dtype(), fullShape);
  MPI_Gatherv(local.data(), static_cast<int>(mine * rowBytes), MPI_BYTE,
              full.data(), counts.data(), displs.data(), MPI_BYTE, 0,
              MPI_COMM_WORLD);
  return full;
}
#else
llvm::Error start(int64_t ranks) {
  return error("the module is SPMD over " + llvm::Twine(ranks) +
               " ranks (shard.grid), but this moe-run was built without MPI "
               "(install libopenmpi-dev and rebuild)");
}
int finish(int code) { return code; }
llvm::Expected<HostTensor> gatherRows(const HostTensor &) {
  return error("moe-run was built without MPI");
}
#endif

std::pair<int64_t, int64_t> splitRange(int64_t total, int64_t parts, int64_t index) {
  int64_t base = total / parts, extra = total % parts;
  int64_t begin = index * base + std::min(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

std::vector<bool> splitArguments(func::FuncOp func) {
  std::vector<bool> split(func.getNumArguments(), false);
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    split[i] = static_cast<bool>(func.getArgAttr(i, "moe.split"));
  return split;
}

std::vector<bool> splitResults(func::FuncOp func) {
  std::vector<bool> split(func.getNumResults(), false);
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    split[i] = static_cast<bool>(func.getResultAttr(i, "moe.split"));
  return split;
}

HostTensor slice(const HostTensor &tensor) {
  std::vector<int64_t> shape = tensor.shape();
  auto [begin, end] = splitRange(shape[0], worldSize, myRank);
  size_t rowBytes = io::elementSize(tensor.dtype());
  for (size_t d = 1; d < shape.size(); ++d)
    rowBytes *= static_cast<size_t>(shape[d]);
  shape[0] = end - begin;
  HostTensor part(tensor.dtype(), shape);
  if (end > begin)
    std::memcpy(part.data(), tensor.data() + begin * rowBytes,
                static_cast<size_t>(end - begin) * rowBytes);
  return part;
}

} // namespace spmd
} // namespace run
} // namespace moe
