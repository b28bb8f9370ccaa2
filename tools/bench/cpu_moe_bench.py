"""CPU MoE benchmark (issue 9, item 5): moe-run against the machine's own
yardsticks, side by side, in one run. Called by tools/bench/cpu-moe-bench.sh,
which documents the options; prints figures only, no pass/fail.

Runs under any python3. numpy (for the sgemm and bandwidth yardsticks) and
torch (for the PyTorch eager column) are used only through worker
subprocesses of an interpreter that has them (numpy's OpenBLAS reads
OPENBLAS_CORETYPE when it loads, so every core type needs its own process);
without them the columns print n/a.

Worker modes (internal): cpu_moe_bench.py --worker blas|sgemm|bandwidth|torch
JSON_ARGS; each prints one JSON object on stdout.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

E, K = 8, 2
ACT = "gelu"
CORE_TYPES = ["SkylakeX", "Cooperlake", "SapphireRapids", "Haswell"]
# OpenBLAS probe GEMM for choosing the core type: the prefill expert GEMM1.
PROBE = (512, 1024, 4096)


# --------------------------------------------------------------------------
# Workers (run in a subprocess of an interpreter with numpy / torch)
# --------------------------------------------------------------------------

def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def _loaded_blas():
    """The BLAS shared objects mapped into this process (after numpy loads)."""
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if re.search(r"(openblas|blas|mkl|blis|lapack)[^/]*\.so", path):
                    libs.add(os.path.realpath(path))
    except OSError:
        pass
    return sorted(libs)


def _openblas_info():
    """(core name, config string) from the loaded OpenBLAS, or (None, None)."""
    import ctypes
    for lib in _loaded_blas():
        try:
            h = ctypes.CDLL(lib)
            h.openblas_get_corename.restype = ctypes.c_char_p
            h.openblas_get_config.restype = ctypes.c_char_p
            return (h.openblas_get_corename().decode(),
                    h.openblas_get_config().decode())
        except (OSError, AttributeError):
            continue
    return None, None


def _time_gemm_pair(np, M, D, H, min_time, min_reps):
    """Best seconds of [M,D]x[D,H] then [M,H]x[H,D] (float32, out=): the
    yardstick is the library's best, robust to a passing load."""
    rng = np.random.default_rng(1)
    a1 = rng.standard_normal((M, D), dtype=np.float32)
    b1 = rng.standard_normal((D, H), dtype=np.float32)
    a2 = rng.standard_normal((M, H), dtype=np.float32)
    b2 = rng.standard_normal((H, D), dtype=np.float32)
    c1 = np.empty((M, H), np.float32)
    c2 = np.empty((M, D), np.float32)
    np.matmul(a1, b1, out=c1)
    np.matmul(a2, b2, out=c2)
    times = []
    start = time.perf_counter()
    while len(times) < min_reps or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        np.matmul(a1, b1, out=c1)
        np.matmul(a2, b2, out=c2)
        times.append(time.perf_counter() - t0)
        if len(times) >= 1000:
            break
    return min(times)


def worker_blas(args):
    """Probe rate of the current OPENBLAS_CORETYPE."""
    import numpy as np
    core, config = _openblas_info()
    M, D, H = PROBE
    sec = _time_gemm_pair(np, M, D, H, args.get("min_time", 0.3), 3)
    return {"core": core, "config": config, "libs": _loaded_blas(),
            "numpy": np.__version__,
            "gflops": 4.0 * M * D * H / sec / 1e9}


def worker_sgemm(args):
    import numpy as np
    out = {}
    for key, (M, D, H) in args["shapes"].items():
        sec = _time_gemm_pair(np, M, D, H, args.get("min_time", 0.3), 3)
        out[key] = {"ms": sec * 1e3, "gflops": 4.0 * M * D * H / sec / 1e9}
    return out


