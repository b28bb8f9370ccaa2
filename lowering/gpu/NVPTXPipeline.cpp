//===- NVPTXPipeline.cpp - --moe-nvptx-pipeline ---------------------------===//
//
// moe -> MoE kernels + host code (convert-moe-to-gpu), host bufferization and
// buffer deallocation, then the upstream NVVM path, modelled on
// mlir/lib/Dialect/GPU/Pipelines/GPUToNVVMPipeline.cpp
// (gpu-lower-to-nvvm-pipeline): kernels through convert-gpu-to-nvvm and
// gpu-module-to-binary, the host through gpu-to-llvm (mgpu* runtime calls).
//
// Every option value is checked before use (validateNVPTXPipelineOptions),
// and every pass is built from its typed constructor and option struct, as
// upstream's buildLowerToNVVMPassPipeline does: nothing is parsed, so user
// strings (chip, features, triple, format, the CUDA toolkit path) are never
// spliced into pipeline text (a path with a space or a comma is just a
// path) and nothing can end in a fatal error.
//
//===----------------------------------------------------------------------===//

#include "lowering/Pipelines.h"

#include "lowering/HostPipeline.h"
#include "lowering/gpu/Passes.h"
#include "dialect/MoEAttrs.h"
#include "dialect/MoEDialect.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

#define DEBUG_TYPE "moe-nvptx-pipeline"

/// The CUDA toolkit: only format=bin/fatbin use it, for ptxas (and
/// fatbinary). The kernels link no libdevice (--moe-gpu-kernel-math), so
/// PTX (format=isa) needs no toolkit.
/// Where the toolkit is looked for when cuda-path is empty, in this order.
static constexpr const char *kCudaEnvVars[] = {"CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"};

static std::string cudaToolkit(const moe::NVPTXPipelineOptions &options) {
  return moe::findCudaToolkit(options.cudaPath);
}

std::string moe::findCudaToolkit(StringRef cudaPath) {
  if (!cudaPath.empty())
    return cudaPath.str();
  // The first variable that is set wins, directory or not: a stale
  // $CUDA_HOME is reported (validateNVPTXPipelineOptions), never skipped
  // silently in favour of another toolkit.
  for (const char *var : kCudaEnvVars)
    if (std::optional<std::string> v = llvm::sys::Process::GetEnv(var))
      if (!v->empty())
        return *v;
  if (llvm::sys::fs::is_directory("/usr/local/cuda"))
    return "/usr/local/cuda";
  return "";
}

/// sm_NN or sm_NNN, optionally followed by `a` (architecture-specific) or
/// `f` (family-specific): sm_80, sm_90a, sm_100a, sm_120f.
static bool isValidChip(StringRef chip) {
  if (!chip.consume_front("sm_"))
    return false;
  if (chip.ends_with("a") || chip.ends_with("f"))
    chip = chip.drop_back();
  return (chip.size() == 2 || chip.size() == 3) &&
         llvm::all_of(chip, llvm::isDigit) && chip.front() != '0';
}

/// A comma-separated list of `+name` / `-name` (name: letters, digits, `.`,
/// `_`, `-`), e.g. "+ptx80"; empty is allowed.
static bool isValidFeatureList(StringRef features) {
  if (features.empty())
    return true;
  SmallVector<StringRef> parts;
  features.split(parts, ',');
  return llvm::all_of(parts, [](StringRef part) {
    if (part.size() < 2 || (part.front() != '+' && part.front() != '-'))
      return false;
    return llvm::all_of(part.drop_front(), [](char c) {
      return llvm::isAlnum(c) || c == '.' || c == '_' || c == '-';
    });
  });
}

