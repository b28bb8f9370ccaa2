//===- AsyncRuntime.cpp - the fork/join runtime of the CPU's parallel loops ===//
//
// libMoEAsyncRuntime.so: the C ABI that MLIR's async dialect lowers to
// (`convert-async-to-llvm`: the mlirAsyncRuntime* functions of
// mlir/ExecutionEngine/AsyncRuntime.h), written for what
// `--moe-cpu-pipeline` makes of its parallel loops (`async-parallel-for`):
// short fork/join regions, one after another, a few per layer. It is a
// drop-in replacement for MLIR's libmlir_async_runtime.so, which costs about
// 0.2 ms per decode layer on a 2-core machine (a promise, a heap-allocated
// closure and a condition-variable wake-up per task, the caller asleep while
// the pool works). Here:
//
//   - a thread that blocks on a token, value or group (the caller of a
//     parallel loop) runs queued tasks while it waits, so a machine of N
//     cores runs N - 1 workers plus the caller;
//   - idle threads spin for kSpinMicroseconds before they sleep, so that the
//     next region of the same layer starts without a system call;
//   - tasks and waiters are plain function pointers: no allocation per task
//     beyond the token the lowered code creates.
//
// MOE_CPU_THREADS=N (N >= 1) sets the number of threads (the caller
// included); by default, the CPUs this process may run on, divided among
// the node's MPI ranks when mpirun left them unbound. With N = 1 every task
// runs on the thread that awaits it.
//
// __mlir_execution_engine_init / _destroy (the ExecutionEngine's hooks)
// count their users: the last destroy joins the workers, so that none can
// be returning into JIT-compiled code that is about to be freed; the next
// use starts them again.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/AsyncRuntime.h"

#include "llvm/ADT/StringMap.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define MOE_ASYNC_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using CoroHandle = void *;
using CoroResume = void (*)(void *);

/// How long an idle thread keeps looking for work before it sleeps.
constexpr auto kSpinMicroseconds = std::chrono::microseconds(200);

inline void cpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

/// A lock for critical sections of a few instructions (the task queue, a
/// waiter list): a thread that finds it taken spins, then yields, and never
/// sleeps in the kernel. With std::mutex, two threads taking and queueing
/// the tasks of one parallel loop met often enough that a futex system call
/// (a sleep and a wake-up) came with a good share of the tasks: 5-9% of a
/// decode layer's time on 2 cores.
class SpinLock {
public:
  void lock() {
    for (unsigned spins = 0; taken.exchange(true, std::memory_order_acquire); ++spins) {
      while (taken.load(std::memory_order_relaxed)) {
        // The holder may have been preempted (more threads than cores).
        if (++spins > 1024) {
          std::this_thread::yield();
          spins = 0;
        } else {
          cpuRelax();
        }
      }
    }
  }
  void unlock() { taken.store(false, std::memory_order_release); }

private:
  std::atomic<bool> taken{false};
};

//===----------------------------------------------------------------------===//
// The scheduler: one queue, N - 1 workers, blocked threads help.
//===----------------------------------------------------------------------===//

struct Task {
  CoroHandle handle;
  CoroResume resume;
};

/// The number of threads: MOE_CPU_THREADS, else the CPUs of the affinity
/// mask, shared by the MPI ranks of the node when mpirun did not bind them
/// (moeDefaultCpuThreads).
unsigned configuredThreads() {
  if (const char *env = std::getenv("MOE_CPU_THREADS")) {
    if (unsigned n = moeParseCpuThreads(env))
      return n;
    std::fprintf(stderr, "moe-runtime: %s; using every CPU\n", moeCpuThreadsError(env).c_str());
  }
  unsigned online = std::thread::hardware_concurrency();
  unsigned allowed = online;
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
    allowed = static_cast<unsigned>(CPU_COUNT(&set));
#endif
  const char *localRanks = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (!localRanks)
    localRanks = std::getenv("MPI_LOCALNRANKS");
  return moeDefaultCpuThreads(allowed, online, localRanks);
}

class Scheduler {
public:
  explicit Scheduler(unsigned threads) : threads(threads) {
    for (unsigned i = 1; i < threads; ++i)
      workers.emplace_back([this] { waitUntil([this] { return stopping.load(); }, true); });
  }

