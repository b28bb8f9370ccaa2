//===- Pipelines.h - moe lowering pipelines ---------------------*- C++ -*-===//
//
// Pass pipelines that take moe IR to executable code. Embedders build them
// into their own PassManager; moe-opt exposes them as pipeline flags.
// buildCpuPipeline is defined in the CPU lowering library (MoECpuLowering),
// the NVPTX pipeline in the GPU lowering library (MoEGpuLowering).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_PIPELINES_H
#define MOE_LOWERING_PIPELINES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir {
namespace moe {

/// Options of `--moe-cpu-pipeline`.
struct CpuPipelineOptions : public PassPipelineOptions<CpuPipelineOptions> {
  PassOptions::Option<bool> resultsToOutParams{
      *this, "results-to-out-params",
      llvm::cl::desc("Turn the tensor results of public functions into "
                     "caller-allocated out-parameters (what moe-run calls)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> parallel{
      *this, "parallel",
      llvm::cl::desc("Run parallel loops (the experts of a grouped FFN) on all "
                     "cores through MLIR's async runtime; the program then "
                     "needs libmlir_async_runtime.so at run time"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> packWeights{
      *this, "pack-weights",
      llvm::cl::desc("Read static expert weights through packed copies kept in "
                     "module globals, rebuilt only when a call passes a "
                     "different weight buffer (convert-moe-to-cpu's "
                     "pack-weights)"),
      llvm::cl::init(true)};
  PassOptions::Option<std::string> cpu{
      *this, "cpu",
      llvm::cl::desc("The CPU the code is for (moe-cpu-configure's cpu: an LLVM "
                     "x86 CPU name, or native for the host); it chooses each "
                     "op's #moe.cpu_config (vector width, blocking, the "
                     "AVX512_BF16 dot product)"),
      llvm::cl::init("native")};
  PassOptions::Option<std::string> cpuFeatures{
      *this, "cpu-features",
      llvm::cl::desc("Features added or removed on top of the CPU's "
                     "(moe-cpu-configure's features, e.g. -avx512bf16)"),
      llvm::cl::init("")};
  PassOptions::Option<bool> checkIndices{
      *this, "check-indices",
      llvm::cl::desc("Validate the index data of the chain ops (moe.expert_ffn "
                     "offsets, moe.combine positions) at run time "
                     "(convert-moe-to-cpu's check-indices)"),
      llvm::cl::init(true)};
};

/// Builds `--moe-cpu-pipeline`: the strategy of each op from the target CPU
/// (moe-cpu-configure), every moe op to upstream dialects, one-shot
/// bufferization, loops, and the LLVM dialect for that CPU. Building cannot
/// fail; an unknown `cpu` or feature fails the pipeline's first run with
/// one error.
void buildCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &options);

/// Options of `--moe-nvptx-pipeline`.
struct NVPTXPipelineOptions : public PassPipelineOptions<NVPTXPipelineOptions> {
  PassOptions::Option<std::string> chip{
      *this, "chip", llvm::cl::desc("Target SM architecture (sm_80, sm_90, ...)"),
      llvm::cl::init("sm_90")};
  PassOptions::Option<std::string> features{
      *this, "features",
      llvm::cl::desc("PTX features (sm_90 needs +ptx80 or newer)"),
      llvm::cl::init("+ptx80")};
  PassOptions::Option<std::string> format{
      *this, "format",
      llvm::cl::desc("What gpu.binary holds: isa (PTX text), bin (cubin, needs "
                     "ptxas) or fatbin"),
      llvm::cl::init("fatbin")};
  PassOptions::Option<int> optLevel{
      *this, "opt-level", llvm::cl::desc("Optimization level of the NVPTX backend (0-3)"),
      llvm::cl::init(3)};
  PassOptions::Option<bool> resultsToOutParams{
      *this, "results-to-out-params",
      llvm::cl::desc("Turn the tensor results of public functions into "
                     "caller-allocated out-parameters (as --moe-cpu-pipeline)"),
      llvm::cl::init(false)};
  PassOptions::Option<bool> deviceAbi{
      *this, "device-abi",
      llvm::cl::desc("The public functions' tensor arguments and results are "
                     "device memory (convert-moe-to-gpu's device-abi, then "
                     "moe-gpu-device-abi): no copies in or out, results "
                     "written into caller-allocated device out-parameters "
                     "(implies results-to-out-params)"),
      llvm::cl::init(false)};
  PassOptions::Option<std::string> cudaPath{
      *this, "cuda-path",
      llvm::cl::desc("CUDA toolkit, for ptxas with format=bin/fatbin (PTX "
                     "needs none: the kernels link no libdevice); default: the first of $CUDA_ROOT, "
                     "$CUDA_HOME, $CUDA_PATH that is set (it must be a "
                     "directory), else /usr/local/cuda"),
      llvm::cl::init("")};
  PassOptions::Option<bool> tensorCores{
      *this, "tensor-cores",
      llvm::cl::desc("bf16/f16 expert GEMMs on tensor cores (mma.sync) when the "
                     "chip has them (sm_80 or newer); false: CUDA-core kernels"),
      llvm::cl::init(true)};
  PassOptions::Option<bool> checkIndices{
      *this, "check-indices",
      llvm::cl::desc("Validate the index data of chain ops at run time "
                     "(convert-moe-to-gpu's check-indices: one error word per "
                     "checked op, read back after it)"),
      llvm::cl::init(true)};
  PassOptions::Option<int64_t> decodeSplitK{
      *this, "decode-split-k",
      llvm::cl::desc("Split-K slices of the fused layer's 16-row (decode) "
                     "tensor-core GEMMs (convert-moe-to-gpu's decode-split-k; "
                     "0 = chosen from the shape, 1 = no split)"),
      llvm::cl::init(0)};
  PassOptions::Option<int64_t> bigTileRows{
      *this, "big-tile-rows",
      llvm::cl::desc("sm_90a: layers with at least this many rows per expert on "
                     "average (T*k/E) use 128-row wgmma tiles (two warpgroups); "
                     "0: never (convert-moe-to-gpu's big-tile-rows)"),
      llvm::cl::init(128)};
  PassOptions::Option<int64_t> wgmmaGroupsInFlight{
      *this, "wgmma-groups-in-flight",
      llvm::cl::desc("sm_90a: wgmma commit groups left in flight at the end of "
                     "a pipeline stage, 0 or 1 (convert-moe-to-gpu's "
                     "wgmma-groups-in-flight)"),
      llvm::cl::init(1)};
  PassOptions::Option<int64_t> mmaStages{
      *this, "mma-stages",
      llvm::cl::desc("cp.async stages of the prefill tensor-core GEMMs, 2 to 8; "
                     "0: the defaults (convert-moe-to-gpu's mma-stages)"),
      llvm::cl::init(0)};
  PassOptions::Option<std::string> triple{
      *this, "triple", llvm::cl::desc("Target triple of the kernels"),
      llvm::cl::init("nvptx64-nvidia-cuda")};
};

/// Checks every option value of `--moe-nvptx-pipeline`: `chip` is sm_NN or
/// sm_NNN (optionally with an `a` or `f` suffix), `format` one of isa, bin,
/// fatbin, `opt-level` in 0..3, `features` a list of +name/-name, `triple` an
/// NVPTX triple, `cuda-path` free of newlines and, without `cuda-path`, the
/// first of $CUDA_ROOT, $CUDA_HOME, $CUDA_PATH that is set (non-empty) a
/// directory. On the first bad value calls
/// `errorHandler` with a one-line message ("moe-nvptx-pipeline: ...") and
/// returns failure.
LogicalResult
validateNVPTXPipelineOptions(const NVPTXPipelineOptions &options,
                             function_ref<LogicalResult(const Twine &)> errorHandler);

/// The CUDA toolkit the NVPTX pipeline uses: `cudaPath` when not empty, else
/// the first of $CUDA_ROOT, $CUDA_HOME, $CUDA_PATH that is set (non-empty;
/// validateNVPTXPipelineOptions reports one that is not a directory), else
/// /usr/local/cuda when it is a directory; "" when there is none.
std::string findCudaToolkit(llvm::StringRef cudaPath);

/// Builds `--moe-gpu-launch-pipeline`, the first half of
/// `--moe-nvptx-pipeline`: the `#nvvm.target` of `options` attached to an
/// empty `gpu.module @moe_kernels` (moe-gpu-kernel-module, upstream's
/// nvvm-attach-target), each op's `#moe.gpu_config` chosen from it
/// (moe-gpu-configure), every moe op to kernels in that module plus host
/// code (convert-moe-to-gpu), the kernels' math as polynomials
/// (moe-gpu-kernel-math), host bufferization and deallocation, device-abi,
/// and the launch placeholders materialized as `gpu.launch_func`. Nothing
/// here needs a CUDA toolkit: the emulated lit tests run it on any machine.
/// The options are validated first, as buildNVPTXPipeline does.
LogicalResult
buildGpuLaunchPipeline(OpPassManager &pm, const NVPTXPipelineOptions &options,
                       function_ref<LogicalResult(const Twine &)> errorHandler = {});

/// Builds `--moe-nvptx-pipeline`: every moe op to MoE kernels in
/// `gpu.module @moe_kernels` plus host launch code, one-shot bufferization
/// and buffer deallocation on the host, the kernels through NVVM to a
/// `gpu.binary` (without compile-time measurements, so that the output is
/// deterministic), and the host to the LLVM dialect calling the `mgpu*`
/// runtime ABI of upstream `gpu-to-llvm`. The options are validated first
/// (validateNVPTXPipelineOptions); on a bad value nothing is added to `pm`,
/// `errorHandler` (default: print the line to stderr) gets the message and
/// the result is failure. Every pass is built from its typed constructor and
/// option struct (nothing is parsed), so paths may contain any character.
LogicalResult
buildNVPTXPipeline(OpPassManager &pm, const NVPTXPipelineOptions &options,
                   function_ref<LogicalResult(const Twine &)> errorHandler = {});

/// Whether `--convert-moe-to-gpu="device-abi=true"` (and so
/// `--moe-nvptx-pipeline="device-abi=true"`) accepts `module`: in every public
/// function, the tensor arguments, the moe op results and what is computed
/// from them on the device are used only by moe ops, element-wise tensor ops
/// (which then run on the device), tensor.dim, tensor.cast/expand_shape/
/// collapse_shape and func.return. A cheap check on the IR (nothing is
/// lowered or reported): moe-run chooses its calling convention with it.
bool deviceAbiApplies(ModuleOp module);

/// Registers `--moe-cpu-pipeline` (MoECpuLowering). Tools call
/// registerAllMoEPasses() (lowering/InitAllMoE.h), which registers both
/// pipelines and every moe pass.
void registerCpuPipeline();

/// Registers `--moe-nvptx-pipeline` and `--moe-gpu-launch-pipeline`
/// (MoEGpuLowering).
void registerNVPTXPipeline();

} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_PIPELINES_H
