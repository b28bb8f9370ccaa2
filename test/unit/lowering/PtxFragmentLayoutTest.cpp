//===- PtxFragmentLayoutTest.cpp - WarpLayouts.h against the PTX ISA ------===//
//
// Checks lowering/gpu/WarpLayouts.h, the one statement of the warp-level
// fragment layouts that both the tensor-core kernels (MmaGemm.cpp) and the
// host emulation (EmulateGPU.cpp) read, against tables written here as
// literal data from the PTX ISA (docs.nvidia.com/cuda/parallel-thread-
// execution), not from the header's arithmetic:
//  * "Matrix Fragments for mma.m16n8k16 with floating point type"
//    (9.7.14.5.8): A (.f16/.bf16, a0..a7), B (b0..b3), C/D (.f32, c0..c3),
//    for every lane, plus lanes 0, 5 and 31 copied by hand from the figures;
//  * "Warp-level matrix load instruction: ldmatrix" (9.7.14.5.15),
//    m8n8 .b16 with and without .trans: which lane gives which row address,
//    which elements a lane receives, and that ldmatrix.x4 (.trans for B)
//    with the kernels' lane addresses yields the mma.m16n8k16 fragments;
//  * "Register Fragments" of wgmma.mma_async m64nNk16 (9.7.15.5.1.1), the
//    f32 accumulator D for N = 128 over the 128 threads of a warpgroup;
//  * "Shared Memory Matrix Layout" without swizzling (8 x 16-byte core
//    matrices of 128 contiguous bytes, K-major and MN-major) and "Matrix
//    Descriptor Format" (start address bits 0-13, LBO 16-29, SBO 32-45,
//    each >> 4; base offset 49-51; swizzle mode 62-63).
// Every mapping is also checked to be a bijection onto its matrix.
//
//===----------------------------------------------------------------------===//

#include "lowering/gpu/WarpLayouts.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

namespace {

namespace wl = mlir::moe::gpu_lowering::warp_layout;
using Pos = std::pair<int64_t, int64_t>; // (row, col) or (k, n)

// The ISA's thread coordinates: groupID = %laneid >> 2,
// threadID_in_group = %laneid % 4.
int64_t groupID(int64_t lane) { return lane >> 2; }
int64_t threadInGroup(int64_t lane) { return lane & 3; }

//===----------------------------------------------------------------------===//
// The ISA tables, as data.
//===----------------------------------------------------------------------===//

// mma.m16n8k16, A (.f16/.bf16): "row = groupID for a0, a1, a4, a5;
// groupID + 8 otherwise; col = threadID_in_group * 2 + (i & 0x1) for i < 4,
// + 8 for i >= 4". Element i: row = groupID + kARowAdd[i],
// col = 2 * threadID_in_group + kAColAdd[i].
constexpr int64_t kARowAdd[8] = {0, 0, 8, 8, 0, 0, 8, 8};
constexpr int64_t kAColAdd[8] = {0, 1, 0, 1, 8, 9, 8, 9};
// B: "row = threadID_in_group * 2 + (i & 0x1) for b0, b1; + 8 for b2, b3;
// col = groupID". Element i: k = 2 * threadID_in_group + kBKAdd[i],
// n = groupID.
constexpr int64_t kBKAdd[4] = {0, 1, 8, 9};
// C/D (.f32): "row = groupID for c0, c1; groupID + 8 for c2, c3;
// col = threadID_in_group * 2 + (i & 0x1)".
constexpr int64_t kCRowAdd[4] = {0, 0, 8, 8};
constexpr int64_t kCColAdd[4] = {0, 1, 0, 1};

// ldmatrix m8n8.x4 .b16: "threads 0-7 / 8-15 / 16-23 / 24-31 give addr0-7
// / addr8-15 / addr16-23 / addr24-31", the row addresses of matrix 0..3.
// kLdmAddressLane[j][r]: the lane that gives row r of matrix j.
constexpr int64_t kLdmAddressLane[4][8] = {{0, 1, 2, 3, 4, 5, 6, 7},
                                           {8, 9, 10, 11, 12, 13, 14, 15},
                                           {16, 17, 18, 19, 20, 21, 22, 23},
                                           {24, 25, 26, 27, 28, 29, 30, 31}};
// The ldmatrix fragment figure (without .trans): lane l receives row
// kLdmRow[l] of each matrix, elements kLdmCol[l] and kLdmCol[l] + 1 ("a
// group of four threads loads an entire row"). With .trans, the same lane
// receives column kLdmRow[l], rows kLdmCol[l] and kLdmCol[l] + 1.
constexpr int64_t kLdmRow[32] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
                                 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7};
