//===- CudaRuntime.h - C++ API of the CUDA runtime for tools ----*- C++ -*-===//
//
// What tools (moe-run) need besides the mgpu* ABI of MgpuAbi.h: whether a
// usable driver and GPU exist, what the GPU is, and synchronous host<->device
// copies. Everything works on the calling thread's default device (device 0
// unless mgpuSetDefaultDevice said otherwise), in its primary context -- the
// same context the mgpu* functions use, so pointers are interchangeable.
//
// None of these functions touches the sticky error of the mgpu* ABI: they
// return false (or -1 / null) and, when `why` is non-null, store a message
// that starts with "moe-runtime: " (for example
// "moe-runtime: cannot load the CUDA driver (dlopen libcuda.so.1: ...)" or
// "moe-runtime: no CUDA device"). They never crash when there is no driver.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_CUDA_CUDARUNTIME_H
#define MOE_RUNTIME_CUDA_CUDARUNTIME_H

#include "runtime/cuda/MgpuAbi.h"

#include <cstddef>
#include <string>

/// The driver library that is (or would be) opened: $MOE_CUDA_DRIVER, else
/// "libcuda.so.1".
MOE_RUNTIME_EXPORT std::string moeCudaDriverPath();

/// True when the driver loads, cuInit succeeds and there is at least one
/// device (and the default device exists).
MOE_RUNTIME_EXPORT bool moeCudaAvailable(std::string *why = nullptr);

/// The default device's compute capability: returns 10 * major + minor (90
/// for an H100/H200) and sets *major / *minor when non-null; -1 on failure.
MOE_RUNTIME_EXPORT int moeCudaComputeCapability(int *major, int *minor,
                                                std::string *why = nullptr);

/// "sm_90" for compute capability 9.0; empty on failure.
MOE_RUNTIME_EXPORT std::string moeCudaChip(std::string *why = nullptr);

/// The default device's name ("NVIDIA H200"); empty on failure.
MOE_RUNTIME_EXPORT std::string moeCudaDeviceName(std::string *why = nullptr);

struct MoeCudaDeviceInfo {
  int ordinal = 0;
  std::string name;
  int major = 0, minor = 0;
  size_t totalMemoryBytes = 0;
  int multiprocessorCount = 0;
  int maxSharedMemoryPerBlockOptin = 0;
  int driverVersion = 0; // 13000 for CUDA 13.0
};
/// Everything above about the default device.
MOE_RUNTIME_EXPORT bool moeCudaGetDeviceInfo(MoeCudaDeviceInfo *info,
                                             std::string *why = nullptr);

/// Device memory (cuMemAlloc); 0 bytes -> null, which is not an error.
MOE_RUNTIME_EXPORT void *moeCudaMalloc(size_t bytes,
                                       std::string *why = nullptr);
/// cuCtxSynchronize (queued work may still use the memory), then cuMemFree;
/// null is a no-op.
MOE_RUNTIME_EXPORT bool moeCudaFree(void *devicePtr,
                                    std::string *why = nullptr);
/// Synchronous copies (cuMemcpyHtoD / cuMemcpyDtoH); 0 bytes is a no-op.
MOE_RUNTIME_EXPORT bool moeCudaCopyToDevice(void *deviceDst,
                                            const void *hostSrc, size_t bytes,
                                            std::string *why = nullptr);
MOE_RUNTIME_EXPORT bool moeCudaCopyToHost(void *hostDst, const void *deviceSrc,
                                          size_t bytes,
                                          std::string *why = nullptr);
/// Waits for all work of the context (cuCtxSynchronize): this is where an
/// asynchronous kernel fault shows up.
MOE_RUNTIME_EXPORT bool moeCudaSynchronize(std::string *why = nullptr);

/// The sticky mgpu* error, if any: returns true and stores it in *message
/// (when non-null), then clears it.
MOE_RUNTIME_EXPORT bool moeCudaTakeError(std::string *message = nullptr);

#endif // MOE_RUNTIME_CUDA_CUDARUNTIME_H
