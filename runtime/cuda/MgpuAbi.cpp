//===- MgpuAbi.cpp - The mgpu* host ABI over the CUDA driver --------------===//
//
// Implements MgpuAbi.h. Semantics follow upstream MLIR's
// CudaRuntimeWrappers.cpp (primary context per call, non-blocking streams,
// timing-free events, cuMemAllocManaged for host_shared, cluster launches
// through cuLaunchKernelEx, TMA descriptors copied to device memory), with
// errors kept in the sticky error state instead of being printed per call.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/MgpuAbi.h"
#include "runtime/cuda/Internal.h"

#include <array>
#include <algorithm>
#include <climits>
#include <map>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

using namespace moe::cudart;

namespace {

const char kElfMagic[4] = {0x7f, 'E', 'L', 'F'};

//===----------------------------------------------------------------------===//
// Kernel registry: names for messages, dynamic shared memory opt-ins.
//===----------------------------------------------------------------------===//

struct FunctionInfo {
  std::string name;
  int dynamicSmemOptIn = 0; // bytes granted with cuFuncSetAttribute
};

struct Registry {
  std::mutex mutex;
  std::unordered_map<CUfunction, FunctionInfo> functions;
  std::unordered_map<CUmodule, std::vector<CUfunction>> modules;
  /// The function cache: (module, kernel name) -> the handle
  /// cuModuleGetFunction returned, until the module is unloaded.
  std::unordered_map<CUmodule, std::unordered_map<std::string, CUfunction>>
      lookups;
};

Registry &registry() {
  static Registry *r = new Registry;
  return *r;
}

void registerFunction(CUmodule module, CUfunction function, const char *name) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto inserted = r.functions.emplace(function, FunctionInfo());
  if (inserted.second) {
    inserted.first->second.name = name;
    r.modules[module].push_back(function);
  }
  r.lookups[module][name] = function;
}

/// The cached handle of `name` in `module`, or null.
CUfunction cachedFunction(CUmodule module, const char *name) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto m = r.lookups.find(module);
  if (m == r.lookups.end())
    return nullptr;
  auto f = m->second.find(name);
  return f == m->second.end() ? nullptr : f->second;
}

void forgetModule(CUmodule module) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.lookups.erase(module);
  auto it = r.modules.find(module);
  if (it == r.modules.end())
    return;
  for (CUfunction f : it->second)
    r.functions.erase(f);
  r.modules.erase(it);
}

std::string kernelName(CUfunction function) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.functions.find(function);
  return it == r.functions.end() ? std::string("?") : it->second.name;
}

int dynamicSmemOptIn(CUfunction function) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.functions.find(function);
  return it == r.functions.end() ? 0 : it->second.dynamicSmemOptIn;
}

void setDynamicSmemOptIn(CUfunction function, int bytes) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.functions.find(function);
  if (it != r.functions.end())
    it->second.dynamicSmemOptIn = bytes;
}

//===----------------------------------------------------------------------===//
// Pools: streams and events handed back by the lowered code, the TMA
// descriptors it encodes, and the calling thread's own stream.
//===----------------------------------------------------------------------===//

/// The most streams / events kept per device for reuse.
constexpr size_t kMaxPooledStreams = 16;
constexpr size_t kMaxPooledEvents = 64;

void *&threadStream() {
  static thread_local void *stream = nullptr;
  return stream;
}

using TensorMapBytes = std::array<uint64_t, 16>;

struct Pools {
  std::mutex mutex;
  /// Streams and events the runtime created and has not destroyed, with
  /// their device; the free ones per device.
  std::unordered_map<CUstream, int> streams;
  std::unordered_map<CUevent, int> events;
  std::map<int, std::vector<CUstream>> freeStreams;
  std::map<int, std::vector<CUevent>> freeEvents;
  std::map<std::pair<int, TensorMapBytes>, CUdeviceptr> tensorMaps;

