/*===- MgpuAbi.h - Host ABI of MLIR 22's gpu-to-llvm lowering -----*- C -*-===//
 *
 * The functions that host code lowered by MLIR 22 (`gpu-to-llvm`, and
 * `convert-nvgpu-to-nvvm` for TMA descriptors) calls, implemented by
 * libMoECudaRuntime.so over the CUDA driver API (opened at run time with
 * dlopen; nothing links libcuda). The LLVM IR signature MLIR emits is given
 * beside each one; test/runtime/mgpu-abi.test re-derives those declarations
 * with the stock mlir-opt/mlir-translate and compares them with what clang
 * makes of this header, so an MLIR upgrade that changes the ABI fails there.
 *
 * Parameter types are chosen so that clang lowers each C prototype to exactly
 * the LLVM types MLIR uses (int8_t for MLIR's i8 `isHostShared`, uint16_t for
 * i16, int32_t for i32, intptr_t/int64_t/size_t for i64, pointers for ptr).
 *
 * Errors. The ABI returns no status, so the first failure is kept in a
 * thread-safe sticky error state, printed once to stderr (unless disabled)
 * and read with moeRuntimeGetLastError(). Every message starts with
 * "moe-runtime: " and, for a driver failure, names the call and the error:
 *   moe-runtime: cuModuleLoadData failed: CUDA_ERROR_INVALID_PTX (a PTX JIT
 *   compilation failed)
 * While an error is pending, calls that would do work (load, launch, alloc,
 * copy, set, synchronize, create) are no-ops that return null handles;
 * calls that release a non-null handle (free, unload, destroy) still release
 * it when the driver is usable. No call crashes on a null handle.
 *
 * Environment: MOE_CUDA_DRIVER overrides the driver library opened
 * (default "libcuda.so.1").
 *===----------------------------------------------------------------------===*/

#ifndef MOE_RUNTIME_CUDA_MGPUABI_H
#define MOE_RUNTIME_CUDA_MGPUABI_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define MOE_RUNTIME_EXPORT __attribute__((visibility("default")))
#else
#define MOE_RUNTIME_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Modules ---------------------------------------------------------- */

/* declare ptr @mgpuModuleLoad(ptr, i64)
 * A cubin or fatbin (or PTX text) image of `size` bytes -> CUmodule.
 * cuModuleLoadData; the image is bounds-checked first (ELF / fatbin headers;
 * text is NUL-terminated within `size` before the driver sees it). */
MOE_RUNTIME_EXPORT void *mgpuModuleLoad(void *data, size_t size);

/* declare ptr @mgpuModuleLoadJIT(ptr, i32)
 * NUL-terminated PTX -> CUmodule, JIT-compiled by the driver at `optLevel`
 * (cuModuleLoadDataEx with CU_JIT_OPTIMIZATION_LEVEL; the JIT error log is
 * appended to the error message). */
MOE_RUNTIME_EXPORT void *mgpuModuleLoadJIT(void *data, int32_t optLevel);

/* declare void @mgpuModuleUnload(ptr) -- cuModuleUnload (and forgets the
 * module's cached functions). */
MOE_RUNTIME_EXPORT void mgpuModuleUnload(void *module);

/* declare ptr @mgpuModuleGetFunction(ptr, ptr)
 * cuModuleGetFunction the first time for a (module, name); the cached
 * handle afterwards, until mgpuModuleUnload(module). Failures are not
 * cached. */
MOE_RUNTIME_EXPORT void *mgpuModuleGetFunction(void *module, const char *name);

/* ---- Launches ---------------------------------------------------------- */

/* declare void @mgpuLaunchKernel(ptr, i64, i64, i64, i64, i64, i64, i32,
 *                                ptr, ptr, ptr, i64)
 * cuLaunchKernel(function, grid, block, smem, stream, params, extra).
 * `params` points to `paramsCount` pointers, one per (expanded) kernel
 * argument. Dynamic shared memory above the default is opted in with
 * cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES). A grid with a zero
 * extent launches nothing; a negative or > 2^32-1 extent is an error. */
MOE_RUNTIME_EXPORT void mgpuLaunchKernel(void *function, intptr_t gridX,
                                         intptr_t gridY, intptr_t gridZ,
                                         intptr_t blockX, intptr_t blockY,
                                         intptr_t blockZ, int32_t smem,
                                         void *stream, void **params,
                                         void **extra, size_t paramsCount);

