//===- moe-opt.cpp - mlir-opt with the moe dialect and passes -------------===//
//
// moe-opt is mlir-opt with every upstream dialect, extension and pass plus
// the moe dialect, passes and pipelines registered (registerAllMoE,
// registerAllMoEPasses), and, in a build with MOE_INCLUDE_TESTS (the
// default), the test-only passes of test/lib (`--moe-test-emulate-gpu`,
// `--moe-test-build-mma-kernels`) that the lit tests use, as upstream's
// mlir-opt registers its test passes. The libraries (libMoEMLIR.so, the
// plugin, the C API) do not have those.
//
//===----------------------------------------------------------------------===//

#include "lowering/InitAllMoE.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "tools/version/Version.h"

#ifdef MOE_INCLUDE_TESTS
#include "test/lib/TestPasses.h"
#endif

int main(int argc, char **argv) {
  moe::installVersionPrinter("moe-opt");
  mlir::registerAllPasses();
  mlir::moe::registerAllMoEPasses();
#ifdef MOE_INCLUDE_TESTS
  mlir::moe::registerMoETestPasses();
  mlir::moe::registerTestEmulatedPipelines();
#endif

  mlir::DialectRegistry registry;
  mlir::moe::registerAllMoE(registry);

  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "moe-opt: MLIR optimizer driver with the moe dialect\n",
      registry));
}
