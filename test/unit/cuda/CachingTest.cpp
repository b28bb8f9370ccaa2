//===- CachingTest.cpp - Caches and pools of the runtime, over the fake ---===//
//
// What the runtime keeps between calls so that a warm call makes no
// allocation, lookup or stream creation: the function cache, the stream and
// event pools, the thread's stream override, the stream-ordered caching
// allocator behind mgpuMemAlloc/mgpuMemFree, the TMA descriptor cache, and
// moeRuntimeEmptyCache. Checked through the fake driver's call counts and
// its trace (call order: every real free comes after a synchronization).
//
//===----------------------------------------------------------------------===//

#include "FakeCuda.h"
#include "runtime/cuda/CudaRuntime.h"
#include "runtime/cuda/MgpuAbi.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string lastError() {
  const char *e = moeRuntimeGetLastError();
  return e ? e : "";
}

MoeRuntimeAllocatorStats stats() {
  MoeRuntimeAllocatorStats s;
  moeRuntimeGetAllocatorStats(&s);
  return s;
}

class Caching : public ::testing::Test {
protected:
  void SetUp() override {
    fakeCudaReset();
    setenv("MOE_CUDA_DRIVER", FAKE_CUDA_PATH, 1);
    unsetenv("MOE_CUDA_ALLOC_CACHE");
    moeRuntimeResetForTesting();
    moeRuntimeSetErrorPrinting(0);
  }
  void TearDown() override {
    EXPECT_EQ(fakeCudaContextDepth(), 0);
    fakeCudaSetTrace(nullptr);
    if (!tracePath.empty())
      std::remove(tracePath.c_str());
    moeRuntimeResetForTesting();
    moeRuntimeSetErrorPrinting(1);
    unsetenv("MOE_CUDA_DRIVER");
    fakeCudaReset();
  }
  /// Starts tracing the fake's calls into a fresh file.
  void startTrace() {
    char name[] = "/tmp/moe-caching-trace-XXXXXX";
    int fd = mkstemp(name);
    ASSERT_GE(fd, 0);
    close(fd);
    tracePath = name;
    fakeCudaSetTrace(name);
  }
  /// The traced calls so far (symbols only).
  std::vector<std::string> traced() {
    std::ifstream in(tracePath);
    std::vector<std::string> lines;
    std::string line;
    while (std::getline(in, line))
      lines.push_back(line.substr(0, line.find(' ')));
    return lines;
  }
  std::string tracePath;
};

//===----------------------------------------------------------------------===//
// Function cache
//===----------------------------------------------------------------------===//

TEST_F(Caching, FunctionLookupsAreCachedUntilUnload) {
  void *module = mgpuModuleLoadJIT(const_cast<char *>(kFakeCudaPtx), 3);
  ASSERT_NE(module, nullptr) << lastError();
  void *f = mgpuModuleGetFunction(module, "fake_fill_f32");
  ASSERT_NE(f, nullptr);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(mgpuModuleGetFunction(module, "fake_fill_f32"), f);
  EXPECT_EQ(fakeCudaCalls("cuModuleGetFunction"), 1);
  void *g = mgpuModuleGetFunction(module, "fake_fault");
  EXPECT_NE(g, f);
  EXPECT_EQ(fakeCudaCalls("cuModuleGetFunction"), 2);
  // A failed lookup is not cached: it fails (and asks the driver) each time.
  EXPECT_EQ(mgpuModuleGetFunction(module, "missing_kernel"), nullptr);
  EXPECT_EQ(lastError(), "moe-runtime: cuModuleGetFunction failed: "
                         "CUDA_ERROR_NOT_FOUND (named symbol not found) for "
                         "kernel 'missing_kernel'");
  moeRuntimeClearError();
  EXPECT_EQ(mgpuModuleGetFunction(module, "missing_kernel"), nullptr);
  EXPECT_EQ(fakeCudaCalls("cuModuleGetFunction"), 4);
  moeRuntimeClearError();
  // Unloading forgets the module's entries: a new module asks again.
  mgpuModuleUnload(module);
  void *again = mgpuModuleLoadJIT(const_cast<char *>(kFakeCudaPtx), 3);
  ASSERT_NE(again, nullptr);
  EXPECT_NE(mgpuModuleGetFunction(again, "fake_fill_f32"), nullptr);
  EXPECT_EQ(fakeCudaCalls("cuModuleGetFunction"), 5);
  mgpuModuleUnload(again);
  // While an error is pending a cached lookup is a no-op too.
  void *third = mgpuModuleLoadJIT(const_cast<char *>(kFakeCudaPtx), 3);
  ASSERT_NE(mgpuModuleGetFunction(third, "fake_fill_f32"), nullptr);
  mgpuModuleGetFunction(third, "missing_kernel");
  EXPECT_EQ(mgpuModuleGetFunction(third, "fake_fill_f32"), nullptr);
  moeRuntimeClearError();
  mgpuModuleUnload(third);
}

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

