"""Lists the images of the CUDA fatbin embedded in a file: one line per
image, "<elf|ptx> sm_<arch>" (the fatbin container's documented-by-tools
layout: a 16-byte header {magic 0xBA55ED50, version, header size, size},
then entries {kind (1 PTX, 2 ELF), ..., header size, payload size, ...,
arch at byte 28})."""
import struct
import sys

data = open(sys.argv[1], "rb").read()
off = data.find(struct.pack("<I", 0xBA55ED50))
if off < 0:
    raise SystemExit("fatbin.py: no fatbin in " + sys.argv[1])
_, _, header_size, size = struct.unpack_from("<IHHQ", data, off)
p, end = off + header_size, off + header_size + size
while p < end:
    kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, p)
    arch = struct.unpack_from("<I", data, p + 28)[0]
    print({1: "ptx", 2: "elf"}.get(kind, "kind%d" % kind), "sm_%d" % arch)
    p += entry_header + payload
