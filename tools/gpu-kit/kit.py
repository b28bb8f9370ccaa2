"""The run step of the GPU check kit (see README.md, "GPU check kit").

Runs on a GPU machine with nothing but the kit folder, python3 with torch
(and triton for the anchor) and the NVIDIA driver; no LLVM, no MLIR, no
network. The kit's libraries were made by `moe-compile --target=cuda` on the
build machine (docs/aot.md has the ABI); they are called here through ctypes
on tensors that torch placed on the GPU.

  python3 kit.py KIT_DIR OUT_DIR [--only=correctness|bench]

(a) correctness: every case of manifest.json (each spec example and its
    fused form, the MOESART gate) against the CPU path's outputs that the
    prepare step stored: f32 results within 1e-4 * max|expected|, bf16/f16
    within 1e-2 * max|expected| (docs/gpu.md explains the bound), integer
    results (chosen experts) identical;
(b) benchmarks: the device's copy bandwidth and torch's bf16 matmul rate as
    yardsticks; the Mixtral-shaped layer (D=4096, H=14336, E=8, top-2,
    SwiGLU) at T = 1, 16, 128, 1024, 4096 in bf16 and f32 with the weights
    already on the device, against PyTorch eager and the Triton anchor
    (triton_moe.py); % of bandwidth at decode, % of the matmul rate at
    prefill, and the ratio to the anchor; then the decode variants: the
    bf16 layer at T = 1 and 16 compiled with split-K forced to each S of
    manifest bench.decode_variants next to the default (S chosen from the
    shape), with % of bandwidth and the largest difference from the default.
Prints a summary table and writes it to OUT_DIR/summary.txt. Exit status 1
when a correctness case fails.
"""
import ast
import ctypes
import json
import math
import os
import re
import sys
import time

import torch

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16,
          "i32": torch.int32, "i64": torch.int64}
NPY = {"<f4": torch.float32, "<f2": torch.float16, "<i4": torch.int32,
       "<i8": torch.int64, "|b1": torch.bool}

LINES = []
# "cuda", or "cpu" for a kit prepared with MOE_KIT_TARGET=cpu (a dry run of
# the kit on the build machine: the same code path with host pointers).
DEVICE = "cuda"


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def say(line=""):
    print(line, flush=True)
    LINES.append(line)


# ---------------------------------------------------------------- files ---

def read_npy(path):
    """A .npy (version 1-3, little-endian, C order) as a CPU torch tensor."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError(f"{path}: not a .npy file")
    major = data[6]
    if major == 1:
        hlen, start = int.from_bytes(data[8:10], "little"), 10
    else:
        hlen, start = int.from_bytes(data[8:12], "little"), 12
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    if header["fortran_order"]:
        raise ValueError(f"{path}: Fortran order is not supported")
    dtype = NPY[header["descr"]]
    shape = tuple(header["shape"])
    body = bytearray(data[start + hlen:])
    t = torch.frombuffer(body, dtype=dtype) if body else torch.empty(0, dtype=dtype)
    return t[: math.prod(shape)].reshape(shape)


# ------------------------------------------------------------------ ABI ---

def parse_type(text):
    """'?x256xbf16' -> ([-1, 256], 'bf16'); 'f32' -> ([], 'f32')."""
    parts = text.split("x")
    return [-1 if p == "?" else int(p) for p in parts[:-1]], parts[-1]


def parse_signature(sig):
    lhs, rhs = sig.split("->")
    return ([parse_type(t) for t in re.findall(r"tensor<([^>]*)>", lhs)],
            [parse_type(t) for t in re.findall(r"tensor<([^>]*)>", rhs)])


class Function:
    """One exported function of a moe-compile library (docs/aot.md)."""

    def __init__(self, lib_path, entry):
        self.lib = ctypes.CDLL(os.path.abspath(lib_path))
        self.fn = getattr(self.lib, "moe_" + entry)
        self.fn.restype = ctypes.c_int
        self.fn.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                            ctypes.POINTER(ctypes.c_void_p),
                            ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p]
        sig = getattr(self.lib, "moe_" + entry + "_signature")
        sig.restype = ctypes.c_char_p
        self.signature = sig().decode()
        self.args, self.results = parse_signature(self.signature)
        self.last_error = self.lib.moe_last_error
        self.last_error.restype = ctypes.c_char_p

    def __call__(self, args, results):
        dims = [s for (shape, _), a in zip(self.args, args)
                for s, d in zip(a.shape, shape) if d == -1]
        a = (ctypes.c_void_p * len(args))(*[t.data_ptr() for t in args])
        r = (ctypes.c_void_p * len(results))(*[t.data_ptr() for t in results])
        d = (ctypes.c_int64 * max(1, len(dims)))(*dims)
        stream = torch.cuda.current_stream().cuda_stream if DEVICE == "cuda" else 0
        if self.fn(a, r, d if dims else None, ctypes.c_void_p(stream)) != 0:
            raise RuntimeError(self.last_error().decode())


# ---------------------------------------------------------- correctness ---

def compare(actual, expected, dtype):
    """(ok, max |a-e| / max |e|) under the kit's tolerances."""
    a = actual.detach().to("cpu")
    e = expected
    if a.shape != e.shape:
        return False, f"shape {tuple(a.shape)} != {tuple(e.shape)}"
    if dtype in ("i32", "i64"):
        bad = int((a.to(torch.int64) != e.to(torch.int64)).sum())
        return bad == 0, f"{bad} differ"
    a, e = a.double(), e.double()
    scale = float(e.abs().max()) if e.numel() else 0.0
    err = float((a - e).abs().max()) if e.numel() else 0.0
    tol = (1e-4 if dtype == "f32" else 1e-2) * max(scale, 1e-30)
    return err <= tol, f"{err / max(scale, 1e-30):.2e}"