TEST_F(Caching, StreamsAndEventsArePooled) {
  void *a = mgpuStreamCreate();
  void *e = mgpuEventCreate();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(e, nullptr);
  mgpuEventDestroy(e);
  mgpuStreamDestroy(a);
  EXPECT_EQ(fakeCudaCalls("cuStreamDestroy_v2"), 0);
  EXPECT_EQ(fakeCudaCalls("cuEventDestroy_v2"), 0);
  for (int i = 0; i < 3; ++i) {
    void *s = mgpuStreamCreate();
    void *ev = mgpuEventCreate();
    EXPECT_EQ(s, a);
    EXPECT_EQ(ev, e);
    mgpuEventRecord(ev, s);
    mgpuStreamWaitEvent(s, ev);
    mgpuEventDestroy(ev);
    mgpuStreamSynchronize(s);
    mgpuStreamDestroy(s);
  }
  EXPECT_EQ(fakeCudaCalls("cuStreamCreate"), 1);
  EXPECT_EQ(fakeCudaCalls("cuEventCreate"), 1);
  EXPECT_EQ(fakeCudaLiveStreams(), 1);
  EXPECT_EQ(fakeCudaLiveEvents(), 1);
  moeRuntimeEmptyCache();
  EXPECT_EQ(fakeCudaLiveStreams(), 0);
  EXPECT_EQ(fakeCudaLiveEvents(), 0);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr) << lastError();
}

TEST_F(Caching, AtMostSixteenStreamsArePooled) {
  std::vector<void *> streams;
  for (int i = 0; i < 20; ++i)
    streams.push_back(mgpuStreamCreate());
  for (void *s : streams)
    mgpuStreamDestroy(s);
  EXPECT_EQ(fakeCudaCalls("cuStreamCreate"), 20);
  EXPECT_EQ(fakeCudaCalls("cuStreamDestroy_v2"), 4);
  EXPECT_EQ(fakeCudaLiveStreams(), 16);
  moeRuntimeEmptyCache();
  EXPECT_EQ(fakeCudaLiveStreams(), 0);
}

TEST_F(Caching, ThreadStreamOverride) {
  void *mine = mgpuStreamCreate();
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(moeRuntimeGetStream(), nullptr);
  EXPECT_EQ(moeRuntimeSetStream(mine), nullptr);
  EXPECT_EQ(moeRuntimeGetStream(), mine);
  // The lowered code's streams are the caller's, and it never destroys it.
  for (int i = 0; i < 3; ++i) {
    void *s = mgpuStreamCreate();
    EXPECT_EQ(s, mine);
    mgpuStreamSynchronize(s);
    mgpuStreamDestroy(s);
  }
  EXPECT_EQ(fakeCudaCalls("cuStreamCreate"), 1);
  EXPECT_EQ(fakeCudaCalls("cuStreamDestroy_v2"), 0);
  // Other threads are not affected.
  void *other = nullptr;
  std::thread([&] {
    other = mgpuStreamCreate();
    mgpuStreamDestroy(other);
  }).join();
  EXPECT_NE(other, mine);
  EXPECT_EQ(moeRuntimeSetStream(nullptr), mine);
  EXPECT_NE(mgpuStreamCreate(), mine); // the pool's (other's) stream again
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr) << lastError();
}

