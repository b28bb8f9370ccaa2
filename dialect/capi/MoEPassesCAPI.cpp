//===- MoEPassesCAPI.cpp - C API of the moe passes ------------------------===//
//
// Implements dialect/capi/MoEPasses.h: the generated per-group and per-pass
// entry points and mlirMoERegisterAllPasses() over the one registration of
// moe-mlir (moe-mlir/InitAllMoE.h).
//
//===----------------------------------------------------------------------===//

#include "dialect/capi/MoEPasses.h"

#include "lowering/Passes.h"
#include "moe-mlir/InitAllMoE.h"
#include "passes/Passes.h"

#include "mlir/CAPI/Pass.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;
using namespace mlir::moe;

#ifdef __cplusplus
extern "C" {
#endif

#include "lowering/Passes.capi.cpp.inc"
#include "passes/Passes.capi.cpp.inc"

#ifdef __cplusplus
}
#endif

void mlirMoERegisterAllPasses(void) { registerAllMoEPasses(); }

MlirPass mlirCreateMoELoweringConvertMoEToLinalg(void) {
  return mlirCreateMoELoweringConvertMoEToCPU();
}
