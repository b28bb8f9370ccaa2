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
// Read back (the GPU index checks' error word, docs/gpu.md): with
// MOE_FAKE_CUDA_READBACK16="w0,w1,w2,w3" in the environment, every 16-byte
// copy from fake device memory to host memory delivers these four int32
// words (as if a kernel had written them).
// Dynamic shared memory, as on the hardware: a launch asking for more than
// 48 KiB fails with CUDA_ERROR_INVALID_VALUE unless cuFuncSetAttribute(
// MAX_DYNAMIC_SHARED_SIZE_BYTES) granted it; the attribute (and
// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN) stops at 232448
// bytes (sm_90), or at $MOE_FAKE_CUDA_SMEM_OPTIN.
// Trace: with MOE_FAKE_CUDA_TRACE=path in the environment (or after
// fakeCudaSetTrace(path)), every driver call appends one line to `path`:
//   <symbol>[ <detail>]
// where the detail is, for
//   cuMemAlloc_v2 / cuMemAllocManaged     the bytes:            cuMemAlloc_v2 4096
//   cuMemcpyAsync / cuMemcpyHtoD_v2 /     direction and bytes:  cuMemcpyAsync HtoD 512
//     cuMemcpyDtoH_v2                     (HtoD, DtoH, DtoD, HtoH: "D" is memory
//                                         the fake's cuMemAlloc* handed out)
//   cuMemsetD16Async / cuMemsetD32Async   the bytes
//   cuModuleGetFunction                   the kernel name
//   cuLaunchKernel / cuLaunchKernelEx     kernel, grid, block:  cuLaunchKernel k 4x1x1 128x1x1
// Calls without a detail are just the symbol (cuStreamCreate, cuMemFree_v2,
// cuModuleLoadData, cuModuleLoadDataEx, cuCtxSynchronize, ...). Reset does
// not truncate the file.
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

/// cuTensorMapEncodeTiled writes 0xC0FFEE00 + i into words 0..7 of the
/// descriptor and what it was given (address, type, dims, box, ...) into
/// words 8..15.
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

/// cuMemAlloc_v2 / cuMemAllocManaged fail with CUDA_ERROR_OUT_OF_MEMORY
/// when the live fake device memory would exceed `bytes` (0: no limit).
void fakeCudaSetMemoryLimit(size_t bytes);
/// Traces every later call into `path` (appended; null or "" stops).
void fakeCudaSetTrace(const char *path);
/// Copies so far in `direction` ("HtoD", "DtoH", "DtoD", "HtoH"), and
/// their bytes.
int fakeCudaCopyCount(const char *direction);
uint64_t fakeCudaCopyBytes(const char *direction);
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

/// A PTX image declaring the fake kernels fake_fill_f32 and fake_fault (the
/// unit tests load it with mgpuModuleLoadJIT).
inline constexpr char kFakeCudaPtx[] = "//\n"
                                       "// fake PTX\n"
                                       ".version 8.0\n"
                                       ".target sm_90\n"
                                       ".address_size 64\n"
                                       ".visible .entry fake_fill_f32(\n"
                                       "  .param .u64 out, .param .u64 n, .param .f32 value)\n"
                                       "{ ret; }\n"
                                       ".visible .entry fake_fault()\n"
                                       "{ ret; }\n";

/// How many times the runtime called the driver entry point `symbol`.
inline int fakeCudaCalls(const char *symbol) { return fakeCudaCallCount(symbol); }

#endif // MOE_TEST_UNIT_CUDA_FAKECUDA_H
