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
// Dynamically shaped results (their size is known only once the function has
// run) are returned instead: the CPU backend then lowers without
// results-to-out-params, and the entry becomes
//
//   void _mlir_ciface_<entry>(Ret *ret, Desc_0 *arg0, ..., Desc_n *argn)
//
// where Ret is the result's descriptor for one result and a struct of the
// results' descriptors (in order, all fields 64-bit words, so no padding)
// for several. The callee allocated the returned buffers (malloc); run()
// copies each into a HostTensor of the returned sizes (honouring offset and
// strides) and frees each distinct allocated pointer once, except pointers
// of the caller's argument buffers (a function may return an argument) and
// the 0xdeadbeef that memref.get_global puts in the allocated field.
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
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstring>

using namespace mlir;

namespace moe {
namespace run {

namespace {

/// Memory of one memref descriptor for a row-major buffer: {allocated,
/// aligned, offset, sizes[R], strides[R]} as 64-bit words.
std::vector<int64_t> makeDescriptor(void *ptr,
                                    const std::vector<int64_t> &shape) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> words(3 + 2 * rank);
  static_assert(sizeof(void *) == sizeof(int64_t), "64-bit host required");
  std::memcpy(&words[0], &ptr, sizeof(ptr));
  std::memcpy(&words[1], &ptr, sizeof(ptr));
  words[2] = 0;
  int64_t stride = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    words[3 + d] = shape[d];
    words[3 + rank + d] = stride;
    stride *= shape[d];
  }
  return words;
}

std::vector<int64_t> makeDescriptor(HostTensor &tensor) {
  return makeDescriptor(tensor.data(), tensor.shape());
}

/// The packed arguments of a `_mlir_ciface_` call: `lead` (the pointer to the
/// returned descriptors, when results are returned) first, then for every
/// tensor a pointer to the pointer to its memref descriptor. Owns the
/// descriptors for the duration of the call.
class PackedCall {
public:
  PackedCall(void **lead, std::initializer_list<std::vector<HostTensor> *> groups) {
    for (std::vector<HostTensor> *group : groups)
      for (HostTensor &t : *group)
        descriptors.push_back(makeDescriptor(t));
    pack(lead);
  }
  /// Ready-made descriptors (of device buffers).
  explicit PackedCall(std::vector<std::vector<int64_t>> described)
      : descriptors(std::move(described)) {
    pack(nullptr);
  }
  void **args() { return packed.data(); }

private:
  void pack(void **lead) {
    descriptorPtrs.reserve(descriptors.size());
    for (auto &d : descriptors)
      descriptorPtrs.push_back(d.data());
    if (lead)
      packed.push_back(lead);
    for (void *&p : descriptorPtrs)
      packed.push_back(&p);
  }

  std::vector<std::vector<int64_t>> descriptors;
  std::vector<void *> descriptorPtrs;
  std::vector<void *> packed;
};

/// A backend that lowers with a pipeline, JIT-compiles the host code and
/// calls the entry's C interface.
class JitBackend : public Backend {
public:
  explicit JitBackend(const CpuBackendOptions &options) : options(options) {}
  llvm::Error compile(ModuleOp module, const Signature &signature) override;
  llvm::Error run(std::vector<HostTensor> &arguments,
                  std::vector<HostTensor> &results) override;

protected:
  /// Lowers `module` to the LLVM dialect (buildPipeline) and returns the
  /// module to JIT-compile: `module` itself, lowered in place, by default.
  virtual llvm::Expected<ModuleOp> lower(ModuleOp module,
                                         bool resultsToOutParams);
  /// Runs buildPipeline(resultsToOutParams) on `module`.
  llvm::Error runPipeline(ModuleOp module, bool resultsToOutParams);
  /// Calls the entry's packed C interface.
  void callEntry(void **args) { entry(args); }

  /// Adds the lowering to the LLVM dialect: results as out-parameters, or
  /// returned (when `resultsToOutParams` is false).
  /// On failure the error is a line without the "moe-run: " prefix.
  virtual llvm::Error buildPipeline(OpPassManager &pm,
                                    bool resultsToOutParams) = 0;
  /// Whether the backend can return results (dynamically shaped ones).
  virtual bool canReturnResults() const { return true; }
  /// Checked after every run (asynchronous device errors surface here).
  virtual llvm::Error afterRun() { return llvm::Error::success(); }

