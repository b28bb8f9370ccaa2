//===- AsyncRuntimeTest.cpp - libMoEAsyncRuntime.so's C ABI ---------------===//
//
// The runtime (runtime/cpu/AsyncRuntime.cpp) called as the lowered code
// calls it, with plain functions in place of coroutines: tokens, values and
// groups complete once, waiters run exactly once whether they register before
// or after completion, errors reach the group, blocked threads run tasks (a
// task that blocks on its own subtasks finishes with one thread), and the
// scheduler stops on the last ExecutionEngine destroy hook and starts again
// on the next use; without MOE_CPU_THREADS, unbound MPI ranks share the
// node's CPUs.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/AsyncRuntime.h"

#include "llvm/ADT/StringMap.h"

#include <gtest/gtest.h>

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

extern "C" {
void mlirAsyncRuntimeAddRef(void *, int64_t);
void mlirAsyncRuntimeDropRef(void *, int64_t);
void *mlirAsyncRuntimeCreateToken();
void *mlirAsyncRuntimeCreateValue(int64_t);
void *mlirAsyncRuntimeCreateGroup(int64_t);
int64_t mlirAsyncRuntimeAddTokenToGroup(void *, void *);
void mlirAsyncRuntimeEmplaceToken(void *);
void mlirAsyncRuntimeEmplaceValue(void *);
void mlirAsyncRuntimeSetTokenError(void *);
void mlirAsyncRuntimeSetValueError(void *);
bool mlirAsyncRuntimeIsTokenError(void *);
bool mlirAsyncRuntimeIsValueError(void *);
bool mlirAsyncRuntimeIsGroupError(void *);
void mlirAsyncRuntimeAwaitToken(void *);
void mlirAsyncRuntimeAwaitValue(void *);
void mlirAsyncRuntimeAwaitAllInGroup(void *);
void *mlirAsyncRuntimeGetValueStorage(void *);
void mlirAsyncRuntimeExecute(void *, void (*)(void *));
void mlirAsyncRuntimeAwaitTokenAndExecute(void *, void *, void (*)(void *));
void mlirAsyncRuntimeAwaitValueAndExecute(void *, void *, void (*)(void *));
void mlirAsyncRuntimeAwaitAllInGroupAndExecute(void *, void *, void (*)(void *));
int64_t mlirAsyncRuntimGetNumWorkerThreads();
void __mlir_execution_engine_init(llvm::StringMap<void *> &);
void __mlir_execution_engine_destroy();
}

namespace {

/// One ExecutionEngine's lifetime with MOE_CPU_THREADS = `threads`: the
/// scheduler stops at the end and the next test starts a new one.
class Engine {
public:
  explicit Engine(int threads) {
    setenv("MOE_CPU_THREADS", std::to_string(threads).c_str(), 1);
    __mlir_execution_engine_init(symbols);
  }
  ~Engine() {
    __mlir_execution_engine_destroy();
    unsetenv("MOE_CPU_THREADS");
  }
  llvm::StringMap<void *> symbols;
};

/// A task: emplaces its token (or sets an error) after adding to a counter,
/// and records its thread.
struct Job {
  void *token = nullptr;
  std::atomic<int> *runs = nullptr;
  bool fail = false;
  std::thread::id thread;
};

void runJob(void *p) {
  Job *job = static_cast<Job *>(p);
  job->thread = std::this_thread::get_id();
  job->runs->fetch_add(1);
  if (job->fail)
    mlirAsyncRuntimeSetTokenError(job->token);
  else
    mlirAsyncRuntimeEmplaceToken(job->token);
}

void countRun(void *p) { static_cast<std::atomic<int> *>(p)->fetch_add(1); }

/// `n` jobs in one group, as async-parallel-for forks them; returns the
/// group after awaiting it (the caller drops it).
void *forkJoin(std::vector<Job> &jobs, std::atomic<int> &runs, int failAt = -1) {
  void *group = mlirAsyncRuntimeCreateGroup(static_cast<int64_t>(jobs.size()));
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].token = mlirAsyncRuntimeCreateToken();
    jobs[i].runs = &runs;
    jobs[i].fail = static_cast<int>(i) == failAt;
    EXPECT_EQ(mlirAsyncRuntimeAddTokenToGroup(jobs[i].token, group), static_cast<int64_t>(i));
    mlirAsyncRuntimeExecute(&jobs[i], runJob);
  }
  mlirAsyncRuntimeAwaitAllInGroup(group);
  for (Job &job : jobs)
    mlirAsyncRuntimeDropRef(job.token, 1);
  return group;
}

