#!/usr/bin/env bash
# GPU check: on a machine with an NVIDIA GPU, builds moe-mlir, runs the GPU
# tests (lit REQUIRES: cuda-device / ptxas, and the CUDA runtime unit tests),
# then benchmarks the Mixtral-shaped layer per shape and prints, for each:
# milliseconds, achieved GB/s of expert-weight traffic, TFLOP/s, and beside
# them PyTorch's eager time on the same shapes when `import torch` works.
#
# Usage: tools/gpu-check.sh [OUT_DIR]     (logs and figures land in OUT_DIR)
# Environment: MOE_BENCH_REPEAT (default 20), MOE_BENCH_SHAPES (default
# "16 4096": the token counts, decode and prefill), MOE_BENCH_D/H/E/K (default
# 4096/14336/8/2).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/build/gpu-check}"
BUILD="$ROOT/build"
REPEAT="${MOE_BENCH_REPEAT:-20}"
SHAPES="${MOE_BENCH_SHAPES:-16 4096}"
D="${MOE_BENCH_D:-4096}" H="${MOE_BENCH_H:-14336}" E="${MOE_BENCH_E:-8}" K="${MOE_BENCH_K:-2}"
mkdir -p "$OUT"

log() { printf '%s\n' "$*" | tee -a "$OUT/summary.txt"; }
: > "$OUT/summary.txt"

log "== machine"
nvidia-smi -L 2>&1 | tee -a "$OUT/summary.txt" || log "nvidia-smi: not available"

log "== build"
if ! "$ROOT/scripts/build.sh" "$BUILD" > "$OUT/build.log" 2>&1; then
  log "build failed (see build.log)"; tail -20 "$OUT/build.log"; exit 1
fi

log "== tests"
/usr/lib/llvm-22/bin/lit -sv "$BUILD/test" > "$OUT/lit.log" 2>&1
log "lit: $(grep -aE '^(Total Discovered|  Passed|  Failed|  Unsupported)' "$OUT/lit.log" | tr -s ' ' | paste -sd' ')"
(cd "$BUILD" && ctest -R 'Cuda|Fake|NoDriver' --output-on-failure) > "$OUT/ctest-cuda.log" 2>&1
log "cuda runtime unit tests: $(grep -E 'tests passed|tests failed' "$OUT/ctest-cuda.log" | tail -1)"

log "== benchmark: D=$D H=$H E=$E k=$K swiglu f32, median of $REPEAT runs"
printf '%-8s %-6s %10s %12s %10s %14s\n' T device ms "GB/s(W)" TFLOP/s torch-eager-ms | tee -a "$OUT/summary.txt"
for T in $SHAPES; do
  model="$OUT/mixtral_T$T.mlir"
  "$ROOT/tools/bench/make-layer.sh" "$T" "$D" "$H" "$E" "$K" > "$model"
  run_log="$OUT/moe-run_T$T.log"
  "$BUILD/bin/moe-run" "$model" --device=cuda --fill-random --seed=1 --repeat="$REPEAT" > "$run_log" 2>&1
  ms="$(sed -nE 's/^median-ms: (.*)/\1/p' "$run_log")"
  torch_ms="$(python3 "$ROOT/tools/bench/torch_moe.py" "$T" "$D" "$H" "$E" "$K" "$REPEAT" 2> "$OUT/torch_T$T.log" || echo n/a)"
  if [ -z "$ms" ]; then
    printf '%-8s %-6s %10s\n' "$T" cuda "failed (see moe-run_T$T.log)" | tee -a "$OUT/summary.txt"
    continue
  fi
  # Expert weights touched: E (1 - (1 - k/E)^T) experts of (D*2H + H*D) f32 each.
  python3 - "$T" "$D" "$H" "$E" "$K" "$ms" "$torch_ms" <<'PY' | tee -a "$OUT/summary.txt"
import sys
T, D, H, E, K = map(int, sys.argv[1:6]); ms = float(sys.argv[6]); torch_ms = sys.argv[7]
experts = E * (1 - (1 - K / E) ** T)
weight_bytes = experts * (D * 2 * H + H * D) * 4
flops = 2 * T * D * E + 2 * T * K * (D * 2 * H + H * D) + 2 * T * K * H
print(f"{T:<8} {'cuda':<6} {ms:10.3f} {weight_bytes / (ms * 1e-3) / 1e9:12.1f} "
      f"{flops / (ms * 1e-3) / 1e12:10.2f} {torch_ms:>14}")
PY
done
log "logs: $OUT"
