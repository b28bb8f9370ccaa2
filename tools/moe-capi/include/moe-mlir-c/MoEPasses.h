/*===-- moe-mlir-c/MoEPasses.h - C API of the moe passes --------*- C -*-===*\
|*                                                                            *|
|* The moe passes and pipelines from C, registered on request (the dialect   *|
|* handle of moe-mlir-c/MoE.h registers the dialect alone), in the manner   *|
|* of MLIR's mlirRegisterAllPasses() and per-group registration functions.   *|
|* Installed as <prefix>/include/moe-mlir-c/MoEPasses.h; in                 *|
|* libMoEMLIRCAPI.so (CMake target `MoEMLIR::MoECAPI`).                      *|
|*                                                                            *|
|*  - mlirMoERegisterAllPasses(): every moe pass and both pipelines          *|
|*    (moe-cpu-pipeline, moe-nvptx-pipeline); what the C++                    *|
|*    registerAllMoEPasses() does.                                           *|
|*  - per group, generated from each library's ODS (mlir-tblgen            *|
|*    -gen-pass-capi-header): mlirRegisterMoEPasses() (the moe-to-moe        *|
|*    passes, passes/Passes.td), mlirRegisterMoECpuPasses() (the CPU         *|
|*    lowering, lowering/cpu/Passes.td) and mlirRegisterMoEGpuPasses() (the  *|
|*    GPU lowering, lowering/gpu/Passes.td), and per pass                    *|
|*    mlirCreate<Group><Pass>() / mlirRegister<Group><Pass>() (for example   *|
|*    mlirCreateMoEMoEDecompose(), mlirCreateMoECpuConvertMoEToCPU()) with   *|
|*    the pass's default options.                                            *|
|*                                                                            *|
|* Registration is global, idempotent, and never includes the test passes   *|
|* of moe-opt.                                                               *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef MOE_MLIR_C_MOEPASSES_H
#define MOE_MLIR_C_MOEPASSES_H

#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#include "passes/Passes.capi.h.inc"
#include "lowering/cpu/Passes.capi.h.inc"
#include "lowering/gpu/Passes.capi.h.inc"

#ifdef __cplusplus
extern "C" {
#endif

/* Registers every moe pass (the groups above and the MPI lowering) and the
 * pipelines moe-cpu-pipeline and moe-nvptx-pipeline with MLIR's global
 * registry, so that mlirParsePassPipeline and mlirOpPassManagerAddPipeline
 * can name them. Safe to call more than once and from several threads.
 * The pipelines add their upstream passes themselves; a textual pipeline
 * that names upstream passes needs mlirRegisterAllPasses() too. */
MLIR_CAPI_EXPORTED void mlirMoERegisterAllPasses(void);

/* Deprecated (one release), from before the CPU and GPU lowering libraries
 * had a Passes.td each: mlirRegisterMoELoweringPasses() registers both
 * groups (mlirRegisterMoECpuPasses() and mlirRegisterMoEGpuPasses());
 * mlirCreateMoELoweringConvertMoEToCPU() and the pass's former name
 * mlirCreateMoELoweringConvertMoEToLinalg() are
 * mlirCreateMoECpuConvertMoEToCPU(). */
MLIR_CAPI_EXPORTED void mlirRegisterMoELoweringPasses(void);
MLIR_CAPI_EXPORTED MlirPass mlirCreateMoELoweringConvertMoEToCPU(void);
MLIR_CAPI_EXPORTED MlirPass mlirCreateMoELoweringConvertMoEToLinalg(void);

#ifdef __cplusplus
}
#endif

#endif /* MOE_MLIR_C_MOEPASSES_H */
