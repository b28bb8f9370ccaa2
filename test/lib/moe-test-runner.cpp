//===- moe-test-runner.cpp - the lit tests' JIT runner --------------------===//
//
// Runs a void function (by default @main) of an LLVM-dialect module, JIT
// compiled, as mlir-runner does with `-e main -entry-point-result=void
// -shared-libs=...`, which are the flags it takes. The difference is the
// code generator's level: mlir-runner (MLIR 22) compiles at
// CodeGenOptLevel::Default whatever -O it is given (tools/diagnostics/
// JitEngine.h says why); this runner compiles with a TargetMachine made at
// --opt-level (default $MOE_RUN_OPT_LEVEL, else 3; the lit tests set
// 0, test/lit.cfg.py). At 0 the emulated GPU tests' drivers, whose lowered
// modules run to several MB, compile about twice as fast, and the results
// are the same bits at every level: the lowered code carries no fast-math
// flags (test/tools/moe-test-runner/runner.test).
//
// Test-only (built under MOE_INCLUDE_TESTS, not installed). Errors: one line
// on stderr starting with "moe-test-runner: ", exit code 1.
//
//===----------------------------------------------------------------------===//

#include "tools/diagnostics/JitEngine.h"
#include "tools/diagnostics/OneLineDiagnostic.h"
#include "tools/diagnostics/OptLevel.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <string>
#include <vector>

using namespace mlir;

namespace {
llvm::cl::opt<std::string> inputFilename(llvm::cl::Positional,
                                         llvm::cl::desc("<input.mlir>"), llvm::cl::init("-"));
llvm::cl::opt<std::string> entryName("e", llvm::cl::desc("The function to call (default main)"),
                                     llvm::cl::value_desc("name"), llvm::cl::init("main"));
llvm::cl::opt<std::string>
    entryResult("entry-point-result",
                llvm::cl::desc("The entry's result type: void, the only one supported"),
                llvm::cl::init("void"));
llvm::cl::list<std::string> sharedLibs("shared-libs",
                                       llvm::cl::desc("Libraries to load, comma separated"),
                                       llvm::cl::CommaSeparated);
llvm::cl::opt<int> optLevel(
    "opt-level",
    llvm::cl::desc("LLVM optimization level, 0 to 3: the IR pipeline (none at 0) and the code "
                   "generator. Default $MOE_RUN_OPT_LEVEL when set, else 3"),
    llvm::cl::init(3));

int fail(const llvm::Twine &message) {
  llvm::errs() << "moe-test-runner: " << moe::tools::oneLine(message.str()) << "\n";
  return 1;
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::ParseCommandLineOptions(argc, argv, "moe-test-runner: JIT-run an LLVM-dialect module\n");
  llvm::Expected<unsigned> level =
      moe::tools::resolveOptLevel(optLevel, optLevel.getNumOccurrences() > 0, "MOE_RUN_OPT_LEVEL");
  if (!level)
    return fail(llvm::toString(level.takeError()));
  if (entryResult != "void")
    return fail("-entry-point-result=" + entryResult + ": only void is supported");
  for (const std::string &lib : sharedLibs)
    if (!llvm::sys::fs::exists(lib))
      return fail("-shared-libs: " + lib + " not found");

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllToLLVMIRTranslations(registry);
  MLIRContext context(registry);
  std::string firstError;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error && firstError.empty())
      firstError = moe::tools::oneLineDiagnostic(diag);
    return success();
  });
  std::string openError;
  std::unique_ptr<llvm::MemoryBuffer> file = openInputFile(inputFilename, &openError);
  if (!file)
    return fail(openError);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return fail(firstError.empty() ? "cannot parse " + inputFilename : firstError);
  auto entry = module->lookupSymbol<LLVM::LLVMFuncOp>(entryName);
  if (!entry || entry.isExternal())
    return fail("no function @" + entryName + " with a body in " + inputFilename);
  if (entry.getNumArguments() != 0 ||
      !isa<LLVM::LLVMVoidType>(entry.getFunctionType().getReturnType()))
    return fail("@" + entryName + " must take no arguments and return nothing");

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder)
    return fail("cannot describe the host CPU: " + llvm::toString(builder.takeError()));
  // AMX tile code is compiled at O1 at least (OptLevel.h, compileLevelFor).
  unsigned compileLevel = moe::tools::compileLevelFor(*module, *level);
  builder->setCodeGenOptLevel(*llvm::CodeGenOpt::getLevel(compileLevel));
  // The IR pipeline's machine (its costs); the engine makes its own from
  // the same builder.
  auto irMachine = builder->createTargetMachine();
  if (!irMachine)
    return fail("cannot create a target machine for the host: " +
                llvm::toString(irMachine.takeError()));

  // The IR pipeline (ExecutionEngineOptions keeps a reference to it).
  std::function<llvm::Error(llvm::Module *)> transformer;
  if (compileLevel > 0)
    transformer = makeOptimizingTransformer(compileLevel, /*sizeLevel=*/0, irMachine->get());
  ExecutionEngineOptions options;
  if (transformer)
    options.transformer = transformer;
  options.jitCodeGenOptLevel = *llvm::CodeGenOpt::getLevel(compileLevel);
  std::vector<llvm::StringRef> libs(sharedLibs.begin(), sharedLibs.end());
  options.sharedLibPaths = libs;
  options.enableGDBNotificationListener = false;
  options.enablePerfNotificationListener = false;
  auto engine = moe::tools::createJitEngine(*module, options, *builder);
  if (!engine)
    return fail("JIT compilation failed: " + llvm::toString(engine.takeError()) +
                (firstError.empty() ? "" : " (" + firstError + ")"));
  if (llvm::Error err = (*engine)->invokePacked(entryName))
    return fail("cannot call @" + entryName + ": " + llvm::toString(std::move(err)));
  llvm::outs().flush();
  return 0;
}
