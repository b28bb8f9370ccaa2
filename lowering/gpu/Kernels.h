//===- Kernels.h - the MoE GPU kernels --------------------------*- C++ -*-===//
//
// Builders of the kernels of the GPU path (docs/spec.md §4), emitted as
// gpu.func ops into one `gpu.module @moe_kernels`. Every kernel takes flat
// (1-D, dynamically sized) memrefs plus index sizes, so one kernel serves every
// shape; the launch configuration is fixed per kernel (see the constants
// below and the comment of each builder) and recorded as `known_block_size`.
//
// Element types (docs/spec.md §2-§3): every floating-point buffer is a 1-D memref of
// f32, bf16 or f16, given per buffer to the builders below (a null Type means
// f32); kernels extend on load and round to nearest even on store, and all
// arithmetic is f32. A kernel's name gets the suffix of its non-f32 types
// ("_bf16", or one per buffer when they differ); the f32 kernels keep their
// names.
//
// The GEMM kernels are tiled through workgroup (shared) memory: a block
// computes a kTileM x kTileN tile of C with kGemmThreads threads, each
// owning a kMicro x kMicro micro-tile; A and B tiles of depth kTileK are
// staged in workgroup memory (as f32) between gpu.barrier ops, each thread
// staging 4 consecutive elements of A and of B with one vector load (128 bits
// for f32) where the run-time sizes make them aligned, element by element
// otherwise (the tensor-core hook is marked "TENSOR CORES" in Kernels.cpp).
// Each output element accumulates its k-sum sequentially in ascending k with
// fused multiply-adds, acc = fma(a_k, b_k, acc): the CPU path's order and
// rounding (its vector.fma).
//
// Row tiles of the grouped GEMMs (decode vs prefill). The routing plan pads
// every expert's row group to a row tile R chosen at run time by the host
// (chooseRowTile in HostStrategy.cpp: R = kSmallTileM when the average
// rows per expert T*k/E is below kTileM, else kTileM, or kBigTileM for the
// sm_90a wgmma kernels when it reaches convert-moe-to-gpu's big-tile-rows)
// and passed to
// moe_align_kernel / moe_tile_map_kernel and to both grouped GEMMs as the
// index argument `tileRows`. Contract for every grouped GEMM kernel (the
// CUDA-core ones here and any tensor-core variant):
//   - block (x, y) computes plan rows [y * tileRows, (y + 1) * tileRows) and
//     columns [x * kTileN, (x + 1) * kTileN); tileExpert[y] is the expert;
//     blocks with y >= numTiles[0] exit;
//   - tileRows is kTileM or kSmallTileM (uniform per launch; kBigTileM only
//     for the 128-row wgmma kernels of MmaGemm.h); the CUDA-core
//     skeleton has one code path per value (scf.if on tileRows) so that a
//     16-row tile maps 256 threads onto 16 x 64 outputs (1 x 4 each) and no
//     thread computes padding;
//   - the grid is (ceil(N / kTileN), maxTiles) with
//     maxTiles = max(1, min(ceil(T*k / R) + E, T*k)) (each tile holds at
//     least one row), so the grid's padded rows maxTiles * R stay within
//     T*k + R * (E + 1).
//
// The decode launch sequence of a layer (docs/spec.md §7, issue 10): router +
// gate (gate(..., router = true): each block routes kRouteTokens tokens), the
// align kernel (also the aux loss reduction and the combine bookkeeping),
// gemm1, and gemm2 with the combine fused into its epilogue (gemm2(...,
// combine = true)): 4 launches, with a shared expert too (SharedFold below:
// its gate in the gate kernel, its tiles first in both GEMM grids). The
// combine is
// deterministic: every gemm2 block stores its rows, then per (token, column
// tile) an atomic arrival counter counts the token's contributions; the
// block that completes a token's kept contributions sums them in slot order
// (after the shared expert's output when present: the CPU path's order; a
// folded shared expert's row is one more arrival of every token), so
// y never depends on the order in which blocks run. The align kernel zeroes
// the counters of every call before gemm2 runs (same stream), and writes y
// for the tokens whose every assignment was dropped (capacity).
//
// Index checks (convert-moe-to-gpu's check-indices, docs/gpu.md): a kernel
// that reads index data a moe op took from its operands (expert indices,
// offsets, positions) gets a "_checked" variant with one more argument, the
// op's error word err:i32[4] = {kind (0: none, else a MoeIndexErrorKind of
// runtime/IndexErrors.h), first bad element (flat index), its value, 0}.
// The host zeroes the word first (gpu.memset). The single-block kernels
// (align, tile map) write the whole word (first bad element in assignment
// order, as the CPU path reports); the checked combine only sets the kind. Bad
// data is never used: a bad expert index is dropped, bad offsets make no
// tiles, a bad position reads nothing. The host copies the word back after
// the op's kernels and reports a violation (moeRuntimeIndexError).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_GPU_KERNELS_H
#define MOE_LOWERING_GPU_KERNELS_H

