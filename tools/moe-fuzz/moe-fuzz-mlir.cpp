//===- moe-fuzz-mlir.cpp - libFuzzer target: parser, verifiers, moe passes ===//
//
// Built only with -DMOE_BUILD_FUZZERS=ON (see scripts/fuzz.sh). Each input is
// parsed as MLIR (the moe dialect plus builtin, func, arith, tensor, scf,
// math and cf), verified, and, if it verifies, every moe pass that must never
// crash on valid IR is run on its own clone of the module:
//
//   --moe-print-cost                      (output to /dev/null)
//   --moe-decompose, --moe-fuse, --moe-print-cost
//   --moe-dense-to-moesart, --moe-decompose, --moe-fuse
//   --moe-dense-to-soft, --moe-print-cost
//   --convert-moe-to-cpu               (on the module: packs weights)
//
// Diagnostics are swallowed. Findings are crashes, sanitizer reports, and
// two invariants checked here (each aborts with a message on stderr):
//  * a pass that succeeds leaves IR that verifies (a pass must say why it
//    cannot apply, never produce an invalid module);
//  * a module that verifies prints (custom and generic form) to text that
//    parses and verifies again.
//
// The pass options of moesart and soft (k, adjust, slots-per-expert,
// group-size) are picked from a hash of the input, so a reproducer stays a
// single file. Inputs over 8 KB are ignored.
//
//===----------------------------------------------------------------------===//

#include "dialect/MoEDialect.h"
#include "dialect/MoEOps.h"
#include "lowering/cpu/Passes.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <functional>
#include <string>
#include <unistd.h>
#include <vector>

using namespace mlir;

namespace {

constexpr size_t kMaxInputBytes = 8192;

DialectRegistry &getRegistry() {
  static DialectRegistry *registry = [] {
    auto *r = new DialectRegistry();
    r->insert<moe::MoEDialect, func::FuncDialect, arith::ArithDialect,
              tensor::TensorDialect, scf::SCFDialect, math::MathDialect,
              cf::ControlFlowDialect>();
    return r;
  }();
  return *registry;
}

[[noreturn]] void finding(const char *what, llvm::StringRef input,
                          llvm::StringRef detail = {}) {
  llvm::errs() << "moe-fuzz-mlir: " << what << "\n--- input ---\n"
               << input << "\n";
  if (!detail.empty())
    llvm::errs() << "--- detail ---\n" << detail << "\n";
  llvm::errs().flush();
  std::abort();
}

OwningOpRef<ModuleOp> parse(llvm::StringRef text, MLIRContext &context) {
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(text, "fuzz.mlir");
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, &context);
}

std::string print(Operation *op, bool generic) {
  std::string text;
  llvm::raw_string_ostream os(text);
  OpPrintingFlags flags;
  if (generic)
    flags.printGenericOpForm();
  op->print(os, flags);
  return text;
}

