// RUN: moe-opt %examples/dense.mlir --moe-print-cost -o /dev/null | FileCheck %s --check-prefix=DENSE
// RUN: moe-opt %examples/dense.mlir --moe-dense-to-moesart="k=2" --moe-print-cost -o /dev/null | FileCheck %s --check-prefix=MOESART
// RUN: moe-opt %examples/dense.mlir --moe-dense-to-soft="slots-per-expert=1 normalize=true" --moe-print-cost -o /dev/null | FileCheck %s --check-prefix=DSOFT
// RUN: moe-opt %examples/soft.mlir --moe-print-cost -o /dev/null | FileCheck %s --check-prefix=SOFT
// RUN: moe-opt %examples/moesart_train.mlir --moe-print-cost -o /dev/null | FileCheck %s --check-prefix=TRAIN
// RUN: moe-opt %examples/top2_swiglu.mlir --moe-print-cost -o /dev/null | FileCheck %s --check-prefix=SWIGLU
// RUN: moe-opt %examples/block.mlir --moe-print-cost -o /dev/null | FileCheck %s --check-prefix=BLOCK
// RUN: moe-opt %examples/qwen_style.mlir --moe-print-cost -o /dev/null | FileCheck %s --check-prefix=QWEN
// RUN: moe-opt %examples/qwen_style.mlir --moe-decompose --moe-fuse --moe-print-cost -o /dev/null | FileCheck %s --check-prefix=QWEN-FUSED
// RUN: moe-opt %examples/deepseek_style.mlir --moe-print-cost -o /dev/null | FileCheck %s --check-prefix=DEEPSEEK
//
// The backward table (backward=true), after the forward's:
// RUN: moe-opt %examples/top2_swiglu.mlir --moe-print-cost=backward=true -o /dev/null | FileCheck %s --check-prefix=SWIGLU-BWD
// RUN: moe-opt %examples/top2_swiglu.mlir --moe-decompose --moe-fuse --moe-print-cost=backward=true -o /dev/null | FileCheck %s --check-prefix=SWIGLU-BWD-FUSED
// RUN: moe-opt %examples/moesart_train.mlir --moe-print-cost=backward=true -o /dev/null | FileCheck %s --check-prefix=TRAIN-BWD
// RUN: moe-opt %examples/soft.mlir --moe-print-cost=backward=true -o /dev/null | FileCheck %s --check-prefix=SOFT-BWD
// RUN: moe-opt %examples/top2_swiglu.mlir --moe-print-cost -o /dev/null | FileCheck %s --check-prefix=NO-BWD
//
// Decomposed and fused forms of the same layers print the same costs:
// RUN: moe-opt %examples/dense.mlir --moe-decompose --moe-print-cost -o /dev/null | FileCheck %s --check-prefix=DENSE-CHAIN
// RUN: moe-opt %examples/top2_swiglu.mlir --moe-decompose --moe-print-cost -o /dev/null | FileCheck %s --check-prefix=SWIGLU-CHAIN
// RUN: moe-opt %examples/top2_swiglu.mlir --moe-decompose --moe-fuse --moe-print-cost -o /dev/null | FileCheck %s --check-prefix=SWIGLU-FUSED
// RUN: moe-opt %examples/soft.mlir --moe-decompose --moe-print-cost -o /dev/null | FileCheck %s --check-prefix=SOFT-CHAIN
// RUN: moe-opt %examples/soft.mlir --moe-decompose --moe-fuse --moe-print-cost -o /dev/null | FileCheck %s --check-prefix=SOFT-FUSED
//
// Hand-written cases below (fused ops, bf16, capacity factor, dynamic T):
// RUN: moe-opt %s --moe-print-cost -split-input-file -o /dev/null | FileCheck %s
//
// It is an analysis: nothing on stderr, and the IR is unchanged.
// RUN: moe-opt %examples/dense.mlir --moe-print-cost -o /dev/null 2>&1 >/dev/null | count 0
// RUN: moe-opt %s --moe-print-cost -split-input-file -o /dev/null 2>&1 >/dev/null | count 0
// RUN: moe-opt %s -split-input-file -o %t.before
// RUN: moe-opt %s -split-input-file --moe-print-cost -o %t.after > /dev/null
// RUN: diff %t.before %t.after
//
// Cost model (see the header of passes/PrintCost.cpp): H1 = 2H for gated
// activations, else H;
//   F (FLOPs per expert row) = 2*D*H1 + 2*H*D + H1 (activation) + H1 [b1] + D [b2]
//   P (params per expert)    = D*H1 + H*D + H1 [b1] + D [b2]
// token-choice: router 2*T*D*E + T*E [br]; experts T*k*F; disp+comb
//   5*T*E + 2*T*k*D; touched E*(1-(1-k/E)^T); bytes touched*P*elt;
//   params/token D*E + E [br] + k*P.
// soft: router 2*G*M*D*E*S + (3*G*M*D + 3*D*E*S if normalize); experts E*G*S*F;
//   disp+comb 2*E*S*G*M*D + 2*G*M*E*S*D + 10*G*M*E*S; touched E;
//   bytes E*P*elt; params/token D*E*S + E*P.