#include "dialect/MoEAttrs.h"
#include "dialect/MoEDialect.h"
#include "lowering/GroupedGemm.h"
#include "lowering/RoutingBuilder.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>

namespace mlir {
namespace moe {
namespace gpu_lowering {

/// GEMM tiling (grouped GEMMs, router and Soft MoE GEMMs).
constexpr int64_t kTileM = 64;     // rows of A / C per block; also the alignment
                                   // of every expert's row group (moe_align)
constexpr int64_t kTileN = 64;     // columns of B / C per block
constexpr int64_t kTileK = 16;     // depth of the staged A and B tiles
constexpr int64_t kMicro = 4;      // each thread: kMicro x kMicro outputs
constexpr int64_t kGemmThreads = (kTileM / kMicro) * (kTileN / kMicro); // 256
/// The decode row tile of the grouped GEMMs (see above).
constexpr int64_t kSmallTileM = kTileM / kMicro; // 16
/// The large prefill row tile: sm_90a wgmma kernels only (two warpgroups).
constexpr int64_t kBigTileM = 2 * kTileM; // 128
/// Other kernels.
constexpr int64_t kGateThreads = 128;  // one thread per token
constexpr int64_t kRouteTokens = 16;   // tokens per block of the router + gate kernel
constexpr int64_t kRouteDepth = 128;   // its staged depth chunk of x (16 x 128 f32)
constexpr int64_t kRouteWeights = 4096; // its staged chunk of Wr (f32; depth 4096/E)
constexpr int64_t kAlignThreads = 256; // one block
constexpr int64_t kEltThreads = 256;   // element-wise kernels
/// The most blocks of KernelLibrary::absMaxBits (each thread strides over
/// the grid; one atomic per block): enough to fill an H100/H200 (132 SMs).
constexpr int64_t kAbsMaxBlocks = 528;
constexpr int64_t kCombineGradThreads = 128; // moe.combine_grad: one block per assignment

class IRB;


/// Name of the gpu.module holding the kernels.
inline constexpr llvm::StringLiteral kKernelModuleName = MoEDialect::getGpuKernelModuleName();

class KernelLibrary {
public:
  /// Finds or creates `gpu.module @moe_kernels` in `module` (and marks the
  /// module as a GPU container).
  explicit KernelLibrary(ModuleOp module);

  gpu::GPUModuleOp getModule() { return gpuModule; }

  // Every builder returns the existing kernel when it was built before.
  // Argument lists (memrefs are 1-D memref<?xT>; sizes are index):

