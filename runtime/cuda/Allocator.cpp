//===- Allocator.cpp - Stream-ordered caching allocator for mgpuMemAlloc --===//
//
// Device memory that the lowered code allocates and frees on every call
// (gpu.alloc / gpu.dealloc of its intermediates) is kept in pools instead of
// going back to the driver:
//
//   - a request is rounded up to its size class (at least 512 bytes, then
//     four classes per power of two: at most 25% over the request) and is
//     served by a free block of exactly that class;
//   - mgpuMemFree(ptr, stream) returns the block to the pool of its device,
//     tagged with `stream`, without a driver call. Work queued on `stream`
//     before the free may still use it: a later request on the same stream
//     is queued behind that work (stream order), so it may reuse the block
//     at once;
//   - a request on another stream takes a block tagged with a different
//     stream only after cuCtxSynchronize, which finishes the work of every
//     stream: the blocks freed before that synchronization then carry no
//     stream and serve any stream;
//   - memory really goes back to the driver (cuMemFree) only after the
//     context is synchronized: moeRuntimeEmptyCache, an out-of-memory retry,
//     a free with caching off, or a pointer the pools do not know.
//
// Managed (host_shared) allocations are never cached. MOE_CUDA_ALLOC_CACHE=0
// (or moeRuntimeSetAllocatorCaching(0)) turns caching off.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Internal.h"
#include "runtime/cuda/MgpuAbi.h"

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

using namespace moe::cudart;

namespace {

struct FreeBlock {
  CUdeviceptr ptr = 0;
  CUstream stream = nullptr; // the stream it was freed on
  bool anyStream = false;    // freed before a context synchronization
  uint64_t freedAt = 0;      // Allocator::frees when it was freed
};

struct LiveBlock {
  int device = 0;
  size_t size = 0;   // the size class (or the exact size when not cached)
  bool cached = true; // goes back to a pool when freed
};

using PoolKey = std::pair<int, size_t>; // device, size class

struct Allocator {
  std::mutex mutex;
  std::atomic<bool> caching{true};
  std::map<PoolKey, std::vector<FreeBlock>> pools;
  std::unordered_map<CUdeviceptr, LiveBlock> live;
  std::unordered_set<CUdeviceptr> managed;
  uint64_t frees = 0; // free-block serial numbers
  MoeRuntimeAllocatorStats stats{};

  Allocator() {
    const char *env = std::getenv("MOE_CUDA_ALLOC_CACHE");
    caching = !(env && env[0] == '0' && env[1] == 0);
  }

  void noteReserved(size_t bytes) {
    stats.bytesReserved += bytes;
    if (stats.bytesReserved > stats.peakBytesReserved)
      stats.peakBytesReserved = stats.bytesReserved;
  }

  /// Takes a block of `key` usable on `stream` (called with the lock held).
  CUdeviceptr take(const PoolKey &key, CUstream stream) {
    auto it = pools.find(key);
    if (it == pools.end())
      return 0;
    std::vector<FreeBlock> &blocks = it->second;
    // Newest first: the most recently freed block is the likeliest to be
    // in L2, and on the same stream it is always safe.
    for (size_t i = blocks.size(); i-- > 0;) {
      if (!blocks[i].anyStream && blocks[i].stream != stream)
        continue;
      CUdeviceptr ptr = blocks[i].ptr;
      blocks.erase(blocks.begin() + i);
      if (blocks.empty())
        pools.erase(it);
      live[ptr] = LiveBlock{key.first, key.second, true};
      stats.cacheHits++;
      stats.bytesCached -= key.second;
      stats.blocksCached--;
      stats.bytesInUse += key.second;
      return ptr;
    }
    return 0;
  }

  bool hasBlocks(const PoolKey &key) { return pools.count(key) != 0; }

  bool hasBlocksOn(int device) {
    auto it = pools.lower_bound(PoolKey(device, 0));
    return it != pools.end() && it->first.first == device;
  }

  /// Marks the blocks of `device` freed at or before `limit` as usable on
  /// any stream (their work is finished).
  void markFinished(int device, uint64_t limit) {
    for (auto it = pools.lower_bound(PoolKey(device, 0));
         it != pools.end() && it->first.first == device; ++it)
      for (FreeBlock &b : it->second)
        if (b.freedAt <= limit)
          b.anyStream = true;
  }
};

Allocator &allocator() {
  static Allocator *a = new Allocator;
  return *a;
}

} // namespace

