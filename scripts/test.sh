#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every
# test (lit suites and C++ unit tests) through ctest, then the fuzz targets
# (tools/moe-fuzz) under ASan/UBSan for a short bounded time over their seed
# corpus (scripts/fuzz.sh --suite, in build-fuzz/). Idempotent. Fails when a
# test fails or a fuzz target has a finding.
#
# Environment:
#   MOE_TEST_FUZZ_SECONDS  seconds per fuzz target (default 60; 0 skips the
#                          fuzzing, for quick local runs only)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
FUZZ_SECONDS="${MOE_TEST_FUZZ_SECONDS:-60}"
case "$FUZZ_SECONDS" in
  ''|*[!0-9]*) echo "test.sh: MOE_TEST_FUZZ_SECONDS must be a number of seconds" >&2; exit 2 ;;
esac

"$ROOT/scripts/build.sh" "$BUILD"
status=0
(cd "$BUILD" && ctest --output-on-failure -j "$(nproc)") || status=$?

if [ "$FUZZ_SECONDS" -gt 0 ]; then
  # The seed writers (moe-npy, moe-ckpt-gen) come from the normal build.
  MOE_FUZZ_TOOLS="$BUILD/bin" "$ROOT/scripts/fuzz.sh" --suite "$FUZZ_SECONDS" \
    || { echo "test.sh: fuzzing failed (see above)" >&2; status=1; }
else
  echo "test.sh: fuzzing skipped (MOE_TEST_FUZZ_SECONDS=0)"
fi
exit "$status"
