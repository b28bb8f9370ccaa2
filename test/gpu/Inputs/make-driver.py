#!/usr/bin/env python3
"""Appends a `@main` to an MLIR file that holds one public function (a spec
example): every argument gets deterministic data (sin((i*cols + j) * freq)
* scale, computed in f32 and rounded to the argument's element type with
arith.truncf), dynamic dimensions get --dynamic, i64 seeds a constant, and
every result is extended to f32 and printed with printMemrefF32, so that the
CPU path and the emulated GPU path can run the same file under moe-test-runner
and be compared with compare-memrefs.py.

Scales: 1 for the first argument (the tokens) and a rank-0 f32 (Soft MoE's
scale), 1/sqrt(fan-in) for weights (rank 3: dim 1, rank 2: dim 0), 0.1 for
rank-1 biases. With --round-through bf16|f16 the f32 data of f32 arguments
is first rounded to that type and extended back: an f32 function then sees
exactly the values its bf16/f16 variant sees (the CPU reference of a layer
the CPU path lowers in f32 only).

--poison NAME:AT:VALUE (repeatable; docs/spec.md §3 "NaN and infinities")
sets elements of the argument %NAME to VALUE (nan, inf or -inf) after the
data is made (before rounding to a narrower type): AT is a flat index, or rR:
token R of the first argument (the tokens, [T, D] or [G, M, D]), slice R of
another argument's first dimension (an expert's weights). --print-bits
prints every result as the bit patterns of its f32 values (printMemrefI32),
so that runs can be compared bit for bit (compare-poisoned.py).
--scale NAME:FACTOR (repeatable) multiplies the data of the argument %NAME
by FACTOR (a gradient's cotangent far from 1, say), in every driven function
that has one.
--dump=binary writes the results with moeTestDumpF32/I32
(test/lib/MemrefDump.cpp, in %mlir_runner_libs: a header line and the raw
words) instead of printMemrefF32/I32's text, which compare-memrefs.py also
reads and which is slow to print and parse for millions of values.
Quantized weights (#moe.quant): an i4 argument gets the codes floor((s + 1)
* 7.999) of its sine values s, an f8E4M3FN one the E4M3 codes of
magnitude floor(|s| * 119.99) (never NaN) with the sign of s, or the NaN
code S.1111.111 where --poison put a NaN; scales and zero points are
ordinary f32 and i4 arguments.
--function NAME drives that public function instead of the first one (a
gradient @f_vjp that --moe-generate-vjp added next to @f); a file that moe-opt
printed (`module { ... }`) gets its @main inside the module. --clean-first (with --poison) calls the function twice, first on the
clean data, then on the poisoned data (one compiled module for both runs of
emulated-poisoned.py). --function may
be repeated, as NAME or NAME:DYNAMIC (that call's --dynamic): @main then
calls each in turn, each with its own data (made as for a driver of that
function alone), and prints each call's results before the next call, so
several functions compiled as one module are checked in one run; with
--groups-out FILE it writes `NAME COUNT` per call (the number of results
it prints), for compare-memrefs.py --groups."""
import argparse
import math
import re
import sys

ARG = re.compile(r'%([A-Za-z0-9_]+)\s*:\s*tensor<([^>]*)>')


def parse(text, function=None):
    fname = re.escape(function) if function else r'[A-Za-z0-9_]+'
    m = re.search(r'func\.func\s+@(' + fname + r')\s*\((.*?)\)\s*->\s*\(?(.*?)\)?\s*\{',
                  text, re.S)
    if not m:
        sys.exit('make-driver: no public function found')
    name, args, results = m.group(1), m.group(2), m.group(3)
    params = [(n, t) for n, t in ARG.findall(args)]
    outs = re.findall(r'tensor<([^>]*)>', results)
    return name, params, outs


