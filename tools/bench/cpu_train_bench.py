"""CPU training-step benchmark (issue 22, item 7): the forward + backward of a
top-2-of-8 GELU moe.layer (moe-run --entry=forward_vjp, docs/spec.md §9)
against the machine's own yardsticks, side by side in one run. Called by
tools/bench/cpu-train-bench.sh, which documents the options; prints figures
only, no pass/fail.

Per shape: the step's median ms (the forward's beside it), its GFLOP/s
counted as 3x the forward's expert GEMM FLOPs (12*T*k*D*H) and their share
of the numpy/OpenBLAS sgemm rate at the same per-expert GEMM shapes (best
OPENBLAS_CORETYPE, cpu_moe_bench.probe_blas), PyTorch eager autograd of the same layer (per-expert
loop with index_add, requires_grad on x and every weight, the same threads)
and the ratio; then the MOESART training step against the top-k step (mid
shape) and bf16 against f32 (prefill), each pair run alternately and the
best median of each kept, and the peak RSS of each process.

Workers reuse cpu_moe_bench.py's (blas, sgemm) and add one:
  cpu_train_bench.py --worker torch_train JSON_ARGS
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_moe_bench as cmb  # noqa: E402

E, K = 8, 2


def worker_torch_train(args):
    import resource
    import torch
    torch.set_num_threads(args.get("threads", 2))
    out = {"version": torch.__version__, "threads": torch.get_num_threads()}
    for key, cfg in args["layers"].items():
        T, D, H = cfg["T"], cfg["D"], cfg["H"]
        g = torch.Generator().manual_seed(1)
        x = torch.randn(T, D, generator=g).requires_grad_()
        wr = (torch.randn(D, E, generator=g) / D ** 0.5).requires_grad_()
        w1 = (torch.randn(E, D, H, generator=g) / D ** 0.5).requires_grad_()
        w2 = (torch.randn(E, H, D, generator=g) / H ** 0.5).requires_grad_()
        dy = torch.randn(T, D, generator=g)
        params = [x, wr, w1, w2]

        def step():
            for p in params:
                p.grad = None
            cmb.torch_moe_layer(torch, x, wr, w1, w2, K, in_place=False).backward(dy)

        step()
        ts = []
        for _ in range(cfg["repeat"]):
            t0 = time.perf_counter()
            step()
            ts.append(time.perf_counter() - t0)
        out[key] = cmb._median(ts) * 1e3
    out["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    out["blas"] = cmb._openblas_info()[0] or ", ".join(cmb._loaded_blas()) or "?"
    return out


def moe_run(exe, mlir, entry, repeat, extra, tmp):
    """{'ms', 'peak_mib'} or {'error'}: moe-run --repeat, its peak RSS from
    wait4 (compile, weights and their packed copies, the step's buffers)."""
    cmd = [exe, mlir, "--device=cpu", "--fill-random", "--seed=1", "--entry=" + entry,
           "--repeat=%d" % repeat] + list(extra)
    with open(os.path.join(tmp, "out.txt"), "w+") as out, \
            open(os.path.join(tmp, "err.txt"), "w+") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    if p.returncode != 0:
        lines = [l for l in errors.splitlines() if l.strip()]
        return {"error": lines[-1] if lines else "exit %d" % p.returncode}
    for line in text.splitlines():
        if line.startswith("median-ms:"):
            return {"ms": float(line.split()[1]), "peak_mib": usage.ru_maxrss / 1024.0}
    return {"error": "no median-ms in the output"}


def moesart_layer(path, T, D, H):
    """The top-2-of-8 GELU layer with MOESART training routing (small_random,
    trimmed lasso 0.01), y and the aux loss as results."""
    x = "tensor<%dx%dxf32>" % (T, D)
    types = [x, "tensor<%dx%dxf32>" % (D, E), "tensor<%dx%dx%dxf32>" % (E, D, H),
             "tensor<%dx%dx%dxf32>" % (E, H, D), "tensor<i64>"]
    with open(path, "w") as f:
        f.write("""func.func @forward(%%x: %s, %%seed: tensor<i64>,
                   %%wr: %s {moe.param = "gate.weight"},
                   %%w1: %s {moe.param = "experts.w1"},
                   %%w2: %s {moe.param = "experts.w2"}) -> (%s, tensor<f32>) {
  %%y, %%aux = moe.layer %%x router(%%wr) experts(%%w1, %%w2) seed(%%seed)
         {routing = #moe.moesart<k = %d, adjust = small_random, trimmed_lasso = 1.0e-2>,
          activation = #moe.activation<gelu>, training}
         : (%s) -> (%s, tensor<f32>)
  return %%y, %%aux : %s, tensor<f32>
}
""" % (x, types[1], types[2], types[3], x, K, ", ".join(types), x, x))
    return path


def fmt(v, spec="%.1f"):
    return "n/a" if v is None else spec % v


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--worker":
        workers = {"torch_train": worker_torch_train}
        print(json.dumps(workers[sys.argv[2]](json.loads(sys.argv[3]))))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--quick", action="store_true",
                    help="one timed run per figure (a smoke test, not figures)")
    ap.add_argument("--python", default=os.environ.get("MOE_BENCH_PYTHON"))
    ap.add_argument("--mcpu", default=None, help="moe-run --mcpu=NAME")
    opt = ap.parse_args()
    q = opt.quick
    tmp = tempfile.mkdtemp(prefix="moe-train-bench-")
    model, ncpu, flags = cmb.machine_info()
    yn = lambda f: "yes" if f in flags else "no"
    print("cpu-train-bench  %s" % datetime.datetime.now().astimezone()
          .strftime("%Y-%m-%d %H:%M %Z"))
    print("machine: %s, %d cores, avx512f %s, avx512_bf16 %s, amx_bf16 %s"
          % (model, ncpu, yn("avx512f"), yn("avx512_bf16"), yn("amx_bf16")))
    try:
        print("load average at start: %.2f" % os.getloadavg()[0])
    except OSError:
        pass
    exe = os.path.join(opt.bin, "moe-run")
    print("moe-run: %s%s" % (exe, " --mcpu=" + opt.mcpu if opt.mcpu else ""))
    extra = ["--mcpu=" + opt.mcpu] if opt.mcpu else []

    # ---- yardsticks: OpenBLAS core type and sgemm, PyTorch ------------------
    threads_env = {"OPENBLAS_NUM_THREADS": str(ncpu), "OMP_NUM_THREADS": str(ncpu)}
    np_py = cmb.find_python("numpy", opt.python)
    best_core, core_rates, blas_desc = cmb.probe_blas(np_py, threads_env, q)
    blas_env = dict(threads_env)
    if best_core:
        blas_env["OPENBLAS_CORETYPE"] = best_core
    print("BLAS: %s" % blas_desc)
    print("OpenBLAS core type: %s (probe %.1f GFLOP/s)"
          % (best_core, max(c[2] for c in core_rates if c[1] == best_core))
          if best_core else "OpenBLAS core type: n/a")

    # (name, T, D, H, repeat)
    shapes = [("mid", 512, 512, 2048, 3 if q else 10),
              ("decode", 16, 1024, 4096, 3 if q else 20),
              ("prefill", 2048, 1024, 4096, 1 if q else 3)]
    sgemm = {}
    if np_py:
        gemm_shapes = {n: (max(1, T * K // E), D, H) for n, T, D, H, _ in shapes}
        sgemm, err = cmb.run_worker(np_py, "sgemm", {"shapes": gemm_shapes,
                                                      "min_time": 0.1 if q else 0.5},
                                    blas_env)
        sgemm = sgemm or {}
    torch_py = cmb.find_python("torch", opt.python)
    torch_res, torch_err = None, "no python3 with torch (apt: python3-torch)"
    if torch_py:
        torch_res, torch_err = cmb.run_worker(
            torch_py, "torch_train",
            {"threads": ncpu, "layers": {n: {"T": T, "D": D, "H": H,
                                             "repeat": 1 if q else max(2, r // 3)}
                                         for n, T, D, H, r in shapes}}, blas_env,
            timeout=900, script=os.path.abspath(__file__))
    if torch_res:
        print("PyTorch %s eager autograd, %d threads, BLAS %s, peak RSS %.0f MiB"
              % (torch_res["version"], torch_res["threads"], torch_res["blas"],
                 torch_res["peak_mib"]))
    else:
        print("PyTorch: n/a (%s)" % torch_err)

    # ---- moe-run -----------------------------------------------------------
    print()
    header = ("shape", "T", "D", "H", "fwd ms", "step ms", "step/fwd", "GFLOP/s",
              "sgemm GFLOP/s", "% sgemm", "torch ms", "torch/step", "peak MiB")
    rows = []
    steps = {}
    for name, T, D, H, repeat in shapes:
        path = cmb.generate(opt.root, tmp, name, T, D, H, E, K, ["--act=gelu"])
        fwd = moe_run(exe, path, "forward", repeat, extra, tmp)
        step = moe_run(exe, path, "forward_vjp", repeat, extra, tmp)
        steps[name] = step
        flops = 12.0 * T * K * D * H
        s_ms = step.get("ms")
        rate = flops / s_ms / 1e6 if s_ms else None
        sg = sgemm.get(name, {}).get("gflops")
        t_ms = torch_res.get(name) if torch_res else None
        rows.append((name, str(T), str(D), str(H), fmt(fwd.get("ms"), "%.2f"),
                     fmt(s_ms, "%.2f") if s_ms else "error: " + step.get("error", "?"),
                     fmt(s_ms / fwd["ms"] if s_ms and fwd.get("ms") else None, "%.2fx"),
                     fmt(rate), fmt(sg), fmt(100.0 * rate / sg if rate and sg else None, "%.0f%%"),
                     fmt(t_ms, "%.1f"), fmt(t_ms / s_ms if t_ms and s_ms else None, "%.2fx"),
                     fmt(step.get("peak_mib"), "%.0f")))
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))

    # ---- MOESART training step vs top-k; bf16 vs f32 ----------------------
    # Each pair runs alternately, the best median of each over the rounds:
    # a passing load hits both alike.
    def pair(a, b, entry, repeat, rounds):
        best = [None, None]
        for _ in range(rounds):
            for i, path in enumerate((a, b)):
                r = moe_run(exe, path, entry, repeat, extra, tmp)
                if "error" in r:
                    return r["error"], None, None
                if best[i] is None or r["ms"] < best[i]:
                    best[i] = r["ms"]
        return None, best[0], best[1]

    print()
    name, T, D, H, repeat = shapes[0]
    mid = os.path.join(tmp, name + ".mlir")
    err, top, ms = pair(mid, moesart_layer(os.path.join(tmp, "moesart.mlir"), T, D, H),
                        "forward_vjp", repeat, 1 if q else 3)
    print("MOESART training step (small_random, trimmed lasso) at mid: %s" % (
        "error: " + err if err else "%.2f ms against the top-k step's %.2f ms: %.2fx"
        % (ms, top, ms / top)))
    name, T, D, H, repeat = shapes[2]
    err, f32, bf = pair(os.path.join(tmp, name + ".mlir"),
                        cmb.generate(opt.root, tmp, "prefill-bf16", T, D, H, E, K,
                                     ["--act=gelu", "--dtype=bf16"]),
                        "forward_vjp", repeat, 1 if q else 2)
    # The host's features; with --mcpu the code is compiled for that CPU's.
    where = ("host AVX512_BF16: %s, AMX-BF16: %s" % (yn("avx512_bf16"), yn("amx_bf16")) +
             ("; compiled for --mcpu=%s" % opt.mcpu if opt.mcpu else ""))
    print("bf16 prefill step: %s (%s)" % (
        "error: " + err if err else "%.2f ms against the f32 step's %.2f ms: %.2fx"
        % (bf, f32, bf / f32), where))
    print("peak MiB: the moe-run process (JIT compilation, weights and their packed "
          "copies, the step's buffers); PyTorch's process above")
    return 0


if __name__ == "__main__":
    sys.exit(main())
