//===- Passes.td - the GPU lowering passes ----------------*- tablegen -*-===//
//
// The passes of MoEGpuLowering (lowering/gpu/Passes.h); MoEGpuLoweringIncGen generates
// their declarations, registration and C API.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LOWERING_GPU_PASSES_TD
#define MOE_LOWERING_GPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def MoEGPUKernelModule : Pass<"moe-gpu-kernel-module", "::mlir::ModuleOp"> {
  let summary = "Create the empty gpu.module @moe_kernels that the MoE kernels go into";
  let description = [{
    When the module holds a moe op and no `gpu.module @moe_kernels`, adds an
    empty one (and marks the module `gpu.container_module`), so that the
    target can be attached before anything is lowered:
    `--moe-nvptx-pipeline` runs this pass, then upstream's
    `--nvvm-attach-target="module=moe_kernels chip=..."`, then
    `--moe-gpu-configure`, which reads that target, then
    `--convert-moe-to-gpu`, which fills the module.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def MoEGPUConfigure : Pass<"moe-gpu-configure", "::mlir::ModuleOp"> {
  let summary = "Choose each op's GPU code-generation strategy from the #nvvm.target";
  let description = [{
    Attaches `moe.gpu_config = #moe.gpu_config<...>` to every op that takes
    a lowering configuration (`moe.layer`, `moe.soft_layer`, `moe.route`,
    `moe.expert_ffn`, `moe.shared_expert`, `moe.fused_experts`,
    `moe.fused_soft_experts`) and has none. The target is the first
    `#nvvm.target` of `gpu.module @moe_kernels` (see
    `--moe-gpu-kernel-module`); its SM version decides the engine with
    upstream's NVVM version rules (`NVVMCheckSMVersion`), never by matching
    the chip's name:

    | target | engine | big_tile_rows |
    | --- | --- | --- |
    | sm_90a (arch-accelerated sm_90) | `wgmma` | `big-tile-rows` |
    | sm_80 or newer | `mma_sync` | 0 |
    | older, or `tensor-cores=false` | `cuda_core` | 0 |

    `split_k`, `stages` and `groups_in_flight` are the options
    `decode-split-k`, `mma-stages` and `wgmma-groups-in-flight`, checked by
    the attribute's verifier (the error names the option's value). An
    existing `moe.gpu_config` is kept: that is how a user overrides the
    choice. A module with such ops but no target is an error.
  }];
  let options = [
    Option<"tensorCores", "tensor-cores", "bool", /*default=*/"true",
           "bf16/f16 expert GEMMs on tensor cores when the target has them "
           "(sm_80 or newer); false: the CUDA-core kernels">,
    Option<"bigTileRows", "big-tile-rows", "int64_t", /*default=*/"128",
           "With wgmma: routing plans with at least this many rows per "
           "expert on average (T*k/E) use 128-row tiles (two consumer "
           "warpgroups per block); 0: never (values below 64 act as 64)">,
    Option<"decodeSplitK", "decode-split-k", "int64_t", /*default=*/"0",
           "Split-K slices of a fused layer's 16-row (decode) tensor-core "
           "GEMMs: 0 = chosen from the shape (about 512 blocks per GEMM), "
           "1 = no split, N = N slices (at most 1024)">,
    Option<"mmaStages", "mma-stages", "int64_t", /*default=*/"0",
           "cp.async pipeline stages of the prefill (32- to 128-row) "
           "tensor-core GEMMs, their buffers in dynamic shared memory: 0 = "
           "the defaults (3 for mma.sync, 4 for wgmma; docs/gpu.md, "
           "\"Shared-memory budget\"), else 2 to 8">,
    Option<"wgmmaGroupsInFlight", "wgmma-groups-in-flight", "int64_t",
           /*default=*/"1",
           "With wgmma: commit groups of wgmma.mma_async left in flight at "
           "the end of a pipeline stage (wgmma.wait_group N): 1 = the math "
           "of a stage overlaps the next loads, 0 = every stage's wgmmas "
           "retired before the next loads">
  ];
  let dependentDialects = ["::mlir::moe::MoEDialect"];
}

def ConvertMoEToGPU : Pass<"convert-moe-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Lower every moe op to MoE GPU kernels and host launch code";
  let description = [{
    Rewrites every moe op (layers, chain ops, fused ops; training and
    inference) into host code on tensors that copies the operands to the
    device (`gpu.alloc`, `gpu.memcpy`), launches kernels built into
    `gpu.module @moe_kernels` and copies the results back into host tensors.
    A layer runs entirely on the device: router GEMM, routing (softmax,
    top-k or MOESART sampling with the CPU path's Philox stream, trimmed-lasso
    partial sums), alignment (counts, offsets, the permutation padded to the
    GEMM tile, GShard capacity), grouped GEMM 1 with the gather and the
    activation in its epilogue, grouped GEMM 2 with the routed weight in its
    epilogue, and a fixed-order per-token reduction (no float atomics). Soft
    MoE: logits GEMM, both softmaxes, slot GEMM, expert GEMMs, combine GEMM.
    The backward ops of `--moe-generate-vjp` (docs/spec.md §9) become the
    backward's kernels (docs/gpu.md "The backward"): grouped GEMMs through
    the transposed weights with the activation's backward in an epilogue,
    variable-K weight-gradient GEMMs with the bias gradients as one more row,
    the routing backward of the CPU path; every gradient summed in a fixed
    order.

    Launches are emitted as calls to `@__moe_launch_<kernel>` declarations
    (see `--moe-gpu-materialize-launches`), so that the upstream buffer
    deallocation can run on the host code. Element types f32, bf16 and f16
    (docs/spec.md §2-§3): kernels read and write the data's type and compute in f32;
    routing values are f32; h, slot inputs and y are rounded to T where the
    CPU path rounds them.

    With `device-abi=true` (the ABI of `moe-compile --target=cuda`, see
    docs/aot.md) the tensor arguments and results of every public function
    live in device memory. An argument (or a `tensor.cast`,
    `tensor.expand_shape` or `tensor.collapse_shape` of one) feeds the
    kernels directly, with no `gpu.alloc` or `gpu.memcpy`; a moe op's results
    stay on the device as `bufferization.to_tensor` of their `gpu.alloc`
    (marked `moe.gpu_device_result`), so a chain of moe ops has no host round
    trips. Constants and other host-computed tensors that feed moe ops are
    still uploaded; a scalar the host needs (the MOESART seed, the Soft MoE
    scale) is copied to the host first. An element-wise tensor op that reads
    a device tensor (an ElementwiseMappable op such as a residual
    `arith.addf`, or a `linalg.generic` with identity maps and parallel
    iterators, over tensors of one shape) runs on the device and its result
    is a device tensor too: such ops become `linalg.generic` ops, each
    producer/consumer chain of them is fused (upstream's element-wise
    fusion) and runs as one launch of a `moe_elementwise_*` kernel, whose
    splat constants are scalars and whose dense constants are constant
    globals of the kernel module, never uploaded (docs/gpu.md). Only moe ops, those element-wise ops, `tensor.dim`, the
    three reshapes above and `func.return` may use such a device tensor; any
    other op is one error naming it. Private functions keep the default (host)
    convention. Run `--moe-gpu-device-abi` after bufferization with
    results-to-out-params (`--moe-nvptx-pipeline="device-abi=true"` does).

    Index data that chain ops take from their operands is checked at run
    time unless `check-indices=false` (docs/spec.md §3.3, docs/gpu.md "Index
    checks"): the kernels that read it (the align kernel of moe.dispatch and
    moe.fused_experts, the tile map of moe.expert_ffn, the checked combine
    of moe.combine) record the first violation in a 4-word device error
    word, which the op's host code copies back after its kernels; a
    violation calls `moeRuntimeIndexError` (libMoECudaRuntime.so) with the
    CPU path's line. Index data made by moe ops of the same function
    (moe.gate's indices, moe.dispatch's offsets and positions: what
    `--moe-decompose` and `--moe-fuse` write) and a layer's own routing are
    valid by construction and not checked (no extra work).

    The kernels' math (activations, the Soft MoE softmax) is left as `math`
    ops; `--moe-gpu-kernel-math` gives them the polynomial forms the CPU
    uses, so no step before the PTX needs a CUDA toolkit.

    How each op's expert GEMMs are emitted is read from its
    `moe.gpu_config` (`#moe.gpu_config`, attached by `--moe-gpu-configure`
    from the target; an op without one gets `engine = mma_sync` and the
    defaults). Expert GEMMs whose tokens, weights and biases are all bf16
    (or all f16) use the tensor-core kernels of lowering/gpu/MmaGemm.h
    (warp-level `mma.sync` m16n8k16 with f32 accumulation, `ldmatrix`, a
    3-stage `cp.async` pipeline) unless `engine = cuda_core`. With
    `engine = wgmma` the 64-row tiles (prefill) use the warpgroup-level
    `wgmma.mma_async` variants instead of `mma.sync`; the 16-row decode
    tiles keep `mma.sync`; a plan with at least `big_tile_rows` rows per
    expert on average (T*k/E; 0 = never) pads its groups to 128-row tiles,
    computed by blocks of two consumer warpgroups (docs/gpu.md, "128-row
    tiles"); `groups_in_flight` wgmma commit groups stay in flight at the
    end of a stage (docs/gpu.md, "wgmma (sm_90a)"; 0 is part of the kernel
    names, `_inflight0`). `stages` sets the `cp.async` depth of the prefill
    tensor-core GEMMs. f32 data keeps the CUDA-core kernels.

    At decode (16-row tiles) the fused layer's tensor-core GEMMs split K
    over the grid's z dimension (`split_k`; 0 = chosen from the
    shape): each block stores an f32 partial tile and the last block of a
    tile to arrive sums the partials in slice order, then runs the
    epilogue (deterministic, no float atomics; docs/gpu.md, "Split-K").
    The kernels are added to `gpu.module @moe_kernels`, created if the
    module has none (`--moe-gpu-kernel-module` creates it earlier, so that
    a target can be attached to it first).
  }];
  let options = [
    Option<"deviceAbi", "device-abi", "bool", /*default=*/"false",
           "The tensor arguments and results of public functions are device "
           "memory: arguments feed the kernels without a copy, results stay "
           "on the device (finished by moe-gpu-device-abi after "
           "bufferization); a host op reading one is an error">,
    Option<"checkIndices", "check-indices", "bool", /*default=*/"true",
           "Validate the index data of chain ops at run time (expert indices "
           "of moe.dispatch/moe.fused_experts, offsets of moe.expert_ffn, "
           "positions of moe.combine): the kernels that read it record the "
           "first violation in a device error word, the host reads it back "
           "after the op and reports it (moeRuntimeIndexError); false: the "
           "data is trusted (convert-moe-to-cpu's check-indices)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect", "::mlir::tensor::TensorDialect",
    "::mlir::memref::MemRefDialect", "::mlir::gpu::GPUDialect",
    "::mlir::vector::VectorDialect",
    "::mlir::bufferization::BufferizationDialect", "::mlir::func::FuncDialect",
    "::mlir::moe::MoEDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::linalg::LinalgDialect"
  ];
}

