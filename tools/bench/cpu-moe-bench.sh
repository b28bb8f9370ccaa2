#!/usr/bin/env bash
# CPU MoE benchmark (issue 9): top-2-of-8 GELU moe.layer through moe-run on
# the CPU, side by side in one run with the machine's own yardsticks: numpy
# sgemm (OpenBLAS, best OPENBLAS_CORETYPE) at the same per-expert GEMM
# shapes, the read bandwidth (decode floor), PyTorch eager (when python3 can
# import torch) and the compile+JIT time of a 32-layer model. Prints one
# table, figures only, no pass/fail; run it on an idle machine
# (tools/bench/README.md describes every column).
#
# Usage: tools/bench/cpu-moe-bench.sh [--bin=DIR] [--install-deps] [--python=PATH|none] [--quick] [--keep]
#                                     [--mcpu=CPU] [--blas-core=TYPE]
#   --bin=DIR        the directory of moe-run (default: $MOE_BIN, else
#                    <repo>/build/bin)
#   --install-deps   first install python3-numpy and libopenblas0-pthread
#                    (scripts/setup-deps.sh; apt, root); without numpy the
#                    sgemm and bandwidth columns print n/a
#   --python=PATH    the python3 for the numpy/torch yardsticks (default: the
#                    first of $MOE_BENCH_PYTHON, python3, /usr/bin/python3
#                    that imports numpy, and likewise torch; "none": skip them)
#   --quick          one or a few timed runs per figure (a smoke test)
#   --keep           keep the generated .mlir/.npy files (prints where)
#   --mcpu=CPU       moe-run --mcpu=CPU: code and #moe.cpu_config for that
#                    CPU (e.g. haswell: the AVX2 configuration, measurable on
#                    an AVX-512 machine)
#   --blas-core=TYPE probe only this OPENBLAS_CORETYPE (e.g. Haswell beside
#                    --mcpu=haswell)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${MOE_BIN:-$ROOT/build/bin}"
ARGS=()
INSTALL=0
for a in "$@"; do
  case "$a" in
    --bin=*) BIN="${a#*=}" ;;
    --install-deps) INSTALL=1 ;;
    --quick | --keep | --python=* | --mcpu=* | --blas-core=*) ARGS+=("$a") ;;
    -h | --help) sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cpu-moe-bench.sh: unknown argument $a" >&2; exit 1 ;;
  esac
done
if [ ! -x "$BIN/moe-run" ]; then
  echo "cpu-moe-bench.sh: no moe-run in $BIN (build first: scripts/build.sh, or pass --bin=DIR)" >&2
  exit 1
fi
if [ "$INSTALL" = 1 ]; then
  "$ROOT/scripts/setup-deps.sh" python3-numpy libopenblas0-pthread >&2
fi
PY="$(command -v python3 || echo /usr/bin/python3)"
exec "$PY" "$ROOT/tools/bench/cpu_moe_bench.py" --bin="$BIN" --root="$ROOT" "${ARGS[@]}"
