#!/usr/bin/env bash
# expect-error.sh COMMAND...
#
# Runs a moe-run (or moe-npy) command that must fail the way the tools
# promise: exit code 1 (not a crash), nothing on stdout, and exactly one line
# on stderr that starts with "<tool>: ". On success prints that line to
# stdout (for FileCheck); otherwise explains and exits 1.
tool=$(basename "$1")
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$@" >"$out" 2>"$err"
rc=$?
fail() { echo "expect-error: $*" >&2; echo "--- stdout" >&2; cat "$out" >&2
         echo "--- stderr" >&2; cat "$err" >&2; exit 1; }
[ "$rc" -eq 1 ] || fail "exit code $rc, expected 1"
[ -s "$out" ] && fail "stdout is not empty"
[ "$(wc -l <"$err")" -eq 1 ] || fail "stderr has $(wc -l <"$err") lines, expected 1"
grep -q "^$tool: " "$err" || fail "stderr does not start with '$tool: '"
cat "$err"
