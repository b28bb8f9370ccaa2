//===- TestPasses.h - moe test-only passes ----------------------*- C++ -*-===//
//
// The passes of test/lib/TestPasses.td (`--moe-test-emulate-gpu`,
// `--moe-test-build-mma-kernels`): library MoETestPasses, registered by
// moe-opt only. Not installed and not part of libMoEMLIR.so, the plugin or
// the C API.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_TEST_LIB_TESTPASSES_H
#define MOE_TEST_LIB_TESTPASSES_H

#include "lowering/cpu/Passes.h"
#include "lowering/gpu/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace mlir {
namespace moe {

/// The order in which `--moe-test-emulate-gpu` runs a launch's blocks
/// (option `block-order`): ascending linear block id (x fastest, then y,
/// then z), descending, or a permutation drawn from `seed` and the launch.
enum class EmulatedBlockOrder { forward, reverse, shuffle };

#define GEN_PASS_DECL
#include "test/lib/TestPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "test/lib/TestPasses.h.inc"

/// The tail of the emulated GPU tests' pipelines after moe-test-emulate-gpu
/// (test/lib/EmulatedPipelines.cpp), registered as
/// `--moe-test-emulated-to-llvm` by registerTestEmulatedPipelines().
void buildTestEmulatedToLLVM(OpPassManager &pm);
void registerTestEmulatedPipelines();

} // namespace moe
} // namespace mlir

#endif // MOE_TEST_LIB_TESTPASSES_H