/* declare void @mgpuLaunchClusterKernel(ptr, i64, i64, i64, i64, i64, i64,
 *                                       i64, i64, i64, i32, ptr, ptr, ptr)
 * Thread-block-cluster launch (sm_90+): cuLaunchKernelEx with the
 * CLUSTER_DIMENSION and CLUSTER_SCHEDULING_POLICY_PREFERENCE(SPREAD)
 * attributes. MLIR 22 passes no paramsCount here. */
MOE_RUNTIME_EXPORT void
mgpuLaunchClusterKernel(void *function, intptr_t clusterX, intptr_t clusterY,
                        intptr_t clusterZ, intptr_t gridX, intptr_t gridY,
                        intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                        intptr_t blockZ, int32_t smem, void *stream,
                        void **params, void **extra);

/* ---- Streams and events ------------------------------------------------ */

/* declare ptr @mgpuStreamCreate()
 * The calling thread's stream set with moeRuntimeSetStream, if any; else a
 * stream from the runtime's pool, created with cuStreamCreate(NON_BLOCKING)
 * only when the pool is empty. */
MOE_RUNTIME_EXPORT void *mgpuStreamCreate(void);
/* declare void @mgpuStreamDestroy(ptr)
 * The thread's moeRuntimeSetStream stream: nothing. A stream of the pool:
 * back to the pool (at most 16 are kept; beyond that, and for streams the
 * runtime did not create, cuStreamDestroy after synchronizing the stream). */
MOE_RUNTIME_EXPORT void mgpuStreamDestroy(void *stream);
/* declare void @mgpuStreamSynchronize(ptr) -- cuStreamSynchronize. */
MOE_RUNTIME_EXPORT void mgpuStreamSynchronize(void *stream);
/* declare void @mgpuStreamWaitEvent(ptr, ptr) -- cuStreamWaitEvent. */
MOE_RUNTIME_EXPORT void mgpuStreamWaitEvent(void *stream, void *event);
/* declare ptr @mgpuEventCreate()
 * An event from the runtime's pool, cuEventCreate(DISABLE_TIMING) when it is
 * empty. */
MOE_RUNTIME_EXPORT void *mgpuEventCreate(void);
/* declare void @mgpuEventDestroy(ptr)
 * Back to the pool (at most 64 kept; beyond that cuEventDestroy). */
MOE_RUNTIME_EXPORT void mgpuEventDestroy(void *event);
/* declare void @mgpuEventSynchronize(ptr) -- cuEventSynchronize. */
MOE_RUNTIME_EXPORT void mgpuEventSynchronize(void *event);
/* declare void @mgpuEventRecord(ptr, ptr) -- cuEventRecord(event, stream). */
MOE_RUNTIME_EXPORT void mgpuEventRecord(void *event, void *stream);

/* ---- Memory ------------------------------------------------------------ */

/* declare ptr @mgpuMemAlloc(i64, ptr, i8)
 * Device memory from the stream-ordered caching allocator (README.md
 * "Device memory"): a cached block of the request's size class that was
 * freed on `stream` (or whose work is known to be finished), else
 * cuMemAlloc. cuMemAllocManaged(ATTACH_GLOBAL), never cached, when
 * isHostShared != 0. 0 bytes -> null without error. */
MOE_RUNTIME_EXPORT void *mgpuMemAlloc(uint64_t sizeBytes, void *stream,
                                      int8_t isHostShared);
/* declare void @mgpuMemFree(ptr, ptr)
 * A cached-allocator block goes back to its pool tagged with `stream`
 * (work queued on `stream` before the free may still use it; only that
 * stream reuses it before a synchronization). Anything else (managed
 * memory, caching off, foreign pointers): cuCtxSynchronize, then cuMemFree.
 * Null: no-op. */
MOE_RUNTIME_EXPORT void mgpuMemFree(void *ptr, void *stream);
/* declare void @mgpuMemcpy(ptr, ptr, i64, ptr)
 * cuMemcpyAsync(dst, src, bytes, stream); direction from unified addressing. */
MOE_RUNTIME_EXPORT void mgpuMemcpy(void *dst, void *src, size_t sizeBytes,
                                   void *stream);
/* declare void @mgpuMemset32(ptr, i32, i64, ptr) -- cuMemsetD32Async,
 * `count` 32-bit elements. */
MOE_RUNTIME_EXPORT void mgpuMemset32(void *dst, uint32_t value, size_t count,
                                     void *stream);
/* declare void @mgpuMemset16(ptr, i16, i64, ptr) -- cuMemsetD16Async,
 * `count` 16-bit elements. */
MOE_RUNTIME_EXPORT void mgpuMemset16(void *dst, uint16_t value, size_t count,
                                     void *stream);

