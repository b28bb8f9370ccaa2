#!/usr/bin/env bash
# The prepare step of the GPU check kit (README.md, "GPU check kit"): on the
# build machine, makes one folder that a GPU machine with no LLVM, no MLIR and
# no network can run (tools/gpu-kit/run.sh inside it):
#   lib/          libMoECudaRuntime.so (the moe-compile libraries load it)
#   cases/NAME/   for each spec example (test/examples), the MOESART gate
#                 case, the bf16 prefill cases (wgmma at sm_90a, 64- and
#                 128-row tiles) and the quantized-weight cases (quant_int4,
#                 quant_fp8): layer.so and fused.so (moe-compile --target=cuda of
#                 the example and of its --moe-decompose --moe-fuse form),
#                 the arguments (argI.npy, seeded by moe-run --fill-random;
#                 those over 64 KiB as stream seeds that kit.py regenerates
#                 with fill_random.py, but quantized codes, always kept) and
#                 the CPU path's results (outI.npy,
#                 moe-run --device=cpu; bf16 values as 16 bits, .bf16.npy;
#                 files over 64 KiB byte-shuffled and zlib-compressed,
#                 .npy.zs: pack_case.py);
#                 for each spec example also vjp/ (the gradient f_vjp: its
#                 library, arguments and the CPU path's results)
#   bench/        the Mixtral-shaped layer in bf16 and f32 (any token count;
#                 D=64, H=128 on the cpu dry run) and its variants (the
#                 layer with other moe-compile flags: one `variant` line
#                 each, below); the weights are generated on the GPU
#                 machine from a seed
#                 the layer's gradient (mixtral_vjp) for the training step,
#                 and the same layer as moe_mlir.torch.MoELayer compiles it
#                 (torch_layer_bf16.so: @f and @f_vjp); the quantized
#                 layer at DeepSeek-V3's expert shape (deepseek_v3_fp8.so:
#                 FP8 E4M3 experts with 128 x 128 block scales, E=256,
#                 top-8, D=7168, H=2048; E=16, top-4, D=256, H=128 on the
#                 cpu dry run), its weights generated on the GPU machine
#   python/       the moe_mlir package and tools/train/plain_moe.py
#   kit.py, triton_moe.py, fill_random.py, run.sh, manifest.json
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
#              correctness only), MOE_KIT_CASES (default: every case; else
#              the cases to make, separated by spaces: NAME for a case's
#              layer and fused forms, NAME/vjp for its gradient, e.g.
#              "top2_swiglu top2_swiglu/vjp" to rerun one quickly; the
#              benchmark libraries are always made).
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

