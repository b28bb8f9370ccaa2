#!/usr/bin/env bash
# Fuzzes moe-mlir with libFuzzer under ASan/UBSan:
#   moe-fuzz-mlir  the .mlir parser, the verifiers and the moe passes
#   moe-fuzz-io    the .npy / .safetensors readers, the index JSON parser,
#                  checkpoint assembly and moe-run's argument binding
#
# Usage:
#   scripts/fuzz.sh [SECONDS]      installs libclang-rt-22-dev when missing,
#       configures build-fuzz/ (-DMOE_BUILD_FUZZERS=ON, -O1 -DNDEBUG, no -g),
#       builds the two targets, seeds their corpora from the tests and runs
#       each for SECONDS (default 60). Longer runs: scripts/fuzz.sh 600.
#   scripts/fuzz.sh --suite SECONDS
#       what the README's test command (scripts/test.sh) runs: the same
#       build, then each target for SECONDS from its seeds only (a fresh
#       corpus, -seed=1), so that a run from a clean clone is reproducible;
#       with two or more cores the two targets run at the same time.
#   scripts/fuzz.sh --run-only TARGET SECONDS BUILD_DIR
#       seeds and runs one target of an existing build (what the ctest tests
#       fuzz-moe-fuzz-mlir / fuzz-moe-fuzz-io of build-fuzz/ run).
#
# The corpora grow in BUILD/fuzz/corpus-TARGET (kept between runs; --suite
# uses BUILD/fuzz/suite-corpus-TARGET, emptied first); crashes, leaks and
# timeouts are written to BUILD/fuzz/artifacts/. Exits non-zero when a
# target finds one, after printing the reproducer's path and how to replay
# it. Environment:
#   MOE_FUZZ_FLAGS      extra libFuzzer flags ("-jobs=2 ...")
#   MOE_FUZZ_TOOLS      a folder with moe-npy and moe-ckpt-gen (the seed
#                       writers; default: build them in build-fuzz/)
#   MOE_FUZZ_CFLAGS     optimization flags of build-fuzz/ (default
#                       "-O1 -DNDEBUG"; "-O1 -g -DNDEBUG" for debugging)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Seeds TARGET's corpus (idempotent) from the repository's tests.
seed() {
  local target="$1" build="$2"
  local seeds="$build/fuzz/seeds-$target"
  rm -rf "$seeds"
  mkdir -p "$seeds"
  case "$target" in
  moe-fuzz-mlir)
    local f n=0
    for f in "$ROOT"/test/examples/*.mlir "$ROOT"/test/dialect/*.mlir \
             "$ROOT"/test/passes/*.mlir; do
      [ -f "$f" ] || continue
      # One seed per `// -----` split, without the RUN/CHECK lines (they
      # are comments to the parser and only waste the fuzzer's bytes).
      awk -v out="$seeds/$(basename "$f" .mlir)" '
        BEGIN { part = 0; file = out "-" part ".mlir" }
        /^\/\/ -----/ { close(file); part++; file = out "-" part ".mlir"; next }
        /^\/\/ *(RUN|CHECK|[A-Z0-9-]*:)/ { next }
        { print > file }' "$f"
    done
    # Keep the splits of up to 8 KB (the target ignores larger inputs).
    find "$seeds" -type f -size +8k -delete
    ;;
  moe-fuzz-io)
    local tools="${MOE_FUZZ_TOOLS:-$build/bin}"
    # Else the normal build's (build/), when this build has none.
    [ -n "${MOE_FUZZ_TOOLS:-}" ] || [ -x "$tools/moe-npy" ] || tools="$ROOT/build/bin"
    local npy="$tools/moe-npy" gen="$tools/moe-ckpt-gen"
    if [ ! -x "$npy" ] || [ ! -x "$gen" ]; then
      echo "fuzz: $npy or $gen missing (set MOE_FUZZ_TOOLS to a build's bin/)" >&2
      return 1
    fi
    local tmp="$build/fuzz/tmp"
    rm -rf "$tmp"; mkdir -p "$tmp"
    "$npy" write "$seeds/f32.npy" f32 2x3 1 2 3 4 5 6
    "$npy" write "$seeds/f16.npy" f16 4 0.5 -1 65504 1e-7
    "$npy" write "$seeds/i32.npy" i32 scalar 7
    "$npy" write "$seeds/i64.npy" i64 3x1 -1 0 9
    "$npy" write "$seeds/empty.npy" f32 0x4
    "$npy" pack "$seeds/one.safetensors" w="$seeds/f32.npy"
    "$npy" pack "$seeds/mixed.safetensors" a="$seeds/f32.npy" \
      b="$seeds/f16.npy" c="$seeds/i32.npy" d="$seeds/i64.npy" \
      e="$seeds/f32.npy:bf16" z="$seeds/empty.npy"
    "$gen" mixtral "$tmp/ckpt" --dtype=f32 --shards=2 >/dev/null
    local f i=0
    for f in "$tmp"/ckpt/*.json "$tmp"/ckpt/*.safetensors; do
      # Small files only: big seeds slow every execution.
      [ "$(stat -c %s "$f")" -le 65536 ] || continue
      cp "$f" "$seeds/ckpt-$i-$(basename "$f")"; i=$((i + 1))
    done
    find "$ROOT/test" -path '*/Inputs/*' \( -name '*.npy' -o -name '*.json' \
      -o -name '*.safetensors' \) -size -64k -exec cp {} "$seeds/" \;
    printf '{"metadata":{"total_size":8},"weight_map":{"a":"x/m.safetensors","b":"m.safetensors"}}' \
      >"$seeds/index.json"
    # Checkpoint bundles (moe-fuzz-io.cpp): the argument's type and the
    # #moe.checkpoint names on the first line, then the files.
    "$npy" write "$tmp/e0.npy" f32 2x3 1 2 3 4 5 6
    "$npy" write "$tmp/e1.npy" f32 2x3 -1 -2 -3 -4 -5 -6
    "$npy" write "$tmp/up.npy" f16 2x3 0.5 1 2 4 8 16
    "$npy" pack "$tmp/s0.safetensors" "x.0.w=$tmp/e0.npy" "x.0.v=$tmp/up.npy" >/dev/null
    "$npy" pack "$tmp/s1.safetensors" "x.1.w=$tmp/e1.npy" "x.1.v=$tmp/up.npy:bf16" >/dev/null
    local index='{"metadata":{},"weight_map":{"x.0.w":"s0.safetensors","x.0.v":"s0.safetensors","x.1.w":"s1.safetensors","x.1.v":"s1.safetensors"}}'
    bundle() { # OUT HEADER: the header line, then the index and both shards
      { printf '#moe-fuzz-ckpt %s\n=== model.safetensors.index.json\n%s' "$2" "$index"
        printf '\n=== s0.safetensors\n'; cat "$tmp/s0.safetensors"
        printf '\n=== s1.safetensors\n'; cat "$tmp/s1.safetensors"; } >"$1"
    }
    bundle "$seeds/ckpt-stack.bundle" 'f32 2x2x3 N x.{e}.w'
    bundle "$seeds/ckpt-concat.bundle" 'bf16 2x3x4 T x.{e}.w x.{e}.v'
    bundle "$seeds/ckpt-dyn.bundle" 'f16 ?x6 N x.0.w x.1.w'
    { printf '#moe-fuzz-ckpt f32 3x2 T x.0.w\n=== s0.safetensors\n'
      cat "$tmp/s0.safetensors"; } >"$seeds/ckpt-single.bundle"
    # FP8 experts (a tiny Qwen3 FP8 checkpoint, 15 KB): the codes bit for
    # bit, their scales, and the codes dequantized at load (fp8_scales).
    "$gen" qwen3_moe "$tmp/fp8" --dim=8 --experts=2 --hidden=8 --k=1 \
      --quant=fp8_e4m3:4,4 >/dev/null
    local ex='model.layers.1.mlp.experts.{e}'
    fp8bundle() { # OUT HEADER
      { printf '#moe-fuzz-ckpt %s\n=== model.safetensors\n' "$2"
        cat "$tmp/fp8/model.safetensors"; } >"$1"
    }
    fp8bundle "$seeds/ckpt-fp8-codes.bundle" "f8E4M3FN 2x8x16 T $ex.gate_proj.weight $ex.up_proj.weight"
    fp8bundle "$seeds/ckpt-fp8-scales.bundle" "f32 2x2x4 T $ex.gate_proj.weight_scale_inv $ex.up_proj.weight_scale_inv"
    fp8bundle "$seeds/ckpt-fp8-dequant.bundle" "bf16 2x8x16 T@4,4 $ex.gate_proj.weight $ex.up_proj.weight"
    # Fused experts (transformers 5's Qwen3 layout): one [E, 2H, D] tensor,
    # each expert's matrix transposed.
    "$gen" qwen3_moe "$tmp/fused" --dim=8 --experts=2 --hidden=8 --k=1 --fused-experts >/dev/null
    { printf '#moe-fuzz-ckpt bf16 2x8x16 T model.layers.1.mlp.experts.gate_up_proj\n=== model.safetensors\n'
      cat "$tmp/fused/model.safetensors"; } >"$seeds/ckpt-fused.bundle"
    # int4 experts (a tiny GPTQ checkpoint): the codes and the zero points
    # unpacked from their I32 words into ui8 (i4) arguments.
    "$gen" qwen3_moe "$tmp/gptq" --dim=8 --experts=2 --hidden=8 --k=1 \
      --quant=int4:4,zero_point >/dev/null
    { printf '#moe-fuzz-ckpt ui8 2x8x16 N#gptq %s %s\n=== model.safetensors\n' \
        "$ex.gate_proj.qweight" "$ex.up_proj.qweight"
      cat "$tmp/gptq/model.safetensors"; } >"$seeds/ckpt-int4-gptq.bundle"
    { printf '#moe-fuzz-ckpt ui8 2x2x16 N#gptq_zeros %s %s\n=== model.safetensors\n' \
        "$ex.gate_proj.qzeros" "$ex.up_proj.qzeros"
      cat "$tmp/gptq/model.safetensors"; } >"$seeds/ckpt-int4-zeros.bundle"
    # An int4 weight dequantized at load (int4_scales, int4_zeros): GPTQ
    # words [K/8, N] = [1, 8], F16 scales and packed zero points in groups
    # of 4.
    "$npy" write "$tmp/q.npy" i32 1x8 1985229328 -19088744 305419896 -1985229329 \
      2023406814 16843009 -2004318072 1431655765 >/dev/null
    "$npy" write "$tmp/qs.npy" f16 2x8 0.5 >/dev/null
    "$npy" write "$tmp/qz.npy" i32 2x1 1985229328 305419896 >/dev/null
    "$npy" pack "$tmp/q.safetensors" "w=$tmp/q.npy" "w_scale=$tmp/qs.npy" \
      "w_zero=$tmp/qz.npy" >/dev/null
    { printf '#moe-fuzz-ckpt f32 8x8 N#gptq%%4z w\n=== q.safetensors\n'
      cat "$tmp/q.safetensors"; } >"$seeds/ckpt-int4-dequant.bundle"
    rm -rf "$tmp"
    ;;
  esac
}

# Runs TARGET for SECONDS; returns non-zero on a finding.
run_target() {
  local target="$1" seconds="$2" build="$3"
  local bin="$build/bin/$target"
  if [ ! -x "$bin" ]; then
    echo "fuzz: $bin not built (configure with -DMOE_BUILD_FUZZERS=ON)" >&2
    return 1
  fi
  seed "$target" "$build"
  local corpus="$build/fuzz/corpus-$target" artifacts="$build/fuzz/artifacts"
  local log="$build/fuzz/$target.log" fixed=()
  if [ "${SUITE:-0}" = 1 ]; then
    corpus="$build/fuzz/suite-corpus-$target"
    rm -rf "$corpus"
    fixed=(-seed=1)
  fi
  mkdir -p "$corpus" "$artifacts"
  local maxlen=()
  [ "$target" = moe-fuzz-mlir ] && maxlen=(-max_len=8192)
  echo "fuzz: $target for ${seconds}s (log: $log)"
  local rc=0
  ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" \
  UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}" \
    "$bin" -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=20 \
      -print_final_stats=1 "${maxlen[@]}" "${fixed[@]}" \
      -artifact_prefix="$artifacts/$target-" ${MOE_FUZZ_FLAGS:-} \
      "$corpus" "$build/fuzz/seeds-$target" >"$log" 2>&1 || rc=$?
  grep -E '^(#[0-9]+ +(INITED|DONE)|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" | tail -4 || true
  if [ "$rc" -ne 0 ]; then
    echo "fuzz: $target FAILED (exit $rc); last lines of $log:" >&2
    tail -n 40 "$log" >&2
    local repro
    repro="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)"
    if [ -n "$repro" ]; then
      echo "fuzz: reproducer: $repro" >&2
      echo "fuzz: replay with: $bin $repro" >&2
    fi
    return 1
  fi
  echo "fuzz: $target clean ($(ls "$corpus" | wc -l) corpus files)"
}

if [ "${1:-}" = "--run-only" ]; then
  [ $# -eq 4 ] || { echo "usage: fuzz.sh --run-only TARGET SECONDS BUILD_DIR" >&2; exit 2; }
  run_target "$2" "$3" "$4"
  exit $?
fi

SUITE=0
if [ "${1:-}" = "--suite" ]; then
  SUITE=1
  shift
  [ $# -eq 1 ] || { echo "usage: fuzz.sh --suite SECONDS" >&2; exit 2; }
fi
SECONDS_PER_TARGET="${1:-60}"
case "$SECONDS_PER_TARGET" in
  ''|*[!0-9]*) echo "usage: scripts/fuzz.sh [--suite] [SECONDS]" >&2; exit 2 ;;
esac
BUILD="$ROOT/build-fuzz"
"$ROOT/scripts/setup-deps.sh" libclang-rt-22-dev   # libFuzzer + sanitizers
# A lean instrumented build: -O1 (ASan's recommendation for fuzzing), no
# debug info (symbolized stacks still name the functions), NDEBUG like the
# Debian libMLIR.so it links against. Reconfigured when the flags change.
FLAGS="${MOE_FUZZ_CFLAGS:--O1 -DNDEBUG}"
STAMP="$BUILD/moe-fuzz-flags"
if [ ! -f "$BUILD/build.ninja" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$FLAGS" ]; then
  cmake -G Ninja -S "$ROOT" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="$FLAGS" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$FLAGS" \
    -DCMAKE_C_COMPILER=/usr/bin/clang-22 \
    -DCMAKE_CXX_COMPILER=/usr/bin/clang++-22 \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DMOE_BUILD_FUZZERS=ON -DMOE_BUILD_UNITTESTS=OFF
  echo "$FLAGS" >"$STAMP"
fi
targets=(moe-fuzz-mlir moe-fuzz-io)
[ -n "${MOE_FUZZ_TOOLS:-}" ] || targets+=(moe-npy moe-ckpt-gen)
cmake --build "$BUILD" -j "$(nproc)" --target "${targets[@]}"

status=0
if [ "$SUITE" = 1 ] && [ "$(nproc)" -ge 2 ]; then
  # The suite's targets run side by side (one core each), their reports
  # printed one after the other when both have finished.
  mkdir -p "$BUILD/fuzz"
  pids=()
  for target in moe-fuzz-mlir moe-fuzz-io; do
    run_target "$target" "$SECONDS_PER_TARGET" "$BUILD" >"$BUILD/fuzz/$target.report" 2>&1 &
    pids+=($!)
  done
  i=0
  for target in moe-fuzz-mlir moe-fuzz-io; do
    wait "${pids[$i]}" || status=1
    cat "$BUILD/fuzz/$target.report"
    i=$((i + 1))
  done
else
  for target in moe-fuzz-mlir moe-fuzz-io; do
    run_target "$target" "$SECONDS_PER_TARGET" "$BUILD" || status=1
  done
fi
exit $status
