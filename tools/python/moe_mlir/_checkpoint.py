"""Parameters of a moe-import'ed layer from its Hugging Face checkpoint:
.safetensors files (one, or sharded with model.safetensors.index.json) read
through mmap, and the #moe.checkpoint<[names], transpose> rule of
docs/MoEDialect.md (per-expert `{e}` tensors stacked along a new leading
dimension, each tensor transposed with `transpose`, the tensors of one
expert concatenated along the last dimension, converted to the argument's
element type)."""
import json
import mmap
import os
import re
import warnings

import torch

_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16,
           "F64": torch.float64, "I64": torch.int64, "I32": torch.int32}


class Checkpoint:
    """The tensors of a checkpoint directory (or one .safetensors file) by
    name, memory-mapped."""

    def __init__(self, path):
        self.path = path
        if os.path.isdir(path):
            index = os.path.join(path, "model.safetensors.index.json")
            if os.path.exists(index):
                with open(index) as f:
                    weight_map = json.load(f)["weight_map"]
                files = sorted(set(weight_map.values()))
            else:
                files = sorted(n for n in os.listdir(path) if n.endswith(".safetensors"))
            files = [os.path.join(path, n) for n in files]
        else:
            files = [path]
        if not files:
            raise ValueError(f"{path}: no .safetensors file")
        self._where = {}
        for file in files:
            with open(file, "rb") as f:
                size = int.from_bytes(f.read(8), "little")
                header = json.loads(f.read(size))
                data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            for name, info in header.items():
                if name != "__metadata__":
                    self._where[name] = (file, data, 8 + size, info)

    def tensor(self, name):
        if name not in self._where:
            raise KeyError(f"{self.path}: no tensor {name!r}")
        file, data, base, info = self._where[name]
        if info["dtype"] not in _DTYPES:
            raise ValueError(f"{file}: tensor {name!r} has dtype {info['dtype']}, "
                             f"not one of {', '.join(_DTYPES)}")
        begin, end = info["data_offsets"]
        buf = memoryview(data)[base + begin:base + end]
        with warnings.catch_warnings():  # read-only: the values are copied before use
            warnings.simplefilter("ignore", UserWarning)
            t = torch.frombuffer(buf, dtype=_DTYPES[info["dtype"]]) if end > begin else \
                torch.empty(0, dtype=_DTYPES[info["dtype"]])
        return t.reshape(info["shape"])


_ARG = re.compile(r"%(\w+):\s*(tensor<[^>]*>)\s*\{moe\.param\s*=\s*"
                  r"(?:#moe\.checkpoint<\[(.*?)\](\s*,\s*transpose)?>|\"([^\"]*)\")\}", re.S)


def parameters(text, function):
    """[(ssa name, shape, element, [tensor names], transpose)] of the
    parameters of `function` in moe-import's output, in argument order."""
    m = re.search(r"func\.func @%s\((.*?)\)\s*->" % re.escape(function), text, re.S)
    if not m:
        raise ValueError(f"no function @{function} in moe-import's output")
    out = []
    for a in _ARG.finditer(m.group(1)):
        ssa, ty, names, transpose, plain = a.groups()
        parts = ty[len("tensor<"):-1].split("x")
        shape = [int(s) for s in parts[:-1]]
        names = [n.strip().strip('"') for n in names.split('",')] if names is not None else [plain]
        out.append((ssa, shape, parts[-1], names, bool(transpose)))
    return out


def assemble(ckpt, shape, dtype, names, transpose):
    """One parameter by the #moe.checkpoint rule, converted to `dtype` (the
    argument's element type as a torch dtype)."""
    per_expert = "{e}" in names[0]

    def one(e):
        parts = []
        for n in names:
            t = ckpt.tensor(n.replace("{e}", str(e)) if per_expert else n)
            if transpose:
                if t.dim() != 2:
                    raise ValueError(f"{n}: transpose needs a 2-D tensor, it is {list(t.shape)}")
                t = t.t()
            parts.append(t)
        return torch.cat(parts, dim=-1) if len(parts) > 1 else parts[0]

    value = torch.stack([one(e) for e in range(shape[0])]) if per_expert else one(None)
    if list(value.shape) != shape:
        raise ValueError(f"{', '.join(names)}: assembled shape {list(value.shape)}, "
                         f"the layer takes {shape}")
    return value.to(dtype).contiguous()
