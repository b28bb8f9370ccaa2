//===- FakeDriverTest.cpp - The runtime over a fake CUDA driver -----------===//
//
// MOE_CUDA_DRIVER points at libFakeCuda.so (FakeCuda.h): the tests drive the
// mgpu* ABI the way lowered MLIR does and check what reached the "driver"
// (grid, block, shared memory, parameters, streams, contexts) and the error
// messages for each failure.
//
//===----------------------------------------------------------------------===//

#include "FakeCuda.h"
#include "runtime/cuda/CudaRuntime.h"
#include "runtime/cuda/MgpuAbi.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::string lastError() {
  const char *e = moeRuntimeGetLastError();
  return e ? e : "";
}

class FakeDriver : public ::testing::Test {
protected:
  void SetUp() override { useDriver(FAKE_CUDA_PATH); }
  void TearDown() override {
    // Every call leaves the thread's context stack as it found it.
    EXPECT_EQ(fakeCudaContextDepth(), 0);
    moeRuntimeResetForTesting();
    EXPECT_EQ(fakeCudaRetainedContexts(), 0);
    moeRuntimeSetErrorPrinting(1);
    unsetenv("MOE_CUDA_DRIVER");
    fakeCudaReset();
  }
  void useDriver(const char *path) {
    fakeCudaReset();
    setenv("MOE_CUDA_DRIVER", path, 1);
    moeRuntimeResetForTesting();
    moeRuntimeSetErrorPrinting(0);
  }
  void *loadFill() {
    void *module = mgpuModuleLoadJIT(const_cast<char *>(kFakeCudaPtx), 3);
    EXPECT_NE(module, nullptr) << lastError();
    return module;
  }
};

TEST_F(FakeDriver, AvailableAndDescribesTheDevice) {
  std::string why;
  EXPECT_TRUE(moeCudaAvailable(&why)) << why;
  int major = 0, minor = 0;
  EXPECT_EQ(moeCudaComputeCapability(&major, &minor, &why), 90);
  EXPECT_EQ(major, 9);
  EXPECT_EQ(minor, 0);
  EXPECT_EQ(moeCudaChip(), "sm_90");
  EXPECT_EQ(moeCudaDeviceName(), "Fake H200");
  MoeCudaDeviceInfo info;
  ASSERT_TRUE(moeCudaGetDeviceInfo(&info, &why)) << why;
  EXPECT_EQ(info.ordinal, 0);
  EXPECT_EQ(info.name, "Fake H200");
  EXPECT_EQ(info.major, 9);
  EXPECT_EQ(info.multiprocessorCount, 132);
  EXPECT_EQ(info.maxSharedMemoryPerBlockOptin, 232448);
  EXPECT_EQ(info.totalMemoryBytes, size_t(143771) << 20);
  EXPECT_EQ(info.driverVersion, 13000);
  // One primary context, retained once and reused.
  EXPECT_EQ(fakeCudaCallCount("cuDevicePrimaryCtxRetain"), 1);
  EXPECT_EQ(fakeCudaCallCount("cuInit"), 1);
  fakeCudaSetComputeCapability(8, 0);
  EXPECT_EQ(moeCudaChip(), "sm_80");
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr);
}

TEST_F(FakeDriver, NoDeviceFromCuInit) {
  fakeCudaSetResult("cuInit", 100);
  std::string why;
  EXPECT_FALSE(moeCudaAvailable(&why));
  EXPECT_EQ(why, "moe-runtime: no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE "
                 "(no CUDA-capable device is detected))");
  EXPECT_EQ(mgpuStreamCreate(), nullptr);
  EXPECT_EQ(lastError(), why);
  EXPECT_EQ(moeRuntimeGetLastErrorCode(), 100);
}

TEST_F(FakeDriver, ZeroDevices) {
  fakeCudaSetDeviceCount(0);
  std::string why;
  EXPECT_FALSE(moeCudaAvailable(&why));
  EXPECT_EQ(why, "moe-runtime: no CUDA device");
}

TEST_F(FakeDriver, OtherCuInitFailureNamesTheCall) {
  fakeCudaSetResult("cuInit", 999);
  std::string why;
  EXPECT_FALSE(moeCudaAvailable(&why));
  EXPECT_EQ(why, "moe-runtime: cuInit failed: CUDA_ERROR_UNKNOWN (unknown "
                 "error)");
}

TEST_F(FakeDriver, InvalidPtxNamesTheCallAndTheError) {
  fakeCudaSetResult("cuModuleLoadData", 218);
  EXPECT_EQ(mgpuModuleLoad(const_cast<char *>(kFakeCudaPtx), sizeof(kFakeCudaPtx)), nullptr);
  EXPECT_EQ(lastError(), "moe-runtime: cuModuleLoadData failed: "
                         "CUDA_ERROR_INVALID_PTX (a PTX JIT compilation "
                         "failed)");
  EXPECT_EQ(moeRuntimeGetLastErrorCode(), 218);
  EXPECT_EQ(fakeCudaLiveModules(), 0);
}