//===----------------------------------------------------------------------===//
// The caching allocator
//===----------------------------------------------------------------------===//

TEST_F(Caching, SizeClasses) {
  struct Case {
    size_t request, size;
  } cases[] = {
      {1, 512},          {512, 512},       {513, 1024},
      {1000, 1024},      {2049, 2560},     {4097, 5120},
      {5000, 5120},      {1 << 20, 1 << 20}, {(1 << 20) + 1, 5 << 18},
      {3 << 20, 3 << 20}, {(7 << 20) + 3, 8 << 20},
  };
  void *s = mgpuStreamCreate();
  uint64_t reserved = 0;
  for (const Case &c : cases) {
    void *p = mgpuMemAlloc(c.request, s, 0);
    ASSERT_NE(p, nullptr) << c.request;
    reserved += c.size;
    EXPECT_EQ(stats().bytesReserved, reserved) << c.request;
  }
  EXPECT_EQ(stats().bytesInUse, reserved);
  EXPECT_EQ(stats().driverAllocations, sizeof(cases) / sizeof(cases[0]));
}

TEST_F(Caching, ReuseOnTheSameStreamWithoutDriverCalls) {
  void *s = mgpuStreamCreate();
  void *a = mgpuMemAlloc(4096, s, 0);
  ASSERT_NE(a, nullptr);
  mgpuMemFree(a, s);
  EXPECT_EQ(fakeCudaCalls("cuMemFree_v2"), 0);
  EXPECT_EQ(fakeCudaLiveAllocations(), 1);
  MoeRuntimeAllocatorStats st = stats();
  EXPECT_EQ(st.bytesCached, 4096u);
  EXPECT_EQ(st.blocksCached, 1u);
  EXPECT_EQ(st.bytesInUse, 0u);
  // Same size class (3585..4096 bytes): the same block, in stream order.
  int synchronizations = fakeCudaCalls("cuCtxSynchronize");
  for (size_t bytes : {4096, 4000, 3585}) {
    void *b = mgpuMemAlloc(bytes, s, 0);
    EXPECT_EQ(b, a) << bytes;
    mgpuMemFree(b, s);
  }
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), synchronizations);
  // Another class is another block.
  void *c = mgpuMemAlloc(3584, s, 0);
  EXPECT_NE(c, a);
  st = stats();
  EXPECT_EQ(st.requests, 5u);
  EXPECT_EQ(st.cacheHits, 3u);
  EXPECT_EQ(st.driverAllocations, 2u);
  EXPECT_EQ(fakeCudaCalls("cuMemAlloc_v2"), 2);
  EXPECT_EQ(fakeCudaCalls("cuMemFree_v2"), 0);
  // Two live blocks of one class are two blocks.
  mgpuMemFree(c, s);
  void *d1 = mgpuMemAlloc(4096, s, 0);
  void *d2 = mgpuMemAlloc(4096, s, 0);
  EXPECT_NE(d1, d2);
  EXPECT_EQ(fakeCudaCalls("cuMemAlloc_v2"), 3);
}