/// MOE_FUZZ_VERBOSE=1 (when replaying an input): diagnostics and pass
/// outcomes on stderr.
bool verbose() {
  static bool on = [] {
    const char *v = std::getenv("MOE_FUZZ_VERBOSE");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

using PassFactory = std::function<std::unique_ptr<Pass>()>;

/// Runs `passes` one at a time on a clone of `module`; stops at the first
/// failure (diagnostics are swallowed by the caller's handler). A pass that
/// succeeds must leave a module that verifies.
void runPipeline(ModuleOp module, llvm::ArrayRef<PassFactory> passes,
                 llvm::StringRef name, llvm::StringRef input) {
  OwningOpRef<ModuleOp> clone(module.clone());
  for (const PassFactory &factory : passes) {
    std::unique_ptr<Pass> pass = factory();
    std::string passName = pass->getArgument().str();
    PassManager pm(module.getContext());
    pm.enableVerifier(false);
    pm.addPass(std::move(pass));
    if (failed(pm.run(*clone))) {
      if (verbose())
        llvm::errs() << "pipeline " << name << ": --" << passName
                     << " failed\n";
      return;
    }
    if (verbose())
      llvm::errs() << "pipeline " << name << ": --" << passName << " ok\n";
    if (failed(verify(*clone))) {
      std::string detail = "pipeline " + name.str() + ": --" + passName +
                           " succeeded but its output does not verify:\n" +
                           print(*clone, /*generic=*/true);
      finding("invalid IR after a successful pass", input, detail);
    }
  }
}

uint64_t hashInput(const uint8_t *data, size_t size) {
  uint64_t h = 1469598103934665603ull; // FNV-1a
  for (size_t i = 0; i < size; ++i)
    h = (h ^ data[i]) * 1099511628211ull;
  return h;
}

} // namespace

// Why allow_user_poisoning=0 (checked for issue 14; it hides no bug of ours):
// llvm/Support/Allocator.h calls __asan_poison_memory_region /
// __asan_unpoison_memory_region when the including file is compiled with ASan
// (llvm/Support/Compiler.h), and they are no-ops in Debian's uninstrumented
// libMLIR.so / libLLVM.so. The MLIRContext's attribute uniquer is one
// BumpPtrAllocator used from both sides: constructing a moe attribute
// (e.g. MoesartRoutingAttrStorage::construct, inlined into our instrumented
// code) runs the instrumented AllocateSlow, which poisons the whole new
// 4096-byte slab and unpoisons only the attribute's bytes; libMLIR.so's copy
// of Allocate then hands out the rest of that slab (StringAttr storage when
// a dialect loads) without unpoisoning it, and the memmove ASan intercepts
// reports a use-after-poison 96 bytes into the slab. Reproduce with
//   ASAN_OPTIONS=allow_user_poisoning=1 build-fuzz/bin/moe-fuzz-mlir -runs=0 \
//     build-fuzz/fuzz/seeds-moe-fuzz-mlir/
// (stack: memmove <- StringAttr::get <- OperationName::Impl <-
// ArithDialect::initialize <- PassManager::run; the slab allocated by
// BumpPtrAllocatorImpl::AllocateSlow in moe-fuzz-mlir itself). The only
// manual poisoning in this process is that of the LLVM headers, so turning
// it off loses no check of our own code: heap, stack and global accesses of
// every instrumented file stay checked. It goes only with an LLVM built with
// ASan (then the whole allocator agrees).
extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) {
  // --moe-print-cost writes its table to stdout: send it to /dev/null
  // (libFuzzer reports on stderr).
  int devNull = ::open("/dev/null", O_WRONLY);
  if (devNull >= 0) {
    ::dup2(devNull, STDOUT_FILENO);
    ::close(devNull);
  }
  getRegistry();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > kMaxInputBytes)
    return 0;
  llvm::StringRef input(reinterpret_cast<const char *>(data), size);

  MLIRContext context(getRegistry(), MLIRContext::Threading::DISABLED);
  context.printOpOnDiagnostic(false);
  context.printStackTraceOnDiagnostic(false);
  ScopedDiagnosticHandler swallow(&context, [](Diagnostic &diag) {
    if (verbose())
      llvm::errs() << "diagnostic: " << diag << "\n";
    return success();
  });

  OwningOpRef<ModuleOp> module = parse(input, context);
  if (!module || failed(verify(*module))) {
    if (verbose())
      llvm::errs() << "input does not parse or verify\n";
    return 0;
  }

  // Printing round trip: the custom and the generic form parse and verify.
  for (bool generic : {false, true}) {
    std::string text = print(*module, generic);
    MLIRContext again(getRegistry(), MLIRContext::Threading::DISABLED);
    ScopedDiagnosticHandler swallowAgain(
        &again, [](Diagnostic &) { return success(); });
    OwningOpRef<ModuleOp> reparsed = parse(text, again);
    if (!reparsed || failed(verify(*reparsed)))
      finding(generic ? "generic form does not parse or verify again"
                      : "custom form does not parse or verify again",
              input, text);
  }

  uint64_t h = hashInput(data, size);
  moe::MoEDenseToMoESARTOptions sart;
  sart.k = 1 + static_cast<int64_t>(h % 4);
  static const moe::MoesartAdjust adjusts[] = {moe::MoesartAdjust::small_random,
                                               moe::MoesartAdjust::zero,
                                               moe::MoesartAdjust::large};
  sart.adjust = adjusts[(h >> 8) % 3];
  moe::MoEDenseToSoftOptions soft;
  soft.slotsPerExpert = 1 + static_cast<int64_t>((h >> 16) % 3);
  soft.groupSize = static_cast<int64_t>((h >> 24) % 3);
  soft.normalize = ((h >> 32) & 1) == 0;

  PassFactory decompose = [] { return moe::createMoEDecompose(); };
  PassFactory fuse = [] { return moe::createMoEFuse(); };
  PassFactory cost = [] { return moe::createMoEPrintCost(); };
  PassFactory toSart = [&] { return moe::createMoEDenseToMoESART(sart); };
  PassFactory toSoft = [&] { return moe::createMoEDenseToSoft(soft); };
  PassFactory toLinalg = [] { return moe::createConvertMoEToCPU(); };

  runPipeline(*module, {cost}, "cost", input);
  runPipeline(*module, {decompose, fuse, cost}, "decompose-fuse", input);
  runPipeline(*module, {toSart, decompose, fuse}, "moesart", input);
  runPipeline(*module, {toSoft, cost}, "soft", input);
  runPipeline(*module, {toLinalg}, "linalg", input);
  return 0;
}
