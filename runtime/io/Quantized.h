//===- Quantized.h - Quantized checkpoint tensor formats --------*- C++ -*-===//
//
// The quantized weight formats of the MoE checkpoints people serve, as their
// writers define them (docs/quantization.md has the sources), decoded to f32:
//
//   FP8 block-scaled (DeepSeek-V3/R1, Qwen3 FP8, compressed-tensors
//   FP8_BLOCK): `weight` F8_E4M3 [N, K] ([out, in]) and a scale S (DeepSeek's
//   `weight_scale_inv`, which multiplies despite its name; F32 or BF16)
//   [ceil(N/bN), ceil(K/bK)]:  W[k][n] = q[n][k] * S[n/bN][k/bK].
//
//   GPTQ (AutoGPTQ): `qweight` I32 [K/8, N], row k in the 4 bits at
//   4*(k%8) of word [k/8][n]; `qzeros` I32 [G, N/8], the zero of (g, n) in
//   the 4 bits at 4*(n%8) of word [g][n/8], stored minus one; `scales`
//   [G, N]; optional `g_idx` I32 [K] (row k's group; default k/group):
//   W[k][n] = scales[g][n] * (q - (z + 1)).
//
//   AWQ GEMM (AutoAWQ): `qweight` I32 [K, N/8] packed along N, the nibble
//   at 4*p of word [k][w] holding column 8*w + {0,2,4,6,1,3,5,7}[p];
//   `qzeros` I32 [G, N/8] with the same interleave (not minus one);
//   `scales` [G, N]:  W[k][n] = scales[k/group][n] * (q - z).
//
//   compressed-tensors pack-quantized int4: `weight_packed` I32
//   [N, ceil(K/8)], element k of row n in the 4 bits at 4*(k%8) of word
//   [n][k/8], stored plus 8; `weight_scale` [N, ceil(K/group)];
//   symmetric: W[k][n] = weight_scale[n][k/group] * (u - 8); asymmetric:
//   `weight_zero_point` I32 [ceil(N/8), ceil(K/group)], the zero of (n, g)
//   in the 4 bits at 4*(n%8) of word [n/8][g] (packed along N), stored plus
//   8 too: W[k][n] = weight_scale[n][k/group] * (u - z).
//
// Every function returns W as an F32 tensor [K, N] (in, out: the layout of
// the moe dialect's expert weights) and computes each value as one f32
// product of two exact factors (the 8-bit float or the integer difference,
// and the scale widened exactly), so the result is the exactly rounded
// product. Scales may be F32, BF16 or F16. K and N need not be multiples of
// the block, the group or 8 (the last block or group is partial; packed
// words beyond K or N are ignored). Errors name the tensor at fault:
// "NAME.scales: shape [3, 8], expected [2, 8] (...)".
//
// Plain C++17 like the rest of runtime/io: no MLIR/LLVM dependency.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_IO_QUANTIZED_H
#define MOE_RUNTIME_IO_QUANTIZED_H

#include "runtime/io/TensorIO.h"

#include <cstdint>
#include <string_view>

namespace moe {
namespace io {

/// The value of an FP8 E4M3 ("e4m3fn") bit pattern, exactly: 1 sign bit, 4
/// exponent bits (bias 7), 3 fraction bits; exponent 0 is subnormal
/// (m * 2^-9); S.1111.111 is NaN (the sign kept); there are no infinities;
/// the largest finite value is 448.
float fp8E4M3ToFloat(uint8_t bits);
/// The E4M3 bit pattern nearest to `value` (ties to even), saturating: a
/// finite value or infinity beyond +-448 gives +-448; NaN gives S.1111.111.
uint8_t floatToFp8E4M3(float value);

/// FP8 block-scaled: `weight` F8E4M3 [N, K], `scale` [ceil(N/blockN),
/// ceil(K/blockK)] (F32, BF16 or F16); blocks of at least 1.
Result<Tensor> dequantizeFp8Block(const Tensor &weight, const Tensor &scale,
                                  int64_t blockN, int64_t blockK,
                                  std::string_view name);

/// GPTQ: `qweight` I32 [K/8, N] (K = 8 * rows), `qzeros` I32
/// [ceil(K/group), ceil(N/8)], `scales` [ceil(K/group), N], `gIdx` I32 [K]
/// or null (then row k is in group k / group).
Result<Tensor> dequantizeGptq(const Tensor &qweight, const Tensor &qzeros,
                              const Tensor &scales, const Tensor *gIdx,
                              int64_t group, std::string_view name);

/// AWQ GEMM: `qweight` I32 [K, ceil(N/8)], `qzeros` I32 [ceil(K/group),
/// ceil(N/8)], `scales` [ceil(K/group), N]; N is the scales' width.
Result<Tensor> dequantizeAwq(const Tensor &qweight, const Tensor &qzeros,
                             const Tensor &scales, int64_t group,
                             std::string_view name);

/// compressed-tensors pack-quantized int4: `packed` I32 [N, ceil(K/8)],
/// `scale` [N, ceil(K/group)], and for an asymmetric checkpoint
/// `zeroPoint` I32 [ceil(N/8), ceil(K/group)] (null: symmetric, zero 8); K
/// is given (the packed shape rounds it up).
Result<Tensor> dequantizePackQuantized(const Tensor &packed,
                                       const Tensor &scale, int64_t k,
                                       int64_t group, std::string_view name,
                                       const Tensor *zeroPoint = nullptr);

} // namespace io
} // namespace moe

#endif // MOE_RUNTIME_IO_QUANTIZED_H