  CUstream popStream(int device) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = freeStreams.find(device);
    if (it == freeStreams.end() || it->second.empty())
      return nullptr;
    CUstream s = it->second.back();
    it->second.pop_back();
    return s;
  }
  void noteStream(CUstream s, int device) {
    std::lock_guard<std::mutex> lock(mutex);
    streams[s] = device;
  }
  /// True when `s` is one of ours and went back to its pool.
  bool pushStream(CUstream s) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = streams.find(s);
    if (it == streams.end())
      return false;
    std::vector<CUstream> &free = freeStreams[it->second];
    if (free.size() >= kMaxPooledStreams) {
      streams.erase(it); // the caller destroys it
      return false;
    }
    free.push_back(s);
    return true;
  }

  CUevent popEvent(int device) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = freeEvents.find(device);
    if (it == freeEvents.end() || it->second.empty())
      return nullptr;
    CUevent e = it->second.back();
    it->second.pop_back();
    return e;
  }
  void noteEvent(CUevent e, int device) {
    std::lock_guard<std::mutex> lock(mutex);
    events[e] = device;
  }
  bool pushEvent(CUevent e) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = events.find(e);
    if (it == events.end())
      return false;
    std::vector<CUevent> &free = freeEvents[it->second];
    if (free.size() >= kMaxPooledEvents) {
      events.erase(it);
      return false;
    }
    free.push_back(e);
    return true;
  }

  static TensorMapBytes bytes(const CUtensorMap &map) {
    TensorMapBytes b;
    std::memcpy(b.data(), map.opaque, sizeof(b));
    return b;
  }
  CUdeviceptr findTensorMap(int device, const CUtensorMap &map) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = tensorMaps.find({device, bytes(map)});
    return it == tensorMaps.end() ? 0 : it->second;
  }
  void addTensorMap(int device, const CUtensorMap &map, CUdeviceptr ptr) {
    std::lock_guard<std::mutex> lock(mutex);
    tensorMaps[{device, bytes(map)}] = ptr;
  }
};

Pools &pools() {
  static Pools *p = new Pools;
  return *p;
}

//===----------------------------------------------------------------------===//
// One ABI call: the sticky-error gate, the driver and the current context.
//===----------------------------------------------------------------------===//

class Call {
public:
  enum Kind {
    Work,    // a no-op while an error is pending
    Release, // releases a handle even while an error is pending
  };

  explicit Call(Kind kind) : kind(kind) {
    if (kind == Work && errorPending())
      return;
    Failure why;
    scope.emplace(&why);
    if (!scope->ok()) {
      scope.reset();
      recordError(why);
    }
  }

  bool ok() const { return scope.has_value(); }
  const DriverFunctions &d() const { return scope->d(); }
  CUdevice device() const { return scope->device(); }

  /// Records a failed driver call; `detail` is appended to the message.
  /// Releases ignore CUDA_ERROR_DEINITIALIZED (process exit).
  bool check(CUresult r, const char *call, const std::string &detail = "") {
    if (r == CUDA_SUCCESS)
      return true;
    if (kind == Release && r == CUDA_ERROR_DEINITIALIZED)
      return false;
    Failure f = callFailed(d(), call, r);
    f.message += detail;
    recordError(f);
    return false;
  }

private:
  Kind kind;
  std::optional<DeviceScope> scope;
};

/// Records a usage error (null handle, bad size) unless one is pending.
void usageError(const std::string &message) {
  if (!errorPending())
    recordError(Failure{"moe-runtime: " + message, kNonDriverError});
}

CUdeviceptr devPtr(const void *p) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

//===----------------------------------------------------------------------===//
// Module images.
//===----------------------------------------------------------------------===//

template <typename T> T readAt(const unsigned char *p, size_t offset) {
  T value;
  std::memcpy(&value, p + offset, sizeof(T));
  return value;
}

/// Checks that the driver will not read past `size` bytes of `data`, and
/// says which kind of image it is. PTX text without a NUL inside `size` is
/// copied to `*text` with one.
bool checkImage(const void *data, size_t size, std::string *text,
                std::string *error) {
  const auto *p = static_cast<const unsigned char *>(data);
  if (size >= 4 && std::memcmp(p, kElfMagic, 4) == 0) {
    // ELF64 little-endian cubin: section and program header tables in range.
    if (size < 64 || p[4] != 2 || p[5] != 1) {
      *error = "not a 64-bit little-endian ELF cubin";
      return false;
    }
    uint64_t phoff = readAt<uint64_t>(p, 32), shoff = readAt<uint64_t>(p, 40);
    uint16_t phentsize = readAt<uint16_t>(p, 54),
             phnum = readAt<uint16_t>(p, 56);
    uint16_t shentsize = readAt<uint16_t>(p, 58),
             shnum = readAt<uint16_t>(p, 60);
    auto inRange = [&](uint64_t off, uint64_t n) {
      return off <= size && n <= size - off;
    };
    if (!inRange(phoff, uint64_t(phentsize) * phnum) ||
        !inRange(shoff, uint64_t(shentsize) * shnum)) {
      *error = "truncated ELF cubin (" + std::to_string(size) + " bytes)";
      return false;
    }
    return true;
  }
  if (size >= 16 && readAt<uint32_t>(p, 0) == 0xBA55ED50u) {
    // Fatbin: {u32 magic, u16 version, u16 header size, u64 payload size}.
    uint64_t header = readAt<uint16_t>(p, 6), payload = readAt<uint64_t>(p, 8);
    if (header > size || payload > size - header) {
      *error = "truncated fatbin (" + std::to_string(size) + " bytes)";
      return false;
    }
    return true;
  }
  // Anything else goes to the driver as PTX text, which it reads up to a NUL.
  if (!std::memchr(p, 0, size))
    text->assign(reinterpret_cast<const char *>(p), size);
  return true;
}

