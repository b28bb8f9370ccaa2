//===- CpuBackend.cpp - moe-run through the MLIR JIT (cpu) ----------------===//
//
// JitBackend (JitBackend.h, whose comment describes the calling convention):
// the entry's attributes, the lowering, the JIT compilation for the host CPU
// and the calls, with results as out-parameters or returned descriptors
// copied into HostTensors; and the cpu backend, a JitBackend with
// moe::buildCpuPipeline. The cuda backend is in CudaBackend.cpp.
//
//===----------------------------------------------------------------------===//

#include "tools/moe-run/JitBackend.h"

#include "lowering/Pipelines.h"
#include "tools/diagnostics/JitEngine.h"
#include "tools/diagnostics/OptLevel.h"

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
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h"
#include "llvm/ExecutionEngine/SectionMemoryManager.h"
#include "llvm/Support/DynamicLibrary.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

using namespace mlir;

namespace moe {
namespace run {

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

namespace {

class CpuBackend final : public JitBackend {
public:
  using JitBackend::JitBackend;
  const char *name() const override { return "cpu"; }

private:
  bool usesObjectCache() const override { return true; }

  llvm::Error buildPipeline(OpPassManager &pm,
                            bool resultsToOutParams) override {
    mlir::moe::CpuPipelineOptions pipelineOptions;
    pipelineOptions.resultsToOutParams = resultsToOutParams;
    pipelineOptions.parallel = options.parallel;
    // The strategy is chosen for the CPU the JIT compiles for.
    pipelineOptions.cpu = options.cpu;
    // Options that choose as without a feature remove it from the
    // configuration's view of the CPU (not from the code generator's).
    std::string without;
    if (!options.bf16Dot)
      without += "-avx512bf16,";
    else if (!options.amx)
      without += "-amx-tile,";
    if (!options.fp8Dot)
      without += "-avx512vbmi,";
    pipelineOptions.cpuFeatures = without;
    mlir::moe::buildCpuPipeline(pm, pipelineOptions);
    return llvm::Error::success();
  }
};

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

} // namespace

/// An exclusive lock on a file of the cache folder (flock), held while one
/// process looks up or writes an object, so that processes compiling the
/// same module wait for the first instead of compiling it too.
class ObjectCacheLock {
public:
  static llvm::Expected<std::unique_ptr<ObjectCacheLock>> acquire(const std::string &path) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      return llvm::createStringError("--cache-dir: cannot open " + path + ": " +
                                     std::strerror(errno));
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno == EINTR)
        continue;
      std::string message = std::strerror(errno);
      ::close(fd);
      return llvm::createStringError("--cache-dir: cannot lock " + path + ": " + message);
    }
    return std::unique_ptr<ObjectCacheLock>(new ObjectCacheLock(fd));
  }
  ~ObjectCacheLock() { ::close(fd); } // closing releases the lock
  ObjectCacheLock(const ObjectCacheLock &) = delete;
  ObjectCacheLock &operator=(const ObjectCacheLock &) = delete;

