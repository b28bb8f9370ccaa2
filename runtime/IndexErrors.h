/*===- IndexErrors.h - the one wording of the run-time index checks -*- C -*-===*
 *
 * The lines a violated index check of lowered code prints (docs/spec.md
 * §3.3), shared by the CPU runtime (runtime/cpu: moeCpuIndexError,
 * moeCpuExpertIndexError) and the CUDA runtime (runtime/cuda:
 * moeRuntimeIndexError, fed by the GPU kernels' error word), so that both
 * paths report bad index data with the same words. Header-only, libc only,
 * C and C++.
 *===----------------------------------------------------------------------===*/
#ifndef MOE_RUNTIME_INDEXERRORS_H
#define MOE_RUNTIME_INDEXERRORS_H

#include <stdint.h>
#include <stdio.h>

/* The kinds of index data the lowered code validates (the values are part
 * of the ABI of both runtimes and of the GPU kernels' error word). */
enum MoeIndexErrorKind {
  /* moe.expert_ffn: offsets not non-decreasing within [0, rows]. */
  MOE_INDEX_BAD_OFFSETS = 1,
  /* moe.combine: a position outside [-1, rows). */
  MOE_INDEX_BAD_POSITION = 2,
  /* moe.dispatch: an expert index outside [0, num_experts). */
  MOE_INDEX_BAD_EXPERT_DISPATCH = 3,
  /* moe.fused_experts: an expert index outside [0, num_experts). */
  MOE_INDEX_BAD_EXPERT_FUSED = 4,
};

/* Writes the message of a violated check of `kind` (without the
 * "moe-runtime: " prefix and without a newline) into `buffer`:
 *   moe.expert_ffn: the offsets are not a non-decreasing sequence within
 *     [0, number of rows]
 *   moe.combine: a position is outside [-1, number of expert output rows)
 *   moe.dispatch: expert index <value> of token <token>, slot <slot> is
 *     outside [0, <numExperts>)          (moe.fused_experts alike)
 * `token`, `slot`, `value` and `numExperts` are used by the expert kinds
 * only. Returns what snprintf returns. */
static inline int moeFormatIndexError(char *buffer, size_t size, int32_t kind,
                                      int64_t token, int64_t slot,
                                      int64_t value, int64_t numExperts) {
  switch (kind) {
  case MOE_INDEX_BAD_OFFSETS:
    return snprintf(buffer, size,
                    "moe.expert_ffn: the offsets are not a non-decreasing "
                    "sequence within [0, number of rows]");
  case MOE_INDEX_BAD_POSITION:
    return snprintf(buffer, size,
                    "moe.combine: a position is outside [-1, number of expert "
                    "output rows)");
  case MOE_INDEX_BAD_EXPERT_DISPATCH:
  case MOE_INDEX_BAD_EXPERT_FUSED:
    return snprintf(buffer, size,
                    "%s: expert index %lld of token %lld, slot %lld is outside "
                    "[0, %lld)",
                    kind == MOE_INDEX_BAD_EXPERT_FUSED ? "moe.fused_experts"
                                                       : "moe.dispatch",
                    (long long)value, (long long)token, (long long)slot,
                    (long long)numExperts);
  default:
    return snprintf(buffer, size, "an index check failed (kind %d)", (int)kind);
  }
}

#endif /* MOE_RUNTIME_INDEXERRORS_H */
