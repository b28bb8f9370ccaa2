"""triton.language for the CPU stand-in (see triton/__init__.py)."""
import torch

float32 = torch.float32
bfloat16 = torch.bfloat16
_PROGRAM = [0, 0, 0]


class constexpr:  # an annotation only
    pass


class _Type:
    def __init__(self, dtype):
        self.element_ty = dtype


class Pointer:
    def __init__(self, flat, offsets):
        self.flat, self.offsets = flat, offsets
        self.dtype = _Type(flat.dtype)

    def __add__(self, other):
        return Pointer(self.flat, self.offsets + other)

    __radd__ = __add__

    def __iadd__(self, other):
        return Pointer(self.flat, self.offsets + other)


def _pointer(a):
    if isinstance(a, torch.Tensor):
        assert a.is_contiguous(), "the stand-in takes contiguous tensors"
        return Pointer(a.view(-1), torch.zeros((), dtype=torch.int64))
    return a


def program_id(axis):
    return _PROGRAM[axis]


def arange(begin, end):
    return torch.arange(begin, end, dtype=torch.int64)


def zeros(shape, dtype):
    return torch.zeros(shape, dtype=dtype)


def cdiv(a, b):
    return (a + b - 1) // b


def minimum(a, b):
    return torch.minimum(torch.as_tensor(a), torch.as_tensor(b))


def exp(x):
    return torch.exp(x)


def _broadcast(ptr, mask):
    offsets = torch.as_tensor(ptr.offsets).long()
    if mask is None:
        mask = torch.ones((), dtype=torch.bool)
    offsets, mask = torch.broadcast_tensors(offsets, torch.as_tensor(mask))
    return offsets, mask


def load(ptr, mask=None, other=0.0):
    offsets, mask = _broadcast(ptr, mask)
    n = ptr.flat.numel()
    inside = (offsets >= 0) & (offsets < n)
    assert bool((inside | ~mask).all()), "a load outside its tensor under its mask"
    values = ptr.flat[offsets.clamp(0, n - 1)]
    return torch.where(mask, values, torch.as_tensor(other, dtype=values.dtype))


def store(ptr, value, mask=None):
    offsets, mask = _broadcast(ptr, mask)
    value = torch.as_tensor(value).to(ptr.flat.dtype).expand(offsets.shape)
    n = ptr.flat.numel()
    assert bool(((offsets >= 0) & (offsets < n) | ~mask).all()), "a store outside its tensor"
    ptr.flat[offsets[mask]] = value[mask]


def dot(a, b, acc=None, input_precision=None):
    product = a.float() @ b.float()
    return product if acc is None else acc + product