LogicalResult moe::validateNVPTXPipelineOptions(
    const NVPTXPipelineOptions &options,
    function_ref<LogicalResult(const Twine &)> errorHandler) {
  auto error = [&](const Twine &message) {
    return errorHandler("moe-nvptx-pipeline: " + message);
  };
  StringRef chip = options.chip;
  if (!isValidChip(chip))
    return error("chip='" + chip +
                 "' is not an NVIDIA architecture; expected sm_NN or sm_NNN, "
                 "optionally with an 'a' or 'f' suffix (sm_80, sm_90, sm_90a)");
  StringRef format = options.format;
  if (format != "isa" && format != "bin" && format != "fatbin")
    return error("format='" + format + "' is not one of isa, bin, fatbin");
  if (options.optLevel < 0 || options.optLevel > 3)
    return error("opt-level=" + Twine(options.optLevel) +
                 " is out of range; expected 0, 1, 2 or 3");
  if (options.bigTileRows < 0)
    return error("big-tile-rows=" + Twine(int64_t(options.bigTileRows)) +
                 " is out of range; expected >= 0");
  if (options.mmaStages != 0 &&
      (options.mmaStages < moe::kMinGpuStages ||
       options.mmaStages > moe::kMaxGpuStages))
    return error("mma-stages=" + Twine(int64_t(options.mmaStages)) +
                 " is out of range; expected 0 (the defaults) or " +
                 Twine(moe::kMinGpuStages) + " to " +
                 Twine(moe::kMaxGpuStages));
  if (!isValidFeatureList(options.features))
    return error("features='" + options.features +
                 "' is not a comma-separated list of +feature/-feature "
                 "(e.g. +ptx80)");
  if (options.wgmmaGroupsInFlight < 0 || options.wgmmaGroupsInFlight > 1)
    return error("wgmma-groups-in-flight=" + Twine(int64_t(options.wgmmaGroupsInFlight)) +
                 " is out of range; expected 0 or 1");
  if (options.decodeSplitK < 0 || options.decodeSplitK > 1024)
    return error("decode-split-k=" + Twine(options.decodeSplitK) +
                 " is out of range; expected 0 (chosen from the shape) to 1024");
  StringRef triple = options.triple;
  if (triple != "nvptx64-nvidia-cuda" && triple != "nvptx-nvidia-cuda")
    return error("triple='" + triple +
                 "' is not an NVPTX triple; expected nvptx64-nvidia-cuda");
  auto badPathChar = [](char c) { return c == '\0' || c == '\n' || c == '\r'; };
  if (!options.cudaPath.empty()) {
    StringRef path = options.cudaPath;
    if (llvm::any_of(path, badPathChar))
      return error("cuda-path contains a newline or NUL character");
    return success();
  }
  // PTX needs no toolkit: the environment's is looked at only for a cubin
  // or fatbin (ptxas).
  if (format == "isa")
    return success();
  // No cuda-path: the toolkit comes from the environment. The first variable
  // that is set must name a directory (any characters, spaces included).
  for (const char *var : kCudaEnvVars) {
    std::optional<std::string> value = llvm::sys::Process::GetEnv(var);
    if (!value || value->empty())
      continue;
    if (llvm::any_of(*value, badPathChar))
      return error(Twine("$") + var + " contains a newline or NUL character");
    if (!llvm::sys::fs::is_directory(*value))
      return error(Twine("$") + var + "='" + *value +
                   "' is not a directory; the CUDA toolkit is looked up there "
                   "(fix or unset it, or pass cuda-path=DIR)");
    break;
  }
  return success();
}

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEGPUSTRIPOBJECTTIMINGS
#include "lowering/gpu/Passes.h.inc"
} // namespace moe
} // namespace mlir

namespace {
/// Drops the compile-time measurements (LLVMIRToISATimeInMs,
/// ISAToBinaryTimeInMs) that the NVVM serializer records in the properties
/// of every gpu.object: with them, two identical compiles differ.
struct StripObjectTimingsPass
    : public moe::impl::MoEGPUStripObjectTimingsBase<StripObjectTimingsPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << getArgument() << " on "
                            << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    getOperation().walk([](gpu::BinaryOp binary) {
      SmallVector<Attribute> objects;
      bool changed = false;
      for (Attribute attr : binary.getObjects()) {
        auto object = dyn_cast<gpu::ObjectAttr>(attr);
        DictionaryAttr properties = object ? object.getProperties() : nullptr;
        if (!properties) {
          objects.push_back(attr);
          continue;
        }
        SmallVector<NamedAttribute> kept;
        for (NamedAttribute named : properties)
          if (!named.getName().getValue().ends_with("TimeInMs"))
            kept.push_back(named);
        if (kept.size() == properties.size()) {
          objects.push_back(attr);
          continue;
        }
        changed = true;
        DictionaryAttr newProperties =
            kept.empty() ? DictionaryAttr()
                         : DictionaryAttr::get(binary.getContext(), kept);
        objects.push_back(gpu::ObjectAttr::get(
            binary.getContext(), object.getTarget(), object.getFormat(),
            object.getObject(), newProperties, object.getKernels()));
      }
      if (changed)
        binary.setObjectsAttr(ArrayAttr::get(binary.getContext(), objects));
      LLVM_DEBUG(llvm::dbgs() << "strip timings of @" << binary.getSymName()
                              << ": " << (changed ? "dropped" : "none") << "\n");
    });
  }
};
} // namespace

static LogicalResult validate(const moe::NVPTXPipelineOptions &options,
                              function_ref<LogicalResult(const Twine &)> errorHandler) {
  auto printError = [](const Twine &message) {
    llvm::errs() << message << "\n";
    return failure();
  };
  return moe::validateNVPTXPipelineOptions(options, errorHandler ? errorHandler
                                                                 : printError);
}

