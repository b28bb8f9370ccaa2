//===- FakeCuda.h - Control API of the fake CUDA driver ---------*- C++ -*-===//
//
// libFakeCuda.so exports the CUDA driver entry points the runtime looks up
// (under their versioned names) and behaves like a one-device driver whose
// "device memory" is host memory, so the runtime can be tested without a GPU:
// the tests point MOE_CUDA_DRIVER at it. These functions configure it and
// read back what the runtime asked for.
//
// Fake kernels (looked up by name in a PTX image that declares `.entry NAME`):
//   fake_fill_f32(float *out, int64_t n, float value): out[0..n) = value
//   moe_test_fill(memref<?xf32> out, float value), with the memref expanded
//                 as MLIR passes it (allocated, aligned, offset, size,
//                 stride): out[0..size) = value
//   fake_fault(): the next stream/context synchronization fails with
//                 CUDA_ERROR_ILLEGAL_ADDRESS (asynchronous fault)
// Images: an ELF header is accepted as a cubin exporting any kernel; text is
// read up to its NUL (so over-reads show under ASan) and is PTX when it
// contains ".version" (PTX containing "SYNTAX ERROR" fails with
// CUDA_ERROR_INVALID_PTX); anything else is CUDA_ERROR_INVALID_IMAGE.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_TEST_UNIT_CUDA_FAKECUDA_H
#define MOE_TEST_UNIT_CUDA_FAKECUDA_H

#include <cstddef>
#include <cstdint>

extern "C" {

struct FakeCudaLaunch {
  char kernel[64];
  unsigned grid[3];
  unsigned block[3];
  unsigned sharedMemBytes;
  void *stream;
  void **params;
  void **extra;
  int viaLaunchKernelEx;
  unsigned cluster[3];
  int clusterSchedulingPolicy;
};

struct FakeCudaTensorMap {
  int dataType;
  unsigned rank;
  void *address;
  uint64_t globalDim[5];
  uint64_t globalStrides[5];
  uint32_t boxDim[5];
  uint32_t elementStrides[5];
  int interleave, swizzle, l2Promotion, oobFill;
};

/// Back to one sm_90 device named "Fake H200", no forced results, nothing
/// recorded; frees what the runtime leaked.
void fakeCudaReset(void);
/// Makes `symbol` (e.g. "cuModuleLoadData", "cuMemAlloc_v2") return `result`
/// (0 restores normal behaviour).
void fakeCudaSetResult(const char *symbol, int result);
void fakeCudaSetDeviceCount(int count);
void fakeCudaSetComputeCapability(int major, int minor);
/// Text the JIT writes into CU_JIT_ERROR_LOG_BUFFER when it fails.
void fakeCudaSetJitLog(const char *log);

/// How often `symbol` was called.
int fakeCudaCallCount(const char *symbol);
const FakeCudaLaunch *fakeCudaLastLaunch(void);
int fakeCudaLaunchCount(void);
const FakeCudaTensorMap *fakeCudaLastTensorMap(void);
/// Last value given to cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES).
int fakeCudaLastDynamicSmemAttribute(void);
/// Last optimization level given to cuModuleLoadDataEx (-1: none).
int fakeCudaLastJitOptLevel(void);
/// Flags of the last cuMemAllocManaged (-1: none).
int fakeCudaLastManagedFlags(void);
/// Address and size of the last cuMemHostRegister.
void *fakeCudaLastHostRegister(size_t *bytes);
/// Device ordinal of the last cuDevicePrimaryCtxRetain (-1: none).
int fakeCudaLastRetainedDevice(void);

int fakeCudaLiveAllocations(void);
int fakeCudaLiveStreams(void);
int fakeCudaLiveEvents(void);
int fakeCudaLiveModules(void);
int fakeCudaLiveHostRegistrations(void);
int fakeCudaRetainedContexts(void);
/// Contexts pushed and not popped on the calling thread.
int fakeCudaContextDepth(void);

} // extern "C"

#endif // MOE_TEST_UNIT_CUDA_FAKECUDA_H
