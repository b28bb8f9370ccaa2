//===- CpuRuntime.h - what CPU code lowered by moe-mlir calls --*- C++ -*-===//
//
// The host ABI of the CPU lowering's run-time checks: a violated check calls
// moeCpuIndexError with the kind of check, which prints one line on stderr
// and ends the process with exit code 1 (no abort, no core dump). The
// library depends on libc only; moe-run loads it into its JIT, an
// ahead-of-time library links it.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_RUNTIME_CPU_CPURUNTIME_H
#define MOE_RUNTIME_CPU_CPURUNTIME_H

#include <cstdint>

extern "C" {

/// The kinds of index data the lowered code validates (the values of
/// MoeIndexErrorKind, runtime/IndexErrors.h, which holds the wording).
enum MoeCpuIndexErrorKind : int32_t {
  /// moe.expert_ffn: offsets not non-decreasing within [0, rows].
  MOE_CPU_BAD_OFFSETS = 1,
  /// moe.combine: a position outside [-1, rows).
  MOE_CPU_BAD_POSITION = 2,
  /// moe.dispatch: an expert index outside [0, num_experts).
  MOE_CPU_BAD_EXPERT_DISPATCH = 3,
  /// moe.fused_experts: an expert index outside [0, num_experts).
  MOE_CPU_BAD_EXPERT_FUSED = 4,
};

/// Prints "moe-runtime: <what was wrong>" on stderr and exits with code 1.
[[noreturn]] void moeCpuIndexError(int32_t kind);

/// An expert index (MOE_CPU_BAD_EXPERT_*) outside [0, numExperts): prints
/// "moe-runtime: <op>: expert index <expert> of token <token>, slot <slot>
/// is outside [0, <numExperts>)" on stderr and exits with code 1. Any other
/// kind prints moeCpuIndexError's line (the emulated GPU path's host code,
/// test/lib/EmulateGPU.cpp, reports every kind through this function).
[[noreturn]] void moeCpuExpertIndexError(int32_t kind, int64_t token,
                                         int64_t slot, int64_t expert,
                                         int64_t numExperts);

// CpuRuntime.cpp also defines __truncsfbf2 (f32 -> bf16, round to nearest
// even), the libcall of bf16 conversions the x86 backend introduces on a CPU
// without AVX512_BF16; it is not declared here (compiler-rt's name).

/// An allocation of the lowered code failed: prints the size on stderr and
/// exits with code 1.
[[noreturn]] void moeCpuAllocError(int64_t bytes);

/// The lowered code is about to use the AMX tile unit (#moe.cpu_config's
/// amx): asks Linux for the tile state (arch_prctl ARCH_REQ_XCOMP_PERM,
/// XTILEDATA; process-wide) the first time, a no-op afterwards. If it is
/// refused (a kernel before 5.16, or a CPU without AMX), prints one line on
/// stderr and exits with code 1.
void moeCpuRequestAmx(void);

} // extern "C"

#endif // MOE_RUNTIME_CPU_CPURUNTIME_H