TEST_F(Caching, ReuseOnAnotherStreamSynchronizesFirst) {
  startTrace();
  void *s1 = mgpuStreamCreate();
  void *s2 = mgpuStreamCreate();
  void *a = mgpuMemAlloc(1 << 16, s1, 0);
  mgpuMemFree(a, s1);
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), 0);
  // s2's work is not ordered after s1's: the block is reused only after
  // the context is synchronized.
  void *b = mgpuMemAlloc(1 << 16, s2, 0);
  EXPECT_EQ(b, a);
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), 1);
  EXPECT_EQ(fakeCudaCalls("cuMemAlloc_v2"), 1);
  EXPECT_EQ(stats().crossStreamSynchronizations, 1u);
  // Freed on s2 now: s2 reuses it at once, s1 after another synchronization.
  mgpuMemFree(b, s2);
  EXPECT_EQ(mgpuMemAlloc(1 << 16, s2, 0), a);
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), 1);
  mgpuMemFree(a, s2);
  EXPECT_EQ(mgpuMemAlloc(1 << 16, s1, 0), a);
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), 2);
  // One synchronization finishes the work of every block freed before it:
  // both blocks freed on s1 then serve s2, the second without waiting.
  void *c = mgpuMemAlloc(1 << 16, s1, 0);
  EXPECT_NE(c, a);
  mgpuMemFree(a, s1);
  mgpuMemFree(c, s1);
  EXPECT_EQ(mgpuMemAlloc(1 << 16, s2, 0), c); // the newest first
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), 3);
  EXPECT_EQ(mgpuMemAlloc(1 << 16, s2, 0), a);
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), 3);
  EXPECT_EQ(fakeCudaCalls("cuMemAlloc_v2"), 2);
  // Nothing cached: the driver, no synchronization.
  EXPECT_NE(mgpuMemAlloc(1 << 16, s1, 0), nullptr);
  EXPECT_EQ(fakeCudaCalls("cuMemAlloc_v2"), 3);
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), 3);
  std::vector<std::string> lines = traced();
  // Every synchronization precedes the allocation it guards: no cuMemFree.
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "cuMemFree_v2"), 0);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr) << lastError();
}

TEST_F(Caching, ForgetStreamLetsOtherStreamsReuseWithoutContextSync) {
  void *mine = mgpuStreamCreate();
  moeRuntimeSetStream(mine);
  void *s = mgpuStreamCreate();
  ASSERT_EQ(s, mine);
  void *a = mgpuMemAlloc(8192, s, 0);
  mgpuMemFree(a, s);
  moeRuntimeSetStream(nullptr);
  moeRuntimeForgetStream(mine);
  EXPECT_EQ(fakeCudaCalls("cuStreamSynchronize"), 1);
  void *other = mgpuStreamCreate();
  ASSERT_NE(other, mine);
  EXPECT_EQ(mgpuMemAlloc(8192, other, 0), a);
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), 0);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr) << lastError();
}

TEST_F(Caching, EmptyCacheSynchronizesThenFrees) {
  startTrace();
  void *s = mgpuStreamCreate();
  void *kept = mgpuMemAlloc(100, s, 0);
  void *a = mgpuMemAlloc(1 << 20, s, 0);
  void *b = mgpuMemAlloc(3 << 20, s, 0);
  mgpuMemFree(a, s);
  mgpuMemFree(b, s);
  mgpuStreamDestroy(s);
  EXPECT_EQ(fakeCudaLiveAllocations(), 3);
  moeRuntimeEmptyCache();
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr) << lastError();
  // Only the block still in use stays; the pooled stream is gone too.
  EXPECT_EQ(fakeCudaLiveAllocations(), 1);
  EXPECT_EQ(fakeCudaLiveStreams(), 0);
  MoeRuntimeAllocatorStats st = stats();
  EXPECT_EQ(st.driverFrees, 2u);
  EXPECT_EQ(st.bytesCached, 0u);
  EXPECT_EQ(st.blocksCached, 0u);
  EXPECT_EQ(st.bytesReserved, 512u);
  EXPECT_EQ(st.bytesInUse, 512u);
  EXPECT_EQ(st.peakBytesReserved, 512u + (1 << 20) + (3 << 20));
  std::vector<std::string> lines = traced();
  auto sync = std::find(lines.begin(), lines.end(), "cuCtxSynchronize");
  auto firstFree = std::find(lines.begin(), lines.end(), "cuMemFree_v2");
  ASSERT_NE(firstFree, lines.end());
  EXPECT_LT(sync, firstFree);
  // The one in use is freed (after a synchronization) when it comes back.
  void *s2 = mgpuStreamCreate();
  mgpuMemFree(kept, s2);
  moeRuntimeEmptyCache();
  EXPECT_EQ(fakeCudaLiveAllocations(), 0);
  EXPECT_EQ(stats().bytesReserved, 0u);
  // Nothing left: emptying again makes no driver call.
  int before = fakeCudaCalls("cuCtxSynchronize");
  moeRuntimeEmptyCache();
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), before);
}