def worker_bandwidth(args):
    """Read bandwidth over a 1 GiB float32 array: numpy sum on one thread,
    sum of parts on every core, a bitwise-or reduction of the same bytes as
    uint64 on every core (vectorized integer work, cheaper than float
    sums: on the 2-core AMD EPYC it reads 54 GB/s where the sums stop at 31,
    compute-bound), and OpenBLAS sgemv (all cores); best of several passes of
    each; the best method wins."""
    import threading
    import numpy as np
    nbytes = args.get("bytes", 1 << 30)
    reps = args.get("reps", 5)
    a = np.full(nbytes // 4, 1.0, dtype=np.float32)
    threads = os.cpu_count() or 1
    results = {}

    def best(fn):
        fn()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return nbytes / min(ts) / 1e9

    results["numpy-sum-1t"] = best(lambda: a.sum())
    if threads > 1:
        parts = np.array_split(a, threads)

        def split_sum():
            ts = [threading.Thread(target=p.sum) for p in parts]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
        results["numpy-sum-%dt" % threads] = best(split_sum)
        words = np.array_split(a.view(np.uint64), threads)

        def split_or():
            ts = [threading.Thread(target=np.bitwise_or.reduce, args=(w,)) for w in words]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
        results["numpy-or-%dt" % threads] = best(split_or)
    m = a.reshape(-1, 4096)
    v = np.ones(4096, np.float32)
    out = np.empty(m.shape[0], np.float32)
    results["sgemv"] = best(lambda: np.matmul(m, v, out=out))
    method = max(results, key=results.get)
    return {"gbps": results[method], "method": method, "all": results}


def torch_moe_layer(torch, x, wr, w1, w2, k, in_place):
    """The PyTorch eager yardstick layer: top-k of the router logits, softmax
    over them, the per-expert loop (nonzero, GELU FFN, index_add); in_place
    (no autograd): index_add_ into one buffer."""
    logits = x @ wr
    top, idx = torch.topk(logits, k, dim=-1)
    w = torch.softmax(top, dim=-1)
    y = torch.zeros_like(x)
    for e in range(w1.shape[0]):
        tok, slot = (idx == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        out = (torch.nn.functional.gelu(x[tok] @ w1[e]) @ w2[e]) * w[tok, slot, None]
        y = y.index_add_(0, tok, out) if in_place else y.index_add(0, tok, out)
    return y


def worker_torch(args):
    import torch
    torch.set_num_threads(args.get("threads", 2))
    out = {"version": torch.__version__, "threads": torch.get_num_threads()}
    for key, cfg in args["layers"].items():
        T, D, H, E_, K_ = cfg["T"], cfg["D"], cfg["H"], cfg["E"], cfg["K"]
        g = torch.Generator().manual_seed(1)
        x = torch.randn(T, D, generator=g)
        wr = torch.randn(D, E_, generator=g) / D ** 0.5
        w1 = torch.randn(E_, D, H, generator=g) / D ** 0.5
        w2 = torch.randn(E_, H, D, generator=g) / H ** 0.5

        def layer():
            return torch_moe_layer(torch, x, wr, w1, w2, K_, in_place=True)

        with torch.no_grad():
            layer()
            ts = []
            for _ in range(cfg["repeat"]):
                t0 = time.perf_counter()
                layer()
                ts.append(time.perf_counter() - t0)
        out[key] = _median(ts) * 1e3
    out["blas"] = _openblas_info()[0] or ", ".join(_loaded_blas()) or "?"
    return out


WORKERS = {"blas": worker_blas, "sgemm": worker_sgemm,
           "bandwidth": worker_bandwidth, "torch": worker_torch}


# --------------------------------------------------------------------------
# Driver helpers
# --------------------------------------------------------------------------

def run_worker(python, mode, args, env_extra=None, timeout=300, script=None):
    """Runs a worker of SCRIPT (default: this file); returns (dict or None,
    error line or None)."""
    env = dict(os.environ)
    env.update(env_extra or {})
    try:
        p = subprocess.run([python, script or os.path.abspath(__file__), "--worker",
                            mode, json.dumps(args)], env=env,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    if p.returncode != 0:
        lines = [l for l in p.stderr.strip().splitlines() if l.strip()]
        return None, lines[-1] if lines else "exit %d" % p.returncode
    try:
        return json.loads(p.stdout.strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return None, "bad worker output"


def probe_blas(np_py, threads_env, quick, only_core=None):
    """The OpenBLAS core type of the yardsticks: numpy's BLAS (through NP_PY,
    None when there is no python3 with numpy) probed in one subprocess per
    OPENBLAS_CORETYPE, best of 3 rounds (1 with QUICK), ONLY_CORE alone when
    given. Returns (best core type or None, [(label, core or None, GFLOP/s
    or None)], a line describing the BLAS)."""
    best_core, blas_desc = None, None
    core_rates = []
    if np_py:
        probe_time = 0.1 if quick else 0.3
        base, err = run_worker(np_py, "blas", {"min_time": probe_time},
                               threads_env)
        if base:
            libs = ", ".join(base["libs"]) or "?"
            if base["core"] is None:
                blas_desc = "numpy %s, BLAS %s (not OpenBLAS: install " \
                    "libopenblas0-pthread, or update-alternatives --config " \
                    "libblas.so.3-x86_64-linux-gnu)" % (base["numpy"], libs)
            else:
                so = [l for l in base["libs"] if "openblas" in
                      os.path.basename(l)] or base["libs"]
                blas_desc = "%s (%s), numpy %s (%s), %s threads" % (
                    base["config"], so[0], base["numpy"], np_py,
                    threads_env["OPENBLAS_NUM_THREADS"])
            core_rates.append(("(default: %s)" % (base["core"] or "?"), None,
                               base["gflops"]))
            if base["core"] is not None:
                # Rounds over all types, best per type: a passing load
                # hits every type alike.
                core_types = [only_core] if only_core else CORE_TYPES
                probes = {ct: None for ct in core_types}
                for _ in range(1 if quick else 3):
                    for ct in core_types:
                        r2, err = run_worker(
                            np_py, "blas", {"min_time": probe_time},
                            dict(threads_env, OPENBLAS_CORETYPE=ct))
                        r = probes[ct]
                        if r2 and (r is None or r2["gflops"] > r["gflops"]):
                            probes[ct] = r2
                for ct in core_types:
                    r = probes[ct]
                    if r is None:
                        core_rates.append((ct, None, None))
                    elif (r["core"] or "").lower() != ct.lower():
                        # unknown to this OpenBLAS: it fell back to another core
                        core_rates.append(("%s (-> %s)" % (ct, r["core"]), None,
                                           r["gflops"]))
                    else:
                        core_rates.append((ct, ct, r["gflops"]))
            known = [c for c in core_rates if c[1] is not None]
            if known:
                best_core = max(known, key=lambda c: c[2])[1]
        else:
            blas_desc = "numpy worker failed: %s" % err
    else:
        blas_desc = "n/a (no python3 with numpy; tools/bench/cpu-moe-bench.sh " \
            "--install-deps installs python3-numpy libopenblas0-pthread)"
    return best_core, core_rates, blas_desc


def find_python(module, preferred):
    """The first interpreter that imports MODULE (none with --python=none)."""
    if preferred == "none":
        return None
    cands = [c for c in [preferred, shutil.which("python3"), "/usr/bin/python3",
                         sys.executable] if c]
    seen = set()
    for c in cands:
        if c in seen or not os.path.exists(c):
            continue
        seen.add(c)
        try:
            r = subprocess.run([c, "-c", "import %s" % module],
                               capture_output=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0:
            return c
    return None


def write_npy(path, shape, descr, fmt, values):
    """A minimal .npy (version 1.0) writer: no numpy needed."""
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d, " % s for s in shape))
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode("latin1"))
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))


class MoeRun:
    def __init__(self, bindir, tmp):
        self.exe = os.path.join(bindir, "moe-run")
        self.tmp = tmp
        # One binary for the whole run, even if a build replaces it meanwhile
        # (its RUNPATH is absolute, so the copy finds the same libraries).
        copy = os.path.join(tmp, "moe-run")
        try:
            shutil.copy2(self.exe, copy)
            if subprocess.run([copy, "--help"], capture_output=True,
                              timeout=60).returncode == 0:
                self.exe = copy
        except (OSError, subprocess.TimeoutExpired):
            pass
        try:
            h = subprocess.run([self.exe, "--help"], capture_output=True,
                               text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            h = ""
        self.has_timing = "--timing" in h
        self.has_dynamic_size = "--dynamic-size" in h

    def run(self, mlir, repeat, extra=()):
        """{'ms', 'compile_ms', 'wall_ms'} or {'error'}."""
        cmd = [self.exe, mlir, "--device=cpu", "--fill-random", "--seed=1",
               "--repeat=%d" % repeat] + list(extra)
        if self.has_timing:
            cmd.append("--timing")
        t0 = time.perf_counter()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired:
            return {"error": "timed out"}
        wall = (time.perf_counter() - t0) * 1e3
        if p.returncode != 0:
            err = [l for l in p.stderr.splitlines() if "error:" in l]
            if err:
                msg = err[0].split("error:", 1)[1].strip()
            else:
                lines = [l for l in p.stderr.splitlines() if l.strip()]
                msg = lines[-1] if lines else "exit %d" % p.returncode
            return {"error": msg}
        res = {"wall_ms": wall}
        m = re.search(r"^median-ms: *([0-9.eE+-]+)", p.stdout, re.M)
        if m:
            res["ms"] = float(m.group(1))
        m = re.search(r"^compile-ms: *([0-9.eE+-]+)", p.stdout + p.stderr, re.M)
        if m:
            res["compile_ms"] = float(m.group(1))
        return res


def generate(root, tmp, name, T, D, H, E_, K_, opts=()):
    path = os.path.join(tmp, name + ".mlir")
    with open(path, "w") as f:
        subprocess.run([os.path.join(root, "tools", "bench", "make-layer.sh")]
                       + list(opts) + [str(T), str(D), str(H), str(E_), str(K_)],
                       stdout=f, check=True)
    return path


def machine_info():
    model, flags = platform.processor() or "?", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model in ("?", "", "x86_64"):
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return model, os.cpu_count() or 1, flags


def fmt(v, spec="%.2f"):
    return "n/a" if v is None else spec % v


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------

def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--worker":
        print(json.dumps(WORKERS[sys.argv[2]](json.loads(sys.argv[3]))))
        return 0

    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--quick", action="store_true",
                    help="one timed run per figure (a smoke test, not figures)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--python", default=os.environ.get("MOE_BENCH_PYTHON"))
    ap.add_argument("--mcpu", default=None,
                    help="moe-run --mcpu=NAME: compile for that CPU (and its "
                    "#moe.cpu_config), e.g. haswell to measure the AVX2 "
                    "configuration on an AVX-512 machine")
    ap.add_argument("--blas-core", default=None,
                    help="probe only this OPENBLAS_CORETYPE (e.g. Haswell, "
                    "the AVX2 yardstick beside --mcpu=haswell)")
    opt = ap.parse_args()
    q = opt.quick
    tmp = tempfile.mkdtemp(prefix="moe-bench-")
    notes = []
    start_all = time.perf_counter()

    model, ncpu, flags = machine_info()
    yn = lambda f: "yes" if f in flags else "no"
    print("cpu-moe-bench  %s" % datetime.datetime.now().astimezone()
          .strftime("%Y-%m-%d %H:%M %Z"))
    print("machine: %s, %d cores, avx512f %s, avx512_bf16 %s, amx_bf16 %s"
          % (model, ncpu, yn("avx512f"), yn("avx512_bf16"), yn("amx_bf16")))
    try:
        load = os.getloadavg()[0]
        print("load average at start: %.2f" % load)
    except OSError:
        pass
    exe = os.path.join(opt.bin, "moe-run")
    about = []
    try:
        about.append("built " + datetime.datetime.fromtimestamp(
            os.path.getmtime(exe)).astimezone().strftime("%Y-%m-%d %H:%M"))
        g = subprocess.run(["git", "-C", opt.bin, "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True)
        if g.returncode == 0:
            dirty = subprocess.run(["git", "-C", opt.bin, "status", "--porcelain",
                                    "--untracked-files=no"],
                                   capture_output=True, text=True).stdout.strip()
            about.append("source tree at %s%s" % (
                g.stdout.strip(), " + uncommitted changes" if dirty else ""))
    except OSError:
        pass
    desc = exe + (" (%s)" % ", ".join(about) if about else "")
    print("moe-run: %s" % desc)
    if opt.mcpu:
        print("moe-run --mcpu=%s: code and #moe.cpu_config for that CPU, "
              "not this machine's" % opt.mcpu)
    mr = MoeRun(opt.bin, tmp)

    # ---- yardsticks: BLAS core type, sgemm, bandwidth, torch ----------------
    threads_env = {"OPENBLAS_NUM_THREADS": str(ncpu), "OMP_NUM_THREADS": str(ncpu)}
    np_py = find_python("numpy", opt.python)
    best_core, core_rates, blas_desc = probe_blas(np_py, threads_env, q, opt.blas_core)
    blas_env = dict(threads_env)
    if best_core:
        blas_env["OPENBLAS_CORETYPE"] = best_core

    # rows: (name, T, D, H, dtype, routing, kind: ""/"dynamic"/"fused", runs)
    shapes = [
        ("mid", 512, 512, 2048, "f32", "top_k", "", 3 if q else 20),
        ("decode", 16, 1024, 4096, "f32", "top_k", "", 3 if q else 30),
        ("decode", 16, 1024, 4096, "bf16", "top_k", "", 3 if q else 30),
        ("prefill", 2048, 1024, 4096, "f32", "top_k", "", 1 if q else 3),
        ("mid-dense", 512, 512, 2048, "f32", "dense", "", 1 if q else 5),
        ("mid-dynamic-T", 512, 512, 2048, "f32", "top_k", "dynamic",
         3 if q else 20),
        ("prefill-experts", 2048, 1024, 4096, "f32", "top_k", "fused",
         1 if q else 3),
    ]

    def kk(routing):
        return E if routing == "dense" else K

    gemm_shapes = {}
    for name, T, D, H, ty, routing, kind, _ in shapes:
        M = max(1, T * kk(routing) // E)
        gemm_shapes["%dx%dx%d" % (M, D, H)] = (M, D, H)
    sgemm, bw = {}, None
    if np_py:
        sgemm, err = run_worker(np_py, "sgemm",
                                {"shapes": gemm_shapes,
                                 "min_time": 0.1 if q else 0.5}, blas_env)
        if sgemm is None:
            notes.append("sgemm worker failed: %s" % err)
            sgemm = {}
        bw, err = run_worker(np_py, "bandwidth",
                             {"bytes": (1 << 28) if q else (1 << 30),
                              "reps": 2 if q else 5}, blas_env)
        if bw is None:
            notes.append("bandwidth worker failed: %s" % err)

    torch_py = find_python("torch", opt.python)
    torch_res, torch_desc = {}, "n/a (python3 cannot import torch)"
    if torch_py:
        layers = {}
        for name, T, D, H, ty, routing, kind, rep in shapes:
            if ty == "f32" and not kind:
                layers[name] = {"T": T, "D": D, "H": H, "E": E,
                                "K": kk(routing), "repeat": rep}
        tenv = dict(blas_env)
        tenv["OMP_NUM_THREADS"] = "2"
        if opt.blas_core == "Haswell":
            # The AVX2 yardstick: PyTorch's own kernels at AVX2 too.
            tenv["ATEN_CPU_CAPABILITY"] = "avx2"
        torch_res, err = run_worker(torch_py, "torch",
                                    {"layers": layers, "threads": 2}, tenv,
                                    timeout=900)
        if torch_res is None:
            torch_desc = "n/a (torch worker failed: %s)" % err
            torch_res = {}
        else:
            torch_desc = "torch %s (%s), %d threads, OPENBLAS_CORETYPE=%s, " \
                "BLAS core in use: %s%s" % (
                    torch_res["version"], torch_py, torch_res["threads"],
                    best_core or "unset", torch_res["blas"],
                    ", ATEN_CPU_CAPABILITY=avx2"
                    if "ATEN_CPU_CAPABILITY" in tenv else "")

    # ---- moe-run ------------------------------------------------------------
    rows, res_by = [], {}
    for name, T, D, H, ty, routing, kind, rep in shapes:
        gen = ["--act=" + ACT, "--dtype=" + ty, "--routing=" + routing]
        extra = []
        if kind == "dynamic":
            if not mr.has_dynamic_size:
                r = {"error": "moe-run has no --dynamic-size (dynamic T) yet"}
                res_by[(name, ty)] = r
                rows.append((name, T, D, H, ty, routing, kind, rep, r))
                continue
            gen.append("--dynamic")
            extra = ["--dynamic-size=%d" % T]
        if kind == "fused":
            gen.append("--fused")
            idx = os.path.join(tmp, "idx-%d.npy" % T)
            wts = os.path.join(tmp, "wts-%d.npy" % T)
            # balanced: token t -> experts t mod 8 and (t+1) mod 8, 0.5 each
            write_npy(idx, (T, K), "<i4", "i",
                      [(t + s) % E for t in range(T) for s in range(K)])
            write_npy(wts, (T, K), "<f4", "f", [1.0 / K] * (T * K))
            extra = ["--input=" + idx, "--input=" + wts]
        if opt.mcpu:
            extra = extra + ["--mcpu=" + opt.mcpu]
        f = generate(opt.root, tmp, "%s-%s" % (name, ty), T, D, H, E, K, gen)
        r = mr.run(f, rep, extra)
        res_by[(name, ty)] = r
        rows.append((name, T, D, H, ty, routing, kind, rep, r))

    # ---- table --------------------------------------------------------------
    print("BLAS: %s" % blas_desc)
    if core_rates:
        print("OpenBLAS core types, GFLOP/s at [%d,%d]x[%d,%d] + [%d,%d]x[%d,%d]: %s"
              % (PROBE[0], PROBE[1], PROBE[1], PROBE[2], PROBE[0], PROBE[2],
                 PROBE[2], PROBE[1],
                 ", ".join("%s %s" % (c[0], fmt(c[2], "%.1f")) for c in core_rates)))
        print("best core type: %s" % (best_core or "none known"))
    if bw:
        print("read bandwidth: %.1f GB/s (%s, best of several over 1 GiB; %s)" % (
            bw["gbps"], bw["method"],
            ", ".join("%s %.1f" % kv for kv in bw["all"].items())))
    else:
        print("read bandwidth: n/a")
    print("PyTorch eager: %s" % torch_desc)
    print()
    hdr = ("%-16s %5s %5s %5s %-5s %5s %10s %8s %9s %7s %9s %8s %9s %9s"
           % ("shape", "T", "D", "H", "dtype", "runs", "moe-ms", "GFLOP/s",
              "sgemm-GF", "%sgemm", "floor-ms", "x-floor", "torch-ms",
              "torch/moe"))
    print(hdr)
    print("-" * len(hdr))
    footnotes = []
    for name, T, D, H, ty, routing, kind, rep, r in rows:
        k_ = kk(routing)
        expert_flops = 2.0 * T * k_ * (D * H + H * D)
        flops = expert_flops + (0 if kind == "fused" else 2.0 * T * D * E)
        ms = r.get("ms")
        gf = flops / (ms * 1e-3) / 1e9 if ms else None
        M = max(1, T * k_ // E)
        sg = sgemm.get("%dx%dx%d" % (M, D, H), {}).get("gflops")
        pct = 100.0 * gf / sg if (gf and sg) else None
        floor = xfloor = None
        if name.startswith("decode"):
            elt = 4 if ty == "f32" else 2
            hit = E * (1 - (1 - k_ / E) ** T)
            wbytes = hit * 2 * D * H * elt + D * E * elt
            if bw:
                floor = wbytes / (bw["gbps"] * 1e9) * 1e3
                xfloor = ms / floor if ms else None
            footnotes.append(
                "%s %s weight bytes touched: E*(1-(1-k/E)^T) = 8*(1-(1-2/8)^%d) "
                "= %.3f experts x (W1+W2 = 2*D*H*%d B = %.1f MB) + router "
                "D*E*%d B = %.1f MB" % (name, ty, T, hit, elt,
                                        2 * D * H * elt / 1e6, elt, wbytes / 1e6))
        tm = torch_res.get(name) if ty == "f32" and not kind else None
        print("%-16s %5d %5d %5d %-5s %5d %10s %8s %9s %7s %9s %8s %9s %9s" % (
            name, T, D, H, ty, rep, fmt(ms, "%.3f"), fmt(gf, "%.1f"),
            fmt(sg, "%.1f"), fmt(pct, "%.1f"), fmt(floor, "%.2f"),
            fmt(xfloor, "%.2f"), fmt(tm, "%.3f"),
            fmt(tm / ms if (tm and ms) else None, "%.2f")))
        if "error" in r:
            footnotes.append("%s %s: moe-run failed: %s" % (name, ty, r["error"]))

    print("moe-ms: median of `runs` moe-run calls (after one warm-up); "
          "GFLOP/s: 2*T*k*(D*H + H*D) + router 2*T*D*E (k = E for dense)")
    print("sgemm-GF: numpy float32 [M,D]x[D,H] + [M,H]x[H,D], M = T*k/E, "
          "best time, best core type; %sgemm = GFLOP/s / sgemm-GF")
    print("floor-ms: weight bytes touched / read bandwidth; x-floor = moe-ms "
          "/ floor-ms; torch/moe = torch-ms / moe-ms (f32 rows)")
    print("mid-dynamic-T: the mid layer with tensor<?x512xf32> tokens, "
          "run with --dynamic-size=512")
    print("prefill-experts: a function whose body is only moe.fused_experts "
          "(no router/gate; balanced indices t -> t mod 8, (t+1) mod 8, "
          "weights 0.5), expert FLOPs only")

    # ---- ratios -------------------------------------------------------------
    print()
    d32 = res_by.get(("decode", "f32"), {}).get("ms")
    d16 = res_by.get(("decode", "bf16"), {}).get("ms")
    mid = res_by.get(("mid", "f32"), {}).get("ms")
    dense = res_by.get(("mid-dense", "f32"), {}).get("ms")
    print("bf16 decode / f32 decode: %s" % fmt(d16 / d32 if (d16 and d32) else None))
    print("top-2 vs dense at T=512 (dense-ms / top-2-ms): %s"
          % fmt(dense / mid if (dense and mid) else None))

    # ---- 32-layer compile + JIT ----------------------------------------------
    LT, LD, LH = 16, 128, 512
    f = generate(opt.root, tmp, "model32", LT, LD, LH, E, K,
                 ["--act=" + ACT, "--layers=32"])
    r = mr.run(f, 1)
    if "compile_ms" in r:
        comp, how = r["compile_ms"], "moe-run --timing"
    elif "ms" in r:
        comp, how = r["wall_ms"] - 2 * r["ms"], \
            "wall of moe-run --repeat=1 minus warm-up and timed run; " \
            "includes process start, parse and --fill-random"
    else:
        comp, how = None, "moe-run failed: %s" % r.get("error")
    print("32-layer model (T=%d D=%d H=%d, top-2-of-8 %s) compile+JIT ms: %s (%s)"
          % (LT, LD, LH, ACT, fmt(comp, "%.0f"), how))

    for fn in footnotes + notes:
        print("note: " + fn)
    try:
        print("load average at end: %.2f" % os.getloadavg()[0])
    except OSError:
        pass
    print("total bench time: %.0f s" % (time.perf_counter() - start_all))
    if opt.keep:
        print("files: %s" % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
