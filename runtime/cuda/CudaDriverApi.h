//===- CudaDriverApi.h - Minimal CUDA driver API declarations ---*- C++ -*-===//
//
// Our own declarations of the part of the CUDA driver API (libcuda.so.1) the
// runtime uses, so that building moe-mlir never needs cuda.h. The driver is
// opened at run time with dlopen and every entry point is looked up with
// dlsym under the exact versioned symbol name that cuda.h (CUDA 12/13) maps
// the public name to (cuMemAlloc -> cuMemAlloc_v2, cuStreamDestroy ->
// cuStreamDestroy_v2, ...). Stream-ordered calls use the legacy default
// stream names (no _ptsz/_ptds suffix): this runtime always passes explicit
// streams.
//
// ABI facts relied on (x86-64 / aarch64 Linux, LP64):
//   - CUresult, CUdevice and every enum below are 32-bit ints;
//   - CUdeviceptr is `unsigned long long` (64 bits);
//   - CUcontext, CUmodule, CUfunction, CUstream, CUevent are opaque pointers;
//   - the enum values, CUlaunchConfig/CUlaunchAttribute layouts and the
//     128-byte, 128-aligned CUtensorMap are those of cuda.h (CUDA 12.x/13.0).
// test/unit/cuda/DriverAbiCheckTest.cpp static_asserts every value, layout,
// function type and symbol name here against the real cuda.h whenever a CUDA
// toolkit is present at build time (it is optional).
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_CUDA_CUDADRIVERAPI_H
#define MOE_RUNTIME_CUDA_CUDADRIVERAPI_H

#include <cstddef>
#include <cstdint>

