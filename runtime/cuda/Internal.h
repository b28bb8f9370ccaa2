//===- Internal.h - Shared internals of the CUDA runtime --------*- C++ -*-===//
//
// Driver loading, primary contexts, error formatting and the sticky error,
// shared by the mgpu* ABI (MgpuAbi.cpp) and the C++ API (CudaRuntime.cpp).
// Not installed, not included by users.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_CUDA_INTERNAL_H
#define MOE_RUNTIME_CUDA_INTERNAL_H

#include "runtime/cuda/CudaDriverApi.h"

#include <string>
#include <vector>

namespace moe {
namespace cudart {

using namespace moe::cudrv;

/// Error code stored with errors that are not a driver CUresult.
constexpr int kNonDriverError = -1;

/// A failure: the full message ("moe-runtime: ...") and the CUresult behind
/// it (kNonDriverError when there is none).
struct Failure {
  std::string message;
  int code = kNonDriverError;
};

/// "CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed)"; falls back to
/// "CUDA error N" when the driver does not know the code.
std::string describeResult(const DriverFunctions &d, CUresult r);

/// "moe-runtime: <call> failed: <describeResult>"
Failure callFailed(const DriverFunctions &d, const char *call, CUresult r);

/// $MOE_CUDA_DRIVER or "libcuda.so.1".
std::string driverPath();

/// The loaded, initialized driver with at least one device, or null with
/// *why set. The first attempt's outcome is cached (until the test reset).
const DriverFunctions *getDriver(Failure *why);

/// The calling thread's default device (mgpuSetDefaultDevice).
int &defaultDevice();

/// Number of devices the driver reported (getDriver must have succeeded).
int deviceCount();

/// The retained primary context of `device` (retained on first use).
bool primaryContext(int device, CUcontext *ctx, CUdevice *dev, Failure *why);

/// The driver, with the primary context of the thread's default device made
/// current for the scope's lifetime (pushed, and popped on destruction).
class DeviceScope {
public:
  /// `device` < 0: the thread's default device.
  explicit DeviceScope(Failure *why, int device = -1);
  ~DeviceScope();
  DeviceScope(const DeviceScope &) = delete;
  DeviceScope &operator=(const DeviceScope &) = delete;

  bool ok() const { return driver != nullptr; }
  const DriverFunctions &d() const { return *driver; }
  CUdevice device() const { return dev; }

private:
  const DriverFunctions *driver = nullptr;
  CUdevice dev = 0;
  bool pushed = false;
};

/// Sticky error of the mgpu* ABI: the first one wins and is printed once.
void recordError(const Failure &failure);
bool errorPending();

/// Forget the kernel names, cached function handles and shared-memory
/// opt-ins (MgpuAbi.cpp).
void resetFunctionRegistry();

//===----------------------------------------------------------------------===//
// Caching allocator (Allocator.cpp). Device memory of mgpuMemAlloc comes from
// per-device pools of size-classed blocks, each free block tagged with the
// stream it was freed on; see README.md "Device memory".
//===----------------------------------------------------------------------===//

/// A failed driver call inside the allocator: which call and its result.
struct DriverError {
  const char *call = nullptr;
  CUresult result = CUDA_SUCCESS;
};

/// The size a request of `bytes` is rounded up to (its size class); 0 when
/// that overflows.
size_t allocatorSizeClass(size_t bytes);

/// A cached block of exactly `size` class bytes usable on `stream` of
/// `device` (freed on that stream), or 0 when none is: no driver call.
CUdeviceptr allocatorTryReuse(int device, size_t bytes, CUstream stream);

/// Device memory for `bytes` on `stream`: the cache first, then (after
/// synchronizing the context) a block freed on another stream, then the
/// driver (once more after releasing the cache when it is out of memory).
/// Needs the device's context current (`d`); 0 and *error on failure.
CUdeviceptr allocatorAllocate(const DriverFunctions &d, int device,
                              size_t bytes, CUstream stream,
                              DriverError *error);

/// Returns `ptr` to its pool, tagged with `stream`, without a driver call.
/// False when `ptr` is not a cached-allocator block (or caching is off):
/// then the caller synchronizes and frees it with allocatorRelease.
bool allocatorTryRecycle(CUdeviceptr ptr, CUstream stream);

/// Frees memory the pools do not keep: synchronizes the current context
/// first (queued work may still use it), then cuMemFree. `ptr` is forgotten
/// by the allocator if it knew it.
bool allocatorRelease(const DriverFunctions &d, CUdeviceptr ptr,
                      DriverError *error);

/// Records a cuMemAllocManaged pointer (never cached).
void allocatorNoteManaged(CUdeviceptr ptr);

/// Synchronizes `stream` and makes the blocks freed on it usable by any
/// stream (before a stream the runtime does not own is destroyed).
bool allocatorForgetStream(const DriverFunctions &d, int device,
                           CUstream stream, DriverError *error);

/// Synchronizes and frees every cached block of `device` (context current).
bool allocatorEmptyDevice(const DriverFunctions &d, int device,
                          DriverError *error);

/// Devices with cached blocks.
std::vector<int> allocatorDevicesWithCache();

/// Tests only: forget every block (the driver state is going away).
void resetAllocator();

//===----------------------------------------------------------------------===//
// Stream and event pools (MgpuAbi.cpp).
//===----------------------------------------------------------------------===//

/// Releases the pooled streams and events and the cached TMA descriptors of
/// `device` (context current, after synchronizing).
bool releasePooledHandles(const DriverFunctions &d, int device,
                          DriverError *error);
/// Devices with pooled streams, events or TMA descriptors.
std::vector<int> devicesWithPooledHandles();
/// Tests only: forget the pools and the stream override.
void resetPools();

} // namespace cudart
} // namespace moe

#endif // MOE_RUNTIME_CUDA_INTERNAL_H