// Backward (passes/PrintCost.cpp): Fb = 6*D*H1 + 4*H*D + 2*H1 + H1 [b1] + D [b2]
//   per row; router 4*T*D*E + T*E [br]; experts T*k*Fb; disp+comb
//   5*T*E + 4*T*k*D; bytes = the forward's weight bytes + E*P*elt; saved
//   2*T*k*D*elt + 4*T*E + 16*T*k + 4*(E+1).
// top2_swiglu (T=32 D=256 H=512 E=8 k=2, H1=1024, f32): router 262,144;
//   experts 64*(1,572,864+524,288+2,048) = 134,348,800; disp 1,280+65,536;
//   bytes 12,581,648 + 12,582,912; saved 131,072+1,024+1,024+36.
// SWIGLU-BWD:      {{^}}moe.layer top2_swiglu.mlir:7 top_k k=2 swiglu 32
// SWIGLU-BWD-NEXT: {{^}}backward (@f_vjp, docs/spec.md §9):{{$}}
// SWIGLU-BWD-NEXT: {{^}}layer form bwd router FLOPs bwd expert FLOPs bwd disp+comb FLOPs bwd weight bytes saved bytes{{$}}
// SWIGLU-BWD-NEXT: {{^}}moe.layer top2_swiglu.mlir:7 top_k k=2 262,144 134,348,800 66,816 25,164,560 133,156{{$}}
// SWIGLU-BWD-FUSED: {{^}}backward
// SWIGLU-BWD-FUSED-NEXT: {{^}}layer
// SWIGLU-BWD-FUSED-NEXT: {{^}}moe.fused_experts top2_swiglu.mlir:7 fused top_k k=2 262,144 134,348,800 66,816 25,164,560 133,156{{$}}
// moesart_train (T=64 D=128 H=256 E=16 k=2, relu, biases, router bias):
//   Fb = 196,608+131,072+512+384 = 328,576; router 524,288+1,024.
// TRAIN-BWD:      {{^}}backward
// TRAIN-BWD-NEXT: {{^}}layer
// TRAIN-BWD-NEXT: {{^}}moe.layer moesart_train.mlir:11 moesart k=2 train 525,312 42,057,728 70,656 8,436,940 137,284{{$}}
// soft (G=4 M=64 D=128 E=8 S=2 H=512, gelu, biases, normalize; N = 4,096
// logits, 64 rows): router 6*N*D + 8*G*M*D + 8*D*E*S = 3,145,728 + 262,144
// + 16,384; experts 64 * (393,216 + 262,144 + 1,024 + 640); disp+comb
// 8*N*D + 19*N = 4,194,304 + 77,824; saved 2*64*128*4 + 4*N + 4*9.
// SOFT-BWD:      {{^}}backward
// SOFT-BWD-NEXT: {{^}}layer
// SOFT-BWD-NEXT: {{^}}moe.soft_layer soft.mlir:11 soft S=2 M=64 3,424,256 42,049,536 4,272,128 8,429,568 81,956{{$}}
// NO-BWD-NOT: backward