TEST_F(Caching, EmptyCacheKeepsBlocksWhenTheSynchronizationFails) {
  void *module = mgpuModuleLoadJIT(const_cast<char *>(kFakeCudaPtx), 3);
  void *fault = mgpuModuleGetFunction(module, "fake_fault");
  void *s = mgpuStreamCreate();
  void *a = mgpuMemAlloc(4096, s, 0);
  mgpuLaunchKernel(fault, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr, 0);
  mgpuMemFree(a, s);
  moeRuntimeEmptyCache();
  EXPECT_EQ(lastError(), "moe-runtime: cuCtxSynchronize failed: "
                         "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access "
                         "was encountered)");
  // Queued work may still write the block: it is not handed back.
  EXPECT_EQ(fakeCudaCalls("cuMemFree_v2"), 0);
  EXPECT_EQ(stats().blocksCached, 1u);
  mgpuModuleUnload(module);
}

TEST_F(Caching, CrossStreamReuseFailsCleanlyWhenTheSynchronizationFails) {
  void *module = mgpuModuleLoadJIT(const_cast<char *>(kFakeCudaPtx), 3);
  void *fault = mgpuModuleGetFunction(module, "fake_fault");
  void *s1 = mgpuStreamCreate();
  void *s2 = mgpuStreamCreate();
  void *a = mgpuMemAlloc(4096, s1, 0);
  mgpuLaunchKernel(fault, 1, 1, 1, 32, 1, 1, 0, s1, nullptr, nullptr, 0);
  mgpuMemFree(a, s1);
  EXPECT_EQ(mgpuMemAlloc(4096, s2, 0), nullptr);
  EXPECT_EQ(lastError(), "moe-runtime: cuCtxSynchronize failed: "
                         "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access "
                         "was encountered) (4096 bytes)");
  EXPECT_EQ(fakeCudaCalls("cuMemAlloc_v2"), 1);
  mgpuModuleUnload(module);
}

TEST_F(Caching, OutOfMemoryReleasesTheCacheAndRetries) {
  startTrace();
  fakeCudaSetMemoryLimit(3 << 20);
  void *s = mgpuStreamCreate();
  void *a = mgpuMemAlloc(2 << 20, s, 0);
  ASSERT_NE(a, nullptr);
  mgpuMemFree(a, s);
  // 2 MiB cached + 2.5 MiB do not fit in 3 MiB: the cache goes back to the
  // driver (after a synchronization) and the allocation is retried.
  void *b = mgpuMemAlloc(5 << 19, s, 0);
  ASSERT_NE(b, nullptr) << lastError();
  EXPECT_EQ(fakeCudaCalls("cuMemAlloc_v2"), 3);
  EXPECT_EQ(fakeCudaCalls("cuMemFree_v2"), 1);
  EXPECT_EQ(stats().bytesReserved, uint64_t(5 << 19));
  std::vector<std::string> lines = traced();
  auto sync = std::find(lines.begin(), lines.end(), "cuCtxSynchronize");
  auto free = std::find(lines.begin(), lines.end(), "cuMemFree_v2");
  EXPECT_LT(sync, free);
  // Still too big with nothing cached: one error with the request's size.
  EXPECT_EQ(mgpuMemAlloc(1 << 20, s, 0), nullptr);
  EXPECT_EQ(lastError(), "moe-runtime: cuMemAlloc failed: "
                         "CUDA_ERROR_OUT_OF_MEMORY (out of memory) "
                         "(1048576 bytes)");
}

