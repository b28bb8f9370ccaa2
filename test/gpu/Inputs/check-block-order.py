#!/usr/bin/env python3
"""Checks the block orders of --moe-test-emulate-gpu (block-order option;
docs/gpu.md, "Block order in the emulation") from the arrival records of
test/gpu/emulate-block-order.mlir: each file holds the printMemrefI32 output
of two launches of the same grid, element L = the arrival index of the block
whose linear id is L. Arguments: the forward, reverse, shuffle seed=1,
shuffle seed=1 again and shuffle seed=2 runs. The shuffles are compared with
this file's own implementation of the documented permutation (Fisher-Yates
with splitmix64 swaps), written from docs/gpu.md, not from the pass."""
import re
import sys

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix64(z):
    z &= M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def documented_shuffle(n, seed, launch):
    """The linear block ids in the order they run."""
    key = mix64(seed + (launch + 1) * GOLDEN)
    perm = list(range(n))
    for i in range(n - 1, -1, -1):
        j = mix64(key + i * GOLDEN) % (i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def records(path):
    out = []
    for block in open(path).read().split('Unranked Memref')[1:]:
        _, _, data = block.partition('data =')
        out.append([int(v) for v in re.findall(r'-?\d+', data)])
    return out


def main():
    fwd, rev, s1, s1again, s2 = (records(p) for p in sys.argv[1:6])
    ok = True

    def check(cond, what):
        nonlocal ok
        print(('OK: ' if cond else 'FAIL: ') + what)
        ok &= cond

    n = len(fwd[0])
    ident = list(range(n))
    check(len(fwd) == 2 and all(r == ident for r in fwd), f'forward: arrival = linear id (n = {n})')
    check(all(r == ident[::-1] for r in rev), 'reverse: arrival = n - 1 - linear id')
    for name, runs, seed in (('seed=1', s1, 1), ('seed=2', s2, 2)):
        check(all(sorted(r) == ident for r in runs), f'shuffle {name}: every block once')
        check(all(r not in (ident, ident[::-1]) for r in runs), f'shuffle {name}: neither forward nor reverse')
        check(runs[0] != runs[1], f'shuffle {name}: the two launches differ')
        for launch, r in enumerate(runs):
            arrival = [0] * n
            for i, lin in enumerate(documented_shuffle(n, seed, launch)):
                arrival[lin] = i
            check(r == arrival, f'shuffle {name}: launch {launch} is the documented permutation')
    check(s1 == s1again, 'shuffle seed=1: the same on a second run')
    check(s1 != s2, 'shuffle: seeds 1 and 2 differ')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