TEST(AsyncRuntime, ExportsEveryFunctionOfTheAbi) {
  Engine engine(2);
  for (const char *name :
       {"mlirAsyncRuntimeAddRef", "mlirAsyncRuntimeDropRef", "mlirAsyncRuntimeCreateToken",
        "mlirAsyncRuntimeCreateValue", "mlirAsyncRuntimeCreateGroup",
        "mlirAsyncRuntimeAddTokenToGroup", "mlirAsyncRuntimeEmplaceToken",
        "mlirAsyncRuntimeEmplaceValue", "mlirAsyncRuntimeSetTokenError",
        "mlirAsyncRuntimeSetValueError", "mlirAsyncRuntimeIsTokenError",
        "mlirAsyncRuntimeIsValueError", "mlirAsyncRuntimeIsGroupError",
        "mlirAsyncRuntimeAwaitToken", "mlirAsyncRuntimeAwaitValue",
        "mlirAsyncRuntimeAwaitAllInGroup", "mlirAsyncRuntimeGetValueStorage",
        "mlirAsyncRuntimeExecute", "mlirAsyncRuntimeAwaitTokenAndExecute",
        "mlirAsyncRuntimeAwaitValueAndExecute", "mlirAsyncRuntimeAwaitAllInGroupAndExecute",
        "mlirAsyncRuntimGetNumWorkerThreads", "mlirAsyncRuntimePrintCurrentThreadId"})
    EXPECT_NE(engine.symbols.lookup(name), nullptr) << name;
  EXPECT_EQ(engine.symbols.lookup("mlirAsyncRuntimeExecute"),
            reinterpret_cast<void *>(&mlirAsyncRuntimeExecute));
}

TEST(AsyncRuntime, ThreadsComeFromTheEnvironment) {
  {
    Engine engine(3);
    EXPECT_EQ(mlirAsyncRuntimGetNumWorkerThreads(), 3);
  }
  {
    Engine engine(1);
    EXPECT_EQ(mlirAsyncRuntimGetNumWorkerThreads(), 1);
  }
}

TEST(AsyncRuntime, MpiRanksShareAnUnboundNode) {
  // Not under mpirun, or one rank per node: every allowed CPU.
  EXPECT_EQ(moeDefaultCpuThreads(8, 8, nullptr), 8u);
  EXPECT_EQ(moeDefaultCpuThreads(8, 8, "1"), 8u);
  // N unbound ranks on the node: a 1/N share each, at least 1.
  EXPECT_EQ(moeDefaultCpuThreads(8, 8, "2"), 4u);
  EXPECT_EQ(moeDefaultCpuThreads(8, 8, "3"), 2u);
  EXPECT_EQ(moeDefaultCpuThreads(2, 2, "4"), 1u);
  // Bound ranks (the mask is a part of the node): the mask as it is.
  EXPECT_EQ(moeDefaultCpuThreads(2, 8, "4"), 2u);
  // A local size that is not a count: ignored.
  EXPECT_EQ(moeDefaultCpuThreads(8, 8, "two"), 8u);
  EXPECT_EQ(moeDefaultCpuThreads(8, 8, "-2"), 8u);

  // The runtime reads OpenMPI's variable when MOE_CPU_THREADS is unset.
  unsigned online = std::thread::hardware_concurrency(), allowed = online;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
    allowed = static_cast<unsigned>(CPU_COUNT(&set));
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4096", 1);
  {
    llvm::StringMap<void *> symbols;
    __mlir_execution_engine_init(symbols);
    EXPECT_EQ(mlirAsyncRuntimGetNumWorkerThreads(),
              static_cast<int64_t>(allowed >= online ? 1 : allowed));
    __mlir_execution_engine_destroy();
  }
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
}

