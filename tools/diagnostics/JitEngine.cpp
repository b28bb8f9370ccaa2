//===- JitEngine.cpp - an ExecutionEngine that compiles as asked ----------===//

#include "tools/diagnostics/JitEngine.h"

llvm::Expected<std::unique_ptr<mlir::ExecutionEngine>>
mlir::moe::tools::createJitEngine(Operation *op, const ExecutionEngineOptions &options,
                                  llvm::orc::JITTargetMachineBuilder &builder) {
  auto machine = builder.createTargetMachine();
  if (!machine)
    return llvm::createStringError("cannot create a target machine for the host: " +
                                   llvm::toString(machine.takeError()));
  return ExecutionEngine::create(op, options, std::move(*machine));
}
