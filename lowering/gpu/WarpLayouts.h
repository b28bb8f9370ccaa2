//===- WarpLayouts.h - fragment layouts of the warp-level ops ---*- C++ -*-===//
//
// The documented distribution of matrix elements over the 32 lanes of a
// warp, written once. The tensor-core GEMMs (MmaGemm.cpp) place their
// operands so that these layouts hold, and the host emulation
// (EmulateGPU.cpp, --moe-test-emulate-gpu) executes ldmatrix and mma.sync
// from these tables: a kernel that feeds a fragment in the wrong order gets
// wrong numbers in the emulation, as it would on the GPU.
//
// Source: PTX ISA 8.x (docs.nvidia.com/cuda/parallel-thread-execution),
// - 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16 with floating point type"
//   (.f16 / .bf16 multiplicands, .f32 accumulators);
// - 9.7.14.5.15 "Warp-level matrix load instruction: ldmatrix".
// With groupID = laneid >> 2 and threadID_in_group = laneid % 4, every
// element position below is (groupID + rowOffset, 2 * threadID_in_group +
// colOffset) for A, C and D; B is stored "col" (k down the column), its
// element (2 * threadID_in_group + kOffset, groupID).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_GPU_WARPLAYOUTS_H
#define MOE_LOWERING_GPU_WARPLAYOUTS_H

#include <cstdint>

namespace mlir {
namespace moe {
namespace gpu_lowering {
namespace warp_layout {

constexpr int64_t kWarpSize = 32;

/// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32.
struct M16N8K16 {
  static constexpr int64_t M = 16, N = 8, K = 16;
  /// A (16 x 16, row-major operand): 4 registers of 2 elements, a0..a7,
  /// register r holds a_{2r}, a_{2r+1}.
  /// a_i: row = groupID + 8 * ((i / 2) % 2), col = 2 * tig + i % 2 + 8 * (i / 4).
  static constexpr int64_t kARegs = 4;
  static constexpr int64_t aRowOffset(int64_t i) { return 8 * ((i / 2) % 2); }
  static constexpr int64_t aColOffset(int64_t i) { return i % 2 + 8 * (i / 4); }
  /// B (16 x 8, "col" operand): 2 registers, b0..b3.
  /// b_i: k = 2 * tig + i % 2 + 8 * (i / 2), n = groupID.
  static constexpr int64_t kBRegs = 2;
  static constexpr int64_t bKOffset(int64_t i) { return i % 2 + 8 * (i / 2); }
  /// C and D (16 x 8, f32): c0..c3.
  /// c_i: row = groupID + 8 * (i / 2), col = 2 * tig + i % 2.
  static constexpr int64_t kCRegs = 4;
  static constexpr int64_t cRowOffset(int64_t i) { return 8 * (i / 2); }
  static constexpr int64_t cColOffset(int64_t i) { return i % 2; }
};

/// ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16: lanes 8j..8j+7
/// give the addresses of rows 0..7 of matrix j; destination register j of
/// every lane receives two 16-bit elements of matrix j:
/// - without .trans: row = groupID, cols 2 * tig + h (h = 0, 1);
/// - with .trans:    rows 2 * tig + h, col = groupID (the transpose).
struct LdMatrix {
  static constexpr int64_t kRowsPerMatrix = 8;
  /// The lane whose address gives row `row` of matrix `j`.
  static constexpr int64_t addressLane(int64_t j, int64_t row) { return 8 * j + row; }
};

} // namespace warp_layout
} // namespace gpu_lowering
} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_GPU_WARPLAYOUTS_H
