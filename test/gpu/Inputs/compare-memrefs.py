#!/usr/bin/env python3
"""Compares the numbers printed by printMemrefF32 in two files (the CPU path
and the emulated GPU path), or written by moeTestDumpF32 (make-driver.py
--dump=binary: a `moe-dump f32 sizes=[...]` line, the raw words, a newline,
per memref; test/lib/MemrefDump.cpp): same shapes, and every pair within an absolute
tolerance of atol + rtol * |reference|. Prints the largest difference.

--dtype bf16|f16 uses the bounds of `moe-ref compare --dtype` (derived in
test/reference/MoEReference.h): with u the type's unit roundoff (2^-8 for
bf16, 2^-11 for f16), rtol = 4u (two ulps) and atol = 2u * max|reference|
of each memref (one ulp of its largest value), for results rounded to that
type once at the end after f32 computations that may round h (or a Soft MoE
slot input) to the adjacent value of the type.

--groups FILE (written by make-driver.py --groups-out when one @main calls
several functions): lines `NAME COUNT`, the memrefs of each call in order;
each group is compared and reported on its own (`== NAME` then its
`compare:` line), and the status is 1 if any group fails."""
import argparse
import math
import re
import sys
import warnings

try:  # numpy parses and compares ~5x faster; the plain loops below without it
    import numpy as np
except ImportError:
    np = None

BLANK = str.maketrans('[],', '   ')
NUM = re.compile(r'[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)')


def dumps(data):
    """The memrefs of a moeTestDump file: [(sizes text, values)]."""
    out, at = [], 0
    while at < len(data):
        end = data.index(b'\n', at)
        m = re.fullmatch(rb'moe-dump (f32|i32) sizes=\[([^\]]*)\]', data[at:end])
        if not m:
            sys.exit(f'compare: not a moe-dump header at byte {at}')
        sizes = m.group(2).decode()
        n = math.prod(int(d) for d in sizes.replace(',', ' ').split())
        raw = data[end + 1:end + 1 + 4 * n]
        if len(raw) != 4 * n:
            sys.exit('compare: a moe-dump memref ends early')
        if np is not None:
            values = np.frombuffer(raw, dtype=np.float32 if m.group(1) == b'f32' else np.int32)
            values = values.astype(np.float64)
        else:
            import array
            values = array.array('f' if m.group(1) == b'f32' else 'i', raw).tolist()
        out.append((sizes, values))
        at = end + 1 + 4 * n + 1  # the newline after the words
    return out


def memrefs(path):
    with open(path, 'rb') as f:
        data = f.read()
    if data.startswith(b'moe-dump '):
        return dumps(data)
    out = []
    for block in data.decode().split('Unranked Memref')[1:]:
        head, _, data = block.partition('data =')
        sizes = re.search(r'sizes = \[([^\]]*)\]', head).group(1)
        if np is not None:
            with warnings.catch_warnings():
                warnings.simplefilter('ignore', DeprecationWarning)
                values = np.fromstring(data.translate(BLANK), sep=' ')
            dims = [int(d) for d in sizes.replace(',', ' ').split()]
            if values.size != math.prod(dims):  # text numpy could not read
                values = np.array([float(v) for v in NUM.findall(data)])
        else:
            values = [float(v) for v in NUM.findall(data)]
        out.append((sizes, values))
    return out


def max_abs(rv):
    """max |r| over the values that are not NaN (0 for none)."""
    if np is not None:
        return float(np.max(np.abs(rv), initial=0.0, where=~np.isnan(rv)))
    return max((abs(r) for r in rv if r == r), default=0.0)


def first_failure(rv, av, atol, rtol):
    """(index of the first pair out of tolerance or None, max |r - v|)."""
    if np is not None:
        d = np.abs(rv - av)
        bad = ~(d <= atol + rtol * np.abs(rv))  # NaN anywhere fails
        worst = float(np.max(d, initial=0.0, where=~np.isnan(d)))
        return (int(np.argmax(bad)) if bad.any() else None), worst
    worst = 0.0
    for i, (r, v) in enumerate(zip(rv, av)):
        d = abs(r - v)
        worst = max(worst, d)
        if not d <= atol + rtol * abs(r):
            return i, worst
    return None, worst


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument('reference')
    p.add_argument('actual')
    p.add_argument('--atol', type=float, default=1e-5)
    p.add_argument('--rtol', type=float, default=1e-4)
    p.add_argument('--dtype', choices=['f32', 'bf16', 'f16'], default='f32')
    p.add_argument('--groups')
    a = p.parse_args()
    u = {'f32': 0.0, 'bf16': 2.0**-8, 'f16': 2.0**-11}[a.dtype]
    if u:
        a.rtol = max(a.rtol, 4 * u)
    ref, act = memrefs(a.reference), memrefs(a.actual)
    if not ref or len(ref) != len(act):
        print(f'compare: {len(ref)} memrefs in the reference, {len(act)} in the result')
        return 1
    if not a.groups:
        return compare(ref, act, a, u)
    groups = [l.split() for l in open(a.groups).read().splitlines() if l.strip()]
    if sum(int(c) for _, c in groups) != len(ref):
        print(f'compare: --groups lists {sum(int(c) for _, c in groups)} memrefs, '
              f'the files hold {len(ref)}')
        return 1
    status, at = 0, 0
    for name, count in groups:
        print(f'== {name}')
        status |= compare(ref[at:at + int(count)], act[at:at + int(count)], a, u, at)
        at += int(count)
    return status


def compare(ref, act, a, u, first=0):
    """Compares the memrefs `ref` and `act` (numbered from `first`)."""
    worst = 0.0
    for n, ((rs, rv), (as_, av)) in enumerate(zip(ref, act), first):
        if rs != as_ or len(rv) != len(av):
            print(f'compare: memref {n}: sizes [{rs}] vs [{as_}]')
            return 1
        atol = a.atol + 2 * u * max_abs(rv)
        i, w = first_failure(rv, av, atol, a.rtol)
        worst = max(worst, w)
        if i is not None:
            print(f'compare: memref {n} element {i}: {float(rv[i])} vs {float(av[i])}')
            return 1
    print(f'compare: OK, {sum(len(v) for _, v in ref)} values, max abs diff {worst:g}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
