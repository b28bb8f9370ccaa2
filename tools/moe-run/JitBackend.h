//===- JitBackend.h - moe-run backends through the MLIR JIT -----*- C++ -*-===//
//
// The part the cpu and cuda backends share (CpuBackend.cpp, CudaBackend.cpp):
// both lower the module, JIT-compile the host code with MLIR's
// ExecutionEngine and call the entry; they differ in the pipeline (the CPU
// pipeline, or the NVPTX pipeline whose host code calls the mgpu* runtime
// that copies to and from the GPU) and in what they check after a run.
// JitBackend is implemented in CpuBackend.cpp.
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

#ifndef MOE_TOOLS_MOE_RUN_JITBACKEND_H
#define MOE_TOOLS_MOE_RUN_JITBACKEND_H

#include "tools/moe-run/Backend.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"
#include "llvm/Target/TargetMachine.h"

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace moe {
namespace run {

/// Memory of one memref descriptor for a row-major buffer: {allocated,
/// aligned, offset, sizes[R], strides[R]} as 64-bit words.
std::vector<int64_t> makeDescriptor(void *ptr,
                                    const std::vector<int64_t> &shape);
std::vector<int64_t> makeDescriptor(HostTensor &tensor);

/// The packed arguments of a `_mlir_ciface_` call: `lead` (the pointer to the
/// returned descriptors, when results are returned) first, then for every
/// tensor a pointer to the pointer to its memref descriptor. Owns the
/// descriptors for the duration of the call.
class PackedCall {
public:
  PackedCall(void **lead,
             std::initializer_list<std::vector<HostTensor> *> groups) {
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
  ~JitBackend() override;
  llvm::Error compile(mlir::ModuleOp module,
                      const Signature &signature) override;
  llvm::Error run(std::vector<HostTensor> &arguments,
                  std::vector<HostTensor> &results) override;

protected:
  /// Lowers `module` to the LLVM dialect (buildPipeline) and returns the
  /// module to JIT-compile: `module` itself, lowered in place, by default.
  virtual llvm::Expected<mlir::ModuleOp> lower(mlir::ModuleOp module,
                                               bool resultsToOutParams);
  /// Runs buildPipeline(resultsToOutParams) on `module`.
  llvm::Error runPipeline(mlir::ModuleOp module, bool resultsToOutParams);
  /// Calls the entry's packed C interface.
  void callEntry(void **args) { entry(args); }

  /// Adds the lowering to the LLVM dialect: results as out-parameters, or
  /// returned (when `resultsToOutParams` is false).
  /// On failure the error is a line without the "moe-run: " prefix.
  virtual llvm::Error buildPipeline(mlir::OpPassManager &pm,
                                    bool resultsToOutParams) = 0;
  /// Whether the backend can return results (dynamically shaped ones).
  virtual bool canReturnResults() const { return true; }
  /// Whether --cache-dir applies (the compiled object has no global
  /// constructors to run: the cpu backend).
  virtual bool usesObjectCache() const { return false; }
  /// Checked after every run (asynchronous device errors surface here).
  virtual llvm::Error afterRun() { return llvm::Error::success(); }

  CpuBackendOptions options;
  Signature signature;

private:
  llvm::Error runReturningResults(std::vector<HostTensor> &arguments,
                                  std::vector<HostTensor> &results);

  /// --cache-dir: the key of the compilation (what determines the object),
  /// and loading a cached object instead of compiling.
  llvm::Expected<std::string> objectCacheKey(mlir::ModuleOp module,
                                             const llvm::orc::JITTargetMachineBuilder &target);
  llvm::Error loadCachedObject(std::unique_ptr<llvm::MemoryBuffer> object,
                               const llvm::orc::JITTargetMachineBuilder &target);

  /// The results come back as descriptors (see the file comment).
  bool returnsResults = false;
  std::unique_ptr<llvm::TargetMachine> hostMachine;
  std::unique_ptr<mlir::ExecutionEngine> engine;
  /// A cached object's JIT (instead of `engine`), and the runtime
  /// libraries' `__mlir_execution_engine_destroy` hooks to call after it.
  std::unique_ptr<llvm::orc::LLJIT> cachedJit;
  std::vector<void (*)()> libraryDestroyHooks;
  void (*entry)(void **) = nullptr;
};

} // namespace run
} // namespace moe

#endif // MOE_TOOLS_MOE_RUN_JITBACKEND_H