constexpr int64_t kLdmCol[32] = {0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6,
                                 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6};

// wgmma m64nNk16, D (.f32), N / 2 registers: warp w of the warpgroup holds
// rows 16 w .. 16 w + 15; the first 8 registers as in the figure (columns
// 0..15), the pattern repeating every 4 registers and 8 columns. d_i:
// row = 16 w + groupID + kDRowAdd[i % 8], col = 2 * threadID_in_group +
// kDColAdd[i % 8] + 16 * (i / 8).
constexpr int64_t kDRowAdd[8] = {0, 0, 8, 8, 0, 0, 8, 8};
constexpr int64_t kDColAdd[8] = {0, 1, 0, 1, 8, 9, 8, 9};

Pos isaA(int64_t lane, int64_t i) {
  return {groupID(lane) + kARowAdd[i], 2 * threadInGroup(lane) + kAColAdd[i]};
}
Pos isaB(int64_t lane, int64_t i) { return {2 * threadInGroup(lane) + kBKAdd[i], groupID(lane)}; }
Pos isaC(int64_t lane, int64_t i) {
  return {groupID(lane) + kCRowAdd[i], 2 * threadInGroup(lane) + kCColAdd[i]};
}
Pos isaD(int64_t thread, int64_t i) {
  int64_t warp = thread / 32, lane = thread % 32;
  return {16 * warp + groupID(lane) + kDRowAdd[i % 8],
          2 * threadInGroup(lane) + kDColAdd[i % 8] + 16 * (i / 8)};
}

//===----------------------------------------------------------------------===//
// The header's mappings.
//===----------------------------------------------------------------------===//

using L = wl::M16N8K16;
using W = wl::Wgmma;

Pos headerA(int64_t lane, int64_t i) {
  return {groupID(lane) + L::aRowOffset(i), 2 * threadInGroup(lane) + L::aColOffset(i)};
}
Pos headerB(int64_t lane, int64_t i) {
  return {2 * threadInGroup(lane) + L::bKOffset(i), groupID(lane)};
}
Pos headerC(int64_t lane, int64_t i) {
  return {groupID(lane) + L::cRowOffset(i), 2 * threadInGroup(lane) + L::cColOffset(i)};
}
Pos headerD(int64_t thread, int64_t i) {
  int64_t warp = thread / wl::kWarpSize, lane = thread % wl::kWarpSize;
  return {16 * warp + groupID(lane) + W::dRowOffset(i), 2 * threadInGroup(lane) + W::dColOffset(i)};
}

/// Every (row, col) of a rows x cols matrix is held by exactly one
/// (thread, element) of `map` over `threads` threads of `elems` elements.
template <typename Map>
void expectBijection(Map map, int64_t threads, int64_t elems, int64_t rows, int64_t cols,
                     const char *what) {
  std::vector<int> seen(rows * cols, 0);
  for (int64_t t = 0; t < threads; ++t)
    for (int64_t i = 0; i < elems; ++i) {
      Pos p = map(t, i);
      ASSERT_TRUE(p.first >= 0 && p.first < rows && p.second >= 0 && p.second < cols)
          << what << ": thread " << t << " element " << i << " at (" << p.first << ", " << p.second
          << ") is outside the " << rows << " x " << cols << " matrix";
      ++seen[p.first * cols + p.second];
    }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      EXPECT_EQ(seen[r * cols + c], 1) << what << ": (" << r << ", " << c << ")";
}

//===----------------------------------------------------------------------===//
// mma.m16n8k16
//===----------------------------------------------------------------------===//

TEST(PtxFragmentLayout, M16N8K16Shape) {
  EXPECT_EQ(wl::kWarpSize, 32);
  EXPECT_EQ(L::M, 16);
  EXPECT_EQ(L::N, 8);
  EXPECT_EQ(L::K, 16);
  // "four .f16x2 registers" (A), "two .f16x2 registers" (B), "four .f32
  // registers" (C/D).
  EXPECT_EQ(L::kARegs, 4);
  EXPECT_EQ(L::kBRegs, 2);
  EXPECT_EQ(L::kCRegs, 4);
}