LAYER_SRCS=("$ROOT"/test/examples/*.mlir "$ROOT/tools/gpu-kit/cases/moesart_gate.mlir"
            "$ROOT/tools/gpu-kit/cases/prefill_bf16.mlir"
            "$ROOT/tools/gpu-kit/cases/prefill_big_bf16.mlir"
            "$ROOT/tools/gpu-kit/cases/quant_int4.mlir"
            "$ROOT/tools/gpu-kit/cases/quant_fp8.mlir")
VJP_SRCS=("$ROOT"/test/examples/*.mlir)
# MOE_KIT_CASES: every name must be a case.
KNOWN=" "
for src in "${LAYER_SRCS[@]}"; do KNOWN+="$(basename "$src" .mlir) "; done
for src in "${VJP_SRCS[@]}"; do KNOWN+="$(basename "$src" .mlir)/vjp "; done
for c in ${MOE_KIT_CASES:-}; do
  [[ "$KNOWN" == *" $c "* ]] || { echo "prepare: MOE_KIT_CASES: no case '$c' (the cases:$KNOWN)" >&2; exit 1; }
done
wanted() { [ -z "${MOE_KIT_CASES:-}" ] || [[ " $MOE_KIT_CASES " == *" $1 "* ]]; }

rm -rf "$KIT"
mkdir -p "$KIT/lib" "$KIT/cases" "$KIT/bench"
cp -L "$BUILD/lib/libMoECudaRuntime.so" "$KIT/lib/"
cp "$ROOT/tools/gpu-kit/kit.py" "$ROOT/tools/gpu-kit/triton_moe.py" "$ROOT/tools/gpu-kit/fill_random.py" \
   "$ROOT/tools/gpu-kit/run.sh" "$KIT/"

compile() { # SRC OUT [FLAG...]
  local src="$1" out="$2"; shift 2
  if [ "$TARGET" = cuda ]; then
    "$BIN/moe-compile" "$src" -o "$out" --target=cuda --chip="$CHIP" "$@"
  else
    "$BIN/moe-compile" "$src" -o "$out" --target=cpu "$@"
  fi
}

CASES_JSON=()
# One case folder: the arguments and the CPU path's results of ENTRY of SRC,
# packed by pack_case.py (arguments over 64 KiB that --fill-random made are
# regenerated on the GPU machine from their stream seeds, bf16 values stored
# as 16 bits); prints the case's "args" and "expected" JSON.
case_data() { # DIR SRC ENTRY
  local dir="$1" src="$2" entry="$3"
  mkdir -p "$dir"
  # The number of results, from the entry's type (moe-opt; for ENTRY = f_vjp
  # after --moe-generate-vjp adds it), without running it.
  local n i outs=() vjp=()
  [[ "$entry" == *_vjp ]] && vjp=(--moe-generate-vjp="entries=${entry%_vjp}")
  n="$("$BIN/moe-opt" "$src" "${vjp[@]}" --symbol-privatize=exclude="$entry" --symbol-dce \
        | python3 -c '
import re, sys
m = re.search(r"func\.func @[\w$.]+\(.*?\)\s*->\s*(\(.*?\)|tensor<[^>]*>)\s*(?:attributes|\{)",
              sys.stdin.read(), re.S)
print(len(re.findall(r"tensor<", m.group(1))) if m else 0)')"
  [ "$n" -gt 0 ] || { echo "prepare: cannot read the results of @$entry in $src" >&2; exit 1; }
  for ((i = 0; i < n; i++)); do outs+=("--output=$dir/out$i.npy"); done
  "$BIN/moe-run" "$src" --entry="$entry" --device=cpu --fill-random --seed="$SEED" \
    --dynamic-size=37 --save-args="$dir" "${outs[@]}" > /dev/null
  python3 "$ROOT/tools/gpu-kit/pack_case.py" "$KIT" "$dir" "$n"
}

# A case the target cannot compile (e.g. a host matmul on a layer result on
# cuda) is listed with moe-compile's one-line reason; kit.py reports it.
case_lib() { # NAME FORM SRC LIB [FLAG...] -> the reason it did not compile, or ""
  local name="$1" form="$2" src="$3" lib="$4"; shift 4
  if ! compile "$src" "$lib" "$@" 2> "$lib.err"; then
    echo "prepare: $name ($form) not compiled: $(head -1 "$lib.err")" >&2
    head -1 "$lib.err" | sed 's/\\/\\\\/g; s/"/\\"/g'
  fi
  rm -f "$lib.err"
}

case_json() { # NAME FORM ENTRY LIB WHY DATA
  CASES_JSON+=("{\"name\": \"$1\", \"form\": \"$2\", \"entry\": \"$3\", \"lib\": \"$4\", \"not_compiled\": \"$5\", ${6:1:-1}}")
}

add_case() { # NAME FILE
  local name="$1" src="$2" dir="$KIT/cases/$1"
  local entry data form input why
  entry="$(sed -n 's/^func\.func @\([A-Za-z0-9_]*\).*/\1/p' "$src" | head -1)"
  data="$(case_data "$dir" "$src" "$entry")"
  "$BIN/moe-opt" "$src" --moe-decompose --moe-fuse -o "$dir/fused.mlir"
  for form in layer fused; do
    input="$src"; [ "$form" = fused ] && input="$dir/fused.mlir"
    why="$(case_lib "$name" "$form" "$input" "$dir/$form.so")"
    case_json "$name" "$form" "$entry" "cases/$name/$form.so" "$why" "$data"
  done
}

