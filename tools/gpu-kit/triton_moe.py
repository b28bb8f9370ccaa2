"""The Triton anchor of the GPU check kit: a fused top-k SwiGLU MoE layer
written with Triton, in the style of the hand-written fused-MoE kernels that
serving engines use (token rows sorted by expert and padded to the row tile,
one grouped GEMM per projection, the routed weight applied in the second
GEMM's epilogue). It is a yardstick for tools/gpu-kit/kit.py only: the
compiler never uses it.

Layout (the moe dialect's, docs/spec.md §2-§3): x [T, D], wr [D, E], w1 [E, D, 2H]
(gate columns [0, H), up columns [H, 2H)), w2 [E, H, D].

Kernels:
  * _gemm1_swiglu: h[r] = silu(x[t] W1g[e]) * (x[t] W1u[e]) for every routed
    row r = (token t, slot j) of expert e, both projections accumulated in
    the same K loop (two accumulators), so u never goes to memory;
  * _gemm2_weighted: o[r] = w[r] * (h[r] W2[e]);
  then y[t] = sum_j o[t, j] (one torch reduction, f32), rounded once.
Row tiles are ordered in groups of GROUP_M over the column tiles, so
consecutive programs reuse an expert's weight columns from L2.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _tile_ids(pid, num_m, num_n, GROUP_M: tl.constexpr):
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size
    pid_n = (pid % group) // size
    return pid_m, pid_n


@triton.jit
def _gemm1_swiglu(x_ptr, w1_ptr, h_ptr, rows_ptr, tile_expert_ptr, num_rows,
                  num_m, D, H, stride_x, stride_we, stride_wk, stride_h,
                  TOPK: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr, GROUP_M: tl.constexpr,
                  PRECISION: tl.constexpr):
    pid_m, pid_n = _tile_ids(tl.program_id(0), num_m, tl.cdiv(H, BN), GROUP_M)
    expert = tl.load(tile_expert_ptr + pid_m)
    if expert < 0:
        return
    offs_m = pid_m * BM + tl.arange(0, BM)
    rows = tl.load(rows_ptr + offs_m)
    valid = rows < num_rows
    tokens = rows // TOPK
    offs_n = pid_n * BN + tl.arange(0, BN)
    n_ok = offs_n < H
    offs_k = tl.arange(0, BK)
    a_ptrs = x_ptr + tokens[:, None] * stride_x + offs_k[None, :]
    g_ptrs = w1_ptr + expert * stride_we + offs_k[:, None] * stride_wk + offs_n[None, :]
    u_ptrs = g_ptrs + H
    acc_g = tl.zeros((BM, BN), dtype=tl.float32)
    acc_u = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, D, BK):
        k_ok = offs_k < D - k0
        a = tl.load(a_ptrs, mask=valid[:, None] & k_ok[None, :], other=0.0)
        g = tl.load(g_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        u = tl.load(u_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc_g = tl.dot(a, g, acc_g, input_precision=PRECISION)
        acc_u = tl.dot(a, u, acc_u, input_precision=PRECISION)
        a_ptrs += BK
        g_ptrs += BK * stride_wk
        u_ptrs += BK * stride_wk
    h = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    out = h_ptr + rows[:, None] * stride_h + offs_n[None, :]
    tl.store(out, h.to(h_ptr.dtype.element_ty), mask=valid[:, None] & n_ok[None, :])


@triton.jit
def _gemm2_weighted(h_ptr, w2_ptr, o_ptr, rows_ptr, tile_expert_ptr,
                    row_weight_ptr, num_rows, num_m, H, D, stride_h,
                    stride_we, stride_wk, stride_o, BM: tl.constexpr,
                    BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                    PRECISION: tl.constexpr):
    pid_m, pid_n = _tile_ids(tl.program_id(0), num_m, tl.cdiv(D, BN), GROUP_M)
    expert = tl.load(tile_expert_ptr + pid_m)
    if expert < 0:
        return
    offs_m = pid_m * BM + tl.arange(0, BM)
    rows = tl.load(rows_ptr + offs_m)
    valid = rows < num_rows
    offs_n = pid_n * BN + tl.arange(0, BN)
    n_ok = offs_n < D
    offs_k = tl.arange(0, BK)
    a_ptrs = h_ptr + rows[:, None] * stride_h + offs_k[None, :]
    b_ptrs = w2_ptr + expert * stride_we + offs_k[:, None] * stride_wk + offs_n[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, H, BK):
        k_ok = offs_k < H - k0
        a = tl.load(a_ptrs, mask=valid[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK
        b_ptrs += BK * stride_wk
    weight = tl.load(row_weight_ptr + rows, mask=valid, other=0.0)
    acc = acc * weight[:, None]
    out = o_ptr + rows[:, None] * stride_o + offs_n[None, :]
    tl.store(out, acc, mask=valid[:, None] & n_ok[None, :])


def _config(rows, dtype):
    """(BM, BN, BK, GROUP_M, warps, stages) by routed rows and data type."""
    if dtype == torch.float32:
        return (16, 64, 32, 8, 4, 3) if rows <= 64 else (64, 64, 32, 8, 4, 3)
    if rows <= 64:
        return (16, 64, 128, 8, 4, 4)
    if rows <= 1024:
        return (64, 128, 64, 8, 4, 4)
    return (128, 128, 64, 8, 8, 3)


def route(x, wr, k):
    """Top-k routing with softmax over the selected logits (f32)."""
    logits = x.float() @ wr.float()
    top, idx = torch.topk(logits, k, dim=-1)
    return torch.softmax(top, dim=-1), idx


def align(idx, E, BM):
    """Rows r = t*k + j sorted by expert (stable), each expert's group padded
    to BM: (rows [num_m*BM] with num_rows marking padding, tile_expert
    [num_m] with -1 beyond the last group)."""
    flat = idx.reshape(-1)
    num_rows = flat.numel()
    order = torch.argsort(flat, stable=True).to(torch.int32)
    counts = torch.bincount(flat, minlength=E)
    padded = (counts + BM - 1) // BM * BM
    # Worst case: every expert wastes BM - 1 rows.
    max_tiles = (num_rows + E * (BM - 1)) // BM + 1
    rows = torch.full((max_tiles * BM,), num_rows, dtype=torch.int32, device=idx.device)
    starts = torch.cumsum(padded, 0) - padded
    src_starts = torch.cumsum(counts, 0) - counts
    pos = torch.arange(num_rows, device=idx.device)
    sorted_expert = flat[order.long()]
    dest = starts[sorted_expert] + (pos - src_starts[sorted_expert])
    rows[dest] = order
    # Expert e owns tiles [ends[e-1], ends[e]); tiles past the last are -1.
    # No host synchronisation (no .item(), no data-dependent shape).
    ends = torch.cumsum(padded // BM, 0)
    tiles = torch.arange(max_tiles, device=idx.device)
    tile_expert = torch.searchsorted(ends, tiles, right=True)
    tile_expert = torch.where(tile_expert < E, tile_expert, -1).to(torch.int32)
    return rows, tile_expert, max_tiles


def plan(x, wr, w1, k):
    """Routing and the row plan of fused_moe (torch ops, no host sync)."""
    T = x.shape[0]
    E = w1.shape[0]
    weights, idx = route(x, wr, k)
    config = _config(T * k, x.dtype)
    rows, tile_expert, num_m = align(idx, E, config[0])
    return weights, rows, tile_expert, num_m, config


def experts(x, w1, w2, k, routing):
    """The two Triton GEMM launches and the f32 slot sum of fused_moe, given
    plan()'s routing: the kit times this alone as the strict anchor."""
    weights, rows, tile_expert, num_m, (BM, BN, BK, GROUP_M, warps, stages) = routing
    T, D = x.shape
    H = w1.shape[2] // 2
    precision = "ieee" if x.dtype == torch.float32 else "tf32"
    h = torch.empty((T * k, H), dtype=x.dtype, device=x.device)
    grid1 = (num_m * triton.cdiv(H, BN),)
    _gemm1_swiglu[grid1](x, w1, h, rows, tile_expert, T * k, num_m, D, H,
                         x.stride(0), w1.stride(0), w1.stride(1), h.stride(0),
                         TOPK=k, BM=BM, BN=BN, BK=BK, GROUP_M=GROUP_M,
                         PRECISION=precision, num_warps=warps, num_stages=stages)
    o = torch.empty((T * k, D), dtype=torch.float32, device=x.device)
    grid2 = (num_m * triton.cdiv(D, BN),)
    _gemm2_weighted[grid2](h, w2, o, rows, tile_expert, weights.reshape(-1),
                           T * k, num_m, H, D, h.stride(0), w2.stride(0),
                           w2.stride(1), o.stride(0), BM=BM, BN=BN, BK=BK,
                           GROUP_M=GROUP_M, PRECISION=precision,
                           num_warps=warps, num_stages=stages)
    return o.view(T, k, D).sum(dim=1).to(x.dtype)


def fused_moe(x, wr, w1, w2, k):
    """The whole layer: routing, plan, both GEMMs, the slot sum."""
    return experts(x, w1, w2, k, plan(x, wr, w1, k))
