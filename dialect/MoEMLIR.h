//===- MoEMLIR.h - the public C++ API of moe-mlir ---------------*- C++ -*-===//
//
// The one header an embedding compiler includes (installed as
// <prefix>/include/moe-mlir/dialect/MoEMLIR.h, found through the CMake package
// `MoEMLIR`, target `MoEMLIR::MoEMLIR`):
//
//   #include "dialect/MoEMLIR.h"
//
//   mlir::DialectRegistry registry;
//   mlir::moe::registerMoEPipelineDependencies(registry);
//   mlir::MLIRContext context(registry);
//   mlir::moe::registerAllMoEPasses();    // moe passes and pipelines
//   ...
//   mlir::PassManager pm(&context);
//   mlir::moe::MoEDenseToMoESARTOptions sparsify;
//   sparsify.k = 2;
//   pm.addPass(mlir::moe::createMoEDenseToMoESART(sparsify));
//   mlir::moe::buildCpuPipeline(pm, mlir::moe::CpuPipelineOptions());
//   if (mlir::failed(pm.run(module))) ...
//
// What it brings in:
//  * the dialect: `MoEDialect`, its attributes (`DenseRoutingAttr`,
//    `TopKRoutingAttr`, `MoesartRoutingAttr`, `ActivationAttr`, the
//    `RoutingAttrInterface`) and its ops (dialect/MoEDialect.h, MoEAttrs.h,
//    MoEOps.h);
//  * the moe-to-moe passes with their option structs (passes/Passes.h:
//    `createMoEDenseToMoESART(MoEDenseToMoESARTOptions)`,
//    `createMoEDenseToSoft(...)`, `createMoEDecompose()`, `createMoEFuse()`,
//    `createMoEPrintCost()`, `registerMoEPasses()`), generated from
//    passes/Passes.td;
//  * the lowering passes (lowering/Passes.h: `createConvertMoEToLinalg()`,
//    `registerMoELoweringPasses()`);
//  * the pipeline builders and their option structs (lowering/Pipelines.h:
//    `buildCpuPipeline(OpPassManager &, const CpuPipelineOptions &)` and the
//    NVPTX pipeline's builder and options where the build has them,
//    `registerPipelines()`).
//
// The pipeline builders assemble upstream and moe passes from their typed
// constructors and option structs (nothing is parsed), so embedders need not
// call `mlir::registerAllPasses()` first (doing so is harmless).
//
// The C API equivalent is dialect/capi/MoE.h (target `MoEMLIR::MoECAPI`).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_DIALECT_MOEMLIR_H
#define MOE_DIALECT_MOEMLIR_H

#include "dialect/MoEAttrs.h"
#include "dialect/MoEDialect.h"
#include "dialect/MoEOps.h"
#include "lowering/Passes.h"
#include "lowering/Pipelines.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"

#include <mutex>

namespace mlir {
namespace moe {

/// Inserts the moe dialect into `registry` (the dialect alone: enough to
/// parse, verify, print and transform moe IR with the moe-to-moe passes).
inline void registerMoEDialect(DialectRegistry &registry) {
  registry.insert<MoEDialect>();
}

/// Inserts the moe dialect and everything a context needs to run the moe
/// lowering pipelines: every upstream dialect and every upstream extension
/// (bufferization and to-LLVM interface models among them).
inline void registerMoEPipelineDependencies(DialectRegistry &registry) {
  registerMoEDialect(registry);
  registerAllDialects(registry);
  registerAllExtensions(registry);
}

/// Registers every moe pass (`registerMoEPasses()`), every moe lowering pass
/// (`registerMoELoweringPasses()`) and the moe pipelines (`registerPipelines()`)
/// with MLIR's global registry, so that textual pipelines
/// (`parsePassPipeline`, `--pass-pipeline`) can name them. Safe to call more
/// than once and from several threads: the work is done once.
inline void registerAllMoEPasses() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerMoEPasses();
    registerMoELoweringPasses();
    registerPipelines();
  });
}

} // namespace moe
} // namespace mlir

#endif // MOE_DIALECT_MOEMLIR_H