TEST_F(Caching, HostSharedIsNeverCached) {
  startTrace();
  void *s = mgpuStreamCreate();
  void *m = mgpuMemAlloc(4096, s, 1);
  ASSERT_NE(m, nullptr);
  mgpuMemFree(m, s);
  EXPECT_EQ(fakeCudaCalls("cuMemFree_v2"), 1);
  EXPECT_EQ(fakeCudaLiveAllocations(), 0);
  void *again = mgpuMemAlloc(4096, s, 1);
  EXPECT_EQ(fakeCudaCalls("cuMemAllocManaged"), 2);
  mgpuMemFree(again, s);
  MoeRuntimeAllocatorStats st = stats();
  EXPECT_EQ(st.managedAllocations, 2u);
  EXPECT_EQ(st.requests, 0u);
  EXPECT_EQ(st.bytesCached, 0u);
  // Each real free waits for the queued work first.
  std::vector<std::string> lines = traced();
  std::vector<std::string> syncAndFree;
  for (const std::string &l : lines)
    if (l == "cuCtxSynchronize" || l == "cuMemFree_v2")
      syncAndFree.push_back(l);
  EXPECT_EQ(syncAndFree,
            (std::vector<std::string>{"cuCtxSynchronize", "cuMemFree_v2",
                                      "cuCtxSynchronize", "cuMemFree_v2"}));
}

TEST_F(Caching, ForeignPointersAreFreedAfterSynchronizing) {
  std::string why;
  void *p = moeCudaMalloc(1000, &why);
  ASSERT_NE(p, nullptr) << why;
  mgpuMemFree(p, nullptr);
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), 1);
  EXPECT_EQ(fakeCudaCalls("cuMemFree_v2"), 1);
  EXPECT_EQ(fakeCudaLiveAllocations(), 0);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr) << lastError();
}

TEST_F(Caching, ToolFreesSynchronizeFirst) {
  startTrace();
  std::string why;
  void *p = moeCudaMalloc(4096, &why);
  ASSERT_NE(p, nullptr) << why;
  EXPECT_TRUE(moeCudaFree(p, &why)) << why;
  std::vector<std::string> lines = traced();
  auto sync = std::find(lines.begin(), lines.end(), "cuCtxSynchronize");
  auto free = std::find(lines.begin(), lines.end(), "cuMemFree_v2");
  ASSERT_NE(free, lines.end());
  EXPECT_LT(sync, free);
  // A kernel fault: reported, and the memory is still given back.
  void *module = mgpuModuleLoadJIT(const_cast<char *>(kFakeCudaPtx), 3);
  void *fault = mgpuModuleGetFunction(module, "fake_fault");
  void *q = moeCudaMalloc(4096, &why);
  mgpuLaunchKernel(fault, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr, 0);
  EXPECT_FALSE(moeCudaFree(q, &why));
  EXPECT_EQ(why, "moe-runtime: cuCtxSynchronize failed: "
                 "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was "
                 "encountered)");
  EXPECT_EQ(fakeCudaLiveAllocations(), 0);
  mgpuModuleUnload(module);
}

TEST_F(Caching, CachingOff) {
  EXPECT_EQ(moeRuntimeSetAllocatorCaching(0), 1);
  void *s = mgpuStreamCreate();
  for (int i = 0; i < 3; ++i) {
    void *p = mgpuMemAlloc(1000, s, 0);
    ASSERT_NE(p, nullptr);
    mgpuMemFree(p, s);
  }
  EXPECT_EQ(fakeCudaCalls("cuMemAlloc_v2"), 3);
  EXPECT_EQ(fakeCudaCalls("cuMemFree_v2"), 3);
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), 3);
  EXPECT_EQ(stats().bytesReserved, 0u);
  EXPECT_EQ(stats().peakBytesReserved, 1000u); // exact sizes
  EXPECT_EQ(moeRuntimeSetAllocatorCaching(1), 0);
}

TEST_F(Caching, CachingOffFromTheEnvironment) {
  setenv("MOE_CUDA_ALLOC_CACHE", "0", 1);
  moeRuntimeResetForTesting();
  moeRuntimeSetErrorPrinting(0);
  void *p = mgpuMemAlloc(1000, nullptr, 0);
  mgpuMemFree(p, nullptr);
  EXPECT_EQ(fakeCudaCalls("cuMemFree_v2"), 1);
  unsetenv("MOE_CUDA_ALLOC_CACHE");
}

