/*===- AotCudaSupport.c - the cuda target's call prologue/epilogue ----------===*/

#include "runtime/aot/AotSupport.h"
#include "runtime/cuda/MgpuAbi.h"

/* cuda.h's CU_STREAM_LEGACY: CUDA's legacy default stream, as a handle that
 * every stream argument of the driver accepts. */
#define MOE_CU_STREAM_LEGACY ((void *)0x1)

int32_t moeAotCudaBegin(const char *name, void *stream, void **previous) {
  /* LIB.so reports errors through moe_last_error(), not stderr. */
  moeRuntimeSetErrorPrinting(0);
  const char *pending = moeRuntimeGetLastError();
  if (pending) {
    moeAotSetError("%s: %s", name, pending);
    moeRuntimeClearError();
    return 1;
  }
  /* The call's work goes on `stream` (the runtime's thread stream, which
   * the lowered code uses and never synchronizes at its end: docs/aot.md).
   * NULL is CUDA's default stream: the legacy default stream, so that the
   * call is ordered with the other work on it (and with the blocking
   * streams) like any stream, without waiting on the host. */
  *previous = moeRuntimeSetStream(stream ? stream : MOE_CU_STREAM_LEGACY);
  return 0;
}

int32_t moeAotCudaEnd(const char *name, void *previous) {
  moeRuntimeSetStream(previous);
  const char *error = moeRuntimeGetLastError();
  if (!error)
    return 0;
  moeAotSetError("%s: %s", name, error);
  moeRuntimeClearError();
  return 1;
}
