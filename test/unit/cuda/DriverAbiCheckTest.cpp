//===- DriverAbiCheckTest.cpp - Our driver declarations vs cuda.h ---------===//
//
// When a CUDA toolkit is present at build time (MOE_HAVE_CUDA_H), this file
// is compiled against the real cuda.h and static_asserts that every
// declaration in runtime/cuda/CudaDriverApi.h matches it: function types
// (with our opaque types mapped to cuda.h's), the versioned symbol each
// public name maps to (cuMemAlloc -> cuMemAlloc_v2), enum values, flags and
// struct layouts. A mismatch fails the build. Without a toolkit the test is
// skipped; the runtime itself never needs cuda.h.
//
//===----------------------------------------------------------------------===//

#include <gtest/gtest.h>

#ifdef MOE_HAVE_CUDA_H

#include <cuda.h>

#include "runtime/cuda/CudaDriverApi.h"

#include <cstddef>
#include <type_traits>

namespace {

namespace my = moe::cudrv;

// Maps our types to cuda.h's; everything else maps to itself.
template <class T> struct Map { using type = T; };
template <class T> struct Map<T *> { using type = typename Map<T>::type *; };
template <class T> struct Map<const T> {
  using type = const typename Map<T>::type;
};
template <class R, class... A> struct Map<R (*)(A...)> {
  using type = typename Map<R>::type (*)(typename Map<A>::type...);
};
#define MOE_MAP(ours, theirs)                                                  \
  template <> struct Map<my::ours> { using type = ::theirs; };
MOE_MAP(CUresult, CUresult)
MOE_MAP(CUctx_st, CUctx_st)
MOE_MAP(CUmod_st, CUmod_st)
MOE_MAP(CUfunc_st, CUfunc_st)
MOE_MAP(CUstream_st, CUstream_st)
MOE_MAP(CUevent_st, CUevent_st)
MOE_MAP(CUdevice_attribute, CUdevice_attribute)
MOE_MAP(CUfunction_attribute, CUfunction_attribute)
MOE_MAP(CUjit_option, CUjit_option)
MOE_MAP(CUlaunchConfig, CUlaunchConfig)
MOE_MAP(CUlaunchAttribute, CUlaunchAttribute)
MOE_MAP(CUtensorMap, CUtensorMap)
MOE_MAP(CUtensorMapDataType, CUtensorMapDataType)
MOE_MAP(CUtensorMapInterleave, CUtensorMapInterleave)
MOE_MAP(CUtensorMapSwizzle, CUtensorMapSwizzle)
MOE_MAP(CUtensorMapL2promotion, CUtensorMapL2promotion)
MOE_MAP(CUtensorMapFloatOOBfill, CUtensorMapFloatOOBfill)
#undef MOE_MAP

constexpr bool same(const char *a, const char *b) {
  return *a == *b && (*a == 0 || same(a + 1, b + 1));
}
#define MOE_STR(x) #x
#define MOE_XSTR(x) MOE_STR(x)

// `name` is macro-expanded by cuda.h (cuMemAlloc -> cuMemAlloc_v2); `symbol`
// is what the runtime dlsym()s.
#define MOE_CHECK_ENTRY(member, name, symbol, result, params)                  \
  static_assert(                                                               \
      std::is_same<Map<my::PFN_##member>::type, decltype(&::symbol)>::value,   \
      #symbol ": our type differs from cuda.h");                               \
  static_assert(same(MOE_XSTR(name), #symbol),                                 \
                "cuda.h does not map " #name " to " #symbol);
MOE_CUDA_DRIVER_REQUIRED(MOE_CHECK_ENTRY)
MOE_CUDA_DRIVER_OPTIONAL(MOE_CHECK_ENTRY)
#undef MOE_CHECK_ENTRY

// Types.
static_assert(sizeof(my::CUresult) == sizeof(::CUresult), "");
static_assert(std::is_same<my::CUdevice, ::CUdevice>::value, "");
static_assert(std::is_same<my::CUdeviceptr, ::CUdeviceptr>::value, "");
static_assert(std::is_same<my::cuuint32_t, ::cuuint32_t>::value, "");
static_assert(std::is_same<my::cuuint64_t, ::cuuint64_t>::value, "");

// Values.
#define MOE_SAME_VALUE(x)                                                      \
  static_assert(static_cast<long long>(my::x) == static_cast<long long>(::x),  \
                #x);
MOE_SAME_VALUE(CUDA_SUCCESS)
MOE_SAME_VALUE(CUDA_ERROR_INVALID_VALUE)
MOE_SAME_VALUE(CUDA_ERROR_OUT_OF_MEMORY)
MOE_SAME_VALUE(CUDA_ERROR_NOT_INITIALIZED)
MOE_SAME_VALUE(CUDA_ERROR_DEINITIALIZED)
MOE_SAME_VALUE(CUDA_ERROR_NO_DEVICE)
MOE_SAME_VALUE(CUDA_ERROR_INVALID_DEVICE)
MOE_SAME_VALUE(CUDA_ERROR_INVALID_IMAGE)
MOE_SAME_VALUE(CUDA_ERROR_INVALID_CONTEXT)
MOE_SAME_VALUE(CUDA_ERROR_NO_BINARY_FOR_GPU)
MOE_SAME_VALUE(CUDA_ERROR_INVALID_PTX)
MOE_SAME_VALUE(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
MOE_SAME_VALUE(CUDA_ERROR_INVALID_HANDLE)
MOE_SAME_VALUE(CUDA_ERROR_NOT_FOUND)
MOE_SAME_VALUE(CUDA_ERROR_ILLEGAL_ADDRESS)
MOE_SAME_VALUE(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
MOE_SAME_VALUE(CUDA_ERROR_LAUNCH_FAILED)
MOE_SAME_VALUE(CUDA_ERROR_NOT_SUPPORTED)
MOE_SAME_VALUE(CUDA_ERROR_UNKNOWN)
MOE_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
MOE_SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
MOE_SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
MOE_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
MOE_SAME_VALUE(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
MOE_SAME_VALUE(CU_JIT_INFO_LOG_BUFFER)
MOE_SAME_VALUE(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES)
MOE_SAME_VALUE(CU_JIT_ERROR_LOG_BUFFER)
MOE_SAME_VALUE(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
MOE_SAME_VALUE(CU_JIT_OPTIMIZATION_LEVEL)
MOE_SAME_VALUE(CU_STREAM_NON_BLOCKING)
MOE_SAME_VALUE(CU_EVENT_DISABLE_TIMING)
MOE_SAME_VALUE(CU_MEM_ATTACH_GLOBAL)
MOE_SAME_VALUE(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
MOE_SAME_VALUE(CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE)
MOE_SAME_VALUE(CU_CLUSTER_SCHEDULING_POLICY_SPREAD)
MOE_SAME_VALUE(CU_TENSOR_MAP_DATA_TYPE_UINT8)
MOE_SAME_VALUE(CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ)
#undef MOE_SAME_VALUE

// Layouts.
#define MOE_SAME_LAYOUT(T)                                                     \
  static_assert(sizeof(my::T) == sizeof(::T), #T " size");                     \
  static_assert(alignof(my::T) == alignof(::T), #T " alignment");
#define MOE_SAME_OFFSET(T, field)                                              \
  static_assert(offsetof(my::T, field) == offsetof(::T, field), #T ":"         \
                                                                   ":" #field);
MOE_SAME_LAYOUT(CUlaunchConfig)
MOE_SAME_OFFSET(CUlaunchConfig, gridDimX)
MOE_SAME_OFFSET(CUlaunchConfig, blockDimX)
MOE_SAME_OFFSET(CUlaunchConfig, sharedMemBytes)
MOE_SAME_OFFSET(CUlaunchConfig, hStream)
MOE_SAME_OFFSET(CUlaunchConfig, attrs)
MOE_SAME_OFFSET(CUlaunchConfig, numAttrs)
MOE_SAME_LAYOUT(CUlaunchAttribute)
MOE_SAME_OFFSET(CUlaunchAttribute, id)
MOE_SAME_OFFSET(CUlaunchAttribute, value)
MOE_SAME_LAYOUT(CUlaunchAttributeValue)
MOE_SAME_OFFSET(CUlaunchAttributeValue, clusterDim)
MOE_SAME_OFFSET(CUlaunchAttributeValue, clusterSchedulingPolicyPreference)
static_assert(sizeof(my::CUlaunchAttributeValue::clusterDim) ==
                  sizeof(::CUlaunchAttributeValue::clusterDim),
              "clusterDim");
MOE_SAME_LAYOUT(CUtensorMap)
#undef MOE_SAME_LAYOUT
#undef MOE_SAME_OFFSET

} // namespace

TEST(DriverAbi, MatchesCudaH) {
  // Everything is checked at compile time; record which cuda.h it was.
  RecordProperty("CUDA_VERSION", CUDA_VERSION);
  EXPECT_GE(CUDA_VERSION, 12000);
}

#else

TEST(DriverAbi, MatchesCudaH) {
  GTEST_SKIP() << "no cuda.h at build time: the declarations were not checked";
}

#endif
