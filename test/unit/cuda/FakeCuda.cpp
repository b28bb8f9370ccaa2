//===- FakeCuda.cpp - A fake CUDA driver for the runtime's unit tests -----===//
//
// Built three times: libFakeCuda.so (everything), libFakeCudaOld.so
// (FAKE_CUDA_OLD_DRIVER: no cuLaunchKernelEx / cuTensorMapEncodeTiled, like a
// CUDA 11 driver) and libFakeCudaBroken.so (FAKE_CUDA_BROKEN_DRIVER: no
// cuMemFree_v2). Every entry point's type is checked against the runtime's
// table in CudaDriverApi.h. See FakeCuda.h for the behaviour.
//
//===----------------------------------------------------------------------===//

#include "FakeCuda.h"
#include "runtime/cuda/CudaDriverApi.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

using namespace moe::cudrv;

namespace {

const char kElfMagic[4] = {0x7f, 'E', 'L', 'F'};

struct FakeFunction;

struct FakeModule {
  bool cubin = false;
  std::string text;
  std::vector<std::unique_ptr<FakeFunction>> functions;
};

struct FakeFunction {
  FakeModule *module = nullptr;
  std::string name;
  int maxDynamicSmem = 0;
};

struct FakeStream {
  int id = 0;
};
struct FakeEvent {
  int id = 0;
};

struct State {
  std::recursive_mutex mutex;
  std::map<std::string, int> forced;
  std::map<std::string, int> calls;
  bool initialized = false;
  int deviceCount = 1;
  int ccMajor = 9, ccMinor = 0;
  std::string jitLog;
  std::map<char *, size_t> allocations;
  std::set<FakeStream *> streams;
  std::set<FakeEvent *> events;
  std::set<FakeModule *> modules;
  std::map<void *, size_t> hostRegistrations;
  int retained = 0;
  int lastRetainedDevice = -1;
  FakeCudaLaunch lastLaunch{};
  int launches = 0;
  FakeCudaTensorMap lastTensorMap{};
  int lastDynamicSmem = -1;
  int lastJitOptLevel = -1;
  int lastManagedFlags = -1;
  void *lastHostRegister = nullptr;
  size_t lastHostRegisterBytes = 0;
  CUresult asyncError = CUDA_SUCCESS;
  int contextStorage[16] = {0};
  size_t memoryLimit = 0; // 0: unlimited
  size_t liveBytes = 0;
  bool traceChecked = false;
  int traceFd = -1;
  // Copies by direction ("HtoD", "DtoH", "DtoD", "HtoH"): count and bytes.
  std::map<std::string, std::pair<int, uint64_t>> copies;
};

State &state() {
  static State *s = new State;
  return *s;
}

thread_local int contextDepth = 0;

/// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: 232448 (H100/H200:
/// 227 KiB), or $MOE_FAKE_CUDA_SMEM_OPTIN (e.g. 101376, an sm_86 part).
int maxSharedOptin() {
  if (const char *v = std::getenv("MOE_FAKE_CUDA_SMEM_OPTIN"))
    if (int n = std::atoi(v); n > 0)
      return n;
  return 232448;
}
constexpr int kDefaultDynamicSmem = 48 * 1024;

// The trace file ($MOE_FAKE_CUDA_TRACE or fakeCudaSetTrace): one line per
// driver call, "<symbol>[ <detail>]", appended with one write(2) each so that
// other writers of the file (and a crash) never split a line.
void traceLine(State &s, const char *symbol, const std::string &detail) {
  if (!s.traceChecked) {
    s.traceChecked = true;
    const char *path = std::getenv("MOE_FAKE_CUDA_TRACE");
    if (path && *path)
      s.traceFd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  if (s.traceFd < 0)
    return;
  std::string line = symbol;
  if (!detail.empty())
    line += " " + detail;
  line += "\n";
  ssize_t written = ::write(s.traceFd, line.data(), line.size());
  (void)written;
}

// Counts (and traces) the call and returns the forced result (or success).
CUresult enter(State &s, const char *symbol,
               const std::string &detail = std::string()) {
  s.calls[symbol]++;
  traceLine(s, symbol, detail);
  auto it = s.forced.find(symbol);
  return it == s.forced.end() ? CUDA_SUCCESS : CUresult(it->second);
}

#define FAKE_ENTER(symbol, needsContext)                                       \
  FAKE_ENTER_DETAIL(symbol, needsContext, std::string())

// `detail` may use `s` (the state) and the call's arguments.
#define FAKE_ENTER_DETAIL(symbol, needsContext, detail)                        \
  State &s = state();                                                          \
  std::lock_guard<std::recursive_mutex> lock(s.mutex);                         \
  if (CUresult forced = enter(s, symbol, detail))                              \
    return forced;                                                             \
  if (!s.initialized)                                                          \
    return CUDA_ERROR_NOT_INITIALIZED;                                         \
  if ((needsContext) && contextDepth == 0)                                     \
  return CUDA_ERROR_INVALID_CONTEXT

struct ErrorText {
  int code;
  const char *name;
  const char *text;
};
const ErrorText kErrors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorText *findError(CUresult r) {
  for (const ErrorText &e : kErrors)
    if (e.code == int(r))
      return &e;
  return nullptr;
}

// [p, p+bytes) lies inside one allocation.
bool inAllocation(State &s, const void *p, size_t bytes) {
  const char *c = static_cast<const char *>(p);
  auto it = s.allocations.upper_bound(const_cast<char *>(c));
  if (it == s.allocations.begin())
    return false;
  --it;
  return c >= it->first && c + bytes <= it->first + it->second;
}

bool liveFunction(State &s, CUfunction f) {
  auto *fn = reinterpret_cast<FakeFunction *>(f);
  for (FakeModule *m : s.modules)
    for (auto &owned : m->functions)
      if (owned.get() == fn)
        return true;
  return false;
}

// Null, CU_STREAM_LEGACY (0x1) and CU_STREAM_PER_THREAD (0x2) are the
// default streams, valid wherever a stream is.
bool liveStream(State &s, CUstream stream) {
  uintptr_t handle = reinterpret_cast<uintptr_t>(stream);
  return handle <= 2 ||
         s.streams.count(reinterpret_cast<FakeStream *>(stream)) != 0;
}

// The direction of a copy as unified addressing sees it: fake device memory
// is what cuMemAlloc*/cuMemAllocManaged handed out. Also counts it.
std::string copyDetail(State &s, const void *dst, const void *src,
                       size_t bytes) {
  bool d = dst && inAllocation(s, dst, 1), h = !(src && inAllocation(s, src, 1));
  std::string dir = std::string(h ? "Hto" : "Dto") + (d ? "D" : "H");
  auto &c = s.copies[dir];
  c.first++;
  c.second += bytes;
  return dir + " " + std::to_string(bytes);
}

/// Test hook for the GPU index checks' read back (the fake runs no PTX, so
/// no kernel writes an error word): with $MOE_FAKE_CUDA_READBACK16 =
/// "w0,w1,w2,w3", a 16-byte copy from fake device memory to host memory
/// delivers these four int32 words instead of the memory's bytes.
bool fakeReadback16(State &s, void *dst, const void *src, size_t bytes) {
  const char *words = std::getenv("MOE_FAKE_CUDA_READBACK16");
  if (!words || !*words || bytes != 16 || !src || !inAllocation(s, src, 1) ||
      inAllocation(s, dst, 1))
    return false;
  int32_t w[4] = {0, 0, 0, 0};
  const char *p = words;
  for (int i = 0; i < 4 && *p; ++i) {
    char *end = nullptr;
    w[i] = int32_t(std::strtol(p, &end, 10));
    p = *end == ',' ? end + 1 : end;
  }
  std::memcpy(dst, w, sizeof(w));
  return true;
}

std::string dims3(unsigned x, unsigned y, unsigned z) {
  return std::to_string(x) + "x" + std::to_string(y) + "x" + std::to_string(z);
}

std::string functionName(State &s, CUfunction f) {
  return liveFunction(s, f) ? reinterpret_cast<FakeFunction *>(f)->name
                            : std::string("?");
}

CUresult loadImage(State &s, CUmodule *module, const void *image) {
  if (!module || !image)
    return CUDA_ERROR_INVALID_VALUE;
  auto m = std::make_unique<FakeModule>();
  const char *bytes = static_cast<const char *>(image);
  // A fatbin (what moe-compile --target=cuda embeds: cubin + PTX) loads
  // like a cubin.
  const unsigned char fatbinMagic[4] = {0x50, 0xED, 0x55, 0xBA};
  if ((bytes[0] == kElfMagic[0] && std::memcmp(bytes, kElfMagic, 4) == 0) ||
      std::memcmp(bytes, fatbinMagic, 4) == 0) {
    m->cubin = true;
  } else {
    m->text.assign(bytes, std::strlen(bytes)); // reads up to the NUL
    if (m->text.find(".version") == std::string::npos)
      return CUDA_ERROR_INVALID_IMAGE;
    if (m->text.find("SYNTAX ERROR") != std::string::npos)
      return CUDA_ERROR_INVALID_PTX;
  }
  *module = reinterpret_cast<CUmodule>(m.get());
  s.modules.insert(m.release());
  return CUDA_SUCCESS;
}

void record(State &s, FakeFunction *fn, unsigned gx, unsigned gy, unsigned gz,
            unsigned bx, unsigned by, unsigned bz, unsigned smem,
            CUstream stream, void **params, void **extra) {
  FakeCudaLaunch l{};
  std::strncpy(l.kernel, fn->name.c_str(), sizeof(l.kernel) - 1);
  l.grid[0] = gx, l.grid[1] = gy, l.grid[2] = gz;
  l.block[0] = bx, l.block[1] = by, l.block[2] = bz;
  l.sharedMemBytes = smem;
  l.stream = stream;
  l.params = params;
  l.extra = extra;
  s.lastLaunch = l;
  s.launches++;
}

CUresult runKernel(State &s, FakeFunction *fn, unsigned smem, void **params) {
  if (smem > unsigned(kDefaultDynamicSmem) && int(smem) > fn->maxDynamicSmem)
    return CUDA_ERROR_INVALID_VALUE; // needs the opt-in attribute
  if (fn->name == "fake_fill_f32") {
    if (!params)
      return CUDA_ERROR_INVALID_VALUE;
    float *out = *static_cast<float **>(params[0]);
    int64_t n = *static_cast<int64_t *>(params[1]);
    float value = *static_cast<float *>(params[2]);
    if (n < 0 || !inAllocation(s, out, size_t(n) * sizeof(float)))
      s.asyncError = CUDA_ERROR_ILLEGAL_ADDRESS;
    else
      for (int64_t i = 0; i < n; ++i)
        out[i] = value;
  } else if (fn->name == "moe_test_fill") {
    // test/runtime/mgpu-e2e: gpu.func @moe_test_fill(memref<?xf32>, f32) as
    // MLIR passes it: allocated, aligned, offset, size, stride, value.
    if (!params)
      return CUDA_ERROR_INVALID_VALUE;
    float *aligned = *static_cast<float **>(params[1]);
    int64_t offset = *static_cast<int64_t *>(params[2]);
    int64_t n = *static_cast<int64_t *>(params[3]);
    int64_t stride = *static_cast<int64_t *>(params[4]);
    float value = *static_cast<float *>(params[5]);
    float *out = aligned + offset;
    if (n < 0 || stride != 1 ||
        !inAllocation(s, out, size_t(n) * sizeof(float)))
      s.asyncError = CUDA_ERROR_ILLEGAL_ADDRESS;
    else
      for (int64_t i = 0; i < n; ++i)
        out[i] = value;
  } else if (fn->name == "fake_fault") {
    s.asyncError = CUDA_ERROR_ILLEGAL_ADDRESS;
  }
  return CUDA_SUCCESS;
}

} // namespace

//===----------------------------------------------------------------------===//
// Driver entry points (under the symbol names the runtime looks up)
//===----------------------------------------------------------------------===//

FAKE_EXPORT CUresult cuGetErrorName(CUresult error, const char **str) {
  const ErrorText *e = findError(error);
  if (!str)
    return CUDA_ERROR_INVALID_VALUE;
  *str = e ? e->name : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_EXPORT CUresult cuGetErrorString(CUresult error, const char **str) {
  const ErrorText *e = findError(error);
  if (!str)
    return CUDA_ERROR_INVALID_VALUE;
  *str = e ? e->text : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_EXPORT CUresult cuInit(unsigned int flags) {
  State &s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  if (CUresult forced = enter(s, "cuInit"))
    return forced;
  if (flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  s.initialized = true;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDriverGetVersion(int *version) {
  State &s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  if (CUresult forced = enter(s, "cuDriverGetVersion"))
    return forced;
  if (!version)
    return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetCount(int *count) {
  FAKE_ENTER("cuDeviceGetCount", false);
  if (!count)
    return CUDA_ERROR_INVALID_VALUE;
  *count = s.deviceCount;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  FAKE_ENTER("cuDeviceGet", false);
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= s.deviceCount)
    return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice device) {
  FAKE_ENTER("cuDeviceGetName", false);
  if (!name || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= s.deviceCount)
    return CUDA_ERROR_INVALID_DEVICE;
  std::strncpy(name, "Fake H200", size_t(len));
  name[len - 1] = 0;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attr,
                                          CUdevice device) {
  FAKE_ENTER("cuDeviceGetAttribute", false);
  if (!value)
    return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= s.deviceCount)
    return CUDA_ERROR_INVALID_DEVICE;
  switch (attr) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *value = s.ccMajor;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *value = s.ccMinor;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *value = 132;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    *value = maxSharedOptin();
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

FAKE_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice device) {
  FAKE_ENTER("cuDeviceTotalMem_v2", false);
  if (!bytes)
    return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= s.deviceCount)
    return CUDA_ERROR_INVALID_DEVICE;
  *bytes = size_t(143771) << 20;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice device) {
  FAKE_ENTER("cuDevicePrimaryCtxRetain", false);
  if (!ctx)
    return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= s.deviceCount || device >= 16)
    return CUDA_ERROR_INVALID_DEVICE;
  *ctx = reinterpret_cast<CUcontext>(&s.contextStorage[device]);
  s.retained++;
  s.lastRetainedDevice = device;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  FAKE_ENTER("cuDevicePrimaryCtxRelease_v2", false);
  if (device < 0 || device >= s.deviceCount || s.retained == 0)
    return CUDA_ERROR_INVALID_DEVICE;
  s.retained--;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  FAKE_ENTER("cuCtxPushCurrent_v2", false);
  if (!ctx)
    return CUDA_ERROR_INVALID_CONTEXT;
  contextDepth++;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *ctx) {
  FAKE_ENTER("cuCtxPopCurrent_v2", false);
  if (contextDepth == 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  contextDepth--;
  if (ctx)
    *ctx = nullptr;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxSynchronize(void) {
  FAKE_ENTER("cuCtxSynchronize", true);
  return s.asyncError;
}

FAKE_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  FAKE_ENTER("cuModuleLoadData", true);
  return loadImage(s, module, image);
}

FAKE_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image,
                                        unsigned int numOptions,
                                        CUjit_option *options,
                                        void **optionValues) {
  State &s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  char *log = nullptr;
  size_t logSize = 0;
  for (unsigned i = 0; i < numOptions; ++i) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER)
      log = static_cast<char *>(optionValues[i]);
    else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
      logSize = reinterpret_cast<uintptr_t>(optionValues[i]);
    else if (options[i] == CU_JIT_OPTIMIZATION_LEVEL)
      s.lastJitOptLevel = int(reinterpret_cast<uintptr_t>(optionValues[i]));
  }
  auto writeLog = [&](const std::string &text) {
    if (log && logSize > 0) {
      size_t n = std::min(text.size(), logSize - 1);
      std::memcpy(log, text.data(), n);
      log[n] = 0;
    }
  };
  s.calls["cuModuleLoadDataEx"]++;
  traceLine(s, "cuModuleLoadDataEx", std::string());
  auto it = s.forced.find("cuModuleLoadDataEx");
  if (it != s.forced.end() && it->second != 0) {
    writeLog(s.jitLog);
    return CUresult(it->second);
  }
  if (!s.initialized)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (contextDepth == 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  CUresult r = loadImage(s, module, image);
  if (r == CUDA_ERROR_INVALID_PTX)
    writeLog(s.jitLog.empty() ? "ptxas fatal : syntax error" : s.jitLog);
  return r;
}

FAKE_EXPORT CUresult cuModuleUnload(CUmodule module) {
  FAKE_ENTER("cuModuleUnload", true);
  auto *m = reinterpret_cast<FakeModule *>(module);
  if (!s.modules.erase(m))
    return CUDA_ERROR_INVALID_HANDLE;
  delete m;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuModuleGetFunction(CUfunction *function, CUmodule module,
                                         const char *name) {
  FAKE_ENTER_DETAIL("cuModuleGetFunction", true, name ? name : "?");
  auto *m = reinterpret_cast<FakeModule *>(module);
  if (!function || !name || !s.modules.count(m))
    return CUDA_ERROR_INVALID_HANDLE;
  for (auto &f : m->functions)
    if (f->name == name) {
      *function = reinterpret_cast<CUfunction>(f.get());
      return CUDA_SUCCESS;
    }
  bool found = m->cubin ? std::strcmp(name, "missing") != 0
                        : m->text.find(std::string(".entry ") + name) !=
                              std::string::npos;
  if (!found)
    return CUDA_ERROR_NOT_FOUND;
  auto f = std::make_unique<FakeFunction>();
  f->module = m;
  f->name = name;
  *function = reinterpret_cast<CUfunction>(f.get());
  m->functions.push_back(std::move(f));
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuFuncSetAttribute(CUfunction function,
                                        CUfunction_attribute attr, int value) {
  FAKE_ENTER("cuFuncSetAttribute", true);
  if (!liveFunction(s, function))
    return CUDA_ERROR_INVALID_HANDLE;
  if (attr != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES || value < 0 ||
      value > maxSharedOptin())
    return CUDA_ERROR_INVALID_VALUE;
  reinterpret_cast<FakeFunction *>(function)->maxDynamicSmem = value;
  s.lastDynamicSmem = value;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuLaunchKernel(CUfunction function, unsigned gx,
                                    unsigned gy, unsigned gz, unsigned bx,
                                    unsigned by, unsigned bz, unsigned smem,
                                    CUstream stream, void **params,
                                    void **extra) {
  FAKE_ENTER_DETAIL("cuLaunchKernel", true,
                    functionName(s, function) + " " + dims3(gx, gy, gz) +
                        " " + dims3(bx, by, bz));
  if (!liveFunction(s, function) || !liveStream(s, stream))
    return CUDA_ERROR_INVALID_HANDLE;
  if (!gx || !gy || !gz || !bx || !by || !bz || bx * by * bz > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  auto *fn = reinterpret_cast<FakeFunction *>(function);
  record(s, fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra);
  return runKernel(s, fn, smem, params);
}

#ifndef FAKE_CUDA_OLD_DRIVER
FAKE_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config,
                                      CUfunction function, void **params,
                                      void **extra) {
  FAKE_ENTER_DETAIL(
      "cuLaunchKernelEx", true,
      config ? functionName(s, function) + " " +
                   dims3(config->gridDimX, config->gridDimY, config->gridDimZ) +
                   " " +
                   dims3(config->blockDimX, config->blockDimY, config->blockDimZ)
             : std::string());
  if (!config || !liveFunction(s, function) || !liveStream(s, config->hStream))
    return CUDA_ERROR_INVALID_HANDLE;
  auto *fn = reinterpret_cast<FakeFunction *>(function);
  record(s, fn, config->gridDimX, config->gridDimY, config->gridDimZ,
         config->blockDimX, config->blockDimY, config->blockDimZ,
         config->sharedMemBytes, config->hStream, params, extra);
  s.lastLaunch.viaLaunchKernelEx = 1;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute &a = config->attrs[i];
    if (a.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      s.lastLaunch.cluster[0] = a.value.clusterDim.x;
      s.lastLaunch.cluster[1] = a.value.clusterDim.y;
      s.lastLaunch.cluster[2] = a.value.clusterDim.z;
    } else if (a.id ==
               CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE) {
      s.lastLaunch.clusterSchedulingPolicy =
          a.value.clusterSchedulingPolicyPreference;
    } else {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (config->gridDimX %
      (s.lastLaunch.cluster[0] ? s.lastLaunch.cluster[0] : 1))
    return CUDA_ERROR_INVALID_VALUE; // grid must be a multiple of the cluster
  return runKernel(s, fn, config->sharedMemBytes, params);
}
#endif

FAKE_EXPORT CUresult cuStreamCreate(CUstream *stream, unsigned int flags) {
  FAKE_ENTER("cuStreamCreate", true);
  if (!stream || flags > 1)
    return CUDA_ERROR_INVALID_VALUE;
  auto *fs = new FakeStream;
  s.streams.insert(fs);
  *stream = reinterpret_cast<CUstream>(fs);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
  FAKE_ENTER("cuStreamDestroy_v2", true);
  auto *fs = reinterpret_cast<FakeStream *>(stream);
  if (!s.streams.erase(fs))
    return CUDA_ERROR_INVALID_HANDLE;
  delete fs;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamSynchronize(CUstream stream) {
  FAKE_ENTER("cuStreamSynchronize", true);
  if (!liveStream(s, stream))
    return CUDA_ERROR_INVALID_HANDLE;
  return s.asyncError;
}

FAKE_EXPORT CUresult cuStreamWaitEvent(CUstream stream, CUevent event,
                                       unsigned int flags) {
  FAKE_ENTER("cuStreamWaitEvent", true);
  if (!liveStream(s, stream) ||
      !s.events.count(reinterpret_cast<FakeEvent *>(event)))
    return CUDA_ERROR_INVALID_HANDLE;
  return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_EXPORT CUresult cuEventCreate(CUevent *event, unsigned int flags) {
  FAKE_ENTER("cuEventCreate", true);
  if (!event || (flags & ~0xFu))
    return CUDA_ERROR_INVALID_VALUE;
  auto *fe = new FakeEvent;
  s.events.insert(fe);
  *event = reinterpret_cast<CUevent>(fe);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventDestroy_v2(CUevent event) {
  FAKE_ENTER("cuEventDestroy_v2", true);
  auto *fe = reinterpret_cast<FakeEvent *>(event);
  if (!s.events.erase(fe))
    return CUDA_ERROR_INVALID_HANDLE;
  delete fe;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventRecord(CUevent event, CUstream stream) {
  FAKE_ENTER("cuEventRecord", true);
  if (!s.events.count(reinterpret_cast<FakeEvent *>(event)) ||
      !liveStream(s, stream))
    return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventSynchronize(CUevent event) {
  FAKE_ENTER("cuEventSynchronize", true);
  if (!s.events.count(reinterpret_cast<FakeEvent *>(event)))
    return CUDA_ERROR_INVALID_HANDLE;
  return s.asyncError;
}

FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t bytes) {
  FAKE_ENTER_DETAIL("cuMemAlloc_v2", true, std::to_string(bytes));
  if (!ptr || bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (s.memoryLimit && bytes > s.memoryLimit - std::min(s.memoryLimit, s.liveBytes))
    return CUDA_ERROR_OUT_OF_MEMORY;
  char *p = static_cast<char *>(std::malloc(bytes));
  if (!p)
    return CUDA_ERROR_OUT_OF_MEMORY;
  s.allocations[p] = bytes;
  s.liveBytes += bytes;
  *ptr = CUdeviceptr(reinterpret_cast<uintptr_t>(p));
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *ptr, size_t bytes,
                                       unsigned int flags) {
  FAKE_ENTER_DETAIL("cuMemAllocManaged", true, std::to_string(bytes));
  s.lastManagedFlags = int(flags);
  if (!ptr || bytes == 0 || (flags != 1 && flags != 2))
    return CUDA_ERROR_INVALID_VALUE;
  char *p = static_cast<char *>(std::malloc(bytes));
  if (!p)
    return CUDA_ERROR_OUT_OF_MEMORY;
  s.allocations[p] = bytes;
  s.liveBytes += bytes;
  *ptr = CUdeviceptr(reinterpret_cast<uintptr_t>(p));
  return CUDA_SUCCESS;
}

#ifndef FAKE_CUDA_BROKEN_DRIVER
FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr ptr) {
  FAKE_ENTER("cuMemFree_v2", true);
  char *p = reinterpret_cast<char *>(uintptr_t(ptr));
  auto it = s.allocations.find(p);
  if (it == s.allocations.end())
    return CUDA_ERROR_INVALID_VALUE;
  s.liveBytes -= it->second;
  s.allocations.erase(it);
  std::free(p);
  return CUDA_SUCCESS;
}
#endif

FAKE_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src,
                                   size_t bytes, CUstream stream) {
  FAKE_ENTER_DETAIL("cuMemcpyAsync", true,
                    copyDetail(s, reinterpret_cast<void *>(uintptr_t(dst)),
                               reinterpret_cast<void *>(uintptr_t(src)),
                               bytes));
  if (!dst || !src || !liveStream(s, stream))
    return CUDA_ERROR_INVALID_VALUE;
  if (fakeReadback16(s, reinterpret_cast<void *>(uintptr_t(dst)),
                     reinterpret_cast<void *>(uintptr_t(src)), bytes))
    return CUDA_SUCCESS;
  std::memmove(reinterpret_cast<void *>(uintptr_t(dst)),
               reinterpret_cast<void *>(uintptr_t(src)), bytes);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src,
                                     size_t bytes) {
  FAKE_ENTER_DETAIL(
      "cuMemcpyHtoD_v2", true,
      copyDetail(s, reinterpret_cast<void *>(uintptr_t(dst)), src, bytes));
  void *d = reinterpret_cast<void *>(uintptr_t(dst));
  if (!src || !inAllocation(s, d, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(d, src, bytes);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes) {
  FAKE_ENTER_DETAIL(
      "cuMemcpyDtoH_v2", true,
      copyDetail(s, dst, reinterpret_cast<void *>(uintptr_t(src)), bytes));
  void *p = reinterpret_cast<void *>(uintptr_t(src));
  if (!dst || !inAllocation(s, p, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  if (fakeReadback16(s, dst, p, bytes))
    return CUDA_SUCCESS;
  std::memcpy(dst, p, bytes);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short value,
                                      size_t count, CUstream stream) {
  FAKE_ENTER_DETAIL("cuMemsetD16Async", true, std::to_string(count * 2));
  auto *p = reinterpret_cast<uint16_t *>(uintptr_t(dst));
  if (!liveStream(s, stream) || !inAllocation(s, p, count * 2))
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i)
    p[i] = value;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value,
                                      size_t count, CUstream stream) {
  FAKE_ENTER_DETAIL("cuMemsetD32Async", true, std::to_string(count * 4));
  auto *p = reinterpret_cast<uint32_t *>(uintptr_t(dst));
  if (!liveStream(s, stream) || !inAllocation(s, p, count * 4))
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i)
    p[i] = value;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytes,
                                          unsigned int flags) {
  FAKE_ENTER("cuMemHostRegister_v2", true);
  if (!p || bytes == 0 || flags > 0xF)
    return CUDA_ERROR_INVALID_VALUE;
  s.hostRegistrations[p] = bytes;
  s.lastHostRegister = p;
  s.lastHostRegisterBytes = bytes;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemHostUnregister(void *p) {
  FAKE_ENTER("cuMemHostUnregister", true);
  if (!s.hostRegistrations.erase(p))
    return CUresult(713); // CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
  return CUDA_SUCCESS;
}

#ifndef FAKE_CUDA_OLD_DRIVER
FAKE_EXPORT CUresult cuTensorMapEncodeTiled(
    CUtensorMap *map, CUtensorMapDataType dataType, cuuint32_t rank,
    void *address, const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
    const cuuint32_t *boxDim, const cuuint32_t *elementStrides,
    CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
    CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill) {
  FAKE_ENTER("cuTensorMapEncodeTiled", false);
  if (!map || rank < 1 || rank > 5 || !address || !globalDim || !boxDim ||
      !elementStrides || (rank > 1 && !globalStrides))
    return CUDA_ERROR_INVALID_VALUE;
  FakeCudaTensorMap t{};
  t.dataType = dataType;
  t.rank = rank;
  t.address = address;
  for (unsigned i = 0; i < rank; ++i) {
    t.globalDim[i] = globalDim[i];
    t.boxDim[i] = boxDim[i];
    t.elementStrides[i] = elementStrides[i];
  }
  for (unsigned i = 0; i + 1 < rank; ++i)
    t.globalStrides[i] = globalStrides[i];
  t.interleave = interleave;
  t.swizzle = swizzle;
  t.l2Promotion = l2Promotion;
  t.oobFill = oobFill;
  s.lastTensorMap = t;
  // Words 0..7 a fixed pattern, 8..15 what was encoded (as a real
  // descriptor, equal inputs give equal bytes and different ones differ).
  for (int i = 0; i < 8; ++i)
    map->opaque[i] = 0xC0FFEE00u + unsigned(i);
  map->opaque[8] = uint64_t(reinterpret_cast<uintptr_t>(address));
  map->opaque[9] = (uint64_t(dataType) << 32) | rank;
  map->opaque[10] = (uint64_t(boxDim[0]) << 32) | (rank > 1 ? boxDim[1] : 0);
  map->opaque[11] = globalDim[0];
  map->opaque[12] = rank > 1 ? globalDim[1] : 0;
  map->opaque[13] = rank > 1 ? globalStrides[0] : 0;
  map->opaque[14] = (uint64_t(interleave) << 48) | (uint64_t(swizzle) << 32) |
                    (uint64_t(l2Promotion) << 16) | uint64_t(oobFill);
  map->opaque[15] = rank > 2 ? globalDim[2] ^ (uint64_t(boxDim[2]) << 40) : 0;
  return CUDA_SUCCESS;
}
#endif

// Every exported entry point has the type the runtime's table expects (the
// full fake only: the others leave some out on purpose).
#if !defined(FAKE_CUDA_OLD_DRIVER) && !defined(FAKE_CUDA_BROKEN_DRIVER)
#define FAKE_CHECK_TYPE(member, name, symbol, result, params)                  \
  static_assert(std::is_same<PFN_##member, decltype(&symbol)>::value, #symbol);
MOE_CUDA_DRIVER_REQUIRED(FAKE_CHECK_TYPE)
MOE_CUDA_DRIVER_OPTIONAL(FAKE_CHECK_TYPE)
#undef FAKE_CHECK_TYPE
#endif

//===----------------------------------------------------------------------===//
// Control API
//===----------------------------------------------------------------------===//

FAKE_EXPORT void fakeCudaReset(void) {
  State &s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  for (auto &a : s.allocations)
    std::free(a.first);
  for (FakeStream *x : s.streams)
    delete x;
  for (FakeEvent *x : s.events)
    delete x;
  for (FakeModule *x : s.modules)
    delete x;
  s.allocations.clear();
  s.streams.clear();
  s.events.clear();
  s.modules.clear();
  s.hostRegistrations.clear();
  s.forced.clear();
  s.calls.clear();
  s.initialized = false;
  s.deviceCount = 1;
  s.ccMajor = 9;
  s.ccMinor = 0;
  s.jitLog.clear();
  s.retained = 0;
  s.lastRetainedDevice = -1;
  s.lastLaunch = FakeCudaLaunch{};
  s.launches = 0;
  s.lastTensorMap = FakeCudaTensorMap{};
  s.lastDynamicSmem = -1;
  s.lastJitOptLevel = -1;
  s.lastManagedFlags = -1;
  s.lastHostRegister = nullptr;
  s.lastHostRegisterBytes = 0;
  s.asyncError = CUDA_SUCCESS;
  s.copies.clear();
  s.memoryLimit = 0;
  s.liveBytes = 0;
  contextDepth = 0;
}

FAKE_EXPORT void fakeCudaSetTrace(const char *path) {
  State &s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  if (s.traceFd >= 0)
    ::close(s.traceFd);
  s.traceChecked = true;
  s.traceFd = path && *path
                  ? ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)
                  : -1;
}

FAKE_EXPORT void fakeCudaSetMemoryLimit(size_t bytes) {
  State &s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  s.memoryLimit = bytes;
}

FAKE_EXPORT int fakeCudaCopyCount(const char *direction) {
  State &s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  auto it = s.copies.find(direction ? direction : "");
  return it == s.copies.end() ? 0 : it->second.first;
}

FAKE_EXPORT uint64_t fakeCudaCopyBytes(const char *direction) {
  State &s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  auto it = s.copies.find(direction ? direction : "");
  return it == s.copies.end() ? 0 : it->second.second;
}

FAKE_EXPORT void fakeCudaSetResult(const char *symbol, int result) {
  State &s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  if (result == 0)
    s.forced.erase(symbol);
  else
    s.forced[symbol] = result;
}

FAKE_EXPORT void fakeCudaSetDeviceCount(int count) {
  State &s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  s.deviceCount = count;
}

FAKE_EXPORT void fakeCudaSetComputeCapability(int major, int minor) {
  State &s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  s.ccMajor = major;
  s.ccMinor = minor;
}

FAKE_EXPORT void fakeCudaSetJitLog(const char *log) {
  State &s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  s.jitLog = log ? log : "";
}

FAKE_EXPORT int fakeCudaCallCount(const char *symbol) {
  State &s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  auto it = s.calls.find(symbol);
  return it == s.calls.end() ? 0 : it->second;
}

FAKE_EXPORT const FakeCudaLaunch *fakeCudaLastLaunch(void) {
  return &state().lastLaunch;
}
FAKE_EXPORT int fakeCudaLaunchCount(void) { return state().launches; }
FAKE_EXPORT const FakeCudaTensorMap *fakeCudaLastTensorMap(void) {
  return &state().lastTensorMap;
}
FAKE_EXPORT int fakeCudaLastDynamicSmemAttribute(void) {
  return state().lastDynamicSmem;
}
FAKE_EXPORT int fakeCudaLastJitOptLevel(void) {
  return state().lastJitOptLevel;
}
FAKE_EXPORT int fakeCudaLastManagedFlags(void) {
  return state().lastManagedFlags;
}
FAKE_EXPORT void *fakeCudaLastHostRegister(size_t *bytes) {
  if (bytes)
    *bytes = state().lastHostRegisterBytes;
  return state().lastHostRegister;
}
FAKE_EXPORT int fakeCudaLastRetainedDevice(void) {
  return state().lastRetainedDevice;
}
FAKE_EXPORT int fakeCudaLiveAllocations(void) {
  return int(state().allocations.size());
}
FAKE_EXPORT int fakeCudaLiveStreams(void) {
  return int(state().streams.size());
}
FAKE_EXPORT int fakeCudaLiveEvents(void) { return int(state().events.size()); }
FAKE_EXPORT int fakeCudaLiveModules(void) {
  return int(state().modules.size());
}
FAKE_EXPORT int fakeCudaLiveHostRegistrations(void) {
  return int(state().hostRegistrations.size());
}
FAKE_EXPORT int fakeCudaRetainedContexts(void) { return state().retained; }
FAKE_EXPORT int fakeCudaContextDepth(void) { return contextDepth; }