# The training case of a spec example: its gradient f_vjp (moe-compile
# --entry=f_vjp: the backward's kernels) against the CPU path's f_vjp, on
# f's arguments and a cotangent per result.
add_vjp_case() { # NAME FILE
  local name="$1" src="$2" dir="$KIT/cases/$1/vjp"
  local entry data why
  entry="$(sed -n 's/^func\.func @\([A-Za-z0-9_]*\).*/\1/p' "$src" | head -1)_vjp"
  data="$(case_data "$dir" "$src" "$entry")"
  why="$(case_lib "$name" vjp "$src" "$dir/vjp.so" --entry="$entry")"
  case_json "$name" vjp "$entry" "cases/$name/vjp/vjp.so" "$why" "$data"
}

for src in "${LAYER_SRCS[@]}"; do
  name="$(basename "$src" .mlir)"
  wanted "$name" || continue
  echo "prepare: $name"
  add_case "$name" "$src"
done
for src in "${VJP_SRCS[@]}"; do
  name="$(basename "$src" .mlir)"
  wanted "$name/vjp" || continue
  echo "prepare: $name (vjp)"
  add_vjp_case "$name" "$src"
done

# The benchmark layer: Mixtral-shaped on cuda; on the cpu dry run the same
# layer at a small shape (D=64, H=128), so the bench and variants tables of
# kit.py run here too.
if [ "$TARGET" = cuda ]; then
  D=4096 H=14336 TOKENS="1, 16, 128, 1024, 4096" TRAIN_TOKENS="1024, 4096" TORCH_TOKENS="1024"
  QD=7168 QH=2048 QE=256 QK=8 QTOKENS="1, 16, 128, 4096"
else
  D=64 H=128 TOKENS="1, 16, 64, 1024" TRAIN_TOKENS="64" TORCH_TOKENS="64"
  QD=256 QH=128 QE=16 QK=4 QTOKENS="1, 16"
fi
mkdir -p "$KIT/bench/src"
bench_src() { # DTYPE -> the layer's .mlir at the kit's shape
  local src="$KIT/bench/src/mixtral_$1.mlir"
  sed "s/28672/$((2 * H))/g; s/14336/$H/g; s/4096/$D/g" \
    "$ROOT/tools/gpu-kit/cases/mixtral_$1.mlir" > "$src"
  echo "$src"
}
for dt in bf16 f32; do
  echo "prepare: bench mixtral $dt"
  compile "$(bench_src $dt)" "$KIT/bench/mixtral_$dt.so"
done
# The training step: the bf16 layer's gradient alone (forward recomputed
# inside, docs/gpu.md "The backward"), timed by kit.py at TRAIN_TOKENS.
echo "prepare: bench mixtral bf16 training step (mixtral_vjp)"
compile "$(bench_src bf16)" "$KIT/bench/mixtral_bf16_vjp.so" --entry=mixtral_vjp

# The PyTorch layer (docs/python.md): moe_mlir.torch.MoELayer on the
# device's tensors, forward and backward in bf16, against the plain torch
# layer (tools/train/plain_moe.py) on the bench weights, timed by kit.py at
# TORCH_TOKENS. The GPU machine has no compiler: the layer's @f and @f_vjp
# (its own MLIR, from the package) are compiled here and loaded there with
# moe_mlir.load; the package goes in python/ (its lib/ is the kit's).
echo "prepare: bench torch MoELayer bf16 (moe_mlir)"
mkdir -p "$KIT/python"
cp -rL "$BUILD/python/moe_mlir" "$KIT/python/"
rm -rf "$KIT/python/moe_mlir/__pycache__"
cp "$ROOT/tools/train/plain_moe.py" "$KIT/python/"
PYTHONPATH="$BUILD/python" python3 - "$KIT/bench/src/torch_layer_bf16.mlir" "$D" "$H" <<'PY'
import sys
from moe_mlir import _layers
text, _ = _layers.layer_function("f", d_model=int(sys.argv[2]), d_hidden=int(sys.argv[3]),
                                 num_experts=8, routing="top_k", k=2, activation="swiglu",
                                 dtype="bf16")