TEST_F(FakeDriver, JitFailureCarriesTheJitLog) {
  fakeCudaSetResult("cuModuleLoadDataEx", 218);
  fakeCudaSetJitLog("ptxas application ptx input, line 7; error   : Unknown "
                    "symbol 'x'\n");
  EXPECT_EQ(mgpuModuleLoadJIT(const_cast<char *>(kFakeCudaPtx), 2), nullptr);
  EXPECT_EQ(lastError(),
            "moe-runtime: cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX "
            "(a PTX JIT compilation failed): ptxas application ptx input, "
            "line 7; error   : Unknown symbol 'x'");
}

TEST_F(FakeDriver, PtxSyntaxErrorThroughTheJit) {
  std::string bad = std::string(kFakeCudaPtx) + "SYNTAX ERROR\n";
  EXPECT_EQ(mgpuModuleLoadJIT(&bad[0], 2), nullptr);
  EXPECT_EQ(lastError(), "moe-runtime: cuModuleLoadDataEx failed: "
                         "CUDA_ERROR_INVALID_PTX (a PTX JIT compilation "
                         "failed): ptxas fatal : syntax error");
}

TEST_F(FakeDriver, GarbageBytesAreAnInvalidImageNotAnOverRead) {
  // No NUL inside the image: the runtime hands the driver a terminated copy
  // (the fake strlen()s it; ASan would flag an over-read).
  std::vector<char> garbage(333, 'G');
  EXPECT_EQ(mgpuModuleLoad(garbage.data(), garbage.size()), nullptr);
  EXPECT_EQ(lastError(), "moe-runtime: cuModuleLoadData failed: "
                         "CUDA_ERROR_INVALID_IMAGE (device kernel image is "
                         "invalid)");
  EXPECT_EQ(fakeCudaCallCount("cuModuleLoadData"), 1);
}

TEST_F(FakeDriver, TruncatedCubinAndFatbinNeverReachTheDriver) {
  unsigned char elf[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  uint64_t shoff = 4096; // section headers past the end
  std::memcpy(elf + 40, &shoff, 8);
  uint16_t shentsize = 64, shnum = 3;
  std::memcpy(elf + 58, &shentsize, 2);
  std::memcpy(elf + 60, &shnum, 2);
  EXPECT_EQ(mgpuModuleLoad(elf, sizeof(elf)), nullptr);
  EXPECT_EQ(lastError(),
            "moe-runtime: mgpuModuleLoad: truncated ELF cubin (64 bytes)");
  moeRuntimeClearError();

  unsigned char fatbin[32] = {0x50, 0xED, 0x55, 0xBA, 1, 0, 16, 0};
  uint64_t payload = 1 << 20;
  std::memcpy(fatbin + 8, &payload, 8);
  EXPECT_EQ(mgpuModuleLoad(fatbin, sizeof(fatbin)), nullptr);
  EXPECT_EQ(lastError(),
            "moe-runtime: mgpuModuleLoad: truncated fatbin (32 bytes)");
  moeRuntimeClearError();

  EXPECT_EQ(mgpuModuleLoad(elf, 0), nullptr);
  EXPECT_EQ(lastError(), "moe-runtime: mgpuModuleLoad: empty module image");
  EXPECT_EQ(fakeCudaCallCount("cuModuleLoadData"), 0);

  // A well-formed (header-only) cubin is loaded.
  moeRuntimeClearError();
  std::memset(elf + 40, 0, 8); // no section headers
  std::memset(elf + 60, 0, 2);
  void *module = mgpuModuleLoad(elf, sizeof(elf));
  EXPECT_NE(module, nullptr) << lastError();
  EXPECT_NE(mgpuModuleGetFunction(module, "anything"), nullptr);
  mgpuModuleUnload(module);
  EXPECT_EQ(fakeCudaLiveModules(), 0);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr);
}

