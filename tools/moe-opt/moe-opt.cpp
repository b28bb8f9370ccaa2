//===- moe-opt.cpp - mlir-opt with the moe dialect and passes -------------===//
//
// moe-opt is mlir-opt with every upstream dialect, extension and pass plus
// the moe dialect and the moe passes registered.
//
//===----------------------------------------------------------------------===//

#include "dialect/MoEDialect.h"
#include "lowering/Passes.h"
#include "lowering/Pipelines.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "tools/version/Version.h"

int main(int argc, char **argv) {
  moe::installVersionPrinter("moe-opt");
  mlir::registerAllPasses();
  mlir::moe::registerMoEPasses();
  mlir::moe::registerMoELoweringPasses();
  mlir::moe::registerPipelines();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registry.insert<mlir::moe::MoEDialect>();

  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "moe-opt: MLIR optimizer driver with the moe dialect\n",
      registry));
}
