//===- EmulationOpenMP.cpp - the OpenMP runtime of the GPU emulation ------===//
//
// libMoEEmulationOpenMP.so: the part of the OpenMP runtime ABI that the
// host emulation of the GPU kernels calls (--moe-test-emulate-gpu turns a
// block into an `omp.parallel` of blockDim threads and `gpu.barrier` into
// `omp.barrier`), implemented with user-level fibers on the calling thread
// instead of OS threads. An emulated block is 128 or 256 threads on a
// machine of two cores: with libomp every barrier is a round of futex
// wake-ups and context switches for all of them (the system time exceeded
// the computation), here it is one user-level switch per thread, and the
// tests spawn no threads at all. The lit tests load it in place of libomp
// (%emulation_omp, test/lit.cfg.py).
//
// Semantics: __kmpc_fork_call runs the team's threads one after the other,
// each until it reaches a barrier or returns; a barrier completes when every
// thread of the team has reached it (or returned). Thread ids, the order of
// a round (thread 0 first) and hence the results are deterministic. A
// parallel region inside a team thread runs as a team of one, as libomp
// does for nested parallelism by default. Anything the emulation does not
// call is not provided: a test that needs more fails to resolve the symbol.
//
//===----------------------------------------------------------------------===//

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace {

using Microtask = void (*)(int32_t *, int32_t *, ...);

[[noreturn]] void fatal(const char *message) {
  std::fprintf(stderr, "moe-emulation-openmp: %s\n", message);
  std::fflush(stderr);
  std::_Exit(1);
}

/// 1 MiB of stack per emulated thread (mapped lazily), with a guard page
/// below it, so an overflow faults instead of corrupting a neighbour.
constexpr size_t kStackBytes = size_t(1) << 20;

#if defined(__x86_64__)
// switchContext(&from, to): saves the callee-saved registers, MXCSR and the
// x87 control word on the current stack, stores the stack pointer into
// *from, and resumes the context whose stack pointer is `to`.
extern "C" void moeEmulationSwitch(void **from, void *to);
asm(R"(
  .text
  .p2align 4
  .type moeEmulationSwitch,@function
moeEmulationSwitch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size moeEmulationSwitch, .-moeEmulationSwitch
)");
#endif

struct Fiber {
  char *stack = nullptr; // the mapping, guard page first
  size_t mapped = 0;
#if defined(__x86_64__)
  void *sp = nullptr;
#else
  ucontext_t context;
#endif
  int32_t id = 0;
  bool done = false;
};

struct Team {
  Microtask task = nullptr;
  std::vector<void *> args;
  std::vector<Fiber> fibers;
  Fiber *current = nullptr;
  int32_t size = 0;
#if defined(__x86_64__)
  void *scheduler = nullptr;
#else
  ucontext_t scheduler;
#endif
  bool active = false;
};

Team team;
int32_t requestedThreads = 0;
/// > 0 inside a nested region (a team of one).
int nested = 0;

bool inTeam() { return team.current && nested == 0; }

void invoke(Microtask task, int32_t *gtid, int32_t *btid, const std::vector<void *> &a) {
  switch (a.size()) {
  case 0: return task(gtid, btid);
  case 1: return task(gtid, btid, a[0]);
  case 2: return task(gtid, btid, a[0], a[1]);
  case 3: return task(gtid, btid, a[0], a[1], a[2]);
  case 4: return task(gtid, btid, a[0], a[1], a[2], a[3]);
  case 5: return task(gtid, btid, a[0], a[1], a[2], a[3], a[4]);
  case 6: return task(gtid, btid, a[0], a[1], a[2], a[3], a[4], a[5]);
  case 7: return task(gtid, btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
  case 8: return task(gtid, btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
  default: fatal("a parallel region with more than 8 captured arguments");
  }
}

void yieldToScheduler() {
  Fiber *f = team.current;
#if defined(__x86_64__)
  moeEmulationSwitch(&f->sp, team.scheduler);
#else
  swapcontext(&f->context, &team.scheduler);
#endif
}

/// The body of every fiber: the team's microtask with this fiber's ids.
extern "C" void moeEmulationFiberMain() {
  Fiber *f = team.current;
  int32_t gtid = f->id, btid = f->id;
  invoke(team.task, &gtid, &btid, team.args);
  f->done = true;
  yieldToScheduler();
  fatal("a finished emulated thread was resumed");
}

void prepare(Fiber &f) {
  if (!f.stack) {
    size_t page = size_t(sysconf(_SC_PAGESIZE));
    f.mapped = kStackBytes + page;
    void *m = mmap(nullptr, f.mapped, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED)
      fatal("cannot map the stack of an emulated thread");
    f.stack = static_cast<char *>(m);
    mprotect(f.stack, page, PROT_NONE);
  }
  f.done = false;
#if defined(__x86_64__)
  // The frame moeEmulationSwitch pops: control words, r15..rbp, then the
  // return address moeEmulationFiberMain, 16-byte aligned as after a call.
  auto top = reinterpret_cast<uintptr_t>(f.stack + f.mapped) & ~uintptr_t(15);
  auto *slot = reinterpret_cast<uint64_t *>(top - 16);
  slot[0] = reinterpret_cast<uint64_t>(&moeEmulationFiberMain);
  slot[1] = 0;
  uint64_t *frame = slot - 7;
  uint32_t mxcsr;
  uint16_t fpucw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  std::memset(frame, 0, 7 * sizeof(uint64_t));
  std::memcpy(reinterpret_cast<char *>(frame), &mxcsr, 4);
  std::memcpy(reinterpret_cast<char *>(frame) + 4, &fpucw, 2);
  f.sp = frame;
#else
  getcontext(&f.context);
  f.context.uc_stack.ss_sp = f.stack + (f.mapped - kStackBytes);
  f.context.uc_stack.ss_size = kStackBytes;
  f.context.uc_link = nullptr;
  makecontext(&f.context, moeEmulationFiberMain, 0);
#endif
}

void runTeam(int32_t n) {
  if (team.fibers.size() < size_t(n))
    team.fibers.resize(n);
  for (int32_t i = 0; i < n; ++i) {
    team.fibers[i].id = i;
    prepare(team.fibers[i]);
  }
  team.active = true;
  team.size = n;
  int32_t live = n;
  while (live > 0) {
    // One round: every live thread runs to its next barrier or its end.
    for (int32_t i = 0; i < n; ++i) {
      Fiber &f = team.fibers[i];
      if (f.done)
        continue;
      team.current = &f;
#if defined(__x86_64__)
      moeEmulationSwitch(&team.scheduler, f.sp);
#else
      swapcontext(&team.scheduler, &f.context);
#endif
      if (f.done)
        --live;
    }
  }
  team.current = nullptr;
  team.active = false;
}

} // namespace

extern "C" {

int32_t __kmpc_global_thread_num(void *) { return inTeam() ? team.current->id : 0; }

int32_t omp_get_thread_num() { return inTeam() ? team.current->id : 0; }

int32_t omp_get_num_threads() { return inTeam() ? team.size : 1; }

void __kmpc_push_num_threads(void *, int32_t, int32_t n) { requestedThreads = n; }

void __kmpc_barrier(void *, int32_t) {
  if (inTeam())
    yieldToScheduler();
}

void __kmpc_fork_call(void *, int32_t argc, Microtask task, ...) {
  std::vector<void *> args(argc);
  va_list ap;
  va_start(ap, task);
  for (int32_t i = 0; i < argc; ++i)
    args[i] = va_arg(ap, void *);
  va_end(ap);
  int32_t n = requestedThreads > 0 ? requestedThreads : 1;
  requestedThreads = 0;
  if (team.active) {
    // Nested: a team of one, in the calling thread.
    int32_t zero = 0;
    ++nested;
    invoke(task, &zero, &zero, args);
    --nested;
    return;
  }
  team.task = task;
  team.args = std::move(args);
  runTeam(n);
}

} // extern "C"