/* declare void @mgpuMemHostRegisterMemRef(i64, ptr, i64)
 * Page-locks the dense data of a ranked memref descriptor (pointer to
 * {ptr, ptr, i64 offset, i64 sizes[rank], i64 strides[rank]}):
 * cuMemHostRegister. */
MOE_RUNTIME_EXPORT void mgpuMemHostRegisterMemRef(int64_t rank,
                                                  void *descriptor,
                                                  int64_t elementSizeBytes);
/* declare void @mgpuMemHostUnregisterMemRef(i64, ptr, i64) --
 * cuMemHostUnregister. */
MOE_RUNTIME_EXPORT void mgpuMemHostUnregisterMemRef(int64_t rank,
                                                    void *descriptor,
                                                    int64_t elementSizeBytes);
/* Not emitted by MLIR 22, kept for upstream compatibility. */
MOE_RUNTIME_EXPORT void mgpuMemHostRegister(void *ptr, uint64_t sizeBytes);
MOE_RUNTIME_EXPORT void mgpuMemHostUnregister(void *ptr);

/* ---- Devices and TMA ---------------------------------------------------- */

/* declare void @mgpuSetDefaultDevice(i32)
 * The calling thread's device for every later call (default 0). */
MOE_RUNTIME_EXPORT void mgpuSetDefaultDevice(int32_t device);

/* declare ptr @mgpuTensorMapEncodeTiledMemref(i64, ptr, i64, i64, i64, i64,
 *                                             i64, ptr)
 * (rank, ranked memref descriptor, CUtensorMapDataType, interleave, swizzle,
 * l2 promotion, oob fill, box dims[rank]) -> device pointer to a 128-byte
 * CUtensorMap built with cuTensorMapEncodeTiled (sm_90+). The enums arrive
 * as i64 in MLIR's IR. */
MOE_RUNTIME_EXPORT void *mgpuTensorMapEncodeTiledMemref(
    int64_t rank, void *descriptor, int64_t dataType, int64_t interleave,
    int64_t swizzle, int64_t l2Promotion, int64_t oobFill, int64_t *boxDims);

/* ---- Sticky error state (moe extension) -------------------------------- */

/* The first error since start or the last moeRuntimeClearError(), or NULL.
 * The string is copied per thread: valid until this thread's next call. */
MOE_RUNTIME_EXPORT const char *moeRuntimeGetLastError(void);
/* The CUresult of that error, -1 for errors that are not a driver result
 * (no driver, bad argument, ...), 0 when there is none. */
MOE_RUNTIME_EXPORT int moeRuntimeGetLastErrorCode(void);
/* Forgets the pending error: calls do work again. */
MOE_RUNTIME_EXPORT void moeRuntimeClearError(void);
/* Whether the first error is printed to stderr (default 1). Returns the
 * previous setting. */
MOE_RUNTIME_EXPORT int moeRuntimeSetErrorPrinting(int enabled);
/* ---- Index checks of the GPU lowering (moe extension) ------------------ */

/* Called by host code of convert-moe-to-gpu (check-indices) when a kernel's
 * error word reports bad index data of a moe op (docs/gpu.md "Index
 * checks"): records the sticky error "moe-runtime: <line>" with the line of
 * the CPU path (runtime/IndexErrors.h: kind 1 offsets of moe.expert_ffn, 2
 * a position of moe.combine, 3/4 an expert index of moe.dispatch /
 * moe.fused_experts at `token`, `slot` with value `value`, outside [0,
 * numExperts)), unless an error is pending. The rest of the call's GPU work
 * is then skipped (calls that do work are no-ops while an error is
 * pending): moe-run prints the line and exits with code 1; a moe-compile
 * library returns non-zero with the line in moe_last_error(). */
MOE_RUNTIME_EXPORT void moeRuntimeIndexError(int32_t kind, int64_t token,
                                             int64_t slot, int64_t value,
                                             int64_t numExperts);

/* ---- Streams and device memory (moe extension) ------------------------- */

/* Makes `stream` (a CUstream of the default device's primary context, or
 * NULL for none) the calling thread's stream: until the next call,
 * mgpuStreamCreate on this thread returns it and mgpuStreamDestroy leaves
 * it alone, so the lowered code runs on the caller's stream. Returns the
 * previous one. The runtime never destroys it; before destroying it
 * yourself, call moeRuntimeForgetStream(stream). */
