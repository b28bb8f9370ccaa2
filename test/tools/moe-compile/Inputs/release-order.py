"""Checks a fake CUDA driver trace (MOE_FAKE_CUDA_TRACE) for memory given
back to the driver while work that may use it is still queued.

  release-order.py TRACE

Work is queued by a launch, an asynchronous copy or set; it is known to be
finished only after cuCtxSynchronize (cuStreamSynchronize finishes one
stream, which the trace does not name, so it does not count). A cuMemFree
while work is queued is an error. Prints the number of frees checked."""
import sys

WORK = ("cuLaunchKernel", "cuLaunchKernelEx", "cuMemcpyAsync", "cuMemcpyHtoDAsync",
        "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync", "cuMemsetD32Async",
        "cuMemsetD16Async", "cuMemsetD8Async")

queued = None  # the line of the oldest unfinished work
frees = 0
for number, line in enumerate(open(sys.argv[1]), 1):
    symbol = line.split()[0] if line.strip() else ""
    if symbol.startswith(WORK):
        queued = queued or number
    elif symbol == "cuCtxSynchronize":
        queued = None
    elif symbol.startswith("cuMemFree"):
        frees += 1
        if queued:
            print(f"line {number}: {symbol} while the work queued at line {queued} "
                  "may still use the memory")
            sys.exit(1)
print(f"frees: {frees}, none before the work queued ahead of it finished")