TEST(PtxFragmentLayout, M16N8K16EveryLaneMatchesTheIsaTable) {
  for (int64_t lane = 0; lane < 32; ++lane) {
    for (int64_t i = 0; i < 2 * L::kARegs; ++i)
      EXPECT_EQ(headerA(lane, i), isaA(lane, i)) << "A: lane " << lane << " a" << i;
    for (int64_t i = 0; i < 2 * L::kBRegs; ++i)
      EXPECT_EQ(headerB(lane, i), isaB(lane, i)) << "B: lane " << lane << " b" << i;
    for (int64_t i = 0; i < L::kCRegs; ++i)
      EXPECT_EQ(headerC(lane, i), isaC(lane, i)) << "C: lane " << lane << " c" << i;
  }
}

TEST(PtxFragmentLayout, M16N8K16SpotChecksFromTheFigures) {
  // Figure "MMA .m16n8k16 fragment layout for matrix A with .f16/.bf16":
  // T0 holds a0..a7 at (0,0) (0,1) (8,0) (8,1) (0,8) (0,9) (8,8) (8,9);
  // T5 (groupID 1, threadID_in_group 1), T31 (7, 3).
  const Pos a0[8] = {{0, 0}, {0, 1}, {8, 0}, {8, 1}, {0, 8}, {0, 9}, {8, 8}, {8, 9}};
  const Pos a5[8] = {{1, 2}, {1, 3}, {9, 2}, {9, 3}, {1, 10}, {1, 11}, {9, 10}, {9, 11}};
  const Pos a31[8] = {{7, 6}, {7, 7}, {15, 6}, {15, 7}, {7, 14}, {7, 15}, {15, 14}, {15, 15}};
  // Figure "... for matrix B with .f16/.bf16" as (k, n).
  const Pos b0[4] = {{0, 0}, {1, 0}, {8, 0}, {9, 0}};
  const Pos b5[4] = {{2, 1}, {3, 1}, {10, 1}, {11, 1}};
  const Pos b31[4] = {{6, 7}, {7, 7}, {14, 7}, {15, 7}};
  // Figure "... for accumulator matrix C/D with .f32".
  const Pos c0[4] = {{0, 0}, {0, 1}, {8, 0}, {8, 1}};
  const Pos c5[4] = {{1, 2}, {1, 3}, {9, 2}, {9, 3}};
  const Pos c31[4] = {{7, 6}, {7, 7}, {15, 6}, {15, 7}};
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(headerA(0, i), a0[i]) << "a" << i;
    EXPECT_EQ(headerA(5, i), a5[i]) << "a" << i;
    EXPECT_EQ(headerA(31, i), a31[i]) << "a" << i;
  }
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(headerB(0, i), b0[i]) << "b" << i;
    EXPECT_EQ(headerB(5, i), b5[i]) << "b" << i;
    EXPECT_EQ(headerB(31, i), b31[i]) << "b" << i;
    EXPECT_EQ(headerC(0, i), c0[i]) << "c" << i;
    EXPECT_EQ(headerC(5, i), c5[i]) << "c" << i;
    EXPECT_EQ(headerC(31, i), c31[i]) << "c" << i;
  }
  // Register r holds elements 2r (low half) and 2r + 1: a2a3 is register 1,
  // one row group lower than a0a1; a4a5 (register 2) eight columns right.
  EXPECT_EQ(headerA(12, 2), Pos(11, 0));
  EXPECT_EQ(headerA(12, 5), Pos(3, 9));
}

TEST(PtxFragmentLayout, M16N8K16FragmentsCoverTheirMatrices) {
  expectBijection(headerA, 32, 2 * L::kARegs, L::M, L::K, "header A");
  expectBijection(headerB, 32, 2 * L::kBRegs, L::K, L::N, "header B");
  expectBijection(headerC, 32, L::kCRegs, L::M, L::N, "header C");
  // The tables themselves (so that a typo in them cannot hide behind an
  // equal typo in the header).
  expectBijection(isaA, 32, 8, 16, 16, "ISA A");
  expectBijection(isaB, 32, 4, 16, 8, "ISA B");
  expectBijection(isaC, 32, 4, 16, 8, "ISA C");
}

//===----------------------------------------------------------------------===//
// ldmatrix
//===----------------------------------------------------------------------===//