def correctness(kit, manifest):
    say("== correctness (GPU vs the CPU path's outputs)")
    say(f"{'case':<34} {'form':<6} {'result':<8} {'dtype':<5} {'max-rel-err':>12}  status")
    failures = 0
    skipped = 0
    for case in manifest["cases"]:
        if case.get("not_compiled"):
            skipped += 1
            say(f"{case['name']:<34} {case['form']:<6} {'-':<8} {'-':<5} {'-':>12}  NOT COMPILED: {case['not_compiled']}")
            continue
        try:
            fn = Function(os.path.join(kit, case["lib"]), case["entry"])
            args = []
            for path, (_, dt) in zip(case["args"], fn.args):
                args.append(read_npy(os.path.join(kit, path)).to(DTYPES[dt]).to(DEVICE))
            expected = [read_npy(os.path.join(kit, p)) for p in case["expected"]]
            for call in range(2):  # the second call: steady state
                results = [torch.empty(e.shape, dtype=DTYPES[dt], device=DEVICE)
                           for e, (_, dt) in zip(expected, fn.results)]
                fn(args, results)
                sync()
            for i, (res, exp, (_, dt)) in enumerate(zip(results, expected, fn.results)):
                ok, err = compare(res, exp, dt)
                failures += not ok
                say(f"{case['name']:<34} {case['form']:<6} {'#' + str(i):<8} {dt:<5} {err:>12}  {'ok' if ok else 'FAIL'}")
        except Exception as ex:  # one line per failing case, keep going
            failures += 1
            say(f"{case['name']:<34} {case['form']:<6} {'-':<8} {'-':<5} {'-':>12}  FAIL: {ex}")
    say(f"correctness: {failures} failure(s), {skipped} case(s) the target cannot compile")
    return failures


# ----------------------------------------------------------- benchmarks ---

