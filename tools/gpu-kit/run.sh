#!/usr/bin/env bash
# The run step of the GPU check kit, on the GPU machine: needs only this
# folder, bash, python3 with torch (triton for the anchor) and the NVIDIA
# driver.
#
# Usage: bash run.sh [OUT_DIR [--only=correctness|bench]]   (OUT_DIR default: ./out)
#
# Writes OUT_DIR/summary.txt (rewritten after every case or benchmark group,
# so a kill still leaves the tables so far, the failures and the skipped
# groups) and OUT_DIR/run.log (everything, with the workers' own output).
# Every case and group runs in a worker process under a watchdog: a crash, a
# sticky CUDA error or a hang fails that case only (its one-line reason in
# the summary) and a fresh worker takes the rest. Exit status 1 when a
# library, a case or a group failed or a case was skipped.
#
# Environment: MOE_KIT_TIMEOUT (seconds, default 360): the whole run's
# budget; kit.py plans within it (groups that would exceed it are skipped)
# and this script stops it 15 s after it as a last resort.
# MOE_KIT_PYTHON: the Python with torch (default python3).
# MOE_KIT_INJECT (tests only; kit.py's docstring).
set -uo pipefail
KIT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-$KIT/out}"
[ $# -gt 0 ] && shift
mkdir -p "$OUT"
BUDGET="${MOE_KIT_TIMEOUT:-360}"
export LD_LIBRARY_PATH="$KIT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
  echo "== machine"
  timeout 20 nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total,power.limit \
    --format=csv 2>&1 || echo "nvidia-smi: not available"
} | tee "$OUT/run.log"
timeout -k 5 "$((${BUDGET%.*} + 15))" "${MOE_KIT_PYTHON:-python3}" "$KIT/kit.py" "$KIT" "$OUT" "$@" 2>&1 | tee -a "$OUT/run.log"
status=${PIPESTATUS[0]}
[ "$status" -eq 124 ] && echo "run.sh: stopped after ${BUDGET} s + 15 s; OUT/summary.txt has what was done" | tee -a "$OUT/run.log"
exit "$status"
