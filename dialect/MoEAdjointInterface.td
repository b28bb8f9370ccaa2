//===- MoEAdjointInterface.td - reverse-mode rules of ops --*- tablegen -*-===//
//
// The op interface --moe-generate-vjp differentiates through (docs/spec.md
// §9): every differentiable op states its adjoint, the moe ops in ODS, the
// upstream ops through external models (passes/UpstreamAdjoints.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MOE_ADJOINT_INTERFACE_TD
#define MOE_ADJOINT_INTERFACE_TD

include "mlir/IR/OpBase.td"

def MoE_AdjointOpInterface : OpInterface<"AdjointOpInterface"> {
  let cppNamespace = "::mlir::moe";
  let description = [{
    The reverse-mode rule of an op: given the cotangents of its results,
    build the cotangents of its operands (the vector-Jacobian product of the
    op's forward, its discrete choices held fixed).

    Conventions, which every implementation follows and --moe-generate-vjp
    relies on:
    * the cotangent of a floating-point tensor value is an f32 tensor of the
      same shape, whatever the value's element type: gradients accumulate in
      f32 and are rounded once, when they are returned (docs/spec.md §9);
    * a null cotangent is zero (a result nothing downstream depends on);
    * operands of integer or index type (expert ids, plans, seeds) get no
      cotangent (null); so may a floating-point operand whose gradient is
      identically zero (`selection_bias`), which the pass then returns as
      zeros;
    * the rule builds at the builder's insertion point, after the op, and
      may read the op's operands and results (the forward's values: the
      routing it chose, the plan it built), never rebuild them.
  }];
  let methods = [
    InterfaceMethod<[{
        Why the op cannot be differentiated as it stands, or an empty string
        when it can (for example, an attribute combination whose adjoint is
        not defined).
      }], "std::string", "whyNotDifferentiable", (ins), "",
      [{ return std::string(); }]>,
    InterfaceMethod<[{
        Builds the cotangents of the op's operands into `operandCotangents`
        (resized to the number of operands; null where none), given
        `resultCotangents` (one per result, null for zero; at least one is
        not null).
      }], "::llvm::LogicalResult", "buildAdjoint",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultCotangents,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandCotangents)>,
  ];
}

#endif // MOE_ADJOINT_INTERFACE_TD
