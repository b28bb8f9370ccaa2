/*===- AotSupport.h - what moe-compile's wrappers call ------------*- C -*-===//
 *
 * Linked statically (hidden) into every LIB.so made by moe-compile (see
 * docs/aot.md): the thread-local error of the C ABI, moe_last_error(), and
 * the checks of a call's arguments. Written in C against libc only, so that
 * LIB.so needs no C++ runtime for it.
 *===----------------------------------------------------------------------===*/
#ifndef MOE_RUNTIME_AOT_AOTSUPPORT_H
#define MOE_RUNTIME_AOT_AOTSUPPORT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The C ABI: the calling thread's last error, "" when the last call of this
 * thread succeeded. Exported by LIB.so. */
__attribute__((visibility("default"))) const char *moe_last_error(void);

/* Sets this thread's error (printf format; one line, truncated at 511
 * bytes). */
void moeAotSetError(const char *format, ...)
    __attribute__((format(printf, 1, 2)));

/* Checks one call of `name` (the exported symbol, for messages) against its
 * signature `table` (int64):
 *   [numArgs, numResults, numDims, then per argument and per result:
 *    rank, element bytes, then `rank` sizes]
 * where a size >= 0 is static, -1 is the next value of `dims` (arguments
 * only, in order of appearance) and v <= -2 is dims[-2 - v] (a result's
 * dimension tied to an argument's). Clears this thread's error first.
 * Returns 0 when the call may proceed, 1 with the error set otherwise:
 * NULL arrays or buffers, a negative dimension, a buffer larger than 2^62
 * bytes. */
int32_t moeAotCheckCall(const char *name, const int64_t *table,
                        void *const *args, void *const *results,
                        const int64_t *dims);

/* cuda target only (AotCudaSupport.c, needs libMoECudaRuntime.so). Begin:
 * fails with a pending runtime error (reported, then cleared); with a NULL
 * stream waits for CUDA's default stream; makes `stream` this thread's
 * stream for the lowered code (moeRuntimeSetStream), keeping the previous
 * one in *previous. End: restores it and reports the first runtime error of
 * the call (then clears it). Both return 0 on success, 1 with the error
 * set. */
int32_t moeAotCudaBegin(const char *name, void *stream, void **previous);
int32_t moeAotCudaEnd(const char *name, void *previous);

#ifdef __cplusplus
}
#endif

#endif /* MOE_RUNTIME_AOT_AOTSUPPORT_H */