// What MLIR's lowering does for one gpu.launch_func: load (in a global
// constructor), look the kernel up, alloc/memset/launch/copy on a stream.
TEST_F(FakeDriver, LaunchPassesGridBlockSharedMemoryAndParams) {
  void *module = loadFill();
  EXPECT_EQ(fakeCudaLastJitOptLevel(), 3);
  void *function = mgpuModuleGetFunction(module, "fake_fill_f32");
  ASSERT_NE(function, nullptr) << lastError();
  void *stream = mgpuStreamCreate();
  ASSERT_NE(stream, nullptr);

  const int64_t n = 100;
  void *device = mgpuMemAlloc(n * sizeof(float), stream, 0);
  ASSERT_NE(device, nullptr);
  float zero = 0.0f;
  uint32_t zeroBits;
  std::memcpy(&zeroBits, &zero, 4);
  mgpuMemset32(device, zeroBits, n, stream);

  int64_t count = n;
  float value = 2.5f;
  void *params[] = {&device, &count, &value};
  mgpuLaunchKernel(function, 2, 1, 1, 64, 1, 1, 1024, stream, params, nullptr,
                   3);
  std::vector<float> host(n, -1.0f);
  mgpuMemcpy(host.data(), device, n * sizeof(float), stream);
  mgpuStreamSynchronize(stream);
  ASSERT_EQ(moeRuntimeGetLastError(), nullptr) << lastError();

  const FakeCudaLaunch *l = fakeCudaLastLaunch();
  EXPECT_STREQ(l->kernel, "fake_fill_f32");
  EXPECT_EQ(l->grid[0], 2u);
  EXPECT_EQ(l->grid[1], 1u);
  EXPECT_EQ(l->grid[2], 1u);
  EXPECT_EQ(l->block[0], 64u);
  EXPECT_EQ(l->block[1], 1u);
  EXPECT_EQ(l->block[2], 1u);
  EXPECT_EQ(l->sharedMemBytes, 1024u);
  EXPECT_EQ(l->stream, stream);
  EXPECT_EQ(l->params, params);
  EXPECT_EQ(l->extra, nullptr);
  EXPECT_EQ(l->viaLaunchKernelEx, 0);
  EXPECT_EQ(fakeCudaLastDynamicSmemAttribute(), 1024);
  for (float x : host)
    ASSERT_EQ(x, 2.5f);

  mgpuMemFree(device, stream);
  mgpuStreamDestroy(stream);
  mgpuModuleUnload(module);
  // Memory and stream wait in the runtime's pools until the cache is
  // emptied.
  EXPECT_EQ(fakeCudaLiveAllocations(), 1);
  EXPECT_EQ(fakeCudaLiveStreams(), 1);
  moeRuntimeEmptyCache();
  EXPECT_EQ(fakeCudaLiveAllocations(), 0);
  EXPECT_EQ(fakeCudaLiveStreams(), 0);
  EXPECT_EQ(fakeCudaLiveModules(), 0);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr);
}

// A device with a smaller opt-in maximum ($MOE_FAKE_CUDA_SMEM_OPTIN: 101376
// bytes, an sm_86 part): the tensor-core GEMMs' 64 KiB (a 128-row wgmma
// tile, 4 stages) is granted once for many launches; 100 KiB is above the
// device's maximum: one error line naming the kernel and both sizes, no
// launch.
TEST_F(FakeDriver, DynamicSharedMemoryAboveTheDeviceOptInIsAnError) {
  ASSERT_EQ(setenv("MOE_FAKE_CUDA_SMEM_OPTIN", "101376", 1), 0);
  void *module = loadFill();
  void *f = mgpuModuleGetFunction(module, "fake_fill_f32");
  float *out = static_cast<float *>(mgpuMemAlloc(4, nullptr, 0));
  int64_t n = 1;
  float v = 1;
  void *params[] = {&out, &n, &v};
  for (int i = 0; i < 5; ++i)
    mgpuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 66048, nullptr, params, nullptr, 3);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr) << lastError();
  EXPECT_EQ(fakeCudaLaunchCount(), 5);
  EXPECT_EQ(fakeCudaCallCount("cuFuncSetAttribute"), 1);
  EXPECT_EQ(fakeCudaLastDynamicSmemAttribute(), 66048);

  mgpuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 100 * 1024, nullptr, params, nullptr, 3);
  EXPECT_EQ(lastError(),
            "moe-runtime: cuFuncSetAttribute failed: CUDA_ERROR_INVALID_VALUE "
            "(invalid argument) for kernel 'fake_fill_f32' (102400 bytes of "
            "dynamic shared memory; the device allows 101376 per block)");
  EXPECT_EQ(fakeCudaLaunchCount(), 5);
  ASSERT_EQ(unsetenv("MOE_FAKE_CUDA_SMEM_OPTIN"), 0);
  mgpuMemFree(out, nullptr);
  mgpuModuleUnload(module);
  moeRuntimeEmptyCache();
  EXPECT_EQ(fakeCudaLiveAllocations(), 0);
}

TEST_F(FakeDriver, LargeDynamicSharedMemoryIsOptedInOnce) {
  void *module = loadFill();
  void *f = mgpuModuleGetFunction(module, "fake_fill_f32");
  float *out = static_cast<float *>(mgpuMemAlloc(4, nullptr, 0));
  int64_t n = 1;
  float v = 1;
  void *params[] = {&out, &n, &v};
  for (int i = 0; i < 3; ++i)
    mgpuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 100 * 1024, nullptr, params, nullptr,
                     3);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr) << lastError();
  EXPECT_EQ(fakeCudaLaunchCount(), 3);
  EXPECT_EQ(fakeCudaCallCount("cuFuncSetAttribute"), 1);
  EXPECT_EQ(fakeCudaLastDynamicSmemAttribute(), 100 * 1024);

  mgpuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 300000, nullptr, params, nullptr, 3);
  EXPECT_EQ(lastError(),
            "moe-runtime: cuFuncSetAttribute failed: CUDA_ERROR_INVALID_VALUE "
            "(invalid argument) for kernel 'fake_fill_f32' (300000 bytes of "
            "dynamic shared memory; the device allows 232448 per block)");
  EXPECT_EQ(fakeCudaLaunchCount(), 3);
  mgpuMemFree(out, nullptr);
  mgpuModuleUnload(module);
  moeRuntimeEmptyCache();
  EXPECT_EQ(fakeCudaLiveAllocations(), 0);
}

