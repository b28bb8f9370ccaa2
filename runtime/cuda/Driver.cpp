//===- Driver.cpp - Loading the CUDA driver, contexts, errors -------------===//
//
// The driver is opened once with dlopen($MOE_CUDA_DRIVER or "libcuda.so.1")
// and its entry points are looked up by their versioned names (see
// CudaDriverApi.h). Then cuInit(0) and cuDeviceGetCount; any failure is kept
// and reported the same way on every later attempt. Primary contexts are
// retained per device on first use and made current around each call (the
// scheme of upstream's CudaRuntimeWrappers.cpp ScopedContext), so the runtime
// never disturbs a context the host application made current.
//
// All state lives in objects that are never destroyed: module destructors
// that MLIR registers (mgpuModuleUnload in llvm.global_dtors) may run after
// static destructors.
//
//===----------------------------------------------------------------------===//

#include "runtime/IndexErrors.h"
#include "runtime/cuda/Internal.h"
#include "runtime/cuda/MgpuAbi.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>

using namespace moe::cudart;

namespace {

struct DriverState {
  std::mutex mutex;
  std::atomic<bool> ready{false};
  bool attempted = false;
  Failure failure;
  void *handle = nullptr;
  DriverFunctions fns;
  int deviceCount = 0;
  std::unique_ptr<std::atomic<CUctx_st *>[]> contexts;
};

DriverState &driverState() {
  static DriverState *state = new DriverState;
  return *state;
}

struct ErrorState {
  std::mutex mutex;
  std::atomic<bool> pending{false};
  std::atomic<bool> print{true};
  std::string message;
  int code = 0;
};

ErrorState &errorState() {
  static ErrorState *state = new ErrorState;
  return *state;
}

Failure nonDriver(std::string message) {
  return Failure{std::move(message), kNonDriverError};
}

// Called with the state's mutex held.
bool loadDriver(DriverState &s) {
  std::string path = driverPath();
  dlerror();
  // RTLD_NODELETE: a driver is never really unloaded (CUDA does not support
  // it), and the test reset may reopen the same library.
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle) {
    const char *err = dlerror();
    s.failure = nonDriver("moe-runtime: cannot load the CUDA driver (dlopen " +
                          path + ": " + (err ? err : "unknown error") + ")");
    return false;
  }
  DriverFunctions fns;
  const char *missing = nullptr;
#define MOE_RESOLVE_REQUIRED(member, name, symbol, result, params)             \
  fns.member = reinterpret_cast<PFN_##member>(dlsym(handle, #symbol));         \
  if (!fns.member && !missing)                                                 \
    missing = #symbol;
#define MOE_RESOLVE_OPTIONAL(member, name, symbol, result, params)             \
  fns.member = reinterpret_cast<PFN_##member>(dlsym(handle, #symbol));
  MOE_CUDA_DRIVER_REQUIRED(MOE_RESOLVE_REQUIRED)
  MOE_CUDA_DRIVER_OPTIONAL(MOE_RESOLVE_OPTIONAL)
#undef MOE_RESOLVE_REQUIRED
#undef MOE_RESOLVE_OPTIONAL
  if (missing) {
    s.failure = nonDriver("moe-runtime: the CUDA driver " + path + " lacks " +
                          missing + " (driver too old?)");
    dlclose(handle);
    return false;
  }

  CUresult r = fns.Init(0);
  if (r == CUDA_ERROR_NO_DEVICE) {
    s.failure = Failure{
        "moe-runtime: no CUDA device (cuInit: " + describeResult(fns, r) + ")",
        r};
    dlclose(handle);
    return false;
  }
  if (r != CUDA_SUCCESS) {
    s.failure = callFailed(fns, "cuInit", r);
    dlclose(handle);
    return false;
  }
  int count = 0;
  r = fns.DeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    s.failure = callFailed(fns, "cuDeviceGetCount", r);
    dlclose(handle);
    return false;
  }
  if (count <= 0) {
    s.failure = Failure{"moe-runtime: no CUDA device", CUDA_ERROR_NO_DEVICE};
    dlclose(handle);
    return false;
  }
  s.handle = handle;
  s.fns = fns;
  s.deviceCount = count;
  s.contexts.reset(new std::atomic<CUctx_st *>[count]);
  for (int i = 0; i < count; ++i)
    s.contexts[i].store(nullptr);
  return true;
}

} // namespace