/// Steps 1-3 of both pipelines, for option values already validated.
static void addGpuLaunchPasses(OpPassManager &pm, const moe::NVPTXPipelineOptions &options) {
  using namespace moe;
  // Every pass from its typed constructor and option struct (as upstream's
  // buildLowerToNVVMPassPipeline): nothing is parsed here, so nothing here
  // can fail once the option values are valid, and user strings (paths,
  // features) are never spliced into pipeline text.

  // 1. The target first: an empty gpu.module @moe_kernels carrying the
  // #nvvm.target (upstream's attach pass), from which moe-gpu-configure
  // chooses each op's #moe.gpu_config (upstream's SM-version rules, no chip
  // name matching); then moe -> kernels + host code on tensors, the host's
  // own tensor ops (residual adds, ...) through linalg.
  pm.addPass(createMoEGPUKernelModule());
  GpuNVVMAttachTargetOptions target;
  target.moduleMatcher = ("^" + moe::MoEDialect::getGpuKernelModuleName() + "$").str();
  target.triple = options.triple;
  target.chip = options.chip;
  target.features = options.features;
  target.optLevel = static_cast<unsigned>(options.optLevel);
  pm.addPass(createGpuNVVMAttachTarget(target));
  MoEGPUConfigureOptions configure;
  configure.tensorCores = options.tensorCores;
  configure.decodeSplitK = options.decodeSplitK;
  configure.bigTileRows = options.bigTileRows;
  configure.wgmmaGroupsInFlight = options.wgmmaGroupsInFlight;
  configure.mmaStages = options.mmaStages;
  pm.addPass(createMoEGPUConfigure(configure));
  ConvertMoEToGPUOptions toGPU;
  toGPU.deviceAbi = options.deviceAbi;
  toGPU.checkIndices = options.checkIndices;
  pm.addPass(createConvertMoEToGPU(toGPU));
  // The kernels' math as the CPU's polynomials (no libdevice), before the
  // host emulation of the tests or the NVVM lowering below reads them.
  pm.nest<gpu::GPUModuleOp>().addPass(createMoEGPUKernelMath());
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  pm.addPass(createCanonicalizerPass());
  // 2. Host bufferization and deallocation (device buffers are managed by
  // convert-moe-to-gpu: bufferization.manual_deallocation); device-abi:
  // results into the caller's device buffers. No CSE before it, as on the
  // CPU path (CpuPipeline.cpp): CSE would merge the late to_buffer of an
  // upload into an earlier one and let an element-wise op in between reuse
  // that tensor's buffer (found by a block's gradient, which reads x again
  // after x + layer(x)).
  addHostBufferization(pm, options.resultsToOutParams || options.deviceAbi);
  pm.addPass(createCSEPass());
  if (options.deviceAbi)
    pm.addPass(createMoEGPUDeviceABI());
  // 3. Launch placeholders -> gpu.launch_func.
  pm.addPass(createMoEGPUMaterializeLaunches());
}

LogicalResult moe::buildGpuLaunchPipeline(
    OpPassManager &pm, const NVPTXPipelineOptions &options,
    function_ref<LogicalResult(const Twine &)> errorHandler) {
  if (failed(validate(options, errorHandler)))
    return failure();
  addGpuLaunchPasses(pm, options);
  return success();
}

LogicalResult moe::buildNVPTXPipeline(
    OpPassManager &pm, const NVPTXPipelineOptions &options,
    function_ref<LogicalResult(const Twine &)> errorHandler) {
  if (failed(validate(options, errorHandler)))
    return failure();
  // 1-3. moe -> kernels + host launches.
  addGpuLaunchPasses(pm, options);
  // The host ops on one stream.
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addNestedPass<func::FuncOp>(createGpuAsyncRegionPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // 4. Kernels: gpu -> nvvm (as upstream's buildGpuPassPipeline; the
  // target was attached in step 1).
  // The tensor-core GEMMs (MmaGemm.cpp) use nvgpu ops (cp.async, ldmatrix):
  // convert-nvgpu-to-nvvm lowers them before the gpu ops; the sm_90a wgmma
  // ops are inline PTX (convert-nvvm-to-llvm).
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createStripDebugInfoPass());
  kernels.addPass(createConvertNVGPUToNVVMPass());
  // What --moe-gpu-kernel-math left (floor, sqrt, rsqrt, ...) as NVVM
  // intrinsics: convert-gpu-to-nvvm would make them libdevice calls.
  kernels.addPass(createMoEGPUMathToNVVM());
  kernels.addPass(createConvertGpuOpsToNVVMOps());
  kernels.addPass(createConvertNVVMToLLVMPass());
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
  // 5. Host: mgpu* runtime calls (as upstream's buildHostPostPipeline), then
  // the serialization of the kernels.
  pm.addPass(createGpuToLLVMConversionPass());
  if (options.format == "isa") {
    // PTX needs no toolkit (the kernels link no libdevice).
    pm.addPass(createMoEGPUModuleToPTX());
  } else {
    // A cubin or fatbin needs ptxas (upstream's serializer also looks for
    // it on $PATH and says so when it is nowhere).
    GpuModuleToBinaryPassOptions toBinary;
    toBinary.compilationTarget = options.format;
    toBinary.toolkitPath = cudaToolkit(options);
    pm.addPass(createGpuModuleToBinaryPass(toBinary));
    pm.addPass(createMoEGPUStripObjectTimings());
  }
  addHostToLLVM(pm);
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  // device-abi: the public functions that read no device data back enqueue
  // their work on the thread's stream and return without waiting for it
  // (docs/aot.md, "Stream order").
  if (options.deviceAbi)
    pm.addPass(createMoEGPUStreamOrdered());
  return success();
}