TEST_F(FakeDriver, UnknownKernelThenLaunchIsANoOp) {
  void *module = loadFill();
  EXPECT_EQ(mgpuModuleGetFunction(module, "moe_gemm1"), nullptr);
  std::string first = lastError();
  EXPECT_EQ(first, "moe-runtime: cuModuleGetFunction failed: "
                   "CUDA_ERROR_NOT_FOUND (named symbol not found) for kernel "
                   "'moe_gemm1'");
  mgpuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr, 0);
  EXPECT_EQ(lastError(), first);
  EXPECT_EQ(fakeCudaCallCount("cuLaunchKernel"), 0);
  // Without a pending error, a null function is reported as such.
  moeRuntimeClearError();
  mgpuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr, 0);
  EXPECT_EQ(lastError(), "moe-runtime: mgpuLaunchKernel: null kernel function");
  mgpuModuleUnload(module);
  EXPECT_EQ(fakeCudaLiveModules(), 0);
}

TEST_F(FakeDriver, LaunchFailureNamesTheKernelAndConfiguration) {
  void *module = loadFill();
  void *f = mgpuModuleGetFunction(module, "fake_fill_f32");
  fakeCudaSetResult("cuLaunchKernel", 1);
  mgpuLaunchKernel(f, 2, 1, 1, 64, 1, 1, 0, nullptr, nullptr, nullptr, 0);
  EXPECT_EQ(lastError(),
            "moe-runtime: cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE "
            "(invalid argument) launching kernel 'fake_fill_f32' (grid "
            "2x1x1, block 64x1x1, 0 bytes of dynamic shared memory)");
  EXPECT_EQ(moeRuntimeGetLastErrorCode(), 1);
  mgpuModuleUnload(module);
}

TEST_F(FakeDriver, LaunchConfigurationChecks) {
  void *module = loadFill();
  void *f = mgpuModuleGetFunction(module, "fake_fault");
  // An empty grid launches nothing, without error.
  mgpuLaunchKernel(f, 0, 1, 1, 64, 1, 1, 0, nullptr, nullptr, nullptr, 0);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr);
  EXPECT_EQ(fakeCudaCallCount("cuLaunchKernel"), 0);
  mgpuLaunchKernel(f, -1, 1, 1, 64, 1, 1, 0, nullptr, nullptr, nullptr, 0);
  EXPECT_EQ(lastError(), "moe-runtime: mgpuLaunchKernel: invalid grid -1x1x1 "
                         "for kernel 'fake_fault'");
  moeRuntimeClearError();
  mgpuLaunchKernel(f, 1, 1, 1, 64, 0, 1, 0, nullptr, nullptr, nullptr, 0);
  EXPECT_EQ(lastError(), "moe-runtime: mgpuLaunchKernel: invalid block 64x0x1 "
                         "for kernel 'fake_fault'");
  moeRuntimeClearError();
  mgpuLaunchKernel(f, intptr_t(1) << 33, 1, 1, 64, 1, 1, 0, nullptr, nullptr,
                   nullptr, 0);
  EXPECT_EQ(lastError(), "moe-runtime: mgpuLaunchKernel: invalid grid "
                         "8589934592x1x1 for kernel 'fake_fault'");
  moeRuntimeClearError();
  mgpuLaunchKernel(f, 1, 1, 1, 64, 1, 1, -5, nullptr, nullptr, nullptr, 0);
  EXPECT_EQ(lastError(), "moe-runtime: mgpuLaunchKernel: negative dynamic "
                         "shared memory size -5 for kernel 'fake_fault'");
  EXPECT_EQ(fakeCudaCallCount("cuLaunchKernel"), 0);
  moeRuntimeClearError();
  mgpuModuleUnload(module);
}

