//===- Passes.td - moe lowering passes ---------------------*- tablegen -*-===//

#ifndef MOE_LOWERING_PASSES_TD
#define MOE_LOWERING_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertMoEToCPU : Pass<"convert-moe-to-cpu"> {
  let summary = "Lower every moe op to upstream dialects for the CPU (the CPU strategy)";
  let description = [{
    Lowers layers and the chain ops to upstream dialects only, so the result
    verifies in a stock `mlir-opt` without the moe plugin. Layers are first
    decomposed (as `--moe-decompose`) and their chains fused (as
    `--moe-fuse`), so a token-choice layer becomes `moe.route`, `moe.gate`
    and `moe.fused_experts`:

    * `moe.route`, `moe.expert_ffn` and `moe.fused_experts`: grouped GEMMs
      emitted as register-blocked vector micro-kernels (`vector.fma` on
      `vector<Lxf32>`, masked loads and stores for the column tails) inside
      an `scf.parallel` over (expert, column block, row block) work items, so
      every core works at decode and at prefill. The vector width L, the
      register and cache blocking and the use of the AVX512_BF16 dot product
      are each op's `moe.cpu_config` (attached by `--moe-cpu-configure`, or
      written by the user); an op without one gets the AVX-512 configuration
      (`#moe.cpu_config<vector_bits = 512, registers = 32, micro_rows = 6,
      micro_vectors = 4, row_block = 48, col_block = 256, prefetch_rows = 32,
      bf16_dot = false>`). A layer passes its configuration on to the chain
      it is decomposed into. `moe.fused_experts` gathers
      the tokens through the routing plan while loading GEMM1's rows, applies
      bias, activation and the rounding of `h` in GEMM1's epilogue and the
      routed weight in GEMM2's, and sums each token's rows in routing order
      (parallel over tokens). These ops are emitted on memrefs
      (`bufferization.to_buffer` / `to_tensor restrict writable`).
    * `moe.gate`: an `scf.for` over tokens; softmax with max-subtraction,
      top-k (ties: lower index), MOESART adjustments, Philox4x32-10 sampling
      and the trimmed-lasso loss, in f32, exactly as docs/spec.md §3.1;
    * `moe.dispatch`: counting pass, prefix sum, permutation (GShard capacity
      when `capacity_factor` is set);
    * `moe.combine`: the per-token weighted sum (parallel over tokens);
      `moe.soft_dispatch`, `moe.soft_combine`: `linalg.generic` reductions
      (softmaxes with max-subtraction).

    Element types: token-choice ops take f32, bf16 or f16 data; operands are
    extended to f32 as they are loaded, accumulation and routing are f32, and
    `h` and `y` are rounded to the element type (docs/spec.md §2-§3). Soft
    MoE ops and hand-written `moe.gate` ops compute in f32 only (other types
    are reported). Every size is taken from the operands, so a dynamic token
    count lowers like a static one.

    Weight packing (`pack-weights`, on by default; only when the pass runs on
    a module, since it adds globals): static expert weights are repacked once
    into contiguous panels (`[E, P, K, 64]`, zero-padded; gated W1 panels hold
    32 gate and the 32 matching up columns) kept in a `memref.global`, with a
    second global holding the key of the buffer they came from (its address
    and a hash of 64 sampled elements). A call whose weight buffer has the
    same key reuses the panels; any other call repacks first. The functions
    are therefore not reentrant across different weight buffers, and a
    weight buffer rewritten in place such that the sampled elements keep
    their values is not noticed: turn packing off for such callers.

    Renamed from `convert-moe-to-linalg`, which the pass was called while
    it emitted linalg ops; it now emits memrefs, `scf.parallel` and vector
    ops (only Soft MoE goes through `linalg.generic`). The old flag remains
    for one release as a deprecated alias (same options, a warning on
    stderr); so does the C function `mlirCreateMoELoweringConvertMoEToLinalg`.
  }];
  let options = [
    Option<"packWeights", "pack-weights", "bool", /*default=*/"true",
           "Read static expert weights through packed copies kept in module "
           "globals, rebuilt only when a call passes a different weight buffer "
           "(address or sampled fingerprint); applies only when the pass runs "
           "on a module">,
    Option<"checkIndices", "check-indices", "bool", /*default=*/"true",
           "Validate the index data the chain ops take from their operands at "
           "run time: moe.expert_ffn's offsets (non-decreasing, within [0, N]) "
           "and moe.combine's positions (-1 or a row); a violation calls "
           "moeCpuIndexError (runtime/cpu: one line on stderr, exit code 1). "
           "Without the checks such data is undefined behaviour">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::bufferization::BufferizationDialect",
    "::mlir::cf::ControlFlowDialect",
    "::mlir::linalg::LinalgDialect", "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect", "::mlir::vector::VectorDialect",
    "::mlir::x86vector::X86VectorDialect", "::mlir::moe::MoEDialect"
  ];
}

