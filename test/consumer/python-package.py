"""The installed moe_mlir: compiles FILE.mlir with the installed moe-compile
and lists the library's functions (no torch needed)."""
import sys

import moe_mlir

lib = moe_mlir.compile(sys.argv[1])
print("moe_mlir:", moe_mlir.tool("moe-compile"), sorted(lib.functions))
