//===- JitTestUtil.h - JIT set-up shared by the lowering unit tests -*- C++ -*-===//
//
// The IR builder tests of test/unit/lowering build a function around a
// builder of the lowering, lower it with an upstream pipeline and JIT-compile
// it with MLIR's ExecutionEngine. This is the part they share: the native
// target and the pass registry (once per test program), the translations a
// JIT-compiled module needs, the lowering and the compilation, and the bit
// views of f32 values the comparisons use.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TEST_UNIT_LOWERING_JITTESTUTIL_H
#define MOE_TEST_UNIT_LOWERING_JITTESTUTIL_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/TargetSelect.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>

namespace moe_test {

/// Once per test program (SetUpTestSuite): the native target of the JIT and
/// every upstream pass, so that pipelines can be parsed.
inline void initJit() {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  mlir::registerAllPasses();
}

/// The LLVM IR translations and the to-LLVM conversion interfaces a module
/// needs to be lowered and JIT-compiled in `context`.
inline void registerJitTranslations(mlir::MLIRContext &context) {
  mlir::DialectRegistry registry;
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerAllExtensions(registry);
  context.appendDialectRegistry(registry);
}

/// Lowers `module` with the textual upstream `pipeline` and JIT-compiles it;
/// null, with a test failure that says why, when either step fails.
/// A fresh module in `context` (translations registered, the scalar-code
/// dialects loaded) holding one public function `name` of `type` with the C
/// interface (`_mlir_ciface_<name>`); `b` is left at the start of its body,
/// which the caller fills and terminates.
inline mlir::func::FuncOp createJitFunction(mlir::MLIRContext &context,
                                            mlir::OwningOpRef<mlir::ModuleOp> &module,
                                            mlir::OpBuilder &b, llvm::StringRef name,
                                            mlir::FunctionType type) {
  registerJitTranslations(context);
  context.loadDialect<mlir::func::FuncDialect, mlir::arith::ArithDialect,
                      mlir::math::MathDialect, mlir::memref::MemRefDialect,
                      mlir::scf::SCFDialect, mlir::LLVM::LLVMDialect>();
  mlir::Location loc = b.getUnknownLoc();
  module = mlir::ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto fn = mlir::func::FuncOp::create(b, loc, name, type);
  fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  b.setInsertionPointToStart(fn.addEntryBlock());
  return fn;
}

inline std::unique_ptr<mlir::ExecutionEngine> lowerAndJit(mlir::ModuleOp module,
                                                          llvm::StringRef pipeline) {
  mlir::PassManager pm(module.getContext());
  if (mlir::failed(mlir::parsePassPipeline(pipeline, pm))) {
    ADD_FAILURE() << "cannot parse the pipeline " << pipeline.str();
    return nullptr;
  }
  if (mlir::failed(pm.run(module))) {
    ADD_FAILURE() << "the pipeline failed";
    return nullptr;
  }
  auto engine = mlir::ExecutionEngine::create(module);
  if (!engine) {
    ADD_FAILURE() << llvm::toString(engine.takeError());
    return nullptr;
  }
  return std::move(*engine);
}

inline uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

} // namespace moe_test

#endif // MOE_TEST_UNIT_LOWERING_JITTESTUTIL_H
