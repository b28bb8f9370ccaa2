//===- AotStreamTest.cpp - Stream order of moe-compile's cuda calls -------===//
//
// A `moe-compile --target=cuda` entry point runs moeAotCudaBegin, the lowered
// function and moeAotCudaEnd (runtime/aot/AotCudaSupport.c). The lowered
// function of a stream-ordered call (--moe-gpu-stream-ordered, see
// test/gpu/nvptx-pipeline-device-abi.mlir for the IR) does, per call:
//   s = mgpuStreamCreate(); p = mgpuMemAlloc(n, s, 0); launches on s;
//   mgpuMemFree(p, s); moeRuntimeSyncUnlessThreadStream(s);
//   mgpuStreamDestroy(s)
// Over the fake driver: the call's work goes on the caller's stream
// (CU_STREAM_LEGACY for NULL), nothing in the call waits,
// the intermediates are reused in stream order and never released to the
// driver before a synchronization, enqueue errors fail the call, and a
// kernel fault surfaces at the caller's synchronization.
//
//===----------------------------------------------------------------------===//

#include "FakeCuda.h"
#include "runtime/aot/AotSupport.h"
#include "runtime/cuda/CudaDriverApi.h"
#include "runtime/cuda/CudaRuntime.h"
#include "runtime/cuda/MgpuAbi.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

using namespace moe::cudrv;

extern "C" CUresult cuStreamSynchronize(CUstream stream); // the fake's

namespace {

void *const kLegacyStream = reinterpret_cast<void *>(uintptr_t(1));

/// The host code of a stream-ordered entry point (as lowered) around one
/// kernel that fills its intermediate, then another that faults if asked.
class AotStream : public ::testing::Test {
protected:
  void SetUp() override {
    fakeCudaReset();
    setenv("MOE_CUDA_DRIVER", FAKE_CUDA_PATH, 1);
    unsetenv("MOE_CUDA_ALLOC_CACHE");
    moeRuntimeResetForTesting();
    module = mgpuModuleLoadJIT(const_cast<char *>(kFakeCudaPtx), 3);
    fill = mgpuModuleGetFunction(module, "fake_fill_f32");
    fault = mgpuModuleGetFunction(module, "fake_fault");
    ASSERT_NE(fill, nullptr);
    ASSERT_NE(fault, nullptr);
  }
  void TearDown() override {
    EXPECT_EQ(fakeCudaContextDepth(), 0);
    moeRuntimeResetForTesting();
    moeRuntimeSetErrorPrinting(1);
    unsetenv("MOE_CUDA_DRIVER");
    fakeCudaReset();
  }

  /// One call of `moe_f(..., stream)`; returns its return code, the
  /// intermediate in *buffer and the stream its work went on in *used.
  int call(void *stream, bool faulting = false, void **buffer = nullptr,
           void **used = nullptr) {
    void *previous = nullptr;
    if (moeAotCudaBegin("moe_f", stream, &previous))
      return 1;
    void *s = mgpuStreamCreate();
    void *p = mgpuMemAlloc(4096, s, 0);
    int64_t n = 1024;
    float value = 1.0f;
    void *params[] = {&p, &n, &value};
    mgpuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, s, params, nullptr, 0);
    if (faulting)
      mgpuLaunchKernel(fault, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr, 0);
    mgpuMemFree(p, s);
    moeRuntimeSyncUnlessThreadStream(s);
    mgpuStreamDestroy(s);
    if (buffer)
      *buffer = p;
    if (used)
      *used = s;
    return moeAotCudaEnd("moe_f", previous);
  }

  int waits() {
    return fakeCudaCalls("cuStreamSynchronize") + fakeCudaCalls("cuCtxSynchronize") +
           fakeCudaCalls("cuEventSynchronize");
  }

  void *module = nullptr, *fill = nullptr, *fault = nullptr;
};

TEST_F(AotStream, NullStreamIsTheLegacyDefaultStream) {
  void *mine = reinterpret_cast<void *>(uintptr_t(0x1234));
  moeRuntimeSetStream(mine);
  void *first = nullptr, *second = nullptr, *used = nullptr;
  ASSERT_EQ(call(nullptr, false, &first, &used), 0) << moe_last_error();
  EXPECT_EQ(used, kLegacyStream);
  EXPECT_EQ(fakeCudaLastLaunch()->stream, kLegacyStream);
  // The thread's stream of the caller is back.
  EXPECT_EQ(moeRuntimeGetStream(), mine);
  ASSERT_EQ(call(nullptr, false, &second), 0) << moe_last_error();
  // No stream made or destroyed, nothing waited for, the block reused in
  // stream order (one driver allocation for both calls).
  EXPECT_EQ(fakeCudaCalls("cuStreamCreate"), 0);
  EXPECT_EQ(fakeCudaCalls("cuStreamDestroy_v2"), 0);
  EXPECT_EQ(waits(), 0);
  EXPECT_EQ(second, first);
  EXPECT_EQ(fakeCudaCalls("cuMemAlloc_v2"), 1);
  EXPECT_EQ(fakeCudaCalls("cuMemFree_v2"), 0);
  moeRuntimeSetStream(nullptr);
}

