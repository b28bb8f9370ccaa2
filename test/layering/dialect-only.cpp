//===- dialect-only.cpp - a program that links the moe dialect alone ------===//
//
// Links MoEDialect and libMLIR.so only (test/layering/CMakeLists.txt): that
// it links at all shows the dialect library needs nothing of passes/ or
// lowering/. It registers the dialect alone, parses and verifies a module,
// counts its moe ops, prints it, and checks that no moe pass is registered.
//
//   moe-layering-dialect-only FILE.mlir
//
//===----------------------------------------------------------------------===//

#include "dialect/MoEDialect.h"
#include "dialect/MoEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

int main(int argc, char **argv) {
  if (argc != 2) {
    llvm::errs() << "usage: moe-layering-dialect-only FILE.mlir\n";
    return 2;
  }
  DialectRegistry registry;
  registry.insert<moe::MoEDialect, func::FuncDialect, arith::ArithDialect,
                  tensor::TensorDialect>();
  MLIRContext context(registry);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(argv[1], &context);
  if (!module || failed(verify(*module)))
    return 1;
  int moeOps = 0;
  module->walk([&](Operation *op) {
    if (isa<moe::MoEDialect>(op->getDialect()))
      ++moeOps;
  });
  llvm::outs() << "moe ops: " << moeOps << "\n";
  module->print(llvm::outs());
  llvm::outs() << "\n";
  for (const char *name : {"moe-decompose", "convert-moe-to-cpu",
                           "convert-moe-to-gpu", "moe-cpu-pipeline"})
    llvm::outs() << name << ": "
                 << (PassInfo::lookup(name) || PassPipelineInfo::lookup(name)
                         ? "registered"
                         : "not registered")
                 << "\n";
  return 0;
}