open(sys.argv[1], "w").write(text)
PY
compile "$KIT/bench/src/torch_layer_bf16.mlir" "$KIT/bench/torch_layer_bf16.so" --vjp

# The quantized layer (issue 25): DeepSeek-V3's routed experts as their
# checkpoint stores them (FP8 E4M3, 128 x 128 block scales), bf16 tokens,
# top-k softmax routing (the expert GEMMs are what is timed; DeepSeek's
# sigmoid group-limited router is not), any token count. kit.py generates
# the codes and scales on the device and times it against the Triton
# anchor's FP8 block-scaled variant and a torch reference.
echo "prepare: bench deepseek_v3 fp8 (E=$QE top-$QK D=$QD H=$QH)"
QSRC="$KIT/bench/src/deepseek_v3_fp8.mlir"
QB=128
qs1="${QE}x$(((QD + QB - 1) / QB))x$(((2 * QH + QB - 1) / QB))xf32"
qs2="${QE}x$(((QH + QB - 1) / QB))x$(((QD + QB - 1) / QB))xf32"
qtypes="tensor<?x${QD}xbf16>, tensor<${QD}x${QE}xbf16>, tensor<${QE}x${QD}x$((2 * QH))xf8E4M3FN>, tensor<${QE}x${QH}x${QD}xf8E4M3FN>, tensor<$qs1>, tensor<$qs2>"
cat > "$QSRC" <<MLIR
// GPU check kit benchmark: DeepSeek-V3's routed experts (FP8 E4M3 codes,
// $QB x $QB block scales), bf16 tokens, top-$QK of $QE, SwiGLU, any token count.
func.func @deepseek_v3_fp8(%x: tensor<?x${QD}xbf16>, %wr: tensor<${QD}x${QE}xbf16>,
    %w1: tensor<${QE}x${QD}x$((2 * QH))xf8E4M3FN>, %w2: tensor<${QE}x${QH}x${QD}xf8E4M3FN>,
    %s1: tensor<$qs1>, %s2: tensor<$qs2>) -> tensor<?x${QD}xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_scales(%s1, %s2)
         {routing = #moe.top_k<k = $QK>, activation = #moe.activation<swiglu>,
          quant = #moe.quant<fp8_e4m3, block = [$QB, $QB]>}
         : ($qtypes) -> tensor<?x${QD}xbf16>
  return %y : tensor<?x${QD}xbf16>
}
MLIR
compile "$QSRC" "$KIT/bench/deepseek_v3_fp8.so"
# Variants: the layer compiled with other moe-compile flags, timed by kit.py
# at the token counts given, next to the default build on the same inputs
# (one variants table: ms, % of bandwidth or of the matmul rate, the
# default's time over the variant's, max |diff| from the default's output).
# One line per variant:  variant NAME DTYPE "T,T,..." FLAG...
VARIANTS_JSON=()
variant() {
  local name="$1" dt="$2" tokens="$3"; shift 3
  local lib="bench/variant_$(printf '%s' "$name" | tr -c 'A-Za-z0-9_.=-' '_').so"
  echo "prepare: bench variant $name ($dt, T = $tokens): $*"
  if [ "$TARGET" = cuda ]; then
    "$BIN/moe-compile" "$(bench_src "$dt")" -o "$KIT/$lib" --target=cuda --chip="$CHIP" "$@"
  else
    "$BIN/moe-compile" "$(bench_src "$dt")" -o "$KIT/$lib" --target=cpu "$@"
  fi
  local flags=() f
  for f in "$@"; do flags+=("\"$f\""); done
  VARIANTS_JSON+=("{\"name\": \"$name\", \"dtype\": \"$dt\", \"tokens\": [$tokens], \"flags\": [$(IFS=,; echo "${flags[*]}")], \"lib\": \"$lib\"}")
}
if [ "$TARGET" = cuda ]; then
  # Decode: split-K of the 16-row GEMMs forced to S slices (docs/gpu.md,
  # "Split-K at decode"; the default chooses S from the shape).
  for s in 1 2 4 8 16; do
    variant "split-k=$s" bf16 "1,16" --decode-split-k=$s
  done
  if [ "$CHIP" = sm_90a ]; then
    # Prefill: the 64-row wgmma tiles only, against the default's 128-row
    # tiles (two consumer warpgroups) at T*k/E >= 128.
    variant "64-row tiles" bf16 "1024,4096" --big-tile-rows=0
    # Prefill: cp.async stages of the tensor-core GEMMs (dynamic shared
    # memory; the default is 4 for wgmma), docs/gpu.md "Shared-memory budget".
    for s in 3 5 6; do
      variant "mma-stages=$s" bf16 "1024,4096" --mma-stages=$s
    done
    # Prefill: every stage's wgmma group retired before the next loads (the
    # conservative pipeline, if the asynchronous one misbehaves on hardware).
    variant "wgmma-in-flight=0" bf16 "1024,4096" --wgmma-groups-in-flight=0
  fi