  /// (x, wr, br, logits, T, D, E); grid (ceil(E/kTileN), ceil(T/kTileM)).
  /// x, wr, br of type `data`, the logits of type `out`.
  gpu::GPUFuncOp route(bool bias, Type data, Type out);
  /// The gate of routing variant `kind` (TokenRoutingKind::get, the mapping
  /// from routing attributes the CPU gate uses too): (logits, weights,
  /// indices:i32, p scratch [T*E], partials, T, E, K, key0:i32, key1:i32);
  /// grid ceil(T/kGateThreads); with `kind.loss` the trimmed-lasso partials.
  /// With `kind.production` (mode TopK only) four more arguments follow:
  /// (selectionBias [E], groups, keptGroups, scale:f32), and p is the scratch
  /// [T*2E] of the group scores and kept-group flags when grouped;
  /// `selectionBias` is the bias's element type (null: f32). The other
  /// routing buffers are f32.
  /// With `router` the kernel also computes the logits (it writes them to
  /// `logits`, f32): (x [T, D], wr [D, E], br [E], D) follow, x, wr and br of
  /// element type `routerData` (null: f32; extended to f32 on load), the grid
  /// is ceil(T/kRouteTokens) and each block first computes the logits of its
  /// kRouteTokens tokens (one thread per (token, expert), ascending d with
  /// fma: the CPU router's order, so the logits are the CPU's bits; x and Wr
  /// staged in workgroup memory as f32 by depth chunks), then routes them (one
  /// thread per token). `partials` gets one value per block.
  /// With `sharedGate` (router only): (sg [D] of `routerData`, gate [T] f32)
  /// follow, and the kernel also writes gate[t] = sigmoid(x[t, :] sg), the
  /// shared expert's gate (column E of the same fma chains, then
  /// moe_sigmoid_kernel's formula: the bits of route + sigmoid).
  gpu::GPUFuncOp gate(const TokenRoutingKind &kind, Type selectionBias = {},
                      bool router = false, bool routerBias = false,
                      Type routerData = {}, bool sharedGate = false);
  /// (partials, numPartials, T, lambda:f32, loss[1]); one thread.
  gpu::GPUFuncOp lossReduce();
  /// (indices:i32, weights, T, K, E, capacity:i32, offsets:i32[E+1],
  /// paddedOffsets:i32[E+1], positions:i32[T*K], sourceRows:i32[T*K],
  /// rowWeights[T*K], sorted:i32[Pmax], tileExpert:i32[maxTiles],
  /// numTiles:i32[1], Pmax, maxTiles, tileRows); one block of kAlignThreads,
  /// parallel over the T*K assignments (each thread a contiguous chunk; per
  /// expert a block scan of the chunk counts), so the plan is the one of a
  /// sequential scan in token order. The weights are of type `weights` (null:
  /// f32), rowWeights f32.
  /// With `combine` (for gemm2(..., combine = true)): (counters:i32
  /// [numCounters], numCounters, y [T, D], D[, shared [T, D]]) follow: the
  /// counters are zeroed and y[t, :] = shared[t, :] (or 0) for every token t
  /// without a kept assignment; y of type `y` (null: f32), shared f32. With
  /// `loss`: (partials, numPartials, lambda:f32, loss[1]) follow
  /// (moe_loss_reduce_kernel's work).
  /// With `checkKind` (MOE_INDEX_BAD_EXPERT_DISPATCH or _FUSED, 0: none;
  /// name suffix "_checked"): (err:i32[4]) follows, the error word (see
  /// "Index checks" above), which the kernel writes.
  gpu::GPUFuncOp align(bool weighted, Type weights = {}, bool combine = false,
                       bool shared = false, bool loss = false, Type y = {},
                       int32_t checkKind = 0);
  /// (offsets:i32[E+1], E, paddedOffsets, sorted, tileExpert, numTiles, Pmax,
  /// maxTiles, tileRows); one block of kAlignThreads. With `check`
  /// (moe_tile_map_checked_kernel): (N, err:i32[4]) follow: the offsets are
  /// validated against N rows (error word written on every call; bad
  /// offsets make no tiles).
  gpu::GPUFuncOp tileMap(bool check = false);
  /// (x, sourceRows:i32, rows, N, D); 1-D over N*D; x and rows of `data`.
  gpu::GPUFuncOp dispatchRows(Type data);
  /// (A, sorted:i32, sourceRows:i32, tileExpert:i32, numTiles:i32, w1, b1, h,
  /// D, H, tileRows); grid (ceil(H/kTileN), maxTiles). A of `a`, w1 and b1 of
  /// `w`, h of `h` (bias and activation in f32, then h rounded to its type).
  /// With `foldShared` (the shared expert folded into the launch, see
  /// SharedFold below): (s1 [D, Ws], hs [ceil(T/kTileM) kTileM, Hs], Hs, T)
  /// follow, s1 of `w`, hs of `h` (A's rows by token, no bias); grid
  /// (ceil(max(H, Hs)/kTileN), ceil(T/tileRows) + maxTiles).
  /// The GEMM of `desc` (lowering/GroupedGemm.h; expertGemm1): gathered or
  /// not, its epilogue's bias and activation, types (a, w, h) = its (A, B,
  /// C) types.
  /// Quantized B (desc.quantized(); not with `foldShared`; name suffix
  /// _int4g<G>[_zp] or _fp8b<BK>x<BN>): w1 holds the codes, b1 is of `a`,
  /// and (scales:f32[, zeroPoints:i4]) follow, laid out as the op's
  /// expert_scales and expert_zero_points; each weight is dequantized as it
  /// is loaded (buildDequantized). gemm2 likewise (b2 of `h`).
  gpu::GPUFuncOp gemm1(const GroupedGemmDesc &desc, bool foldShared = false);
  /// (h, sorted:i32, rowWeights, tileExpert:i32, numTiles:i32, w2, b2, out,
  /// H, D, tileRows); grid (ceil(D/kTileN), maxTiles). h of `h`, w2 and b2 of
  /// `w`, out of `out`, rowWeights f32.
  /// With `combine` (the fused layer's reduction, see the file comment):
  /// (sourceRows:i32 [T*K], positions:i32 [T*K], counters:i32
  /// [T * ceil(D/kTileN)], y [T, D], K[, shared [T, D]]) follow; `out` still
  /// receives one row per kept assignment; the token sums are f32 (in slot
  /// order, after shared, f32) and rounded once to y's type `y` (null: f32).
  /// With `foldShared` (needs `combine`, not `shared`): (hs, s2 [Hs, D],
  /// gate [T] f32, sharedOut [T, D] f32, Hs, T) follow; the first
  /// ceil(T/tileRows) row tiles compute the shared expert's output rows
  /// (times gate[t] with `sharedGated`, no bias) into sharedOut, which starts
  /// every token's sum; grid (ceil(D/kTileN), ceil(T/tileRows) + maxTiles).
  /// The GEMM of `desc` (expertGemm2): its epilogue's bias, routed weight
  /// (`weighted`) and combine; types (h, w, out) = its (A, B, C) types.
  gpu::GPUFuncOp gemm2(const GroupedGemmDesc &desc, bool shared = false, Type y = {},
                       bool foldShared = false, bool sharedGated = false);
  /// (rowsOut, positions:i32, y, T, K, D[, shared]); 1-D over T*D. With
  /// `shared` the sum of a token starts at shared[t, :] (the shared expert's
  /// f32 output, docs/spec.md §3.1.1), as on the CPU path. The sum is f32,
  /// rounded once to y's type. Also moe.dispatch_grad (rows f32, no shared).
  /// With `check` ("_checked", not with `shared`): (N, err:i32[4]) follow:
  /// a position outside [-1, N) contributes nothing and sets err[0] =
  /// MOE_INDEX_BAD_POSITION.
  gpu::GPUFuncOp reduce(bool shared, Type rows, Type y, bool check = false);

