//===- MoEPassesCAPI.cpp - C API of the moe passes ------------------------===//
//
// Implements moe-mlir-c/MoEPasses.h: the generated per-group and per-pass
// entry points and mlirMoERegisterAllPasses() over the one registration of
// moe-mlir (lowering/InitAllMoE.h).
//
//===----------------------------------------------------------------------===//

#include "moe-mlir-c/MoEPasses.h"

#include "lowering/cpu/Passes.h"
#include "lowering/gpu/Passes.h"
#include "lowering/InitAllMoE.h"
#include "passes/Passes.h"

#include "mlir/CAPI/Pass.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;
using namespace mlir::moe;

#ifdef __cplusplus
extern "C" {
#endif

#include "lowering/cpu/Passes.capi.cpp.inc"
#include "lowering/gpu/Passes.capi.cpp.inc"
#include "passes/Passes.capi.cpp.inc"

#ifdef __cplusplus
}
#endif

void mlirMoERegisterAllPasses(void) { registerAllMoEPasses(); }

void mlirRegisterMoELoweringPasses(void) {
  mlirRegisterMoECpuPasses();
  mlirRegisterMoEGpuPasses();
}

MlirPass mlirCreateMoELoweringConvertMoEToCPU(void) {
  return mlirCreateMoECpuConvertMoEToCPU();
}

MlirPass mlirCreateMoELoweringConvertMoEToLinalg(void) {
  return mlirCreateMoECpuConvertMoEToCPU();
}