// ===========================================================================
// dense.mlir: T=64 D=128 H=512 E=8, dense (k=E=8), gelu, b1, b2, router bias, f32.
//   router  = 2*64*128*8 + 64*8        = 131,072 + 512 = 131,584
//   F       = 2*128*512 + 2*512*128 + 512 + 512 + 128
//           = 131,072 + 131,072 + 1,152 = 263,296
//   experts = (64*8 = 512 rows) * 263,296 = 134,807,552
//   d+c     = 5*64*8 + 2*64*8*128       = 2,560 + 131,072 = 133,632
//   touched = 8 (dense)
//   P       = 128*512 + 512*128 + 512 + 128 = 131,712;  bytes = 8*131,712*4 = 4,214,784
//   params  = 128*8 + 8 + 8*131,712     = 1,032 + 1,053,696 = 1,054,728
// DENSE:      {{^}}layer form act T D H E k|S router FLOPs expert FLOPs disp+comb FLOPs experts touched weight bytes params/token
// DENSE-NEXT: {{^}}moe.layer dense.mlir:10 dense gelu 64 128 512 8 8 131,584 134,807,552 133,632 8.00 4,214,784 1,054,728{{$}}
// DENSE-NOT:  total
//
// The same, decomposed: one row for the moe.expert_ffn, router from moe.route,
// softmax from moe.gate, combine from moe.combine: identical numbers.
// DENSE-CHAIN:      {{^}}layer form
// DENSE-CHAIN-NEXT: {{^}}moe.expert_ffn dense.mlir:10 chain dense gelu 64 128 512 8 8 131,584 134,807,552 133,632 8.00 4,214,784 1,054,728{{$}}
// DENSE-CHAIN-NOT:  moe.

// ===========================================================================
// dense.mlir after --moe-dense-to-moesart="k=2": k=2, everything else as above.
//   router  = 131,584 (unchanged: every token still computes all E logits)
//   experts = (64*2 = 128 rows) * 263,296 = 33,701,888        (1/4 of dense)
//   d+c     = 5*64*8 + 2*64*2*128 = 2,560 + 32,768 = 35,328
//   touched = 8*(1-(6/8)^64); 0.75^64 = e^(64*ln 0.75) = e^(-18.41) ~ 1.01e-8
//           -> 8 - 8.1e-8 -> "8.00"
//   bytes   = 4,214,784 * (1 - 1.01e-8) = 4,214,784 - 0.04 -> 4,214,784
//             (64 tokens over 8 experts hit all of them: same weight traffic)
//   params  = 1,032 + 2*131,712 = 1,032 + 263,424 = 264,456
// MOESART:      {{^}}layer form
// MOESART-NEXT: {{^}}moe.layer dense.mlir:10 moesart k=2 gelu 64 128 512 8 2 131,584 33,701,888 35,328 8.00 4,214,784 264,456{{$}}

// ===========================================================================
// dense.mlir after --moe-dense-to-soft (S=1, one group M=T=64, normalize):
// G=1 M=64 D=128 E=8 S=1, same experts (F=263,296, P=131,712).
//   router  = 2*1*64*128*8*1 + 3*1*64*128 + 3*128*8*1
//           = 131,072 + 24,576 + 3,072 = 158,720
//   experts = (E*G*S = 8 rows) * 263,296 = 2,106,368
//   d+c     = 2*8*1*1*64*128 + 2*1*64*8*1*128 + 10*1*64*8*1
//           = 131,072 + 131,072 + 5,120 = 267,264
//   touched = 8;  bytes = 8*131,712*4 = 4,214,784
//   params  = 128*8*1 + 8*131,712 = 1,024 + 1,053,696 = 1,054,720
//             (the router bias is dropped; every token mixes all experts)
// DSOFT:      {{^}}layer form
// DSOFT-NEXT: {{^}}moe.soft_layer dense.mlir:10 soft S=1 M=64 gelu 64 128 512 8 1 158,720 2,106,368 267,264 8.00 4,214,784 1,054,720{{$}}

