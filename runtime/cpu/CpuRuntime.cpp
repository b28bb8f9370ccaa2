//===- CpuRuntime.cpp - what CPU code lowered by moe-mlir calls ----------===//

#include "runtime/cpu/CpuRuntime.h"
#include "runtime/IndexErrors.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#endif

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

extern "C" void moeCpuRequestAmx(void) {
  static std::atomic<bool> granted{false};
  if (granted.load(std::memory_order_acquire))
    return;
#if defined(__linux__) && defined(__x86_64__)
  // ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 (asm/prctl.h).
  // Granting it again is harmless, so racing first calls need no lock.
  if (syscall(SYS_arch_prctl, 0x1023, 18) == 0) {
    granted.store(true, std::memory_order_release);
    return;
  }
  const char *why = std::strerror(errno);
#else
  const char *why = "not Linux on x86-64";
#endif
  std::fflush(stdout);
  std::fprintf(stderr,
               "moe-runtime: the AMX tile state is not available (%s); compile for a CPU "
               "without AMX (e.g. --moe-cpu-configure=features=-amx-tile)\n",
               why);
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

/// f32 -> bf16, rounded to nearest even; a NaN stays a NaN (quiet, with its
/// sign and top payload bits). The x86 backend calls this (compiler-rt's
/// name) for conversions it introduces itself on a CPU without AVX512_BF16,
/// e.g. when it moves the lanes of a select of bf16 vectors through f32
/// registers: those values came from bf16, so any correct rounding returns
/// them unchanged. Neither libc nor Debian 12's libgcc (GCC 12) defines it;
/// without it the JIT cannot resolve the call and an ahead-of-time library
/// does not link. The lowered code does not call it: its own conversions are
/// integer arithmetic (--moe-host-expand-bf16, with the same rounding) and
/// its bf16 loads and stores move i16 (--moe-host-bf16-memory-as-i16), so
/// LLVM makes no bf16 select (test/tools/moe-compile/portable-cpu.test
/// checks the libraries for calls); it stays for code that does.
extern "C" __bf16 __truncsfbf2(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  uint16_t half;
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    half = static_cast<uint16_t>((bits >> 16) | 0x0040u);
  else
    half = static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
  __bf16 result;
  std::memcpy(&result, &half, sizeof(result));
  return result;
}