MOE_RUNTIME_EXPORT void *moeRuntimeSetStream(void *stream);
/* The calling thread's stream set with moeRuntimeSetStream, or NULL. */
MOE_RUNTIME_EXPORT void *moeRuntimeGetStream(void);
/* The host synchronizations of stream-ordered lowered code
 * (--moe-gpu-stream-ordered, what moe-compile --target=cuda calls run):
 * nothing when `stream` is the calling thread's stream (its work is
 * ordered on it, and its owner synchronizes it), else
 * mgpuStreamSynchronize(stream). */
MOE_RUNTIME_EXPORT void moeRuntimeSyncUnlessThreadStream(void *stream);
/* Synchronizes `stream` and lets blocks freed on it serve every stream
 * (call before destroying a stream the runtime has used that it did not
 * create). Errors go to the sticky error state. */
MOE_RUNTIME_EXPORT void moeRuntimeForgetStream(void *stream);

/* Statistics of the caching allocator behind mgpuMemAlloc, summed over
 * devices, since the process started (or moeRuntimeResetForTesting). */
typedef struct MoeRuntimeAllocatorStats {
  uint64_t requests;           /* device-memory mgpuMemAlloc calls served */
  uint64_t cacheHits;          /* ... of them served from the cache */
  uint64_t driverAllocations;  /* cuMemAlloc calls made (successful) */
  uint64_t driverFrees;        /* cuMemFree calls made (successful) */
  uint64_t managedAllocations; /* cuMemAllocManaged (host_shared) calls */
  uint64_t crossStreamSynchronizations; /* cuCtxSynchronize to reuse a
                                           block freed on another stream */
  uint64_t bytesReserved;      /* device memory held from the driver now */
  uint64_t peakBytesReserved;  /* the most bytesReserved ever was */
  uint64_t bytesInUse;         /* handed out, not freed (size classes) */
  uint64_t bytesCached;        /* free blocks kept for reuse */
  uint64_t blocksCached;       /* how many */
} MoeRuntimeAllocatorStats;
MOE_RUNTIME_EXPORT void
moeRuntimeGetAllocatorStats(MoeRuntimeAllocatorStats *stats);
/* Synchronizes every device the runtime used and gives back to the driver
 * what it keeps: cached memory blocks (cuMemFree), pooled streams and
 * events, cached TMA descriptors. Memory still in use stays allocated.
 * Errors go to the sticky error state. */
MOE_RUNTIME_EXPORT void moeRuntimeEmptyCache(void);
/* Whether freed blocks are cached (default 1, or 0 when the environment
 * variable MOE_CUDA_ALLOC_CACHE is "0"). With 0, mgpuMemAlloc is cuMemAlloc
 * and mgpuMemFree synchronizes and calls cuMemFree. Returns the previous
 * setting; blocks already cached stay until moeRuntimeEmptyCache. */
MOE_RUNTIME_EXPORT int moeRuntimeSetAllocatorCaching(int enabled);

/* Tests only: drop all driver state (empty the caches, release retained
 * contexts, dlclose the driver, clear the error, forget this thread's
 * stream) so that the next call opens MOE_CUDA_DRIVER
 * again. Handles created before become invalid. Not thread-safe. */
MOE_RUNTIME_EXPORT void moeRuntimeResetForTesting(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* Every function above that MLIR emits, for tests: X(name). */
#define MOE_MGPU_ABI_FUNCTIONS(X)                                              \
  X(mgpuModuleLoad)                                                            \
  X(mgpuModuleLoadJIT)                                                         \
  X(mgpuModuleUnload)                                                          \
  X(mgpuModuleGetFunction)                                                     \
  X(mgpuLaunchKernel)                                                          \
  X(mgpuLaunchClusterKernel)                                                   \
  X(mgpuStreamCreate)                                                          \
  X(mgpuStreamDestroy)                                                         \
  X(mgpuStreamSynchronize)                                                     \
  X(mgpuStreamWaitEvent)                                                       \
  X(mgpuEventCreate)                                                           \
  X(mgpuEventDestroy)                                                          \
  X(mgpuEventSynchronize)                                                      \
  X(mgpuEventRecord)                                                           \
  X(mgpuMemAlloc)                                                              \
  X(mgpuMemFree)                                                               \
  X(mgpuMemcpy)                                                                \
  X(mgpuMemset32)                                                              \
  X(mgpuMemset16)                                                              \
  X(mgpuMemHostRegisterMemRef)                                                 \
  X(mgpuMemHostUnregisterMemRef)                                               \
  X(mgpuSetDefaultDevice)                                                      \
  X(mgpuTensorMapEncodeTiledMemref)

#endif /* MOE_RUNTIME_CUDA_MGPUABI_H */
