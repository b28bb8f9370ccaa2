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

/// wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}.{bf16,f16} (sm_90a),
/// PTX ISA 9.7.15 "Asynchronous Warpgroup Level Matrix Multiply-Accumulate":
/// a warpgroup (4 consecutive warps, 128 threads) computes D (64 x N, f32,
/// in registers) += A (64 x 16) * B (16 x N), A and B read from shared
/// memory through 64-bit matrix descriptors.
struct Wgmma {
  static constexpr int64_t M = 64, K = 16;
  static constexpr int64_t kWarpgroupSize = 128;
  /// D (9.7.15.5.1, "Register Fragments", m64nNk16 with .f32 accumulators):
  /// N / 2 registers d_i per thread; warp w of the warpgroup holds rows
  /// 16 w .. 16 w + 15; d_i: row = 16 w + groupID + dRowOffset(i),
  /// col = 2 * tig + dColOffset(i) (the m16n8 C layout, repeated every 8
  /// columns).
  static constexpr int64_t dRowOffset(int64_t i) { return 8 * ((i % 4) / 2); }
  static constexpr int64_t dColOffset(int64_t i) { return 8 * (i / 4) + i % 2; }
  /// Shared memory (9.7.15.5.2, "Shared Memory Matrix Layout"), no swizzle:
  /// the operand is made of core matrices of 8 rows x 16 bytes, each 128
  /// contiguous bytes. K-major ("row" A, "col" B): a core row is 8
  /// consecutive k of one m (or n); MN-major (transposed, "row" B): a core
  /// row is 8 consecutive n of one k (for 16-bit elements; 16 / eltBytes
  /// in general). For 16-bit elements the core matrix holding (mn, k) is
  /// (mn / 8, k / 8), at start + (mn / 8) * SBO + (k / 8) * LBO bytes:
  /// LBO ("leading dimension byte offset") steps along K, SBO ("stride
  /// dimension byte offset") along M or N.
  static constexpr int64_t kCoreRows = 8, kCoreRowBytes = 16;
  static constexpr int64_t byteOffset(bool mnMajor, int64_t mn, int64_t k, int64_t lbo,
                                      int64_t sbo, int64_t eltBytes) {
    int64_t perRow = kCoreRowBytes / eltBytes; // 8 elements of 16 bits
    int64_t inCore = mnMajor ? (k % kCoreRows) * kCoreRowBytes + (mn % perRow) * eltBytes
                             : (mn % kCoreRows) * kCoreRowBytes + (k % perRow) * eltBytes;
    // A core matrix is 8 rows of perRow elements: rows along MN for
    // K-major, along K for MN-major.
    int64_t mnCore = mnMajor ? mn / perRow : mn / kCoreRows;
    int64_t kCore = mnMajor ? k / kCoreRows : k / perRow;
    return mnCore * sbo + kCore * lbo + inCore;
  }
  /// The matrix descriptor (9.7.15.5.1.1, "Matrix Descriptor Format"), 64
  /// bits: bits 0-13 the start address, 16-29 LBO, 32-45 SBO (each in bytes
  /// >> 4, so 16-byte aligned), 49-51 the base offset (0 without swizzle),
  /// 62-63 the swizzle mode (0: none, 1: 128B, 2: 64B, 3: 32B).
  static constexpr int64_t kStartShift = 0, kLboShift = 16, kSboShift = 32;
  static constexpr int64_t kFieldMask = 0x3FFF, kSwizzleShift = 62;
  static constexpr uint64_t descriptor(uint64_t start, uint64_t lbo, uint64_t sbo) {
    return (((start >> 4) & kFieldMask) << kStartShift) | (((lbo >> 4) & kFieldMask) << kLboShift) |
           (((sbo >> 4) & kFieldMask) << kSboShift);
  }
};
static_assert(Wgmma::byteOffset(false, 9, 10, 1024, 128, 2) == 128 + 1024 + 16 + 4);
static_assert(Wgmma::byteOffset(true, 9, 10, 2048, 128, 2) == 128 + 2048 + 32 + 2);

} // namespace warp_layout
} // namespace gpu_lowering
} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_GPU_WARPLAYOUTS_H
