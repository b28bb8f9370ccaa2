//===- AsyncRuntime.h - MOE_CPU_THREADS of libMoEAsyncRuntime.so -*- C++ -*-===//
//
// The one reading of MOE_CPU_THREADS, the thread count of the CPU's
// parallel loops (runtime/cpu/AsyncRuntime.cpp), shared by the runtime
// (which warns and uses every CPU on a bad value) and moe-run (which
// refuses it before compiling). Header only: moe-run does not link the
// runtime, it loads it into its JIT.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_CPU_ASYNCRUNTIME_H
#define MOE_RUNTIME_CPU_ASYNCRUNTIME_H

#include <cstdlib>
#include <string>

/// The largest MOE_CPU_THREADS.
constexpr long kMoeMaxCpuThreads = 4096;

/// MOE_CPU_THREADS's value as a thread count in [1, kMoeMaxCpuThreads], or 0
/// when it is not one (decimal digits and nothing else: no sign, no space).
inline unsigned moeParseCpuThreads(const char *value) {
  if (*value < '0' || *value > '9')
    return 0;
  char *end = nullptr;
  long n = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || n < 1 || n > kMoeMaxCpuThreads)
    return 0;
  return static_cast<unsigned>(n);
}

/// What is wrong with a MOE_CPU_THREADS that moeParseCpuThreads refuses.
inline std::string moeCpuThreadsError(const char *value) {
  return "MOE_CPU_THREADS must be an integer in [1, " + std::to_string(kMoeMaxCpuThreads) +
         "], got '" + value + "'";
}

/// The thread count without MOE_CPU_THREADS: the `allowed` CPUs of the
/// affinity mask; when that mask is every one of the node's `online` CPUs
/// (the process is not bound) and `localRanks` (OpenMPI's
/// OMPI_COMM_WORLD_LOCAL_SIZE or MPICH's MPI_LOCALNRANKS, null outside
/// mpirun) says N > 1 ranks share the node, a 1/N share of them, so that
/// the ranks' workers do not outnumber the cores (idle workers spin before
/// they sleep). At least 1.
inline unsigned moeDefaultCpuThreads(unsigned allowed, unsigned online, const char *localRanks) {
  unsigned ranks = localRanks ? moeParseCpuThreads(localRanks) : 0;
  if (ranks > 1 && allowed >= online)
    allowed /= ranks;
  return allowed ? allowed : 1;
}

#endif // MOE_RUNTIME_CPU_ASYNCRUNTIME_H
