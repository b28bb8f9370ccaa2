// Takes the address of every mgpu* function that runtime/cuda/MgpuAbi.h
// lists, so that clang emits one `declare` per function: mgpu-abi.test
// compares them with the declarations MLIR 22's lowering emits.
#include "runtime/cuda/MgpuAbi.h"

#define MOE_REF(name) reinterpret_cast<void *>(&name),
void *moeMgpuAbiRefs[] = {MOE_MGPU_ABI_FUNCTIONS(MOE_REF)};
