//===- InitAllMoE.h - the one registration of moe-mlir ----------*- C++ -*-===//
//
// The registration functions every moe-mlir tool and library calls (moe-opt,
// moe-run, moe-compile, the mlir-opt plugin, the C API, libMoEMLIR.so and
// embedders), in the manner of upstream's mlir/InitAllDialects.h and
// mlir/InitAllPasses.h. Installed as <prefix>/include/moe-mlir/lowering/InitAllMoE.h;
// included by moe-mlir/MoEMLIR.h.
//
//   mlir::DialectRegistry registry;
//   mlir::moe::registerAllMoE(registry);
//   mlir::MLIRContext context(registry);
//   mlir::moe::registerAllMoEPasses();
//
//===----------------------------------------------------------------------===//
#ifndef MOE_MLIR_INITALLMOE_H
#define MOE_MLIR_INITALLMOE_H

namespace mlir {
class DialectRegistry;
namespace moe {

/// Inserts the moe dialect and every dialect and extension the moe pipelines
/// produce or need (all upstream dialects and extensions: bufferization and
/// to-LLVM interface models among them) into `registry`. Library
/// MoERegisterAllDialects. (The moe dialect alone is
/// `registry.insert<moe::MoEDialect>()`: library MoEDialect.)
void registerAllMoE(DialectRegistry &registry);

/// Registers with MLIR's global pass registry every public moe pass: the
/// moe-to-moe passes (passes/Passes.td), the CPU and GPU lowering passes
/// (lowering/Passes.td), the MPI lowering passes (lowering/mpi/Passes.td),
/// and the pipelines `moe-cpu-pipeline` and `moe-nvptx-pipeline`, so that
/// textual pipelines (`parsePassPipeline`, `--pass-pipeline`) can name them.
/// Not the test passes (moe-opt alone registers those). Safe to call more
/// than once and from several threads: the work is done once. Library
/// MoERegisterAllPasses.
void registerAllMoEPasses();

} // namespace moe
} // namespace mlir

#endif // MOE_MLIR_INITALLMOE_H