  //===--------------------------------------------------------------------===//
  // The backward (docs/spec.md §9; ExpertGemmGradKernels.cpp,
  // RoutingKernels.cpp). No float atomics: every gradient element is one
  // thread's sum in a fixed order, so the results do not depend on the block
  // schedule.
  //===--------------------------------------------------------------------===//

  /// A row GEMM of the backward over the tiles of a plan whose rows are in
  /// group order (`desc`: rows direct, weights perGroup, reduction columns;
  /// the router and the shared expert are one group of all rows):
  /// C[r, n] = epilogue(sum_k A[r, k] B_g[k, n]) for every plan row r of
  /// group g = tileExpert[tile], B_g = W[g] stored [K, N] or
  /// (desc.bTransposed) [N, K]; each output a fused multiply-add chain in
  /// ascending k. The epilogue is empty, {bias} (the recomputed z = rows W1
  /// + b1, bias[g][n]) or {activationGrad} (dH = dOut W2^T: C holds z, [rows,
  /// 2N] when gated, and receives dZ in place; hOut [rows, N] f32 receives H
  /// = round(act(z)); buildActivationGradEpilogue). Padded plan rows store
  /// nothing.
  /// (A, sorted:i32, tileExpert:i32, numTiles:i32, W, bias, C, hOut, K, N,
  /// tileRows); grid (ceil(N/kTileN), maxTiles). A of desc.aType, W and bias
  /// of desc.bType, C and hOut f32.
  gpu::GPUFuncOp backwardGemm(const GroupedGemmDesc &desc);
  /// The weight gradient of `desc` (desc.weightGradient(); expertWeightGradient):
  /// C[g][m, n] = sum_{r in group g} A[r, m] B[r, n], one fused multiply-add
  /// chain per element in increasing r from the group's first row; a group
  /// without rows (or with offsets outside [0, numRows], which the checked
  /// tile map reports) gets exact zeros. With `biasGrad` the bias gradient
  /// biasOut[g][n] = sum_r B[r, n] is the same GEMM's row M (A with a column
  /// of ones: the same order, fma(1, b, s) = s + b exactly).
  /// (A [rows, M], offsets:i32 [G+1], B [rows, N] f32, C [G, M, N] f32,
  /// biasOut [G, N] f32, M, N, numRows); grid (ceil(N/kTileN),
  /// ceil((M + biasGrad)/kTileM), G). A of desc.aType.
  gpu::GPUFuncOp weightGradGemm(const GroupedGemmDesc &desc, bool biasGrad);
  /// An f32 matrix as the two terms of `t` the backward's tensor-core GEMMs
  /// read (IRB::splitTerms): (x f32 [n], hi:t [n], lo:t [n], n); grid
  /// ceil(n / kEltThreads) of kEltThreads. With `scaled` (the f16 terms,
  /// "_scaled"): (maxBits:i32 [1]) follows, the largest finite |x| that
  /// absMaxBits found, and the terms are those of x * s, s the power of two
  /// of IRB::splitScale (the GEMMs multiply their sums by 1/s).
  gpu::GPUFuncOp splitTerms(Type t, bool scaled = false);
  /// The largest finite |x| of an f32 vector as its bits (IRB::finiteAbsBits),
  /// max-ed into maxBits[0], which must hold 0 (or a smaller maximum) at the
  /// launch: (x f32 [n], maxBits:i32 [1], n); any grid of kEltThreads
  /// (threads stride over the grid, each block's maximum is reduced in
  /// shared memory and max-ed into maxBits by one integer atomic: the result
  /// does not depend on the order). The f16 backward's split scales.
  gpu::GPUFuncOp absMaxBits();
  /// moe.combine_grad: (dy f32 [T, D], out [N, D], w [T, K], positions:i32
  /// [T, K], dOut f32 [N, D], dW f32 [T, K], T, K, D, N); one block of
  /// kCombineGradThreads per assignment (grid T*K), its threads striding over
  /// d (coalesced rows): dOut[pos] = w * dy[t] and dW[t, i] = <dy[t],
  /// out[pos]>, each thread's partial sum in ascending d, the block's added
  /// in a fixed tree order (deterministic); a dropped assignment (-1) writes
  /// dW = 0 and no row. With `check` ("_checked"): (err:i32[4]) follows (a position outside
  /// [-1, N) sets err[0] = MOE_INDEX_BAD_POSITION and is dropped).
  gpu::GPUFuncOp combineGrad(Type out, Type weights, bool check = false);
  /// (offsets:i32 [2], rows); one thread: offsets = {0, rows}, the plan of
  /// one group of all rows (the router's and the shared expert's backward),
  /// written on the device so that a call copies nothing.
  gpu::GPUFuncOp oneGroupOffsets();
  /// The gate of moe.shared_expert_grad (out = sigmoid(o) f(x)): (dOut f32
  /// [T, D], f f32 [T, D] (the ungated output, recomputed), o f32 [T],
  /// scaledOut f32 [T, D], dO f32 [T], T, D); one thread per token:
  /// scaledOut = dOut g (the ungated FFN's cotangent) and dO = <dOut, f> g
  /// (1 - g), g = sigmoid(o) (sharedGateSigmoid), the sum in ascending d.
  gpu::GPUFuncOp sharedGateGrad();
  /// (dx f32 [T, D], dO f32 [T], sg [D] of `sg`, T, D); 1-D over T*D: dx +=
  /// dO sg^T (the gate's share of the input gradient).
  gpu::GPUFuncOp sharedGateInputGrad(Type sg);
  /// moe.gate_grad of routing variant `kind` (TokenRoutingKind::get, as on
  /// the CPU path; buildTokenRoutingGrad): (logits [T, E] of `logits`,
  /// indices:i32 [T, K], dW f32 [T, K], dLogits f32 [T, E], T, E, K,
  /// key0:i32, key1:i32, aux f32 [1], lambda:f32, scale:f32); one thread per
  /// token, grid ceil(T/kGateThreads). With kind.loss every token's lasso
  /// term has the cotangent aux[0] * lambda / T (aux: the aux loss's
  /// cotangent, read on the device); `scale` is the production router's
  /// routed scaling factor.
  gpu::GPUFuncOp gateGrad(const TokenRoutingKind &kind, Type logits);
  /// (expertOut, weights, positions:i32, y, T, K, D[, shared]); 1-D over T*D.
  /// With `check` ("_checked"): (N, err:i32[4]) follow: a position outside
  /// [-1, N) contributes nothing and sets err[0] = MOE_INDEX_BAD_POSITION.
  gpu::GPUFuncOp combine(bool shared, Type out, Type weights, Type y, bool check = false);
  /// (o, s, N): s[i] = 1 / (1 + exp(-o[i])); 1-D over N (the shared
  /// expert's gate).
  gpu::GPUFuncOp sigmoid();
  /// (x, phi, rx, rphi, GM, ES, D); 1-D over GM+ES; x, phi of `data`.
  gpu::GPUFuncOp softNorms(Type data);
  /// (x, phi, rx, rphi, L, GM, ES, D, scale:f32); grid (ceil(ES/kTileN),
  /// ceil(GM/kTileM)); x, phi of `data`, L f32.
  gpu::GPUFuncOp softLogits(bool normalize, Type data);
  /// (L, Dw, G, M, ES); 1-D over G*ES; f32.
  gpu::GPUFuncOp softDispatchWeights();
  /// (L, Cw, G, M, ES); 1-D over G*M; Cw of type `cw`.
  gpu::GPUFuncOp softCombineWeights(Type cw);
  /// (Dw, x, rows, G, M, ES, S, D); grid (ceil(D/kTileN), ceil(ES/kTileM), G);
  /// the slot inputs rounded to `rows`.
  /// Also moe.soft_combine_grad's dOut (x = the f32 cotangent dy, A = the
  /// combine weights of type `dw`; null: f32).
  gpu::GPUFuncOp softSlots(Type x, Type rows, Type dw = {});
  /// (Cw, expertOut, y, G, M, ES, S, D); grid (ceil(D/kTileN),
  /// ceil(M/kTileM), G).
  gpu::GPUFuncOp softCombine(Type cw, Type out, Type y);

