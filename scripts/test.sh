#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every
# test (lit suites and C++ unit tests) through ctest. Idempotent.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"

"$ROOT/scripts/build.sh" "$BUILD"
cd "$BUILD"
ctest --output-on-failure -j "$(nproc)"
