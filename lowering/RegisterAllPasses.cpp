//===- RegisterAllPasses.cpp - registerAllMoEPasses -----------------------===//

#include "lowering/InitAllMoE.h"

#include "lowering/cpu/Passes.h"
#include "lowering/gpu/Passes.h"
#include "lowering/Pipelines.h"
#include "lowering/mpi/Passes.h"
#include "passes/Passes.h"

#include <mutex>

void mlir::moe::registerAllMoEPasses() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerMoEPasses();     // passes/Passes.td        (MoEPasses)
    registerMoECpuPasses();  // lowering/cpu/Passes.td  (MoECpuLowering)
    registerMoEGpuPasses();  // lowering/gpu/Passes.td  (MoEGpuLowering)
    registerMoEMPIPasses();  // lowering/mpi/Passes.td  (MoEMPILowering)
    registerCpuPipeline();   // moe-cpu-pipeline        (MoECpuLowering)
    registerNVPTXPipeline(); // moe-nvptx-pipeline      (MoEGpuLowering)
  });
}