//===----------------------------------------------------------------------===//
// Launch helpers.
//===----------------------------------------------------------------------===//

std::string dims(intptr_t x, intptr_t y, intptr_t z) {
  return std::to_string(x) + "x" + std::to_string(y) + "x" + std::to_string(z);
}

bool fitsUnsigned(intptr_t v) {
  return v >= 0 && static_cast<uint64_t>(v) <= UINT_MAX;
}

/// Validates a launch; *empty is set for a grid with a zero extent.
bool checkLaunch(const char *api, CUfunction function, intptr_t gx, intptr_t gy,
                 intptr_t gz, intptr_t bx, intptr_t by, intptr_t bz,
                 int32_t smem, bool *empty) {
  *empty = false;
  if (!function) {
    usageError(std::string(api) + ": null kernel function");
    return false;
  }
  if (!fitsUnsigned(gx) || !fitsUnsigned(gy) || !fitsUnsigned(gz)) {
    usageError(std::string(api) + ": invalid grid " + dims(gx, gy, gz) +
               " for kernel '" + kernelName(function) + "'");
    return false;
  }
  if (!fitsUnsigned(bx) || !fitsUnsigned(by) || !fitsUnsigned(bz) || bx == 0 ||
      by == 0 || bz == 0) {
    usageError(std::string(api) + ": invalid block " + dims(bx, by, bz) +
               " for kernel '" + kernelName(function) + "'");
    return false;
  }
  if (smem < 0) {
    usageError(std::string(api) + ": negative dynamic shared memory size " +
               std::to_string(smem) + " for kernel '" + kernelName(function) +
               "'");
    return false;
  }
  *empty = gx == 0 || gy == 0 || gz == 0;
  return true;
}

/// Grants `smem` bytes of dynamic shared memory to `function` when more than
/// it was granted so far (the default limit is 48 KiB minus static use).
bool optInSharedMemory(Call &call, CUfunction function, int32_t smem) {
  if (smem <= dynamicSmemOptIn(function))
    return true;
  CUresult r = call.d().FuncSetAttribute(
      function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem);
  if (r != CUDA_SUCCESS) {
    int limit = 0;
    std::string detail = " for kernel '" + kernelName(function) + "' (" +
                         std::to_string(smem) +
                         " bytes of dynamic shared memory";
    if (call.d().DeviceGetAttribute(
            &limit, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            call.device()) == CUDA_SUCCESS)
      detail += "; the device allows " + std::to_string(limit) + " per block";
    detail += ")";
    call.check(r, "cuFuncSetAttribute", detail);
    return false;
  }
  setDynamicSmemOptIn(function, smem);
  return true;
}

std::string launchDetail(CUfunction function, intptr_t gx, intptr_t gy,
                         intptr_t gz, intptr_t bx, intptr_t by, intptr_t bz,
                         int32_t smem) {
  return " launching kernel '" + kernelName(function) + "' (grid " +
         dims(gx, gy, gz) + ", block " + dims(bx, by, bz) + ", " +
         std::to_string(smem) + " bytes of dynamic shared memory)";
}

/// The dense byte size of a ranked memref descriptor
/// {ptr, ptr, i64 offset, i64 sizes[rank], i64 strides[rank]} and its first
/// element's address.
bool memrefExtent(const char *api, int64_t rank, void *descriptor,
                  int64_t elementSize, char **data, uint64_t *bytes) {
  if (!descriptor || rank < 0 || elementSize <= 0) {
    usageError(std::string(api) + ": invalid memref (rank " +
               std::to_string(rank) + ", element size " +
               std::to_string(elementSize) + ")");
    return false;
  }
  struct Header {
    void *allocated;
    char *aligned;
    int64_t offset;
  };
  Header h;
  std::memcpy(&h, descriptor, sizeof(h));
  const int64_t *sizes = reinterpret_cast<const int64_t *>(
      static_cast<char *>(descriptor) + sizeof(Header));
  const int64_t *strides = sizes + rank;
  uint64_t elements = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    if (sizes[i] < 0 || (sizes[i] > 1 && strides[i] != int64_t(elements))) {
      usageError(std::string(api) + ": the memref is not densely packed");
      return false;
    }
    if (__builtin_mul_overflow(elements, uint64_t(sizes[i]), &elements)) {
      usageError(std::string(api) + ": memref size overflows");
      return false;
    }
  }
  *data = h.aligned + h.offset * elementSize;
  *bytes = elements * uint64_t(elementSize);
  return true;
}

} // namespace