TEST_F(FakeDriver, ClusterLaunchUsesLaunchKernelEx) {
  void *module = loadFill();
  void *f = mgpuModuleGetFunction(module, "fake_fill_f32");
  void *stream = mgpuStreamCreate();
  float *out = static_cast<float *>(mgpuMemAlloc(8 * 4, stream, 0));
  int64_t n = 8;
  float v = 7;
  void *params[] = {&out, &n, &v};
  mgpuLaunchClusterKernel(f, 2, 1, 1, 4, 1, 1, 128, 1, 1, 2048, stream, params,
                          nullptr);
  mgpuStreamSynchronize(stream);
  ASSERT_EQ(moeRuntimeGetLastError(), nullptr) << lastError();
  const FakeCudaLaunch *l = fakeCudaLastLaunch();
  EXPECT_EQ(l->viaLaunchKernelEx, 1);
  EXPECT_EQ(l->cluster[0], 2u);
  EXPECT_EQ(l->cluster[1], 1u);
  EXPECT_EQ(l->cluster[2], 1u);
  EXPECT_EQ(l->clusterSchedulingPolicy, 1); // SPREAD
  EXPECT_EQ(l->grid[0], 4u);
  EXPECT_EQ(l->block[0], 128u);
  EXPECT_EQ(l->sharedMemBytes, 2048u);
  EXPECT_EQ(l->stream, stream);
  EXPECT_EQ(l->params, params);
  float host[8];
  std::string why;
  ASSERT_TRUE(moeCudaCopyToHost(host, out, sizeof(host), &why)) << why;
  for (float x : host)
    EXPECT_EQ(x, 7.0f);
  mgpuMemFree(out, stream);
  mgpuStreamDestroy(stream);
  mgpuModuleUnload(module);
}

TEST_F(FakeDriver, OldDriverWithoutLaunchKernelEx) {
  useDriver(FAKE_CUDA_OLD_PATH);
  std::string why;
  ASSERT_TRUE(moeCudaAvailable(&why)) << why;
  void *module = mgpuModuleLoadJIT(const_cast<char *>(kFakeCudaPtx), 2);
  void *f = mgpuModuleGetFunction(module, "fake_fault");
  ASSERT_NE(f, nullptr) << lastError();
  mgpuLaunchClusterKernel(f, 1, 1, 1, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr,
                          nullptr);
  EXPECT_EQ(lastError(), "moe-runtime: mgpuLaunchClusterKernel: the CUDA "
                         "driver lacks cuLaunchKernelEx (cluster launches "
                         "need CUDA 12.0 or newer)");
  moeRuntimeClearError();
  struct {
    void *a, *b;
    int64_t offset, sizes[2], strides[2];
  } desc = {nullptr, reinterpret_cast<void *>(0x1000), 0, {64, 64}, {64, 1}};
  int64_t box[2] = {64, 64};
  EXPECT_EQ(mgpuTensorMapEncodeTiledMemref(2, &desc, 6, 0, 0, 0, 0, box),
            nullptr);
  EXPECT_EQ(lastError(), "moe-runtime: mgpuTensorMapEncodeTiledMemref: the "
                         "CUDA driver lacks cuTensorMapEncodeTiled (TMA "
                         "descriptors need CUDA 12.0 or newer)");
  moeRuntimeClearError();
  mgpuModuleUnload(module);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr);
}

TEST_F(FakeDriver, DriverLackingARequiredEntryPoint) {
  useDriver(FAKE_CUDA_BROKEN_PATH);
  std::string why;
  EXPECT_FALSE(moeCudaAvailable(&why));
  EXPECT_EQ(why, std::string("moe-runtime: the CUDA driver ") +
                     FAKE_CUDA_BROKEN_PATH +
                     " lacks cuMemFree_v2 (driver too old?)");
  EXPECT_EQ(mgpuMemAlloc(16, nullptr, 0), nullptr);
  EXPECT_EQ(lastError(), why);
}

TEST_F(FakeDriver, CallsAfterAnErrorAreNoOpsButReleasesStillRelease) {
  void *kept = mgpuMemAlloc(64, nullptr, 0);
  void *stream = mgpuStreamCreate();
  void *event = mgpuEventCreate();
  void *module = loadFill();
  ASSERT_NE(kept, nullptr);
  fakeCudaSetResult("cuMemsetD32Async", 700);
  mgpuMemset32(kept, 0, 16, stream);
  std::string first = lastError();
  EXPECT_EQ(first, "moe-runtime: cuMemsetD32Async failed: "
                   "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was "
                   "encountered)");
  fakeCudaSetResult("cuMemsetD32Async", 0);
  int allocs = fakeCudaCallCount("cuMemAlloc_v2");
  EXPECT_EQ(mgpuMemAlloc(64, nullptr, 0), nullptr);
  EXPECT_EQ(mgpuStreamCreate(), nullptr);
  EXPECT_EQ(mgpuModuleGetFunction(module, "fake_fill_f32"), nullptr);
  mgpuMemset32(kept, 0, 16, stream);
  mgpuStreamSynchronize(stream);
  EXPECT_EQ(fakeCudaCallCount("cuMemAlloc_v2"), allocs);
  EXPECT_EQ(fakeCudaCallCount("cuMemsetD32Async"), 1);
  EXPECT_EQ(fakeCudaCallCount("cuStreamSynchronize"), 0);
  // Releases go through.
  mgpuMemFree(kept, stream);
  mgpuEventDestroy(event);
  mgpuStreamDestroy(stream);
  mgpuModuleUnload(module);
  EXPECT_EQ(fakeCudaLiveModules(), 0);
  // So does giving the pools back.
  moeRuntimeEmptyCache();
  EXPECT_EQ(fakeCudaLiveAllocations(), 0);
  EXPECT_EQ(fakeCudaLiveStreams(), 0);
  EXPECT_EQ(fakeCudaLiveEvents(), 0);
  EXPECT_EQ(lastError(), first);
}

