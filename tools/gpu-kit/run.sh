#!/usr/bin/env bash
# The run step of the GPU check kit, on the GPU machine: needs only this
# folder, bash, python3 with torch (triton for the anchor) and the NVIDIA
# driver. Usage: bash run.sh [OUT_DIR [--only=correctness|bench]]
# (OUT_DIR default: ./out). Writes
# OUT_DIR/summary.txt (the table) and OUT_DIR/run.log; exit 1 when a
# correctness case fails. Bounded by MOE_KIT_TIMEOUT seconds (default 360).
set -uo pipefail
KIT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-$KIT/out}"
[ $# -gt 0 ] && shift
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$KIT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
  echo "== machine"
  nvidia-smi -L 2>&1 || echo "nvidia-smi: not available"
  python3 -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1
} | tee "$OUT/run.log"
timeout "${MOE_KIT_TIMEOUT:-360}" python3 "$KIT/kit.py" "$KIT" "$OUT" "$@" 2>&1 | tee -a "$OUT/run.log"
status=${PIPESTATUS[0]}
[ "$status" -eq 124 ] && echo "run.sh: timed out after ${MOE_KIT_TIMEOUT:-360} s" | tee -a "$OUT/run.log"
exit "$status"
