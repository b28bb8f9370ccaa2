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
  explicit DeviceScope(Failure *why);
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

/// Forget the kernel names and shared-memory opt-ins (MgpuAbi.cpp).
void resetFunctionRegistry();

} // namespace cudart
} // namespace moe

#endif // MOE_RUNTIME_CUDA_INTERNAL_H