  ~Scheduler() { stop(); }

  /// Joins the workers once the queue is empty. The scheduler stays the
  /// current one meanwhile: the tasks still running complete through it.
  void stop() {
    stopping.store(true);
    wake();
    for (std::thread &t : workers)
      t.join();
    workers.clear();
    // Tasks nobody awaited (none in what the pipeline emits; with one
    // thread, no worker ran them): run them here rather than drop them.
    while (runOne()) {
    }
  }

  unsigned concurrency() const { return threads; }

  void submit(Task task) {
    {
      std::lock_guard<SpinLock> lock(queueMutex);
      queue.push_back(task);
    }
    queued.fetch_add(1);
    wake();
  }

  /// After any state change a sleeping thread may wait for (a task queued,
  /// a token, value or group completed, shutdown).
  void wake() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sleepers.load() > 0) {
      std::lock_guard<std::mutex> lock(sleepMutex);
      sleepCv.notify_all();
    }
  }

  /// Runs queued tasks until `done()`; spins, then sleeps, when there are
  /// none. Workers (`worker`) leave only once the queue is empty.
  template <typename Done> void waitUntil(Done done, bool worker = false) {
    auto finished = [&] { return done() && (!worker || queued.load() == 0); };
    while (!finished()) {
      if (runOne())
        continue;
      auto until = std::chrono::steady_clock::now() + kSpinMicroseconds;
      bool work = false;
      while (!work && !finished() && std::chrono::steady_clock::now() < until) {
        for (int i = 0; i < 32 && !work; ++i) {
          cpuRelax();
          work = queued.load(std::memory_order_relaxed) > 0;
        }
      }
      if (work || finished())
        continue;
      std::unique_lock<std::mutex> lock(sleepMutex);
      sleepers.fetch_add(1);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      sleepCv.wait(lock, [&] { return finished() || queued.load() > 0; });
      sleepers.fetch_sub(1);
    }
  }

private:
  bool runOne() {
    if (queued.load(std::memory_order_relaxed) == 0)
      return false;
    Task task;
    {
      std::lock_guard<SpinLock> lock(queueMutex);
      if (queue.empty())
        return false;
      task = queue.front();
      queue.pop_front();
    }
    queued.fetch_sub(1);
    task.resume(task.handle);
    return true;
  }

  const unsigned threads;
  SpinLock queueMutex;
  std::deque<Task> queue; // guarded by queueMutex
  std::atomic<int64_t> queued{0};
  std::mutex sleepMutex;
  std::condition_variable sleepCv;
  std::atomic<int> sleepers{0};
  std::atomic<bool> stopping{false};
  std::vector<std::thread> workers;
};

/// The process's scheduler, started on first use and stopped by the last
/// __mlir_execution_engine_destroy.
std::mutex schedulerMutex;
std::atomic<Scheduler *> currentScheduler{nullptr};
int engineUsers = 0; // guarded by schedulerMutex

Scheduler &scheduler() {
  Scheduler *s = currentScheduler.load(std::memory_order_acquire);
  if (s)
    return *s;
  std::lock_guard<std::mutex> lock(schedulerMutex);
  s = currentScheduler.load(std::memory_order_relaxed);
  if (!s) {
    s = new Scheduler(configuredThreads());
    currentScheduler.store(s, std::memory_order_release);
  }
  return *s;
}

void stopScheduler() {
  Scheduler *s = currentScheduler.load(std::memory_order_acquire);
  if (!s)
    return;
  s->stop();
  currentScheduler.store(nullptr, std::memory_order_release);
  delete s;
}

/// Stops the workers at exit (a process that never called the destroy
/// hook, e.g. one that linked the library).
struct StopAtExit {
  ~StopAtExit() { stopScheduler(); }
} stopAtExit;

//===----------------------------------------------------------------------===//
// Tokens, values and groups.
//===----------------------------------------------------------------------===//

enum State : int8_t { kUnavailable = 0, kAvailable = 1, kError = 2 };

/// What runs when an object completes: a coroutine to resume, or a group's
/// count to update.
struct Waiter {
  void (*run)(void *, void *);
  void *first;
  void *second;
};