private:
  explicit ObjectCacheLock(int fd) : fd(fd) {}
  int fd;
};

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

  static bool targetsInitialized = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)targetsInitialized;

  for (const std::string &lib : options.sharedLibs)
    if (!llvm::sys::fs::exists(lib))
      return llvm::createStringError("runtime library " + lib + " not found");
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
  // --opt-level (3 by default): the code generator's level too.
  llvm::CodeGenOptLevel codeGenLevel = *llvm::CodeGenOpt::getLevel(options.optLevel);
  tmBuilder->setCodeGenOptLevel(codeGenLevel);

  // --cache-dir: the object of an identical compilation, when there is one
  // (one process compiles, the others wait on the key's lock: the ranks of
  // an MPI job compile once).
  std::string cachePath;
  std::unique_ptr<ObjectCacheLock> cacheLock;
  // Not with --dump-lowered or --jit-debug-listeners: they are about the
  // compilation itself.
  if (!options.cacheDir.empty() && usesObjectCache() && !options.dumpLowered &&
      !options.jitDebugListeners) {
    llvm::Expected<std::string> key = objectCacheKey(module, *tmBuilder);
    if (!key)
      return key.takeError();
    if (std::error_code ec = llvm::sys::fs::create_directories(options.cacheDir))
      return llvm::createStringError("--cache-dir=" + options.cacheDir +
                                     ": cannot create the folder: " + ec.message());
    llvm::SmallString<256> path(options.cacheDir);
    llvm::sys::path::append(path, *key + ".o");
    cachePath = std::string(path);
    llvm::Expected<std::unique_ptr<ObjectCacheLock>> lock =
        ObjectCacheLock::acquire(cachePath + ".lock");
    if (!lock)
      return lock.takeError();
    cacheLock = std::move(*lock);
    if (auto object = llvm::MemoryBuffer::getFile(cachePath, /*IsText=*/false,
                                                  /*RequiresNullTerminator=*/false)) {
      if (llvm::Error err = loadCachedObject(std::move(*object), *tmBuilder))
        llvm::consumeError(std::move(err)); // unusable: compiled again below
      else
        return llvm::Error::success();
    }
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

  // AMX tile code is compiled at O1 at least (OptLevel.h, compileLevelFor;
  // the object cache's key above has the level asked for).
  unsigned level = mlir::moe::tools::compileLevelFor(lowered, options.optLevel);
  codeGenLevel = *llvm::CodeGenOpt::getLevel(level);
  tmBuilder->setCodeGenOptLevel(codeGenLevel);
  std::vector<llvm::StringRef> libs(options.sharedLibs.begin(), options.sharedLibs.end());
  auto targetMachine = tmBuilder->createTargetMachine();
  if (!targetMachine)
    return llvm::createStringError("cannot create a target machine for the host: " +
                                   llvm::toString(targetMachine.takeError()));
  hostMachine = std::move(*targetMachine);
  auto transformer = makeOptimizingTransformer(/*optLevel=*/level,
                                               /*sizeLevel=*/0,
                                               /*targetMachine=*/hostMachine.get());
  ExecutionEngineOptions engineOptions;
  engineOptions.transformer = transformer;
  engineOptions.jitCodeGenOptLevel = codeGenLevel;
  engineOptions.sharedLibPaths = libs;
  engineOptions.enableObjectDump = !cachePath.empty();
  // Upstream registers both listeners by default; the perf one leaves a
  // jitdump file and a ~/.debug/jit (or /tmp/.debug/jit) folder per run.
  engineOptions.enableGDBNotificationListener = options.jitDebugListeners;
  engineOptions.enablePerfNotificationListener = options.jitDebugListeners;
  // From the same builder: --mcpu and --opt-level reach the code generator.
  auto created = mlir::moe::tools::createJitEngine(lowered, engineOptions, *tmBuilder);
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
  if (!cachePath.empty()) {
    // Written whole under another name, then renamed: a reader never sees
    // a partial object.
    std::string partial = cachePath + ".partial";
    engine->dumpToObjectFile(partial);
    if (std::error_code ec = llvm::sys::fs::rename(partial, cachePath))
      return llvm::createStringError("--cache-dir=" + options.cacheDir + ": cannot write " +
                                     cachePath + ": " + ec.message());
  }
  return llvm::Error::success();
}

/// What determines the compiled object, hashed (SHA-256, hex): a format
/// tag, the LLVM version, this executable (size and modification time: a
/// rebuilt moe-run compiles anew), the target (triple, CPU, features,
/// level), the lowering pipeline as text (every pass option), the entry and
/// its calling convention, and the module as parsed, without its locations
/// (the same module from another file is the same compilation: the lowered
/// code reports run-time errors by kind, test/tools/moe-run/cache-dir.test
/// checks that no source path reaches it).
llvm::Expected<std::string>
JitBackend::objectCacheKey(ModuleOp module, const llvm::orc::JITTargetMachineBuilder &target) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "moe-run object cache 1\n" << LLVM_VERSION_STRING << "\n";
  std::string exe = llvm::sys::fs::getMainExecutable(nullptr, nullptr);
  llvm::sys::fs::file_status status;
  if (exe.empty() || llvm::sys::fs::status(exe, status))
    return llvm::createStringError("--cache-dir: cannot read this executable's status");
  os << exe << " " << status.getSize() << " "
     << status.getLastModificationTime().time_since_epoch().count() << "\n";
  os << target.getTargetTriple().str() << " " << target.getCPU() << " "
     << target.getFeatures().getString() << " O" << options.optLevel << "\n";
  PassManager pm(module.getContext(), module.getOperationName());
  if (llvm::Error err = buildPipeline(pm, !returnsResults))
    return std::move(err);
  pm.printAsTextualPipeline(os);
  os << "\n" << signature.name << " " << returnsResults << "\n";
  module->print(os, OpPrintingFlags().enableDebugInfo(/*enable=*/false));
  llvm::SHA256 hash;
  hash.update(text);
  return llvm::toHex(hash.final(), /*LowerCase=*/true);
}

