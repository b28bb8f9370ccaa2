//===- TestPasses.td - moe test-only passes ----------------*- tablegen -*-===//
//
// Passes that exist for the lit tests only. They are built into the test
// library MoETestPasses (test/lib) and registered by moe-opt alone
// (registerMoETestPasses(), with MOE_INCLUDE_TESTS), as upstream's mlir-opt
// registers its test passes: the plugin, libMoEMLIR.so and the C API do not
// have them (test/layering checks it).
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TEST_LIB_TESTPASSES_TD
#define MOE_TEST_LIB_TESTPASSES_TD

include "mlir/Pass/PassBase.td"

def MoETestEmulateGPU : Pass<"moe-test-emulate-gpu", "::mlir::ModuleOp"> {
  let summary = "Testing: run the GPU kernels on the host (OpenMP threads as GPU threads)";
  let description = [{
    For machines without a GPU: after `--moe-gpu-materialize-launches`,
    replaces device allocations and copies by memref ops and every
    `gpu.launch_func` by a loop over the blocks whose body runs the kernel in
    an `omp.parallel` region of blockDim threads (`gpu.barrier` becomes
    `omp.barrier`, workgroup memory one buffer per block), and drops the
    `gpu.module`. The result lowers with the CPU passes plus
    `convert-openmp-to-llvm` and runs with an OpenMP runtime. Used by the
    lit tests that compare the kernels' numerics with the CPU path.

    Warp-level ops (the tensor-core GEMMs) run with their documented
    semantics (lowering/gpu/WarpLayouts.h, PTX ISA): `nvgpu.ldmatrix` and
    `nvvm.mma.sync` m16n8k16 exchange the lanes' fragments through per-block
    scratch buffers between barriers, and `nvgpu.device_async_copy` is queued
    per thread and performed when `nvvm.cp.async.wait.group` retires its
    commit group; `nvvm.wgmma.mma_async` reads the shared memory its matrix
    descriptors address and is pending until `nvvm.wgmma.wait.group.sync.aligned`
    retires it: the emulation checks that no operand changes and no
    accumulator is accessed meanwhile, that `wgmma.fence` and
    `fence.proxy.async` are where the PTX ISA requires them, and ends the run
    with a one-line error (exit status 1) otherwise (docs/gpu.md).

    Blocks run one after another. On a GPU they run concurrently and in any
    order, so kernels whose blocks coordinate through global memory
    (split-K's last-arriver reduction, the combine's arrival counters) must
    give the same bits in every order: `block-order` runs each launch's
    blocks in ascending linear block id (`forward`, the default: x fastest,
    then y, then z), descending (`reverse`), or in a permutation of the
    linear ids (`shuffle`) that is a pure function of `seed` and the launch's
    position in the module (different per launch, the same on every run).

    Example: `--moe-test-emulate-gpu="block-order=shuffle seed=7"`
  }];
  let options = [
    Option<"blockOrder", "block-order", "::mlir::moe::EmulatedBlockOrder",
           "::mlir::moe::EmulatedBlockOrder::forward",
           "order in which each launch's blocks run",
           [{::llvm::cl::values(
             clEnumValN(::mlir::moe::EmulatedBlockOrder::forward, "forward",
                        "ascending linear block id, x fastest (default)"),
             clEnumValN(::mlir::moe::EmulatedBlockOrder::reverse, "reverse",
                        "descending linear block id"),
             clEnumValN(::mlir::moe::EmulatedBlockOrder::shuffle, "shuffle",
                        "a permutation from `seed` and the launch"))}]>,
    Option<"seed", "seed", "uint64_t", /*default=*/"0",
           "seed of block-order=shuffle's permutations">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect", "::mlir::omp::OpenMPDialect",
    "::mlir::func::FuncDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::vector::VectorDialect", "::mlir::cf::ControlFlowDialect"
  ];
}

def MoETestBuildMmaKernels
    : Pass<"moe-test-build-mma-kernels", "::mlir::ModuleOp"> {
  let summary = "Testing: build the tensor-core GEMM kernels that launch placeholders name";
  let description = [{
    For kernel-level tests of the tensor-core expert GEMMs
    (lowering/gpu/MmaGemm.h): every private declaration
    `@__moe_launch_<kernel>` carrying `moe.gpu_kernel = @moe_kernels::@<kernel>`
    whose kernel does not exist yet gets it built into `gpu.module
    @moe_kernels`, when `<kernel>` is the name of a tensor-core GEMM variant
    (for example `moe_mma_gemm1_gather_swiglu_bias_bf16_m64`); any other
    missing kernel is an error. Run before `--moe-gpu-materialize-launches`.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect",
    "::mlir::gpu::GPUDialect", "::mlir::nvgpu::NVGPUDialect",
    "::mlir::NVVM::NVVMDialect", "::mlir::LLVM::LLVMDialect",
    "::mlir::vector::VectorDialect"
  ];
}

#endif // MOE_TEST_LIB_TESTPASSES_TD
