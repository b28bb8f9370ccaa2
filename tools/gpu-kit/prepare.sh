#!/usr/bin/env bash
# The prepare step of the GPU check kit (README.md, "GPU check kit"): on the
# build machine, makes one folder that a GPU machine with no LLVM, no MLIR and
# no network can run (tools/gpu-kit/run.sh inside it):
#   lib/          libMoECudaRuntime.so (the moe-compile libraries load it)
#   cases/NAME/   for each spec example (test/examples), the MOESART gate
#                 case and the bf16 prefill cases (wgmma at sm_90a, 64- and
#                 128-row tiles): layer.so and fused.so (moe-compile --target=cuda of
#                 the example and of its --moe-decompose --moe-fuse form),
#                 the arguments (argI.npy, seeded by moe-run --fill-random)
#                 and the CPU path's results (outI.npy, moe-run --device=cpu)
#   bench/        the Mixtral-shaped layer in bf16 and f32 (any token count),
#                 and (cuda) the bf16 layer with split-K forced to S = 1, 2,
#                 4, 8, 16 (decode variants); the weights are generated on
#                 the GPU machine from a seed
#   kit.py, triton_moe.py, run.sh, manifest.json
# and checks that the folder stays under 60 MiB.
#
# Note for the first sm_90a run: the wgmma kernels keep one wgmma group in
# flight per stage (kWgmmaGroupsInFlight = 1, lowering/gpu/MmaGemm.h; an
# extra barrier per stage). If the bf16 prefill rows (prefill_bf16, the
# Mixtral layer at T >= 128) fall short, compare with a kit prepared from a
# build with kWgmmaGroupsInFlight = 0 (every stage's wgmmas retired before
# the next loads, as before; run the wgmma emulation tests on that build).
#
# Usage: tools/gpu-kit/prepare.sh [KIT_DIR]   (default: build-gpukit, ignored
#        by git; the build directory is $MOE_BUILD, default build)
# Environment: MOE_KIT_CHIP (default sm_90a: the H100/H200 class; sm_80 for
#              A100), MOE_KIT_SEED (default 1), MOE_KIT_TARGET (default
#              cuda; cpu makes a dry-run kit of cpu-target libraries that
#              kit.py runs on the build machine with torch on the CPU,
#              correctness only).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
KIT="${1:-$ROOT/build-gpukit}"
BUILD="${MOE_BUILD:-$ROOT/build}"
CHIP="${MOE_KIT_CHIP:-sm_90a}"
SEED="${MOE_KIT_SEED:-1}"
TARGET="${MOE_KIT_TARGET:-cuda}"
case "$TARGET" in cuda|cpu) ;; *) echo "prepare: MOE_KIT_TARGET must be cuda or cpu" >&2; exit 1;; esac
LIMIT=$((60 * 1024 * 1024))

# MOE_KIT_NO_BUILD=1: use the build as it is (tests run this script).
if [ "${MOE_KIT_NO_BUILD:-0}" != 1 ]; then
  "$ROOT/scripts/build.sh" "$BUILD" > /dev/null
fi
BIN="$BUILD/bin"
for tool in moe-opt moe-run moe-compile; do
  [ -x "$BIN/$tool" ] || { echo "prepare: $BIN/$tool is missing" >&2; exit 1; }
done

rm -rf "$KIT"
mkdir -p "$KIT/lib" "$KIT/cases" "$KIT/bench"
cp -L "$BUILD/lib/libMoECudaRuntime.so" "$KIT/lib/"
cp "$ROOT/tools/gpu-kit/kit.py" "$ROOT/tools/gpu-kit/triton_moe.py" \
   "$ROOT/tools/gpu-kit/run.sh" "$KIT/"

compile() { # SRC OUT
  if [ "$TARGET" = cuda ]; then
    "$BIN/moe-compile" "$1" -o "$2" --target=cuda --chip="$CHIP"
  else
    "$BIN/moe-compile" "$1" -o "$2" --target=cpu
  fi
}

