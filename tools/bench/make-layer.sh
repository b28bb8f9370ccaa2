#!/usr/bin/env bash
# Prints a moe.layer benchmark function (by default a Mixtral-style layer:
# top-k of E SwiGLU experts, f32, no biases) with the given T D H E K:
#
#   make-layer.sh [OPTIONS] T D H E K > layer.mlir
#
# Options (the one generator for every benchmark variant):
#   --act=NAME     expert activation: swiglu (default), geglu, gelu, gelu_tanh,
#                  relu, silu (swiglu/geglu are gated: w1 is [E, D, 2H])
#   --routing=R    top_k (default: #moe.top_k<k = K>) or dense (#moe.dense;
#                  K is ignored)
#   --dtype=TY     f32 (default), bf16 or f16 (every float operand and result)
#   --dynamic      the token dimension is dynamic: tensor<?xD> (same as T=?)
#   --layers=N     N layers chained in one function, x -> layer -> layer ...,
#                  each with its own parameters "layers.I.*" (default 1)
#   --quant=fp8:BK,BN
#                  the expert weights FP8 block-scaled (#moe.quant<fp8_e4m3,
#                  block = [BK, BN]>, docs/spec.md §2.1): w1 and w2 are
#                  f8E4M3FN with their f32 scales (moe.param "...w1_scale",
#                  "...w2_scale"); not with --fused
#   --quant=int4:G[,zero_point][,int8_activations]
#                  the expert weights int4 group-quantized (#moe.quant<int4,
#                  group = G[, zero_point][, int8_activations]>): w1 and w2
#                  are i4 with f32 scales [E, ceil(K/G), N] ("...w1_scale",
#                  "...w2_scale") and, with zero_point, i4 zero points of
#                  the same shape ("...w1_zero", "...w2_zero"); with
#                  int8_activations the layer in the int8-activation mode
#                  (docs/spec.md §2.1); not with --fused
#   --fused        the body is only moe.fused_experts (the expert phase, no
#                  router or gate): the function takes the expert indices
#                  [T, K] i32 and routing weights [T, K] first (inputs, bind
#                  them with --input), then x (an input), then w1 and w2
set -euo pipefail

ACT=swiglu ROUTING=top_k TY=f32 DYNAMIC=0 LAYERS=1 FUSED=0 QUANT= INT4= ZP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --act=*) ACT="${1#*=}" ;;
    --routing=*) ROUTING="${1#*=}" ;;
    --dtype=*) TY="${1#*=}" ;;
    --dynamic) DYNAMIC=1 ;;
    --layers=*) LAYERS="${1#*=}" ;;
    --fused) FUSED=1 ;;
    --quant=fp8:*) QUANT="${1#--quant=fp8:}" ;;
    --quant=int4:*) INT4="${1#--quant=int4:}" ;;
    --) shift; break ;;
    -*) echo "make-layer.sh: unknown option $1" >&2; exit 1 ;;
    *) break ;;
  esac
  shift
done
if [ $# -ne 5 ]; then
  echo "usage: make-layer.sh [--act=A] [--routing=top_k|dense] [--dtype=f32|bf16|f16] [--dynamic] [--layers=N] [--quant=fp8:BK,BN|int4:G[,zero_point][,int8_activations]] [--fused] T D H E K" >&2
  exit 1
fi
T=$1 D=$2 H=$3 E=$4 K=$5
[ "$DYNAMIC" = 1 ] && T='?'
case "$ACT" in
  swiglu | geglu) H1=$((2 * H)) ;;
  gelu | gelu_tanh | relu | silu) H1=$H ;;
  *) echo "make-layer.sh: unknown activation $ACT" >&2; exit 1 ;;
esac
case "$ROUTING" in
  top_k) ROUTE="#moe.top_k<k = ${K}>" ;;
  dense) ROUTE="#moe.dense"; K=$E ;;
  *) echo "make-layer.sh: unknown routing $ROUTING" >&2; exit 1 ;;
esac
case "$TY" in f32 | bf16 | f16) ;; *) echo "make-layer.sh: unknown dtype $TY" >&2; exit 1 ;; esac