// ===========================================================================
// soft.mlir: G=4 M=64 (T=256) D=128 E=8 S=2 H=512, gelu, b1, b2, normalize.
//   router  = 2*4*64*128*8*2 + 3*4*64*128 + 3*128*8*2
//           = 1,048,576 + 98,304 + 6,144 = 1,153,024
//   experts = (8*4*2 = 64 rows) * 263,296 = 16,850,944
//   d+c     = 2*8*2*4*64*128 + 2*4*64*8*2*128 + 10*4*64*8*2
//           = 1,048,576 + 1,048,576 + 40,960 = 2,138,112
//   touched = 8;  bytes = 8*131,712*4 = 4,214,784
//   params  = 128*8*2 + 8*131,712 = 2,048 + 1,053,696 = 1,055,744
// SOFT:      {{^}}layer form
// SOFT-NEXT: {{^}}moe.soft_layer soft.mlir:11 soft S=2 M=64 gelu 256 128 512 8 2 1,153,024 16,850,944 2,138,112 8.00 4,214,784 1,055,744{{$}}
// SOFT-CHAIN:      {{^}}layer form
// SOFT-CHAIN-NEXT: {{^}}moe.expert_ffn soft.mlir:11 chain soft S=2 M=64 gelu 256 128 512 8 2 1,153,024 16,850,944 2,138,112 8.00 4,214,784 1,055,744{{$}}
// SOFT-FUSED:      {{^}}layer form
// SOFT-FUSED-NEXT: {{^}}moe.fused_soft_experts soft.mlir:11 fused soft S=2 M=64 gelu 256 128 512 8 2 1,153,024 16,850,944 2,138,112 8.00 4,214,784 1,055,744{{$}}

// ===========================================================================
// moesart_train.mlir: T=64 D=128 H=256 E=16 k=2, relu, b1, b2, router bias, training.
//   router  = 2*64*128*16 + 64*16 = 262,144 + 1,024 = 263,168
//   F       = 2*128*256 + 2*256*128 + 256 + 256 + 128 = 131,072 + 640 = 131,712
//   experts = (64*2 = 128 rows) * 131,712 = 16,859,136
//   d+c     = 5*64*16 + 2*64*2*128 = 5,120 + 32,768 = 37,888
//   touched = 16*(1-(14/16)^64); 0.875^64 = e^(64*ln 0.875) = e^(-8.546) ~ 1.943e-4
//           = 16 - 0.00311 = 15.997 -> "16.00"
//   P       = 128*256 + 256*128 + 256 + 128 = 65,920;  16*P*4 = 4,218,880
//   bytes   = 4,218,880 * (1 - 1.943e-4) = 4,218,880 - 819.8 = 4,218,060.2 -> 4,218,060
//   params  = 128*16 + 16 + 2*65,920 = 2,064 + 131,840 = 133,904
// TRAIN:      {{^}}layer form
// TRAIN-NEXT: {{^}}moe.layer moesart_train.mlir:11 moesart k=2 train relu 64 128 256 16 2 263,168 16,859,136 37,888 16.00 4,218,060 133,904{{$}}

