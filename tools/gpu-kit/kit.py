"""The run step of the GPU check kit (see README.md, "GPU check kit").

Runs on a GPU machine with nothing but the kit folder, python3 with torch
(and triton for the anchor) and the NVIDIA driver; no LLVM, no MLIR, no
network. The kit's libraries were made by `moe-compile --target=cuda` on the
build machine (docs/aot.md has the ABI); they are called here through ctypes
on tensors that torch placed on the GPU.

  python3 kit.py KIT_DIR OUT_DIR [--only=correctness|bench] [--plan]

(--plan: print the tasks in the order they would run, with their watchdogs
and estimates, and stop.)

The kernels may meet real hardware for the first time here, so one fault
must not cost the rest of the run. This process (the driver) never imports
torch: it runs the work in worker processes (this file with --worker), one
task at a time over a pipe, each task under a watchdog. A worker that dies
(a signal, a sticky CUDA error such as CUDA_ERROR_ILLEGAL_ADDRESS that
leaves its context unusable) or does not answer in time is killed; its task
is recorded as failed with a one-line reason (the task, the call it was in,
the error or signal, the worker's last output line) and a fresh worker takes
the remaining tasks. While nothing fails, one worker runs all first-contact
calls and correctness cases, and one worker runs all benchmark groups (the
Mixtral-shaped weights are generated once per worker and dtype, from a seed,
so a fresh worker recomputes the same inputs).

Phases, in priority order, all inside MOE_KIT_TIMEOUT seconds (default 360,
counted from this process's start; a few seconds are kept for the summary):
(0) first contact: driver version, device, SM count, clocks, memory; then
    every library of the manifest loaded and called once with its inputs
    (cases: their stored arguments; benchmark libraries: T = 1 on zero
    weights), so a cubin that does not load ("no kernel image", a PTX JIT
    failure) is reported once per library, up front; a case whose library
    killed its worker here is not called again;
(a) correctness: every case of manifest.json (each spec example and its
    fused form, the MOESART gate, the bf16 prefill cases) against the CPU
    path's outputs that the prepare step stored: f32 results within 1e-4 *
    max|expected|, bf16/f16 within 1e-2 * max|expected| (docs/gpu.md
    explains the bound), integer results (chosen experts) identical; the
    training cases (form vjp) are each spec example's gradient f_vjp
    against the CPU path's; arguments the kit holds as stream seeds are
    regenerated (fill_random.py) and checked against prepare's digests;
(b) benchmarks, one group at a time, in this order: the yardsticks (device
    copy bandwidth, torch's bf16 matmul rate), the bf16 layer at the decode
    token counts, then at the prefill ones (T >= 1024), the bf16 training
    step (manifest bench.train: our mixtral_vjp, torch eager autograd and
    the Triton train_step; TFLOP/s, % of the matmul rate, ratios), the
    PyTorch layer (manifest bench.torch_layer: moe_mlir.torch.MoELayer on the
    device's tensors, forward + backward, against the plain torch layer of
    tools/train/plain_moe.py), then the other
    token counts and dtypes, then the variants of manifest bench.variants
    (each: other moe-compile flags, a dtype, its token counts): ms, % of
    bandwidth (decode T) or % of the matmul rate, the default build's time
    over the variant's, the largest |difference| from the default's output;
    the quantized layer of manifest quant_bench (DeepSeek-V3's expert shape:
    FP8 E4M3 codes with 128 x 128 block scales, generated on the device)
    runs among the bf16 rows: our library, the Triton anchor's FP8
    block-scaled variant (triton_moe.py, scales=) and a torch reference that
    dequantizes the active experts' weights (W = q * s in f32).
    A group whose estimate exceeds the time left is skipped and listed.
OUT_DIR/summary.txt (the tables so far, the failures, the skipped groups)
is rewritten after every task, so even a kill leaves it. Exit status 1 when
a library, a correctness case or a benchmark group failed, or a correctness
case was skipped.

Library calls may return before the GPU work is done (docs/aot.md): every
output is read after a synchronisation of the stream the call was given,
and times are taken with CUDA events on that stream.

Fault injection (tests only): MOE_KIT_INJECT=KIND:TASK[,KIND:TASK...] with
KIND crash (the worker gets SIGSEGV), hang (it sleeps), error (the call
raises) at the call of TASK, or hang-after (a benchmark group hangs after
our library's timing, in the references): a case NAME (both forms) or NAME/FORM,
load:LIB (its first contact), bench:yardsticks, bench:DTYPE:T=N, train:DTYPE:T=N,
torch:DTYPE:T=N,
variant:NAME.
"""
import ast
import ctypes
import json
import math
import os
import re
import select
import signal
import subprocess
import sys
import time
import zlib

# "cuda", or "cpu" for a kit prepared with MOE_KIT_TARGET=cpu (a dry run of
# the kit on the build machine: the same code path with host pointers).
DEVICE = "cuda"


def oneline(ex):
    text = str(ex).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(ex).__name__}: {first}" if first else type(ex).__name__


# ================================================================ worker ===
# Everything below up to the driver runs in a worker process (torch loaded).

torch = None
CHAN = None
STEP = ""
PARTIAL = {}


def emit(**message):
    if "partial" in message:  # a failing task's answer keeps these rows
        PARTIAL.update(message["partial"])
    CHAN.write(json.dumps(message) + "\n")
    CHAN.flush()


def step(text):
    """Tells the driver which call the worker is in (the reason names it if
    the worker dies there)."""
    global STEP
    STEP = text
    emit(step=text)


def sync():
    """Waits for the work queued on the stream the libraries are given."""
    if DEVICE == "cuda":
        torch.cuda.current_stream().synchronize()


def healthy():
    """False when the CUDA context is unusable (a sticky error)."""
    if DEVICE != "cuda":
        return True
    try:
        torch.cuda.synchronize()
        return float((torch.ones(1, device="cuda") + 1).item()) == 2.0
    except Exception:
        return False


def injected(task):
    """The fault MOE_KIT_INJECT asks for at this task's call, if any."""
    for item in filter(None, os.environ.get("MOE_KIT_INJECT", "").split(",")):
        kind, _, target = item.partition(":")
        if target in (task["id"], task.get("case")):
            return kind
    return None


def maybe_inject(task, late=False):
    """At a task's call (late: after its library calls, in the references)."""
    kind = injected(task)
    if late:
        kind = {"hang-after": "hang"}.get(kind)
    if kind == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif kind == "hang":
        while True:
            time.sleep(3600)
    elif kind == "error":
        raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access "
                           "was encountered (injected by MOE_KIT_INJECT)")


def read_npy(path):
    """A .npy (version 1-3, little-endian, C order) as a CPU torch tensor;
    NAME.npy.zs (pack_case.py): the header, then the body's byte planes
    zlib-compressed."""
    npy = {"<f4": torch.float32, "<f2": torch.float16, "<i4": torch.int32,
           "<i8": torch.int64, "|b1": torch.bool, "<i2": torch.int16, "|u1": torch.uint8}
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
    dtype = npy[header["descr"]]
    shape = tuple(header["shape"])
    body = bytearray(data[start + hlen:])
    if path.endswith(".zs"):
        planes = zlib.decompress(bytes(body))
        size = torch.empty(0, dtype=dtype).element_size()
        count = len(planes) // size
        body = bytearray(len(planes))
        for i in range(size):
            body[i::size] = planes[i * count:(i + 1) * count]
    t = torch.frombuffer(body, dtype=dtype) if body else torch.empty(0, dtype=dtype)
    t = t[: math.prod(shape)].reshape(shape)
    if path.endswith((".bf16.npy", ".bf16.npy.zs")):  # bf16 values as their 16 bits (pack_case.py)
        t = t.view(torch.bfloat16)
    return t


def tdtype(name):
    # Quantized weights (docs/spec.md §2.1) travel as their byte codes: i4
    # one code 0..15 per byte (moe-run --save-args writes them as U8), E4M3
    # its bits (as_argument).
    return {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16,
            "i32": torch.int32, "i64": torch.int64, "i4": torch.uint8,
            "f8E4M3FN": torch.uint8}[name]


def e4m3_values():
    """The 256 FP8 E4M3 (fn) codes' values as float32 (NaN for S.1111.111):
    sign, 4 exponent bits (bias 7), 3 mantissa bits, subnormals below."""
    vals = []
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e, m = (code >> 3) & 0xF, code & 7
        if e == 15 and m == 7:
            vals.append(float("nan"))
        elif e == 0:
            vals.append(sign * m * 2.0 ** -9)
        else:
            vals.append(sign * (1 + m / 8) * 2.0 ** (e - 7))
    return torch.tensor(vals, dtype=torch.float32)