XT="tensor<${T}x${D}x${TY}>"
WRT="tensor<${D}x${E}x${TY}>"
W1T="tensor<${E}x${D}x${H1}x${TY}>"
W2T="tensor<${E}x${H}x${D}x${TY}>"
# FP8 block-scaled experts: the codes and their scales [E, ceil(K/BK), ceil(N/BN)].
SCALES="" QATTR="" S1T="" S2T=""
if [ -n "$QUANT" ]; then
  BK="${QUANT%,*}" BN="${QUANT#*,}"
  case "$BK,$BN" in
    *[!0-9,]* | ,* | *, | 0,* | *,0) echo "make-layer.sh: --quant=fp8:BK,BN takes two sizes >= 1" >&2; exit 1 ;;
  esac
  [ "$FUSED" = 1 ] && { echo "make-layer.sh: --quant is not a --fused option" >&2; exit 1; }
  W1T="tensor<${E}x${D}x${H1}xf8E4M3FN>"
  W2T="tensor<${E}x${H}x${D}xf8E4M3FN>"
  S1T="tensor<${E}x$(((D + BK - 1) / BK))x$(((H1 + BN - 1) / BN))xf32>"
  S2T="tensor<${E}x$(((H + BK - 1) / BK))x$(((D + BN - 1) / BN))xf32>"
  QATTR=", quant = #moe.quant<fp8_e4m3, block = [${BK}, ${BN}]>"
fi
# int4 group-quantized experts: the codes, their scales [E, ceil(K/G), N]
# and (zero_point) the zero points, shaped as the scales.
Z1T="" Z2T=""
if [ -n "$INT4" ]; then
  [ -n "$QUANT" ] && { echo "make-layer.sh: one --quant" >&2; exit 1; }
  G="${INT4%%,*}"
  A8=""
  case "$INT4" in
    *,zero_point,int8_activations) ZP=1 A8=", int8_activations" ;;
    *,zero_point) ZP=1 ;;
    *,int8_activations) A8=", int8_activations" ;;
    *,*) echo "make-layer.sh: --quant=int4:G[,zero_point][,int8_activations], got int4:$INT4" >&2; exit 1 ;;
  esac
  case "$G" in '' | *[!0-9]* | 0) echo "make-layer.sh: --quant=int4:G takes a group >= 1" >&2; exit 1 ;; esac
  [ "$FUSED" = 1 ] && { echo "make-layer.sh: --quant is not a --fused option" >&2; exit 1; }
  QUANT=int4
  W1T="tensor<${E}x${D}x${H1}xi4>"
  W2T="tensor<${E}x${H}x${D}xi4>"
  S1T="tensor<${E}x$(((D + G - 1) / G))x${H1}xf32>"
  S2T="tensor<${E}x$(((H + G - 1) / G))x${D}xf32>"
  if [ "$ZP" = 1 ]; then
    Z1T="tensor<${E}x$(((D + G - 1) / G))x${H1}xi4>"
    Z2T="tensor<${E}x$(((H + G - 1) / G))x${D}xi4>"
    QATTR=", quant = #moe.quant<int4, group = ${G}, zero_point${A8}>"
  else
    QATTR=", quant = #moe.quant<int4, group = ${G}${A8}>"
  fi
fi

if [ "$FUSED" = 1 ]; then
  IT="tensor<${T}x${K}xi32>"
  GT="tensor<${T}x${K}x${TY}>"
  cat <<MLIR