bool moe::cudart::releasePooledHandles(const DriverFunctions &d, int device,
                                       DriverError *error) {
  Pools &p = pools();
  std::vector<CUstream> streams;
  std::vector<CUevent> events;
  std::vector<CUdeviceptr> maps;
  {
    std::lock_guard<std::mutex> lock(p.mutex);
    streams.swap(p.freeStreams[device]);
    events.swap(p.freeEvents[device]);
    for (CUstream s : streams)
      p.streams.erase(s);
    for (CUevent e : events)
      p.events.erase(e);
    for (auto it = p.tensorMaps.begin(); it != p.tensorMaps.end();) {
      if (it->first.first == device) {
        maps.push_back(it->second);
        it = p.tensorMaps.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (streams.empty() && events.empty() && maps.empty())
    return true;
  bool ok = true;
  auto note = [&](CUresult r, const char *call) {
    if (r != CUDA_SUCCESS && ok) {
      *error = DriverError{call, r};
      ok = false;
    }
  };
  // Kernels may still read a descriptor, and a pooled stream or event may
  // still have work: finish everything first.
  note(d.CtxSynchronize(), "cuCtxSynchronize");
  for (CUstream s : streams)
    note(d.StreamDestroy(s), "cuStreamDestroy");
  for (CUevent e : events)
    note(d.EventDestroy(e), "cuEventDestroy");
  if (ok)
    for (CUdeviceptr m : maps)
      note(d.MemFree(m), "cuMemFree");
  return ok;
}

std::vector<int> moe::cudart::devicesWithPooledHandles() {
  Pools &p = pools();
  std::lock_guard<std::mutex> lock(p.mutex);
  std::vector<int> devices;
  auto add = [&](int d) {
    if (std::find(devices.begin(), devices.end(), d) == devices.end())
      devices.push_back(d);
  };
  for (auto &f : p.freeStreams)
    if (!f.second.empty())
      add(f.first);
  for (auto &f : p.freeEvents)
    if (!f.second.empty())
      add(f.first);
  for (auto &m : p.tensorMaps)
    add(m.first.first);
  return devices;
}

void moe::cudart::resetPools() {
  Pools &p = pools();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.streams.clear();
  p.events.clear();
  p.freeStreams.clear();
  p.freeEvents.clear();
  p.tensorMaps.clear();
  threadStream() = nullptr;
}

void moe::cudart::resetFunctionRegistry() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.functions.clear();
  r.modules.clear();
  r.lookups.clear();
}

extern "C" {

//===----------------------------------------------------------------------===//
// Modules
//===----------------------------------------------------------------------===//

void *mgpuModuleLoad(void *data, size_t size) {
  Call call(Call::Work);
  if (!call.ok())
    return nullptr;
  if (!data || size == 0) {
    usageError("mgpuModuleLoad: empty module image");
    return nullptr;
  }
  std::string text, error;
  if (!checkImage(data, size, &text, &error)) {
    usageError("mgpuModuleLoad: " + error);
    return nullptr;
  }
  CUmodule module = nullptr;
  CUresult r =
      call.d().ModuleLoadData(&module, text.empty() ? data : text.c_str());
  if (!call.check(r, "cuModuleLoadData"))
    return nullptr;
  return module;
}

void *mgpuModuleLoadJIT(void *data, int32_t optLevel) {
  Call call(Call::Work);
  if (!call.ok())
    return nullptr;
  if (!data) {
    usageError("mgpuModuleLoadJIT: null PTX image");
    return nullptr;
  }
  // PTX JIT: O0..O4; MLIR passes its own -O level.
  intptr_t level = optLevel < 0 ? 0 : optLevel > 4 ? 4 : optLevel;
  char log[8192] = {0};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_OPTIMIZATION_LEVEL};
  void *values[] = {log, reinterpret_cast<void *>(uintptr_t(sizeof(log) - 1)),
                    reinterpret_cast<void *>(level)};
  CUmodule module = nullptr;
  CUresult r = call.d().ModuleLoadDataEx(&module, data, 3, options, values);
  if (r != CUDA_SUCCESS) {
    log[sizeof(log) - 1] = 0;
    std::string detail;
    if (log[0]) {
      detail = std::string(": ") + log;
      while (!detail.empty() && (detail.back() == '\n' || detail.back() == ' '))
        detail.pop_back();
    }
    call.check(r, "cuModuleLoadDataEx", detail);
    return nullptr;
  }
  return module;
}

void mgpuModuleUnload(void *module) {
  if (!module)
    return;
  CUmodule m = static_cast<CUmodule>(module);
  forgetModule(m);
  Call call(Call::Release);
  if (!call.ok())
    return;
  call.check(call.d().ModuleUnload(m), "cuModuleUnload");
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  // The lowered code looks its kernel up before every launch: after the
  // first time, that is a table lookup without a driver call.
  if (errorPending())
    return nullptr;
  if (module && name)
    if (CUfunction cached = cachedFunction(static_cast<CUmodule>(module), name))
      return cached;
  Call call(Call::Work);
  if (!call.ok())
    return nullptr;
  if (!module || !name) {
    usageError(std::string("mgpuModuleGetFunction: null ") +
               (module ? "kernel name" : "module") + " for kernel '" +
               (name ? name : "?") + "'");
    return nullptr;
  }
  CUfunction function = nullptr;
  CUmodule m = static_cast<CUmodule>(module);
  if (!call.check(call.d().ModuleGetFunction(&function, m, name),
                  "cuModuleGetFunction",
                  std::string(" for kernel '") + name + "'"))
    return nullptr;
  registerFunction(m, function, name);
  return function;
}

//===----------------------------------------------------------------------===//
// Launches
//===----------------------------------------------------------------------===//

void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, void *stream,
                      void **params, void **extra, size_t paramsCount) {
  Call call(Call::Work);
  if (!call.ok())
    return;
  CUfunction f = static_cast<CUfunction>(function);
  bool empty = false;
  if (!checkLaunch("mgpuLaunchKernel", f, gridX, gridY, gridZ, blockX, blockY,
                   blockZ, smem, &empty) ||
      empty)
    return;
  if (paramsCount > 0 && !params && !extra) {
    usageError("mgpuLaunchKernel: kernel '" + kernelName(f) + "' takes " +
               std::to_string(paramsCount) + " parameters but none were given");
    return;
  }
  if (smem > 0 && !optInSharedMemory(call, f, smem))
    return;
  CUresult r = call.d().LaunchKernel(
      f, unsigned(gridX), unsigned(gridY), unsigned(gridZ), unsigned(blockX),
      unsigned(blockY), unsigned(blockZ), unsigned(smem),
      static_cast<CUstream>(stream), params, extra);
  call.check(
      r, "cuLaunchKernel",
      launchDetail(f, gridX, gridY, gridZ, blockX, blockY, blockZ, smem));
}

void mgpuLaunchClusterKernel(void *function, intptr_t clusterX,
                             intptr_t clusterY, intptr_t clusterZ,
                             intptr_t gridX, intptr_t gridY, intptr_t gridZ,
                             intptr_t blockX, intptr_t blockY, intptr_t blockZ,
                             int32_t smem, void *stream, void **params,
                             void **extra) {
  Call call(Call::Work);
  if (!call.ok())
    return;
  CUfunction f = static_cast<CUfunction>(function);
  bool empty = false;
  if (!checkLaunch("mgpuLaunchClusterKernel", f, gridX, gridY, gridZ, blockX,
                   blockY, blockZ, smem, &empty) ||
      empty)
    return;
  if (!fitsUnsigned(clusterX) || !fitsUnsigned(clusterY) ||
      !fitsUnsigned(clusterZ) || clusterX == 0 || clusterY == 0 ||
      clusterZ == 0) {
    usageError("mgpuLaunchClusterKernel: invalid cluster " +
               dims(clusterX, clusterY, clusterZ) + " for kernel '" +
               kernelName(f) + "'");
    return;
  }
  if (!call.d().LaunchKernelEx) {
    usageError("mgpuLaunchClusterKernel: the CUDA driver lacks "
               "cuLaunchKernelEx (cluster launches need CUDA 12.0 or newer)");
    return;
  }
  if (smem > 0 && !optInSharedMemory(call, f, smem))
    return;
  CUlaunchAttribute attrs[2];
  std::memset(attrs, 0, sizeof(attrs));
  attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attrs[0].value.clusterDim.x = unsigned(clusterX);
  attrs[0].value.clusterDim.y = unsigned(clusterY);
  attrs[0].value.clusterDim.z = unsigned(clusterZ);
  attrs[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
  attrs[1].value.clusterSchedulingPolicyPreference =
      CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
  CUlaunchConfig config;
  std::memset(&config, 0, sizeof(config));
  config.gridDimX = unsigned(gridX);
  config.gridDimY = unsigned(gridY);
  config.gridDimZ = unsigned(gridZ);
  config.blockDimX = unsigned(blockX);
  config.blockDimY = unsigned(blockY);
  config.blockDimZ = unsigned(blockZ);
  config.sharedMemBytes = unsigned(smem);
  config.hStream = static_cast<CUstream>(stream);
  config.attrs = attrs;
  config.numAttrs = 2;
  CUresult r = call.d().LaunchKernelEx(&config, f, params, extra);
  call.check(
      r, "cuLaunchKernelEx",
      launchDetail(f, gridX, gridY, gridZ, blockX, blockY, blockZ, smem) +
          " with cluster " + dims(clusterX, clusterY, clusterZ));
}

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

void *mgpuStreamCreate(void) {
  if (errorPending())
    return nullptr;
  if (void *mine = threadStream())
    return mine;
  if (CUstream pooled = pools().popStream(defaultDevice()))
    return pooled;
  Call call(Call::Work);
  if (!call.ok())
    return nullptr;
  CUstream stream = nullptr;
  if (!call.check(call.d().StreamCreate(&stream, CU_STREAM_NON_BLOCKING),
                  "cuStreamCreate"))
    return nullptr;
  pools().noteStream(stream, defaultDevice());
  return stream;
}

void mgpuStreamDestroy(void *stream) {
  if (!stream || stream == threadStream())
    return;
  CUstream s = static_cast<CUstream>(stream);
  if (pools().pushStream(s))
    return;
  Call call(Call::Release);
  if (!call.ok())
    return;
  // Blocks freed on this stream must not be reused by a later stream that
  // gets the same handle: finish its work and untag them first.
  DriverError error;
  if (!allocatorForgetStream(call.d(), defaultDevice(), s, &error))
    call.check(error.result, error.call);
  call.check(call.d().StreamDestroy(s), "cuStreamDestroy");
}

void mgpuStreamSynchronize(void *stream) {
  // A null stream is CUDA's default stream: valid.
  Call call(Call::Work);
  if (!call.ok())
    return;
  call.check(call.d().StreamSynchronize(static_cast<CUstream>(stream)),
             "cuStreamSynchronize");
}

void mgpuStreamWaitEvent(void *stream, void *event) {
  Call call(Call::Work);
  if (!call.ok())
    return;
  if (!event) {
    usageError("mgpuStreamWaitEvent: null event");
    return;
  }
  call.check(call.d().StreamWaitEvent(static_cast<CUstream>(stream),
                                      static_cast<CUevent>(event), 0),
             "cuStreamWaitEvent");
}

void *mgpuEventCreate(void) {
  if (errorPending())
    return nullptr;
  if (CUevent pooled = pools().popEvent(defaultDevice()))
    return pooled;
  Call call(Call::Work);
  if (!call.ok())
    return nullptr;
  CUevent event = nullptr;
  if (!call.check(call.d().EventCreate(&event, CU_EVENT_DISABLE_TIMING),
                  "cuEventCreate"))
    return nullptr;
  pools().noteEvent(event, defaultDevice());
  return event;
}

void mgpuEventDestroy(void *event) {
  if (!event)
    return;
  CUevent e = static_cast<CUevent>(event);
  if (pools().pushEvent(e))
    return;
  Call call(Call::Release);
  if (!call.ok())
    return;
  call.check(call.d().EventDestroy(e), "cuEventDestroy");
}

void mgpuEventSynchronize(void *event) {
  Call call(Call::Work);
  if (!call.ok())
    return;
  if (!event) {
    usageError("mgpuEventSynchronize: null event");
    return;
  }
  call.check(call.d().EventSynchronize(static_cast<CUevent>(event)),
             "cuEventSynchronize");
}

void mgpuEventRecord(void *event, void *stream) {
  Call call(Call::Work);
  if (!call.ok())
    return;
  if (!event) {
    usageError("mgpuEventRecord: null event");
    return;
  }
  call.check(call.d().EventRecord(static_cast<CUevent>(event),
                                  static_cast<CUstream>(stream)),
             "cuEventRecord");
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

void *mgpuMemAlloc(uint64_t sizeBytes, void *stream, int8_t isHostShared) {
  if (sizeBytes == 0)
    return nullptr; // nothing to allocate: not an error, even without driver
  if (errorPending())
    return nullptr;
  CUstream s = static_cast<CUstream>(stream);
  if (!isHostShared)
    if (CUdeviceptr reused =
            allocatorTryReuse(defaultDevice(), size_t(sizeBytes), s))
      return reinterpret_cast<void *>(uintptr_t(reused));
  Call call(Call::Work);
  if (!call.ok())
    return nullptr;
  CUdeviceptr ptr = 0;
  std::string detail = " (" + std::to_string(sizeBytes) + " bytes)";
  if (isHostShared) {
    if (!call.check(call.d().MemAllocManaged(&ptr, size_t(sizeBytes),
                                             CU_MEM_ATTACH_GLOBAL),
                    "cuMemAllocManaged", detail))
      return nullptr;
    allocatorNoteManaged(ptr);
    return reinterpret_cast<void *>(uintptr_t(ptr));
  }
  DriverError error;
  ptr = allocatorAllocate(call.d(), defaultDevice(), size_t(sizeBytes), s,
                          &error);
  if (!ptr) {
    call.check(error.result, error.call, detail);
    return nullptr;
  }
  return reinterpret_cast<void *>(uintptr_t(ptr));
}

void mgpuMemFree(void *ptr, void *stream) {
  if (!ptr)
    return;
  if (allocatorTryRecycle(devPtr(ptr), static_cast<CUstream>(stream)))
    return;
  Call call(Call::Release);
  if (!call.ok())
    return;
  DriverError error;
  if (!allocatorRelease(call.d(), devPtr(ptr), &error))
    call.check(error.result, error.call);
}

void mgpuMemcpy(void *dst, void *src, size_t sizeBytes, void *stream) {
  if (sizeBytes == 0)
    return;
  Call call(Call::Work);
  if (!call.ok())
    return;
  if (!dst || !src) {
    usageError("mgpuMemcpy: null " +
               std::string(dst ? "source" : "destination") + " (" +
               std::to_string(sizeBytes) + " bytes)");
    return;
  }
  call.check(call.d().MemcpyAsync(devPtr(dst), devPtr(src), sizeBytes,
                                  static_cast<CUstream>(stream)),
             "cuMemcpyAsync", " (" + std::to_string(sizeBytes) + " bytes)");
}

void mgpuMemset32(void *dst, uint32_t value, size_t count, void *stream) {
  if (count == 0)
    return;
  Call call(Call::Work);
  if (!call.ok())
    return;
  if (!dst) {
    usageError("mgpuMemset32: null destination");
    return;
  }
  call.check(call.d().MemsetD32Async(devPtr(dst), value, count,
                                     static_cast<CUstream>(stream)),
             "cuMemsetD32Async");
}

void mgpuMemset16(void *dst, uint16_t value, size_t count, void *stream) {
  if (count == 0)
    return;
  Call call(Call::Work);
  if (!call.ok())
    return;
  if (!dst) {
    usageError("mgpuMemset16: null destination");
    return;
  }
  call.check(call.d().MemsetD16Async(devPtr(dst), value, count,
                                     static_cast<CUstream>(stream)),
             "cuMemsetD16Async");
}

void mgpuMemHostRegister(void *ptr, uint64_t sizeBytes) {
  if (sizeBytes == 0)
    return;
  Call call(Call::Work);
  if (!call.ok())
    return;
  if (!ptr) {
    usageError("mgpuMemHostRegister: null pointer");
    return;
  }
  call.check(call.d().MemHostRegister(ptr, size_t(sizeBytes), 0),
             "cuMemHostRegister", " (" + std::to_string(sizeBytes) + " bytes)");
}

void mgpuMemHostUnregister(void *ptr) {
  if (!ptr)
    return;
  Call call(Call::Release);
  if (!call.ok())
    return;
  call.check(call.d().MemHostUnregister(ptr), "cuMemHostUnregister");
}

void mgpuMemHostRegisterMemRef(int64_t rank, void *descriptor,
                               int64_t elementSizeBytes) {
  if (errorPending())
    return;
  char *data = nullptr;
  uint64_t bytes = 0;
  if (!memrefExtent("mgpuMemHostRegisterMemRef", rank, descriptor,
                    elementSizeBytes, &data, &bytes))
    return;
  mgpuMemHostRegister(data, bytes);
}

void mgpuMemHostUnregisterMemRef(int64_t rank, void *descriptor,
                                 int64_t elementSizeBytes) {
  char *data = nullptr;
  uint64_t bytes = 0;
  if (!memrefExtent("mgpuMemHostUnregisterMemRef", rank, descriptor,
                    elementSizeBytes, &data, &bytes))
    return;
  if (bytes > 0)
    mgpuMemHostUnregister(data);
}

//===----------------------------------------------------------------------===//
// Devices and TMA
//===----------------------------------------------------------------------===//

void mgpuSetDefaultDevice(int32_t device) { defaultDevice() = device; }

void *mgpuTensorMapEncodeTiledMemref(int64_t rank, void *descriptor,
                                     int64_t dataType, int64_t interleave,
                                     int64_t swizzle, int64_t l2Promotion,
                                     int64_t oobFill, int64_t *boxDims) {
  Call call(Call::Work);
  if (!call.ok())
    return nullptr;
  // Bytes per element of CUtensorMapDataType 0..12 (UINT8 .. TFLOAT32_FTZ).
  static const int elementSize[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
  const char *api = "mgpuTensorMapEncodeTiledMemref";
  if (rank < 1 || rank > 5 || !descriptor || !boxDims) {
    usageError(std::string(api) + ": invalid arguments (rank " +
               std::to_string(rank) + ")");
    return nullptr;
  }
  if (dataType < 0 || dataType > CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ) {
    usageError(std::string(api) + ": unsupported tensor map data type " +
               std::to_string(dataType));
    return nullptr;
  }
  if (!call.d().TensorMapEncodeTiled) {
    usageError(std::string(api) +
               ": the CUDA driver lacks cuTensorMapEncodeTiled (TMA "
               "descriptors need CUDA 12.0 or newer)");
    return nullptr;
  }
  struct Header {
    void *allocated;
    char *aligned;
    int64_t offset;
  };
  Header h;
  std::memcpy(&h, descriptor, sizeof(h));
  const int64_t *sizes = reinterpret_cast<const int64_t *>(
      static_cast<char *>(descriptor) + sizeof(Header));
  const int64_t *strides = sizes + rank;
  int esize = elementSize[dataType];
  // The driver's dimension 0 is the innermost (last memref) dimension.
  cuuint64_t globalDim[5] = {1, 1, 1, 1, 1}, globalStrides[5] = {0};
  cuuint32_t boxDim[5] = {1, 1, 1, 1, 1}, elementStrides[5] = {1, 1, 1, 1, 1};
  for (int64_t i = 0; i < rank; ++i) {
    globalDim[i] = cuuint64_t(sizes[rank - 1 - i]);
    boxDim[i] = cuuint32_t(boxDims[rank - 1 - i]);
  }
  for (int64_t i = 0; i + 1 < rank; ++i)
    globalStrides[i] = cuuint64_t(strides[rank - 2 - i] * esize);
  void *address = h.aligned + h.offset * esize;

  CUtensorMap map;
  std::memset(&map, 0, sizeof(map));
  CUresult r = call.d().TensorMapEncodeTiled(
      &map, CUtensorMapDataType(dataType), cuuint32_t(rank), address, globalDim,
      globalStrides, boxDim, elementStrides, CUtensorMapInterleave(interleave),
      CUtensorMapSwizzle(swizzle), CUtensorMapL2promotion(l2Promotion),
      CUtensorMapFloatOOBfill(oobFill));
  if (!call.check(r, "cuTensorMapEncodeTiled"))
    return nullptr;
  // The lowered code encodes its descriptors before every launch and never
  // frees them: one device copy per distinct descriptor, kept until
  // moeRuntimeEmptyCache.
  if (CUdeviceptr cached = pools().findTensorMap(defaultDevice(), map))
    return reinterpret_cast<void *>(uintptr_t(cached));
  CUdeviceptr device = 0;
  if (!call.check(call.d().MemAlloc(&device, sizeof(map)), "cuMemAlloc",
                  " (TMA descriptor)"))
    return nullptr;
  if (!call.check(call.d().MemcpyHtoD(device, &map, sizeof(map)),
                  "cuMemcpyHtoD", " (TMA descriptor)")) {
    call.d().MemFree(device);
    return nullptr;
  }
  pools().addTensorMap(defaultDevice(), map, device);
  return reinterpret_cast<void *>(uintptr_t(device));
}

//===----------------------------------------------------------------------===//
// Streams and device memory (moe extension)
//===----------------------------------------------------------------------===//

void *moeRuntimeSetStream(void *stream) {
  void *previous = threadStream();
  threadStream() = stream;
  return previous;
}

void *moeRuntimeGetStream(void) { return threadStream(); }

void moeRuntimeSyncUnlessThreadStream(void *stream) {
  if (stream && stream == threadStream())
    return;
  mgpuStreamSynchronize(stream);
}

void moeRuntimeForgetStream(void *stream) {
  Call call(Call::Release);
  if (!call.ok())
    return;
  DriverError error;
  if (!allocatorForgetStream(call.d(), defaultDevice(),
                             static_cast<CUstream>(stream), &error))
    call.check(error.result, error.call);
}

void moeRuntimeEmptyCache(void) {
  std::vector<int> devices = allocatorDevicesWithCache();
  for (int d : devicesWithPooledHandles())
    if (std::find(devices.begin(), devices.end(), d) == devices.end())
      devices.push_back(d);
  for (int device : devices) {
    Failure why;
    DeviceScope scope(&why, device);
    if (!scope.ok()) {
      recordError(why);
      continue;
    }
    DriverError error;
    if (!allocatorEmptyDevice(scope.d(), device, &error) ||
        !releasePooledHandles(scope.d(), device, &error))
      recordError(callFailed(scope.d(), error.call, error.result));
  }
}

} // extern "C"