def as_argument(t, dt):
    """A case argument as read (or regenerated) in the dtype the library
    takes: f8E4M3FN arguments come as their exact float32 values (moe-run
    --save-args) and become their codes (the value's code; -0.0 the code
    0x80); torch versions without float8 types need no support for them."""
    if dt != "f8E4M3FN":
        return t.to(tdtype(dt))
    table = e4m3_values()
    flat = t.reshape(-1).to(torch.float32)
    codes = torch.empty(flat.shape, dtype=torch.uint8)
    # The finite codes but -0.0's (set below), each value once.
    finite = torch.isfinite(table) & (torch.arange(256) != 0x80)
    order = torch.argsort(table[finite])
    sorted_vals = table[finite][order]
    codes_of = torch.arange(256)[finite][order]
    at = torch.searchsorted(sorted_vals, flat.clamp(min=-448.0, max=448.0))
    at = at.clamp(max=len(sorted_vals) - 1)
    found = codes_of[at]
    if not torch.equal(table[found], flat):
        raise ValueError("an f8E4M3FN argument holds a value that is not an E4M3 number")
    codes[:] = found.to(torch.uint8)
    # -0.0: its own code (the search finds +0.0).
    codes[(flat == 0) & torch.signbit(flat)] = 0x80
    return codes.reshape(t.shape)


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
        """Queues the call on torch's current stream; the outputs are valid
        after sync() (the entry may return before the work is done)."""
        dims = [s for (shape, _), a in zip(self.args, args)
                for s, d in zip(a.shape, shape) if d == -1]
        a = (ctypes.c_void_p * len(args))(*[t.data_ptr() for t in args])
        r = (ctypes.c_void_p * len(results))(*[t.data_ptr() for t in results])
        d = (ctypes.c_int64 * max(1, len(dims)))(*dims)
        stream = torch.cuda.current_stream().cuda_stream if DEVICE == "cuda" else 0
        if self.fn(a, r, d if dims else None, ctypes.c_void_p(stream)) != 0:
            raise RuntimeError(self.last_error().decode())