namespace moe {
namespace cudart {

std::string driverPath() {
  const char *env = std::getenv("MOE_CUDA_DRIVER");
  return env && *env ? env : "libcuda.so.1";
}

std::string describeResult(const DriverFunctions &d, CUresult r) {
  const char *name = nullptr;
  const char *text = nullptr;
  if (d.GetErrorName && d.GetErrorName(r, &name) != CUDA_SUCCESS)
    name = nullptr;
  if (d.GetErrorString && d.GetErrorString(r, &text) != CUDA_SUCCESS)
    text = nullptr;
  std::string out = name ? name : "CUDA error " + std::to_string(int(r));
  if (text)
    out += std::string(" (") + text + ")";
  return out;
}

Failure callFailed(const DriverFunctions &d, const char *call, CUresult r) {
  return Failure{std::string("moe-runtime: ") + call +
                     " failed: " + describeResult(d, r),
                 r};
}

const DriverFunctions *getDriver(Failure *why) {
  DriverState &s = driverState();
  if (s.ready.load(std::memory_order_acquire))
    return &s.fns;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.attempted) {
    s.attempted = true;
    if (loadDriver(s)) {
      s.ready.store(true, std::memory_order_release);
      return &s.fns;
    }
  }
  if (s.ready.load(std::memory_order_relaxed))
    return &s.fns;
  if (why)
    *why = s.failure;
  return nullptr;
}

int &defaultDevice() {
  static thread_local int device = 0;
  return device;
}

int deviceCount() { return driverState().deviceCount; }

bool primaryContext(int device, CUcontext *ctx, CUdevice *dev, Failure *why) {
  const DriverFunctions *d = getDriver(why);
  if (!d)
    return false;
  DriverState &s = driverState();
  if (device < 0 || device >= s.deviceCount) {
    if (why)
      *why = Failure{"moe-runtime: CUDA device " + std::to_string(device) +
                         " does not exist (the driver reports " +
                         std::to_string(s.deviceCount) + ")",
                     CUDA_ERROR_INVALID_DEVICE};
    return false;
  }
  CUdevice handle = 0;
  CUresult r = d->DeviceGet(&handle, device);
  if (r != CUDA_SUCCESS) {
    if (why)
      *why = callFailed(*d, "cuDeviceGet", r);
    return false;
  }
  CUcontext c = s.contexts[device].load(std::memory_order_acquire);
  if (!c) {
    std::lock_guard<std::mutex> lock(s.mutex);
    c = s.contexts[device].load(std::memory_order_relaxed);
    if (!c) {
      r = d->DevicePrimaryCtxRetain(&c, handle);
      if (r != CUDA_SUCCESS || !c) {
        if (why)
          *why = r != CUDA_SUCCESS
                     ? callFailed(*d, "cuDevicePrimaryCtxRetain", r)
                     : nonDriver("moe-runtime: cuDevicePrimaryCtxRetain "
                                 "returned no context");
        return false;
      }
      s.contexts[device].store(c, std::memory_order_release);
    }
  }
  *ctx = c;
  *dev = handle;
  return true;
}

DeviceScope::DeviceScope(Failure *why, int device) {
  const DriverFunctions *d = getDriver(why);
  if (!d)
    return;
  CUcontext ctx = nullptr;
  if (!primaryContext(device < 0 ? defaultDevice() : device, &ctx, &dev, why))
    return;
  CUresult r = d->CtxPushCurrent(ctx);
  if (r != CUDA_SUCCESS) {
    if (why)
      *why = callFailed(*d, "cuCtxPushCurrent", r);
    return;
  }
  pushed = true;
  driver = d;
}

DeviceScope::~DeviceScope() {
  if (pushed) {
    CUcontext popped = nullptr;
    driver->CtxPopCurrent(&popped);
  }
}

void recordError(const Failure &failure) {
  ErrorState &e = errorState();
  std::lock_guard<std::mutex> lock(e.mutex);
  if (e.pending.load(std::memory_order_relaxed))
    return;
  e.message = failure.message;
  e.code = failure.code;
  e.pending.store(true, std::memory_order_release);
  if (e.print.load(std::memory_order_relaxed)) {
    std::fprintf(stderr, "%s\n", failure.message.c_str());
    std::fflush(stderr);
  }
}

bool errorPending() {
  return errorState().pending.load(std::memory_order_acquire);
}

} // namespace cudart
} // namespace moe

extern "C" {

const char *moeRuntimeGetLastError(void) {
  static thread_local std::string copy;
  ErrorState &e = errorState();
  std::lock_guard<std::mutex> lock(e.mutex);
  if (!e.pending.load(std::memory_order_relaxed))
    return nullptr;
  copy = e.message;
  return copy.c_str();
}

int moeRuntimeGetLastErrorCode(void) {
  ErrorState &e = errorState();
  std::lock_guard<std::mutex> lock(e.mutex);
  return e.pending.load(std::memory_order_relaxed) ? e.code : 0;
}

void moeRuntimeClearError(void) {
  ErrorState &e = errorState();
  std::lock_guard<std::mutex> lock(e.mutex);
  e.message.clear();
  e.code = 0;
  e.pending.store(false, std::memory_order_release);
}

void moeRuntimeIndexError(int32_t kind, int64_t token, int64_t slot, int64_t value,
                          int64_t numExperts) {
  char message[256];
  moeFormatIndexError(message, sizeof(message), kind, token, slot, value, numExperts);
  recordError(Failure{std::string("moe-runtime: ") + message, kNonDriverError});
}

int moeRuntimeSetErrorPrinting(int enabled) {
  return errorState().print.exchange(enabled != 0) ? 1 : 0;
}

void moeRuntimeResetForTesting(void) {
  DriverState &s = driverState();
  if (s.ready.load()) {
    // Give the pools back to the driver while it is still loaded.
    int print = moeRuntimeSetErrorPrinting(0);
    moeRuntimeEmptyCache();
    moeRuntimeSetErrorPrinting(print);
  }
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.ready.load()) {
      for (int i = 0; i < s.deviceCount; ++i) {
        if (!s.contexts[i].load())
          continue;
        CUdevice dev = 0;
        if (s.fns.DeviceGet(&dev, i) == CUDA_SUCCESS)
          s.fns.DevicePrimaryCtxRelease(dev);
      }
    }
    if (s.handle)
      dlclose(s.handle);
    s.handle = nullptr;
    s.fns = DriverFunctions();
    s.contexts.reset();
    s.deviceCount = 0;
    s.failure = Failure();
    s.attempted = false;
    s.ready.store(false);
  }
  resetFunctionRegistry();
  resetAllocator();
  resetPools();
  defaultDevice() = 0;
  moeRuntimeClearError();
}

} // extern "C"