  // The Soft MoE backward (SoftMoEKernels.cpp; docs/gpu.md "The backward").
  /// (A [G, M, D], B [E*G*S, D], out f32 [G, M, E*S], G, M, ES, S, D); grid
  /// (ceil(ES/kTileN), ceil(M/kTileM), G): out[g, m, j] = <A[g, m],
  /// B[(e*G + g)*S + s]> (j = e*S + s), ascending d: the cotangents of the
  /// combine weights (A = dy) and of the dispatch weights (A = x, B = the
  /// slot rows' cotangent).
  gpu::GPUFuncOp softRowDots(Type a, Type b);
  /// (P, dP, dL, G, M, ES), f32: dL = P (dP - <P, dP>) (`accumulate`: dL +=)
  /// over a softmax's entries, ascending: `overTokens` the dispatch softmax
  /// (over m, one thread per (g, slot), 1-D over G*ES), else the combine
  /// softmax (over the E*S slots, one thread per token, 1-D over G*M).
  gpu::GPUFuncOp softmaxGrad(bool overTokens, bool accumulate);
  /// (dL, L0, out [1], n), f32, one thread: out = sum_i dL[i] L0[i] in
  /// ascending i (the scale's gradient).
  gpu::GPUFuncOp softScaleGrad();
  /// (t, r, dL f32 [GM, ES], out f32, GM, ES, D, scale:f32) with dL0 = scale
  /// dL: `wrtSlots`: out [D, ES] = tn^T dL0 (t = x [GM, D]), grid
  /// (ceil(ES/kTileN), ceil(D/kTileM)); else out [GM, D] = dL0 tn^T (t = Phi
  /// [D, ES]), grid (ceil(D/kTileN), ceil(GM/kTileM)); tn = t normalized by r
  /// (softNorms) when `normalize`.
  gpu::GPUFuncOp softLogitsGrad(bool wrtSlots, bool normalize, Type t);
  /// (t, r f32 [n], dt f32, n, D, strideI, strideD); 1-D over n: the
  /// normalization's backward of vector i (elements i*strideI +
  /// d*strideD): dt = r (dt - tn <tn, dt>), tn = t r[i], in place.
  gpu::GPUFuncOp softNormGrad(Type t);