def timed(fn, min_s=0.3, max_reps=200):
    """Median milliseconds per fn() call. Calls run back to back in batches
    (about 20 ms of work each) between two CUDA events on the current stream,
    so neither a host synchronisation per call nor the Python loop between
    calls is counted unless the GPU waits for it; one warm-up call first."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    batch = max(1, min(100, int(0.02 / max(time.perf_counter() - t0, 1e-6))))
    samples = []
    start_all = time.perf_counter()
    while len(samples) < max_reps and (time.perf_counter() - start_all < min_s or len(samples) < 3):
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(batch):
            fn()
        end.record()
        end.synchronize()
        samples.append(begin.elapsed_time(end) / batch)
    samples.sort()
    return samples[len(samples) // 2]


def yardsticks():
    n = 1 << 29  # 2 GiB of f32
    src = torch.empty(n, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    ms = timed(lambda: dst.copy_(src))
    bandwidth = 2 * src.numel() * 4 / (ms * 1e-3) / 1e9  # read + write, GB/s
    del src, dst
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    ms = timed(lambda: a @ b)
    tflops = 2 * 8192 ** 3 / (ms * 1e-3) / 1e12
    return bandwidth, tflops


def torch_eager(x, wr, w1, w2, k):
    T, D = x.shape
    H = w2.shape[1]
    logits = x.float() @ wr.float()
    top, idx = torch.topk(logits, k, dim=-1)
    w = torch.softmax(top, dim=-1)
    y = torch.zeros((T, D), dtype=torch.float32, device=x.device)
    for e in range(w1.shape[0]):
        tok, slot = (idx == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        u = x[tok] @ w1[e]
        h = torch.nn.functional.silu(u[:, :H]) * u[:, H:]
        y.index_add_(0, tok, (h @ w2[e]).float() * w[tok, slot, None])
    return y.to(x.dtype)


def decode_bytes(x, wr, w1, w2, k):
    """Bytes a decode step must move: the active experts' weights, the
    router, x and y (the %bw numerator)."""
    T, D = x.shape
    E, H = wr.shape[1], w2.shape[1]
    _, idx = torch.topk(x.float() @ wr.float(), k, dim=-1)
    active = int(torch.unique(idx).numel())
    return (active * (D * 2 * H + H * D) + D * E + 2 * T * D) * w1.element_size()


def decode_variants(kit, spec, default_fn, variants, weights, bandwidth, g):
    """The bf16 layer at the decode token counts with split-K forced to each
    S of the kit (and the default, chosen from the shape), on the same
    weights and inputs: % of the copy bandwidth per variant."""
    wr, w1, w2 = weights
    D, k = spec["D"], spec["k"]
    tokens = spec.get("decode_tokens", [1, 16])
    say("== decode variants (bf16; split-K of the 16-row GEMMs, docs/gpu.md)")
    say(f"{'variant':<12} " + " ".join(f"{'T=%d ms' % T:>9} {'%bw':>6}" for T in tokens) + f" {'max rel-diff vs default':>24}")
    xs = [torch.randn(T, D, device="cuda", generator=g).to(torch.bfloat16) for T in tokens]
    reference = []
    for name, lib in [("default", None)] + sorted(variants.items(), key=lambda kv: int(kv[0].split("=")[1])):
        try:
            fn = default_fn if lib is None else Function(os.path.join(kit, lib), spec["entry"])
        except Exception as ex:
            say(f"{name:<12} not loaded: {str(ex).splitlines()[0]}")
            continue
        cells, diff = [], 0.0
        for i, x in enumerate(xs):
            y = torch.empty_like(x)
            ms = timed(lambda: fn([x, wr, w1, w2], [y]))
            pct = 100 * decode_bytes(x, wr, w1, w2, k) / (ms * 1e-3) / (bandwidth * 1e9)
            cells.append(f"{ms:9.3f} {pct:6.1f}")
            if lib is None:
                reference.append(y.float())
            else:
                r = reference[i]
                diff = max(diff, float((y.float() - r).abs().max() / r.abs().max().clamp_min(1e-30)))
        say(f"{name:<12} " + " ".join(cells) + f" {diff:24.1e}")
    say("split-k=1: no split; the goal is >= 80 %bw at T = 1 and 16 (the split changes only the f32 order of the K sums).")


def bench(kit, manifest, bandwidth, tflops):
    spec = manifest["bench"]
    D, H, E, k = spec["D"], spec["H"], spec["E"], spec["k"]
    try:
        import triton_moe  # noqa: E402 (needs triton)
    except Exception as ex:  # the table says n/a
        triton_moe = None
        say(f"triton anchor: not available ({ex})")
    say("== benchmarks (Mixtral shape: D=%d H=%d E=%d top-%d SwiGLU; weights on the device)" % (D, H, E, k))
    say(f"yardsticks: device copy bandwidth {bandwidth:.0f} GB/s; torch bf16 matmul {tflops:.1f} TFLOP/s")
    say(f"{'dtype':<5} {'T':>5} {'moe-ms':>9} {'torch-ms':>9} {'triton-ms':>9} {'%bw':>6} {'%mm':>6} {'triton/moe':>10} {'tgemm/moe':>10} {'torch/moe':>9} {'rel-err':>8}")
    for dt in spec["dtypes"]:
        dtype = DTYPES[dt]
        fn = Function(os.path.join(kit, spec["libs"][dt]), spec["entry"])
        g = torch.Generator(device="cuda").manual_seed(20261201)
        wr = (torch.randn(D, E, device="cuda", generator=g) / D ** 0.5).to(dtype)
        w1 = torch.empty(E, D, 2 * H, dtype=dtype, device="cuda")
        w2 = torch.empty(E, H, D, dtype=dtype, device="cuda")
        for e in range(E):  # expert by expert: no f32 copy of every weight
            w1[e] = torch.randn(D, 2 * H, device="cuda", generator=g) / D ** 0.5
            w2[e] = torch.randn(H, D, device="cuda", generator=g) / H ** 0.5
        esize = w1.element_size()
        # Other compilations of the same layer (e.g. sm_90a's 64-row tiles
        # next to the default 128-row ones), timed on the same inputs.
        variants = [(v["name"], Function(os.path.join(kit, v["lib"]), spec["entry"]), v["tokens"])
                    for v in spec.get("variants", []) if v["dtype"] == dt]
        for T in spec["tokens"]:
            x = torch.randn(T, D, device="cuda", generator=g).to(dtype)
            y = torch.empty(T, D, dtype=dtype, device="cuda")
            args = [x, wr, w1, w2]
            ms = timed(lambda: fn(args, [y]))
            flops = 2 * T * D * E + 2 * T * k * (D * 2 * H + H * D)
            for vname, vfn, vtokens in variants:
                if T not in vtokens:
                    continue
                try:  # a failing variant must not cost the rest of the table
                    yv = torch.empty_like(y)
                    vms = timed(lambda: vfn(args, [yv]))
                    same = bool(torch.equal(yv, y))
                    say(f"variant {vname}: T={T} {vms:.3f} ms ({100 * flops / (vms * 1e-3) / (tflops * 1e12):.1f} %mm) "
                        f"vs {ms:.3f} ms default; outputs {'identical' if same else 'differ'}")
                    del yv
                except Exception as ex:
                    say(f"variant {vname} failed at T={T}: {str(ex).splitlines()[0] if str(ex) else type(ex).__name__}")
            ref = torch_eager(x, wr, w1, w2, k)
            err = float((y.float() - ref.float()).abs().max() / ref.float().abs().max())
            torch_ms = timed(lambda: torch_eager(x, wr, w1, w2, k))
            triton_ms = gemm_ms = None
            if triton_moe is not None:
                try:
                    triton_ms = timed(lambda: triton_moe.fused_moe(x, wr, w1, w2, k))
                    routing = triton_moe.plan(x, wr, w1, k)
                    gemm_ms = timed(lambda: triton_moe.experts(x, w1, w2, k, routing))
                except Exception as ex:
                    say(f"triton anchor failed at T={T} {dt}: {str(ex).splitlines()[0]}")
            _, idx = torch.topk(x.float() @ wr.float(), k, dim=-1)
            active = int(torch.unique(idx).numel())
            bytes_moved = (active * (D * 2 * H + H * D) + D * E + 2 * T * D) * esize
            pct_bw = 100 * bytes_moved / (ms * 1e-3) / (bandwidth * 1e9)
            pct_mm = 100 * flops / (ms * 1e-3) / (tflops * 1e12)
            tri = f"{triton_ms:9.3f}" if triton_ms else f"{'n/a':>9}"
            ratio = f"{triton_ms / ms:10.2f}" if triton_ms else f"{'n/a':>10}"
            gratio = f"{gemm_ms / ms:10.2f}" if gemm_ms else f"{'n/a':>10}"
            say(f"{dt:<5} {T:>5} {ms:9.3f} {torch_ms:9.3f} {tri} {pct_bw:6.1f} {pct_mm:6.1f} {ratio} {gratio} {torch_ms / ms:9.2f} {err:8.1e}")
            del x, y
        split_variants = spec.get("decode_variants") or {}
        if dt == "bf16" and split_variants:
            try:  # a failing variant must not cost the rest of the table
                decode_variants(kit, spec, fn, split_variants, (wr, w1, w2), bandwidth, g)
            except Exception as ex:
                say(f"decode variants failed: {str(ex).splitlines()[0] if str(ex) else type(ex).__name__}")
        del w1, w2, wr
        torch.cuda.empty_cache()
    say("%bw: (active experts' weights + router + x + y) / time / copy bandwidth (the decode goal: >= 80);")
    say("%mm: FLOPs / time / the bf16 matmul rate (the prefill goal: >= 70); triton/moe >= 1.0 is the anchor goal")
    say("(the whole Triton layer: torch routing and plan + its two GEMMs); tgemm/moe: the Triton GEMMs alone,")
    say("routing precomputed - the strict comparison. Times: median per call, back-to-back calls between CUDA events.")


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: kit.py KIT_DIR OUT_DIR [--only=correctness|bench]")
    kit, out = sys.argv[1], sys.argv[2]
    only = next((a.split("=", 1)[1] for a in sys.argv[3:] if a.startswith("--only=")), None)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(kit, "manifest.json")) as f:
        manifest = json.load(f)
    global DEVICE
    DEVICE = manifest.get("target", "cuda")
    if DEVICE == "cuda" and not torch.cuda.is_available():
        sys.exit("kit.py: torch sees no CUDA device")
    name = torch.cuda.get_device_name() if DEVICE == "cuda" else "host cpu (dry run)"
    say(f"device: {name}  torch {torch.__version__}  kit target {DEVICE} chip {manifest['chip']}  kit commit {manifest.get('commit', '?')}")
    failures = 0
    if only in (None, "correctness"):
        failures = correctness(kit, manifest)
    if only in (None, "bench") and DEVICE == "cuda":
        bandwidth, tflops = yardsticks()
        bench(kit, manifest, bandwidth, tflops)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write("\n".join(LINES) + "\n")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
