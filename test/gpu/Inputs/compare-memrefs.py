#!/usr/bin/env python3
"""Compares the numbers printed by printMemrefF32 in two files (the CPU path
and the emulated GPU path): same shapes, and every pair within an absolute
tolerance of atol + rtol * |reference|. Prints the largest difference."""
import argparse
import re
import sys

NUM = re.compile(r'[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)')


def memrefs(path):
    out = []
    for block in open(path).read().split('Unranked Memref')[1:]:
        head, _, data = block.partition('data =')
        sizes = re.search(r'sizes = \[([^\]]*)\]', head).group(1)
        out.append((sizes, [float(v) for v in NUM.findall(data)]))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument('reference')
    p.add_argument('actual')
    p.add_argument('--atol', type=float, default=1e-5)
    p.add_argument('--rtol', type=float, default=1e-4)
    a = p.parse_args()
    ref, act = memrefs(a.reference), memrefs(a.actual)
    if not ref or len(ref) != len(act):
        print(f'compare: {len(ref)} memrefs in the reference, {len(act)} in the result')
        return 1
    worst = 0.0
    for n, ((rs, rv), (as_, av)) in enumerate(zip(ref, act)):
        if rs != as_ or len(rv) != len(av):
            print(f'compare: memref {n}: sizes [{rs}] vs [{as_}]')
            return 1
        for i, (r, v) in enumerate(zip(rv, av)):
            d = abs(r - v)
            worst = max(worst, d)
            if not d <= a.atol + a.rtol * abs(r):
                print(f'compare: memref {n} element {i}: {r} vs {v}')
                return 1
    print(f'compare: OK, {sum(len(v) for _, v in ref)} values, max abs diff {worst:g}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