CASES_JSON=()
add_case() { # NAME FILE
  local name="$1" src="$2" dir="$KIT/cases/$1"
  mkdir -p "$dir"
  local entry
  entry="$(sed -n 's/^func\.func @\([A-Za-z0-9_]*\).*/\1/p' "$src" | head -1)"
  # The number of results: one checksum line each.
  local n
  n="$("$BIN/moe-run" "$src" --device=cpu --fill-random --seed="$SEED" \
        --dynamic-size=37 | grep -c '^result #')"
  local outs=() expected=()
  for ((i = 0; i < n; i++)); do
    outs+=("--output=$dir/out$i.npy")
    expected+=("\"cases/$name/out$i.npy\"")
  done
  "$BIN/moe-run" "$src" --device=cpu --fill-random --seed="$SEED" \
    --dynamic-size=37 --save-args="$dir" "${outs[@]}" > /dev/null
  local args=() a
  for a in "$dir"/arg*.npy; do args+=("$a"); done
  local nargs=${#args[@]} arglist=() j
  for ((j = 0; j < nargs; j++)); do arglist+=("\"cases/$name/arg$j.npy\""); done
  "$BIN/moe-opt" "$src" --moe-decompose --moe-fuse -o "$dir/fused.mlir"
  local form input why
  for form in layer fused; do
    input="$src"; [ "$form" = fused ] && input="$dir/fused.mlir"
    # A case the target cannot compile (e.g. a host matmul on a layer result on
    # cuda) is listed with moe-compile's one-line reason; kit.py reports it.
    why=""
    if ! compile "$input" "$dir/$form.so" 2> "$dir/$form.err"; then
      why="$(head -1 "$dir/$form.err" | sed 's/\\/\\\\/g; s/"/\\"/g')"
      echo "prepare: $name ($form) not compiled: $why" >&2
    fi
    rm -f "$dir/$form.err"
    CASES_JSON+=("{\"name\": \"$name\", \"form\": \"$form\", \"entry\": \"$entry\", \"lib\": \"cases/$name/$form.so\", \"not_compiled\": \"$why\", \"args\": [$(IFS=,; echo "${arglist[*]}")], \"expected\": [$(IFS=,; echo "${expected[*]}")]}")
  done
}

for src in "$ROOT"/test/examples/*.mlir "$ROOT/tools/gpu-kit/cases/moesart_gate.mlir" \
           "$ROOT/tools/gpu-kit/cases/prefill_bf16.mlir" \
           "$ROOT/tools/gpu-kit/cases/prefill_big_bf16.mlir"; do
  name="$(basename "$src" .mlir)"
  echo "prepare: $name"
  add_case "$name" "$src"
done

for dt in bf16 f32; do
  echo "prepare: bench mixtral $dt"
  compile "$ROOT/tools/gpu-kit/cases/mixtral_$dt.mlir" "$KIT/bench/mixtral_$dt.so"
done
# Decode variants of the bf16 layer (cuda only): split-K of the 16-row GEMMs
# forced to S slices (docs/gpu.md, "Split-K at decode"; the default library
# chooses S from the shape), timed by kit.py at T = 1 and 16.
VARIANTS_JSON=()
if [ "$TARGET" = cuda ]; then
  for s in 1 2 4 8 16; do
    echo "prepare: bench mixtral bf16 decode-split-k=$s"
    "$BIN/moe-compile" "$ROOT/tools/gpu-kit/cases/mixtral_bf16.mlir" \
      -o "$KIT/bench/mixtral_bf16_sk$s.so" --target=cuda --chip="$CHIP" --decode-split-k=$s
    VARIANTS_JSON+=("\"split-k=$s\": \"bench/mixtral_bf16_sk$s.so\"")
  done
fi
# sm_90a: the bf16 layer again with the 64-row wgmma tiles only
# (--big-tile-rows=0), so that one run compares them with the 128-row tiles
# (two consumer warpgroups) that the default takes at T*k/E >= 128.
TILE_VARIANTS_JSON=""
if [ "$TARGET" = cuda ] && [ "$CHIP" = sm_90a ]; then
  echo "prepare: bench mixtral bf16, 64-row tiles"
  "$BIN/moe-compile" "$ROOT/tools/gpu-kit/cases/mixtral_bf16.mlir" \
    -o "$KIT/bench/mixtral_bf16_m64.so" --target=cuda --chip="$CHIP" --big-tile-rows=0
  TILE_VARIANTS_JSON="{\"name\": \"bf16 64-row tiles\", \"dtype\": \"bf16\", \"lib\": \"bench/mixtral_bf16_m64.so\", \"tokens\": [1024, 4096]}"
fi

commit="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
{
  echo "{"
  echo "  \"target\": \"$TARGET\", \"chip\": \"$CHIP\", \"commit\": \"$commit\", \"seed\": $SEED,"
  echo "  \"cases\": ["
  for ((i = 0; i < ${#CASES_JSON[@]}; i++)); do
    sep=","; [ $i -eq $((${#CASES_JSON[@]} - 1)) ] && sep=""
    echo "    ${CASES_JSON[$i]}$sep"
  done
  echo "  ],"
  echo "  \"bench\": {\"entry\": \"mixtral\", \"D\": 4096, \"H\": 14336, \"E\": 8, \"k\": 2,"
  echo "            \"tokens\": [1, 16, 128, 1024, 4096], \"dtypes\": [\"bf16\", \"f32\"],"
  echo "            \"libs\": {\"bf16\": \"bench/mixtral_bf16.so\", \"f32\": \"bench/mixtral_f32.so\"},"
  echo "            \"decode_tokens\": [1, 16],"
  echo "            \"variants\": [$TILE_VARIANTS_JSON],"
  echo "            \"decode_variants\": {$(IFS=,; echo "${VARIANTS_JSON[*]}")}}"
  echo "}"
} > "$KIT/manifest.json"
python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$KIT/manifest.json"

size="$(du -sb "$KIT" | cut -f1)"
echo "prepare: $KIT holds $((size / 1024)) KiB (limit 61440 KiB), chip $CHIP, commit $commit"
if [ "$size" -gt "$LIMIT" ]; then
  echo "prepare: the kit is larger than 60 MiB" >&2
  exit 1
fi
