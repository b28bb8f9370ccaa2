//===- RegisterAllDialects.cpp - registerAllMoE ---------------------------===//

#include "lowering/InitAllMoE.h"

#include "dialect/MoEAdjointInterface.h"
#include "dialect/MoEDialect.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"

void mlir::moe::registerAllMoE(DialectRegistry &registry) {
  registry.insert<MoEDialect>();
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerUpstreamAdjoints(registry);
}
