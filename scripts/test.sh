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
# The fuzz stage's instrumented build (build-fuzz/, scripts/fuzz.sh
# --build-only) runs beside the tests at the lowest CPU priority (nice 19):
# it takes the CPU time the tests leave idle (their waits, the suite's tail)
# and finishes after them; its output is printed when it is done. The seed
# writers (moe-npy, moe-ckpt-gen) come from the normal build.
fuzz_build=
if [ "$FUZZ_SECONDS" -gt 0 ]; then
  MOE_FUZZ_TOOLS="$BUILD/bin" nice -n 19 "$ROOT/scripts/fuzz.sh" --build-only \
    > "$BUILD/fuzz-build.log" 2>&1 &
  fuzz_build=$!
  trap '[ -z "$fuzz_build" ] || kill "$fuzz_build" 2>/dev/null || true' EXIT
fi
(cd "$BUILD" && ctest --output-on-failure -j "$(nproc)") || status=$?

if [ "$FUZZ_SECONDS" -gt 0 ]; then
  fuzz_status=0
  wait "$fuzz_build" || fuzz_status=$?
  fuzz_build=
  cat "$BUILD/fuzz-build.log"
  if [ "$fuzz_status" -ne 0 ]; then
    echo "test.sh: the fuzz targets' build failed (see above)" >&2
    status=1
  else
    MOE_FUZZ_TOOLS="$BUILD/bin" "$ROOT/scripts/fuzz.sh" --suite "$FUZZ_SECONDS" \
      || { echo "test.sh: fuzzing failed (see above)" >&2; status=1; }
  fi
else
  echo "test.sh: fuzzing skipped (MOE_TEST_FUZZ_SECONDS=0)"
fi
exit "$status"
