//===- JitEngine.h - an ExecutionEngine that compiles as asked ---*- C++ -*-===//
//
// MLIR 22's ExecutionEngine::create, given no TargetMachine, makes a default
// one for the host (the host's CPU and features, CodeGenOptLevel::Default)
// and applies ExecutionEngineOptions::jitCodeGenOptLevel to a builder it
// then drops: a tool's --mcpu and the code generator's half of --opt-level
// never reach the JIT. createJitEngine hands the engine a machine made from
// the tool's own builder (test/tools/moe-run/jit-target.test,
// test/tools/moe-test-runner/runner.test).
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TOOLS_JITENGINE_H
#define MOE_TOOLS_JITENGINE_H

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"

namespace mlir::moe::tools {

/// ExecutionEngine::create(op, options) compiling with a TargetMachine of
/// `builder` (its CPU, features and code-generation level).
llvm::Expected<std::unique_ptr<ExecutionEngine>>
createJitEngine(Operation *op, const ExecutionEngineOptions &options,
                llvm::orc::JITTargetMachineBuilder &builder);

} // namespace mlir::moe::tools

#endif // MOE_TOOLS_JITENGINE_H