class Worker:
    def __init__(self, kit, manifest):
        self.kit = kit
        self.manifest = manifest
        self.functions = {}
        self.weights = {}
        self.regenerated = {}  # args.json entry -> (CPU tensor, digest as recorded)

    def function(self, lib, entry):
        key = (lib, entry)
        if key not in self.functions:
            self.functions[key] = Function(os.path.join(self.kit, lib), entry)
        return self.functions[key]

    # ------------------------------------------------------ first contact
    def facts(self, task):
        if DEVICE != "cuda":
            return {"rows": [f"device: host cpu (dry run)  torch {torch.__version__}"]}
        rows = []
        try:
            cuda = ctypes.CDLL("libcuda.so.1")
            version = ctypes.c_int()
            cuda.cuDriverGetVersion(ctypes.byref(version))
            rows.append(f"driver: CUDA driver API {version.value // 1000}.{version.value % 1000 // 10}")
        except OSError as ex:
            cuda = None
            rows.append(f"driver: libcuda.so.1 not loaded ({oneline(ex)})")
        props = torch.cuda.get_device_properties(0)
        rows.append(f"device: {props.name}  sm_{props.major}{props.minor}  torch {torch.__version__} (CUDA {torch.version.cuda})")
        rows.append(f"SMs: {props.multi_processor_count}  memory: {props.total_memory / 2**30:.1f} GiB"
                    f"  L2: {getattr(props, 'L2_cache_size', 0) / 2**20:.0f} MiB")
        if cuda is not None:
            dev, value = ctypes.c_int(), ctypes.c_int()
            attrs = {}
            if cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0:
                # CU_DEVICE_ATTRIBUTE_CLOCK_RATE, MEMORY_CLOCK_RATE (kHz),
                # GLOBAL_MEMORY_BUS_WIDTH (bits)
                for name, attr in (("sm", 13), ("mem", 36), ("bus", 37)):
                    if cuda.cuDeviceGetAttribute(ctypes.byref(value), attr, dev) == 0:
                        attrs[name] = value.value
            if len(attrs) == 3:
                peak = 2 * attrs["mem"] * 1e3 * attrs["bus"] / 8 / 1e9
                rows.append(f"clocks: SM {attrs['sm'] / 1e3:.0f} MHz, memory {attrs['mem'] / 1e3:.0f} MHz x "
                            f"{attrs['bus']} bits (2 x clock x width: {peak:.0f} GB/s)")
            else:
                rows.append("clocks: not reported by the driver (run.log has nvidia-smi's)")
        return {"rows": rows}

    def case_args(self, task, fn):
        """The arguments of a case: read from the kit, or regenerated from
        their stream seeds (fill_random.py) and checked against prepare's
        digest. Returns (tensors on DEVICE, regenerated count, names of the
        regenerated ones whose digest differs)."""
        import fill_random
        args, regenerated, differ = [], 0, []
        for i, (spec, (_, dt)) in enumerate(zip(task["args"], fn.args)):
            if isinstance(spec, dict):
                # Made once per worker (first contact and the case share it).
                key = json.dumps(spec, sort_keys=True)
                if key not in self.regenerated:
                    t = fill_random.argument(spec["regen"], self.manifest.get("seed", 1))
                    self.regenerated[key] = (t, fill_random.digest(t) == spec["sha256"])
                t, same = self.regenerated[key]
                regenerated += 1
                if not same:
                    differ.append(f"arg{i}")
            else:
                t = read_npy(os.path.join(self.kit, spec))
            args.append(as_argument(t, dt).to(DEVICE))
        return args, regenerated, differ

    def zeros_for(self, fn, T):
        """Inputs for a first call: x with T rows, every other argument zero."""
        args = []
        for shape, dt in fn.args:
            dims = [T if d == -1 else d for d in shape]
            args.append(torch.zeros(dims, dtype=tdtype(dt), device=DEVICE))
        return args

    def load(self, task):
        step(f"load {task['lib']}")
        fn = self.function(task["lib"], task["entry"])
        if task.get("args"):
            step("read arguments")
            args = self.case_args(task, fn)[0]
        else:
            args = self.zeros_for(fn, 1)
        # The dynamic size of the results: the first dynamic argument dimension.
        T = next((a.shape[i] for (s, _), a in zip(fn.args, args)
                  for i, d in enumerate(s) if d == -1), None)
        results = []
        for shape, dt in fn.results:
            results.append(torch.empty([T if d == -1 else d for d in shape], dtype=tdtype(dt), device=DEVICE))
        step(f"call 1 of {task['lib']}")
        maybe_inject(task)
        t0 = time.perf_counter()
        fn(args, results)
        sync()
        ms = (time.perf_counter() - t0) * 1e3
        return {"rows": [f"{task['lib']:<38} ok  first call {ms:8.1f} ms"]}

    # -------------------------------------------------------- correctness
    def case(self, task):
        step(f"load {task['lib']}")
        fn = self.function(task["lib"], task["entry"])
        step("read arguments")
        args, regenerated, differ = self.case_args(task, fn)
        expected = [read_npy(os.path.join(self.kit, p)) for p in task["expected"]]
        for call in (1, 2):  # the second call: steady state
            step(f"call {call} of {task['lib']}")
            if call == 2:
                maybe_inject(task)
            results = [torch.empty(e.shape, dtype=tdtype(dt), device=DEVICE)
                       for e, (_, dt) in zip(expected, fn.results)]
            fn(args, results)
            sync()
        step("compare")
        rows, ok_all = [], True
        for i, (res, exp, (_, dt)) in enumerate(zip(results, expected, fn.results)):
            ok, err = compare(res, exp, dt)
            ok_all &= ok
            rows.append(f"{task['case']:<34} {task['form']:<6} {'#' + str(i):<8} {dt:<5} {err:>12}  {'ok' if ok else 'FAIL'}")
        if differ:
            rows.append(f"{task['case']:<34} {task['form']:<6} regenerated {', '.join(differ)} differ from "
                        "the build machine's (sha256): compared anyway")
        return {"rows": rows, "ok": ok_all,
                "data": {"regenerated": regenerated, "differ": len(differ)},
                "reason": None if ok_all else "results differ from the CPU path beyond the tolerance"}

    # --------------------------------------------------------- benchmarks
    def bench_weights(self, dt):
        """The Mixtral-shaped weights, from a fixed seed (any worker makes the
        same ones), generated expert by expert (no f32 copy of all)."""
        if dt not in self.weights:
            spec = self.manifest["bench"]
            D, H, E = spec["D"], spec["H"], spec["E"]
            dtype = tdtype(dt)
            g = torch.Generator(device=DEVICE).manual_seed(20261201)
            wr = (torch.randn(D, E, device=DEVICE, generator=g) / D ** 0.5).to(dtype)
            w1 = torch.empty(E, D, 2 * H, dtype=dtype, device=DEVICE)
            w2 = torch.empty(E, H, D, dtype=dtype, device=DEVICE)
            for e in range(E):
                w1[e] = torch.randn(D, 2 * H, device=DEVICE, generator=g) / D ** 0.5
                w2[e] = torch.randn(H, D, device=DEVICE, generator=g) / H ** 0.5
            self.weights[dt] = (wr, w1, w2)
        return self.weights[dt]

    def quant_weights(self):
        """manifest quant_bench's FP8 layer: codes uniform over the finite
        E4M3 codes (S.1111.111 becomes S.1111.110), block scales 2^-6 /
        sqrt(fan-in) times a uniform factor in [0.5, 1] (|q| reaches 448),
        a bf16 router; from a fixed seed, expert by expert."""
        if "fp8" not in self.weights:
            q = self.manifest["quant_bench"]
            D, H, E = q["D"], q["H"], q["E"]
            bk, bn = q["block"]
            g = torch.Generator(device=DEVICE).manual_seed(20261206)

            def codes(shape):
                c = torch.randint(0, 256, shape, dtype=torch.int32, device=DEVICE, generator=g)
                return torch.where((c & 0x7F) == 0x7F, c - 1, c).to(torch.uint8)

            def scales(shape, fan_in):
                u = torch.rand(shape, device=DEVICE, generator=g)
                return (0.5 + 0.5 * u) * 2.0 ** -6 / fan_in ** 0.5

            wr = (torch.randn(D, E, device=DEVICE, generator=g) / D ** 0.5).to(torch.bfloat16)
            w1 = torch.empty(E, D, 2 * H, dtype=torch.uint8, device=DEVICE)
            w2 = torch.empty(E, H, D, dtype=torch.uint8, device=DEVICE)
            for e in range(E):
                w1[e] = codes((D, 2 * H))
                w2[e] = codes((H, D))
            s1 = scales((E, -(-D // bk), -(-2 * H // bn)), D)
            s2 = scales((E, -(-H // bk), -(-D // bn)), H)
            self.weights["fp8"] = (wr, w1, w2, s1, s2)
        return self.weights["fp8"]

    def quant_bench(self, task):
        """One row of the quantized benchmark at T tokens: our FP8 layer, the
        Triton anchor's FP8 variant, the torch reference (errors of both
        against it)."""
        q = self.manifest["quant_bench"]
        T, k = task["T"], q["k"]
        bk, bn = q["block"]
        step("generate FP8 weights")
        wr, w1, w2, s1, s2 = self.quant_weights()
        fn = self.function(q["lib"], q["entry"])
        g = torch.Generator(device=DEVICE).manual_seed(20261206 + T)
        x = torch.randn(T, q["D"], device=DEVICE, generator=g).to(torch.bfloat16)
        y = torch.empty_like(x)
        args = [x, wr, w1, w2, s1, s2]
        step(f"call of {q['lib']} at T={T}")
        maybe_inject(task)
        ms = time_ours(fn, args, y, f"fp8   {T:>5}")
        step("torch reference (dequantized active experts)")
        ref = quant_reference(x, wr, w1, w2, s1, s2, k, (bk, bn))
        err = float((y.float() - ref.float()).abs().max() / ref.float().abs().max().clamp_min(1e-30))
        triton_ms = gemm_ms = None
        terr = float("nan")
        notes = []
        if DEVICE == "cuda":
            try:
                step("triton FP8 anchor (import)")
                import triton_moe  # noqa: E402 (needs triton)
                f8 = torch.float8_e4m3fn
                w1f, w2f = w1.view(f8), w2.view(f8)
                step("triton FP8 anchor")
                out = triton_moe.fused_moe(x, wr, w1f, w2f, k, scales=(s1, s2), block=(bk, bn))
                terr = float((out.float() - ref.float()).abs().max()
                             / ref.float().abs().max().clamp_min(1e-30))
                triton_ms = timed(lambda: triton_moe.fused_moe(x, wr, w1f, w2f, k, scales=(s1, s2),
                                                               block=(bk, bn)))
                routing = triton_moe.plan(x, wr, w1f, k)
                gemm_ms = timed(lambda: triton_moe.experts(x, w1f, w2f, k, routing, (s1, s2), (bk, bn)))
            except Exception as ex:
                notes.append(f"triton FP8 anchor failed at T={T}: {oneline(ex)}")
                if not healthy():
                    raise
        # The active experts' codes (one byte each) and f32 scales.
        moved = decode_bytes(x, wr, w1, w2, k, expert_extra=(s1[0].numel() + s2[0].numel()) * 4)
        pct_bw = pct(moved / (ms * 1e-3) / 1e9, task.get("bandwidth"))
        tri = f"{triton_ms:9.3f}" if triton_ms else f"{'n/a':>9}"
        ratio = f"{triton_ms / ms:10.2f}" if triton_ms else f"{'n/a':>10}"
        gratio = f"{gemm_ms / ms:10.2f}" if gemm_ms else f"{'n/a':>10}"
        row = f"fp8   {T:>5} {ms:9.3f} {tri} {pct_bw:>6} {ratio} {gratio} {err:8.1e} {terr:8.1e}"
        # The bf16 bound of the correctness cases: 1e-2 of max|reference|.
        if not err <= 1e-2:
            emit(partial={"rows": [row], "data": {"ms": ms}})
            raise RuntimeError(f"rel-err {err:.1e} above the bound 1e-2")
        return {"rows": [row], "notes": notes, "data": {"ms": ms}}

    def bench_x(self, T, dt):
        g = torch.Generator(device=DEVICE).manual_seed(20261201 + T)
        return torch.randn(T, self.manifest["bench"]["D"], device=DEVICE, generator=g).to(tdtype(dt))

    def yardsticks(self, task):
        step("copy bandwidth")
        maybe_inject(task)
        n = (1 << 29) if DEVICE == "cuda" else (1 << 22)
        src = torch.empty(n, dtype=torch.float32, device=DEVICE).uniform_()
        dst = torch.empty_like(src)
        ms = timed(lambda: dst.copy_(src))
        bandwidth = 2 * src.numel() * 4 / (ms * 1e-3) / 1e9  # read + write, GB/s
        del src, dst
        step("bf16 matmul rate")
        m = 8192 if DEVICE == "cuda" else 256
        a = torch.randn(m, m, dtype=torch.bfloat16, device=DEVICE)
        b = torch.randn(m, m, dtype=torch.bfloat16, device=DEVICE)
        ms = timed(lambda: a @ b)
        tflops = 2 * m ** 3 / (ms * 1e-3) / 1e12
        return {"rows": [f"yardsticks: device copy bandwidth {bandwidth:.0f} GB/s; torch bf16 matmul {tflops:.3g} TFLOP/s"],
                "data": {"bandwidth": bandwidth, "tflops": tflops}}

    def bench_row(self, task):
        spec = self.manifest["bench"]
        dt, T, k = task["dtype"], task["T"], spec["k"]
        step(f"generate {dt} weights")
        wr, w1, w2 = self.bench_weights(dt)
        fn = self.function(spec["libs"][dt], spec["entry"])
        x = self.bench_x(T, dt)
        y = torch.empty_like(x)
        args = [x, wr, w1, w2]
        step(f"call of {task['lib']} at T={T}")
        maybe_inject(task)
        ms = time_ours(fn, args, y, f"{dt:<5} {T:>5}")
        step("torch eager")
        maybe_inject(task, late=True)
        ref = torch_eager(x, wr, w1, w2, k)
        err = float((y.float() - ref.float()).abs().max() / ref.float().abs().max().clamp_min(1e-30))
        torch_ms = timed(lambda: torch_eager(x, wr, w1, w2, k))
        triton_ms = gemm_ms = None
        notes = []
        if DEVICE == "cuda":
            try:
                step("triton anchor (import)")
                import triton_moe  # noqa: E402 (needs triton)
                step("triton anchor")
                triton_ms = timed(lambda: triton_moe.fused_moe(x, wr, w1, w2, k))
                routing = triton_moe.plan(x, wr, w1, k)
                gemm_ms = timed(lambda: triton_moe.experts(x, w1, w2, k, routing))
            except Exception as ex:
                notes.append(f"triton anchor failed at T={T} {dt}: {oneline(ex)}")
                if not healthy():
                    raise
        bandwidth, tflops = task.get("bandwidth"), task.get("tflops")
        pct_bw = pct(decode_bytes(x, wr, w1, w2, k) / (ms * 1e-3) / 1e9, bandwidth)
        pct_mm = pct(flops(spec, T) / (ms * 1e-3) / 1e12, tflops)
        tri = f"{triton_ms:9.3f}" if triton_ms else f"{'n/a':>9}"
        ratio = f"{triton_ms / ms:10.2f}" if triton_ms else f"{'n/a':>10}"
        gratio = f"{gemm_ms / ms:10.2f}" if gemm_ms else f"{'n/a':>10}"
        row = (f"{dt:<5} {T:>5} {ms:9.3f} {torch_ms:9.3f} {tri} {pct_bw:>6} {pct_mm:>6} "
               f"{ratio} {gratio} {torch_ms / ms:9.2f} {err:8.1e}")
        return {"rows": [row], "notes": notes, "data": {"ms": ms}}

    def train(self, task):
        """The training step at T tokens: our layer's gradient (mixtral_vjp:
        y and every gradient in one call, the forward recomputed inside),
        torch eager autograd (forward + backward) and the Triton training
        anchor (triton_moe.train_step) on the same weights, x and dy."""
        spec = self.manifest["bench"]
        tr = spec["train"]
        dt, T, k = tr["dtype"], task["T"], spec["k"]
        step(f"generate {dt} weights")
        wr, w1, w2 = self.bench_weights(dt)
        fn = self.function(tr["lib"], tr["entry"])
        x = self.bench_x(T, dt)
        g = torch.Generator(device=DEVICE).manual_seed(20261204 + T)
        dy = torch.randn(x.shape, device=DEVICE, generator=g).to(x.dtype)
        outs = [torch.empty([T if d == -1 else d for d in shape], dtype=tdtype(rdt), device=DEVICE)
                for shape, rdt in fn.results]
        args = [x, wr, w1, w2, dy]
        step(f"call of {task['lib']} at T={T}")
        maybe_inject(task)
        ms = timed(lambda: fn(args, outs))
        sync()
        step_flops = 3 * flops(spec, T)  # forward + the two backward products
        emit(partial={"rows": [f"{T:>5} {ms:9.3f} (the rest of the row did not finish)"],
                      "data": {"ms": ms}})
        step("torch eager autograd")
        maybe_inject(task, late=True)
        leaves = [t.detach().clone().requires_grad_() for t in (x, wr, w1, w2)]

        def torch_step():
            for leaf in leaves:
                leaf.grad = None
            y = torch_eager(*leaves, k)
            y.backward(dy)
            return y

        y_ref = torch_step().detach()
        refs = [y_ref] + [leaf.grad for leaf in leaves]
        # The largest relative difference from torch over y and the four
        # gradients (bf16 results: the bf16 tolerance applies).
        err = max(float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-30))
                  for a, b in zip(outs, refs))
        torch_ms = timed(torch_step)
        del leaves, refs
        triton_ms = None
        notes = []
        if DEVICE == "cuda":
            try:
                step("triton training anchor (import)")
                import triton_moe  # noqa: E402 (needs triton)
                step("triton training anchor")
                got = triton_moe.train_step(x, wr, w1, w2, dy, k)
                terr = max(float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-30))
                           for a, b in zip(got, outs))
                notes.append(f"triton training anchor at T={T}: max rel diff from ours {terr:.1e}")
                del got
                triton_ms = timed(lambda: triton_moe.train_step(x, wr, w1, w2, dy, k))
            except Exception as ex:
                notes.append(f"triton training anchor failed at T={T}: {oneline(ex)}")
                if not healthy():
                    raise
        tflops = step_flops / (ms * 1e-3) / 1e12
        tri = f"{triton_ms:9.3f}" if triton_ms else f"{'n/a':>9}"
        ratio = f"{triton_ms / ms:10.2f}" if triton_ms else f"{'n/a':>10}"
        row = (f"{T:>5} {ms:9.3f} {torch_ms:9.3f} {tri} {tflops:8.3g} {pct(tflops, task.get('tflops')):>6} "
               f"{ratio} {torch_ms / ms:9.2f} {err:8.1e}")
        return {"rows": [row], "notes": notes, "data": {"ms": ms}}

    def torch_layer(self, task):
        """moe_mlir.torch.MoELayer (the package in python/, its library
        prepared by moe-compile and loaded with moe_mlir.load) on the
        device's tensors at T tokens: y and the gradients of x and of the
        three weights (forward + backward), against the plain torch layer
        (plain_moe.py: torch autograd, f32 computations from the bf16 values)
        on the bench weights; the time of each (forward + backward)."""
        spec = self.manifest["bench"]
        tl = spec["torch_layer"]
        dt, T = tl["dtype"], task["T"]
        step("import moe_mlir (python/)")
        package = os.path.join(self.kit, "python")
        if package not in sys.path:  # once per worker (one group per T)
            sys.path.insert(0, package)
        import moe_mlir  # noqa: E402
        import plain_moe  # noqa: E402
        from moe_mlir.torch import MoELayer  # noqa: E402
        step(f"generate {dt} weights")
        wr, w1, w2 = self.bench_weights(dt)
        step(f"load {tl['lib']} (moe_mlir.load)")
        lib = moe_mlir.load(os.path.join(self.kit, tl["lib"]), target="cuda" if DEVICE == "cuda" else "cpu")
        layer = MoELayer(spec["D"], spec["H"], spec["E"], routing="top_k", k=spec["k"],
                         activation="swiglu", dtype=tdtype(dt), device=DEVICE, library=lib)
        with torch.no_grad():
            layer.router_weight.copy_(wr)
            layer.experts_w1.copy_(w1)
            layer.experts_w2.copy_(w2)
        x = self.bench_x(T, dt).requires_grad_()
        g = torch.Generator(device=DEVICE).manual_seed(20261205 + T)
        dy = torch.randn(x.shape, device=DEVICE, generator=g).to(x.dtype)
        ours_params = [x, layer.router_weight, layer.experts_w1, layer.experts_w2]
        plain = {"router.weight": wr.detach().clone().requires_grad_(),
                 "experts.w1": w1.detach().clone().requires_grad_(),
                 "experts.w2": w2.detach().clone().requires_grad_()}
        cfg = dict(routing="top_k", k=spec["k"], activation="swiglu")

        def ours():
            y = layer(x)
            return [y] + list(torch.autograd.grad(y, ours_params, dy))

        def reference():
            y = plain_moe.layer(x, plain, cfg)
            return [y] + list(torch.autograd.grad(y, [x] + list(plain.values()), dy))

        step(f"MoELayer forward + backward at T={T}")
        maybe_inject(task)
        got = ours()
        sync()
        ms = timed(ours)
        emit(partial={"rows": [f"{dt:<5} {T:>5} {ms:9.3f} (the rest of the row did not finish)"],
                      "data": {"ms": ms}})
        step("plain torch layer forward + backward")
        maybe_inject(task, late=True)
        want = reference()
        errs = [float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-30))
                for a, b in zip(got, want)]
        plain_ms = timed(reference)
        row = (f"{dt:<5} {T:>5} {ms:9.3f} {plain_ms:9.3f} {plain_ms / ms:9.2f} {errs[0]:8.1e} "
               f"{max(errs[1:]):8.1e}")
        # bf16 bounds: y within 1e-2 of max|y| (the correctness cases'), the
        # gradients within 3e-2 (docs/spec.md section 9).
        if not (errs[0] <= 1e-2 and max(errs[1:]) <= 3e-2):
            emit(partial={"rows": [row], "data": {"ms": ms}})
            raise RuntimeError(f"y-err {errs[0]:.1e} or grad-err {max(errs[1:]):.1e} above the bounds "
                               f"(1e-2, 3e-2)")
        return {"rows": [row], "data": {"ms": ms}}

    def variant(self, task):
        spec = self.manifest["bench"]
        v = task["variant"]
        dt, k = v["dtype"], spec["k"]
        step(f"generate {dt} weights")
        wr, w1, w2 = self.bench_weights(dt)
        default = self.function(spec["libs"][dt], spec["entry"])
        step(f"load {v['lib']}")
        fn = self.function(v["lib"], spec["entry"])
        decode = spec.get("decode_tokens", [1, 16])
        rows = []
        for T in v["tokens"]:
            x = self.bench_x(T, dt)
            args = [x, wr, w1, w2]
            y0, y = torch.empty_like(x), torch.empty_like(x)
            step(f"call of {spec['libs'][dt]} (the default) at T={T}")
            default(args, [y0])
            sync()
            base = task.get("default_ms", {}).get(str(T))
            if base is None:
                base = timed(lambda: default(args, [y0]))
            step(f"call of {v['lib']} at T={T}")
            if T == v["tokens"][-1]:  # injected at the last T: the rows before stay
                maybe_inject(task)
            ms = timed(lambda: fn(args, [y]))
            sync()
            diff = float((y.float() - y0.float()).abs().max())
            if T in decode:
                rate = f"{pct(decode_bytes(x, wr, w1, w2, k) / (ms * 1e-3) / 1e9, task.get('bandwidth'))} %bw"
            else:
                rate = f"{pct(flops(spec, T) / (ms * 1e-3) / 1e12, task.get('tflops'))} %mm"
            rows.append(f"{v['name']:<20} {dt:<5} {T:>5} {ms:9.3f} {rate:>10} {base / ms:11.2f} {diff:12.3e}")
            emit(partial={"rows": list(rows)})  # kept if a later T fails
        return {"rows": rows}

    def run(self, task):
        kind = task["kind"]
        if kind == "facts":
            return self.facts(task)
        if kind == "load":
            return self.load(task)
        if kind == "case":
            return self.case(task)
        if kind == "yardsticks":
            return self.yardsticks(task)
        if kind == "bench":
            return self.bench_row(task)
        if kind == "variant":
            return self.variant(task)
        if kind == "train":
            return self.train(task)
        if kind == "torch":
            return self.torch_layer(task)
        if kind == "quant_bench":
            return self.quant_bench(task)
        raise ValueError(f"unknown task kind {kind}")


