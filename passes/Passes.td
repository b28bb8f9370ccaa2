//===- Passes.td - moe-to-moe transformations --------------*- tablegen -*-===//
//
// The moe-to-moe passes of DESIGN.md section 4.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_TD
#define MOE_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoEDecompose : Pass<"moe-decompose"> {
  let summary = "Decompose MoE layers into the route/gate/dispatch/expert/combine chain";
  let description = [{
    Rewrites every `moe.layer` into

        %o = moe.route %x router(%wr[, %br])
        %w, %i[, %loss] = moe.gate %o [seed(%seed)] {routing, [training]}
        %rows, %offsets, %src, %pos = moe.dispatch %x, %i {num_experts = E[, capacity_factor]}
        %out = moe.expert_ffn %rows, %offsets experts(%w1, %w2) [expert_biases(%b1, %b2)]
        %y = moe.combine %out, %w, %pos

    and every `moe.soft_layer` into `moe.soft_dispatch`, `moe.expert_ffn`,
    `moe.soft_combine`. Results are equal by construction: each chain op is
    defined as the corresponding part of the layer's semantics. A layer whose
    number of experts E is not static is left unchanged with a warning (the
    dispatch plan needs E).
  }];
  let dependentDialects = ["::mlir::moe::MoEDialect"];
}

#endif // MOE_PASSES_TD
