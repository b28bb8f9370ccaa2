//===- CudaRuntime.cpp - C++ API of the CUDA runtime for tools ------------===//

#include "runtime/cuda/CudaRuntime.h"
#include "runtime/cuda/Internal.h"

#include <cstdint>

using namespace moe::cudart;

namespace {

bool fail(std::string *why, const Failure &f) {
  if (why)
    *why = f.message;
  return false;
}

bool fail(std::string *why, const std::string &message) {
  if (why)
    *why = message;
  return false;
}

CUdeviceptr devPtr(const void *p) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

} // namespace

std::string moeCudaDriverPath() { return driverPath(); }

bool moeCudaAvailable(std::string *why) {
  Failure f;
  DeviceScope scope(&f);
  return scope.ok() ? true : fail(why, f);
}

int moeCudaComputeCapability(int *major, int *minor, std::string *why) {
  Failure f;
  DeviceScope scope(&f);
  if (!scope.ok())
    return fail(why, f), -1;
  int ma = 0, mi = 0;
  CUresult r = scope.d().DeviceGetAttribute(
      &ma, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, scope.device());
  if (r == CUDA_SUCCESS)
    r = scope.d().DeviceGetAttribute(
        &mi, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, scope.device());
  if (r != CUDA_SUCCESS)
    return fail(why, callFailed(scope.d(), "cuDeviceGetAttribute", r)), -1;
  if (major)
    *major = ma;
  if (minor)
    *minor = mi;
  return 10 * ma + mi;
}

std::string moeCudaChip(std::string *why) {
  int major = 0, minor = 0;
  if (moeCudaComputeCapability(&major, &minor, why) < 0)
    return std::string();
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

std::string moeCudaDeviceName(std::string *why) {
  Failure f;
  DeviceScope scope(&f);
  if (!scope.ok())
    return fail(why, f), std::string();
  char name[256] = {0};
  CUresult r = scope.d().DeviceGetName(name, sizeof(name) - 1, scope.device());
  if (r != CUDA_SUCCESS)
    return fail(why, callFailed(scope.d(), "cuDeviceGetName", r)),
           std::string();
  return name;
}

bool moeCudaGetDeviceInfo(MoeCudaDeviceInfo *info, std::string *why) {
  if (!info)
    return fail(why, "moe-runtime: moeCudaGetDeviceInfo: null info");
  Failure f;
  DeviceScope scope(&f);
  if (!scope.ok())
    return fail(why, f);
  const DriverFunctions &d = scope.d();
  MoeCudaDeviceInfo out;
  out.ordinal = defaultDevice();
  char name[256] = {0};
  CUresult r = d.DeviceGetName(name, sizeof(name) - 1, scope.device());
  if (r != CUDA_SUCCESS)
    return fail(why, callFailed(d, "cuDeviceGetName", r));
  out.name = name;
  struct {
    CUdevice_attribute attribute;
    int *value;
  } attributes[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &out.major},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &out.minor},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &out.multiprocessorCount},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
       &out.maxSharedMemoryPerBlockOptin},
  };
  for (auto &a : attributes) {
    r = d.DeviceGetAttribute(a.value, a.attribute, scope.device());
    if (r != CUDA_SUCCESS)
      return fail(why, callFailed(d, "cuDeviceGetAttribute", r));
  }
  r = d.DeviceTotalMem(&out.totalMemoryBytes, scope.device());
  if (r != CUDA_SUCCESS)
    return fail(why, callFailed(d, "cuDeviceTotalMem", r));
  r = d.DriverGetVersion(&out.driverVersion);
  if (r != CUDA_SUCCESS)
    return fail(why, callFailed(d, "cuDriverGetVersion", r));
  *info = out;
  return true;
}

void *moeCudaMalloc(size_t bytes, std::string *why) {
  Failure f;
  DeviceScope scope(&f);
  if (!scope.ok())
    return fail(why, f), nullptr;
  if (bytes == 0)
    return nullptr;
  CUdeviceptr ptr = 0;
  CUresult r = scope.d().MemAlloc(&ptr, bytes);
  if (r != CUDA_SUCCESS) {
    Failure e = callFailed(scope.d(), "cuMemAlloc", r);
    e.message += " (" + std::to_string(bytes) + " bytes)";
    return fail(why, e), nullptr;
  }
  return reinterpret_cast<void *>(uintptr_t(ptr));
}

bool moeCudaFree(void *devicePtr, std::string *why) {
  if (!devicePtr)
    return true;
  Failure f;
  DeviceScope scope(&f);
  if (!scope.ok())
    return fail(why, f);
  // Kernels queued on any stream may still use the memory: finish them
  // first. A failed synchronization is reported; the memory is freed anyway.
  CUresult sync = scope.d().CtxSynchronize();
  CUresult r = scope.d().MemFree(devPtr(devicePtr));
  if (sync != CUDA_SUCCESS)
    return fail(why, callFailed(scope.d(), "cuCtxSynchronize", sync));
  return r == CUDA_SUCCESS ? true
                           : fail(why, callFailed(scope.d(), "cuMemFree", r));
}

bool moeCudaCopyToDevice(void *deviceDst, const void *hostSrc, size_t bytes,
                         std::string *why) {
  if (bytes == 0)
    return true;
  if (!deviceDst || !hostSrc)
    return fail(why, "moe-runtime: moeCudaCopyToDevice: null pointer");
  Failure f;
  DeviceScope scope(&f);
  if (!scope.ok())
    return fail(why, f);
  CUresult r = scope.d().MemcpyHtoD(devPtr(deviceDst), hostSrc, bytes);
  if (r == CUDA_SUCCESS)
    return true;
  Failure e = callFailed(scope.d(), "cuMemcpyHtoD", r);
  e.message += " (" + std::to_string(bytes) + " bytes)";
  return fail(why, e);
}

bool moeCudaCopyToHost(void *hostDst, const void *deviceSrc, size_t bytes,
                       std::string *why) {
  if (bytes == 0)
    return true;
  if (!hostDst || !deviceSrc)
    return fail(why, "moe-runtime: moeCudaCopyToHost: null pointer");
  Failure f;
  DeviceScope scope(&f);
  if (!scope.ok())
    return fail(why, f);
  CUresult r = scope.d().MemcpyDtoH(hostDst, devPtr(deviceSrc), bytes);
  if (r == CUDA_SUCCESS)
    return true;
  Failure e = callFailed(scope.d(), "cuMemcpyDtoH", r);
  e.message += " (" + std::to_string(bytes) + " bytes)";
  return fail(why, e);
}

bool moeCudaSynchronize(std::string *why) {
  Failure f;
  DeviceScope scope(&f);
  if (!scope.ok())
    return fail(why, f);
  CUresult r = scope.d().CtxSynchronize();
  return r == CUDA_SUCCESS
             ? true
             : fail(why, callFailed(scope.d(), "cuCtxSynchronize", r));
}

bool moeCudaTakeError(std::string *message) {
  const char *pending = moeRuntimeGetLastError();
  if (!pending)
    return false;
  if (message)
    *message = pending;
  moeRuntimeClearError();
  return true;
}
