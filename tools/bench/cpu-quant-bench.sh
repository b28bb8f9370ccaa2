#!/usr/bin/env bash
# CPU benchmark of quantized expert weights (issue 25): bf16, FP8
# block-scaled and int4 group-quantized layers through moe-run at decode
# (T = 1, 16: several chained layers, so that every call reads its experts
# from memory) and prefill (T = 512), at the Qwen3-30B-A3B expert shape
# (E = 128, top-8, D = 2048, H = 768) and Mixtral's scaled to fit (E = 8,
# top-2, D = 1024, H = 3584), side by side in one run with the read
# bandwidth (numpy, when python3 has it). Prints ms per layer, the weight
# bytes read per second and their share of the bandwidth, and the FP8 and
# int4 times over the bf16 time; figures only, no pass/fail; run it on an
# idle machine.
#
# Usage: tools/bench/cpu-quant-bench.sh [--bin=DIR] [--python=PATH|none] [--quick] [--keep] [--mcpu=CPU] [--ggml=DIR]
#   --bin=DIR      the directory of moe-run (default: $MOE_BIN, else <repo>/build/bin)
#   --python=PATH  the python3 with numpy for the bandwidth ("none": skip it)
#   --quick        tiny shapes, few runs (a smoke test)
#   --keep         keep the generated .mlir files (prints where)
#   --mcpu=CPU     moe-run --mcpu=CPU (e.g. haswell: the AVX2 configuration)
#   --ggml=DIR     a ggml checkout built in DIR/build (a yardstick, never a
#                  dependency; tools/bench/README.md): also ggml's MUL_MAT_ID
#                  of the two expert GEMMs at the same shapes, q4_0 and q8_0
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${MOE_BIN:-$ROOT/build/bin}"
ARGS=()
for a in "$@"; do
  case "$a" in
    --bin=*) BIN="${a#*=}" ;;
    --quick | --keep | --python=* | --mcpu=* | --ggml=*) ARGS+=("$a") ;;
    -h | --help) sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cpu-quant-bench.sh: unknown argument $a" >&2; exit 1 ;;
  esac
done
if [ ! -x "$BIN/moe-run" ]; then
  echo "cpu-quant-bench.sh: no moe-run in $BIN (build first: scripts/build.sh, or pass --bin=DIR)" >&2
  exit 1
fi
PY="$(command -v python3 || echo /usr/bin/python3)"
exec "$PY" "$ROOT/tools/bench/cpu_quant_bench.py" --bin="$BIN" --root="$ROOT" "${ARGS[@]}"
