//===- Kernels.cpp - the MoE GPU kernel library ---------------------------===//
//
// See Kernels.h. The numerics mirror lowering/cpu/ConvertMoEToCPU.cpp
// operation by operation (same f32 formulas, same accumulation order per
// output element, the same Philox4x32-10 builder), so the GPU path selects
// the same experts as the CPU path for the same seed. The kernels are
// emitted by RoutingKernels.cpp, PlanKernels.cpp, ExpertGemmKernels.cpp and
// SoftMoEKernels.cpp on the building blocks of KernelSkeleton.h; here are
// the library itself and its element-wise kernels.
//
//===----------------------------------------------------------------------===//

#include "lowering/gpu/KernelSkeleton.h"
#include "lowering/GroupedGemm.h"
#include "lowering/Activations.h"
#include "lowering/RoutingBuilder.h"
#include "runtime/IndexErrors.h"

#include "lowering/Philox.h"
#include "lowering/gpu/IRBuilder.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace mlir::moe;
using namespace mlir::moe::gpu_lowering;

using namespace mlir::moe::gpu_lowering::kernels;

//===----------------------------------------------------------------------===//
// KernelLibrary
//===----------------------------------------------------------------------===//

KernelLibrary::KernelLibrary(ModuleOp module) : module(module) {
  MLIRContext *ctx = module.getContext();
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), UnitAttr::get(ctx));
  gpuModule = module.lookupSymbol<gpu::GPUModuleOp>(kKernelModuleName);
  if (!gpuModule) {
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(module.getBody());
    gpuModule = gpu::GPUModuleOp::create(b, module.getLoc(), kKernelModuleName);
  }
}


gpu::GPUFuncOp KernelLibrary::sigmoid() {
  MLIRContext *ctx = module.getContext();
  Type f32 = Float32Type::get(ctx), ix = IndexType::get(ctx);
  return buildKernel(gpuModule, "moe_sigmoid_kernel", {flat(f32), flat(f32), ix}, {},
                     kEltThreads, [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
                       Value i = globalThread(e);
                       e.ifThen(e.ult(i, a[2]), [&](IRB &e) {
                         e.store(sharedGateSigmoid(e, e.load(a[0], i)), a[1], i);
                       });
                     });
}

gpu::GPUFuncOp KernelLibrary::elementwise(
    StringRef name, TypeRange inputs, TypeRange outputs,
    function_ref<SmallVector<Value>(IRB &, Value, ValueRange)> body) {
  SmallVector<Type> args;
  for (TypeRange types : {inputs, outputs})
    for (Type t : types)
      args.push_back(flat(t));
  args.push_back(IndexType::get(module.getContext()));
  size_t n = inputs.size(), m = outputs.size();
  return buildKernel(gpuModule, name, args, {}, kEltThreads,
                     [&](IRB &e, ValueRange a, ArrayRef<BlockArgument>) {
                       Value i = globalThread(e);
                       e.ifThen(e.ult(i, a[n + m]), [&](IRB &e) {
                         SmallVector<Value> values;
                         for (size_t j = 0; j < n; ++j)
                           values.push_back(e.load(a[j], i));
                         SmallVector<Value> results = body(e, i, values);
                         for (size_t j = 0; j < m; ++j)
                           e.store(results[j], a[n + j], i);
                       });
                     });
}

