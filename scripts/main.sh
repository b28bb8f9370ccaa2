#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and runs every
# spec example model on the CPU with moe-run (seeded random weights), printing
# one row per example: routing, shapes, median milliseconds and checksum.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"

"$ROOT/scripts/build.sh" "$BUILD"

MOE_RUN="$BUILD/bin/moe-run"
REPEAT="${MOE_MAIN_REPEAT:-10}"

printf '%-14s %-68s %-42s %10s  %s\n' example routing "input -> output" median-ms checksum
for f in "$ROOT"/test/examples/*.mlir; do
  name="$(basename "$f" .mlir)"
  routing="$(grep -oE 'routing = #moe\.[a-z_]+(<[^>]*>)?' "$f" | sed 's/routing = //' | sort -u | paste -sd, - || true)"
  [ -n "$routing" ] || routing="soft (Phi $(grep -oE "%phi: tensor<[^>]*>" "$f" | grep -oE "[0-9x]+x" | sed "s/x$//"))"
  out="$("$MOE_RUN" "$f" --device=cpu --fill-random --seed=1 --repeat="$REPEAT" 2>&1)" \
    || { echo "main: moe-run failed on $name:" >&2; echo "$out" >&2; exit 1; }
  in_type="$(grep -oE 'func.func @[a-z_]+\(%x: tensor<[^>]*>' "$f" | grep -oE 'tensor<[^>]*>')"
  out_type="$(printf '%s\n' "$out" | sed -nE 's/^result #0: (tensor<[^>]*>).*/\1/p')"
  ms="$(printf '%s\n' "$out" | sed -nE 's/^median-ms: (.*)/\1/p')"
  sum="$(printf '%s\n' "$out" | sed -nE 's/^result #0: .* checksum: (sum=[^ ]*).*/\1/p')"
  printf '%-14s %-68s %-42s %10s  %s\n' "$name" "$routing" "$in_type -> $out_type" "$ms" "$sum"
done
