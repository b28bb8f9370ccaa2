//===- CudaBackend.cpp - moe-run on an NVIDIA GPU through the MLIR JIT ----===//
//
// The cuda backend (createCudaBackend, Backend.h): a JitBackend
// (JitBackend.h) that lowers with the NVPTX pipeline for the device's chip,
// keeps the arguments and results in device memory across the runs when the
// function allows the device ABI, and checks the runtime's sticky error
// after every run.
//
//===----------------------------------------------------------------------===//

#include "tools/moe-run/JitBackend.h"

#include "lowering/Pipelines.h"
#include "runtime/cuda/CudaRuntime.h"
#include "runtime/cuda/MgpuAbi.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"

#include <string>
#include <utility>
#include <vector>

using namespace mlir;

namespace moe {
namespace run {

namespace {

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

} // namespace

std::unique_ptr<Backend> createCudaBackend(const CpuBackendOptions &options,
                                           const std::string &chip) {
  return std::make_unique<CudaBackend>(options, chip);
}

} // namespace run
} // namespace moe
