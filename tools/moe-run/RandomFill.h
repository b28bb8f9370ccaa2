//===- RandomFill.h - moe-run: the values of --fill-random ------*- C++ -*-===//
//
// The deterministic values --fill-random gives the arguments not bound by a
// file (moe-run --help describes them): a splitmix64 generator seeded with
// --seed gives one output per argument, which seeds that argument's own
// splitmix64 stream; float elements are Box-Muller normals times a scale
// (1/sqrt(fan-in) for parameters), integer elements the seed itself.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TOOLS_MOE_RUN_RANDOMFILL_H
#define MOE_TOOLS_MOE_RUN_RANDOMFILL_H

#include "tools/moe-run/Backend.h"

#include <cmath>
#include <cstdint>

namespace moe {
namespace run {

/// The splitmix64 generator.
struct SplitMix64 {
  static constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
  uint64_t state;
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += kGamma);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in (0, 1].
  double uniform() {
    return static_cast<double>((next() >> 11) + 1) * 0x1.0p-53;
  }
  double normal() {
    double u1 = uniform();
    double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
};

/// The factor --fill-random gives argument `info` of concrete shape `shape`:
/// 1 for inputs and rank-0 parameters, 1/sqrt(fan-in) for the others (K of
/// [.., K, N], N of [N]).
double fillScale(const ValueInfo &info, const std::vector<int64_t> &shape);

/// Fills `tensor` (argument `info`, already allocated with its concrete
/// shape) from the stream seeded with `streamSeed`; integer tensors get
/// `userSeed` (--seed) in every element. Spread over the threads; the
/// values do not depend on how.
void fillRandomValues(HostTensor &tensor, const ValueInfo &info,
                      uint64_t streamSeed, uint64_t userSeed);

} // namespace run
} // namespace moe

#endif // MOE_TOOLS_MOE_RUN_RANDOMFILL_H
