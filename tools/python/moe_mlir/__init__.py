"""moe_mlir: the moe-mlir compiler from Python.

`compile(source)` runs `moe-compile` on MLIR text (or a file) and loads the
shared library it writes (docs/aot.md); each exported function of the
library is a Python callable on torch tensors. `moe_mlir.torch` builds
`torch.nn.Module`s (MoELayer, SoftMoELayer) on it, with autograd through the
compiled gradient (`@f_vjp`). docs/python.md is the reference.

Pure Python over ctypes: no compiled extension. torch is imported only when
a function is called (and by moe_mlir.torch).
"""
import ctypes
import hashlib
import os
import re
import subprocess
import tempfile

from . import _paths

__all__ = ["Error", "Library", "Function", "compile", "load", "cache_dir", "tool"]


class Error(RuntimeError):
    """A failed compilation or call (the message is the tool's or the
    library's one line)."""


def _torch():
    try:
        import torch
    except ImportError:
        raise ImportError("moe_mlir: calling a compiled function needs PyTorch "
                          "(Debian: apt install python3-torch)") from None
    return torch


def tool(name):
    """The path of a moe-mlir executable: $MOE_MLIR_BIN/name if that is set,
    else the one of the tree this package belongs to (build or install)."""
    folder = os.environ.get("MOE_MLIR_BIN") or _paths.bin_dir()
    path = os.path.join(folder, name)
    if not os.access(path, os.X_OK):
        raise Error(f"moe_mlir: {name} not found in {folder} (build moe-mlir, "
                    f"or set MOE_MLIR_BIN to the folder that holds it)")
    return path


def cache_dir():
    """Where compiled libraries are kept: $MOE_MLIR_CACHE, else
    $XDG_CACHE_HOME/moe-mlir, else ~/.cache/moe-mlir."""
    if os.environ.get("MOE_MLIR_CACHE"):
        return os.environ["MOE_MLIR_CACHE"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "moe-mlir")


def _tool_identity(path):
    st = os.stat(path)
    return f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}"


def compile(source, target="cpu", chip=None, entries=None, vjp=False, mcpu=None):
    """Compiles MLIR (text, or the path of a .mlir file) with moe-compile and
    returns the loaded Library.

    target: "cpu" (host tensors) or "cuda" (CUDA tensors; chip such as
    "sm_80", "sm_90a"; default sm_80). entries: the public functions to
    export (default all). vjp: also export @f_vjp for every exported @f.
    mcpu: the host CPU to optimize for (default: this machine's).

    The library is cached under cache_dir() by the hash of the source, the
    options and the moe-compile binary, so a second call (in this process or
    another) loads it without compiling."""
    if target not in ("cpu", "cuda"):
        raise ValueError(f"moe_mlir.compile: target must be 'cpu' or 'cuda', not {target!r}")
    if chip is not None and target != "cuda":
        raise ValueError("moe_mlir.compile: chip is for target='cuda' only")
    if isinstance(source, os.PathLike) or (
            isinstance(source, str) and "\n" not in source and source.endswith(".mlir")):
        with open(source) as f:
            text = f.read()
    elif isinstance(source, str):
        text = source
    else:
        raise TypeError("moe_mlir.compile: source must be MLIR text or the path of a .mlir file")
    compiler = tool("moe-compile")
    args = ["--target=" + target]
    if chip:
        args.append("--chip=" + chip)
    if vjp:
        args.append("--vjp")
    if mcpu:
        args.append("--mcpu=" + mcpu)
    for e in entries or []:
        args.append("--entry=" + e)
    # moe-compile reads its default --opt-level from the environment.
    level = "MOE_COMPILE_OPT_LEVEL=" + os.environ.get("MOE_COMPILE_OPT_LEVEL", "")
    key = hashlib.sha256("\0".join([_tool_identity(compiler), level] + args + [text])
                         .encode()).hexdigest()
    folder = cache_dir()
    lib_path = os.path.join(folder, key[:32] + ".so")
    hit = os.path.exists(lib_path)
    if not hit:
        os.makedirs(folder, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as tmp:
            src = os.path.join(tmp, "input.mlir")
            with open(src, "w") as f:
                f.write(text)
            out = os.path.join(tmp, "lib.so")
            r = subprocess.run([compiler, src, "-o", out] + args,
                               capture_output=True, text=True)
            if r.returncode != 0:
                msg = (r.stderr.strip() or r.stdout.strip() or "exit code %d" % r.returncode)
                raise Error("moe_mlir.compile: " + msg.replace(src, "<source>"))
            os.replace(out, lib_path)  # atomic: concurrent compilers agree
    lib = Library(lib_path, target, _argument_names(text))
    lib.from_cache = hit
    return lib


def load(path, target="cpu"):
    """Loads a library that moe-compile wrote (for example on a machine
    without the compiler: a GPU machine running a prepared library).
    target: the --target it was compiled for ("cpu" or "cuda")."""
    if target not in ("cpu", "cuda"):
        raise ValueError(f"moe_mlir.load: target must be 'cpu' or 'cuda', not {target!r}")
    if not os.path.exists(path):
        raise Error(f"moe_mlir.load: {path} does not exist")
    with open(path, "rb") as f:  # the exported names, from the dynamic string table
        found = re.findall(rb"\0moe_([A-Za-z_][\w$.]*)_signature\0", f.read())
    lib = Library(os.path.abspath(path), target, {n.decode(): [] for n in found})
    lib.from_cache = False
    if not lib.functions:
        raise Error(f"moe_mlir.load: {path} exports no moe function (not a moe-compile library?)")
    return lib


_FUNC = re.compile(r"func\.func\s+@([\w$.-]+)\s*\(")
_ARG = re.compile(r"(%[\w$.-]+)\s*:[^{,)]*(?:\{[^}]*moe\.param\s*=\s*\"([^\"]*)\"[^}]*\})?")


def _argument_names(text):
    """{function: [argument names]} from the func.func headers of the
    source, for error messages (`%x`, or the parameter's name)."""
    names = {}
    for m in _FUNC.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        header = text[m.end():i - 1]
        names[m.group(1)] = [a.group(2) or a.group(1) for a in _ARG.finditer(header)]
    return names


# ---------------------------------------------------------------------------
# Signatures: "(tensor<?x16xf32>, tensor<i64>) -> (tensor<?x16xf32>, tensor<f32>)"

_ELEMENT = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "f64": "float64",
            "i64": "int64", "i32": "int32", "i16": "int16", "i8": "int8", "i1": "bool"}


