//===- Philox.h - Philox4x32-10 counter-based RNG (reference) ---*- C++ -*-===//
//
// Independent reference implementation of the Philox4x32-10 generator of
// Random123 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3",
// SC'11), as used by moe.layer's MOESART training routing (docs/spec.md §3.1).
//
// No dependency on MLIR or on anything else in the repository.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TEST_REFERENCE_PHILOX_H
#define MOE_TEST_REFERENCE_PHILOX_H

#include <array>
#include <cstdint>

namespace moe {
namespace ref {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

/// Random123 constants.
constexpr uint32_t kPhiloxM0 = 0xD2511F53u; // multiplier applied to ctr[0]
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u; // multiplier applied to ctr[2]
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u; // Weyl key increment, key[0]
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u; // Weyl key increment, key[1]

/// One Philox4x32 round:
///   (hi0, lo0) = M0 * ctr[0], (hi1, lo1) = M1 * ctr[2]  (32x32 -> 64 bit)
///   out = { hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0 }
inline PhiloxCounter philoxRound(const PhiloxCounter &ctr,
                                 const PhiloxKey &key) {
  uint64_t p0 = uint64_t(kPhiloxM0) * uint64_t(ctr[0]);
  uint64_t p1 = uint64_t(kPhiloxM1) * uint64_t(ctr[2]);
  uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
  uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
  return {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
}

/// Philox4x32 with `rounds` rounds (10 for Philox4x32-10): round, then for
/// every further round bump the key by the Weyl constants and round again.
inline PhiloxCounter philox4x32(PhiloxCounter ctr, PhiloxKey key,
                                unsigned rounds = 10) {
  for (unsigned r = 0; r < rounds; ++r) {
    if (r != 0) {
      key[0] += kPhiloxW0;
      key[1] += kPhiloxW1;
    }
    ctr = philoxRound(ctr, key);
  }
  return ctr;
}

/// Philox4x32-10.
inline PhiloxCounter philox4x32_10(const PhiloxCounter &ctr,
                                   const PhiloxKey &key) {
  return philox4x32(ctr, key, 10);
}

/// The key for a 64-bit seed: (low word, high word).
inline PhiloxKey philoxKeyFromSeed(uint64_t seed) {
  return {uint32_t(seed & 0xFFFFFFFFu), uint32_t(seed >> 32)};
}

/// u = (bits >> 8) * 2^-24: a uniform in [0, 1) with 24 significant bits, so
/// it is exactly representable as a float (and as a double).
inline float uniformFromBits(uint32_t bits) {
  return float(bits >> 8) * (1.0f / 16777216.0f);
}

/// The uniform that moe.layer's training routing uses for token `t`, draw
/// `r`: key = seed (low, high), counter = (t, r, 0, 0), u from out[0].
inline float philoxUniform(uint64_t seed, uint32_t token, uint32_t draw) {
  PhiloxCounter out =
      philox4x32_10({token, draw, 0u, 0u}, philoxKeyFromSeed(seed));
  return uniformFromBits(out[0]);
}

} // namespace ref
} // namespace moe

#endif // MOE_TEST_REFERENCE_PHILOX_H