TEST_F(FakeDriver, AsynchronousFaultShowsAtSynchronization) {
  void *module = loadFill();
  void *f = mgpuModuleGetFunction(module, "fake_fault");
  void *stream = mgpuStreamCreate();
  mgpuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, stream, nullptr, nullptr, 0);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr);
  mgpuStreamSynchronize(stream);
  EXPECT_EQ(lastError(), "moe-runtime: cuStreamSynchronize failed: "
                         "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory "
                         "access was encountered)");
  EXPECT_EQ(moeRuntimeGetLastErrorCode(), 700);
  std::string why;
  EXPECT_FALSE(moeCudaSynchronize(&why));
  EXPECT_EQ(why, "moe-runtime: cuCtxSynchronize failed: "
                 "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was "
                 "encountered)");
  mgpuStreamDestroy(stream);
  mgpuModuleUnload(module);
}

TEST_F(FakeDriver, StreamsJoinedThroughEvents) {
  // %a, %b on two streams, then gpu.wait async [%a, %b] and a sync wait on
  // a token that crossed a function boundary (an event).
  void *a = mgpuStreamCreate();
  void *b = mgpuStreamCreate();
  void *ea = mgpuEventCreate();
  mgpuEventRecord(ea, a);
  void *eb = mgpuEventCreate();
  mgpuEventRecord(eb, b);
  void *c = mgpuStreamCreate();
  mgpuStreamWaitEvent(c, ea);
  mgpuStreamWaitEvent(c, eb);
  mgpuEventDestroy(ea);
  mgpuEventDestroy(eb);
  void *ec = mgpuEventCreate();
  mgpuEventRecord(ec, c);
  mgpuEventSynchronize(ec);
  mgpuEventDestroy(ec);
  for (void *s : {a, b, c}) {
    mgpuStreamSynchronize(s);
    mgpuStreamDestroy(s);
  }
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr) << lastError();
  // ec reuses the pooled ea.
  EXPECT_EQ(fakeCudaCallCount("cuEventCreate"), 2);
  EXPECT_EQ(fakeCudaCallCount("cuStreamWaitEvent"), 2);
  EXPECT_EQ(fakeCudaCallCount("cuEventSynchronize"), 1);
  moeRuntimeEmptyCache();
  EXPECT_EQ(fakeCudaLiveStreams(), 0);
  EXPECT_EQ(fakeCudaLiveEvents(), 0);
  // A null event is a usage error, not a crash.
  mgpuStreamWaitEvent(nullptr, nullptr);
  EXPECT_EQ(lastError(), "moe-runtime: mgpuStreamWaitEvent: null event");
}

TEST_F(FakeDriver, MemoryCallsAndHostShared) {
  void *s = mgpuStreamCreate();
  void *managed = mgpuMemAlloc(32, nullptr, 1);
  ASSERT_NE(managed, nullptr);
  EXPECT_EQ(fakeCudaLastManagedFlags(), 1); // CU_MEM_ATTACH_GLOBAL
  EXPECT_EQ(fakeCudaCallCount("cuMemAlloc_v2"), 0);
  mgpuMemset16(managed, 0xABCD, 16, s);
  mgpuStreamSynchronize(s);
  const uint16_t *halves = static_cast<uint16_t *>(managed);
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(halves[i], 0xABCD);
  EXPECT_EQ(mgpuMemAlloc(0, s, 0), nullptr); // nothing, and no error
  mgpuMemcpy(managed, managed, 0, s);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr);
  fakeCudaSetResult("cuMemAlloc_v2", 2);
  EXPECT_EQ(mgpuMemAlloc(1 << 30, s, 0), nullptr);
  EXPECT_EQ(lastError(), "moe-runtime: cuMemAlloc failed: "
                         "CUDA_ERROR_OUT_OF_MEMORY (out of memory) "
                         "(1073741824 bytes)");
  mgpuMemFree(managed, s);
  mgpuStreamDestroy(s);
  EXPECT_EQ(fakeCudaLiveAllocations(), 0);
}

TEST_F(FakeDriver, UnknownErrorCodes) {
  fakeCudaSetResult("cuStreamCreate", 12345);
  EXPECT_EQ(mgpuStreamCreate(), nullptr);
  EXPECT_EQ(lastError(), "moe-runtime: cuStreamCreate failed: CUDA error "
                         "12345");
  EXPECT_EQ(moeRuntimeGetLastErrorCode(), 12345);
}

TEST_F(FakeDriver, ReleasesIgnoreDriverShutdown) {
  void *module = loadFill();
  fakeCudaSetResult("cuModuleUnload", 4); // CUDA_ERROR_DEINITIALIZED at exit
  mgpuModuleUnload(module);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr);
  fakeCudaSetResult("cuModuleUnload", 0);
}

struct MemRef2D {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[2];
  int64_t strides[2];
};