def split(t):
    parts = t.split('x')
    return parts[:-1], parts[-1]


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument('input')
    p.add_argument('--dynamic', type=int, default=37)
    p.add_argument('--round-through', choices=['bf16', 'f16'])
    p.add_argument('--poison', action='append', default=[])
    p.add_argument('--print-bits', action='store_true')
    p.add_argument('--dump', choices=['text', 'binary'], default='text')
    p.add_argument('--function', action='append', default=[])
    p.add_argument('--groups-out')
    p.add_argument('--clean-first', action='store_true')
    p.add_argument('--scale', action='append', default=[])
    a = p.parse_args()
    text = open(a.input).read()
    # moe-opt's output wraps the functions in `module { ... }`: @main goes
    # into the same module.
    stripped = text.strip()
    if stripped.startswith('module {') and stripped.endswith('}'):
        text = stripped[len('module {'):-1]
    calls = []
    for item in a.function or [None]:
        fn, _, dyn = (item or '').partition(':')
        calls.append((fn or None, int(dyn) if dyn else a.dynamic))
    if len(calls) > 1 and a.poison:
        sys.exit('make-driver: --poison drives one function')
    if a.scale:
        # Every --scale names a parameter of some driven function.
        names = set()
        for call in calls:
            names.update(n for n, _ in parse(text, call[0])[1])
        for item in a.scale:
            if item.partition(':')[0] not in names:
                sys.exit(f'make-driver: bad --scale {item}')
    if a.clean_first:
        if not a.poison:
            sys.exit('make-driver: --clean-first needs --poison')
        calls = [(fn, dyn, False) for fn, dyn in calls] + [(fn, dyn, True) for fn, dyn in calls]
    else:
        calls = [(fn, dyn, True) for fn, dyn in calls]
    printer = 'moeTestDump' if a.dump == 'binary' else 'printMemref'
    lines = [f'func.func private @{printer}F32(memref<*xf32>)',
             f'func.func private @{printer}I32(memref<*xi32>)', '',
             'func.func @main() {']
    groups = []
    for k, (fn, dynamic, poisoned) in enumerate(calls):
        name, params, outs = parse(text, fn)
        body = call_lines(a, name, params, outs, dynamic, printer,
                          a.poison if poisoned else [])
        groups.append(f'{name}{"" if dynamic == a.dynamic else f":{dynamic}"} {len(outs)}')
        if len(calls) > 1:
            # Each call's top-level values get their own names (the names
            # inside tensor.generate regions are local to them).
            body = [TOP.sub(lambda m: f'%k{k}_{m.group(1)}', l) for l in body]
        lines += body
    lines += ['  return', '}']
    sys.stdout.write(text + '\n' + '\n'.join(lines) + '\n')
    if a.groups_out:
        with open(a.groups_out, 'w') as f:
            f.write('\n'.join(groups) + '\n')


# The codes of quantized weights (#moe.quant), made inside the generator
# from the sine value %sn in [-1, 1]: i4 codes 0..15 (floor((sn + 1) *
# 7.999)); FP8 E4M3 codes of magnitude 0..119 (never the NaN 127) with the
# sine's sign.
CODES = {
    'i4': ['    %cq0 = arith.constant 1.0 : f32',
           '    %cq1 = arith.addf %sn, %cq0 : f32',
           '    %cq2 = arith.constant 7.999 : f32',
           '    %cq3 = arith.mulf %cq1, %cq2 : f32',
           '    %cq4 = arith.fptoui %cq3 : f32 to i32',
           '    %code = arith.trunci %cq4 : i32 to i4'],
    'f8E4M3FN': ['    %cq0 = math.absf %sn : f32',
                 '    %cq1 = arith.constant 119.99 : f32',
                 '    %cq2 = arith.mulf %cq0, %cq1 : f32',
                 '    %cq3 = arith.fptoui %cq2 : f32 to i8',
                 '    %cq4 = arith.constant 0.0 : f32',
                 '    %cq5 = arith.cmpf olt, %sn, %cq4 : f32',
                 '    %cq6 = arith.constant -128 : i8',
                 '    %cq7 = arith.constant 0 : i8',
                 '    %cq8 = arith.select %cq5, %cq6, %cq7 : i8',
                 '    %cq9 = arith.ori %cq3, %cq8 : i8',
                 # A NaN (--poison) becomes the NaN code S.1111.111.
                 '    %cqn = arith.cmpf uno, {v}, {v} : f32',
                 '    %cqm = arith.constant 127 : i8',
                 '    %cqp = arith.select %cqn, %cqm, %cq9 : i8',
                 '    %code = arith.bitcast %cqp : i8 to f8E4M3FN'],
}

TOP = re.compile(r'%(s\d+_\d+|[gftrecaxyub]\d+|ib\d+)\b')