TEST(PtxFragmentLayout, LdMatrixAddressLanes) {
  EXPECT_EQ(wl::LdMatrix::kRowsPerMatrix, 8);
  std::set<int64_t> lanes;
  for (int64_t j = 0; j < 4; ++j)
    for (int64_t r = 0; r < 8; ++r) {
      EXPECT_EQ(wl::LdMatrix::addressLane(j, r), kLdmAddressLane[j][r])
          << "matrix " << j << " row " << r;
      lanes.insert(wl::LdMatrix::addressLane(j, r));
    }
  // .x4: the 32 lanes give the 32 row addresses, one each.
  EXPECT_EQ(lanes.size(), 32u);
  EXPECT_EQ(*lanes.begin(), 0);
  EXPECT_EQ(*lanes.rbegin(), 31);
  // .x1 and .x2 use only threads 0-7 and 0-15.
  for (int64_t r = 0; r < 8; ++r) {
    EXPECT_LT(wl::LdMatrix::addressLane(0, r), 8);
    EXPECT_LT(wl::LdMatrix::addressLane(1, r), 16);
  }
}

TEST(PtxFragmentLayout, LdMatrixDistributionTable) {
  // The ldmatrix table is the m16n8k16 C layout of one 8 x 8 .b16 matrix:
  // row groupID, columns 2 threadID_in_group + h.
  for (int64_t lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(kLdmRow[lane], groupID(lane)) << lane;
    EXPECT_EQ(kLdmCol[lane], 2 * threadInGroup(lane)) << lane;
  }
  // Spot checks from the figure: T0 (0, 0..1), T5 (1, 2..3), T31 (7, 6..7).
  EXPECT_EQ(Pos(kLdmRow[0], kLdmCol[0]), Pos(0, 0));
  EXPECT_EQ(Pos(kLdmRow[5], kLdmCol[5]), Pos(1, 2));
  EXPECT_EQ(Pos(kLdmRow[31], kLdmCol[31]), Pos(7, 6));
  // Without .trans, and with it (transposed), the 32 lanes x 2 halves cover
  // the 8 x 8 matrix once.
  auto plain = [](int64_t l, int64_t h) { return Pos(kLdmRow[l], kLdmCol[l] + h); };
  auto trans = [](int64_t l, int64_t h) { return Pos(kLdmCol[l] + h, kLdmRow[l]); };
  expectBijection(plain, 32, 2, 8, 8, "ldmatrix");
  expectBijection(trans, 32, 2, 8, 8, "ldmatrix.trans");
}

/// The element of a 16-row tile that ldmatrix.x4 puts in register j, half h
/// of `lane`, when lane s gives the address of tile row s % 16, column
/// 8 (s / 16) (the kernels' addressing, MmaGemm.cpp computeStage): per the
/// ISA, lane `lane` receives (row, col) = (kLdmRow, kLdmCol + h) of matrix j
/// (.trans: (kLdmCol + h, kLdmRow)), and row `row` of matrix j is read from
/// the address of lane addressLane(j, row).
Pos ldmatrixX4(int64_t lane, int64_t j, int64_t h, bool transpose) {
  int64_t row = transpose ? kLdmCol[lane] + h : kLdmRow[lane];
  int64_t col = transpose ? kLdmRow[lane] : kLdmCol[lane] + h;
  int64_t s = wl::LdMatrix::addressLane(j, row);
  return {s % 16, 8 * (s / 16) + col};
}

TEST(PtxFragmentLayout, LdMatrixX4FeedsMmaFragments) {
  for (int64_t lane = 0; lane < 32; ++lane) {
    // A (row-major 16 x 16): registers 0..3 of ldmatrix.x4 are a0a1..a6a7.
    for (int64_t i = 0; i < 8; ++i)
      EXPECT_EQ(ldmatrixX4(lane, i / 2, i % 2, /*transpose=*/false), headerA(lane, i))
          << "A: lane " << lane << " a" << i;
    // B (row-major k x n, 16 x 16): ldmatrix.x4.trans registers 0, 1 are
    // b0b1, b2b3 of n-tile 0 (n 0..7), registers 2, 3 those of n-tile 1.
    for (int64_t nt = 0; nt < 2; ++nt)
      for (int64_t i = 0; i < 4; ++i) {
        Pos kn = headerB(lane, i);
        EXPECT_EQ(ldmatrixX4(lane, 2 * nt + i / 2, i % 2, /*transpose=*/true),
                  Pos(kn.first, 8 * nt + kn.second))
            << "B: lane " << lane << " n-tile " << nt << " b" << i;
      }
  }
}

//===----------------------------------------------------------------------===//
// wgmma m64nNk16
//===----------------------------------------------------------------------===//

