//===- CpuBackend.cpp - moe-run through the MLIR JIT (cpu and cuda) -------===//
//
// Both backends lower the module, JIT-compile the host code with MLIR's
// ExecutionEngine and call the entry; they differ in the pipeline (the CPU
// pipeline, or the NVPTX pipeline whose host code calls the mgpu* runtime
// that copies to and from the GPU) and in what they check after a run.
//
// Lowering: the entry gets `llvm.emit_c_interface` and every argument
// `bufferization.writable = false` (so the code never writes into the
// caller's input buffers), then moe::buildCpuPipeline with
// results-to-out-params. Afterwards the entry is
//
//   void _mlir_ciface_<entry>(Desc_0 *arg0, ..., Desc_n *out0, ...)
//
// with inputs first, then one out-parameter per result, each a pointer to a
// memref descriptor
//
//   struct Desc_R { T *allocated; T *aligned; int64_t offset;
//                   int64_t sizes[R]; int64_t strides[R]; };
//
// (for rank 0 just {allocated, aligned, offset}). ExecutionEngine wraps every
// function `f` into a packed `_mlir_f(void **args)` where args[i] points to
// the i-th argument value; for the ciface function the values are the
// descriptor pointers, so args[i] is a `Desc_i **`.
//
//===----------------------------------------------------------------------===//

#include "tools/moe-run/Backend.h"

#include "lowering/Pipelines.h"
#include "runtime/cuda/CudaRuntime.h"
#include "runtime/cuda/MgpuAbi.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace mlir;

namespace moe {
namespace run {

namespace {

/// Memory of one memref descriptor for a row-major buffer: {allocated,
/// aligned, offset, sizes[R], strides[R]} as 64-bit words.
std::vector<int64_t> makeDescriptor(HostTensor &tensor) {
  const int64_t rank = tensor.rank();
  std::vector<int64_t> words(3 + 2 * rank);
  static_assert(sizeof(void *) == sizeof(int64_t), "64-bit host required");
  void *ptr = tensor.data();
  std::memcpy(&words[0], &ptr, sizeof(ptr));
  std::memcpy(&words[1], &ptr, sizeof(ptr));
  words[2] = 0;
  int64_t stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    words[3 + d] = tensor.shape()[d];
    words[3 + rank + d] = stride;
    stride *= tensor.shape()[d];
  }
  return words;
}

/// A backend that lowers with a pipeline, JIT-compiles the host code and
/// calls the entry's C interface.
class JitBackend : public Backend {
public:
  explicit JitBackend(const CpuBackendOptions &options) : options(options) {}
  llvm::Error compile(ModuleOp module, const Signature &signature) override;
  llvm::Error run(std::vector<HostTensor> &arguments,
                  std::vector<HostTensor> &results) override;

protected:
  /// Adds the lowering to the LLVM dialect (results as out-parameters).
  virtual void buildPipeline(OpPassManager &pm) = 0;
  /// Checked after every run (asynchronous device errors surface here).
  virtual llvm::Error afterRun() { return llvm::Error::success(); }

  CpuBackendOptions options;

private:
  Signature signature;
  std::unique_ptr<llvm::TargetMachine> hostMachine;
  std::unique_ptr<ExecutionEngine> engine;
  void (*entry)(void **) = nullptr;
};

class CpuBackend final : public JitBackend {
public:
  using JitBackend::JitBackend;
  const char *name() const override { return "cpu"; }

private:
  void buildPipeline(OpPassManager &pm) override {
    mlir::moe::CpuPipelineOptions pipelineOptions;
    pipelineOptions.resultsToOutParams = true;
    pipelineOptions.parallel = options.parallel;
    mlir::moe::buildCpuPipeline(pm, pipelineOptions);
  }
};

/// The CUDA backend: kernels for the device's compute capability (PTX,
/// JIT-compiled by the driver), host code calling libMoECudaRuntime.
class CudaBackend final : public JitBackend {
public:
  CudaBackend(const CpuBackendOptions &options, std::string chip)
      : JitBackend(options), chip(std::move(chip)) {
    // moe-run prints the runtime's first error itself, once.
    moeRuntimeSetErrorPrinting(0);
  }
  const char *name() const override { return "cuda"; }

private:
  void buildPipeline(OpPassManager &pm) override {
    mlir::moe::NVPTXPipelineOptions pipelineOptions;
    pipelineOptions.chip = chip;
    pipelineOptions.features = "+ptx80";
    pipelineOptions.format = "isa";
    pipelineOptions.resultsToOutParams = true;
    mlir::moe::buildNVPTXPipeline(pm, pipelineOptions);
  }
  llvm::Error afterRun() override {
    std::string message;
    moeCudaSynchronize(&message);
    if (moeCudaTakeError(&message))
      return llvm::createStringError(stripRuntimePrefix(message));
    return llvm::Error::success();
  }
  std::string chip;
};

llvm::Error JitBackend::compile(ModuleOp module, const Signature &sig) {
  signature = sig;
  MLIRContext *ctx = module.getContext();
  auto func = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      module, StringAttr::get(ctx, sig.name));
  if (!func)
    return llvm::createStringError("no function @" + sig.name);

