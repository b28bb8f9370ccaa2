//===- moe-consumer.cpp - embeds moe-mlir through its C++ API -------------===//
//
// What a compiler that embeds moe-mlir does: build a context with the moe
// dialect, parse a model, run moe passes (with their option structs) and the
// CPU pipeline builder in its own PassManager. Built against the *installed*
// package (find_package(MoEMLIR)); see CMakeLists.txt beside this file.
//
//   moe-consumer FILE.mlir
//
//===----------------------------------------------------------------------===//

#include "moe-mlir/MoEMLIR.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

int main(int argc, char **argv) {
  if (argc != 2) {
    llvm::errs() << "usage: moe-consumer FILE.mlir\n";
    return 2;
  }

  // The one registration of moe-mlir: moe plus what the pipelines need,
  // then every moe pass and pipeline by name.
  DialectRegistry registry;
  moe::registerAllMoE(registry);
  MLIRContext context(registry);
  moe::registerAllMoEPasses();

  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(argv[1], &context);
  if (!module) {
    llvm::errs() << "moe-consumer: cannot parse " << argv[1] << "\n";
    return 1;
  }
  int dense = 0;
  module->walk([&](moe::LayerOp layer) {
    if (llvm::isa<moe::DenseRoutingAttr>(layer.getRouting()))
      ++dense;
  });
  llvm::outs() << "parsed: " << dense << " dense layer(s)\n";

  // 1. moe-to-moe: the pass's generated option struct.
  PassManager sparsify(&context);
  moe::MoEDenseToMoESARTOptions options;
  options.k = 2;
  options.adjust = mlir::moe::MoesartAdjust::zero;
  options.trimmedLasso = 0.01;
  sparsify.addPass(moe::createMoEDenseToMoESART(options));
  if (failed(sparsify.run(*module))) {
    llvm::errs() << "moe-consumer: moe-dense-to-moesart failed\n";
    return 1;
  }
  module->walk([&](moe::LayerOp layer) {
    auto routing = llvm::dyn_cast<moe::MoesartRoutingAttr>(layer.getRouting());
    if (!routing) {
      llvm::outs() << "not moesart: " << layer.getRouting() << "\n";
      return;
    }
    llvm::outs() << "routing: " << routing << " (k " << routing.getK()
                 << ", adjust " << moe::stringifyMoesartAdjust(routing.getAdjust())
                 << ", lambda " << routing.getTrimmedLasso().convertToDouble()
                 << ")\n";
  });

  // 2. The CPU pipeline builder with its option struct.
  PassManager lower(&context);
  moe::CpuPipelineOptions cpu;
  cpu.resultsToOutParams = true;
  moe::buildCpuPipeline(lower, cpu);
  if (failed(lower.run(*module))) {
    llvm::errs() << "moe-consumer: moe-cpu-pipeline failed\n";
    return 1;
  }
  int llvmFuncs = 0, moeOps = 0, otherOps = 0;
  module->walk([&](Operation *op) {
    if (llvm::isa<LLVM::LLVMFuncOp>(op))
      ++llvmFuncs;
    StringRef dialect = op->getName().getDialectNamespace();
    if (dialect == "moe")
      ++moeOps;
    else if (!llvm::isa<ModuleOp>(op) && dialect != "llvm")
      ++otherOps;
  });
  llvm::outs() << "lowered: " << llvmFuncs << " llvm.func, " << moeOps
               << " moe op(s), " << otherOps << " non-LLVM op(s)\n";
  if (moeOps != 0 || otherOps != 0 || llvmFuncs == 0) {
    llvm::errs() << "moe-consumer: the module is not fully lowered\n";
    return 1;
  }

  // 3. The NVPTX pipeline builder: only built here (running it is the GPU
  //    tests' business); it must accept its option struct.
  PassManager nvptx(&context);
  moe::NVPTXPipelineOptions gpu;
  gpu.chip = "sm_90";
  gpu.features = "+ptx80";
  gpu.format = "isa";
  if (failed(moe::buildNVPTXPipeline(nvptx, gpu)))
    return 1;
  std::string text;
  llvm::raw_string_ostream os(text);
  nvptx.printAsTextualPipeline(os);
  llvm::outs() << "nvptx pipeline: " << nvptx.size() << " pass(es), "
               << (text.find("sm_90") != std::string::npos ? "chip sm_90"
                                                          : "no chip")
               << "\n";

  llvm::outs() << "moe-consumer: OK\n";
  return 0;
}