class TensorType:
    """A tensor type of a signature: shape (None for `?`) and element type."""

    def __init__(self, text):
        m = re.fullmatch(r"tensor<(.*)>", text.strip())
        if not m:
            raise Error(f"moe_mlir: cannot use the type {text!r} (tensors only)")
        parts = m.group(1).split("x")
        self.element = parts[-1]
        if self.element not in _ELEMENT:
            raise Error(f"moe_mlir: element type {self.element} has no torch dtype")
        self.shape = [None if p == "?" else int(p) for p in parts[:-1]]
        self.text = text.strip()
        self._dtype = None

    def torch_dtype(self):
        if self._dtype is None:  # looked up once: every call checks it
            self._dtype = getattr(_torch(), _ELEMENT[self.element])
        return self._dtype

    def __repr__(self):
        return self.text


def _split_top(text):
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += {"<": 1, "(": 1, ">": -1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return [s.strip() for s in out]


def _parse_signature(text):
    args, _, results = text.partition("->")
    args = args.strip()
    if not (args.startswith("(") and args.endswith(")")):
        raise Error(f"moe_mlir: cannot read the signature {text!r}")
    results = results.strip()
    if results.startswith("(") and results.endswith(")"):
        results = results[1:-1]
    return ([TensorType(t) for t in _split_top(args[1:-1])],
            [TensorType(t) for t in _split_top(results)])


def _parse_result_shapes(text, count):
    """moe_f_result_shapes(): `;` between results, `x` between sizes, `$i`
    for dims[i]."""
    shapes = text.split(";") if text else [""] * count
    if count == 0:
        return []
    if len(shapes) != count:
        raise Error(f"moe_mlir: result shapes {text!r} do not list {count} results")
    return [[("dim", int(s[1:])) if s.startswith("$") else ("size", int(s))
             for s in shape.split("x") if s] for shape in shapes]


# ---------------------------------------------------------------------------

_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                          ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64),
                          ctypes.c_void_p)
_TEXT = ctypes.CFUNCTYPE(ctypes.c_char_p)
_runtime = None


class Library:
    """A library written by moe-compile, loaded. `lib.NAME` (or lib["NAME"])
    is the Function of the exported @NAME; `lib.functions` lists them;
    `lib.path` is the file, `lib.from_cache` whether compile() found it in
    the cache, `lib.source_sha256` the SHA-256 (hex) of the MLIR it was
    compiled from."""

    def __init__(self, path, target, argument_names=None):
        global _runtime
        self.path, self.target = path, target
        if target == "cuda" and _runtime is None:
            # The library's RUNPATH is $ORIGIN (the cache folder): load the
            # runtime first, from this tree, so that the loader finds it.
            runtime = os.path.join(_paths.lib_dir(), "libMoECudaRuntime.so")
            _runtime = ctypes.CDLL(runtime, mode=ctypes.RTLD_GLOBAL)
        try:
            self._dll = ctypes.CDLL(path)
        except OSError as e:
            raise Error(f"moe_mlir: cannot load {path}: {e}") from None
        self._last_error = _TEXT(("moe_last_error", self._dll))
        # The SHA-256 of the source moe-compile compiled (None for a library
        # of a moe-compile without it).
        self.source_sha256 = (_TEXT(("moe_source_sha256", self._dll))().decode()
                              if hasattr(self._dll, "moe_source_sha256") else None)
        names = argument_names or {}
        self.functions = {}
        for name in self._exported_names(list(names)):
            own = names.get(name)
            primal = self.functions.get(name[:-4]) if name.endswith("_vjp") else None
            if own is None and primal is not None:  # f's arguments, then the cotangents
                own = names[primal.name] + ["cotangent of result %d" % i
                                            for i in range(len(primal.results))]
            self.functions[name] = Function(self, name, own)

    def _exported_names(self, candidates):
        """The functions of the source that the library exports (@f, and
        @f_vjp where moe-compile added it)."""
        out = []
        for name in candidates:
            for n in (name, name + "_vjp"):
                if n not in out and hasattr(self._dll, "moe_%s_signature" % n):
                    out.append(n)
        return out

    def last_error(self):
        return self._last_error().decode()

    def __getitem__(self, name):
        try:
            return self.functions[name]
        except KeyError:
            raise KeyError(f"{self.path} exports no @{name} (it has "
                           f"{', '.join('@' + n for n in self.functions) or 'none'})") from None

    def __getattr__(self, name):
        if name.startswith("_") or name not in self.__dict__.get("functions", {}):
            raise AttributeError(name)
        return self.functions[name]


