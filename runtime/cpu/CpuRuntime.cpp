//===- CpuRuntime.cpp - what CPU code lowered by moe-mlir calls ----------===//

#include "runtime/cpu/CpuRuntime.h"

#include <cstdio>
#include <unistd.h>

extern "C" void moeCpuIndexError(int32_t kind) {
  const char *what = "an index check failed";
  switch (kind) {
  case MOE_CPU_BAD_OFFSETS:
    what = "moe.expert_ffn: the offsets are not a non-decreasing sequence within [0, "
           "number of rows]";
    break;
  case MOE_CPU_BAD_POSITION:
    what = "moe.combine: a position is outside [-1, number of expert output rows)";
    break;
  default:
    break;
  }
  std::fflush(stdout);
  std::fprintf(stderr, "moe-runtime: %s\n", what);
  std::fflush(stderr);
  // Parallel workers may still run: leave at once, without destructors.
  _exit(1);
}

extern "C" void moeCpuExpertIndexError(int32_t kind, int64_t token, int64_t slot,
                                       int64_t expert, int64_t numExperts) {
  const char *op = kind == MOE_CPU_BAD_EXPERT_FUSED ? "moe.fused_experts" : "moe.dispatch";
  std::fflush(stdout);
  std::fprintf(stderr,
               "moe-runtime: %s: expert index %lld of token %lld, slot %lld is outside "
               "[0, %lld)\n",
               op, static_cast<long long>(expert), static_cast<long long>(token),
               static_cast<long long>(slot), static_cast<long long>(numExperts));
  std::fflush(stderr);
  _exit(1);
}

extern "C" void moeCpuAllocError(int64_t bytes) {
  std::fflush(stdout);
  std::fprintf(stderr,
               "moe-runtime: out of memory: a buffer of %lld bytes could not be allocated\n",
               static_cast<long long>(bytes));
  std::fflush(stderr);
  _exit(1);
}
