#!/usr/bin/env python3
"""Extracts the PTX of every `#gpu.object<..., assembly = "...">` of a
gpu.binary printed by moe-opt (format=isa) and writes it to stdout (or -o).

MLIR prints string attributes with llvm::printEscapedString: `\\XX` (two hex
digits) for non-printable bytes and quotes, `\\\\` for a backslash; this
undoes it. Fails (exit 1) when the input holds no assembly."""
import argparse
import re
import sys


def extract(text):
    out = []
    for m in re.finditer(r'assembly\s*=\s*"', text):
        i, buf = m.end(), bytearray()
        while text[i] != '"':
            if text[i] == '\\':
                if text[i + 1] == '\\':  # llvm::printEscapedString: \\ is a backslash
                    buf.append(0x5C)
                    i += 2
                else:  # \XX: one byte in hex
                    buf.append(int(text[i + 1:i + 3], 16))
                    i += 3
            else:
                buf += text[i].encode()
                i += 1
        out.append(buf.decode())
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('input', nargs='?', help='moe-opt output (default: stdin)')
    parser.add_argument('-o', dest='output', help='PTX file (default: stdout)')
    args = parser.parse_args()
    text = open(args.input).read() if args.input else sys.stdin.read()
    ptx = extract(text)
    if not ptx:
        sys.stderr.write('extract-ptx: no gpu.object assembly found\n')
        return 1
    data = '\n'.join(ptx)
    if args.output:
        with open(args.output, 'w') as f:
            f.write(data)
    else:
        sys.stdout.write(data)
    return 0


if __name__ == '__main__':
    sys.exit(main())
