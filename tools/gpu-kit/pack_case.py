"""Packs one correctness case of the GPU check kit (prepare.sh; Python's
standard library only, as on the build machine).

  python3 pack_case.py KIT_DIR CASE_DIR N_OUTPUTS

CASE_DIR holds moe-run --save-args's arg<I>.npy and args.json and the CPU
path's out<I>.npy. Prints the case's "args" and "expected" lists (JSON, paths
relative to KIT_DIR) after shrinking the folder:
  * an argument moe-run filled (args.json "from": "fill-random") larger than
    64 KiB, of a dtype fill_random.py makes (quantized weights' codes are
    always kept), is not kept: its entry is {"regen": <its args.json entry>,
    "sha256": <digest of the values as stored>}, regenerated on the GPU
    machine by fill_random.py and checked against the digest;
  * a float32 .npy whose values are all bfloat16 numbers (moe-run writes
    bf16 as exact f32) is stored as its upper 16 bits (<i2, NAME.bf16.npy):
    the same values in half the bytes (kit.py's read_npy views them as bf16);
  * a kept file still larger than 64 KiB (the expected results mostly: the
    training cases' weight gradients) is stored as NAME.npy.zs: its .npy
    header as is, then its body with the bytes of each element position
    gathered (all first bytes, all second bytes, ...) and zlib-compressed
    (kit.py's read_npy undoes both). Floats' sign and exponent bytes
    compress far better side by side: 41.6 MB of results took 33.0 MB so,
    36.4 MB with zlib alone (measured 2026-12-07).
"""
import array
import ast
import hashlib
import json
import os
import sys
import zlib

KEEP_BELOW = 64 * 1024
REGENERATED = {"f32", "bf16", "f16", "i32", "i64"}


def read_npy(path):
    """(header dict, body bytes) of a .npy file."""
    with open(path, "rb") as f:
        data = f.read()
    header, end = split_npy(path, data)
    return header, data[end:]


def split_npy(path, data):
    """(header dict, offset of the body) of a .npy file's bytes."""
    if data[:6] != b"\x93NUMPY":
        raise SystemExit(f"pack_case: {path}: not a .npy file")
    if data[6] == 1:
        hlen, start = int.from_bytes(data[8:10], "little"), 10
    else:
        hlen, start = int.from_bytes(data[8:12], "little"), 12
    return ast.literal_eval(data[start:start + hlen].decode("latin1")), start + hlen


def write_npy(path, descr, shape, body):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %r, }" % (descr, tuple(shape))
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1"))
        f.write(body)


def as_bf16_bits(path):
    """NAME.npy -> NAME.bf16.npy when it is <f4 holding only bf16 values."""
    header, body = read_npy(path)
    if header["descr"] != "<f4" or header["fortran_order"]:
        return path
    words = array.array("I")
    words.frombytes(body)
    if sys.byteorder != "little":
        words.byteswap()
    if any(w & 0xFFFF for w in words):
        return path
    halves = array.array("H", (w >> 16 for w in words))
    if sys.byteorder != "little":
        halves.byteswap()
    packed = path[:-len(".npy")] + ".bf16.npy"
    write_npy(packed, "<i2", tuple(header["shape"]), halves.tobytes())
    os.remove(path)
    return packed


def shuffled_zlib(path):
    """NAME.npy -> NAME.npy.zs when it is larger than KEEP_BELOW (see the
    module comment); returns the path kept."""
    if os.path.getsize(path) <= KEEP_BELOW:
        return path
    with open(path, "rb") as f:
        data = f.read()
    header, end = split_npy(path, data)
    size = {"<f4": 4, "<f2": 2, "<i2": 2, "<i4": 4, "<i8": 8}.get(header["descr"], 1)
    head, body = data[:end], data[end:]
    planes = b"".join(body[i::size] for i in range(size))
    packed = path + ".zs"
    with open(packed, "wb") as f:
        f.write(head + zlib.compress(planes, 6))
    os.remove(path)
    return packed


def main():
    kit, case_dir, n_out = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rel = os.path.relpath(case_dir, kit)
    with open(os.path.join(case_dir, "args.json")) as f:
        described = json.load(f)["arguments"]
    args = []
    for entry in described:
        path = os.path.join(case_dir, entry["file"])
        # fill_random.py regenerates float and integer streams; quantized
        # weights' codes (i4, f8E4M3FN) are always kept.
        if (entry["from"] == "fill-random" and entry["dtype"] in REGENERATED
                and os.path.getsize(path) > KEEP_BELOW):
            _, body = read_npy(path)
            args.append({"regen": entry, "sha256": hashlib.sha256(body).hexdigest()})
            os.remove(path)
        else:
            args.append(os.path.join(rel, os.path.basename(shuffled_zlib(as_bf16_bits(path)))))
    os.remove(os.path.join(case_dir, "args.json"))
    expected = [os.path.join(rel, os.path.basename(
                    shuffled_zlib(as_bf16_bits(os.path.join(case_dir, f"out{i}.npy")))))
                for i in range(n_out)]
    print(json.dumps({"args": args, "expected": expected}))


if __name__ == "__main__":
    main()
