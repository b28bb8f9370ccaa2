//===- Passes.td - moe lowering passes ---------------------*- tablegen -*-===//

#ifndef MOE_LOWERING_PASSES_TD
#define MOE_LOWERING_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertMoEToLinalg : Pass<"convert-moe-to-linalg"> {
  let summary = "Lower every moe op to linalg/tensor/scf/arith/math";
  let description = [{
    Lowers layers (through the decomposition of `--moe-decompose`) and the
    chain ops to upstream dialects only, so the result verifies in a stock
    `mlir-opt` without the moe plugin:

    * `moe.route`: a matmul (`linalg.generic`, loops ordered m, k, n so the
      innermost loop is contiguous) plus the bias;
    * `moe.gate`: an `scf.for` over tokens; softmax with max-subtraction,
      top-k by rank (ties: lower index), MOESART adjustments, Philox4x32-10
      sampling and the trimmed-lasso loss, in f32, exactly as DESIGN.md 3.1;
    * `moe.dispatch`: counting pass, prefix sum, permutation (GShard capacity
      when `capacity_factor` is set);
    * `moe.expert_ffn`: an `scf.for` over experts, each a GEMM pair on its
      row group (`tensor.extract_slice` with dynamic sizes) with bias and
      activation;
    * `moe.combine`, `moe.soft_dispatch`, `moe.soft_combine`: `linalg.generic`
      reductions (softmaxes with max-subtraction).

    The CPU lowering computes in f32; f16/bf16 layers are reported as not yet
    supported.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect", "::mlir::moe::MoEDialect"
  ];
}

#endif // MOE_LOWERING_PASSES_TD