else
  # The dry run (the table's format): the default build again (its output
  # must equal the default's) and a portable f32 build (its FMAs may
  # differ from the default's: a small nonzero max|diff|).
  variant "same-flags" bf16 "1,16,64" --mcpu=native
  variant "mcpu=x86-64" f32 "16" --mcpu=x86-64
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
  echo "  \"bench\": {\"entry\": \"mixtral\", \"D\": $D, \"H\": $H, \"E\": 8, \"k\": 2,"
  echo "            \"tokens\": [$TOKENS], \"dtypes\": [\"bf16\", \"f32\"],"
  echo "            \"libs\": {\"bf16\": \"bench/mixtral_bf16.so\", \"f32\": \"bench/mixtral_f32.so\"},"
  echo "            \"decode_tokens\": [1, 16],"
  echo "            \"train\": {\"lib\": \"bench/mixtral_bf16_vjp.so\", \"entry\": \"mixtral_vjp\", \"dtype\": \"bf16\", \"tokens\": [$TRAIN_TOKENS]},"
  echo "            \"torch_layer\": {\"lib\": \"bench/torch_layer_bf16.so\", \"dtype\": \"bf16\", \"tokens\": [$TORCH_TOKENS]},"
  echo "            \"variants\": ["
  for ((i = 0; i < ${#VARIANTS_JSON[@]}; i++)); do
    sep=","; [ $i -eq $((${#VARIANTS_JSON[@]} - 1)) ] && sep=""
    echo "              ${VARIANTS_JSON[$i]}$sep"
  done
  echo "            ]},"
  echo "  \"quant_bench\": {\"entry\": \"deepseek_v3_fp8\", \"lib\": \"bench/deepseek_v3_fp8.so\","
  echo "                  \"D\": $QD, \"H\": $QH, \"E\": $QE, \"k\": $QK, \"block\": [$QB, $QB],"
  echo "                  \"tokens\": [$QTOKENS]}"
  echo "}"
} > "$KIT/manifest.json"
python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$KIT/manifest.json"

size="$(du -sb "$KIT" | cut -f1)"
echo "prepare: $KIT holds $((size / 1024)) KiB (limit 61440 KiB), chip $CHIP, commit $commit"
if [ "$size" -gt "$LIMIT" ]; then
  echo "prepare: the kit is larger than 60 MiB" >&2
  exit 1
fi