  func->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                UnitAttr::get(ctx));
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    // moe.param has served its purpose (binding); it must not reach LLVM.
    func.removeArgAttr(i, StringAttr::get(ctx, "moe.param"));
    func.setArgAttr(i, bufferization::BufferizationDialect::kWritableAttrName,
                    BoolAttr::get(ctx, false));
  }

  PassManager pm(ctx, module.getOperationName());
  if (failed(applyPassManagerCLOptions(pm)))
    return llvm::createStringError("invalid pass manager options");
  buildPipeline(pm);
  if (failed(pm.run(module)))
    return llvm::createStringError("lowering @" + sig.name + " for the " +
                                   name() + " failed");
  if (options.dumpLowered) {
    module.print(llvm::outs());
    llvm::outs() << "\n";
    llvm::outs().flush();
  }

  static bool targetsInitialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)targetsInitialized;

  std::vector<llvm::StringRef> libs;
  for (const std::string &lib : options.sharedLibs) {
    if (!llvm::sys::fs::exists(lib))
      return llvm::createStringError("runtime library " + lib + " not found");
    libs.push_back(lib);
  }
  // Optimize for the host CPU: with its TargetMachine the loop vectorizer
  // knows the vector width and costs (without one it barely vectorizes).
  auto tmBuilder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!tmBuilder)
    return llvm::createStringError("cannot describe the host CPU: " +
                                   llvm::toString(tmBuilder.takeError()));
  tmBuilder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  auto targetMachine = tmBuilder->createTargetMachine();
  if (!targetMachine)
    return llvm::createStringError("cannot create a target machine for the host: " +
                                   llvm::toString(targetMachine.takeError()));
  hostMachine = std::move(*targetMachine);
  auto transformer = makeOptimizingTransformer(/*optLevel=*/3,
                                               /*sizeLevel=*/0,
                                               /*targetMachine=*/hostMachine.get());
  ExecutionEngineOptions engineOptions;
  engineOptions.transformer = transformer;
  engineOptions.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  engineOptions.sharedLibPaths = libs;
  auto created = ExecutionEngine::create(module, engineOptions);
  if (!created)
    return llvm::createStringError("JIT compilation failed: " +
                                   llvm::toString(created.takeError()));
  engine = std::move(*created);
  // Run the module's global constructors now: the GPU path loads its
  // gpu.binary there (mgpuModuleLoad*), and entry() below bypasses
  // invokePacked, which would otherwise do it lazily.
  engine->initialize();

  auto fn = engine->lookupPacked("_mlir_ciface_" + sig.name);
  if (!fn)
    return llvm::createStringError("JIT compilation failed: " +
                                   llvm::toString(fn.takeError()));
  entry = *fn;
  return llvm::Error::success();
}

llvm::Error JitBackend::run(std::vector<HostTensor> &arguments,
                            std::vector<HostTensor> &results) {
  if (!entry)
    return llvm::createStringError("run() before compile()");
  if (arguments.size() != signature.arguments.size() ||
      results.size() != signature.results.size())
    return llvm::createStringError("internal error: wrong buffer count");

  std::vector<std::vector<int64_t>> descriptors;
  descriptors.reserve(arguments.size() + results.size());
  for (HostTensor &t : arguments)
    descriptors.push_back(makeDescriptor(t));
  for (HostTensor &t : results)
    descriptors.push_back(makeDescriptor(t));
  std::vector<void *> descriptorPtrs;
  descriptorPtrs.reserve(descriptors.size());
  for (auto &d : descriptors)
    descriptorPtrs.push_back(d.data());
  std::vector<void *> packed;
  packed.reserve(descriptorPtrs.size());
  for (void *&p : descriptorPtrs)
    packed.push_back(&p);

  entry(packed.data());
  return afterRun();
}

} // namespace

Backend::~Backend() = default;

std::unique_ptr<Backend> createCpuBackend(const CpuBackendOptions &options) {
  return std::make_unique<CpuBackend>(options);
}

std::unique_ptr<Backend> createCudaBackend(const CpuBackendOptions &options,
                                           const std::string &chip) {
  return std::make_unique<CudaBackend>(options, chip);
}

} // namespace run
} // namespace moe
