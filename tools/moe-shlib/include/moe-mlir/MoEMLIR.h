//===- MoEMLIR.h - the public C++ API of moe-mlir ---------------*- C++ -*-===//
//
// The one header an embedding compiler includes. It belongs to the library
// that bundles everything, libMoEMLIR.so (tools/moe-shlib; CMake package
// `MoEMLIR`, target `MoEMLIR::MoEMLIR`), and is installed as
// <prefix>/include/moe-mlir/MoEMLIR.h:
//
//   #include "moe-mlir/MoEMLIR.h"
//
//   mlir::DialectRegistry registry;
//   mlir::moe::registerAllMoE(registry);  // moe + what the pipelines need
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
//  * the registration functions `registerAllMoE(DialectRegistry &)` and
//    `registerAllMoEPasses()` (lowering/InitAllMoE.h);
//  * the dialect: `MoEDialect`, its attributes (`DenseRoutingAttr`,
//    `TopKRoutingAttr`, `MoesartRoutingAttr`, `ActivationAttr`, the
//    `RoutingAttrInterface`) and its ops (dialect/MoEDialect.h, MoEAttrs.h,
//    MoEOps.h);
//  * the moe-to-moe passes with their option structs (passes/Passes.h:
//    `createMoEDenseToMoESART(MoEDenseToMoESARTOptions)`,
//    `createMoEDenseToSoft(...)`, `createMoEDecompose()`, `createMoEFuse()`,
//    `createMoEPrintCost()`, ...), generated from passes/Passes.td;
//  * the lowering passes (lowering/cpu/Passes.h: `createConvertMoEToCPU()`,
//    ...; lowering/gpu/Passes.h: `createConvertMoEToGPU()`, ...);
//  * the pipeline builders and their option structs (lowering/Pipelines.h:
//    `buildCpuPipeline(OpPassManager &, const CpuPipelineOptions &)`,
//    `buildNVPTXPipeline(OpPassManager &, const NVPTXPipelineOptions &)`).
//
// The pipeline builders assemble upstream and moe passes from their typed
// constructors and option structs (nothing is parsed), so embedders need not
// call `mlir::registerAllPasses()` first (doing so is harmless).
//
// A program that needs only part of this links only part: the dialect alone
// is library MoEDialect (dialect/MoEDialect.h), the moe-to-moe passes
// MoEPasses, the CPU lowering MoECpuLowering, the GPU lowering
// MoEGpuLowering (README "Libraries"). The C API equivalent is
// moe-mlir-c/MoE.h and moe-mlir-c/MoEPasses.h (target
// `MoEMLIR::MoECAPI`).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_MLIR_MOEMLIR_H
#define MOE_MLIR_MOEMLIR_H

#include "lowering/InitAllMoE.h"

#include "dialect/MoEAttrs.h"
#include "dialect/MoEDialect.h"
#include "dialect/MoEOps.h"
#include "lowering/cpu/Passes.h"
#include "lowering/gpu/Passes.h"
#include "lowering/Pipelines.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"

#endif // MOE_MLIR_MOEMLIR_H