namespace moe {
namespace cudart {

size_t allocatorSizeClass(size_t bytes) {
  constexpr size_t kMin = 512;
  if (bytes <= kMin)
    return kMin;
  // Four classes per power of two: the step is a quarter of the power of
  // two below the request (and never under 512 bytes).
  unsigned log2 = 63 - unsigned(__builtin_clzll((unsigned long long)(bytes - 1)));
  size_t step = log2 >= 11 ? size_t(1) << (log2 - 2) : kMin;
  size_t rounded;
  if (__builtin_add_overflow(bytes, step - 1, &rounded))
    return 0;
  return rounded / step * step;
}

CUdeviceptr allocatorTryReuse(int device, size_t bytes, CUstream stream) {
  Allocator &a = allocator();
  if (!a.caching.load(std::memory_order_relaxed))
    return 0;
  size_t size = allocatorSizeClass(bytes);
  if (size == 0)
    return 0;
  std::lock_guard<std::mutex> lock(a.mutex);
  CUdeviceptr ptr = a.take(PoolKey(device, size), stream);
  if (ptr)
    a.stats.requests++;
  return ptr;
}

CUdeviceptr allocatorAllocate(const DriverFunctions &d, int device,
                              size_t bytes, CUstream stream,
                              DriverError *error) {
  Allocator &a = allocator();
  const bool caching = a.caching.load(std::memory_order_relaxed);
  size_t size = caching ? allocatorSizeClass(bytes) : bytes;
  if (size == 0) {
    *error = DriverError{"cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY};
    return 0;
  }
  const PoolKey key(device, size);
  if (caching) {
    uint64_t limit;
    {
      std::lock_guard<std::mutex> lock(a.mutex);
      a.stats.requests++;
      if (CUdeviceptr ptr = a.take(key, stream))
        return ptr;
      limit = a.frees;
      if (!a.hasBlocks(key))
        limit = 0; // nothing to wait for
    }
    if (limit) {
      // Blocks of this class were freed on other streams: once the context
      // is synchronized, their work is done and any stream may use them.
      CUresult r = d.CtxSynchronize();
      if (r != CUDA_SUCCESS) {
        *error = DriverError{"cuCtxSynchronize", r};
        return 0;
      }
      std::lock_guard<std::mutex> lock(a.mutex);
      a.stats.crossStreamSynchronizations++;
      a.markFinished(device, limit);
      if (CUdeviceptr ptr = a.take(key, stream))
        return ptr;
    }
  }
  CUdeviceptr ptr = 0;
  CUresult r = d.MemAlloc(&ptr, size);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    bool cached;
    {
      std::lock_guard<std::mutex> lock(a.mutex);
      cached = a.hasBlocksOn(device);
    }
    if (cached) {
      // Give the cache back to the driver and try once more.
      DriverError ignored;
      allocatorEmptyDevice(d, device, &ignored);
      r = d.MemAlloc(&ptr, size);
    }
  }
  if (r != CUDA_SUCCESS) {
    *error = DriverError{"cuMemAlloc", r};
    return 0;
  }
  std::lock_guard<std::mutex> lock(a.mutex);
  if (!caching)
    a.stats.requests++;
  a.stats.driverAllocations++;
  a.noteReserved(size);
  a.stats.bytesInUse += size;
  a.live[ptr] = LiveBlock{device, size, caching};
  return ptr;
}

bool allocatorTryRecycle(CUdeviceptr ptr, CUstream stream) {
  Allocator &a = allocator();
  std::lock_guard<std::mutex> lock(a.mutex);
  auto it = a.live.find(ptr);
  if (it == a.live.end() || !it->second.cached ||
      !a.caching.load(std::memory_order_relaxed))
    return false;
  LiveBlock block = it->second;
  a.live.erase(it);
  FreeBlock f;
  f.ptr = ptr;
  f.stream = stream;
  f.freedAt = ++a.frees;
  a.pools[PoolKey(block.device, block.size)].push_back(f);
  a.stats.bytesInUse -= block.size;
  a.stats.bytesCached += block.size;
  a.stats.blocksCached++;
  return true;
}

bool allocatorRelease(const DriverFunctions &d, CUdeviceptr ptr,
                      DriverError *error) {
  // Queued work may still use the memory: finish it first. A failed
  // synchronization (an earlier kernel fault) is reported, and the memory
  // is freed all the same.
  CUresult sync = d.CtxSynchronize();
  CUresult r = d.MemFree(ptr);
  Allocator &a = allocator();
  {
    std::lock_guard<std::mutex> lock(a.mutex);
    auto it = a.live.find(ptr);
    if (it != a.live.end()) {
      if (r == CUDA_SUCCESS) {
        a.stats.bytesInUse -= it->second.size;
        a.stats.bytesReserved -= it->second.size;
      }
      a.live.erase(it);
    }
    a.managed.erase(ptr);
    if (r == CUDA_SUCCESS)
      a.stats.driverFrees++;
  }
  if (sync != CUDA_SUCCESS) {
    *error = DriverError{"cuCtxSynchronize", sync};
    return false;
  }
  if (r != CUDA_SUCCESS) {
    *error = DriverError{"cuMemFree", r};
    return false;
  }
  return true;
}

void allocatorNoteManaged(CUdeviceptr ptr) {
  Allocator &a = allocator();
  std::lock_guard<std::mutex> lock(a.mutex);
  a.managed.insert(ptr);
  a.stats.managedAllocations++;
}

bool allocatorForgetStream(const DriverFunctions &d, int device,
                           CUstream stream, DriverError *error) {
  Allocator &a = allocator();
  uint64_t limit;
  {
    std::lock_guard<std::mutex> lock(a.mutex);
    limit = a.frees;
  }
  CUresult r = d.StreamSynchronize(stream);
  if (r != CUDA_SUCCESS) {
    *error = DriverError{"cuStreamSynchronize", r};
    return false;
  }
  std::lock_guard<std::mutex> lock(a.mutex);
  for (auto it = a.pools.lower_bound(PoolKey(device, 0));
       it != a.pools.end() && it->first.first == device; ++it)
    for (FreeBlock &b : it->second)
      if (b.stream == stream && b.freedAt <= limit)
        b.anyStream = true;
  return true;
}

bool allocatorEmptyDevice(const DriverFunctions &d, int device,
                          DriverError *error) {
  Allocator &a = allocator();
  uint64_t limit;
  {
    std::lock_guard<std::mutex> lock(a.mutex);
    if (!a.hasBlocksOn(device))
      return true;
    limit = a.frees;
  }
  CUresult r = d.CtxSynchronize();
  if (r != CUDA_SUCCESS) {
    // Work may still be queued: keep the blocks (freeing them could hand
    // their memory to someone else while a kernel still writes it).
    *error = DriverError{"cuCtxSynchronize", r};
    return false;
  }
  // The blocks freed before the synchronization: their work is done.
  std::vector<std::pair<CUdeviceptr, size_t>> released;
  {
    std::lock_guard<std::mutex> lock(a.mutex);
    for (auto it = a.pools.lower_bound(PoolKey(device, 0));
         it != a.pools.end() && it->first.first == device;) {
      std::vector<FreeBlock> &blocks = it->second;
      for (size_t i = 0; i < blocks.size();) {
        if (blocks[i].freedAt <= limit) {
          released.emplace_back(blocks[i].ptr, it->first.second);
          blocks.erase(blocks.begin() + i);
        } else {
          ++i;
        }
      }
      it = blocks.empty() ? a.pools.erase(it) : std::next(it);
    }
    for (auto &b : released) {
      a.stats.bytesCached -= b.second;
      a.stats.blocksCached--;
    }
  }
  bool ok = true;
  for (auto &b : released) {
    CUresult f = d.MemFree(b.first);
    std::lock_guard<std::mutex> lock(a.mutex);
    if (f == CUDA_SUCCESS) {
      a.stats.driverFrees++;
      a.stats.bytesReserved -= b.second;
    } else if (ok) {
      *error = DriverError{"cuMemFree", f};
      ok = false;
    }
  }
  return ok;
}

std::vector<int> allocatorDevicesWithCache() {
  Allocator &a = allocator();
  std::lock_guard<std::mutex> lock(a.mutex);
  std::vector<int> devices;
  for (auto &p : a.pools)
    if (devices.empty() || devices.back() != p.first.first)
      devices.push_back(p.first.first);
  return devices;
}

void resetAllocator() {
  Allocator &a = allocator();
  std::lock_guard<std::mutex> lock(a.mutex);
  a.pools.clear();
  a.live.clear();
  a.managed.clear();
  a.frees = 0;
  a.stats = MoeRuntimeAllocatorStats{};
  const char *env = std::getenv("MOE_CUDA_ALLOC_CACHE");
  a.caching = !(env && env[0] == '0' && env[1] == 0);
}

} // namespace cudart
} // namespace moe

extern "C" {

void moeRuntimeGetAllocatorStats(MoeRuntimeAllocatorStats *stats) {
  if (!stats)
    return;
  Allocator &a = allocator();
  std::lock_guard<std::mutex> lock(a.mutex);
  *stats = a.stats;
}

int moeRuntimeSetAllocatorCaching(int enabled) {
  return allocator().caching.exchange(enabled != 0) ? 1 : 0;
}

} // extern "C"
