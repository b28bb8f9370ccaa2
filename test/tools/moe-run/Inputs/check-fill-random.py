"""Independent check of moe-run's documented --fill-random generator (see
`moe-run --help`): splitmix64 seeded with --seed gives one output per
argument (argument #i takes output #i+1), which seeds that argument's own
splitmix64 stream; element j is sqrt(-2 ln u1) cos(2 pi u2) with u1, u2 from
outputs 2j+1 and 2j+2 of that stream ((x >> 11) + 1) * 2^-53, times the
scale, rounded to f32. Compares sampled elements (both sides of the 65536-
element chunks moe-run fills in parallel) with the .npy files exactly.

usage: check-fill-random.py SEED SCALE0 FILE0.npy [SCALE1 FILE1.npy ...]
       check-fill-random.py --args-json SEED DIR/args.json SCALE0 [SCALE1 ...]
(the second form: --save-args's args.json records, for argument #i, the
stream seed the generator gives it and the scale given here, and its shape
matches its file's.)
"""
import json
import math
import struct
import sys

MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def output(seed, n):
    """The n-th output (1-based) of a splitmix64 generator seeded with seed."""
    return mix((seed + n * GAMMA) & MASK)


def element(stream, j, scale):
    u1 = ((output(stream, 2 * j + 1) >> 11) + 1) * 2.0 ** -53
    u2 = ((output(stream, 2 * j + 2) >> 11) + 1) * 2.0 ** -53
    v = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2) * scale
    return struct.unpack("<f", struct.pack("<f", v))[0]


def read_f32(path):
    data = open(path, "rb").read()
    hlen = int.from_bytes(data[8:10], "little")
    body = data[10 + hlen:]
    return body


def check_json():
    seed, path, scales = int(sys.argv[2]), sys.argv[3], [float(x) for x in sys.argv[4:]]
    entries = json.load(open(path))["arguments"]
    if len(entries) != len(scales):
        sys.exit(f"{path}: {len(entries)} arguments, expected {len(scales)}")
    for i, (entry, scale) in enumerate(zip(entries, scales)):
        want = output(seed, i + 1)
        if entry["from"] != "fill-random" or int(entry["stream"], 16) != want:
            sys.exit(f"{path}: argument #{i}: {entry} does not record stream {want:#x}")
        if entry["scale"] != scale:
            sys.exit(f"{path}: argument #{i}: scale {entry['scale']!r}, expected {scale!r}")
        if entry["file"] != f"arg{i}.npy":
            sys.exit(f"{path}: argument #{i}: file {entry['file']}")
    print(f"args.json: {len(entries)} arguments record the documented streams and scales")


def main():
    if sys.argv[1] == "--args-json":
        return check_json()
    seed = int(sys.argv[1])
    pairs = sys.argv[2:]
    checked = 0
    for i in range(0, len(pairs), 2):
        scale, path = float(pairs[i]), pairs[i + 1]
        body = read_f32(path)
        n = len(body) // 4
        stream = output(seed, i // 2 + 1)
        for j in sorted({0, 1, 65535, 65536, 65537, 131071, 131072, n // 2, n - 1}):
            if j >= n:
                continue
            got = struct.unpack_from("<f", body, 4 * j)[0]
            want = element(stream, j, scale)
            if got != want:
                sys.exit(f"{path}: element {j} is {got!r}, the documented generator gives {want!r}")
            checked += 1
    print(f"fill-random: {checked} elements match the documented generator")


if __name__ == "__main__":
    main()
