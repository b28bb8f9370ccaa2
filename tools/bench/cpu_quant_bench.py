"""CPU benchmark of quantized expert weights (issue 25, item 6): bf16, FP8
block-scaled (#moe.quant<fp8_e4m3, block = [128, 128]>) and int4
group-quantized (#moe.quant<int4, group = 128, zero_point>, GPTQ's and
AWQ's form; "int4-a8": the same in the int8-activation mode,
#moe.quant<..., int8_activations>, docs/spec.md §2.1) layers through
moe-run at decode (T = 1, 16) and prefill, side
by side in one run with the machine's read bandwidth (cpu_moe_bench.py's
bandwidth worker, numpy).
Called by tools/bench/cpu-quant-bench.sh, which documents the options;
prints figures only, no pass/fail.

Decode rows chain several layers (--layers) with their own weights, so that
the experts a call reads are not left in the caches by the previous call;
"weight bytes" is what one call reads: per layer, the experts that T tokens
of top-k routing reach (E * (1 - (1 - k/E)^T) of them, uniform routing),
each D x 3H weights (gated) at 2 bytes (bf16), 1 byte plus its scales
(FP8) or half a byte plus an f32 scale and an f32 zero point per group of
128 and column (int4, as the packed panels hold them), and "%bw" those
bytes per ms against the read bandwidth.
"""
import argparse
import datetime
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_moe_bench as base  # noqa: E402


def expected_experts(E, K, T):
    return E * (1.0 - (1.0 - float(K) / E) ** T)


