//===- Passes.td - the CPU lowering passes ----------------*- tablegen -*-===//
//
// The passes of MoECpuLowering (lowering/cpu/Passes.h); MoECpuLoweringIncGen generates
// their declarations, registration and C API.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_LOWERING_CPU_PASSES_TD
#define MOE_LOWERING_CPU_PASSES_TD

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
    "::mlir::x86vector::X86VectorDialect", "::mlir::amx::AMXDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::moe::MoEDialect"
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
    `features` on top; a named CPU's features with those they imply, as
    LLVM lists some without them):

    | target | vector_bits | registers | micro-tile | bf16_dot | amx | fp8_dot | int8_dot |
    | --- | --- | --- | --- | --- | --- | --- | --- |
    | AVX-512 (`avx512f`) | 512 | 32 | 6 x 4 vectors (6 x 64 floats) | `avx512bf16` | `avx512bf16`, `amx-bf16` and `amx-tile` | `avx512bf16` and `avx512vbmi` | `vpdpbusd` with `avx512vnni`, else `none` |
    | AVX2 + FMA | 256 | 16 | 6 x 2 vectors (6 x 16 floats) | false | false | false | `vpdpbusd` with `avxvnni` (AVX-VNNI), else `vpmaddubsw` |
    | anything else (SSE, other architectures) | 128 | 16 | 6 x 2 vectors | false | false | false | `none` |

    An existing `moe.cpu_config` is kept: that is how a user overrides the
    choice. `--moe-cpu-pipeline` runs this pass just before
    `convert-moe-to-cpu` (its `cpu` and `cpu-features` options), which
    reads the attribute.
    The f32 configurations change the blocking, never the order of a sum,
    so they compute the same bits; `bf16_dot` and `amx` add pairs of
    products before accumulating (within the bf16 tolerance of
    docs/spec.md §2); `int8_dot` serves int4 layers in the int8-activation
    mode (`#moe.quant<..., int8_activations>`), whose integer products are
    exact.
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

def MoECpuInlineAllocaScopes : Pass<"moe-cpu-inline-alloca-scopes"> {
  let summary = "memref.alloca_scope as a stack save and restore around its body (CPU)";
  let description = [{
    Inlines each single-block `memref.alloca_scope` into its parent block
    between `llvm.intr.stacksave` and `llvm.intr.stackrestore`, so that the
    allocas inside are freed at the scope's end. The CPU lowering wraps the
    AMX micro-tile's tile buffers in such a scope (they live inside loops);
    this runs after bufferization and before the SCF-to-CF lowering, which
    would turn the loops inside into blocks that the op's one-block region
    cannot hold.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::memref::MemRefDialect"];
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

def MoEHostBF16MemoryAsI16 : Pass<"moe-host-bf16-memory-as-i16"> {
  let summary = "The host's bf16 loads and stores as 16-bit integer ones (LLVM dialect)";
  let description = [{
    After `--moe-host-expand-bf16` every bf16 value on the host is moved,
    not computed: loaded, stored, bitcast to and from i16. This pass, on the
    LLVM dialect, makes `llvm.load`, `llvm.store`, `llvm.intr.masked.load`
    and `llvm.intr.masked.store` of bf16 scalars and vectors load and store
    i16 instead (a bitcast at the boundary, and none where the value was an
    i16 just before or is one just after). The bits are the same. Without it
    LLVM's instruction combiner turns the expansion's `select(isnan, 0x7FC0,
    rounded)` followed by a bitcast into a select of bf16 vectors, which the
    x86 backend, on a CPU without AVX512_BF16, widens lane by lane to f32 and
    rounds back with a call of `__truncsfbf2` per lane (the CPU runtime
    defines it): measured on AVX2 code, 11.6% of a 4-layer int4 decode step
    in those calls. `--moe-cpu-pipeline` runs it last.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // MOE_LOWERING_CPU_PASSES_TD