/// The waiters of a token, value or group: each runs once, at once if the
/// object is complete when it is added, else when it completes.
class WaiterList {
public:
  template <typename Complete> void add(Waiter waiter, Complete complete) {
    {
      std::lock_guard<SpinLock> lock(mutex);
      if (!complete()) {
        waiters.push_back(waiter);
        return;
      }
    }
    waiter.run(waiter.first, waiter.second);
  }

  /// `publish()` (under the lock, for an object whose completion is not
  /// already visible) makes the object complete; then the waiters added
  /// before run, and blocked threads wake.
  template <typename Publish> void completeAndRun(Publish publish) {
    std::vector<Waiter> toRun;
    {
      std::lock_guard<SpinLock> lock(mutex);
      publish();
      toRun.swap(waiters);
    }
    for (const Waiter &w : toRun)
      w.run(w.first, w.second);
    scheduler().wake();
  }

private:
  SpinLock mutex;
  std::vector<Waiter> waiters; // guarded by mutex
};

class RefCounted {
public:
  explicit RefCounted(int64_t references) : references(references) {}
  virtual ~RefCounted() = default;
  RefCounted(const RefCounted &) = delete;
  RefCounted &operator=(const RefCounted &) = delete;

  void addRef(int64_t count) { references.fetch_add(count, std::memory_order_relaxed); }
  void dropRef(int64_t count) {
    if (references.fetch_sub(count, std::memory_order_acq_rel) == count)
      delete this;
  }

private:
  std::atomic<int64_t> references;
};

/// What a coroutine or a blocked thread waits for: a token, a value or a
/// group, complete once ready() holds.
class Awaitable : public RefCounted {
public:
  using RefCounted::RefCounted;
  virtual bool ready() const = 0;

  /// Runs `waiter` now if complete, else when it completes.
  void onReady(Waiter waiter) {
    waiters.add(waiter, [this] { return ready(); });
  }

  /// Blocks (running queued tasks) until complete.
  void await() {
    if (!ready())
      scheduler().waitUntil([this] { return ready(); });
  }

protected:
  WaiterList waiters;
};

/// A token or a value: unavailable until emplaced (or set to an error), then
/// final. Created with two references: the creator's and the one the
/// producer drops when it emplaces.
class Completion : public Awaitable {
public:
  Completion() : Awaitable(2) {}

  bool ready() const override { return state.load(std::memory_order_acquire) != kUnavailable; }
  bool error() const { return state.load(std::memory_order_acquire) == kError; }

  void complete(State final) {
    waiters.completeAndRun([&] { state.store(final, std::memory_order_release); });
    dropRef(1);
  }

private:
  std::atomic<int8_t> state{kUnavailable};
};

struct AsyncToken final : Completion {};

struct AsyncValue final : Completion {
  explicit AsyncValue(int64_t size)
      : storage(size > 0 ? new std::byte[static_cast<size_t>(size)]() : nullptr) {}
  std::unique_ptr<std::byte[]> storage;
};

/// A group of `size` tokens (or values): complete when all of them are.
class AsyncGroup final : public Awaitable {
public:
  explicit AsyncGroup(int64_t size) : Awaitable(1), pending(size) {}

  bool ready() const override { return pending.load(std::memory_order_acquire) == 0; }
  bool error() const { return errors.load(std::memory_order_acquire) > 0; }
  int64_t nextRank() { return rank.fetch_add(1, std::memory_order_relaxed); }

  void tokenReady(bool tokenError) {
    if (tokenError)
      errors.fetch_add(1, std::memory_order_acq_rel);
    // The last token: the count reached 0 before the lock, so a waiter
    // added meanwhile ran at once and the list holds only earlier ones.
    if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1)
      waiters.completeAndRun([] {});
  }

private:
  std::atomic<int64_t> pending;
  std::atomic<int64_t> errors{0};
  std::atomic<int64_t> rank{0};
};

void resumeCoroutine(void *handle, void *resume) {
  reinterpret_cast<CoroResume>(resume)(handle);
}

Waiter resumeWaiter(CoroHandle handle, CoroResume resume) {
  return Waiter{resumeCoroutine, handle, reinterpret_cast<void *>(resume)};
}

} // namespace

