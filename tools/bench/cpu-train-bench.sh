#!/usr/bin/env bash
# CPU training-step benchmark (issue 22): the forward + backward (f_vjp,
# --moe-generate-vjp) of a top-2-of-8 GELU moe.layer through moe-run on the
# CPU at the mid (T=512 D=512 H=2048), decode (T=16 D=1024 H=4096) and
# prefill (T=2048 D=1024 H=4096) shapes, side by side in one run with numpy
# sgemm (OpenBLAS, best OPENBLAS_CORETYPE) at the same per-expert GEMM shapes
# and PyTorch eager autograd of the same layer (when python3 can import
# torch); then the MOESART training step against the top-k step and bf16
# against f32 at prefill. Prints figures only, no pass/fail; run it on an
# idle machine (tools/bench/README.md describes every column).
#
# Usage: tools/bench/cpu-train-bench.sh [--bin=DIR] [--install-deps] [--python=PATH|none] [--quick]
#                                       [--mcpu=CPU]
#   --bin=DIR        the directory of moe-run (default: $MOE_BIN, else
#                    <repo>/build/bin)
#   --install-deps   first install python3-numpy, libopenblas0-pthread and
#                    python3-torch (scripts/setup-deps.sh; apt, root)
#   --python=PATH    the python3 for the numpy/torch yardsticks ("none":
#                    skip them)
#   --quick          one or a few timed runs per figure (a smoke test)
#   --mcpu=CPU       moe-run --mcpu=CPU (e.g. haswell: the AVX2
#                    configuration on an AVX-512 machine)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${MOE_BIN:-$ROOT/build/bin}"
ARGS=()
INSTALL=0
for a in "$@"; do
  case "$a" in
    --bin=*) BIN="${a#*=}" ;;
    --install-deps) INSTALL=1 ;;
    --quick | --python=* | --mcpu=*) ARGS+=("$a") ;;
    -h | --help) sed -n '2,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cpu-train-bench.sh: unknown argument $a" >&2; exit 1 ;;
  esac
done
if [ ! -x "$BIN/moe-run" ]; then
  echo "cpu-train-bench.sh: no moe-run in $BIN (build first: scripts/build.sh, or pass --bin=DIR)" >&2
  exit 1
fi
if [ "$INSTALL" = 1 ]; then
  "$ROOT/scripts/setup-deps.sh" python3-numpy libopenblas0-pthread python3-torch >&2
fi
PY="$(command -v python3 || echo /usr/bin/python3)"
exec "$PY" "$ROOT/tools/bench/cpu_train_bench.py" --bin="$BIN" --root="$ROOT" "${ARGS[@]}"
