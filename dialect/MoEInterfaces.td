//===- MoEInterfaces.td - moe dialect interfaces -----------*- tablegen -*-===//

#ifndef MOE_INTERFACES_TD
#define MOE_INTERFACES_TD

include "mlir/IR/OpBase.td"

def MoE_RoutingAttrInterface : AttrInterface<"RoutingAttrInterface"> {
  let cppNamespace = "::mlir::moe";
  let description = [{
    A token-choice routing policy of a `moe.layer`. Given router logits
    `o = x Wr + br` and `g = softmax(o)` per token, the policy decides which
    experts S_t a token runs and with which weights; passes and lowering query
    it through this interface rather than through the concrete attribute.
  }];
  let methods = [
    InterfaceMethod<[{
        Number of experts each token runs, for a layer with `numExperts`
        experts (E for dense routing, k otherwise).
      }], "int64_t", "getExpertsPerToken", (ins "int64_t":$numExperts)>,
    InterfaceMethod<[{
        The fixed number of experts per token k, or std::nullopt for routings
        that run every expert.
      }], "std::optional<int64_t>", "getFixedK">,
    InterfaceMethod<[{
        Whether the policy samples experts at random in the given mode (and so
        consumes the layer's `seed`).
      }], "bool", "isSampling", (ins "bool":$training)>,
    InterfaceMethod<[{
        The regularizer whose value the layer returns as its auxiliary loss in
        training mode (`Regularizer::none`: the loss is 0).
      }], "::mlir::moe::Regularizer", "getRegularizer">,
    InterfaceMethod<[{
        Coefficient (lambda) of the regularizer; 0 when there is none.
      }], "double", "getRegularizerCoefficient">,
    InterfaceMethod<[{
        Checks the policy against a layer with `numExperts` experts (may be
        ShapedType::kDynamic) in the given mode; reports through `emitError`.
      }], "::llvm::LogicalResult", "verifyForLayer",
      (ins "int64_t":$numExperts, "bool":$training,
           "::llvm::function_ref<::mlir::InFlightDiagnostic()>":$emitError)>,
  ];
}

#endif // MOE_INTERFACES_TD