TEST_F(FakeDriver, HostRegisterMemRef) {
  std::vector<float> data(4 * 8 + 3);
  MemRef2D m{data.data(), data.data(), 3, {4, 8}, {8, 1}};
  mgpuMemHostRegisterMemRef(2, &m, 4);
  size_t bytes = 0;
  EXPECT_EQ(fakeCudaLastHostRegister(&bytes), data.data() + 3);
  EXPECT_EQ(bytes, 4u * 8 * 4);
  EXPECT_EQ(fakeCudaLiveHostRegistrations(), 1);
  mgpuMemHostUnregisterMemRef(2, &m, 4);
  EXPECT_EQ(fakeCudaLiveHostRegistrations(), 0);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr) << lastError();

  MemRef2D strided{data.data(), data.data(), 0, {4, 4}, {8, 2}};
  mgpuMemHostRegisterMemRef(2, &strided, 4);
  EXPECT_EQ(lastError(), "moe-runtime: mgpuMemHostRegisterMemRef: the memref "
                         "is not densely packed");
  EXPECT_EQ(fakeCudaLiveHostRegistrations(), 0);
}

TEST_F(FakeDriver, TensorMapDescriptor) {
  // memref<64x128xf16> at offset 0, box 32x64: the driver sees the
  // innermost dimension first, strides in bytes.
  std::vector<uint16_t> data(64 * 128);
  MemRef2D m{data.data(), data.data(), 0, {64, 128}, {128, 1}};
  int64_t box[2] = {32, 64};
  void *desc = mgpuTensorMapEncodeTiledMemref(2, &m, /*FLOAT16=*/6, 0,
                                              /*SWIZZLE_128B=*/3, 0, 0, box);
  ASSERT_NE(desc, nullptr) << lastError();
  const FakeCudaTensorMap *t = fakeCudaLastTensorMap();
  EXPECT_EQ(t->dataType, 6);
  EXPECT_EQ(t->rank, 2u);
  EXPECT_EQ(t->address, data.data());
  EXPECT_EQ(t->globalDim[0], 128u);
  EXPECT_EQ(t->globalDim[1], 64u);
  EXPECT_EQ(t->globalStrides[0], 256u);
  EXPECT_EQ(t->boxDim[0], 64u);
  EXPECT_EQ(t->boxDim[1], 32u);
  EXPECT_EQ(t->elementStrides[0], 1u);
  EXPECT_EQ(t->swizzle, 3);
  // The 128-byte descriptor was copied to device memory.
  uint64_t opaque[16];
  std::string why;
  ASSERT_TRUE(moeCudaCopyToHost(opaque, desc, sizeof(opaque), &why)) << why;
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(opaque[i], 0xC0FFEE00u + unsigned(i));
  EXPECT_EQ(opaque[8], uint64_t(reinterpret_cast<uintptr_t>(data.data())));
  // The runtime keeps it (the lowered code never frees it) until the cache
  // is emptied.
  moeRuntimeEmptyCache();

  EXPECT_EQ(mgpuTensorMapEncodeTiledMemref(2, &m, 99, 0, 0, 0, 0, box),
            nullptr);
  EXPECT_EQ(lastError(), "moe-runtime: mgpuTensorMapEncodeTiledMemref: "
                         "unsupported tensor map data type 99");
  EXPECT_EQ(fakeCudaLiveAllocations(), 0);
}

TEST_F(FakeDriver, CopyHelpersRoundTrip) {
  std::vector<float> in(257), out(257, 0.0f);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = float(i) * 0.5f;
  std::string why;
  void *d = moeCudaMalloc(in.size() * sizeof(float), &why);
  ASSERT_NE(d, nullptr) << why;
  ASSERT_TRUE(moeCudaCopyToDevice(d, in.data(), in.size() * 4, &why)) << why;
  ASSERT_TRUE(moeCudaCopyToHost(out.data(), d, out.size() * 4, &why)) << why;
  EXPECT_EQ(in, out);
  EXPECT_TRUE(moeCudaSynchronize(&why)) << why;
  // Errors come back through `why`, not the sticky state.
  fakeCudaSetResult("cuMemcpyHtoD_v2", 1);
  EXPECT_FALSE(moeCudaCopyToDevice(d, in.data(), 16, &why));
  EXPECT_EQ(why, "moe-runtime: cuMemcpyHtoD failed: CUDA_ERROR_INVALID_VALUE "
                 "(invalid argument) (16 bytes)");
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr);
  EXPECT_FALSE(moeCudaCopyToHost(out.data(), d, 1 << 20, &why));
  EXPECT_EQ(why, "moe-runtime: cuMemcpyDtoH failed: CUDA_ERROR_INVALID_VALUE "
                 "(invalid argument) (1048576 bytes)");
  EXPECT_TRUE(moeCudaFree(d, &why)) << why;
  EXPECT_FALSE(moeCudaFree(d, &why)); // double free: the driver says so
  EXPECT_EQ(why, "moe-runtime: cuMemFree failed: CUDA_ERROR_INVALID_VALUE "
                 "(invalid argument)");
  EXPECT_EQ(fakeCudaLiveAllocations(), 0);
}