namespace moe {
namespace cudrv {

// Result codes (cudaError_enum). Only the ones the runtime names itself; any
// other value is reported through cuGetErrorName/cuGetErrorString.
enum CUresult : int {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_UNKNOWN = 999,
};

using CUdevice = int;
using CUdeviceptr = unsigned long long;
using cuuint32_t = uint32_t;
using cuuint64_t = uint64_t;

struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
using CUcontext = CUctx_st *;
using CUmodule = CUmod_st *;
using CUfunction = CUfunc_st *;
using CUstream = CUstream_st *;
using CUevent = CUevent_st *;

enum CUdevice_attribute : int {
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

enum CUfunction_attribute : int {
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

enum CUjit_option : int {
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CU_JIT_OPTIMIZATION_LEVEL = 7,
};

// Flags (plain unsigned int parameters in the driver API).
constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
constexpr unsigned CU_MEM_ATTACH_GLOBAL = 0x1;

// Cluster launches (cuLaunchKernelEx, CUDA 12.0+).
enum CUlaunchAttributeID : int {
  CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
  CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE = 5,
};
enum CUclusterSchedulingPolicy : int {
  CU_CLUSTER_SCHEDULING_POLICY_SPREAD = 1,
};
union CUlaunchAttributeValue {
  char pad[64];
  void *alignment; // other members hold pointers: 8-byte aligned
  struct {
    unsigned x, y, z;
  } clusterDim;
  CUclusterSchedulingPolicy clusterSchedulingPolicyPreference;
};
struct CUlaunchAttribute {
  CUlaunchAttributeID id;
  char pad[8 - sizeof(CUlaunchAttributeID)];
  CUlaunchAttributeValue value;
};
struct CUlaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute *attrs;
  unsigned numAttrs;
};

// Tensor memory accelerator descriptors (cuTensorMapEncodeTiled, CUDA 12.0+).
struct alignas(128) CUtensorMap {
  cuuint64_t opaque[16];
};
enum CUtensorMapDataType : int {
  CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0,
  CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ = 12, // the last one with a known size
};
enum CUtensorMapInterleave : int {};
enum CUtensorMapSwizzle : int {};
enum CUtensorMapL2promotion : int {};
enum CUtensorMapFloatOOBfill : int {};

// The entry points: X(member, public name, symbol, result, (params)), where
// `symbol` is the name looked up with dlsym (#symbol) and the name cuda.h
// maps `public name` to.
// REQUIRED ones must all resolve for the driver to be usable; OPTIONAL ones
// (newer than CUDA 11) are checked where they are used.
#define MOE_CUDA_DRIVER_REQUIRED(X)                                            \
  X(GetErrorName, cuGetErrorName, cuGetErrorName, CUresult,                  \
    (CUresult, const char **))                                                 \
  X(GetErrorString, cuGetErrorString, cuGetErrorString, CUresult,            \
    (CUresult, const char **))                                                 \
  X(Init, cuInit, cuInit, CUresult, (unsigned int))                          \
  X(DriverGetVersion, cuDriverGetVersion, cuDriverGetVersion, CUresult,      \
    (int *))                                                                   \
  X(DeviceGetCount, cuDeviceGetCount, cuDeviceGetCount, CUresult, (int *))   \
  X(DeviceGet, cuDeviceGet, cuDeviceGet, CUresult, (CUdevice *, int))        \
  X(DeviceGetName, cuDeviceGetName, cuDeviceGetName, CUresult,               \
    (char *, int, CUdevice))                                                   \
  X(DeviceGetAttribute, cuDeviceGetAttribute, cuDeviceGetAttribute,          \
    CUresult, (int *, CUdevice_attribute, CUdevice))                           \
  X(DeviceTotalMem, cuDeviceTotalMem, cuDeviceTotalMem_v2, CUresult,         \
    (size_t *, CUdevice))                                                      \
  X(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain,                          \
    cuDevicePrimaryCtxRetain, CUresult, (CUcontext *, CUdevice))             \
  X(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease,                        \
    cuDevicePrimaryCtxRelease_v2, CUresult, (CUdevice))                      \
  X(CtxPushCurrent, cuCtxPushCurrent, cuCtxPushCurrent_v2, CUresult,         \
    (CUcontext))                                                               \
  X(CtxPopCurrent, cuCtxPopCurrent, cuCtxPopCurrent_v2, CUresult,            \
    (CUcontext *))                                                             \
  X(CtxSynchronize, cuCtxSynchronize, cuCtxSynchronize, CUresult, ())        \
  X(ModuleLoadData, cuModuleLoadData, cuModuleLoadData, CUresult,            \
    (CUmodule *, const void *))                                                \
  X(ModuleLoadDataEx, cuModuleLoadDataEx, cuModuleLoadDataEx, CUresult,      \
    (CUmodule *, const void *, unsigned int, CUjit_option *, void **))         \
  X(ModuleUnload, cuModuleUnload, cuModuleUnload, CUresult, (CUmodule))      \
  X(ModuleGetFunction, cuModuleGetFunction, cuModuleGetFunction, CUresult,   \
    (CUfunction *, CUmodule, const char *))                                    \
  X(FuncSetAttribute, cuFuncSetAttribute, cuFuncSetAttribute, CUresult,      \
    (CUfunction, CUfunction_attribute, int))                                   \
  X(LaunchKernel, cuLaunchKernel, cuLaunchKernel, CUresult,                  \
    (CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,       \
     unsigned int, unsigned int, unsigned int, CUstream, void **, void **))    \
  X(StreamCreate, cuStreamCreate, cuStreamCreate, CUresult,                  \
    (CUstream *, unsigned int))                                                \
  X(StreamDestroy, cuStreamDestroy, cuStreamDestroy_v2, CUresult,            \
    (CUstream))                                                                \
  X(StreamSynchronize, cuStreamSynchronize, cuStreamSynchronize, CUresult,   \
    (CUstream))                                                                \
  X(StreamWaitEvent, cuStreamWaitEvent, cuStreamWaitEvent, CUresult,         \
    (CUstream, CUevent, unsigned int))                                         \
  X(EventCreate, cuEventCreate, cuEventCreate, CUresult,                     \
    (CUevent *, unsigned int))                                                 \
  X(EventDestroy, cuEventDestroy, cuEventDestroy_v2, CUresult, (CUevent))    \
  X(EventRecord, cuEventRecord, cuEventRecord, CUresult,                     \
    (CUevent, CUstream))                                                       \
  X(EventSynchronize, cuEventSynchronize, cuEventSynchronize, CUresult,      \
    (CUevent))                                                                 \
  X(MemAlloc, cuMemAlloc, cuMemAlloc_v2, CUresult, (CUdeviceptr *, size_t))  \
  X(MemAllocManaged, cuMemAllocManaged, cuMemAllocManaged, CUresult,         \
    (CUdeviceptr *, size_t, unsigned int))                                     \
  X(MemFree, cuMemFree, cuMemFree_v2, CUresult, (CUdeviceptr))               \
  X(MemcpyAsync, cuMemcpyAsync, cuMemcpyAsync, CUresult,                     \
    (CUdeviceptr, CUdeviceptr, size_t, CUstream))                              \
  X(MemcpyHtoD, cuMemcpyHtoD, cuMemcpyHtoD_v2, CUresult,                     \
    (CUdeviceptr, const void *, size_t))                                       \
  X(MemcpyDtoH, cuMemcpyDtoH, cuMemcpyDtoH_v2, CUresult,                     \
    (void *, CUdeviceptr, size_t))                                             \
  X(MemsetD16Async, cuMemsetD16Async, cuMemsetD16Async, CUresult,            \
    (CUdeviceptr, unsigned short, size_t, CUstream))                           \
  X(MemsetD32Async, cuMemsetD32Async, cuMemsetD32Async, CUresult,            \
    (CUdeviceptr, unsigned int, size_t, CUstream))                             \
  X(MemHostRegister, cuMemHostRegister, cuMemHostRegister_v2, CUresult,      \
    (void *, size_t, unsigned int))                                            \
  X(MemHostUnregister, cuMemHostUnregister, cuMemHostUnregister, CUresult,   \
    (void *))

#define MOE_CUDA_DRIVER_OPTIONAL(X)                                            \
  X(LaunchKernelEx, cuLaunchKernelEx, cuLaunchKernelEx, CUresult,            \
    (const CUlaunchConfig *, CUfunction, void **, void **))                    \
  X(TensorMapEncodeTiled, cuTensorMapEncodeTiled, cuTensorMapEncodeTiled,    \
    CUresult,                                                                  \
    (CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,                   \
     const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,               \
     const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,            \
     CUtensorMapL2promotion, CUtensorMapFloatOOBfill))

#define MOE_CUDA_DRIVER_DECLARE_PFN(member, name, symbol, result, params)      \
  using PFN_##member = result(*) params;
MOE_CUDA_DRIVER_REQUIRED(MOE_CUDA_DRIVER_DECLARE_PFN)
MOE_CUDA_DRIVER_OPTIONAL(MOE_CUDA_DRIVER_DECLARE_PFN)
#undef MOE_CUDA_DRIVER_DECLARE_PFN

/// The resolved entry points of one loaded driver.
struct DriverFunctions {
#define MOE_CUDA_DRIVER_MEMBER(member, name, symbol, result, params)           \
  PFN_##member member = nullptr;
  MOE_CUDA_DRIVER_REQUIRED(MOE_CUDA_DRIVER_MEMBER)
  MOE_CUDA_DRIVER_OPTIONAL(MOE_CUDA_DRIVER_MEMBER)
#undef MOE_CUDA_DRIVER_MEMBER
};

} // namespace cudrv
} // namespace moe

#endif // MOE_RUNTIME_CUDA_CUDADRIVERAPI_H