TEST_F(Caching, FreeWhileAnErrorIsPendingStillRecycles) {
  void *s = mgpuStreamCreate();
  void *a = mgpuMemAlloc(4096, s, 0);
  fakeCudaSetResult("cuMemsetD32Async", 700);
  mgpuMemset32(a, 0, 16, s);
  ASSERT_NE(moeRuntimeGetLastError(), nullptr);
  mgpuMemFree(a, s);
  mgpuStreamDestroy(s);
  EXPECT_EQ(mgpuMemAlloc(4096, s, 0), nullptr); // work is a no-op
  EXPECT_EQ(stats().blocksCached, 1u);
  // Releasing the caches is a release: it goes through.
  moeRuntimeEmptyCache();
  EXPECT_EQ(fakeCudaLiveAllocations(), 0);
  EXPECT_EQ(fakeCudaLiveStreams(), 0);
}

//===----------------------------------------------------------------------===//
// A warm call of lowered code
//===----------------------------------------------------------------------===//

/// What gpu-to-llvm host code does on each call: a stream, scratch buffers
/// of a few sizes, a kernel lookup per launch, an event to join, frees on the
/// stream, a synchronization, the stream destroyed.
void lowered_call(void *module, const float *in, float *out) {
  void *s = mgpuStreamCreate();
  void *x = mgpuMemAlloc(64 * 4, s, 0);
  void *tmp = mgpuMemAlloc(3000, s, 0);
  void *y = mgpuMemAlloc(64 * 4, s, 0);
  mgpuMemcpy(x, const_cast<float *>(in), 64 * 4, s);
  int64_t n = 64;
  float value = 1.5f;
  for (void *target : {tmp, y}) {
    void *f = mgpuModuleGetFunction(module, "fake_fill_f32");
    void *params[] = {&target, &n, &value};
    mgpuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, s, params, nullptr, 3);
  }
  void *e = mgpuEventCreate();
  mgpuEventRecord(e, s);
  mgpuStreamWaitEvent(s, e);
  mgpuEventDestroy(e);
  mgpuMemcpy(out, y, 64 * 4, s);
  for (void *p : {x, tmp, y})
    mgpuMemFree(p, s);
  mgpuStreamSynchronize(s);
  mgpuStreamDestroy(s);
}

TEST_F(Caching, WarmCallsOnlyLaunchAndCopy) {
  void *module = mgpuModuleLoadJIT(const_cast<char *>(kFakeCudaPtx), 3);
  std::vector<float> in(64, 1.0f), out(64, 0.0f);
  lowered_call(module, in.data(), out.data());
  const char *once[] = {"cuMemAlloc_v2", "cuMemFree_v2", "cuModuleGetFunction",
                        "cuStreamCreate", "cuStreamDestroy_v2",
                        "cuEventCreate", "cuEventDestroy_v2",
                        "cuCtxSynchronize"};
  std::vector<int> first;
  for (const char *symbol : once)
    first.push_back(fakeCudaCalls(symbol));
  int launches = fakeCudaLaunchCount();
  EXPECT_EQ(launches, 2);
  for (int call = 0; call < 3; ++call) {
    std::fill(out.begin(), out.end(), 0.0f);
    lowered_call(module, in.data(), out.data());
    EXPECT_EQ(out[63], 1.5f);
  }
  for (size_t i = 0; i < first.size(); ++i)
    EXPECT_EQ(fakeCudaCalls(once[i]), first[i]) << once[i];
  EXPECT_EQ(fakeCudaLaunchCount(), 4 * launches);
  EXPECT_EQ(fakeCudaCopyCount("HtoD"), 4);
  MoeRuntimeAllocatorStats st = stats();
  EXPECT_EQ(st.driverAllocations, 3u);
  EXPECT_EQ(st.cacheHits, 9u);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr) << lastError();
  mgpuModuleUnload(module);
}

