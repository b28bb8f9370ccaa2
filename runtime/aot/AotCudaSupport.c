/*===- AotCudaSupport.c - the cuda target's call prologue/epilogue ----------===*/

#include "runtime/aot/AotSupport.h"
#include "runtime/cuda/MgpuAbi.h"

int32_t moeAotCudaBegin(const char *name, void *stream, void **previous) {
  /* LIB.so reports errors through moe_last_error(), not stderr. */
  moeRuntimeSetErrorPrinting(0);
  const char *pending = moeRuntimeGetLastError();
  if (pending) {
    moeAotSetError("%s: %s", name, pending);
    moeRuntimeClearError();
    return 1;
  }
  /* CUDA's default stream: the lowered code runs on a stream of the
   * runtime, after the work already queued on the default stream. */
  if (!stream) {
    mgpuStreamSynchronize(0);
    const char *error = moeRuntimeGetLastError();
    if (error) {
      moeAotSetError("%s: %s", name, error);
      moeRuntimeClearError();
      return 1;
    }
  }
  *previous = moeRuntimeSetStream(stream);
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
