#!/usr/bin/env bash
# Expert parallelism benchmark (issue 12, docs/expert-parallelism.md): a
# top-2-of-8 GELU layer (f32, no biases) at T=2048, D=1024, H=4096 made SPMD
# by --moe-shard-experts and run by mpirun with 1 and 2 ranks
# (moe-run --fill-random --repeat=N: one warm-up, then the median of N
# runs), plus the share of the 2-rank time spent in MPI calls, measured by a
# PMPI shim (tools/bench/mpi_time.c, built with mpicc, LD_PRELOADed into the
# ranks; the time in MPI includes waiting for the peer). Prints figures
# only, no pass/fail; run it on an idle machine (the ranks share the cores:
# on a 2-core machine each rank gets one core, the 1-rank run both).
#
# Usage: tools/bench/ep-bench.sh [--bin=DIR] [--repeat=N] [T D H E K]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="${MOE_BIN:-$ROOT/build/bin}"
REPEAT=5
POS=()
for a in "$@"; do
  case "$a" in
    --bin=*) BIN="${a#*=}" ;;
    --repeat=*) REPEAT="${a#*=}" ;;
    -*) echo "ep-bench.sh: unknown option $a" >&2; exit 1 ;;
    *) POS+=("$a") ;;
  esac
done
if [ ${#POS[@]} -ne 0 ] && [ ${#POS[@]} -ne 5 ]; then
  echo "usage: ep-bench.sh [--bin=DIR] [--repeat=N] [T D H E K]" >&2
  exit 1
fi
T=${POS[0]:-2048} D=${POS[1]:-1024} H=${POS[2]:-4096} E=${POS[3]:-8} K=${POS[4]:-2}
for tool in mpirun mpicc; do
  command -v $tool >/dev/null || { echo "ep-bench.sh: $tool not found (scripts/setup-deps.sh installs OpenMPI)" >&2; exit 1; }
done
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none
        --mca btl self,vader --mca btl_vader_single_copy_mechanism none)
mpicc -O2 -shared -fPIC "$ROOT/tools/bench/mpi_time.c" -o "$TMP/libmpitime.so"

"$ROOT/tools/bench/make-layer.sh" --act=gelu --dynamic "$T" "$D" "$H" "$E" "$K" > "$TMP/layer.mlir"
echo "ep-bench: top-$K-of-$E gelu f32, T=$T D=$D H=$H, --repeat=$REPEAT; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %12s %14s %10s\n' ranks median-ms mpi-ms/run comm-share
for N in 1 2; do
  "$BIN/moe-opt" "$TMP/layer.mlir" --moe-shard-experts="ranks=$N" -o "$TMP/ep$N.mlir"
  "${MPIRUN[@]}" -np "$N" -x LD_PRELOAD="$TMP/libmpitime.so" \
    "$BIN/moe-run" "$TMP/ep$N.mlir" --device=cpu --fill-random --seed=1 \
    --dynamic-size="$T" --repeat="$REPEAT" > "$TMP/out$N.txt" 2> "$TMP/err$N.txt"
  median=$(sed -n 's/^median-ms: //p' "$TMP/out$N.txt")
  # MPI seconds of the slowest rank, over the warm-up and the timed runs.
  mpi=$(awk '/^mpi-seconds/ { if ($3 > m) m = $3 } END { printf "%.3f", m * 1000 }' "$TMP/err$N.txt")
  per=$(awk -v m="$mpi" -v r="$REPEAT" 'BEGIN { printf "%.3f", m / (r + 1) }')
  share=$(awk -v p="$per" -v t="$median" 'BEGIN { printf "%.1f%%", 100 * p / t }')
  printf '%-6s %12s %14s %10s\n' "$N" "$median" "$per" "$share"
done
echo "ep-bench: load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
