"""The Triton anchor of the GPU check kit: a fused top-k SwiGLU MoE layer
written with Triton, in the style of the hand-written fused-MoE kernels that
serving engines use (token rows sorted by expert and padded to the row tile,
one grouped GEMM per projection, the routed weight applied in the second
GEMM's epilogue). It is a yardstick for tools/gpu-kit/kit.py only: the
compiler never uses it.

Layout (the moe dialect's, docs/spec.md §2-§3): x [T, D], wr [D, E], w1 [E, D, 2H]
(gate columns [0, H), up columns [H, 2H)), w2 [E, H, D].

Kernels of the forward:
  * _gemm1_swiglu: h[r] = silu(x[t] W1g[e]) * (x[t] W1u[e]) for every routed
    row r = (token t, slot j) of expert e, both projections accumulated in
    the same K loop (two accumulators), so u never goes to memory;
  * _row_gemm (WEIGHTED): o[r] = w[r] * (h[r] W2[e]);
  then y[t] = sum_j o[t, j] (one torch reduction, f32), rounded once.
Row tiles are ordered in groups of GROUP_M over the column tiles, so
consecutive programs reuse an expert's weight columns from L2.

FP8 block-scaled experts (QUANT; experts(..., scales=(s1, s2)), the kit's
DeepSeek-V3 anchor): w1 and w2 are float8_e4m3fn codes, s1 [E, ceil(D/QK),
ceil(2H/QN)] and s2 [E, ceil(H/QK), ceil(D/QN)] their f32 block scales
(docs/spec.md §2.1, W = q * s). Weight-only, as the compiler's default
numerics: each K step (BK divides QK, so it lies in one block) is one
tl.dot of the bf16 activations and the codes converted to bf16 (exact),
added to the f32 accumulator times its block's scales, per column: the
f32 promotion per block of K of vLLM's block-scaled fused_moe, without its
FP8 activations.

The training step (train_step: forward and backward of the layer, the
kit's training anchor) keeps the pre-activations z = [x W1g | x W1u] of
every routed row (SAVE_Z) and the unweighted rows p = h W2, then:
  * dp[r] = w[r] dy[t], dw[r] = <dy[t], p[r]> (torch);
  * _row_gemm with W2's strides swapped and SWIGLU_BWD: dh = dp W2[e]^T,
    the SwiGLU backward in the epilogue (dz = [dh u silu'(g) | dh silu(g)]),
    dh never stored;
  * _row_gemm with W1's strides swapped: dx rows = dz W1[e]^T, summed over
    a token's k rows (torch);
  * _wgrad: dW2[e] = h_e^T dp_e and dW1[e] = x_e^T dz_e, one program per
    (output tile, expert) walking the expert's rows (variable K, no
    atomics, as ScatterMoE's and MegaBlocks' weight gradients);
  * the routing backward (softmax over the top-k, the router's product) in
    torch.
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
def _gemm1_swiglu(x_ptr, w1_ptr, h_ptr, z_ptr, rows_ptr, tile_expert_ptr, num_rows,
                  num_m, D, H, stride_x, stride_we, stride_wk, stride_h, stride_z,
                  s_ptr, stride_se, stride_sk,
                  TOPK: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr, GROUP_M: tl.constexpr,
                  PRECISION: tl.constexpr, SAVE_Z: tl.constexpr,
                  QUANT: tl.constexpr, QK: tl.constexpr, QN: tl.constexpr):
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
    # QUANT: the gate and up columns' block scales (of W1's 2H columns).
    sg_ptrs = s_ptr + expert * stride_se + offs_n // QN
    su_ptrs = s_ptr + expert * stride_se + (H + offs_n) // QN
    acc_g = tl.zeros((BM, BN), dtype=tl.float32)
    acc_u = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, D, BK):
        k_ok = offs_k < D - k0
        a = tl.load(a_ptrs, mask=valid[:, None] & k_ok[None, :], other=0.0)
        g = tl.load(g_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        u = tl.load(u_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        if QUANT:
            sg = tl.load(sg_ptrs + (k0 // QK) * stride_sk, mask=n_ok, other=0.0)
            su = tl.load(su_ptrs + (k0 // QK) * stride_sk, mask=n_ok, other=0.0)
            acc_g += tl.dot(a, g.to(tl.bfloat16)) * sg[None, :]
            acc_u += tl.dot(a, u.to(tl.bfloat16)) * su[None, :]
        else:
            acc_g = tl.dot(a, g, acc_g, input_precision=PRECISION)
            acc_u = tl.dot(a, u, acc_u, input_precision=PRECISION)
        a_ptrs += BK
        g_ptrs += BK * stride_wk
        u_ptrs += BK * stride_wk
    h = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    out = h_ptr + rows[:, None] * stride_h + offs_n[None, :]
    tl.store(out, h.to(h_ptr.dtype.element_ty), mask=valid[:, None] & n_ok[None, :])
    if SAVE_Z:  # training: the pre-activations [gate | up] for the backward
        z = z_ptr + rows[:, None] * stride_z + offs_n[None, :]
        tl.store(z, acc_g.to(z_ptr.dtype.element_ty), mask=valid[:, None] & n_ok[None, :])
        tl.store(z + H, acc_u.to(z_ptr.dtype.element_ty), mask=valid[:, None] & n_ok[None, :])


@triton.jit
def _row_gemm(a_ptr, b_ptr, c_ptr, z_ptr, rows_ptr, tile_expert_ptr, row_weight_ptr,
              num_rows, num_m, K, N, stride_a, stride_be, stride_bk, stride_bn,
              stride_c, stride_z, s_ptr, stride_se, stride_sk,
              WEIGHTED: tl.constexpr, SWIGLU_BWD: tl.constexpr,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
              GROUP_M: tl.constexpr, PRECISION: tl.constexpr,
              QUANT: tl.constexpr, QK: tl.constexpr, QN: tl.constexpr):
    """C[r, n] = sum_k A[r, k] B[e][k, n] over the routed rows r of expert e,
    B[e][k, n] at b + e stride_be + k stride_bk + n stride_bn (so a
    transposed weight is the same kernel with its strides swapped).
    WEIGHTED: C[r] *= row_weight[r] (the forward's second GEMM).
    SWIGLU_BWD: C is dh, and the kernel stores dz = [dh u silu'(g) |
    dh silu(g)] from z = [g | u] instead (the backward through W2).
    QUANT: B holds FP8 codes, s[e][k // QK][n // QN] their scales."""
    pid_m, pid_n = _tile_ids(tl.program_id(0), num_m, tl.cdiv(N, BN), GROUP_M)
    expert = tl.load(tile_expert_ptr + pid_m)
    if expert < 0:
        return
    offs_m = pid_m * BM + tl.arange(0, BM)
    rows = tl.load(rows_ptr + offs_m)
    valid = rows < num_rows
    offs_n = pid_n * BN + tl.arange(0, BN)
    n_ok = offs_n < N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + rows[:, None] * stride_a + offs_k[None, :]
    b_ptrs = (b_ptr + expert * stride_be + offs_k[:, None] * stride_bk
              + offs_n[None, :] * stride_bn)
    s_ptrs = s_ptr + expert * stride_se + offs_n // QN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        k_ok = offs_k < K - k0
        a = tl.load(a_ptrs, mask=valid[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        if QUANT:
            sc = tl.load(s_ptrs + (k0 // QK) * stride_sk, mask=n_ok, other=0.0)
            acc += tl.dot(a, b.to(tl.bfloat16)) * sc[None, :]
        else:
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    mask = valid[:, None] & n_ok[None, :]
    out = c_ptr + rows[:, None] * stride_c + offs_n[None, :]
    if WEIGHTED:
        weight = tl.load(row_weight_ptr + rows, mask=valid, other=0.0)
        acc = acc * weight[:, None]
    if SWIGLU_BWD:
        zp = z_ptr + rows[:, None] * stride_z + offs_n[None, :]
        g = tl.load(zp, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(zp + N, mask=mask, other=0.0).to(tl.float32)
        sig = 1.0 / (1.0 + tl.exp(-g))
        tl.store(out, (acc * u * (sig + g * sig * (1.0 - sig))).to(c_ptr.dtype.element_ty), mask=mask)
        tl.store(out + N, (acc * g * sig).to(c_ptr.dtype.element_ty), mask=mask)
    else:
        tl.store(out, acc.to(c_ptr.dtype.element_ty), mask=mask)


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
    return align_groups(idx, E, BM)[:3]


def align_groups(idx, E, BM):
    """align() and each expert's padded group in `rows`: (..., starts [E],
    padded sizes [E]), int32."""
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
    return rows, tile_expert, max_tiles, starts.to(torch.int32), padded.to(torch.int32)


def plan(x, wr, w1, k):
    """Routing and the row plan of fused_moe (torch ops, no host sync)."""
    T = x.shape[0]
    E = w1.shape[0]
    weights, idx = route(x, wr, k)
    config = _config(T * k, x.dtype)
    rows, tile_expert, num_m = align(idx, E, config[0])
    return weights, rows, tile_expert, num_m, config


def experts(x, w1, w2, k, routing, scales=None, block=(128, 128)):
    """The two Triton GEMM launches and the f32 slot sum of fused_moe, given
    plan()'s routing: the kit times this alone as the strict anchor.
    scales=(s1, s2): w1 and w2 are float8_e4m3fn codes with block scales of
    `block` = (QK, QN) (the module comment; BK must divide QK)."""
    weights, rows, tile_expert, num_m, (BM, BN, BK, GROUP_M, warps, stages) = routing
    T, D = x.shape
    H = w1.shape[2] // 2
    precision = "ieee" if x.dtype == torch.float32 else "tf32"
    quant = scales is not None
    s1, s2 = scales if quant else (x, x)  # unread without QUANT
    QK, QN = block
    assert not quant or QK % BK == 0, "a K step must lie in one scale block"
    h = torch.empty((T * k, H), dtype=x.dtype, device=x.device)
    grid1 = (num_m * triton.cdiv(H, BN),)
    _gemm1_swiglu[grid1](x, w1, h, h, rows, tile_expert, T * k, num_m, D, H,
                         x.stride(0), w1.stride(0), w1.stride(1), h.stride(0), 0,
                         s1, s1.stride(0) if quant else 0, s1.stride(1) if quant else 0,
                         TOPK=k, BM=BM, BN=BN, BK=BK, GROUP_M=GROUP_M,
                         PRECISION=precision, SAVE_Z=False, QUANT=quant, QK=QK, QN=QN,
                         num_warps=warps, num_stages=stages)
    o = torch.empty((T * k, D), dtype=torch.float32, device=x.device)
    grid2 = (num_m * triton.cdiv(D, BN),)
    _row_gemm[grid2](h, w2, o, o, rows, tile_expert, weights.reshape(-1), T * k, num_m, H, D,
                     h.stride(0), w2.stride(0), w2.stride(1), w2.stride(2), o.stride(0), 0,
                     s2, s2.stride(0) if quant else 0, s2.stride(1) if quant else 0,
                     WEIGHTED=True, SWIGLU_BWD=False, BM=BM, BN=BN, BK=BK, GROUP_M=GROUP_M,
                     PRECISION=precision, QUANT=quant, QK=QK, QN=QN, num_warps=warps,
                     num_stages=stages)
    return o.view(T, k, D).sum(dim=1).to(x.dtype)


def fused_moe(x, wr, w1, w2, k, scales=None, block=(128, 128)):
    """The whole layer: routing, plan, both GEMMs, the slot sum."""
    return experts(x, w1, w2, k, plan(x, wr, w1, k), scales, block)


@triton.jit
def _wgrad(a_ptr, b_ptr, c_ptr, rows_ptr, starts_ptr, sizes_ptr, num_rows, M, N,
           stride_a, stride_b, stride_ce, stride_cm, A_TOKENS: tl.constexpr,
           TOPK: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
           PRECISION: tl.constexpr):
    """C[e][m, n] = sum over expert e's routed rows r of A[a(r), m] B[r, n],
    a(r) = r // TOPK (x's token) with A_TOKENS, else r; one program per
    (C tile, expert), the rows in a fixed order (no atomics)."""
    e = tl.program_id(1)
    num_n = tl.cdiv(N, BN)
    pid_m = tl.program_id(0) // num_n
    pid_n = tl.program_id(0) % num_n
    start = tl.load(starts_ptr + e)
    size = tl.load(sizes_ptr + e)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    m_ok = offs_m < M
    n_ok = offs_n < N
    offs_p = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for p0 in range(0, size, BK):
        p_ok = offs_p < size - p0
        rows = tl.load(rows_ptr + start + p0 + offs_p, mask=p_ok, other=num_rows)
        valid = rows < num_rows
        if A_TOKENS:
            a_rows = rows // TOPK
        else:
            a_rows = rows
        a = tl.load(a_ptr + a_rows[None, :] * stride_a + offs_m[:, None],
                    mask=m_ok[:, None] & valid[None, :], other=0.0)
        b = tl.load(b_ptr + rows[:, None] * stride_b + offs_n[None, :],
                    mask=valid[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
    out = c_ptr + e * stride_ce + offs_m[:, None] * stride_cm + offs_n[None, :]
    tl.store(out, acc.to(c_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def _wgrad_config(dtype):
    """(BM, BN, BK, warps, stages) of the weight gradients."""
    if dtype == torch.float32:
        return 64, 64, 32, 4, 3
    return 128, 128, 32, 8, 3


def train_step(x, wr, w1, w2, dy, k):
    """Forward and backward of the layer for the output cotangent dy:
    (y, dx, dwr, dw1, dw2), every gradient in its parameter's dtype."""
    T, D = x.shape
    E, H = w1.shape[0], w1.shape[2] // 2
    R = T * k
    weights, idx = route(x, wr, k)
    BM, BN, BK, GROUP_M, warps, stages = _config(R, x.dtype)
    rows, tile_expert, num_m, starts, sizes = align_groups(idx, E, BM)
    precision = "ieee" if x.dtype == torch.float32 else "tf32"
    # Forward, keeping z and the unweighted rows p.
    h = torch.empty((R, H), dtype=x.dtype, device=x.device)
    z = torch.empty((R, 2 * H), dtype=x.dtype, device=x.device)
    _gemm1_swiglu[(num_m * triton.cdiv(H, BN),)](
        x, w1, h, z, rows, tile_expert, R, num_m, D, H, x.stride(0), w1.stride(0),
        w1.stride(1), h.stride(0), z.stride(0), x, 0, 0, TOPK=k, BM=BM, BN=BN, BK=BK,
        GROUP_M=GROUP_M, PRECISION=precision, SAVE_Z=True, QUANT=False, QK=1, QN=1,
        num_warps=warps, num_stages=stages)
    p = torch.empty((R, D), dtype=torch.float32, device=x.device)
    _row_gemm[(num_m * triton.cdiv(D, BN),)](
        h, w2, p, p, rows, tile_expert, p, R, num_m, H, D, h.stride(0), w2.stride(0),
        w2.stride(1), w2.stride(2), p.stride(0), 0, x, 0, 0, WEIGHTED=False,
        SWIGLU_BWD=False, BM=BM, BN=BN, BK=BK, GROUP_M=GROUP_M, PRECISION=precision,
        QUANT=False, QK=1, QN=1, num_warps=warps, num_stages=stages)
    w = weights.reshape(R, 1)
    y = (w * p).view(T, k, D).sum(dim=1).to(x.dtype)
    # Backward.
    dyr = dy.float().repeat_interleave(k, dim=0)
    dw = (dyr * p).sum(dim=1).view(T, k)
    dp = (w * dyr).to(x.dtype)
    dz = torch.empty((R, 2 * H), dtype=x.dtype, device=x.device)
    # dh = dp W2[e]^T (B[e][k=d, n=h] = w2[e, h, d]), the SwiGLU backward in
    # the epilogue; then dx rows = dz W1[e]^T (B[e][k=c, n=d] = w1[e, d, c]).
    _row_gemm[(num_m * triton.cdiv(H, BN),)](
        dp, w2, dz, z, rows, tile_expert, dz, R, num_m, D, H, dp.stride(0), w2.stride(0),
        w2.stride(2), w2.stride(1), dz.stride(0), z.stride(0), x, 0, 0, WEIGHTED=False,
        SWIGLU_BWD=True, BM=BM, BN=BN, BK=BK, GROUP_M=GROUP_M, PRECISION=precision,
        QUANT=False, QK=1, QN=1, num_warps=warps, num_stages=stages)
    dxr = torch.empty((R, D), dtype=torch.float32, device=x.device)
    _row_gemm[(num_m * triton.cdiv(D, BN),)](
        dz, w1, dxr, dxr, rows, tile_expert, dxr, R, num_m, 2 * H, D, dz.stride(0),
        w1.stride(0), w1.stride(2), w1.stride(1), dxr.stride(0), 0, x, 0, 0,
        WEIGHTED=False, SWIGLU_BWD=False, BM=BM, BN=BN, BK=BK, GROUP_M=GROUP_M,
        PRECISION=precision, QUANT=False, QK=1, QN=1, num_warps=warps, num_stages=stages)
    WM, WN, WK, wwarps, wstages = _wgrad_config(x.dtype)
    dw2 = torch.empty_like(w2)
    _wgrad[(triton.cdiv(H, WM) * triton.cdiv(D, WN), E)](
        h, dp, dw2, rows, starts, sizes, R, H, D, h.stride(0), dp.stride(0), dw2.stride(0),
        dw2.stride(1), A_TOKENS=False, TOPK=k, BM=WM, BN=WN, BK=WK, PRECISION=precision,
        num_warps=wwarps, num_stages=wstages)
    dw1 = torch.empty_like(w1)
    _wgrad[(triton.cdiv(D, WM) * triton.cdiv(2 * H, WN), E)](
        x, dz, dw1, rows, starts, sizes, R, D, 2 * H, x.stride(0), dz.stride(0),
        dw1.stride(0), dw1.stride(1), A_TOKENS=True, TOPK=k, BM=WM, BN=WN, BK=WK,
        PRECISION=precision, num_warps=wwarps, num_stages=wstages)
    # The routing backward: softmax over the selected logits, then x wr.
    dtop = weights * (dw - (weights * dw).sum(dim=1, keepdim=True))
    dlogits = torch.zeros((T, E), dtype=torch.float32, device=x.device).scatter_(1, idx, dtop)
    dwr = (x.float().t() @ dlogits).to(wr.dtype)
    dx = (dxr.view(T, k, D).sum(dim=1) + dlogits @ wr.float().t()).to(x.dtype)
    return y, dx, dwr, dw1, dw2