  /// (in_0, ..., in_{n-1}, out_0, ..., out_{m-1}, N): for i < N,
  /// (out_0[i], ..., out_{m-1}[i]) = body(i, in_0[i], ..., in_{n-1}[i]);
  /// 1-D over N (kEltThreads threads per block). Memrefs of the given element
  /// types; `body` gets the element index and the loaded elements and returns
  /// the m values to store (it may read more at index i itself: the constants
  /// of the gpu.module, DeviceElementwise.cpp). `name` must identify the body:
  /// the first kernel built under a name is returned for it afterwards (the
  /// host's element-wise tensor ops in device-abi mode, fused into one kernel
  /// per chain).
  gpu::GPUFuncOp elementwise(StringRef name, TypeRange inputs, TypeRange outputs,
                             function_ref<SmallVector<Value>(IRB &, Value, ValueRange)> body);

private:
  ModuleOp module;
  gpu::GPUModuleOp gpuModule;
};

class IRB;

/// The operands of the combine fused into a grouped GEMM2's epilogue (the
/// file comment; gemm2(..., combine = true) and the tensor-core GEMM2 with
/// `combine`, MmaGemm.h).
struct CombineEpilogue {
  Value sorted, sourceRows, positions, counters; // the plan (i32)
  Value rows;      // the GEMM's f32 rows, one per kept assignment [T*K, D]
  Value y;         // [T, D], any float type (the sum is rounded once)
  Value K, D;      // index
  Value sharedOut; // the shared expert's f32 output [T, D], or null
  Value lastOf;    // workgroup i32 [>= tileM]
  /// The shared expert folded into the GEMM (SharedFold): sharedTile (i1)
  /// says that this block's rows are shared-expert rows (tile row lr is
  /// token rowBase + lr, valid below T), whose outputs in sharedOut are one
  /// more contribution of every token. Null: not folded.
  Value sharedTile, T;
};

/// The shared expert folded into the grouped GEMMs of a fused layer (4
/// launches with a shared expert, docs/gpu.md): the launch's row tiles are
/// ceil(T / tileM) shared tiles (the shared expert over all T tokens, in
/// token order) followed by the plan's maxTiles tiles. Per block: whether
/// it is a shared tile, its tile index among its kind, and whether it has
/// work (a shared tile always; a plan tile below numTiles[0]).
struct SharedFold {
  Value isShared, tile, active;
};
/// The split of block row `blockRow` for a launch with `T` tokens and
/// row tile `tileM` (numTiles: the plan's i32 [1]).
SharedFold splitSharedTiles(IRB &e, Value blockRow, Value T, Value tileM, Value numTiles);

/// Emits the combine after a block has stored its rows (plan rows
/// [rowBase, rowBase + tileM), columns [colTile * tileN, (colTile + 1) *
/// tileN)): a release fence and a barrier, one atomic arrival per valid row on
/// the counter (token, colTile) of ceil(D / tileN) per token, a barrier and
/// an acquire fence; then the block's numThreads threads sum every token it
/// completed in slot order (after sharedOut) into y. Must be reached by every
/// thread of the block (it has barriers).
void emitCombineEpilogue(IRB &e, const CombineEpilogue &c, Value tid, Value rowBase,
                         int64_t tileM, Value colTile, int64_t tileN, int64_t numThreads);

} // namespace gpu_lowering
} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_GPU_KERNELS_H
