//===- Configure.cpp - the CPU strategy of each op, as data ----------------===//
//
// `--moe-cpu-configure`: attaches a #moe.cpu_config, chosen from the target
// CPU's features (cpu::chooseCpuConfig), to every op whose CPU lowering
// emits grouped GEMMs and has none. The lowering (convert-moe-to-cpu)
// reads it; lit tests check the choice per target.
//
//===----------------------------------------------------------------------===//

#include "lowering/cpu/Passes.h"

#include "dialect/MoEAttrs.h"
#include "dialect/MoEOps.h"
#include "lowering/cpu/ExpertKernels.h"

#include "llvm/TargetParser/X86TargetParser.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOECPUCONFIGURE
#include "lowering/cpu/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

struct MoECpuConfigurePass : public moe::impl::MoECpuConfigureBase<MoECpuConfigurePass> {
  using MoECpuConfigureBase::MoECpuConfigureBase;

  LogicalResult initialize(MLIRContext *ctx) override {
    FailureOr<llvm::StringMap<bool>> target = cpu::cpuFeatures(cpu);
    if (failed(target))
      return emitError(UnknownLoc::get(ctx))
             << "moe-cpu-configure: cpu=" << cpu
             << " is not an x86 CPU LLVM knows (e.g. skylake-avx512, znver3, haswell, "
                "x86-64-v3) nor native";
    llvm::StringMap<bool> features = std::move(*target);
    SmallVector<StringRef> changes;
    StringRef(extraFeatures).split(changes, ',', -1, /*KeepEmpty=*/false);
    for (StringRef change : changes) {
      change = change.trim();
      if (change.size() < 2 || (change[0] != '+' && change[0] != '-'))
        return emitError(UnknownLoc::get(ctx))
               << "moe-cpu-configure: features=" << extraFeatures << ": '" << change
               << "' is not +NAME or -NAME";
      StringRef name = change.drop_front();
      // Removing a feature LLVM knows removes it and what implies it;
      // adding one adds what it implies (and, below, itself).
      llvm::StringMap<bool> probe;
      llvm::X86::updateImpliedFeatures(name, /*Enabled=*/false, probe);
      if (!probe.count(name))
        return emitError(UnknownLoc::get(ctx))
               << "moe-cpu-configure: features=" << extraFeatures << ": '" << name
               << "' is not an x86 feature LLVM knows (e.g. avx2, fma, avx512f, avx512bf16)";
      bool enable = change[0] == '+';
      llvm::X86::updateImpliedFeatures(name, enable, features);
      features[name] = enable;
    }
    config = cpu::chooseCpuConfig(ctx, features);
    return success();
  }

  void runOnOperation() override {
    StringRef name = CpuConfigAttr::getAttrName();
    getOperation()->walk([&](Operation *op) {
      if (!takesLoweringConfig(op) || op->hasAttr(name))
        return;
      op->setAttr(name, config);
    });
  }

  // `features` is the option's member; the chosen configuration is fixed at
  // initialize(), once per pass instance.
  CpuConfigAttr config;
};

} // namespace
