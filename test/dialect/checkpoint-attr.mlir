// RUN: moe-opt %s | FileCheck %s
// RUN: moe-opt %s | moe-opt | FileCheck %s
// RUN: moe-opt %s --mlir-print-op-generic | moe-opt | FileCheck %s
//
// #moe.checkpoint on function arguments: per-expert names with {e},
// transposed and concatenated; a plain list; the string form alongside.

// CHECK-LABEL: func.func @layer_3
// CHECK-SAME: tensor<4x8xbf16> {moe.param = #moe.checkpoint<["model.layers.3.block_sparse_moe.gate.weight"], transpose>}
// CHECK-SAME: tensor<8x4x32xbf16> {moe.param = #moe.checkpoint<["model.layers.3.block_sparse_moe.experts.{e}.w1.weight", "model.layers.3.block_sparse_moe.experts.{e}.w3.weight"], transpose>}
// CHECK-SAME: tensor<8x16x4xbf16> {moe.param = #moe.checkpoint<["model.layers.3.block_sparse_moe.experts.{e}.w2.weight"], transpose>}
// CHECK-SAME: tensor<8xf32> {moe.param = #moe.checkpoint<["gate.e_score_correction_bias"]>}
// CHECK-SAME: tensor<8x16xf32> {moe.param = #moe.checkpoint<["b.{e}", "c.{e}"]>}
// CHECK-SAME: tensor<4xf32> {moe.param = "plain.name"}
// CHECK-SAME: tensor<4x32xbf16> {moe.param = #moe.checkpoint<["sh.gate.weight", "sh.up.weight"], transpose, fp8_scales = ["sh.gate.weight_scale_inv", "sh.up.weight_scale_inv"], block = [128, 64]>}
// CHECK-SAME: tensor<2x4x4xf32> {moe.param = #moe.checkpoint<["q.{e}"], fp8_scales = ["q.{e}.s"], block = [1, 2]>}
func.func @layer_3(%x: tensor<?x4xbf16>,
    %wr: tensor<4x8xbf16> {moe.param = #moe.checkpoint<["model.layers.3.block_sparse_moe.gate.weight"], transpose>},
    %w1: tensor<8x4x32xbf16> {moe.param = #moe.checkpoint<[
        "model.layers.3.block_sparse_moe.experts.{e}.w1.weight",
        "model.layers.3.block_sparse_moe.experts.{e}.w3.weight"], transpose>},
    %w2: tensor<8x16x4xbf16> {moe.param = #moe.checkpoint<["model.layers.3.block_sparse_moe.experts.{e}.w2.weight"], transpose>},
    %bias: tensor<8xf32> {moe.param = #moe.checkpoint<["gate.e_score_correction_bias"]>},
    %b1: tensor<8x16xf32> {moe.param = #moe.checkpoint<["b.{e}", "c.{e}"]>},
    %p: tensor<4xf32> {moe.param = "plain.name"},
    %s1: tensor<4x32xbf16> {moe.param = #moe.checkpoint<["sh.gate.weight", "sh.up.weight"], transpose,
        fp8_scales = ["sh.gate.weight_scale_inv", "sh.up.weight_scale_inv"], block = [128, 64]>},
    %q: tensor<2x4x4xf32> {moe.param = #moe.checkpoint<["q.{e}"], fp8_scales = ["q.{e}.s"], block = [1, 2]>}) -> tensor<?x4xbf16> {
  %y = moe.layer %x router(%wr) experts(%w1, %w2)
         {routing = #moe.top_k<k = 2>, activation = #moe.activation<swiglu>}
         : (tensor<?x4xbf16>, tensor<4x8xbf16>, tensor<8x4x32xbf16>, tensor<8x16x4xbf16>) -> tensor<?x4xbf16>
  return %y : tensor<?x4xbf16>
}

// A declaration carries it too.
// CHECK-LABEL: func.func private @decl
// CHECK-SAME: tensor<2x3xf32> {moe.param = #moe.checkpoint<["w.{e}"]>}
func.func private @decl(tensor<2x3xf32> {moe.param = #moe.checkpoint<["w.{e}"]>})

// int4 codes unpacked at load (one code per byte of an i4 argument), the
// packing of each writer; transposed after unpacking.
// CHECK-LABEL: func.func private @int4
// CHECK-SAME: tensor<2x16x8xi4> {moe.param = #moe.checkpoint<["e.{e}.gate_proj.qweight"], int4 = gptq>}
// CHECK-SAME: tensor<2x1x8xi4> {moe.param = #moe.checkpoint<["e.{e}.gate_proj.qzeros"], int4 = gptq_zeros>}
// CHECK-SAME: tensor<2x16x8xi4> {moe.param = #moe.checkpoint<["e.{e}.up_proj.qweight"], int4 = awq>}
// CHECK-SAME: tensor<2x16x8xi4> {moe.param = #moe.checkpoint<["e.{e}.down_proj.weight_packed"], transpose, int4 = pack_quantized>}
func.func private @int4(tensor<2x16x8xi4> {moe.param = #moe.checkpoint<["e.{e}.gate_proj.qweight"], int4 = gptq>},
                        tensor<2x1x8xi4> {moe.param = #moe.checkpoint<["e.{e}.gate_proj.qzeros"], int4 = gptq_zeros>},
                        tensor<2x16x8xi4> {moe.param = #moe.checkpoint<["e.{e}.up_proj.qweight"], int4 = awq>},
                        tensor<2x16x8xi4> {moe.param = #moe.checkpoint<["e.{e}.down_proj.weight_packed"], transpose, int4 = pack_quantized>})

// int4 weights dequantized at load into values (a shared expert): the
// packing, the scales and zero points beside each name, the group.
// CHECK-LABEL: func.func private @int4_values
// CHECK-SAME: tensor<16x16xbf16> {moe.param = #moe.checkpoint<["sh.gate_proj.qweight", "sh.up_proj.qweight"], int4 = gptq, int4_scales = ["sh.gate_proj.scales", "sh.up_proj.scales"], int4_zeros = ["sh.gate_proj.qzeros", "sh.up_proj.qzeros"], group = 8>}
// CHECK-SAME: tensor<8x16xf32> {moe.param = #moe.checkpoint<["sh.down_proj.weight_packed"], int4 = pack_quantized, int4_scales = ["sh.down_proj.weight_scale"], group = 4>}
// CHECK-SAME: tensor<2x16x8xf16> {moe.param = #moe.checkpoint<["e.{e}.qweight"], int4 = awq, int4_scales = ["e.{e}.scales"], int4_zeros = ["e.{e}.qzeros"], group = 16>}
func.func private @int4_values(
    tensor<16x16xbf16> {moe.param = #moe.checkpoint<["sh.gate_proj.qweight", "sh.up_proj.qweight"], int4 = gptq,
        int4_scales = ["sh.gate_proj.scales", "sh.up_proj.scales"],
        int4_zeros = ["sh.gate_proj.qzeros", "sh.up_proj.qzeros"], group = 8>},
    tensor<8x16xf32> {moe.param = #moe.checkpoint<["sh.down_proj.weight_packed"], group = 4,
        int4_scales = ["sh.down_proj.weight_scale"], int4 = pack_quantized>},
    tensor<2x16x8xf16> {moe.param = #moe.checkpoint<["e.{e}.qweight"], int4 = awq, int4_scales = ["e.{e}.scales"], int4_zeros = ["e.{e}.qzeros"], group = 16>})