//===----------------------------------------------------------------------===//
// The C ABI (mlir/ExecutionEngine/AsyncRuntime.h).
//===----------------------------------------------------------------------===//

MOE_ASYNC_EXPORT void mlirAsyncRuntimeAddRef(void *object, int64_t count) {
  static_cast<RefCounted *>(object)->addRef(count);
}

MOE_ASYNC_EXPORT void mlirAsyncRuntimeDropRef(void *object, int64_t count) {
  static_cast<RefCounted *>(object)->dropRef(count);
}

MOE_ASYNC_EXPORT void *mlirAsyncRuntimeCreateToken() {
  return static_cast<RefCounted *>(new AsyncToken());
}

MOE_ASYNC_EXPORT void *mlirAsyncRuntimeCreateValue(int64_t size) {
  return static_cast<RefCounted *>(new AsyncValue(size));
}

MOE_ASYNC_EXPORT void *mlirAsyncRuntimeCreateGroup(int64_t size) {
  return static_cast<RefCounted *>(new AsyncGroup(size));
}

static AsyncToken *asToken(void *p) { return static_cast<AsyncToken *>(static_cast<RefCounted *>(p)); }
static AsyncValue *asValue(void *p) { return static_cast<AsyncValue *>(static_cast<RefCounted *>(p)); }
static AsyncGroup *asGroup(void *p) { return static_cast<AsyncGroup *>(static_cast<RefCounted *>(p)); }

MOE_ASYNC_EXPORT int64_t mlirAsyncRuntimeAddTokenToGroup(void *tokenPtr, void *groupPtr) {
  AsyncToken *token = asToken(tokenPtr);
  AsyncGroup *group = asGroup(groupPtr);
  int64_t rank = group->nextRank();
  // The group stays alive until the token has reported to it.
  group->addRef(1);
  token->onReady(Waiter{[](void *g, void *t) {
                          AsyncGroup *group = static_cast<AsyncGroup *>(g);
                          group->tokenReady(static_cast<AsyncToken *>(t)->error());
                          group->dropRef(1);
                        },
                        group, token});
  return rank;
}

MOE_ASYNC_EXPORT void mlirAsyncRuntimeEmplaceToken(void *token) {
  asToken(token)->complete(kAvailable);
}

MOE_ASYNC_EXPORT void mlirAsyncRuntimeEmplaceValue(void *value) {
  asValue(value)->complete(kAvailable);
}

MOE_ASYNC_EXPORT void mlirAsyncRuntimeSetTokenError(void *token) {
  asToken(token)->complete(kError);
}

MOE_ASYNC_EXPORT void mlirAsyncRuntimeSetValueError(void *value) {
  asValue(value)->complete(kError);
}

MOE_ASYNC_EXPORT bool mlirAsyncRuntimeIsTokenError(void *token) { return asToken(token)->error(); }

MOE_ASYNC_EXPORT bool mlirAsyncRuntimeIsValueError(void *value) { return asValue(value)->error(); }

MOE_ASYNC_EXPORT bool mlirAsyncRuntimeIsGroupError(void *group) { return asGroup(group)->error(); }

MOE_ASYNC_EXPORT void mlirAsyncRuntimeAwaitToken(void *token) { asToken(token)->await(); }

MOE_ASYNC_EXPORT void mlirAsyncRuntimeAwaitValue(void *value) { asValue(value)->await(); }

MOE_ASYNC_EXPORT void mlirAsyncRuntimeAwaitAllInGroup(void *group) { asGroup(group)->await(); }

MOE_ASYNC_EXPORT void *mlirAsyncRuntimeGetValueStorage(void *value) {
  return asValue(value)->storage.get();
}

MOE_ASYNC_EXPORT void mlirAsyncRuntimeExecute(CoroHandle handle, CoroResume resume) {
  scheduler().submit(Task{handle, resume});
}

MOE_ASYNC_EXPORT void mlirAsyncRuntimeAwaitTokenAndExecute(void *token, CoroHandle handle,
                                                          CoroResume resume) {
  asToken(token)->onReady(resumeWaiter(handle, resume));
}

MOE_ASYNC_EXPORT void mlirAsyncRuntimeAwaitValueAndExecute(void *value, CoroHandle handle,
                                                          CoroResume resume) {
  asValue(value)->onReady(resumeWaiter(handle, resume));
}

