"""A stand-in for Triton on the CPU, for test/tools/gpu-kit/triton-anchor.test
only: enough of `triton` and `triton.language` to run the kit's anchor
kernels (tools/gpu-kit/triton_moe.py) program by program with torch ops, so
that their index arithmetic, masks and epilogues are checked against torch
on a machine without a GPU. A pointer is a flat view of a tensor plus int64
offsets; tl.load/tl.store gather and scatter under their masks; tl.dot
multiplies in float32. It measures nothing and is never used by the kit."""
from . import language  # noqa: F401


def cdiv(a, b):
    return (a + b - 1) // b


class _Launcher:
    def __init__(self, fn, grid):
        self.fn, self.grid = fn, grid

    def __call__(self, *args, **kwargs):
        kwargs.pop("num_warps", None)
        kwargs.pop("num_stages", None)
        args = [language._pointer(a) for a in args]
        grid = tuple(self.grid) + (1,) * (3 - len(self.grid))
        for z in range(grid[2]):
            for y in range(grid[1]):
                for x in range(grid[0]):
                    language._PROGRAM[:] = [x, y, z]
                    self.fn(*args, **kwargs)


class _Kernel:
    def __init__(self, fn):
        self.fn = fn

    def __getitem__(self, grid):
        return _Launcher(self.fn, grid)

    def __call__(self, *args, **kwargs):  # a @triton.jit helper called from a kernel
        return self.fn(*args, **kwargs)


def jit(fn):
    return _Kernel(fn)
