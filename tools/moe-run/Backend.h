//===- Backend.h - moe-run execution backends ------------------*- C++ -*-===//
//
// moe-run binds the arguments of one function on the host, then hands the
// module to a backend that lowers, compiles and runs it. A backend sees the
// entry's signature (recorded before lowering) and host buffers for every
// argument and result; where the data lives while it runs is its business.
// The CPU backend is the only one so far; a CUDA backend implements the same
// interface.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TOOLS_MOE_RUN_BACKEND_H
#define MOE_TOOLS_MOE_RUN_BACKEND_H

#include "runtime/io/Checkpoint.h"
#include "runtime/io/TensorIO.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moe {
namespace run {

/// A dense tensor in 64-byte aligned host memory (row-major, little-endian),
/// the layout the lowered code expects behind a memref descriptor with an
/// identity layout.
class HostTensor {
public:
  HostTensor() = default;
  HostTensor(io::DType dtype, std::vector<int64_t> shape);
  HostTensor(HostTensor &&) = default;
  HostTensor &operator=(HostTensor &&) = default;

  /// False if the memory could not be allocated.
  bool ok() const { return storage != nullptr; }
  io::DType dtype() const { return elementType; }
  const std::vector<int64_t> &shape() const { return dims; }
  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t numElements() const { return count; }
  size_t byteSize() const { return count * io::elementSize(elementType); }
  uint8_t *data() { return storage.get(); }
  const uint8_t *data() const { return storage.get(); }

  /// Copies the bytes of `tensor`, which must have this dtype and shape.
  void assign(const io::Tensor &tensor);
  /// A copy as an io::Tensor.
  io::Tensor toTensor() const;
  /// Element `i` as a double.
  double elementAsDouble(int64_t i) const;

private:
  struct Free {
    void operator()(uint8_t *p) const { std::free(p); }
  };
  io::DType elementType = io::DType::F32;
  std::vector<int64_t> dims;
  int64_t count = 0;
  std::unique_ptr<uint8_t, Free> storage;
};

/// One argument or result of the entry function.
struct ValueInfo {
  /// A dynamic dimension in `shape`.
  static constexpr int64_t kDynamic = -1;
  /// The position among the arguments (or results).
  unsigned index = 0;
  /// The type as MLIR prints it, e.g. "tensor<64x128xf32>" or
  /// "tensor<?x128xf32>".
  std::string typeString;
  io::DType dtype = io::DType::F32;
  /// The declared shape; kDynamic for `?`.
  std::vector<int64_t> shape;
  bool hasDynamicShape() const {
    for (int64_t d : shape)
      if (d == kDynamic)
        return true;
    return false;
  }
  /// The `moe.param` name of an argument, if any (for a `#moe.checkpoint`
  /// parameter: its description).
  std::optional<std::string> param;
  /// How a `#moe.checkpoint` parameter is assembled.
  std::optional<io::CheckpointSpec> checkpoint;
};

/// The entry function's signature, recorded before lowering.
struct Signature {
  std::string name;
  std::vector<ValueInfo> arguments;
  std::vector<ValueInfo> results;
  /// True when some result has a dynamic dimension: its size is known only
  /// once the function has run.
  bool hasDynamicResults() const {
    for (const ValueInfo &r : results)
      if (r.hasDynamicShape())
        return true;
    return false;
  }
};

/// A way to run the entry function of a module.
class Backend {
public:
  virtual ~Backend();
  /// Short name for messages ("cpu").
  virtual const char *name() const = 0;
  /// Lowers and compiles `module` (it is modified in place) so that run()
  /// can call `signature.name`. Diagnostics go to the context's handler; the
  /// returned error is one line without the "moe-run: " prefix.
  virtual llvm::Error compile(mlir::ModuleOp module,
                              const Signature &signature) = 0;
  /// Runs the function once. `arguments` match the signature (dtypes, and
  /// shapes up to the dynamic dimensions, which the caller has chosen).
  /// Without dynamically shaped results, `results` match the signature's
  /// static shapes and are overwritten; with them, the backend replaces
  /// `results` by one tensor per result of the shape the function returned.
  /// The arguments are left unchanged. Repeated runs get the same
  /// `arguments` (same buffers, same values): a backend may keep its own
  /// copy of them from the first run (the CUDA backend keeps them in device
  /// memory) and may leave `results` unwritten until finish().
  virtual llvm::Error run(std::vector<HostTensor> &arguments,
                          std::vector<HostTensor> &results) = 0;
  /// After the last run(): `results` hold the last run's results, and what
  /// the backend kept for the runs is released.
  virtual llvm::Error finish(std::vector<HostTensor> &results) {
    (void)results;
    return llvm::Error::success();
  }
};

struct CpuBackendOptions {
  /// Print the module to stdout after lowering, before JIT compilation.
  bool dumpLowered = false;
  /// Shared libraries the JIT loads for symbol resolution.
  std::vector<std::string> sharedLibs;
  /// CPU: run parallel loops on all cores (the pipeline's `parallel`).
  bool parallel = true;
  /// The CPU the JIT compiles for (LLVM's x86 CPU names, native: the host):
  /// the target machine's CPU and the pipeline's `cpu` (which chooses each
  /// op's #moe.cpu_config).
  std::string cpu = "native";
  /// CPU: bf16 GEMMs with the AVX512_BF16 dot product when the CPU has it;
  /// false: the configuration is chosen without avx512bf16 (bf16 extended
  /// to f32 and FMAs).
  bool bf16Dot = true;
  /// cpu: AMX for those GEMMs where the host has it (--cpu-amx).
  bool amx = true;
  /// cpu: FP8 GEMMs on the dot product where the host has AVX512_VBMI and
  /// AVX512_BF16 (--cpu-fp8-dot); false: chosen without avx512vbmi.
  bool fp8Dot = true;
  /// Register the JIT's perf and GDB event listeners (they write perf
  /// jitdump files and debug directories); off unless asked for.
  bool jitDebugListeners = false;
  /// LLVM optimization level of the JIT (--opt-level): the IR pipeline's
  /// O-level and the code generator's (None, Less, Default, Aggressive).
  unsigned optLevel = 3;
  /// cpu: a folder of compiled objects (--cache-dir; empty: no cache).
  std::string cacheDir;
};

/// The host backend: moe::buildCpuPipeline (results as out-parameters, or
/// returned memref descriptors when a result is dynamically shaped), then
/// MLIR's ExecutionEngine (LLVM -O3, JIT) calling `_mlir_ciface_<entry>`.
std::unique_ptr<Backend> createCpuBackend(const CpuBackendOptions &options);
/// Messages of libMoECudaRuntime start with "moe-runtime: "; moe-run prints
/// them behind its own "moe-run: " prefix.
inline std::string stripRuntimePrefix(const std::string &message) {
  const std::string prefix = "moe-runtime: ";
  return message.compare(0, prefix.size(), prefix) == 0 ? message.substr(prefix.size())
                                                        : message;
}

/// The CUDA backend for a device of the given chip ("sm_90"); the caller has
/// checked that a device is usable (moeCudaAvailable). `options.sharedLibs`
/// must provide the mgpu* runtime.
std::unique_ptr<Backend> createCudaBackend(const CpuBackendOptions &options,
                                           const std::string &chip);

} // namespace run
} // namespace moe

#endif // MOE_TOOLS_MOE_RUN_BACKEND_H
