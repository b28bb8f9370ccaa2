"""moe-run --fill-random's values, regenerated with torch (README.md, "GPU
check kit"; the generator is in `moe-run --help` and
tools/moe-run/RandomFill.h).

The kit ships, for each argument moe-run filled, its stream seed and scale
(moe-run --save-args writes them to args.json) instead of the values: element
i of a stream seeded with s is

    u1 = ((mix(s + (2i+1) G) >> 11) + 1) 2^-53,  u2 likewise with 2i+2,
    v  = float32(sqrt(-2 ln u1) cos(2 pi u2) * scale)

with splitmix64's mix and gamma G, rounded to the argument's dtype. torch
has no uint64 arithmetic: the 64-bit words are int64 tensors (additions and
multiplications wrap the same way), right shifts are masked to be logical.
The double log and cos of torch may differ from the C library's in the last
bit, which moves a float32 value by one unit in the last place about once in
5e8 elements; the kit compares a digest of the regenerated arguments with
the one prepare.sh recorded and reports any difference.
"""
import ctypes
import hashlib
import math

import torch

GAMMA = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
CHUNK = 1 << 22


def _signed(x):
    """A 64-bit word as the int64 with the same bits."""
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >= 1 << 63 else x


def _srl(z, s):
    """Logical right shift of int64 words."""
    return (z >> s) & ((1 << (64 - s)) - 1)


def _mix(z):
    z = (z ^ _srl(z, 30)) * _signed(MIX1)
    z = (z ^ _srl(z, 27)) * _signed(MIX2)
    return z ^ _srl(z, 31)


def _uniform(words):
    """(0, 1] from the top 53 bits, exactly as a double."""
    return (_srl(words, 11) + 1).double() * 2.0 ** -53


def values(stream, scale, n, device="cpu"):
    """The n float32 values of the stream seeded with `stream` (an int)."""
    out = torch.empty(n, dtype=torch.float32, device=device)
    seed = _signed(stream)
    gamma = _signed(GAMMA)
    for begin in range(0, n, CHUNK):
        i = torch.arange(begin, min(n, begin + CHUNK), dtype=torch.int64, device=device)
        j = 2 * i + 1
        u1 = _uniform(_mix(j * gamma + seed))
        u2 = _uniform(_mix((j + 1) * gamma + seed))
        z = torch.sqrt(-2.0 * torch.log(u1)) * torch.cos((2.0 * math.pi) * u2)
        out[begin:begin + i.numel()] = (z * scale).float()
    return out


def argument(entry, seed, device="cpu"):
    """One argument as args.json (moe-run --save-args) describes it, as a
    tensor of its dtype (bf16/f16 rounded to nearest even from float32, as
    moe-run rounds), or None when it was bound from a file."""
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16,
              "i32": torch.int32, "i64": torch.int64}
    shape = entry["shape"]
    dtype = dtypes[entry["dtype"]]
    if entry["from"] == "seed":  # integer arguments hold --seed
        value = _signed(seed)
        if dtype == torch.int32:  # truncated to 32 bits
            value = ((seed & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000
        return torch.full(shape, value, dtype=dtype, device=device)
    if entry["from"] != "fill-random":
        return None
    n = math.prod(shape)
    v = values(int(entry["stream"], 16), float(entry["scale"]), n, device)
    return v.reshape(shape).to(dtype)


def digest(tensor):
    """sha256 of the tensor's values as moe-run --save-args writes them
    (bf16 as float32, others in their dtype), C order, little-endian."""
    t = tensor.detach().to("cpu")
    if t.dtype == torch.bfloat16:
        t = t.float()
    t = t.contiguous()
    return hashlib.sha256(ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())).hexdigest()