def call_lines(a, name, params, outs, dynamic, printer, poison):
    """The lines of @main that make the data of the function `name` (its
    parameters and results as parse() returns them; with the --poison items
    `poison`), call it and print its results."""
    poisons = {}
    for item in poison:
        pname, at, value = item.split(':')
        bits = {'nan': '0x7FC00000', 'inf': '0x7F800000', '-inf': '0xFF800000'}.get(value)
        index = [i for i, (n, _) in enumerate(params) if n == pname]
        if bits is None or not index:
            sys.exit(f'make-driver: bad --poison {item}')
        poisons.setdefault(index[0], []).append((at, bits))
    factors = {}
    for item in a.scale:
        pname, _, factor = item.partition(':')
        factors[pname] = float(factor)
    lines = []
    vals = []
    for i, (pname, t) in enumerate(params):
        dims, elt = split(t)
        if elt == 'i64':
            lines.append(f'  %a{i} = arith.constant dense<1234567> : tensor<i64>')
            vals.append((f'%a{i}', f'tensor<{t}>'))
            continue
        shape = [dynamic if d == '?' else int(d) for d in dims]
        if i == 0 or len(shape) == 0:
            scale = 1.0
        elif len(shape) == 3:
            scale = 1.0 / math.sqrt(shape[1])
        elif len(shape) == 2:
            scale = 1.0 / math.sqrt(shape[0])
        else:
            scale = 0.1
        scale *= factors.get(pname, 1.0)
        freq = 0.0371 + 0.0917 * i
        static = 'x'.join(str(s) for s in shape)
        f32t = f'tensor<{static + "x" if shape else ""}f32>'
        if not shape:
            lines.append(f'  %f{i} = arith.constant dense<{scale}> : tensor<f32>')
        else:
            n = len(shape)
            ivs = ', '.join(f'%i{d}' for d in range(n))
            sizes = ', '.join(f'%s{i}_{d}' for d in range(n))
            for d, s in enumerate(shape):
                lines.append(f'  %s{i}_{d} = arith.constant {s} : index')
            lines.append(f'  %g{i} = tensor.generate {sizes} {{')
            lines.append(f'  ^bb0({", ".join(f"%i{d}: index" for d in range(n))}):')
            lin = '%i0'
            for d in range(1, n):
                lines.append(f'    %m{d} = arith.muli {lin}, %s{i}_{d} : index')
                lines.append(f'    %l{d} = arith.addi %m{d}, %i{d} : index')
                lin = f'%l{d}'
            lines += [f'    %li = arith.index_cast {lin} : index to i64',
                      '    %fl = arith.sitofp %li : i64 to f32',
                      f'    %fr = arith.constant {freq} : f32',
                      '    %ph = arith.mulf %fl, %fr : f32',
                      '    %sn = math.sin %ph : f32',
                      f'    %sc = arith.constant {scale} : f32',
                      '    %v0 = arith.mulf %sn, %sc : f32']
            v = '%v0'
            count = math.prod(shape)
            for n, (at, bits) in enumerate(poisons.get(i, [])):
                # The flat range [first, first + size) gets the value.
                if at.startswith('r'):
                    size = shape[-1] if i == 0 else count // shape[0]
                    first = int(at[1:]) * size
                else:
                    first, size = int(at), 1
                if not 0 <= first < count:
                    sys.exit(f'make-driver: --poison {at} outside {shape}')
                lines += [f'    %pa{n} = arith.constant {first} : i64',
                          f'    %pb{n} = arith.constant {first + size} : i64',
                          f'    %pc{n} = arith.cmpi sge, %li, %pa{n} : i64',
                          f'    %pd{n} = arith.cmpi slt, %li, %pb{n} : i64',
                          f'    %pe{n} = arith.andi %pc{n}, %pd{n} : i1',
                          f'    %pv{n} = arith.constant {bits} : f32',
                          f'    %v{n + 1} = arith.select %pe{n}, %pv{n}, {v} : f32']
                v = f'%v{n + 1}'
            gelt = 'f32'
            if elt in CODES:
                # Quantized weights' codes from the value's sine.
                lines += [l.format(v=v) for l in CODES[elt]]
                v, gelt = '%code', elt
            dyn = "x".join("?" for _ in shape)
            lines += [f'    tensor.yield {v} : {gelt}',
                      f'  }} : tensor<{dyn}x{gelt}>',
                      f'  %f{i} = tensor.cast %g{i} : tensor<{dyn}x{gelt}> to '
                      f'tensor<{static}x{gelt}>']
        v = f'%f{i}'
        if elt in CODES:
            pass
        elif elt != 'f32':
            lines.append(f'  %t{i} = arith.truncf {v} : {f32t} to {f32t[:-4]}{elt}>')
            v = f'%t{i}'
        elif a.round_through and shape:
            rt = a.round_through
            lines.append(f'  %r{i} = arith.truncf {v} : {f32t} to {f32t[:-4]}{rt}>')
            lines.append(f'  %e{i} = arith.extf %r{i} : {f32t[:-4]}{rt}> to {f32t}')
            v = f'%e{i}'
        stype = f'tensor<{static + "x" if shape else ""}{elt}>'
        if stype != f'tensor<{t}>':
            lines.append(f'  %c{i} = tensor.cast {v} : {stype} to tensor<{t}>')
            v = f'%c{i}'
        vals.append((v, f'tensor<{t}>'))
    res = ', '.join(f'%y{j}' for j in range(len(outs)))
    lines.append(f'  {res} = func.call @{name}({", ".join(v for v, _ in vals)}) : '
                 f'({", ".join(t for _, t in vals)}) -> ({", ".join(f"tensor<{o}>" for o in outs)})')
    for j, o in enumerate(outs):
        dims, elt = split(o)
        ty = f'tensor<{o}>'
        v = f'%y{j}'
        if elt != 'f32':
            f32ty = f'tensor<{"x".join(dims) + "x" if dims else ""}f32>'
            lines.append(f'  %x{j} = arith.extf {v} : {ty} to {f32ty}')
            v, ty = f'%x{j}', f32ty
        elt = 'f32'
        if a.print_bits:
            ity = ty[:-4] + 'i32>'
            lines.append(f'  %ib{j} = arith.bitcast {v} : {ty} to {ity}')
            v, ty, elt = f'%ib{j}', ity, 'i32'
        mty = 'memref' + ty[len('tensor'):]
        lines.append(f'  %b{j} = bufferization.to_buffer {v} : {ty} to {mty}')
        lines.append(f'  %u{j} = memref.cast %b{j} : {mty} to memref<*x{elt}>')
        lines.append(f'  func.call @{printer}{elt.upper()}(%u{j}) : (memref<*x{elt}>) -> ()')
    return lines


if __name__ == '__main__':
    main()
