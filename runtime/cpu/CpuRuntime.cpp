//===- CpuRuntime.cpp - what CPU code lowered by moe-mlir calls ----------===//

#include "runtime/cpu/CpuRuntime.h"
#include "runtime/IndexErrors.h"

#include <cstdio>
#include <unistd.h>

/// One line "moe-runtime: <message>" (runtime/IndexErrors.h), then exit 1.
[[noreturn]] static void report(int32_t kind, int64_t token, int64_t slot, int64_t expert,
                                int64_t numExperts) {
  char message[256];
  moeFormatIndexError(message, sizeof(message), kind, token, slot, expert, numExperts);
  std::fflush(stdout);
  std::fprintf(stderr, "moe-runtime: %s\n", message);
  std::fflush(stderr);
  // Parallel workers may still run: leave at once, without destructors.
  _exit(1);
}

extern "C" void moeCpuIndexError(int32_t kind) { report(kind, 0, 0, 0, 0); }

extern "C" void moeCpuExpertIndexError(int32_t kind, int64_t token, int64_t slot,
                                       int64_t expert, int64_t numExperts) {
  report(kind, token, slot, expert, numExperts);
}

extern "C" void moeCpuAllocError(int64_t bytes) {
  std::fflush(stdout);
  std::fprintf(stderr,
               "moe-runtime: out of memory: a buffer of %lld bytes could not be allocated\n",
               static_cast<long long>(bytes));
  std::fflush(stderr);
  _exit(1);
}