TEST(AsyncRuntime, TokenAwaitedFromAnotherThread) {
  Engine engine(2);
  std::atomic<int> runs{0};
  Job job;
  job.token = mlirAsyncRuntimeCreateToken();
  job.runs = &runs;
  mlirAsyncRuntimeExecute(&job, runJob);
  mlirAsyncRuntimeAwaitToken(job.token);
  EXPECT_EQ(runs.load(), 1);
  EXPECT_FALSE(mlirAsyncRuntimeIsTokenError(job.token));
  mlirAsyncRuntimeDropRef(job.token, 1);
}

TEST(AsyncRuntime, ValueStorageCarriesTheResult) {
  Engine engine(2);
  struct Produce {
    void *value;
    static void run(void *p) {
      auto *self = static_cast<Produce *>(p);
      *static_cast<int64_t *>(mlirAsyncRuntimeGetValueStorage(self->value)) = 42;
      mlirAsyncRuntimeEmplaceValue(self->value);
    }
  } produce{mlirAsyncRuntimeCreateValue(sizeof(int64_t))};
  mlirAsyncRuntimeExecute(&produce, Produce::run);
  mlirAsyncRuntimeAwaitValue(produce.value);
  EXPECT_FALSE(mlirAsyncRuntimeIsValueError(produce.value));
  EXPECT_EQ(*static_cast<int64_t *>(mlirAsyncRuntimeGetValueStorage(produce.value)), 42);
  mlirAsyncRuntimeDropRef(produce.value, 1);

  void *failed = mlirAsyncRuntimeCreateValue(8);
  mlirAsyncRuntimeSetValueError(failed);
  mlirAsyncRuntimeAwaitValue(failed);
  EXPECT_TRUE(mlirAsyncRuntimeIsValueError(failed));
  mlirAsyncRuntimeDropRef(failed, 1);
}

TEST(AsyncRuntime, WaitersRunOnceBeforeOrAfterCompletion) {
  Engine engine(2);
  std::atomic<int> runs{0};
  void *token = mlirAsyncRuntimeCreateToken();
  mlirAsyncRuntimeAwaitTokenAndExecute(token, &runs, countRun);
  mlirAsyncRuntimeAwaitTokenAndExecute(token, &runs, countRun);
  EXPECT_EQ(runs.load(), 0);
  mlirAsyncRuntimeEmplaceToken(token);
  EXPECT_EQ(runs.load(), 2);
  mlirAsyncRuntimeAwaitTokenAndExecute(token, &runs, countRun);
  EXPECT_EQ(runs.load(), 3);
  mlirAsyncRuntimeDropRef(token, 1);

  void *value = mlirAsyncRuntimeCreateValue(4);
  mlirAsyncRuntimeAwaitValueAndExecute(value, &runs, countRun);
  mlirAsyncRuntimeEmplaceValue(value);
  mlirAsyncRuntimeAwaitValueAndExecute(value, &runs, countRun);
  EXPECT_EQ(runs.load(), 5);
  mlirAsyncRuntimeDropRef(value, 1);

  void *group = mlirAsyncRuntimeCreateGroup(2);
  void *a = mlirAsyncRuntimeCreateToken();
  void *b = mlirAsyncRuntimeCreateToken();
  EXPECT_EQ(mlirAsyncRuntimeAddTokenToGroup(a, group), 0);
  EXPECT_EQ(mlirAsyncRuntimeAddTokenToGroup(b, group), 1);
  mlirAsyncRuntimeAwaitAllInGroupAndExecute(group, &runs, countRun);
  mlirAsyncRuntimeEmplaceToken(a);
  EXPECT_EQ(runs.load(), 5);
  mlirAsyncRuntimeEmplaceToken(b);
  EXPECT_EQ(runs.load(), 6);
  mlirAsyncRuntimeAwaitAllInGroupAndExecute(group, &runs, countRun);
  EXPECT_EQ(runs.load(), 7);
  EXPECT_FALSE(mlirAsyncRuntimeIsGroupError(group));
  mlirAsyncRuntimeDropRef(a, 1);
  mlirAsyncRuntimeDropRef(b, 1);
  mlirAsyncRuntimeDropRef(group, 1);

  // An empty group is complete.
  void *empty = mlirAsyncRuntimeCreateGroup(0);
  mlirAsyncRuntimeAwaitAllInGroup(empty);
  mlirAsyncRuntimeAwaitAllInGroupAndExecute(empty, &runs, countRun);
  EXPECT_EQ(runs.load(), 8);
  mlirAsyncRuntimeDropRef(empty, 1);
}