TEST(PtxFragmentLayout, WgmmaAccumulatorMatchesTheIsaTable) {
  EXPECT_EQ(W::M, 64);
  EXPECT_EQ(W::K, 16);
  EXPECT_EQ(W::kWarpgroupSize, 128);
  constexpr int64_t n = 128, regs = n / 2; // "N/2 number of .f32 registers"
  for (int64_t t = 0; t < 128; ++t)
    for (int64_t i = 0; i < regs; ++i)
      EXPECT_EQ(headerD(t, i), isaD(t, i)) << "thread " << t << " d" << i;
  expectBijection(headerD, 128, regs, 64, n, "header wgmma D");
  expectBijection(isaD, 128, regs, 64, n, "ISA wgmma D");
  // N = 8 (4 registers) and N = 256 (128 registers) cover their D as well.
  expectBijection(headerD, 128, 4, 64, 8, "header wgmma D, N = 8");
  expectBijection(headerD, 128, 128, 64, 256, "header wgmma D, N = 256");

  // Spot checks from the figure "WGMMA .m64nNk16 register fragment layout
  // for accumulator matrix D": T0 d0..d4, d63; T37 (warp 1, lane 5:
  // groupID 1, threadID_in_group 1); T127 (warp 3, lane 31).
  EXPECT_EQ(headerD(0, 0), Pos(0, 0));
  EXPECT_EQ(headerD(0, 1), Pos(0, 1));
  EXPECT_EQ(headerD(0, 2), Pos(8, 0));
  EXPECT_EQ(headerD(0, 3), Pos(8, 1));
  EXPECT_EQ(headerD(0, 4), Pos(0, 8));
  EXPECT_EQ(headerD(0, 63), Pos(8, 121));
  EXPECT_EQ(headerD(37, 0), Pos(17, 2));
  EXPECT_EQ(headerD(37, 5), Pos(17, 11));
  EXPECT_EQ(headerD(37, 6), Pos(25, 10));
  EXPECT_EQ(headerD(127, 0), Pos(55, 6));
  EXPECT_EQ(headerD(127, 3), Pos(63, 7));
  EXPECT_EQ(headerD(127, 62), Pos(63, 126));
  EXPECT_EQ(headerD(127, 63), Pos(63, 127));
  // Within each warp's 16 rows (a 16 x 8 column block per 4 registers), D
  // is the mma.m16n8k16 C layout.
  for (int64_t lane = 0; lane < 32; ++lane)
    for (int64_t i = 0; i < 4; ++i)
      EXPECT_EQ(headerD(lane, i), isaC(lane, i)) << "lane " << lane << " d" << i;
}

