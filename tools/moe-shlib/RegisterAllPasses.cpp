//===- RegisterAllPasses.cpp - registerAllMoEPasses -----------------------===//

#include "moe-mlir/InitAllMoE.h"

#include "lowering/Passes.h"
#include "lowering/Pipelines.h"
#include "lowering/mpi/Passes.h"
#include "passes/Passes.h"

#include <mutex>

void mlir::moe::registerAllMoEPasses() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerMoEPasses();          // passes/Passes.td        (MoEPasses)
    registerMoELoweringPasses();  // lowering/Passes.td      (MoECpuLowering, MoEGpuLowering)
    registerMoEMPIPasses();       // lowering/mpi/Passes.td  (MoEMPILowering)
    registerCpuPipeline();        // moe-cpu-pipeline        (MoECpuLowering)
    registerNVPTXPipeline();      // moe-nvptx-pipeline      (MoEGpuLowering)
  });
}