def MoECpuConfigure : Pass<"moe-cpu-configure"> {
  let summary = "Choose each op's CPU code-generation strategy from the target CPU";
  let description = [{
    Attaches `moe.cpu_config = #moe.cpu_config<...>` to every op whose CPU
    lowering emits grouped GEMMs (`moe.layer`, `moe.soft_layer`, `moe.route`,
    `moe.expert_ffn`, `moe.shared_expert`, `moe.fused_experts`,
    `moe.fused_soft_experts`) that has none, from the features of the target
    CPU (`cpu`, LLVM's x86 CPU names or `native` for the host, then
    `features` on top):

    | target | vector_bits | registers | micro-tile | bf16_dot |
    | --- | --- | --- | --- | --- |
    | AVX-512 (`avx512f`) | 512 | 32 | 6 x 4 vectors (6 x 64 floats) | `avx512bf16` |
    | AVX2 + FMA | 256 | 16 | 6 x 2 vectors (6 x 16 floats) | false |
    | anything else (SSE, other architectures) | 128 | 16 | 6 x 2 vectors | false |

    An existing `moe.cpu_config` is kept: that is how a user overrides the
    choice. `--moe-cpu-pipeline` runs this pass just before
    `convert-moe-to-cpu` (its `cpu` and `cpu-features` options), which
    reads the attribute.
    The configuration changes the blocking, never the order of a sum, so
    every configuration computes the same bits.
  }];
  let options = [
    Option<"cpu", "cpu", "std::string", /*default=*/"\"native\"",
           "The target CPU: an LLVM x86 CPU name (skylake-avx512, znver3, "
           "haswell, x86-64-v3, sapphirerapids, ...) or native (the host)">,
    Option<"extraFeatures", "features", "std::string", /*default=*/"\"\"",
           "Features added or removed on top of the CPU's, comma-separated "
           "LLVM names with + or - (e.g. -avx512f to choose as on an AVX2 "
           "machine); a removed feature removes those that imply it">
  ];
  let dependentDialects = ["::mlir::moe::MoEDialect"];
}

def MoECpuCheckAllocs : Pass<"moe-cpu-check-allocs", "::mlir::ModuleOp"> {
  let summary = "A failed memref.alloc becomes one error line and exit 1 (CPU)";
  let description = [{
    After every `memref.alloc` (run it after bufferization), checks the
    allocated pointer: a null pointer for a non-empty buffer calls
    `moeCpuAllocError(bytes)` of the CPU runtime (`libMoECpuRuntime.so`),
    which prints the size requested and exits with code 1, instead of the
    program writing through a null pointer.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::func::FuncDialect",
    "::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect"
  ];
}

def MoECpuVectorMath : Pass<"moe-cpu-vector-math"> {
  let summary = "Polynomial approximations for math ops on vectors (CPU)";
  let description = [{
    Rewrites `math` ops whose operands are vectors (the activations of the
    expert kernels: `math.erf`, `math.exp`, `math.tanh`, ...) with MLIR's
    polynomial approximations, so that they stay vectorized instead of
    becoming one libm call per lane. Scalar math (the routing's `exp` and
    `log`) is left alone.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def MoECpuDecomposeAggregates : Pass<"moe-cpu-decompose-aggregates"> {
  let summary = "Decompose aggregated linalg ops (linalg.softmax) for the CPU";
  let description = [{
    Rewrites every op that implements `linalg::AggregatedOpInterface`
    (`linalg.softmax`: max, sub, exp, sum, div as `linalg.generic`s) into
    the structured ops it stands for, with the op's own `decomposeOperation`.
    `--moe-cpu-pipeline` runs it first, so a model whose softmax was not
    raised into a moe op (what frontends emit, what `--moe-raise-linalg`
    leaves alone) lowers and runs on the host. An op whose decomposition
    fails is an error naming it.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect", "::mlir::tensor::TensorDialect"
  ];
}

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

    With `toolkit=PATH` (what `--moe-nvptx-pipeline` passes) the pass first
    checks that the CUDA toolkit's libdevice, which the kernels' exp, log,
    erf, tanh and rsqrt link against, exists, and fails with one error
    otherwise (`toolkit=none`: no toolkit was found).

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
    Option<"toolkit", "toolkit", "std::string", "\"\"",
           "CUDA toolkit whose nvvm/libdevice/libdevice.10.bc the kernels "
           "link ('' = do not check, 'none' = none was found)">,
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

def MoEHostExpandBF16 : Pass<"moe-host-expand-bf16"> {
  let summary = "bf16 conversions as integer arithmetic on the host (exact on every CPU)";
  let description = [{
    Rewrites `arith.truncf` f32 -> bf16 and `arith.extf` bf16 -> f32, on
    scalars and vectors, into integer arithmetic on the f32 bits (upstream's
    `arith::populateExpandBFloat16Patterns`): round to nearest, ties to even,
    subnormals kept, NaNs quieted, the same bits on every CPU and the same
    as the GPU's `cvt.rn.bf16.f32`. Left to the x86 backend, a truncation is
    a call of `__truncsfbf2` on a CPU without AVX512_BF16 (neither libgcc 12
    nor libc defines it: the JIT fails to resolve it and an ahead-of-time
    library fails to link) and `vcvtneps2bf16`, which reads subnormal inputs
    as zero, on a CPU with it. `--moe-cpu-pipeline` runs it before the
    vector and arith ops become LLVM; the host emulation pipelines of the
    tests too. Other conversions (f16, f64) are left alone.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

#endif // MOE_LOWERING_PASSES_TD