class Function:
    """An exported function: call it with one torch tensor per argument (in
    order, parameters included); it returns the result tensor, or a tuple of
    them. Arguments are checked against the signature (dtype, shape with
    dynamic sizes, device, contiguity); results are allocated through torch
    (on CUDA: torch's allocator, on torch's current stream)."""

    def __init__(self, library, name, argument_names=None):
        self.library, self.name = library, name
        dll = library._dll
        self._entry = _ENTRY(("moe_" + name, dll))
        self.signature = _TEXT(("moe_%s_signature" % name, dll))().decode()
        self.arguments, self.results = _parse_signature(self.signature)
        self._result_shapes = _parse_result_shapes(
            _TEXT(("moe_%s_result_shapes" % name, dll))().decode(), len(self.results))
        # The arguments' names in the source (None where unknown).
        names = list(argument_names or [])
        self.argument_names = names if len(names) == len(self.arguments) else \
            [None] * len(self.arguments)

    def _what(self, i):
        n = self.argument_names[i]
        return f"@{self.name} argument {i}" + (f" ({n})" if n else "")

    def __call__(self, *args):
        torch = _torch()
        if len(args) != len(self.arguments):
            raise TypeError(f"@{self.name} takes {len(self.arguments)} tensors "
                            f"({self.signature}), {len(args)} given")
        cuda = self.library.target == "cuda"
        device = None
        dims = []
        for i, (a, ty) in enumerate(zip(args, self.arguments)):
            if not isinstance(a, torch.Tensor):
                raise TypeError(f"{self._what(i)}: a torch.Tensor is needed, not {type(a).__name__}")
            if a.dtype != ty.torch_dtype():
                raise TypeError(f"{self._what(i)}: dtype {a.dtype}, the function takes "
                                f"{ty.torch_dtype()} ({ty})")
            if len(a.shape) != len(ty.shape) or any(
                    s is not None and s != n for s, n in zip(ty.shape, a.shape)):
                raise ValueError(f"{self._what(i)}: shape {list(a.shape)}, the function takes {ty}")
            if cuda:
                if a.device.type != "cuda":
                    raise ValueError(f"{self._what(i)}: on {a.device}, this library "
                                     f"(target cuda) takes CUDA tensors")
                if device is None:
                    device = a.device
                elif a.device != device:
                    raise ValueError(f"{self._what(i)}: on {a.device}, the other "
                                     f"arguments on {device}")
            elif a.device.type != "cpu":
                raise ValueError(f"{self._what(i)}: on {a.device}, this library "
                                 f"(target cpu) takes CPU tensors")
            if not a.is_contiguous():
                raise ValueError(f"{self._what(i)}: not contiguous (strides {list(a.stride())}); "
                                 f"pass .contiguous()")
            dims += [n for s, n in zip(ty.shape, a.shape) if s is None]
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
        outs = []
        for ty, shape in zip(self.results, self._result_shapes):
            sizes = [dims[v] if k == "dim" else v for k, v in shape]
            outs.append(torch.empty(sizes, dtype=ty.torch_dtype(), device=device))
        arg_ptrs = (ctypes.c_void_p * max(1, len(args)))(*[a.data_ptr() for a in args])
        res_ptrs = (ctypes.c_void_p * max(1, len(outs)))(*[o.data_ptr() for o in outs])
        dim_arr = (ctypes.c_int64 * len(dims))(*dims) if dims else None
        stream = torch.cuda.current_stream(device).cuda_stream if cuda else None
        if self._entry(arg_ptrs, res_ptrs, dim_arr, stream) != 0:
            raise Error(self.library.last_error())
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __repr__(self):
        return f"<moe_mlir.Function @{self.name}: {self.signature}>"