  CpuBackendOptions options;
  Signature signature;

private:
  llvm::Error runReturningResults(std::vector<HostTensor> &arguments,
                                  std::vector<HostTensor> &results);

  /// The results come back as descriptors (see the file comment).
  bool returnsResults = false;
  std::unique_ptr<llvm::TargetMachine> hostMachine;
  std::unique_ptr<ExecutionEngine> engine;
  void (*entry)(void **) = nullptr;
};

class CpuBackend final : public JitBackend {
public:
  using JitBackend::JitBackend;
  const char *name() const override { return "cpu"; }

private:
  llvm::Error buildPipeline(OpPassManager &pm,
                            bool resultsToOutParams) override {
    mlir::moe::CpuPipelineOptions pipelineOptions;
    pipelineOptions.resultsToOutParams = resultsToOutParams;
    pipelineOptions.parallel = options.parallel;
    // The strategy is chosen for the CPU the JIT compiles for.
    pipelineOptions.cpu = options.cpu;
    if (!options.bf16Dot)
      pipelineOptions.cpuFeatures = "-avx512bf16";
    mlir::moe::buildCpuPipeline(pm, pipelineOptions);
    return llvm::Error::success();
  }
};

/// The CUDA backend: kernels for the device's compute capability (PTX,
/// JIT-compiled by the driver), host code calling libMoECudaRuntime.
///
/// Device arguments (the lowering's device-abi, when the function allows
/// it): the first run() uploads every argument (parameters and inputs) and
/// allocates the result buffers on the device; every run reuses them, and
/// finish() copies the results back once. Otherwise (host ABI: a host op
/// reads a device tensor) the lowered code copies in and out on each run.
/// Either way the runs share one stream (moeRuntimeSetStream), the runtime's
/// caches keep the kernels' functions and scratch memory from the first run,
/// each run ends with one cuCtxSynchronize (moeCudaSynchronize: where an
/// asynchronous fault shows up, and what the fake driver's trace shows
/// between runs), and memory is freed only after a synchronization.
class CudaBackend final : public JitBackend {
public:
  CudaBackend(const CpuBackendOptions &options, std::string chip)
      : JitBackend(options), chip(std::move(chip)) {
    // moe-run prints the runtime's first error itself, once.
    moeRuntimeSetErrorPrinting(0);
  }
  ~CudaBackend() override {
    std::string ignored;
    release(&ignored);
  }
  const char *name() const override { return "cuda"; }
  llvm::Error run(std::vector<HostTensor> &arguments,
                  std::vector<HostTensor> &results) override;
  llvm::Error finish(std::vector<HostTensor> &results) override;

private:
  // The GPU path's result buffers are not known to be malloc'ed host memory.
  bool canReturnResults() const override { return false; }
  llvm::Expected<ModuleOp> lower(ModuleOp module,
                                 bool resultsToOutParams) override;
  llvm::Error buildPipeline(OpPassManager &pm,
                            bool resultsToOutParams) override {
    (void)resultsToOutParams;
    mlir::moe::NVPTXPipelineOptions pipelineOptions;
    pipelineOptions.chip = chip;
    pipelineOptions.features = "+ptx80";
    pipelineOptions.format = "isa";
    pipelineOptions.resultsToOutParams = true;
    pipelineOptions.deviceAbi = deviceArguments;
    std::string error;
    if (failed(mlir::moe::buildNVPTXPipeline(
            pm, pipelineOptions, [&](const llvm::Twine &message) {
              error = message.str();
              return failure();
            })))
      return llvm::createStringError(error);
    return llvm::Error::success();
  }
  llvm::Error afterRun() override {
    std::string message;
    moeCudaSynchronize(&message);
    return takeError();
  }
  static llvm::Error takeError() {
    std::string message;
    if (moeCudaTakeError(&message))
      return llvm::createStringError(stripRuntimePrefix(message));
    return llvm::Error::success();
  }
  /// The stream of every run, made the thread's stream for the lowered code.
  llvm::Error ensureStream();
  /// Uploads the arguments and allocates the results (first run).
  llvm::Error upload(std::vector<HostTensor> &arguments,
                     std::vector<HostTensor> &results);
  /// Synchronizes, then frees the device buffers, the stream and the
  /// runtime's caches. Returns false with *why on an error.
  bool release(std::string *why);