// ===========================================================================
// top2_swiglu.mlir: T=32 D=256 H=512 (W1 has 2H = 1,024 columns) E=8 k=2,
// swiglu, no biases, no router bias.
//   router  = 2*32*256*8 = 131,072
//   F       = 2*256*1,024 + 2*512*256 + 1,024 (silu on H + gating multiply on H)
//           = 524,288 + 262,144 + 1,024 = 787,456
//   experts = (32*2 = 64 rows) * 787,456 = 50,397,184
//   d+c     = 5*32*8 + 2*32*2*256 = 1,280 + 32,768 = 34,048
//   touched = 8*(1-0.75^32); 0.75^32 = 3^32/2^64 = 1,853,020,188,851,841/2^64
//           ~ 1.0045e-4 -> 8 - 0.0008 = 7.9992 -> "8.00"
//   P       = 256*1,024 + 512*256 = 393,216;  8*P*4 = 12,582,912 = 3*2^22
//   bytes   = 12,582,912 - 3*2^22*3^32/2^64 = 12,582,912 - 3^33/2^42
//           = 12,582,912 - 1,263.98 = 12,581,648.02 -> 12,581,648
//   params  = 256*8 + 2*393,216 = 2,048 + 786,432 = 788,480
// SWIGLU:      {{^}}layer form
// SWIGLU-NEXT: {{^}}moe.layer top2_swiglu.mlir:7 top_k k=2 swiglu 32 256 512 8 2 131,072 50,397,184 34,048 8.00 12,581,648 788,480{{$}}
// SWIGLU-CHAIN:      {{^}}layer form
// SWIGLU-CHAIN-NEXT: {{^}}moe.expert_ffn top2_swiglu.mlir:7 chain top_k k=2 swiglu 32 256 512 8 2 131,072 50,397,184 34,048 8.00 12,581,648 788,480{{$}}
// SWIGLU-FUSED:      {{^}}layer form
// SWIGLU-FUSED-NEXT: {{^}}moe.fused_experts top2_swiglu.mlir:7 fused top_k k=2 swiglu 32 256 512 8 2 131,072 50,397,184 34,048 8.00 12,581,648 788,480{{$}}

// ===========================================================================
// block.mlir: two dense layers, T=128 D=64 H=256 E=4, gelu, no biases.
//   router  = 2*128*64*4 = 65,536
//   F       = 2*64*256 + 2*256*64 + 256 = 65,536 + 256 = 65,792
//   experts = (128*4 = 512 rows) * 65,792 = 33,685,504
//   d+c     = 5*128*4 + 2*128*4*64 = 2,560 + 65,536 = 68,096
//   P       = 64*256 + 256*64 = 32,768;  bytes = 4*32,768*4 = 524,288
//   params  = 64*4 + 4*32,768 = 256 + 131,072 = 131,328
//   total   = twice each: 131,072  67,371,008  136,192  8.00  1,048,576  262,656
// BLOCK:      {{^}}layer form
// BLOCK-NEXT: {{^}}moe.layer block.mlir:11 dense gelu 128 64 256 4 4 65,536 33,685,504 68,096 4.00 524,288 131,328{{$}}
// BLOCK-NEXT: {{^}}moe.layer block.mlir:16 dense gelu 128 64 256 4 4 65,536 33,685,504 68,096 4.00 524,288 131,328{{$}}
// BLOCK-NEXT: {{^}}total 131,072 67,371,008 136,192 8.00 1,048,576 262,656{{$}}

