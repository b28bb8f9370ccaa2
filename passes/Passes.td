//===- Passes.td - moe-to-moe transformations --------------*- tablegen -*-===//
//
// The moe-to-moe passes of DESIGN.md section 4 (decomposition, dense->MOESART,
// dense->Soft, fusion, cost analysis) are declared here as they land; the
// generated registerMoEPasses() is what moe-opt and the plugin call.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_PASSES_TD
#define MOE_PASSES_TD

include "mlir/Pass/PassBase.td"

#endif // MOE_PASSES_TD