TEST(AsyncRuntime, ForkJoinRunsEveryTaskOnceOnEveryThread) {
  // 8 threads: more than the CI machine's cores, so that a thread holding
  // the queue's or a waiter list's lock is preempted now and then (the
  // locks spin, then yield).
  for (int threads : {1, 2, 4, 8}) {
    Engine engine(threads);
    std::set<std::thread::id> seen;
    std::atomic<int> runs{0};
    int regions = 2000;
    for (int r = 0; r < regions; ++r) {
      std::vector<Job> jobs(8);
      void *group = forkJoin(jobs, runs);
      EXPECT_FALSE(mlirAsyncRuntimeIsGroupError(group));
      mlirAsyncRuntimeDropRef(group, 1);
      for (Job &job : jobs)
        seen.insert(job.thread);
    }
    EXPECT_EQ(runs.load(), 8 * regions) << threads << " threads";
    // One thread: every task on the caller, which awaits.
    if (threads == 1) {
      EXPECT_EQ(seen.size(), 1u);
      EXPECT_EQ(*seen.begin(), std::this_thread::get_id());
    } else {
      EXPECT_LE(seen.size(), static_cast<size_t>(threads));
    }
  }
}

TEST(AsyncRuntime, AnErrorReachesTheGroup) {
  Engine engine(2);
  std::atomic<int> runs{0};
  std::vector<Job> jobs(5);
  void *group = forkJoin(jobs, runs, /*failAt=*/3);
  EXPECT_EQ(runs.load(), 5);
  EXPECT_TRUE(mlirAsyncRuntimeIsGroupError(group));
  mlirAsyncRuntimeDropRef(group, 1);
}

/// A task that forks `width` subtasks and blocks on them, `depth` levels
/// down: with fewer threads than blocked tasks it finishes only if blocked
/// threads run queued tasks.
struct Nested {
  int depth;
  int width;
  std::atomic<int> *leaves;
  void *token;
  static void run(void *p) {
    auto *self = static_cast<Nested *>(p);
    if (self->depth == 0) {
      self->leaves->fetch_add(1);
    } else {
      void *group = mlirAsyncRuntimeCreateGroup(self->width);
      std::vector<Nested> children(self->width);
      for (Nested &c : children) {
        c = Nested{self->depth - 1, self->width, self->leaves, mlirAsyncRuntimeCreateToken()};
        mlirAsyncRuntimeAddTokenToGroup(c.token, group);
        mlirAsyncRuntimeExecute(&c, Nested::run);
      }
      mlirAsyncRuntimeAwaitAllInGroup(group);
      for (Nested &c : children)
        mlirAsyncRuntimeDropRef(c.token, 1);
      mlirAsyncRuntimeDropRef(group, 1);
    }
    if (self->token)
      mlirAsyncRuntimeEmplaceToken(self->token);
  }
};

TEST(AsyncRuntime, BlockedThreadsRunQueuedTasks) {
  for (int threads : {1, 2, 3}) {
    Engine engine(threads);
    std::atomic<int> leaves{0};
    Nested root{4, 4, &leaves, nullptr};
    Nested::run(&root);
    EXPECT_EQ(leaves.load(), 256) << threads << " threads";
  }
}

TEST(AsyncRuntime, RestartsAfterTheLastDestroy) {
  std::atomic<int> runs{0};
  for (int round = 0; round < 3; ++round) {
    Engine outer(2);
    {
      // A second engine's destroy leaves the runtime running for the first.
      Engine inner(2);
    }
    std::vector<Job> jobs(4);
    mlirAsyncRuntimeDropRef(forkJoin(jobs, runs), 1);
  }
  EXPECT_EQ(runs.load(), 12);
}

} // namespace