TEST(PtxFragmentLayout, WgmmaNoSwizzleByteOffsets) {
  EXPECT_EQ(W::kCoreRows, 8);
  EXPECT_EQ(W::kCoreRowBytes, 16);
  // K-major (A "row", 64 x 16 bf16 tile): a core matrix is 8 rows (m) of
  // 16 bytes (8 consecutive k), 128 contiguous bytes; the next core matrix
  // along M is SBO = 128 bytes on, along K LBO = 8 * 128 = 1024 bytes on.
  struct Case {
    int64_t mn, k, bytes;
  };
  const Case kMajor[] = {{0, 0, 0},   {0, 1, 2},    {0, 7, 14},    {1, 0, 16},    {7, 7, 126},
                         {8, 0, 128}, {0, 8, 1024}, {9, 10, 1172}, {63, 15, 2046}};
  for (const Case &c : kMajor)
    EXPECT_EQ(W::byteOffset(false, c.mn, c.k, /*lbo=*/1024, /*sbo=*/128, 2), c.bytes)
        << "K-major (" << c.mn << ", " << c.k << ")";
  // MN-major (B "row", i.e. transposed, 16 x 128 bf16): a core matrix is 8
  // rows (k) of 16 bytes (8 consecutive n); SBO = 128 along N, LBO = 16 *
  // 128 = 2048 along K.
  const Case mnMajor[] = {{0, 0, 0},   {1, 0, 2},    {7, 0, 14},    {0, 1, 16},     {7, 7, 126},
                          {8, 0, 128}, {0, 8, 2048}, {9, 10, 2210}, {127, 15, 4094}};
  for (const Case &c : mnMajor)
    EXPECT_EQ(W::byteOffset(true, c.mn, c.k, /*lbo=*/2048, /*sbo=*/128, 2), c.bytes)
        << "MN-major (" << c.mn << ", " << c.k << ")";
  // Non-compact strides: the core-matrix steps are exactly LBO and SBO.
  EXPECT_EQ(W::byteOffset(false, 17, 9, 4096, 256, 2), 2 * 256 + 4096 + 16 + 2);
  EXPECT_EQ(W::byteOffset(true, 17, 9, 4096, 256, 2), 2 * 256 + 4096 + 16 + 2);
  EXPECT_EQ(W::byteOffset(false, 3, 5, 4096, 256, 2), 3 * 16 + 5 * 2);
  EXPECT_EQ(W::byteOffset(true, 3, 5, 4096, 256, 2), 5 * 16 + 3 * 2);
  // 32-bit elements (tf32): a core row holds 4 elements, so a core matrix
  // spans 4 k (K-major) or 4 n (MN-major) and 8 of the other dimension.
  EXPECT_EQ(W::byteOffset(false, 9, 5, 1024, 128, 4), 128 + 1024 + 16 + 4);
  EXPECT_EQ(W::byteOffset(false, 0, 4, 1024, 128, 4), 1024);
  EXPECT_EQ(W::byteOffset(true, 9, 10, 2048, 128, 4), 2 * 128 + 2048 + 32 + 4);
  EXPECT_EQ(W::byteOffset(true, 4, 0, 2048, 128, 4), 128);

  for (bool mn : {false, true}) {
    // One core matrix (8 x 8 16-bit elements) fills its 128 bytes once.
    std::set<int64_t> core;
    for (int64_t a = 0; a < 8; ++a)
      for (int64_t k = 0; k < 8; ++k) {
        int64_t off = W::byteOffset(mn, a, k, 1024, 128, 2);
        EXPECT_TRUE(off >= 0 && off < 128 && off % 2 == 0) << off;
        core.insert(off);
      }
    EXPECT_EQ(core.size(), 64u) << (mn ? "MN-major" : "K-major");
    // A compact 64 x 16 operand (LBO = 8 * 128, SBO = 128) fills 2048 bytes.
    std::set<int64_t> tile;
    for (int64_t a = 0; a < 64; ++a)
      for (int64_t k = 0; k < 16; ++k) {
        int64_t off = W::byteOffset(mn, a, k, 1024, 128, 2);
        EXPECT_TRUE(off >= 0 && off < 2048) << off;
        tile.insert(off);
      }
    EXPECT_EQ(tile.size(), 1024u) << (mn ? "MN-major" : "K-major");
  }
}

TEST(PtxFragmentLayout, WgmmaDescriptorFields) {
  EXPECT_EQ(W::kStartShift, 0);
  EXPECT_EQ(W::kLboShift, 16);
  EXPECT_EQ(W::kSboShift, 32);
  EXPECT_EQ(W::kSwizzleShift, 62);
  EXPECT_EQ(W::kFieldMask, 0x3FFF);
  // matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4.
  auto encode = [](uint64_t x) { return (x & 0x3FFFFu) >> 4; };
  const uint64_t cases[][3] = {{0, 1024, 128},
                               {0x1230, 2048, 128},
                               {0x3FFF0, 0x3FFF0, 0x3FFF0},
                               {16, 32, 48},
                               {0x40010, 0x40020, 0x40030}};
  for (const auto &c : cases) {
    uint64_t d = W::descriptor(c[0], c[1], c[2]);
    EXPECT_EQ(d & 0x3FFF, encode(c[0])) << "start " << c[0];
    EXPECT_EQ((d >> 16) & 0x3FFF, encode(c[1])) << "LBO " << c[1];
    EXPECT_EQ((d >> 32) & 0x3FFF, encode(c[2])) << "SBO " << c[2];
    EXPECT_EQ((d >> 49) & 0x7, 0u) << "base offset";
    EXPECT_EQ((d >> 62) & 0x3, 0u) << "swizzle mode: none";
    // Bits 14-15, 30-31, 46-48 and 52-61 are unused: nothing is set
    // outside the three 14-bit fields.
    EXPECT_EQ(d & 0x3FF1'C000'C000'C000ull, 0u);
    EXPECT_EQ(d & ~0x0000'3FFF'3FFF'3FFFull, 0u);
  }
  // Written out: start 0, LBO 1024 (64 << 16), SBO 128 (8 << 32).
  EXPECT_EQ(W::descriptor(0, 1024, 128), 0x0000'0008'0040'0000ull);
  EXPECT_EQ(W::descriptor(0x3FFF0, 0x3FFF0, 0x3FFF0), 0x0000'3FFF'3FFF'3FFFull);
}

} // namespace