/// Links a cached object into a JIT of its own, with the symbols the
/// ExecutionEngine would give it: the runtime libraries' (those with an
/// `__mlir_execution_engine_init` hook register theirs through it, the
/// others are searched) and the process's.
llvm::Error JitBackend::loadCachedObject(std::unique_ptr<llvm::MemoryBuffer> object,
                                         const llvm::orc::JITTargetMachineBuilder &target) {
  // Linked as the ExecutionEngine links what it compiles (RuntimeDyld, its
  // sections allocated by a SectionMemoryManager, close enough together
  // for the code model's 32-bit offsets).
  auto jit = llvm::orc::LLJITBuilder()
                 .setJITTargetMachineBuilder(target)
                 .setObjectLinkingLayerCreator([](llvm::orc::ExecutionSession &session)
                                                   -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
                   return std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(
                       session, [](const llvm::MemoryBuffer &) {
                         return std::make_unique<llvm::SectionMemoryManager>();
                       });
                 })
                 .create();
  if (!jit)
    return jit.takeError();
  llvm::orc::JITDylib &main = (*jit)->getMainJITDylib();
  const char prefix = (*jit)->getDataLayout().getGlobalPrefix();
  llvm::orc::MangleAndInterner mangle((*jit)->getExecutionSession(), (*jit)->getDataLayout());
  std::vector<void (*)()> destroyHooks;
  for (const std::string &path : options.sharedLibs) {
    std::string error;
    auto lib = llvm::sys::DynamicLibrary::getPermanentLibrary(path.c_str(), &error);
    if (!lib.isValid())
      return llvm::createStringError("cannot load " + path + ": " + error);
    auto init = reinterpret_cast<ExecutionEngine::LibraryInitFn>(
        lib.getAddressOfSymbol(ExecutionEngine::kLibraryInitFnName));
    auto destroy = reinterpret_cast<ExecutionEngine::LibraryDestroyFn>(
        lib.getAddressOfSymbol(ExecutionEngine::kLibraryDestroyFnName));
    if (init && destroy) {
      llvm::StringMap<void *> exported;
      init(exported);
      llvm::orc::SymbolMap symbols;
      for (auto &entry : exported)
        symbols[mangle(entry.getKey())] = {llvm::orc::ExecutorAddr::fromPtr(entry.getValue()),
                                           llvm::JITSymbolFlags::Exported};
      if (llvm::Error err = main.define(llvm::orc::absoluteSymbols(std::move(symbols))))
        return err;
      destroyHooks.push_back(destroy);
    } else {
      main.addGenerator(
          std::make_unique<llvm::orc::DynamicLibrarySearchGenerator>(lib, prefix));
    }
  }
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(prefix);
  if (!process)
    return process.takeError();
  main.addGenerator(std::move(*process));
  if (llvm::Error err = (*jit)->addObjectFile(std::move(object)))
    return err;
  auto fn = (*jit)->lookup("_mlir__mlir_ciface_" + signature.name);
  if (!fn)
    return fn.takeError();
  entry = fn->toPtr<void (*)(void **)>();
  cachedJit = std::move(*jit);
  libraryDestroyHooks = std::move(destroyHooks);
  return llvm::Error::success();
}

JitBackend::~JitBackend() {
  engine.reset();
  // The runtime libraries first (the async runtime joins its worker
  // threads, which may still be returning into the JIT's code), then the
  // code: the ExecutionEngine's order.
  for (void (*destroy)() : libraryDestroyHooks)
    destroy();
  cachedJit.reset();
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

Backend::~Backend() = default;

std::unique_ptr<Backend> createCpuBackend(const CpuBackendOptions &options) {
  return std::make_unique<CpuBackend>(options);
}

} // namespace run
} // namespace moe