def pct(value, reference):
    return f"{100 * value / reference:.1f}" if reference else "n/a"


def flops(spec, T):
    D, H, E, k = spec["D"], spec["H"], spec["E"], spec["k"]
    return 2 * T * D * E + 2 * T * k * (D * 2 * H + H * D)


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


def time_ours(fn, args, y, label):
    """Median ms of our library's fn(args, [y]) (timed), emitted at once as
    the row "LABEL ms": if the references that follow fail or hang, the row
    still has our time (and the variants their default)."""
    ms = timed(lambda: fn(args, [y]))
    sync()
    emit(partial={"rows": [f"{label} {ms:9.3f} (the rest of the row did not finish)"],
                  "data": {"ms": ms}})
    return ms


def timed(fn):
    """Median milliseconds per fn() call. Calls run back to back in batches
    (about 20 ms of work each) between two CUDA events on the current stream
    (the stream the libraries are given), so neither a host synchronisation
    per call nor the Python loop between calls is counted unless the GPU
    waits for it; one warm-up call first. On the cpu dry run: wall time."""
    min_s, max_reps = (0.3, 200) if DEVICE == "cuda" else (0.02, 20)

    def clock_batch(batch):
        if DEVICE == "cuda":
            begin = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(batch):
                fn()
            end.record()
            end.synchronize()
            return begin.elapsed_time(end) / batch
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        return (time.perf_counter() - t0) * 1e3 / batch

    fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    once = time.perf_counter() - t0
    batch = max(1, min(100, int(0.02 / max(once, 1e-6))))
    # At least 3 samples, 1 for a call slower than 0.1 s (f32 prefill).
    least = 3 if once < 0.1 else 1
    samples = []
    start_all = time.perf_counter()
    while len(samples) < max_reps and (time.perf_counter() - start_all < min_s or len(samples) < least):
        samples.append(clock_batch(batch))
    samples.sort()
    return samples[len(samples) // 2]


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


def quant_reference(x, wr, w1, w2, s1, s2, k, block):
    """The FP8 layer in torch: every active expert's weights dequantized (W =
    q * s, exact in f32; the codes' values from e4m3_values()), the layer's
    sums in f32 from the bf16 x and h (h rounded to bf16, as docs/spec.md
    §3 says)."""
    T, D = x.shape
    H = w2.shape[1]
    bk, bn = block
    table = e4m3_values().to(x.device)
    logits = x.float() @ wr.float()
    top, idx = torch.topk(logits, k, dim=-1)
    w = torch.softmax(top, dim=-1)
    y = torch.zeros((T, D), dtype=torch.float32, device=x.device)

    def dequant(codes, s):
        K, N = codes.shape
        full = s.repeat_interleave(bk, 0)[:K].repeat_interleave(bn, 1)[:, :N]
        return table[codes.long()] * full

    for e in torch.unique(idx).tolist():
        tok, slot = (idx == e).nonzero(as_tuple=True)
        u = x[tok].float() @ dequant(w1[e], s1[e])
        h = (torch.nn.functional.silu(u[:, :H]) * u[:, H:]).to(torch.bfloat16)
        y.index_add_(0, tok, (h.float() @ dequant(w2[e], s2[e])) * w[tok, slot, None])
    return y.to(x.dtype)


def decode_bytes(x, wr, w1, w2, k, expert_extra=0):
    """Bytes a decode step must move: the active experts' weights (and
    `expert_extra` more bytes each, e.g. their scales), the router, x and y
    (the %bw numerator)."""
    T, D = x.shape
    E, H = wr.shape[1], w2.shape[1]
    _, idx = torch.topk(x.float() @ wr.float(), k, dim=-1)
    active = int(torch.unique(idx).numel())
    return ((active * (D * 2 * H + H * D) + D * E + 2 * T * D) * w1.element_size()
            + active * expert_extra)


def worker_main(kit):
    """Reads one task (a JSON line) at a time from stdin, answers on the
    channel fd (MOE_KIT_FD): {"step"}, then {"done", "ok", "rows", ...}."""
    global torch, CHAN, DEVICE
    CHAN = os.fdopen(int(os.environ["MOE_KIT_FD"]), "w")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch as torch_module
    torch = torch_module
    with open(os.path.join(kit, "manifest.json")) as f:
        manifest = json.load(f)
    DEVICE = manifest.get("target", "cuda")
    if DEVICE == "cuda":
        if not torch.cuda.is_available():
            emit(fatal="torch sees no CUDA device")
            return 3
        torch.cuda.init()
    worker = Worker(kit, manifest)
    emit(ready=True)
    for line in sys.stdin:
        task = json.loads(line)
        PARTIAL.clear()
        try:
            answer = worker.run(task)
            answer.setdefault("ok", True)
        except Exception as ex:
            answer = {"ok": False, "reason": f"{STEP}: {oneline(ex)}",
                      "rows": PARTIAL.get("rows", []), "data": PARTIAL.get("data")}
        emit(done=task["id"], **answer)
        if not answer["ok"]:
            # A sticky CUDA error leaves the context unusable: this worker
            # ends and the driver starts a fresh one for the next task.
            alive = healthy()
            emit(alive=alive)
            if not alive:
                return 3
    return 0


# ================================================================ driver ===

class Died(Exception):
    pass


class StartFailed(Died):
    """No worker to run the task in (the task itself did not run)."""


class WorkerProcess:
    """A worker (kit.py --worker) with its task pipe (stdin), its channel
    (JSON lines) and its merged stdout/stderr (kept for the reason of a
    death, and copied to our stdout, i.e. run.log)."""

    def __init__(self, kit, driver):
        self.driver = driver
        rfd, wfd = os.pipe()
        env = dict(os.environ, MOE_KIT_FD=str(wfd))
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), kit, "--worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            pass_fds=(wfd,), env=env, start_new_session=True)
        os.close(wfd)
        self.chan = rfd
        self.bufs = {rfd: b"", self.proc.stdout.fileno(): b""}
        self.messages = []
        self.partial = {}
        self.tail = []
        self.step = "start"
        self.open = set(self.bufs)

    def send(self, task):
        self.partial = {}
        self.proc.stdin.write((json.dumps(task) + "\n").encode())
        self.proc.stdin.flush()

    def _pump(self, timeout):
        ready, _, _ = select.select(list(self.open), [], [], max(0.0, timeout))
        for fd in ready:
            data = os.read(fd, 65536)
            if not data:
                self.open.discard(fd)
                continue
            self.bufs[fd] += data
            *lines, self.bufs[fd] = self.bufs[fd].split(b"\n")
            for raw in lines:
                text = raw.decode("utf-8", "replace")
                if fd == self.chan:
                    self.messages.append(json.loads(text))
                else:
                    print(f"  [worker] {text}", flush=True)
                    if text.strip():
                        self.tail = (self.tail + [text.strip()])[-3:]

    def wait_for(self, key, deadline):
        """The next message with KEY; raises Died on death or at the deadline."""
        while True:
            while self.messages:
                m = self.messages.pop(0)
                if "step" in m:
                    self.step = m["step"]
                elif "partial" in m:
                    self.partial = m["partial"]
                elif "fatal" in m:
                    self.fatal = m["fatal"]
                    self.tail.append(m["fatal"])
                if key in m:
                    return m
            if self.chan not in self.open:
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.kill()
                raise Died(self.death_reason())
            now = time.monotonic()
            if now >= deadline:
                self.kill()
                raise Died(f"no answer within the watchdog ({self.driver.watch:.0f} s) in {self.step} (a hang?); worker killed")
            self._pump(deadline - now)

    def death_reason(self):
        rc = self.proc.returncode
        if rc is not None and rc < 0:
            how = f"worker killed by {signal.Signals(-rc).name}"
        else:
            how = getattr(self, "fatal", None) or f"worker exited with status {rc}"
        last = f"; last output: {self.tail[-1][:160]}" if self.tail and self.tail[-1] != how else ""
        return f"{how} in {self.step}{last}"

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:
            self.kill()
        os.close(self.chan)


