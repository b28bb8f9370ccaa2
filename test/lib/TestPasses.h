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

#include "lowering/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace moe {

#define GEN_PASS_DECL
#include "test/lib/TestPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "test/lib/TestPasses.h.inc"

} // namespace moe
} // namespace mlir

#endif // MOE_TEST_LIB_TESTPASSES_H