def weight_bytes(kind, D, H, E, K, T, block=128):
    experts = expected_experts(E, K, T)
    per = D * 3 * H
    if kind == "bf16":
        return experts * per * 2
    if kind in ("int4", "int4-a8"):
        groups = (-(-D // block)) * 2 * H + (-(-H // block)) * D
        return experts * (per * 0.5 + 8 * groups)
    scales = (-(-D // block)) * (-(-2 * H // block)) + (-(-H // block)) * (-(-D // block))
    return experts * (per + 4 * scales)


def ggml_weight_bytes(kind, D, H, E, K, T):
    """ggml's block formats: q4_0 18 bytes and q8_0 34 bytes per 32 weights
    (an f16 scale per block)."""
    return expected_experts(E, K, T) * D * 3 * H * {"q4_0": 18.0 / 32, "q8_0": 34.0 / 32}[kind]


def build_ggml_yardstick(ggml, tmp):
    """Compiles ggml_moe_yardstick.cpp against the ggml checkout `ggml`
    (its headers in include/, its libraries built in build/, as
    tools/bench/README.md says). Returns the binary, or (None, why)."""
    import glob
    import shutil
    import subprocess
    inc = os.path.join(ggml, "include")
    libs = {}
    for name in ("ggml", "ggml-base", "ggml-cpu"):
        found = sorted(glob.glob(os.path.join(ggml, "build", "**", "lib%s.so" % name),
                                 recursive=True))
        if not found:
            return None, "no lib%s.so under %s/build" % (name, ggml)
        libs[name] = found[0]
    cxx = shutil.which("clang++-22") or shutil.which("clang++") or shutil.which("c++")
    if not cxx or not os.path.isfile(os.path.join(inc, "ggml.h")):
        return None, "no C++ compiler or no %s/ggml.h" % inc
    out = os.path.join(tmp, "ggml_moe_yardstick")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ggml_moe_yardstick.cpp")
    dirs = sorted({os.path.dirname(v) for v in libs.values()})
    cmd = [cxx, "-O2", "-std=c++17", "-I", inc, src, "-o", out] + list(libs.values()) + \
        ["-Wl,-rpath," + d for d in dirs]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, "compiling the yardstick failed: " + (r.stderr.strip().splitlines() or ["?"])[0]
    return out, None


def run_ggml(binary, kind, D, H, E, K, T, layers, threads, runs):
    import subprocess
    r = subprocess.run([binary, kind, str(D), str(H), str(E), str(K), str(T), str(layers),
                        str(threads), str(runs)], capture_output=True, text=True, timeout=900)
    for line in r.stdout.splitlines():
        if line.startswith("ggml ms/layer "):
            return float(line.split()[-1]), None
    return None, (r.stderr.strip().splitlines() or ["no output"])[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--quick", action="store_true",
                    help="small shapes, few runs (a smoke test, not figures)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--python", default=os.environ.get("MOE_BENCH_PYTHON"))
    ap.add_argument("--mcpu", default=None, help="moe-run --mcpu=NAME")
    ap.add_argument("--ggml", default=None,
                    help="a ggml checkout built in DIR/build: also time its MUL_MAT_ID "
                         "at the same shapes for q4_0 and q8_0 (a yardstick)")
    opt = ap.parse_args()
    q = opt.quick
    tmp = tempfile.mkdtemp(prefix="moe-quant-bench-")
    start = time.perf_counter()

    model, ncpu, flags = base.machine_info()
    yn = lambda f: "yes" if f in flags else "no"
    print("cpu-quant-bench  %s" % datetime.datetime.now().astimezone()
          .strftime("%Y-%m-%d %H:%M %Z"))
    print("machine: %s, %d cores, avx512f %s, avx512_bf16 %s, avx2 %s, f16c %s"
          % (model, ncpu, yn("avx512f"), yn("avx512_bf16"), yn("avx2"), yn("f16c")))
    try:
        print("load average at start: %.2f" % os.getloadavg()[0])
    except OSError:
        pass
    mr = base.MoeRun(opt.bin, tmp)
    extra = ["--mcpu=%s" % opt.mcpu] if opt.mcpu else []
    if opt.mcpu:
        print("moe-run --mcpu=%s" % opt.mcpu)

    np_py = base.find_python("numpy", opt.python)
    bw = None
    if np_py:
        bw, err = base.run_worker(np_py, "bandwidth",
                                  {"bytes": (1 << 28) if q else (1 << 30),
                                   "reps": 2 if q else 5},
                                  {"OPENBLAS_NUM_THREADS": str(ncpu)},
                                  script=os.path.join(os.path.dirname(
                                      os.path.abspath(__file__)), "cpu_moe_bench.py"))
        if bw is None:
            print("bandwidth worker failed: %s" % err)
    if bw:
        print("read bandwidth: %.1f GB/s (%s, best of several)" % (bw["gbps"], bw["method"]))
    else:
        print("read bandwidth: n/a (no python3 with numpy)")

    yardstick = None
    if opt.ggml:
        yardstick, why = build_ggml_yardstick(opt.ggml, tmp)
        print("ggml yardstick: %s" % (why or "%s (MUL_MAT_ID of the two expert GEMMs, "
                                              "%d threads)" % (opt.ggml, ncpu)))

    # (shape name, D, H, E, K, [(T, layers, runs)])
    if q:
        shapes = [("tiny", 256, 128, 16, 4, [(1, 2, 3), (16, 2, 3), (64, 1, 2)])]
    else:
        shapes = [
            ("qwen3-30b-a3b", 2048, 768, 128, 8, [(1, 4, 30), (16, 4, 20), (512, 1, 3)]),
            ("mixtral/4", 1024, 3584, 8, 2, [(1, 8, 30), (16, 8, 20), (512, 1, 3)]),
        ]
    print()
    print("%-14s %5s %6s %-9s %10s %12s %7s %9s" % (
        "shape", "T", "layers", "type", "ms/layer", "GB/s weights", "%bw", "x bf16"))
    for name, D, H, E, K, rows in shapes:
        for T, layers, runs in rows:
            res = {}
            for kind in ("bf16", "fp8", "int4", "int4-a8"):
                opts = ["--dtype=bf16", "--dynamic", "--layers=%d" % layers]
                if kind == "fp8":
                    opts.append("--quant=fp8:128,128")
                if kind == "int4":
                    opts.append("--quant=int4:128,zero_point")
                if kind == "int4-a8":
                    opts.append("--quant=int4:128,zero_point,int8_activations")
                path = base.generate(opt.root, tmp, "%s_%s_%d" % (name.replace("/", "_"),
                                                                  kind.replace("-", "_"), T),
                                     T, D, H, E, K, opts)
                r = mr.run(path, runs, ["--dynamic-size=%d" % T] + extra)
                res[kind] = r
                if "ms" not in r:
                    print("%-14s %5d %6d %-9s %s" % (name, T, layers, kind,
                                                     "error: " + r.get("error", "?")))
                    continue
                ms = r["ms"] / layers
                wb = weight_bytes(kind, D, H, E, K, T)
                gbs = wb / (ms * 1e-3) / 1e9
                pct = "%.0f%%" % (100.0 * gbs / bw["gbps"]) if bw else "n/a"
                ratio = ""
                if kind != "bf16" and "ms" in res.get("bf16", {}):
                    ratio = "%.2f" % (r["ms"] / res["bf16"]["ms"])
                print("%-14s %5d %6d %-9s %10.3f %12.1f %7s %9s" % (
                    name, T, layers, kind, ms, gbs, pct, ratio))
            for kind in ("q4_0", "q8_0") if yardstick else ():
                ms, why = run_ggml(yardstick, kind, D, H, E, K, T, layers, ncpu, runs)
                label = "ggml-" + kind
                if ms is None:
                    print("%-14s %5d %6d %-9s error: %s" % (name, T, layers, label, why))
                    continue
                gbs = ggml_weight_bytes(kind, D, H, E, K, T) / (ms * 1e-3) / 1e9
                pct = "%.0f%%" % (100.0 * gbs / bw["gbps"]) if bw else "n/a"
                ratio = ""
                if "ms" in res.get("bf16", {}):
                    ratio = "%.2f" % (ms * layers / res["bf16"]["ms"])
                print("%-14s %5d %6d %-9s %10.3f %12.1f %7s %9s" % (
                    name, T, layers, label, ms, gbs, pct, ratio))
    print()
    print("ms/layer: moe-run's median of the timed runs over the layers of the "
          "chain; weight bytes: the experts T tokens reach (uniform routing "
          "estimate) per layer; x bf16: the FP8 or int4 time over the bf16 time; "
          "int4-a8: int4 in the int8-activation mode (other numerics: the "
          "activations rounded to int8 per group of 128).")
    if yardstick:
        print("ggml-q4_0 / ggml-q8_0: ggml's MUL_MAT_ID for the gate/up and the down "
              "projections only (no routing, no activation), its median graph time per "
              "layer; weight bytes at 18 / 34 bytes per 32 weights.")
    try:
        print("load average at end: %.2f" % os.getloadavg()[0])
    except OSError:
        pass
    print("total %.0f s" % (time.perf_counter() - start))
    if opt.keep:
        print("kept: %s" % tmp)
    else:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