class Driver:
    def __init__(self, kit, out, manifest, budget, only):
        self.kit, self.out, self.manifest, self.only = kit, out, manifest, only
        self.start = time.monotonic()
        self.budget = budget
        # A few seconds kept for the summary and the exit.
        self.deadline = self.start + budget - min(8.0, 0.05 * budget)
        self.cpu = manifest.get("target", "cuda") != "cuda"
        self.tasks = []          # display order
        self.results = {}        # id -> {"status": ok|FAIL|skipped, "rows", "reason"}
        self.notes = []
        self.worker = None
        self.start_failures = 0
        self.start_error = None
        self.watch = 0.0
        self.finished = False

    # ------------------------------------------------------------ budget
    def left(self):
        return self.deadline - time.monotonic()

    def est(self, seconds):
        """A task's estimated seconds on the GPU; the cpu dry run's small
        shapes take a fraction."""
        return seconds * (0.1 if self.cpu else 1.0)

    def watchdog(self, kind, est=0.0):
        b = self.budget
        if kind in ("facts", "load", "case"):
            return max(5.0, min(20.0, 0.05 * b))
        return max(3.0, min(max(10.0 if self.cpu else 30.0, 3 * est), 0.4 * b))

    # ----------------------------------------------------------- workers
    def start_worker(self):
        if self.start_failures >= 2:  # e.g. no CUDA device: do not retry per task
            raise StartFailed(f"not run: two worker starts failed ({self.start_error})")
        self.worker = WorkerProcess(self.kit, self)
        self.watch = max(5.0, min(60.0, 0.15 * self.budget))
        try:
            self.worker.wait_for("ready", time.monotonic() + min(self.watch, max(self.left(), 1.0)))
            self.start_failures = 0
        except Died as ex:
            self.worker = None
            self.start_failures += 1
            self.start_error = f"worker start failed: {ex}"
            raise StartFailed(self.start_error)

    def stop_worker(self):
        if self.worker:
            self.worker.close()
            self.worker = None

    def run_task(self, task):
        """Runs one task in the current worker (a fresh one if needed);
        records its result. Returns the result."""
        est = self.est(task.get("est", 0.0))
        if task.get("skip"):
            return self.record(task, "skipped", reason=task["skip"])
        if est > self.left() or self.left() <= 0:
            return self.record(task, "skipped", reason=f"needs ~{est:.0f} s, {max(0, self.left()):.0f} s of the budget left")
        try:
            if self.worker is None:
                self.start_worker()
            self.watch = min(self.watchdog(task["kind"], est), max(self.left(), 1.0))
            self.worker.send(task)
            answer = self.worker.wait_for("done", time.monotonic() + self.watch)
        except (Died, BrokenPipeError) as ex:
            partial = {}
            if self.worker:
                partial = self.worker.partial
                self.worker.kill()
            self.worker = None
            return self.record(task, "FAIL", reason=str(ex), died=not isinstance(ex, StartFailed),
                               rows=partial.get("rows", []), data=partial.get("data"))
        self.notes += answer.get("notes", [])
        reason = answer.get("reason")
        if not answer["ok"]:
            # The worker says whether its context survived; if not, it ends
            # and the next task gets a fresh worker.
            try:
                if not self.worker.wait_for("alive", time.monotonic() + 20)["alive"]:
                    reason = f"{reason}; the CUDA context was unusable afterwards (fresh worker)"
                    self.worker.kill()
                    self.worker = None
            except Died:
                self.worker = None
        return self.record(task, "ok" if answer["ok"] else "FAIL", rows=answer.get("rows", []),
                           reason=reason, data=answer.get("data"))

    def record(self, task, status, rows=(), reason=None, data=None, died=False):
        r = {"status": status, "rows": list(rows), "reason": reason, "data": data or {}, "died": died}
        self.results[task["id"]] = r
        if status != "ok":
            print(f"{status} {task['id']}: {reason}", flush=True)
        for row in rows:
            print(row, flush=True)
        self.write_summary()
        return r

    # ------------------------------------------------------------- plan
    def plan(self):
        m = self.manifest
        facts = {"id": "facts", "kind": "facts", "section": "contact"}
        loads, cases = [], []
        libs = {}
        for case in m["cases"]:
            if case.get("not_compiled"):
                continue
            libs.setdefault(case["lib"], {"entry": case["entry"], "args": case["args"]})
        spec = m.get("bench", {})
        if self.only in (None, "bench") and spec:
            for dt in spec["dtypes"]:
                libs.setdefault(spec["libs"][dt], {"entry": spec["entry"], "args": None})
            for v in spec.get("variants", []):
                libs.setdefault(v["lib"], {"entry": spec["entry"], "args": None})
            if spec.get("train"):
                libs.setdefault(spec["train"]["lib"], {"entry": spec["train"]["entry"], "args": None})
            if spec.get("torch_layer"):
                libs.setdefault(spec["torch_layer"]["lib"], {"entry": "f", "args": None})
        qspec = m.get("quant_bench", {})
        if self.only in (None, "bench") and qspec:
            libs.setdefault(qspec["lib"], {"entry": qspec["entry"], "args": None})
        for lib, info in libs.items():
            is_case = info["args"] is not None
            if self.only == "bench" and is_case:
                continue
            loads.append({"id": "load:" + lib, "kind": "load", "section": "contact", "lib": lib,
                          "entry": info["entry"], "args": info["args"], "est": 0.5})
        if self.only in (None, "correctness"):
            for case in m["cases"]:
                cases.append({"id": f"{case['name']}/{case['form']}", "kind": "case", "section": "correctness",
                              "case": case["name"], "form": case["form"], "lib": case["lib"],
                              "entry": case["entry"], "args": case["args"], "expected": case["expected"],
                              "not_compiled": case.get("not_compiled"), "est": 0.5})
        groups, variants = [], []
        if self.only in (None, "bench") and spec:
            groups.append({"id": "bench:yardsticks", "kind": "yardsticks", "section": "bench", "est": 8})
            decode = spec.get("decode_tokens", [1, 16])
            for dt in spec["dtypes"]:
                first = True
                for T in spec["tokens"]:
                    # the first group of a dtype generates its weights (and
                    # the first at all compiles the Triton anchor)
                    est = 6 if T in decode else 12
                    if dt == "f32" and T >= 1024:  # CUDA-core GEMMs, seconds per call
                        est = 25
                    if first:
                        est += 25 if dt == spec["dtypes"][0] else 8
                        first = False
                    groups.append({"id": f"bench:{dt}:T={T}", "kind": "bench", "section": "bench",
                                   "dtype": dt, "T": T, "lib": spec["libs"][dt], "est": est})
            train = spec.get("train")
            for T in (train["tokens"] if train else []):
                # torch autograd and the Triton step (its first call compiles
                # four kernels) besides ours
                groups.append({"id": f"train:{train['dtype']}:T={T}", "kind": "train", "section": "train",
                               "dtype": train["dtype"], "T": T, "lib": train["lib"],
                               "est": 20 if T < 4096 else 30})
            tl = spec.get("torch_layer")
            for T in (tl["tokens"] if tl else []):
                # the package's MoELayer (forward + backward) and the plain
                # torch layer's autograd (its f32 copies of the weights)
                groups.append({"id": f"torch:{tl['dtype']}:T={T}", "kind": "torch", "section": "torch",
                               "dtype": tl["dtype"], "T": T, "lib": tl["lib"], "est": 10})
            for i, T in enumerate(qspec.get("tokens", []) if qspec else []):
                # the first makes the FP8 weights (DeepSeek-V3's: 11 GB of
                # codes) and compiles the Triton FP8 kernels
                groups.append({"id": f"quant:fp8:T={T}", "kind": "quant_bench", "section": "quant",
                               "T": T, "lib": qspec["lib"], "est": (40 if i == 0 else 8) + (8 if T >= 1024 else 0)})
            for v in spec.get("variants", []):
                variants.append({"id": "variant:" + v["name"], "kind": "variant", "section": "variants",
                                 "variant": v, "lib": v["lib"], "est": 4 * len(v["tokens"]) + 2})
        self.tasks = [facts] + loads + cases + groups + variants
        # Priority order: the first dtype's decode rows, then its prefill rows
        # (T >= 1024), then its other rows, the other dtypes (decode
        # first), the variants last.
        spec_tokens = spec.get("tokens", []) if spec else []
        decode = spec.get("decode_tokens", [1, 16]) if spec else []

        def priority(g):
            if g["kind"] == "yardsticks":
                return (0, 0, 0)
            if g["kind"] == "train":  # after the first dtype's prefill rows
                return (2, 1, g["T"])
            if g["kind"] == "torch":  # then the PyTorch layer
                return (2, 2, g["T"])
            if g["kind"] == "quant_bench":  # then the FP8 layer
                return (2, 3, g["T"])
            first = g["dtype"] == spec["dtypes"][0]
            T = g["T"]
            if T in decode:
                return (1 if first else 4, 0, T)
            prefill = sorted(t for t in spec_tokens if t >= 1024)
            if first and T in prefill:
                return (2, 0, prefill.index(T))
            return (3 if first else 5, 0, T)

        return facts, loads, cases, sorted(groups, key=priority), variants

    def print_plan(self):
        """The tasks in the order they would run, with their watchdogs and
        estimates (no worker is started)."""
        facts, loads, cases, groups, variants = self.plan()
        print(f"plan: budget {self.budget:.0f} s, worker start watchdog {max(5.0, min(60.0, 0.15 * self.budget)):.0f} s, "
              f"first contact at most {0.3 * self.budget:.0f} s")
        for t in [facts] + loads + cases + groups + variants:
            est = self.est(t.get("est", 0.0))
            print(f"{t['id']:<44} watchdog {self.watchdog(t['kind'], est):5.1f} s  estimate {est:5.1f} s")
        return 0

    def run(self):
        facts, loads, cases, groups, variants = self.plan()
        self.write_summary()
        self.run_task(facts)
        contact_end = time.monotonic() + 0.3 * self.budget
        crashed = {}
        for t in loads:
            if time.monotonic() > contact_end:
                t = dict(t, skip="first-contact share of the budget (30 %) used")
            r = self.run_task(t)
            if r["died"]:
                crashed[t["lib"]] = r["reason"]
        for t in cases:
            if t.get("not_compiled"):
                self.record(t, "not-compiled", reason=t["not_compiled"])
                continue
            if t["lib"] in crashed:
                t = dict(t, skip=None)
                self.record(t, "FAIL", reason=f"not called again: its library killed the worker at first contact ({crashed[t['lib']]})")
                continue
            self.run_task(t)
        # The benchmarks in a fresh worker (the correctness worker's tensors and
        # libraries freed with it).
        self.stop_worker()
        bench = {}
        for t in groups:
            if t.get("lib") in crashed:
                t = dict(t, skip=f"{t['lib']} killed the worker at first contact")
            t = dict(t, **bench)
            r = self.run_task(t)
            if t["kind"] == "yardsticks" and r["status"] == "ok":
                bench.update(r["data"])
            if t["kind"] == "bench" and r["data"].get("ms"):
                bench.setdefault("default_ms_" + t["dtype"], {})[str(t["T"])] = r["data"]["ms"]
        for t in variants:
            default_lib = self.manifest["bench"]["libs"][t["variant"]["dtype"]]
            t = dict(t, bandwidth=bench.get("bandwidth"), tflops=bench.get("tflops"),
                     default_ms=bench.get("default_ms_" + t["variant"]["dtype"], {}))
            for lib in (t["lib"], default_lib):
                if lib in crashed:
                    t["skip"] = f"{lib} killed the worker at first contact"
            self.run_task(t)
        self.stop_worker()
        self.finished = True
        self.write_summary()
        return self.exit_status()

    # ------------------------------------------------------------ report
    def exit_status(self):
        for t in self.tasks:
            r = self.results.get(t["id"])
            if r is None or r["status"] == "FAIL" or (r["status"] == "skipped" and t["kind"] in ("case", "load")):
                return 1
        return 0

    def rows_of(self, section, fmt_missing):
        lines = []
        for t in self.tasks:
            if t["section"] != section or t["kind"] == "facts":
                continue
            r = self.results.get(t["id"])
            if r is None:
                continue
            lines += r["rows"]
            if r["status"] != "ok" and not r["rows"]:
                lines.append(fmt_missing(t, r))
        return lines

    def summary_lines(self):
        m = self.manifest
        L = []
        facts = self.results.get("facts")
        if facts and facts["rows"]:
            L += facts["rows"]
        elif facts:
            L.append(f"device: unknown (facts failed: {facts['reason']})")
        L.append(f"kit: target {m.get('target', 'cuda')} chip {m['chip']} commit {m.get('commit', '?')}; "
                 f"budget {self.budget:.0f} s (MOE_KIT_TIMEOUT)")
        L.append("== first contact (each library loaded and called once)")
        L += self.rows_of("contact", lambda t, r: f"{t['lib']:<38} {r['status'].upper()}: {r['reason']}")
        if any(t["section"] == "correctness" for t in self.tasks):
            L.append("== correctness (GPU vs the CPU path's outputs)")
            L.append(f"{'case':<34} {'form':<6} {'result':<8} {'dtype':<5} {'max-rel-err':>12}  status")
            L += self.rows_of("correctness", lambda t, r: (
                f"{t['case']:<34} {t['form']:<6} {'-':<8} {'-':<5} {'-':>12}  "
                + ("NOT COMPILED: " if r["status"] == "not-compiled" else r["status"].upper() + ": ") + str(r["reason"])))
            cs = [self.results.get(t["id"]) for t in self.tasks if t["kind"] == "case"]
            fails = sum(1 for r in cs if r and r["status"] == "FAIL")
            nc = sum(1 for r in cs if r and r["status"] == "not-compiled")
            sk = sum(1 for r in cs if r and r["status"] == "skipped")
            L.append(f"correctness: {fails} failure(s), {nc} case(s) the target cannot compile, {sk} skipped")
            regen = sum(r["data"].get("regenerated", 0) for r in cs if r)
            differ = sum(r["data"].get("differ", 0) for r in cs if r)
            L.append(f"inputs: {regen} argument(s) regenerated from their seeds (fill_random.py), "
                     f"{differ} differ from the build machine's digest")
        spec = m.get("bench", {})
        if any(t["section"] == "bench" for t in self.tasks):
            L.append("== benchmarks (Mixtral shape: D=%d H=%d E=%d top-%d SwiGLU; weights on the device)"
                     % (spec["D"], spec["H"], spec["E"], spec["k"]))
            y = self.results.get("bench:yardsticks")
            if y and y["rows"]:
                L += y["rows"]
            L.append(f"{'dtype':<5} {'T':>5} {'moe-ms':>9} {'torch-ms':>9} {'triton-ms':>9} {'%bw':>6} {'%mm':>6} "
                     f"{'triton/moe':>10} {'tgemm/moe':>10} {'torch/moe':>9} {'rel-err':>8}")
            for t in self.tasks:
                if t["kind"] != "bench":
                    continue
                r = self.results.get(t["id"])
                if r is None:
                    continue
                L += r["rows"] or [f"{t['dtype']:<5} {t['T']:>5} {r['status'].upper()}: {r['reason']}"]
            if y and y["status"] != "ok":
                L.append(f"yardsticks {y['status'].upper()}: {y['reason']} (%bw, %mm n/a)")
            L += self.notes
            L.append("%bw: (active experts' weights + router + x + y) / time / copy bandwidth (the decode goal: >= 80);")
            L.append("%mm: FLOPs / time / the bf16 matmul rate (the prefill goal: >= 70); triton/moe >= 1.0 is the anchor goal")
            L.append("(the whole Triton layer: torch routing and plan + its two GEMMs); tgemm/moe: the Triton GEMMs alone,")
            L.append("routing precomputed - the strict comparison. Times: median per call, back-to-back calls between CUDA events.")
        if any(t["section"] == "train" for t in self.tasks):
            L.append("== training step (bf16: forward + backward, y and the gradients of x, wr, w1, w2; same inputs)")
            L.append(f"{'T':>5} {'moe-ms':>9} {'torch-ms':>9} {'triton-ms':>9} {'TFLOP/s':>8} {'%mm':>6} "
                     f"{'triton/moe':>10} {'torch/moe':>9} {'rel-err':>8}")
            L += self.rows_of("train", lambda t, r: f"{t['T']:>5} {r['status'].upper()}: {r['reason']}")
            L.append("moe: the compiled mixtral_vjp (one call: the forward recomputed, then the backward kernels);")
            L.append("torch: eager autograd of the same layer; triton: tools/gpu-kit/triton_moe.py train_step. TFLOP/s:")
            L.append("3 x the forward's FLOPs / moe time; %mm: of the bf16 matmul rate; rel-err: largest max|moe - torch|")
            L.append("/ max|torch| over y and the four gradients (the notes above give the Triton step's difference).")
        if any(t["section"] == "torch" for t in self.tasks):
            L.append("== PyTorch layer (moe_mlir.torch.MoELayer on the device's tensors: forward + backward)")
            L.append(f"{'dtype':<5} {'T':>5} {'moe-ms':>9} {'plain-ms':>9} {'plain/moe':>9} {'y-err':>8} {'grad-err':>8}")
            L += self.rows_of("torch", lambda t, r: f"{t['dtype']:<5} {t['T']:>5} {r['status'].upper()}: {r['reason']}")
            L.append("moe: the layer's compiled @f then @f_vjp through torch.autograd (the package, python/);")
            L.append("plain: tools/train/plain_moe.py with torch autograd (f32 math from the bf16 values); errors:")
            L.append("max|moe - plain| / max|plain| of y and the largest over the gradients of x, wr, w1, w2.")
        if any(t["section"] == "quant" for t in self.tasks):
            q = m["quant_bench"]
            L.append("== quantized layer (DeepSeek-V3 expert shape: D=%d H=%d E=%d top-%d SwiGLU, FP8 E4M3 weights with"
                     % (q["D"], q["H"], q["E"], q["k"]))
            L.append("   %d x %d block scales, bf16 tokens; weights on the device)" % tuple(q["block"]))
            L.append(f"{'type':<5} {'T':>5} {'moe-ms':>9} {'triton-ms':>9} {'%bw':>6} {'triton/moe':>10} "
                     f"{'tgemm/moe':>10} {'rel-err':>8} {'t-err':>8}")
            L += self.rows_of("quant", lambda t, r: f"fp8   {t['T']:>5} {r['status'].upper()}: {r['reason']}")
            L.append("moe: the compiled layer (tensor cores: the codes staged as bf16, each block's sums scaled; docs/gpu.md);")
            L.append("triton: triton_moe.py's FP8 block-scaled variant (weight-only, the same numerics), tgemm its GEMMs")
            L.append("alone; %bw: (active experts' codes + router + x + y) / time / copy bandwidth; rel-err, t-err:")
            L.append("max|moe - ref| and max|triton - ref| over max|ref|, ref = torch on the dequantized weights (f32).")
        if any(t["section"] == "variants" for t in self.tasks):
            L.append("== variants (the layer compiled with other flags, on the default's inputs)")
            L.append(f"{'variant':<20} {'dtype':<5} {'T':>5} {'ms':>9} {'rate':>10} {'default/var':>11} {'max|diff|':>12}")
            L += self.rows_of("variants", lambda t, r: f"{t['variant']['name']:<20} {t['variant']['dtype']:<5} "
                              f"{r['status'].upper()}: {r['reason']}")
            L.append("rate: % of the copy bandwidth at the decode T, else % of the matmul rate; default/var > 1: the")
            L.append("variant is faster; max|diff|: largest |variant - default| over the output (split-K changes only")
            L.append("the f32 order of the K sums).")
        failed = [(t["id"], self.results[t["id"]]) for t in self.tasks
                  if t["id"] in self.results and self.results[t["id"]]["status"] == "FAIL"]
        skipped = [(t["id"], self.results[t["id"]]) for t in self.tasks
                   if t["id"] in self.results and self.results[t["id"]]["status"] == "skipped"]
        pending = [t["id"] for t in self.tasks if t["id"] not in self.results]
        L.append(f"== failures: {len(failed)}")
        L += [f"FAIL {i}: {r['reason']}" for i, r in failed]
        L.append(f"== skipped: {len(skipped)}")
        L += [f"skipped {i}: {r['reason']}" for i, r in skipped]
        elapsed = time.monotonic() - self.start
        if self.finished:
            L.append(f"kit: finished in {elapsed:.0f} s of {self.budget:.0f} s, exit status {self.exit_status()}")
        else:
            L.append(f"kit: in progress or interrupted after {elapsed:.0f} s of {self.budget:.0f} s; "
                     f"{len(pending)} task(s) not finished: {' '.join(pending[:12])}{' ...' if len(pending) > 12 else ''}")
        return L

    def write_summary(self):
        path = os.path.join(self.out, "summary.txt")
        with open(path + ".tmp", "w") as f:
            f.write("\n".join(self.summary_lines()) + "\n")
        os.replace(path + ".tmp", path)

    def print_summary(self):
        print("\n".join(["", "== summary (also in OUT/summary.txt)"] + self.summary_lines()), flush=True)