//===----------------------------------------------------------------------===//
// TMA descriptors
//===----------------------------------------------------------------------===//

struct MemRef2D {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[2];
  int64_t strides[2];
};

TEST_F(Caching, TensorMapDescriptorsAreUploadedOncePerContent) {
  std::vector<uint16_t> data(64 * 128);
  MemRef2D m{data.data(), data.data(), 0, {64, 128}, {128, 1}};
  int64_t box[2] = {32, 64};
  void *d1 = mgpuTensorMapEncodeTiledMemref(2, &m, 6, 0, 3, 2, 0, box);
  ASSERT_NE(d1, nullptr) << lastError();
  void *d2 = mgpuTensorMapEncodeTiledMemref(2, &m, 6, 0, 3, 2, 0, box);
  EXPECT_EQ(d2, d1);
  EXPECT_EQ(fakeCudaCalls("cuMemAlloc_v2"), 1);
  EXPECT_EQ(fakeCudaCalls("cuMemcpyHtoD_v2"), 1);
  EXPECT_EQ(fakeCudaCalls("cuTensorMapEncodeTiled"), 2);
  // Another box is another descriptor.
  int64_t otherBox[2] = {64, 64};
  void *d3 = mgpuTensorMapEncodeTiledMemref(2, &m, 6, 0, 3, 2, 0, otherBox);
  ASSERT_NE(d3, nullptr);
  EXPECT_NE(d3, d1);
  EXPECT_EQ(fakeCudaCalls("cuMemAlloc_v2"), 2);
  moeRuntimeEmptyCache();
  EXPECT_EQ(fakeCudaLiveAllocations(), 0);
  EXPECT_NE(mgpuTensorMapEncodeTiledMemref(2, &m, 6, 0, 3, 2, 0, box), nullptr);
  EXPECT_EQ(fakeCudaCalls("cuMemAlloc_v2"), 3);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr) << lastError();
}

//===----------------------------------------------------------------------===//
// The fake's trace
//===----------------------------------------------------------------------===//

TEST_F(Caching, TraceNamesCallsCopiesAndLaunches) {
  startTrace();
  void *module = mgpuModuleLoadJIT(const_cast<char *>(kFakeCudaPtx), 3);
  void *f = mgpuModuleGetFunction(module, "fake_fill_f32");
  void *s = mgpuStreamCreate();
  float host[8] = {0};
  void *d = mgpuMemAlloc(sizeof(host), s, 0);
  mgpuMemcpy(d, host, sizeof(host), s);
  int64_t n = 8;
  float value = 2.0f;
  void *params[] = {&d, &n, &value};
  mgpuLaunchKernel(f, 2, 1, 1, 64, 1, 1, 0, s, params, nullptr, 3);
  mgpuMemcpy(host, d, sizeof(host), s);
  mgpuStreamSynchronize(s);
  EXPECT_EQ(host[7], 2.0f);
  std::ifstream in(tracePath);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("cuCtx", 0) != 0 && line.rfind("cuDevice", 0) != 0 &&
        line.rfind("cuInit", 0) != 0 && line.rfind("cuGetError", 0) != 0 &&
        line.rfind("cuDriver", 0) != 0)
      lines.push_back(line);
  EXPECT_EQ(lines, (std::vector<std::string>{
                       "cuModuleLoadDataEx",
                       "cuModuleGetFunction fake_fill_f32",
                       "cuStreamCreate",
                       "cuMemAlloc_v2 512",
                       "cuMemcpyAsync HtoD 32",
                       "cuLaunchKernel fake_fill_f32 2x1x1 64x1x1",
                       "cuMemcpyAsync DtoH 32",
                       "cuStreamSynchronize",
                   }));
  EXPECT_EQ(fakeCudaCopyCount("HtoD"), 1);
  EXPECT_EQ(fakeCudaCopyBytes("DtoH"), 32u);
  EXPECT_EQ(fakeCudaCopyCount("DtoD"), 0);
  mgpuModuleUnload(module);
}

} // namespace