func.func @forward(%idx: ${IT}, %wt: ${GT}, %x: ${XT},
                   %w1: ${W1T} {moe.param = "experts.w1"},
                   %w2: ${W2T} {moe.param = "experts.w2"}) -> ${XT} {
  %y = moe.fused_experts %x, %idx, %wt experts(%w1, %w2)
         {num_experts = ${E} : i64, activation = #moe.activation<${ACT}>}
         : (${XT}, ${IT}, ${GT}, ${W1T}, ${W2T}) -> ${XT}
  return %y : ${XT}
}
MLIR
  exit 0
fi

layer() { # layer INDEX IN OUT
  if [ "$ZP" = 1 ]; then
    cat <<MLIR
  %$3 = moe.layer %$2 router(%wr$1) experts(%w1_$1, %w2_$1) expert_scales(%s1_$1, %s2_$1)
         expert_zero_points(%z1_$1, %z2_$1)
         {routing = ${ROUTE}, activation = #moe.activation<${ACT}>${QATTR}}
         : (${XT}, ${WRT}, ${W1T}, ${W2T}, ${S1T}, ${S2T}, ${Z1T}, ${Z2T}) -> ${XT}
MLIR
    return
  fi
  if [ -n "$QUANT" ]; then
    cat <<MLIR
  %$3 = moe.layer %$2 router(%wr$1) experts(%w1_$1, %w2_$1) expert_scales(%s1_$1, %s2_$1)
         {routing = ${ROUTE}, activation = #moe.activation<${ACT}>${QATTR}}
         : (${XT}, ${WRT}, ${W1T}, ${W2T}, ${S1T}, ${S2T}) -> ${XT}
MLIR
    return
  fi
  cat <<MLIR
  %$3 = moe.layer %$2 router(%wr$1) experts(%w1_$1, %w2_$1)
         {routing = ${ROUTE}, activation = #moe.activation<${ACT}>}
         : (${XT}, ${WRT}, ${W1T}, ${W2T}) -> ${XT}
MLIR
}

if [ "$LAYERS" = 1 ]; then
  # The names of the single-layer form (gate.weight, experts.gate_up, experts.down).
  cat <<MLIR
func.func @forward(%x: ${XT},
                   %wr0: ${WRT} {moe.param = "gate.weight"},
                   %w1_0: ${W1T} {moe.param = "experts.gate_up"},
                   %w2_0: ${W2T} {moe.param = "experts.down"}$([ -n "$QUANT" ] && printf ',\n                   %%s1_0: %s {moe.param = "experts.gate_up_scale"},\n                   %%s2_0: %s {moe.param = "experts.down_scale"}' "$S1T" "$S2T")$([ "$ZP" = 1 ] && printf ',\n                   %%z1_0: %s {moe.param = "experts.gate_up_zero"},\n                   %%z2_0: %s {moe.param = "experts.down_zero"}' "$Z1T" "$Z2T")) -> ${XT} {
MLIR
  layer 0 x y
  echo "  return %y : ${XT}"
  echo "}"
  exit 0
fi

echo "func.func @forward(%x: ${XT},"
for ((i = 0; i < LAYERS; i++)); do
  sep=","
  [ $i -eq $((LAYERS - 1)) ] && sep=") -> ${XT} {"
  echo "    %wr$i: ${WRT} {moe.param = \"layers.$i.gate.weight\"},"
  echo "    %w1_$i: ${W1T} {moe.param = \"layers.$i.experts.w1\"},"
  if [ -n "$QUANT" ]; then
    echo "    %w2_$i: ${W2T} {moe.param = \"layers.$i.experts.w2\"},"
    echo "    %s1_$i: ${S1T} {moe.param = \"layers.$i.experts.w1_scale\"},"
    if [ "$ZP" = 1 ]; then
      echo "    %s2_$i: ${S2T} {moe.param = \"layers.$i.experts.w2_scale\"},"
      echo "    %z1_$i: ${Z1T} {moe.param = \"layers.$i.experts.w1_zero\"},"
      echo "    %z2_$i: ${Z2T} {moe.param = \"layers.$i.experts.w2_zero\"}$sep"
    else
      echo "    %s2_$i: ${S2T} {moe.param = \"layers.$i.experts.w2_scale\"}$sep"
    fi
  else
    echo "    %w2_$i: ${W2T} {moe.param = \"layers.$i.experts.w2\"}$sep"
  fi
done
prev=x
for ((i = 0; i < LAYERS; i++)); do
  layer "$i" "$prev" "h$i"
  prev="h$i"
done
echo "  return %${prev} : ${XT}"
echo "}"
