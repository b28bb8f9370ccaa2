//===- MoEDialect.td - the moe dialect ---------------------*- tablegen -*-===//
//
// The `moe` dialect: Mixture-of-Experts layers, their routers and (later) the
// explicit dispatch -> expert -> combine chain. See docs/spec.md §2-§3.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_DIALECT_TD
#define MOE_DIALECT_TD

include "mlir/IR/OpBase.td"

def MoE_Dialect : Dialect {
  let name = "moe";
  let cppNamespace = "::mlir::moe";
  let summary = "Mixture-of-Experts layers, routers and their decomposition";
  let description = [{
    The `moe` dialect represents Mixture-of-Experts (MoE) layers at the level
    an ML compiler sees them: one op per layer (`moe.layer` for token-choice
    routing, `moe.soft_layer` for Soft MoE), whose routing policy is an
    attribute implementing `RoutingAttrInterface`.

    Notation used throughout: T tokens, D model width, E experts, H expert
    hidden width, k experts per token. An expert is the FFN

        f_e(x) = act(x W1[e] + b1[e]) W2[e] + b2[e]

    with `W1: [E, D, H]`, `W2: [E, H, D]` and optional biases `b1: [E, H]`,
    `b2: [E, D]`. Gated activations (`swiglu`, `geglu`) take `W1: [E, D, 2H]`
    (and `b1: [E, 2H]`): `u = x W1[e] + b1[e]`, `h = act(u[:, :H]) * u[:, H:]`
    with act = silu / gelu.

    Dialect attributes:
    * `moe.param = "name"` on a function argument: the argument is a
      parameter bound by name from a `.safetensors` file (or any file of a
      checkpoint given to `moe-run --params`).
    * `moe.param = #moe.checkpoint<["name", ...], transpose>` on a function
      argument: the parameter is assembled at load time from checkpoint
      tensors as they are on disk (per-expert tensors stacked over `{e}`,
      optionally transposed, concatenated along the last dimension); see
      `#moe.checkpoint` below.
    * `moe.causal` (unit) on a `moe.layer`: the layer belongs to a causal
      (decoder) model; it may be sparsified but never turned into Soft MoE,
      which mixes tokens across positions.
    * `moe.cpu_config = #moe.cpu_config<...>` on an op whose CPU lowering
      emits grouped GEMMs: how it is emitted (vector width, register and
      cache blocking); attached by `--moe-cpu-configure`, or by the user to
      override that choice.
    * `moe.gpu_config = #moe.gpu_config<...>` likewise for the GPU lowering
      (tensor-core engine, tiles, split-K, pipeline stages); attached by
      `--moe-gpu-configure`.
    * The markers the GPU lowering leaves between its passes (docs/gpu.md):
      `moe.gpu_kernel = @moe_kernels::@k` on a launch placeholder function,
      `moe.gpu_dynamic_shared_memory = N : i64` (bytes) on a kernel,
      `moe.gpu_device_result` (unit) on a `gpu.alloc` holding a moe op's
      result in device memory, `moe.gpu_device_elementwise` (unit) on an
      element-wise `linalg.generic` that runs on the device, and
      `moe.gpu_stream_ordered` (unit) on a public function whose work is
      left on the caller's stream.
  }];
  // Reified result shapes (ReifyRankedShapedTypeOpInterface) are tensor.dim
  // and arith.muli ops.
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Name of the function-argument attribute binding a parameter by name.
    static constexpr ::llvm::StringLiteral getParamAttrName() {
      return ::llvm::StringLiteral("moe.param");
    }
    /// Name of the unit attribute that marks a layer as causal.
    static constexpr ::llvm::StringLiteral getCausalAttrName() {
      return ::llvm::StringLiteral("moe.causal");
    }
    /// The gpu.module that the GPU lowering's kernels go into.
    static constexpr ::llvm::StringLiteral getGpuKernelModuleName() {
      return ::llvm::StringLiteral("moe_kernels");
    }
    /// The markers of the GPU lowering (see the description).
    static constexpr ::llvm::StringLiteral getGpuKernelAttrName() {
      return ::llvm::StringLiteral("moe.gpu_kernel");
    }
    static constexpr ::llvm::StringLiteral getGpuDynamicSharedMemoryAttrName() {
      return ::llvm::StringLiteral("moe.gpu_dynamic_shared_memory");
    }
    static constexpr ::llvm::StringLiteral getGpuDeviceResultAttrName() {
      return ::llvm::StringLiteral("moe.gpu_device_result");
    }
    static constexpr ::llvm::StringLiteral getGpuDeviceElementwiseAttrName() {
      return ::llvm::StringLiteral("moe.gpu_device_elementwise");
    }
    static constexpr ::llvm::StringLiteral getGpuStreamOrderedAttrName() {
      return ::llvm::StringLiteral("moe.gpu_stream_ordered");
    }
  private:
    void registerAttributes();
  public:
  }];
}

class MoE_Op<string mnemonic, list<Trait> traits = []>
    : Op<MoE_Dialect, mnemonic, traits>;

#endif // MOE_DIALECT_TD
