"""Raw little-endian f32 files for the C example of docs/aot.md (no NumPy).

  raw.py from-npy IN.npy OUT.f32            (f32 .npy, C order)
  raw.py from-safetensors IN.safetensors NAME OUT.f32   (F32 tensor)
  raw.py to-npy IN.f32 SHAPE OUT.npy        (SHAPE like 32x256)
"""
import ast
import json
import struct
import sys


def npy_payload(path):
    data = open(path, "rb").read()
    assert data[:6] == b"\x93NUMPY", path
    major = data[6]
    if major == 1:
        hlen = struct.unpack_from("<H", data, 8)[0]
        start = 10
    else:
        hlen = struct.unpack_from("<I", data, 8)[0]
        start = 12
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    assert header["descr"] == "<f4" and not header["fortran_order"], header
    return data[start + hlen:]


def main(argv):
    cmd = argv[1]
    if cmd == "from-npy":
        open(argv[3], "wb").write(npy_payload(argv[2]))
    elif cmd == "from-safetensors":
        data = open(argv[2], "rb").read()
        size = struct.unpack_from("<Q", data, 0)[0]
        header = json.loads(data[8:8 + size])
        info = header[argv[3]]
        assert info["dtype"] == "F32", info
        begin, end = info["data_offsets"]
        open(argv[4], "wb").write(data[8 + size + begin:8 + size + end])
    elif cmd == "to-npy":
        payload = open(argv[2], "rb").read()
        shape = tuple(int(d) for d in argv[3].split("x"))
        header = "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }" % (shape,)
        header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
        with open(argv[4], "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
            f.write(payload)
    else:
        raise SystemExit("raw.py: unknown command " + cmd)


main(sys.argv)