  std::string chip;
  /// Lower with device arguments (see the class comment).
  bool deviceArguments = false;
  void *stream = nullptr;
  struct DeviceBuffer {
    void *ptr = nullptr;
    std::vector<int64_t> shape;
    size_t bytes = 0;
  };
  std::vector<DeviceBuffer> deviceArgs, deviceResults;
  bool uploaded = false;
};

llvm::Expected<ModuleOp> CudaBackend::lower(ModuleOp module,
                                            bool resultsToOutParams) {
  // Device arguments when the function allows them: its tensors are used
  // only by moe ops, element-wise ops (run on the device), reshapes and the
  // return. A check on the IR decides before anything is lowered, so the
  // module is lowered once, with the convention it gets.
  deviceArguments = mlir::moe::deviceAbiApplies(module);
  if (llvm::Error err = runPipeline(module, resultsToOutParams))
    return std::move(err);
  return module;
}

llvm::Error CudaBackend::ensureStream() {
  if (stream)
    return llvm::Error::success();
  moeRuntimeSetStream(nullptr);
  stream = mgpuStreamCreate();
  if (!stream)
    return takeError();
  moeRuntimeSetStream(stream);
  return llvm::Error::success();
}

llvm::Error CudaBackend::upload(std::vector<HostTensor> &arguments,
                                std::vector<HostTensor> &results) {
  std::string why;
  auto failure = [&](const std::string &what) {
    return llvm::createStringError(what + ": " + stripRuntimePrefix(why));
  };
  for (HostTensor &t : arguments) {
    DeviceBuffer b{nullptr, t.shape(), t.byteSize()};
    if (b.bytes && !(b.ptr = moeCudaMalloc(b.bytes, &why)))
      return failure("cannot allocate argument #" +
                     std::to_string(deviceArgs.size()) + " on the device");
    deviceArgs.push_back(b);
    if (!moeCudaCopyToDevice(b.ptr, t.data(), b.bytes, &why))
      return failure("cannot copy argument #" +
                     std::to_string(deviceArgs.size() - 1) + " to the device");
  }
  for (HostTensor &t : results) {
    DeviceBuffer b{nullptr, t.shape(), t.byteSize()};
    if (b.bytes && !(b.ptr = moeCudaMalloc(b.bytes, &why)))
      return failure("cannot allocate result #" +
                     std::to_string(deviceResults.size()) + " on the device");
    deviceResults.push_back(b);
  }
  uploaded = true;
  return llvm::Error::success();
}

llvm::Error CudaBackend::run(std::vector<HostTensor> &arguments,
                             std::vector<HostTensor> &results) {
  if (llvm::Error err = ensureStream())
    return err;
  if (!deviceArguments)
    return JitBackend::run(arguments, results);
  if (arguments.size() != signature.arguments.size() ||
      results.size() != signature.results.size())
    return llvm::createStringError("internal error: wrong buffer count");
  if (!uploaded)
    if (llvm::Error err = upload(arguments, results))
      return err;
  std::vector<std::vector<int64_t>> descriptors;
  for (DeviceBuffer &b : deviceArgs)
    descriptors.push_back(makeDescriptor(b.ptr, b.shape));
  for (DeviceBuffer &b : deviceResults)
    descriptors.push_back(makeDescriptor(b.ptr, b.shape));
  PackedCall call(std::move(descriptors));
  callEntry(call.args());
  return afterRun();
}

llvm::Error CudaBackend::finish(std::vector<HostTensor> &results) {
  std::string why;
  if (uploaded) {
    if (results.size() != deviceResults.size())
      return llvm::createStringError("internal error: wrong buffer count");
    for (size_t i = 0; i < results.size(); ++i)
      if (!moeCudaCopyToHost(results[i].data(), deviceResults[i].ptr,
                             deviceResults[i].bytes, &why))
        return llvm::createStringError("cannot copy result #" +
                                       std::to_string(i) + " to the host: " +
                                       stripRuntimePrefix(why));
  }
  if (!release(&why))
    return llvm::createStringError(stripRuntimePrefix(why));
  return llvm::Error::success();
}

bool CudaBackend::release(std::string *why) {
  if (!stream && deviceArgs.empty() && deviceResults.empty())
    return true;
  // The runs' kernels may still read the arguments: wait for them first.
  bool ok = moeCudaSynchronize(why);
  for (std::vector<DeviceBuffer> *group : {&deviceArgs, &deviceResults})
    for (DeviceBuffer &b : *group)
      if (!moeCudaFree(b.ptr, ok ? why : nullptr))
        ok = false;
  deviceArgs.clear();
  deviceResults.clear();
  uploaded = false;
  if (stream) {
    // Back to the runtime's pool, which moeRuntimeEmptyCache releases.
    moeRuntimeSetStream(nullptr);
    mgpuStreamDestroy(stream);
    stream = nullptr;
  }
  moeRuntimeEmptyCache();
  std::string message;
  if (moeCudaTakeError(&message) && ok) {
    *why = message;
    ok = false;
  }
  return ok;
}

llvm::Error JitBackend::compile(ModuleOp module, const Signature &sig) {
  signature = sig;
  returnsResults = sig.hasDynamicResults();
  if (returnsResults && !canReturnResults()) {
    for (const ValueInfo &r : sig.results)
      if (r.hasDynamicShape())
        return llvm::createStringError(
            std::string("the ") + name() +
            " backend does not support dynamically shaped results yet (@" +
            sig.name + " result #" + std::to_string(r.index) + " has type " +
            r.typeString + "); use --device=cpu");
  }
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

  auto loweredOr = lower(module, /*resultsToOutParams=*/!returnsResults);
  if (!loweredOr)
    return loweredOr.takeError();
  ModuleOp lowered = *loweredOr;
  if (options.dumpLowered) {
    lowered.print(llvm::outs());
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
  if (options.cpu != "native") {
    // A named CPU: its own features, not the host's (the pipeline's
    // moe-cpu-configure has checked the name).
    tmBuilder->setCPU(options.cpu);
    tmBuilder->getFeatures() = llvm::SubtargetFeatures();
  }
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
  // Upstream registers both listeners by default; the perf one leaves a
  // jitdump file and a ~/.debug/jit (or /tmp/.debug/jit) folder per run.
  engineOptions.enableGDBNotificationListener = options.jitDebugListeners;
  engineOptions.enablePerfNotificationListener = options.jitDebugListeners;
  auto created = ExecutionEngine::create(lowered, engineOptions);
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

llvm::Error JitBackend::runPipeline(ModuleOp module, bool resultsToOutParams) {
  PassManager pm(module.getContext(), module.getOperationName());
  if (failed(applyPassManagerCLOptions(pm)))
    return llvm::createStringError("invalid pass manager options");
  if (llvm::Error err = buildPipeline(pm, resultsToOutParams))
    return err;
  if (failed(pm.run(module)))
    return llvm::createStringError("lowering @" + signature.name + " for the " +
                                   name() + " failed");
  return llvm::Error::success();
}

llvm::Expected<ModuleOp> JitBackend::lower(ModuleOp module,
                                           bool resultsToOutParams) {
  if (llvm::Error err = runPipeline(module, resultsToOutParams))
    return std::move(err);
  return module;
}

llvm::Error JitBackend::run(std::vector<HostTensor> &arguments,
                            std::vector<HostTensor> &results) {
  if (!entry)
    return llvm::createStringError("run() before compile()");
  if (returnsResults)
    return runReturningResults(arguments, results);
  if (arguments.size() != signature.arguments.size() ||
      results.size() != signature.results.size())
    return llvm::createStringError("internal error: wrong buffer count");

  PackedCall call(nullptr, {&arguments, &results});
  entry(call.args());
  return afterRun();
}

/// Copies the strided memref behind one returned descriptor (`words` points
/// at its allocated pointer) into a new row-major HostTensor.
llvm::Expected<HostTensor> copyReturned(const int64_t *words,
                                        const ValueInfo &info) {
  const int64_t rank = static_cast<int64_t>(info.shape.size());
  const uint8_t *aligned;
  std::memcpy(&aligned, &words[1], sizeof(aligned));
  const int64_t offset = words[2];
  std::vector<int64_t> sizes(words + 3, words + 3 + rank);
  std::vector<int64_t> strides(words + 3 + rank, words + 3 + 2 * rank);
  for (int64_t d = 0; d < rank; ++d)
    if (sizes[d] < 0 ||
        (info.shape[d] != ValueInfo::kDynamic && sizes[d] != info.shape[d]))
      return llvm::createStringError(
          "result #" + std::to_string(info.index) + " (" + info.typeString +
          ") came back with size " + std::to_string(sizes[d]) +
          " in dimension " + std::to_string(d));
  HostTensor tensor(info.dtype, sizes);
  if (!tensor.ok())
    return llvm::createStringError(
        "cannot allocate " + std::to_string(tensor.byteSize()) +
        " bytes for result #" + std::to_string(info.index));
  const int64_t n = tensor.numElements();
  if (n == 0)
    return std::move(tensor);
  const size_t elem = io::elementSize(info.dtype);
  // Row-major and contiguous: one copy.
  bool contiguous = true;
  for (int64_t d = rank - 1, want = 1; d >= 0; --d) {
    if (sizes[d] != 1 && strides[d] != want)
      contiguous = false;
    want *= sizes[d];
  }
  if (contiguous) {
    std::memcpy(tensor.data(), aligned + offset * elem, tensor.byteSize());
    return std::move(tensor);
  }
  std::vector<int64_t> index(rank, 0);
  uint8_t *out = tensor.data();
  for (int64_t i = 0; i < n; ++i) {
    int64_t pos = offset;
    for (int64_t d = 0; d < rank; ++d)
      pos += index[d] * strides[d];
    std::memcpy(out + i * elem, aligned + pos * elem, elem);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++index[d] < sizes[d])
        break;
      index[d] = 0;
    }
  }
  return std::move(tensor);
}

llvm::Error JitBackend::runReturningResults(std::vector<HostTensor> &arguments,
                                            std::vector<HostTensor> &results) {
  if (arguments.size() != signature.arguments.size())
    return llvm::createStringError("internal error: wrong buffer count");
  // The returned descriptors, back to back.
  size_t words = 0;
  for (const ValueInfo &r : signature.results)
    words += 3 + 2 * r.shape.size();
  std::vector<int64_t> returned(std::max<size_t>(words, 1), 0);
  void *returnedPtr = returned.data();

  PackedCall call(&returnedPtr, {&arguments});
  entry(call.args());
  llvm::Error status = afterRun();

  // Copy every result first (two results may share a buffer), then free.
  std::vector<HostTensor> copies;
  std::vector<void *> allocated;
  llvm::Error copyError = llvm::Error::success();
  size_t at = 0;
  for (const ValueInfo &r : signature.results) {
    void *ptr;
    std::memcpy(&ptr, &returned[at], sizeof(ptr));
    allocated.push_back(ptr);
    if (!copyError) {
      auto copy = copyReturned(&returned[at], r);
      if (copy)
        copies.push_back(std::move(*copy));
      else
        copyError = copy.takeError();
    }
    at += 3 + 2 * r.shape.size();
  }
  // A returned argument, or a global's placeholder, is not ours to free.
  void *const globalPlaceholder = reinterpret_cast<void *>(uintptr_t(0xdeadbeef));
  for (size_t i = 0; i < allocated.size(); ++i) {
    void *ptr = allocated[i];
    if (!ptr || ptr == globalPlaceholder)
      continue;
    if (std::find(allocated.begin(), allocated.begin() + i, ptr) !=
        allocated.begin() + i)
      continue;
    bool isArgument = false;
    for (HostTensor &arg : arguments)
      isArgument |= static_cast<void *>(arg.data()) == ptr;
    if (!isArgument)
      std::free(ptr);
  }
  if (status) {
    llvm::consumeError(std::move(copyError));
    return status;
  }
  if (copyError)
    return copyError;
  results = std::move(copies);
  return llvm::Error::success();
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
