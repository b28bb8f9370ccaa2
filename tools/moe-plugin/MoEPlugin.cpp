//===- MoEPlugin.cpp - moe as an mlir-opt dialect and pass plugin ---------===//
//
// Exports mlirGetDialectPluginInfo (registers the moe dialect) and
// mlirGetPassPluginInfo (registers the moe passes and pipelines), so one
// library serves both --load-dialect-plugin and --load-pass-plugin of a stock
// mlir-opt. Both call the one registration of moe-mlir (InitAllMoE.h): the
// same passes as libMoEMLIR.so and moe-opt, without moe-opt's test passes.
//
//===----------------------------------------------------------------------===//

#include "lowering/InitAllMoE.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/Compiler.h"

extern "C" LLVM_ATTRIBUTE_WEAK ::mlir::DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "MoE", LLVM_VERSION_STRING,
          [](::mlir::DialectRegistry *registry) {
            ::mlir::moe::registerAllMoE(*registry);
          }};
}

extern "C" LLVM_ATTRIBUTE_WEAK ::mlir::PassPluginLibraryInfo
mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "MoEPasses", LLVM_VERSION_STRING,
          []() {
            ::mlir::moe::registerAllMoEPasses();
          }};
}