// ===========================================================================
// Hand-written: a fused_experts fed by moe.route / moe.gate (so the row has
// the router and the softmax). T=4 D=16 H=32 E=8 k=2, relu, b1, b2, no router
// bias, f32.
//   router  = 2*4*16*8 = 1,024
//   F       = 2*16*32 + 2*32*16 + 32 + 32 + 16 = 2,048 + 80 = 2,128
//   experts = (4*2 = 8 rows) * 2,128 = 17,024
//   d+c     = 5*4*8 + 2*4*2*16 = 160 + 256 = 416
//   touched = 8*(1-(3/4)^4) = 8*(1 - 81/256) = 8*175/256 = 5.46875 -> "5.47"
//   P       = 16*32 + 32*16 + 32 + 16 = 1,072
//   bytes   = 5.46875 * 1,072 * 4 = 5.46875 * 4,288 = 21,440 + 2,010 = 23,450
//   params  = 16*8 + 2*1,072 = 128 + 2,144 = 2,272
// CHECK:      {{^}}layer form act T D H E k|S router FLOPs expert FLOPs disp+comb FLOPs experts touched weight bytes params/token
// CHECK-NEXT: {{^}}moe.fused_experts moe-print-cost.mlir:[[@LINE+7]] fused top_k k=2 relu 4 16 32 8 2 1,024 17,024 416 5.47 23,450 2,272{{$}}
// CHECK-NOT:  total
func.func @fused_routed(%x: tensor<4x16xf32>, %wr: tensor<16x8xf32>,
                        %w1: tensor<8x16x32xf32>, %w2: tensor<8x32x16xf32>,
                        %b1: tensor<8x32xf32>, %b2: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %o = moe.route %x router(%wr) : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %w, %i = moe.gate %o {routing = #moe.top_k<k = 2>} : (tensor<4x8xf32>) -> (tensor<4x2xf32>, tensor<4x2xi32>)
  %y = moe.fused_experts %x, %i, %w experts(%w1, %w2) expert_biases(%b1, %b2)
         {num_experts = 8 : i64, activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<4x2xi32>, tensor<4x2xf32>, tensor<8x16x32xf32>,
            tensor<8x32x16xf32>, tensor<8x32xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// The same layer as a moe.layer (same numbers), and a bf16 copy (2 bytes per
// element): bytes = 5.46875 * 1,072 * 2 = 11,725. Total:
//   router 1,024*2 = 2,048; experts 17,024*2 = 34,048; d+c 416*2 = 832;
//   touched 5.46875*2 = 10.9375 -> "10.94"; bytes 23,450 + 11,725 = 35,175;
//   params 2,272*2 = 4,544.
// CHECK:      {{^}}layer form
// CHECK-NEXT: {{^}}moe.layer moe-print-cost.mlir:[[@LINE+9]] top_k k=2 relu 4 16 32 8 2 1,024 17,024 416 5.47 23,450 2,272{{$}}
// CHECK-NEXT: {{^}}moe.layer moe-print-cost.mlir:[[@LINE+12]] top_k k=2 relu 4 16 32 8 2 1,024 17,024 416 5.47 11,725 2,272{{$}}
// CHECK-NEXT: {{^}}total 2,048 34,048 832 10.94 35,175 4,544{{$}}
func.func @layers(%x: tensor<4x16xf32>, %wr: tensor<16x8xf32>,
                  %w1: tensor<8x16x32xf32>, %w2: tensor<8x32x16xf32>,
                  %b1: tensor<8x32xf32>, %b2: tensor<8x16xf32>,
                  %xh: tensor<4x16xbf16>, %wrh: tensor<16x8xbf16>,
                  %w1h: tensor<8x16x32xbf16>, %w2h: tensor<8x32x16xbf16>,
                  %b1h: tensor<8x32xbf16>, %b2h: tensor<8x16xbf16>) -> (tensor<4x16xf32>, tensor<4x16xbf16>) {
  %y = moe.layer %x router(%wr) experts(%w1, %w2) expert_biases(%b1, %b2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<8x16x32xf32>, tensor<8x32x16xf32>,
            tensor<8x32xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %yh = moe.layer %xh router(%wrh) experts(%w1h, %w2h) expert_biases(%b1h, %b2h)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<4x16xbf16>, tensor<16x8xbf16>, tensor<8x16x32xbf16>, tensor<8x32x16xbf16>,
            tensor<8x32xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  return %y, %yh : tensor<4x16xf32>, tensor<4x16xbf16>
}

// -----

// A fused_experts whose indices and weights are arguments: no router, no
// softmax ("-" router; d+c is the combine only). T=8 D=16 H=32 E=4 k=2,
// relu, no biases, capacity factor 0.5: C = ceil(0.5*8*2/4) = 2 per expert, so
// at most 4*2 = 8 of the 16 assignments are kept.
//   F       = 2*16*32 + 2*32*16 + 32 = 2,048 + 32 = 2,080
//   experts = 8 rows * 2,080 = 16,640
//   d+c     = 2*8*2*16 = 512
//   touched = 4*(1-(2/4)^8) = 4*255/256 = 3.984375 -> "3.98"
//   P       = 16*32 + 32*16 = 1,024;  bytes = 3.984375*1,024*4 = 16,384 - 64 = 16,320
//   params  = 2*1,024 = 2,048 (no router in the row)
// CHECK:      {{^}}layer form
// CHECK-NEXT: {{^}}moe.fused_experts moe-print-cost.mlir:[[@LINE+4]] fused k=2 cf=0.5 relu 8 16 32 4 2 - 16,640 512 3.98 16,320 2,048{{$}}
// CHECK-NOT:  total
func.func @fused_bare(%x: tensor<8x16xf32>, %i: tensor<8x2xi32>, %w: tensor<8x2xf32>,
                      %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<8x16xf32> {
  %y = moe.fused_experts %x, %i, %w experts(%w1, %w2)
         {num_experts = 4 : i64, activation = #moe.activation<relu>, capacity_factor = 0.5 : f64}
         : (tensor<8x16xf32>, tensor<8x2xi32>, tensor<8x2xf32>, tensor<4x16x32xf32>,
            tensor<4x32x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// A fused_soft_experts: G=2 M=8 (T=16) D=16 E=4 S=2 H=32, gelu, no biases,
// no normalize (scale is not counted).
//   router  = 2*2*8*16*4*2 = 4,096
//   F       = 2*16*32 + 2*32*16 + 32 = 2,080
//   experts = (4*2*2 = 16 rows) * 2,080 = 33,280
//   d+c     = 2*4*2*2*8*16 + 2*2*8*4*2*16 + 10*2*8*4*2 = 4,096 + 4,096 + 1,280 = 9,472
//   touched = 4;  P = 1,024;  bytes = 4*1,024*4 = 16,384
//   params  = 16*4*2 + 4*1,024 = 128 + 4,096 = 4,224
// CHECK:      {{^}}layer form
// CHECK-NEXT: {{^}}moe.fused_soft_experts moe-print-cost.mlir:[[@LINE+4]] fused soft S=2 M=8 gelu 16 16 32 4 2 4,096 33,280 9,472 4.00 16,384 4,224{{$}}
// CHECK-NOT:  total
func.func @fused_soft(%x: tensor<2x8x16xf32>, %phi: tensor<16x4x2xf32>, %s: tensor<f32>,
                      %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<2x8x16xf32> {
  %y = moe.fused_soft_experts %x slots(%phi) scale(%s) experts(%w1, %w2)
         {activation = #moe.activation<gelu>}
         : (tensor<2x8x16xf32>, tensor<16x4x2xf32>, tensor<f32>, tensor<4x16x32xf32>,
            tensor<4x32x16xf32>) -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// -----

// Dynamic T: every product that needs T is "?". D=16 H=32 E=8, relu, no biases
// (P = 1,024).
//   top_k k=2: touched needs T -> "?", so bytes "?";
//              params = 16*8 + 2*1,024 = 2,176
//   dense:     k = E = 8, touched = 8 for any T >= 1; bytes = 8*1,024*4 = 32,768;
//              params = 16*8 + 8*1,024 = 8,320
//   total: "?" where a row has "?"; params 2,176 + 8,320 = 10,496
// CHECK:      {{^}}layer form
// CHECK-NEXT: {{^}}moe.layer moe-print-cost.mlir:[[@LINE+6]] top_k k=2 relu ? 16 32 8 2 ? ? ? ? ? 2,176{{$}}
// CHECK-NEXT: {{^}}moe.layer moe-print-cost.mlir:[[@LINE+9]] dense relu ? 16 32 8 8 ? ? ? 8.00 32,768 8,320{{$}}
// CHECK-NEXT: {{^}}total ? ? ? ? ? 10,496{{$}}
func.func @dynamic_t(%x: tensor<?x16xf32>, %wr: tensor<16x8xf32>,
                     %w1: tensor<8x16x32xf32>, %w2: tensor<8x32x16xf32>)
    -> (tensor<?x16xf32>, tensor<?x16xf32>) {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<relu>}
         : (tensor<?x16xf32>, tensor<16x8xf32>, tensor<8x16x32xf32>, tensor<8x32x16xf32>)
         -> tensor<?x16xf32>
  %z = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.dense, activation = #moe.activation<relu>}
         : (tensor<?x16xf32>, tensor<16x8xf32>, tensor<8x16x32xf32>, tensor<8x32x16xf32>)
         -> tensor<?x16xf32>
  return %y, %z : tensor<?x16xf32>, tensor<?x16xf32>
}

// -----

// A moe.expert_ffn whose rows do not come from a dispatch: only the expert
// FLOPs of its 10 rows are known: 10 * 2,080 = 20,800 (D=16 H=32 E=4, relu).
// CHECK:      {{^}}layer form
// CHECK-NEXT: {{^}}moe.expert_ffn moe-print-cost.mlir:[[@LINE+3]] expert_ffn relu ? 16 32 4 ? - 20,800 - ? ? ?{{$}}
func.func @bare_ffn(%rows: tensor<10x16xf32>, %off: tensor<5xi32>,
                    %w1: tensor<4x16x32xf32>, %w2: tensor<4x32x16xf32>) -> tensor<10x16xf32> {
  %y = moe.expert_ffn %rows, %off experts(%w1, %w2)
         {activation = #moe.activation<relu>}
         : (tensor<10x16xf32>, tensor<5xi32>, tensor<4x16x32xf32>, tensor<4x32x16xf32>)
         -> tensor<10x16xf32>
  return %y : tensor<10x16xf32>
}

// -----

// No MoE layer: the header and a note.
// CHECK:      {{^}}layer form
// CHECK-NEXT: {{^}}(no MoE layers){{$}}
func.func @none(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// qwen_style (T=48 D=128 E=16 k=4 H=64 swiglu, shared Hs=192 with a gate),
// by hand: routed rows 48*4 = 192 of 2*128*128 + 2*64*128 + 128 = 49,280
// FLOPs (9,461,760); the shared expert on 48 tokens: 2*128*384 + 2*192*128 +
// 384 + the gate (2*128 + 4) = 148,100 FLOPs per token (7,108,800); sum
// 16,570,560. Active parameters: 4*24,576 + 16*128 (router) + 73,856
// (shared: 128*384 + 192*128 + 128) = 174,208.
// QWEN: moe.layer qwen_style.mlir:11  top_k k=4 +shared(gated)  swiglu  48  128  64  16    4       196,608    16,570,560           52,992            16.00     1,868,286       174,208
// QWEN-FUSED: moe.fused_experts qwen_style.mlir:11  fused top_k k=4 +shared(gated)  swiglu  48  128  64  16    4       196,608    16,570,560           52,992            16.00     1,868,286       174,208
// DeepSeek-style: dynamic T, so only the per-token parameters are known:
// 4*(256*256 + 128*256) experts + the router 256*32 + the
// shared expert 256*512 + 256*256: 393,216 + 8,192 + 196,608 = 598,016.
// DEEPSEEK: moe.layer deepseek_style.mlir:12  top_k k=4 sigmoid groups=2/4 +shared  swiglu  ?  256  128  32    4             ?             ?                ?                ?             ?       598,016