def main():
    if len(sys.argv) >= 3 and sys.argv[2] == "--worker":
        sys.exit(worker_main(sys.argv[1]))
    if len(sys.argv) < 3:
        sys.exit("usage: kit.py KIT_DIR OUT_DIR [--only=correctness|bench] [--plan]")
    kit, out = sys.argv[1], sys.argv[2]
    only = next((a.split("=", 1)[1] for a in sys.argv[3:] if a.startswith("--only=")), None)
    if only not in (None, "correctness", "bench"):
        sys.exit(f"kit.py: --only must be correctness or bench, not '{only}'")
    try:
        budget = float(os.environ.get("MOE_KIT_TIMEOUT", "360"))
        if budget <= 0:
            raise ValueError
    except ValueError:
        sys.exit(f"kit.py: MOE_KIT_TIMEOUT must be a positive number of seconds, not '{os.environ['MOE_KIT_TIMEOUT']}'")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(kit, "manifest.json")) as f:
        manifest = json.load(f)
    driver = Driver(kit, out, manifest, budget, only)
    if "--plan" in sys.argv[3:]:
        sys.exit(driver.print_plan())

    def on_term(signum, frame):  # run.sh's timeout: leave the summary, end the worker
        # The handler interrupts the main thread anywhere, possibly inside
        # Popen.wait (which holds the Popen's wait lock) or a print (which
        # holds stdout's buffer lock): it takes no lock of its own (no
        # Popen.wait, no print), and always exits.
        try:
            if driver.worker:
                try:
                    os.killpg(driver.worker.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            driver.write_summary()
            os.write(1, f"kit.py: stopped by {signal.Signals(signum).name}; summary written\n"
                     .encode())
        finally:
            os._exit(124)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    status = driver.run()
    driver.print_summary()
    sys.exit(status)


if __name__ == "__main__":
    main()