MOE_ASYNC_EXPORT void mlirAsyncRuntimeAwaitAllInGroupAndExecute(void *group, CoroHandle handle,
                                                               CoroResume resume) {
  asGroup(group)->onReady(resumeWaiter(handle, resume));
}

/// The threads that run tasks, the caller included (async-parallel-for
/// sizes its blocks from it). The spelling is MLIR's.
MOE_ASYNC_EXPORT int64_t mlirAsyncRuntimGetNumWorkerThreads() {
  return scheduler().concurrency();
}

MOE_ASYNC_EXPORT void mlirAsyncRuntimePrintCurrentThreadId() {
  std::printf("Current thread id: %zu\n", std::hash<std::thread::id>()(std::this_thread::get_id()));
  std::fflush(stdout);
}

//===----------------------------------------------------------------------===//
// ExecutionEngine integration.
//===----------------------------------------------------------------------===//

MOE_ASYNC_EXPORT void __mlir_execution_engine_init(llvm::StringMap<void *> &symbols) {
  {
    std::lock_guard<std::mutex> lock(schedulerMutex);
    ++engineUsers;
  }
  auto add = [&](const char *name, auto fn) {
    symbols[name] = reinterpret_cast<void *>(fn);
  };
  add("mlirAsyncRuntimeAddRef", &mlirAsyncRuntimeAddRef);
  add("mlirAsyncRuntimeDropRef", &mlirAsyncRuntimeDropRef);
  add("mlirAsyncRuntimeCreateToken", &mlirAsyncRuntimeCreateToken);
  add("mlirAsyncRuntimeCreateValue", &mlirAsyncRuntimeCreateValue);
  add("mlirAsyncRuntimeCreateGroup", &mlirAsyncRuntimeCreateGroup);
  add("mlirAsyncRuntimeAddTokenToGroup", &mlirAsyncRuntimeAddTokenToGroup);
  add("mlirAsyncRuntimeEmplaceToken", &mlirAsyncRuntimeEmplaceToken);
  add("mlirAsyncRuntimeEmplaceValue", &mlirAsyncRuntimeEmplaceValue);
  add("mlirAsyncRuntimeSetTokenError", &mlirAsyncRuntimeSetTokenError);
  add("mlirAsyncRuntimeSetValueError", &mlirAsyncRuntimeSetValueError);
  add("mlirAsyncRuntimeIsTokenError", &mlirAsyncRuntimeIsTokenError);
  add("mlirAsyncRuntimeIsValueError", &mlirAsyncRuntimeIsValueError);
  add("mlirAsyncRuntimeIsGroupError", &mlirAsyncRuntimeIsGroupError);
  add("mlirAsyncRuntimeAwaitToken", &mlirAsyncRuntimeAwaitToken);
  add("mlirAsyncRuntimeAwaitValue", &mlirAsyncRuntimeAwaitValue);
  add("mlirAsyncRuntimeAwaitAllInGroup", &mlirAsyncRuntimeAwaitAllInGroup);
  add("mlirAsyncRuntimeGetValueStorage", &mlirAsyncRuntimeGetValueStorage);
  add("mlirAsyncRuntimeExecute", &mlirAsyncRuntimeExecute);
  add("mlirAsyncRuntimeAwaitTokenAndExecute", &mlirAsyncRuntimeAwaitTokenAndExecute);
  add("mlirAsyncRuntimeAwaitValueAndExecute", &mlirAsyncRuntimeAwaitValueAndExecute);
  add("mlirAsyncRuntimeAwaitAllInGroupAndExecute", &mlirAsyncRuntimeAwaitAllInGroupAndExecute);
  add("mlirAsyncRuntimGetNumWorkerThreads", &mlirAsyncRuntimGetNumWorkerThreads);
  add("mlirAsyncRuntimePrintCurrentThreadId", &mlirAsyncRuntimePrintCurrentThreadId);
}

MOE_ASYNC_EXPORT void __mlir_execution_engine_destroy() {
  bool last;
  {
    std::lock_guard<std::mutex> lock(schedulerMutex);
    last = engineUsers > 0 && --engineUsers == 0;
  }
  if (last)
    stopScheduler();
}
