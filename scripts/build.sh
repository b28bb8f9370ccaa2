#!/usr/bin/env bash
# Installs missing Debian packages, configures (once) and builds moe-mlir.
# Idempotent. Usage: scripts/build.sh [BUILD_DIR] [extra cmake args...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
shift || true

"$ROOT/scripts/setup-deps.sh"

if [ ! -f "$BUILD/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -G Ninja -S "$ROOT" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=/usr/bin/clang-22 \
    -DCMAKE_CXX_COMPILER=/usr/bin/clang++-22 \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    "$@"
fi
cmake --build "$BUILD" -j "$(nproc)"
