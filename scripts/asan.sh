#!/usr/bin/env bash
# Builds moe-opt with AddressSanitizer + UBSan in build-asan/ and runs the
# dialect lit suites (valid, invalid and malformed IR) under it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build-asan"
"$ROOT/scripts/setup-deps.sh" libclang-rt-22-dev   # the sanitizer runtimes
"$ROOT/scripts/build.sh" "$BUILD" -DMOE_ENABLE_ASAN=ON -DMOE_BUILD_UNITTESTS=ON
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
/usr/lib/llvm-22/bin/lit -v "$BUILD/test/dialect"
(cd "$BUILD" && ctest --output-on-failure -R 'Tests$')