def MoEGPUKernelMath : Pass<"moe-gpu-kernel-math", "::mlir::gpu::GPUModuleOp"> {
  let summary = "The kernels' math as polynomials: no libdevice, the CPU's numerics";
  let description = [{
    Rewrites the transcendental `math` ops of a `gpu.module` (`math.exp`,
    `math.log`, `math.erf`, `math.tanh`, ...: the activations, the Soft MoE
    softmax), scalar and vector, with MLIR's polynomial
    approximations (`populateMathPolynomialApproximationPatterns`), the same
    code `--moe-cpu-vector-math` gives the CPU kernels' vectors; an f16 or
    bf16 op is computed in f32 and rounded back, as on the CPU. So a
    kernel computes an activation with the CPU's arithmetic, the host
    emulation of the kernels runs the very code the device runs, and no
    kernel calls a libdevice function: the PTX needs no CUDA toolkit (only
    `format=bin` and `format=fatbin` do, for `ptxas`). The routing's `exp`
    and `log` are already the project's own (lowering/RoutingMath.cpp).

    What remains are ops the NVPTX backend has instructions for (`fma`,
    `floor`, `ceil`, `sqrt`, `rsqrt`, `absf`), which `--moe-gpu-math-to-nvvm`
    gives their NVVM intrinsics in `--moe-nvptx-pipeline` (the emulation of
    the tests runs them on the host as they are). Any other math op (one
    with no polynomial form, an f64 transcendental) is an error naming it:
    it would become a libdevice call.
    `--moe-gpu-launch-pipeline` (and so `--moe-nvptx-pipeline`) runs it on
    `gpu.module @moe_kernels` after `convert-moe-to-gpu`.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def MoEGPUMathToNVVM : Pass<"moe-gpu-math-to-nvvm", "::mlir::gpu::GPUModuleOp"> {
  let summary = "The kernels' remaining math ops as NVVM intrinsics, not libdevice calls";
  let description = [{
    `convert-gpu-to-nvvm` turns `math.fma`, `math.floor`, `math.ceil`,
    `math.sqrt`, `math.rsqrt` and `math.absf` into libdevice calls
    (`__nv_fmaf`, `__nv_floorf`, ...)
    and rejects the LLVM intrinsics that would avoid them. This pass, run
    by `--moe-nvptx-pipeline` on the kernels after
    `--moe-gpu-kernel-math`, rewrites them first, on f32 and f64 scalars:
    `floor` and `ceil` as `llvm.nvvm.floor`/`llvm.nvvm.ceil`
    (`cvt.rmi`/`cvt.rpi`), `sqrt` as `llvm.nvvm.sqrt.rn` (IEEE, correctly
    rounded), `rsqrt` as `1 / sqrt.rn` (the CPU's `1 / sqrtss`), `absf` as
    the sign bit cleared, `fma` as `llvm.intr.fma` (`fma.rn`). Any other
    math op left in a kernel is an error naming it.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::LLVM::LLVMDialect"];
}

def MoEGPUModuleToPTX : Pass<"moe-gpu-module-to-ptx", "::mlir::ModuleOp"> {
  let summary = "Kernels to a PTX gpu.binary without a CUDA toolkit";
  let description = [{
    What upstream `gpu-module-to-binary{format=isa}` does for the
    `#nvvm.target` of each `gpu.module` (LLVM IR, LLVM's optimization
    pipeline at the target's `O`, the NVPTX backend's PTX, a `gpu.binary`
    with one `#gpu.object` in `assembly` format), without upstream's lookup of libdevice: that
    serializer insists on a CUDA toolkit's `nvvm/libdevice/libdevice.10.bc`
    even when, as here, no kernel calls it (`--moe-gpu-kernel-math`,
    `--moe-gpu-math-to-nvvm`). A kernel that still calls an external
    function (`__nv_*`) is an error naming it. `--moe-nvptx-pipeline`
    uses it for `format=isa`; `format=bin` and `fatbin` go through
    upstream's serializer, which needs ptxas.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def MoEGPUDeviceABI : Pass<"moe-gpu-device-abi", "::mlir::ModuleOp"> {
  let summary = "Finish convert-moe-to-gpu's device-abi after bufferization: "
                "results written into the caller's device buffers";
  let description = [{
    Runs after one-shot bufferization, buffer-results-to-out-params and the
    buffer deallocation pipeline on the host code of
    `--convert-moe-to-gpu="device-abi=true"`. In every public function, whose
    memref arguments (inputs and out-parameters) are device memory:

    * a device result buffer (`gpu.alloc` marked `moe.gpu_device_result`)
      that is copied, in its own block, into an out-parameter used by
      nothing else becomes a view of that out-parameter, so the kernels
      write the caller's buffer directly and the copy disappears;
    * any other device result buffer is freed (`gpu.dealloc`) before the
      terminator of its block;
    * a `memref.copy` from or to device memory becomes `gpu.memcpy` (a
      returned constant is uploaded into its out-parameter, an argument
      returned as is is copied device to device);
    * any other op that uses device memory other than views, `memref.dim`,
      the GPU ops and the kernel launches is one error naming it;
    * a function that copies no device data to the host is marked
      `moe.gpu_stream_ordered`, for `moe-gpu-stream-ordered` at the end of
      the pipeline.
  }];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect", "::mlir::memref::MemRefDialect"
  ];
}

def MoEGPUMaterializeLaunches
    : Pass<"moe-gpu-materialize-launches", "::mlir::ModuleOp"> {
  let summary = "Turn the launch placeholders of convert-moe-to-gpu into gpu.launch_func";
  let description = [{
    Replaces every `func.call @__moe_launch_<kernel>(gx, gy, gz, bx, by, bz,
    args...)` (a private declaration carrying `moe.gpu_kernel`) by
    `gpu.launch_func @moe_kernels::@<kernel>` and removes the declarations.
    Runs after one-shot bufferization and buffer deallocation.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def MoEGPUStreamOrdered : Pass<"moe-gpu-stream-ordered", "::mlir::ModuleOp"> {
  let summary = "device-abi: public functions that read nothing back wait "
                "for their stream only when it is not the thread's stream";
  let description = [{
    Runs on the LLVM dialect at the end of `--moe-nvptx-pipeline` with
    `device-abi=true` (the ABI of `moe-compile --target=cuda`, docs/aot.md
    "Stream order"). `gpu-async-region` puts a host synchronization before
    the return of every function with GPU work, before every host op with
    effects (an `scf.if` choosing a tile variant, ...) and before the end of
    every nested block; `gpu-to-llvm` lowers each to
    `mgpuStreamSynchronize(%s)` then `mgpuStreamDestroy(%s)`. In a function
    that `moe-gpu-device-abi` marked `moe.gpu_stream_ordered` (a public
    function that copies no device data to the host), none of them is
    needed when all of its work goes on one stream, which is the case when
    the caller set the thread's stream (`moeRuntimeSetStream`: every
    `mgpuStreamCreate` returns it). So each `mgpuStreamSynchronize` becomes
    `moeRuntimeSyncUnlessThreadStream`: on the thread's stream the function
    enqueues its work and returns without waiting; on a stream of the
    runtime's pool (no thread stream) it waits as before, so that it is
    synchronous for a caller that has no stream to wait on. The frees
    (`mgpuMemFree(%p, %s)`) are stream-ordered either way: the caching
    allocator reuses such a block on `%s` behind this work and on another
    stream only after a context synchronization.

    A function with `mgpuEventSynchronize` (tokens across streams) is left
    as it is; unmarked functions too (private ones, functions that read
    device data back: the error words of the index checks, a size). The
    marker attribute is removed.
  }];
}

def MoEGPUStripObjectTimings
    : Pass<"moe-strip-gpu-object-timings", "::mlir::ModuleOp"> {
  let summary = "Drop compile-time measurements from gpu.object properties";
  let description = [{
    The NVVM serializer of `gpu-module-to-binary` records how long it took
    (`LLVMIRToISATimeInMs`, `ISAToBinaryTimeInMs`) in the properties of every
    `gpu.object`; this pass removes every property whose name ends in
    `TimeInMs`, so that two identical compiles give identical output.
    `--moe-nvptx-pipeline` runs it right after the serialization.
  }];
}

#endif // MOE_LOWERING_GPU_PASSES_TD
