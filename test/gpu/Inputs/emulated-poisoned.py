#!/usr/bin/env python3
"""docs/spec.md §3 "NaN and infinities" on the emulated GPU path, against the
CPU path: the function of an MLIR file (make-driver.py's data) runs on the
CPU path (--moe-cpu-pipeline=parallel=false) and through the emulated GPU
kernels under moe-test-runner, each on the clean data and then, in the same run
(make-driver.py --clean-first), on the data with the --poison of
make-driver.py (NaN or +-inf in a token's row, a router or an expert
weight); every result is printed as the bits of its f32 values.

  emulated-poisoned.py MLIR OUT_DIR --poison NAME:AT:VALUE [--form PASSES]
      [--dtype bf16|f16] [--dynamic T] --libs L --omp O --pipeline P

--libs: moe-test-runner's -shared-libs (%mlir_runner_libs), --omp: the fiber
OpenMP runtime of the emulation (%emulation_omp), --pipeline: the emulation
pipeline (%moe_emulate_gpu_pipeline; MOE_EMULATE_OPTIONS is passed through
the environment as by lit's shell); --form: moe-opt passes applied before
the GPU pipeline (e.g. "--moe-decompose --moe-fuse").

Checks, for every result:
  1. the poisoned GPU run against the poisoned CPU run: a NaN where the CPU
     path has a NaN, the same infinity where it has one, the finite values
     within compare-memrefs.py's bounds (f32: 1e-5 + 1e-4 |cpu|; --dtype:
     those of moe-ref compare);
  2. every slice the poison does not reach on the CPU path (a token's row:
     every index but the last; a scalar or a vector is one slice) is
     bit-identical between the clean and the poisoned GPU runs.
Prints one line per result: the slices the poison reached and how many
others are bit-identical; exits 1 on the first failure.
"""
import argparse
import math
import os
import re
import shlex
import struct
import subprocess
import sys

INT = re.compile(r'-?\d+')


def memrefs(path):
    out = []
    for block in open(path).read().split('Unranked Memref')[1:]:
        head, _, data = block.partition('data =')
        sizes = [int(v) for v in INT.findall(re.search(r'sizes = \[([^\]]*)\]', head).group(1))]
        bits = [int(v) & 0xFFFFFFFF for v in INT.findall(data)]
        out.append((sizes, bits))
    return out


def value(bits):
    return struct.unpack('<f', struct.pack('<I', bits))[0]


def rows(sizes, bits):
    width = sizes[-1] if len(sizes) >= 2 else max(len(bits), 1)
    return [tuple(bits[i:i + width]) for i in range(0, len(bits), width)] or [()]


def run(cmd, stdin=None):
    r = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if r.returncode != 0:
        print('emulated-poisoned: %s failed (exit %d): %s' % (
            os.path.basename(cmd[0]), r.returncode, r.stderr.strip()[-2000:]))
        sys.exit(1)
    return r.stdout


def outputs(a):
    """The outputs: CPU clean, CPU poisoned, GPU clean, GPU poisoned."""
    here = os.path.dirname(os.path.abspath(__file__))
    os.makedirs(a.out, exist_ok=True)
    files = []
    drv = [sys.executable, os.path.join(here, 'make-driver.py'), a.mlir,
           '--dynamic', str(a.dynamic), '--print-bits', '--clean-first']
    for p in a.poison:
        drv += ['--poison', p]
    driver = run(drv)
    for device in ('cpu', 'gpu'):
        text = driver
        if device == 'cpu':
            lowered = run(['moe-opt', '-', '--moe-cpu-pipeline=parallel=false'], text)
            libs = a.libs
        else:
            if a.form:
                text = run(['moe-opt', '-'] + shlex.split(a.form), text)
            pipeline = a.pipeline.replace('${MOE_EMULATE_OPTIONS:-}',
                                          os.environ.get('MOE_EMULATE_OPTIONS', ''))
            lowered = run(['moe-opt', '-', '--pass-pipeline=' + pipeline], text)
            libs = a.libs + ',' + a.omp
        out = run(['moe-test-runner', '-e', 'main', '-entry-point-result=void',
                   '-shared-libs=' + libs], lowered)
        # The clean call's memrefs, then the poisoned call's.
        blocks = out.split('Unranked Memref')
        half = (len(blocks) - 1) // 2
        for kind, part in (('clean', blocks[1:1 + half]), ('bad', blocks[1 + half:])):
            name = os.path.join(a.out, '%s_%s.txt' % (device, kind))
            with open(name, 'w') as f:
                f.write(''.join('Unranked Memref' + b for b in part))
            files.append(name)
    return files


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument('mlir')
    p.add_argument('out')
    p.add_argument('--poison', action='append', required=True)
    p.add_argument('--form', default='')
    p.add_argument('--dynamic', type=int, default=37)
    p.add_argument('--libs', required=True)
    p.add_argument('--omp', required=True)
    p.add_argument('--pipeline', required=True)
    p.add_argument('--dtype', choices=['f32', 'bf16', 'f16'], default='f32')
    a = p.parse_args()
    u = {'f32': 0.0, 'bf16': 2.0**-8, 'f16': 2.0**-11}[a.dtype]
    rtol = max(1e-4, 4 * u)
    runs = [memrefs(f) for f in outputs(a)]
    if not runs[0] or any(len(r) != len(runs[0]) for r in runs):
        print('emulated-poisoned: the runs print %s memrefs' % [len(r) for r in runs])
        return 1
    for n, results in enumerate(zip(*runs)):
        sizes = results[0][0]
        if any(s != sizes or len(b) != len(results[0][1]) for s, b in results):
            print('emulated-poisoned: memref %d: sizes %s' % (n, [s for s, _ in results]))
            return 1
        cpu, gpu = results[1][1], results[3][1]
        finite = [abs(value(c)) for c in cpu if math.isfinite(value(c))]
        atol = 1e-5 + 2 * u * max(finite, default=0.0)
        nonfinite = 0
        for i, (c, g) in enumerate(zip(cpu, gpu)):
            cv, gv = value(c), value(g)
            if math.isnan(cv) or math.isnan(gv) or math.isinf(cv) or math.isinf(gv):
                same = (math.isnan(cv) and math.isnan(gv)) or cv == gv
                if not same:
                    print('memref %d element %d: cpu %r, gpu %r' % (n, i, cv, gv))
                    return 1
                nonfinite += 1
            elif not abs(cv - gv) <= atol + rtol * abs(cv):
                print('memref %d element %d: cpu %r, gpu %r' % (n, i, cv, gv))
                return 1
        cc, cb, gc, gb = (rows(sizes, b) for _, b in results)
        reached = [i for i in range(len(cc)) if cc[i] != cb[i]]
        others = [i for i in range(len(cc)) if cc[i] == cb[i]]
        differ = [i for i in others if gc[i] != gb[i]]
        if differ:
            print('memref %d: rows %s changed on the GPU, which the poison does not reach'
                  % (n, differ[:8]))
            return 1
        print('memref %d %s: as the CPU path (%d non-finite); reached %s; %d others '
              'bit-identical' % (n, sizes, nonfinite, reached if len(reached) <= 8 else
                                 '%d rows' % len(reached), len(others)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
