"""moe_mlir with `import torch` failing (sys.modules["torch"] = None)."""
import sys

sys.modules["torch"] = None
import moe_mlir  # noqa: E402

lib = moe_mlir.compile(sys.argv[1])
print(f"compiled: {', '.join(lib.functions)}; from cache: {lib.from_cache}")
f = lib.functions["forward"]
print("signature:", f.signature)
try:
    f(None, None, None, None)
except ImportError as e:
    print("call: ImportError:", e)
try:
    import moe_mlir.torch  # noqa: F401
except ImportError as e:
    print("import moe_mlir.torch: ImportError:", e)