TEST_F(AotStream, CallerStreamIsUsedAndNotSynchronized) {
  void *stream = mgpuStreamCreate(); // the caller's (a runtime stream here)
  ASSERT_NE(stream, nullptr);
  int created = fakeCudaCalls("cuStreamCreate");
  void *first = nullptr, *second = nullptr, *used = nullptr;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(call(stream, false, i ? &second : &first, &used), 0)
        << moe_last_error();
    EXPECT_EQ(used, stream);
    EXPECT_EQ(fakeCudaLastLaunch()->stream, stream);
  }
  EXPECT_EQ(fakeCudaCalls("cuStreamCreate"), created);
  EXPECT_EQ(waits(), 0);
  EXPECT_EQ(second, first);
  EXPECT_EQ(fakeCudaCalls("cuMemAlloc_v2"), 1);
  EXPECT_EQ(moeRuntimeGetStream(), nullptr);
  // Another stream: the block freed on `stream` is reused only after the
  // context is synchronized (its work is then finished).
  void *other = mgpuStreamCreate();
  void *third = nullptr;
  ASSERT_EQ(call(other, false, &third), 0) << moe_last_error();
  EXPECT_EQ(third, first);
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), 1);
  EXPECT_EQ(fakeCudaCalls("cuMemAlloc_v2"), 1);
  mgpuStreamDestroy(other);
  mgpuStreamDestroy(stream);
}

TEST_F(AotStream, NoCachingReleasesAfterASynchronization) {
  moeRuntimeSetAllocatorCaching(0);
  void *stream = mgpuStreamCreate();
  ASSERT_EQ(call(stream), 0) << moe_last_error();
  // The free gives the memory back, after waiting for the work.
  EXPECT_EQ(fakeCudaCalls("cuMemFree_v2"), 1);
  EXPECT_EQ(fakeCudaCalls("cuCtxSynchronize"), 1);
  EXPECT_EQ(fakeCudaCalls("cuStreamSynchronize"), 0);
  mgpuStreamDestroy(stream);
  moeRuntimeSetAllocatorCaching(1);
}

TEST_F(AotStream, EnqueueErrorsFailTheCall) {
  void *stream = mgpuStreamCreate();
  fakeCudaSetResult("cuLaunchKernel", CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
  EXPECT_EQ(call(stream), 1);
  EXPECT_EQ(std::string(moe_last_error()),
            "moe_f: moe-runtime: cuLaunchKernel failed: CUDA error 701 "
            "launching kernel 'fake_fill_f32' (grid 1x1x1, block 32x1x1, 0 "
            "bytes of dynamic shared memory)");
  // Cleared: the next call succeeds.
  fakeCudaSetResult("cuLaunchKernel", CUDA_SUCCESS);
  EXPECT_EQ(call(stream), 0) << moe_last_error();
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr);
  mgpuStreamDestroy(stream);
}

TEST_F(AotStream, KernelFaultSurfacesAtTheCallersSynchronization) {
  void *stream = mgpuStreamCreate();
  // The kernel faults after the call returned: the call itself succeeds.
  EXPECT_EQ(call(stream, /*faulting=*/true), 0) << moe_last_error();
  EXPECT_EQ(waits(), 0);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr);
  // The caller's synchronization (here through the runtime) reports it.
  mgpuStreamSynchronize(stream);
  const char *pending = moeRuntimeGetLastError();
  ASSERT_NE(pending, nullptr);
  std::string error = pending;
  EXPECT_EQ(error,
            "moe-runtime: cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS "
            "(an illegal memory access was encountered)");
  // Left pending, it fails the next call once, which clears it.
  EXPECT_EQ(call(stream), 1);
  EXPECT_EQ(std::string(moe_last_error()), std::string("moe_f: ") + error);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr);
  mgpuStreamDestroy(stream);
}

TEST_F(AotStream, WithoutAThreadStreamTheCodeWaits) {
  // The lowered code called directly (no moe_f, no thread stream): its
  // stream comes from the runtime's pool, and it waits for it.
  ASSERT_EQ(moeRuntimeGetStream(), nullptr);
  void *s = mgpuStreamCreate();
  ASSERT_NE(s, nullptr);
  moeRuntimeSyncUnlessThreadStream(s);
  EXPECT_EQ(fakeCudaCalls("cuStreamSynchronize"), 1);
  // The thread's stream: no wait.
  moeRuntimeSetStream(s);
  moeRuntimeSyncUnlessThreadStream(s);
  EXPECT_EQ(fakeCudaCalls("cuStreamSynchronize"), 1);
  moeRuntimeSetStream(nullptr);
  mgpuStreamDestroy(s);
  EXPECT_EQ(moeRuntimeGetLastError(), nullptr);
}

} // namespace