TEST_F(FakeDriver, DefaultDeviceSelectsThePrimaryContext) {
  fakeCudaSetDeviceCount(2);
  mgpuSetDefaultDevice(1);
  void *s = mgpuStreamCreate();
  EXPECT_NE(s, nullptr) << lastError();
  EXPECT_EQ(fakeCudaLastRetainedDevice(), 1);
  MoeCudaDeviceInfo info;
  ASSERT_TRUE(moeCudaGetDeviceInfo(&info));
  EXPECT_EQ(info.ordinal, 1);
  mgpuStreamDestroy(s);
  mgpuSetDefaultDevice(5);
  EXPECT_EQ(mgpuStreamCreate(), nullptr);
  EXPECT_EQ(lastError(), "moe-runtime: CUDA device 5 does not exist (the "
                         "driver reports 2)");
  std::string why;
  EXPECT_FALSE(moeCudaAvailable(&why));
  EXPECT_EQ(why, lastError());
  mgpuSetDefaultDevice(0);
  EXPECT_EQ(fakeCudaRetainedContexts(), 1);
}

TEST_F(FakeDriver, ContextRetainFailure) {
  fakeCudaSetResult("cuDevicePrimaryCtxRetain", 101);
  std::string why;
  EXPECT_FALSE(moeCudaAvailable(&why));
  EXPECT_EQ(why, "moe-runtime: cuDevicePrimaryCtxRetain failed: "
                 "CUDA_ERROR_INVALID_DEVICE (invalid device ordinal)");
}

} // namespace

namespace {

/// What the host code of a checked moe op does after its kernels
/// (ConvertMoEToGPU.cpp, reportIndexError): copy the 4-word error word back
/// and report a non-zero kind through moeRuntimeIndexError. K splits the
/// flat element index into token and slot.
void readBackAndReport(void *word, void *stream, int64_t K, int64_t numExperts) {
  int32_t host[4] = {-7, -7, -7, -7};
  mgpuMemcpy(host, word, sizeof(host), stream);
  mgpuStreamSynchronize(stream);
  if (host[0] != 0)
    moeRuntimeIndexError(host[0], host[1] / K, host[1] % K, host[2], numExperts);
}

} // namespace

TEST_F(FakeDriver, IndexErrorWordIsReadBackAndReportedOnce) {
  void *stream = mgpuStreamCreate();
  void *word = mgpuMemAlloc(16, stream, 0);
  ASSERT_NE(word, nullptr);
  // A clean word (what the align kernel writes without a violation).
  mgpuMemset32(word, 0, 4, stream);
  readBackAndReport(word, stream, 2, 4);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr);
  EXPECT_EQ(fakeCudaCopyCount("DtoH"), 1);
  EXPECT_EQ(fakeCudaCopyBytes("DtoH"), 16u);
  // The kernel recorded expert index 9 at flat index 7 (token 3, slot 1).
  setenv("MOE_FAKE_CUDA_READBACK16", "3,7,9,0", 1);
  readBackAndReport(word, stream, 2, 8);
  unsetenv("MOE_FAKE_CUDA_READBACK16");
  EXPECT_EQ(lastError(),
            "moe-runtime: moe.dispatch: expert index 9 of token 3, slot 1 is outside [0, 8)");
  EXPECT_EQ(moeRuntimeGetLastErrorCode(), -1);
  // The rest of the call's work is skipped; a second report does not
  // replace the first.
  int launches = fakeCudaLaunchCount();
  EXPECT_EQ(mgpuMemAlloc(16, stream, 0), nullptr);
  moeRuntimeIndexError(2, 0, 0, 0, 0);
  EXPECT_EQ(lastError(),
            "moe-runtime: moe.dispatch: expert index 9 of token 3, slot 1 is outside [0, 8)");
  EXPECT_EQ(fakeCudaLaunchCount(), launches);
  moeRuntimeClearError();
  // Every kind has the CPU path's words (runtime/IndexErrors.h).
  moeRuntimeIndexError(4, 2, 0, 2147483647, 4);
  EXPECT_EQ(lastError(), "moe-runtime: moe.fused_experts: expert index 2147483647 of "
                         "token 2, slot 0 is outside [0, 4)");
  moeRuntimeClearError();
  moeRuntimeIndexError(1, 0, 0, 5, 0);
  EXPECT_EQ(lastError(), "moe-runtime: moe.expert_ffn: the offsets are not a "
                         "non-decreasing sequence within [0, number of rows]");
  moeRuntimeClearError();
  moeRuntimeIndexError(2, 0, 0, 0, 0);
  EXPECT_EQ(lastError(), "moe-runtime: moe.combine: a position is outside [-1, number "
                         "of expert output rows)");
  moeRuntimeClearError();
  mgpuMemFree(word, stream);
  mgpuStreamDestroy(stream);
}
