#!/usr/bin/env bash
# The README's main command: installs what is missing, builds, and runs the
# main job over the spec example models.
#
# Until the CPU path lands (moe-run, issue 3), the main job compiles every
# example through moe-opt (parse + verify + print) and through the stock
# mlir-opt with the plugin, and prints one row per layer.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"

"$ROOT/scripts/build.sh" "$BUILD"

MOE_OPT="$BUILD/bin/moe-opt"
PLUGIN="$BUILD/lib/libMoEPlugin.so"
STOCK=/usr/lib/llvm-22/bin/mlir-opt

printf '%-16s %-12s %-58s %-22s %s\n' example op routing activation "input -> output"
for f in "$ROOT"/test/examples/*.mlir; do
  name="$(basename "$f" .mlir)"
  out="$("$MOE_OPT" "$f")"
  stock="$("$STOCK" --load-dialect-plugin="$PLUGIN" --load-pass-plugin="$PLUGIN" "$f")"
  [ "$out" = "$stock" ] \
    || { echo "main: $name prints differently through the stock mlir-opt plugin" >&2; exit 1; }
  printf '%s\n' "$out" | grep -E 'moe\.(soft_)?layer' | while IFS= read -r line; do
    op="$(printf '%s' "$line" | grep -oE 'moe\.(soft_)?layer' | head -1)"
    routing="$(printf '%s' "$line" | grep -oE 'routing = #moe\.[a-z_]+(<[^>]*>)?' | sed 's/routing = //' || true)"
    [ -n "$routing" ] || routing="(soft: $(printf '%s' "$line" | grep -oE 'slots\([^)]*\)' ))"
    act="$(printf '%s' "$line" | grep -oE '#moe\.activation<[a-z_]+>')"
    types="$(printf '%s' "$line" | sed -E 's/.*: \((tensor<[^>]*>).*\) -> \(?(tensor<[^>]*>).*/\1 -> \2/')"
    printf '%-16s %-12s %-58s %-22s %s\n' "$name" "$op" "$routing" "$act" "$types"
  done
done
