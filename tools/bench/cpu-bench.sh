#!/usr/bin/env bash
# CPU benchmark: every spec example through moe-run on the CPU, side by side
# in one run: the compiled layer with the experts on all cores, and the same
# code on one core (--cpu-parallel=false) as the baseline. Prints median
# milliseconds and the ratio; figures only, no pass/fail. Run it on an idle
# machine.
#
# Usage: tools/bench/cpu-bench.sh [REPEAT]   (build first: scripts/build.sh)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$ROOT/build/bin"
REPEAT="${1:-20}"
printf '%-14s %12s %12s %9s\n' example parallel-ms serial-ms speedup
for f in "$ROOT"/test/examples/*.mlir; do
  name="$(basename "$f" .mlir)"
  par="$("$BIN/moe-run" "$f" --device=cpu --fill-random --seed=1 --repeat="$REPEAT" 2>/dev/null | sed -nE 's/^median-ms: //p')"
  ser="$("$BIN/moe-run" "$f" --device=cpu --cpu-parallel=false --fill-random --seed=1 --repeat="$REPEAT" 2>/dev/null | sed -nE 's/^median-ms: //p')"
  awk -v n="$name" -v p="$par" -v s="$ser" 'BEGIN { printf "%-14s %12.3f %12.3f %8.2fx\n", n, p, s, s / p }'
done
