/*===- AotSupport.c - what moe-compile's wrappers call ----------------------===*/

#include "runtime/aot/AotSupport.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static __thread char lastError[512];

const char *moe_last_error(void) { return lastError; }

void moeAotSetError(const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(lastError, sizeof lastError, format, args);
  va_end(args);
  for (char *c = lastError; *c; ++c)
    if (*c == '\n' || *c == '\r')
      *c = ' ';
}

/* Buffers larger than this are refused: no sane call asks for them, and the
 * size arithmetic of the lowered code stays far from overflowing. */
#define MOE_AOT_MAX_BYTES ((int64_t)1 << 62)

int32_t moeAotCheckCall(const char *name, const int64_t *table,
                        void *const *args, void *const *results,
                        const int64_t *dims) {
  lastError[0] = '\0';
  int64_t numArgs = table[0], numResults = table[1], numDims = table[2];
  if (numArgs > 0 && !args) {
    moeAotSetError("%s: args is NULL (the function takes %lld arguments)", name,
                   (long long)numArgs);
    return 1;
  }
  if (numResults > 0 && !results) {
    moeAotSetError("%s: results is NULL (the function has %lld results)", name,
                   (long long)numResults);
    return 1;
  }
  if (numDims > 0 && !dims) {
    moeAotSetError("%s: dims is NULL (the arguments have %lld dynamic "
                   "dimensions)",
                   name, (long long)numDims);
    return 1;
  }
  for (int64_t i = 0; i < numDims; ++i) {
    if (dims[i] < 0) {
      moeAotSetError("%s: dims[%lld] = %lld is negative", name, (long long)i,
                     (long long)dims[i]);
      return 1;
    }
  }
  const int64_t *entry = table + 3;
  int64_t nextDim = 0;
  for (int64_t b = 0; b < numArgs + numResults; ++b) {
    int isResult = b >= numArgs;
    int64_t index = isResult ? b - numArgs : b;
    int64_t rank = entry[0], bytes = entry[1];
    for (int64_t d = 0; d < rank; ++d) {
      int64_t size = entry[2 + d];
      if (size == -1)
        size = dims[nextDim++];
      else if (size <= -2)
        size = dims[-2 - size];
      if (size != 0 && bytes > MOE_AOT_MAX_BYTES / size) {
        moeAotSetError("%s: %s %lld would be larger than 2^62 bytes (dims too "
                       "large)",
                       name, isResult ? "result" : "argument",
                       (long long)index);
        return 1;
      }
      bytes *= size;
    }
    void *ptr = isResult ? results[index] : args[index];
    if (!ptr && bytes > 0) {
      moeAotSetError("%s: %s[%lld] is NULL", name,
                     isResult ? "results" : "args", (long long)index);
      return 1;
    }
    entry += 2 + rank;
  }
  return 0;
}

/* memref.copy of non-contiguous memrefs lowers to a call of memrefCopy
 * (MLIR's libmlir_c_runner_utils, which LIB.so must not need): the same
 * function, over MLIR's ranked descriptor layout
 *   {char *allocated, *aligned; int64_t offset, sizes[rank], strides[rank]}
 * reached through the unranked {int64_t rank; void *descriptor}. */
typedef struct {
  int64_t rank;
  void *descriptor;
} MoeAotUnrankedMemRef;

typedef struct {
  char *allocated;
  char *aligned;
  int64_t offset;
  int64_t sizesAndStrides[];
} MoeAotMemRefDescriptor;

void memrefCopy(int64_t elemSize, MoeAotUnrankedMemRef *src,
                MoeAotUnrankedMemRef *dst) {
  int64_t rank = src->rank;
  const MoeAotMemRefDescriptor *s = src->descriptor;
  const MoeAotMemRefDescriptor *d = dst->descriptor;
  const int64_t *sizes = s->sizesAndStrides;
  const int64_t *srcStrides = s->sizesAndStrides + rank;
  const int64_t *dstStrides = d->sizesAndStrides + rank;
  char *srcBase = s->aligned + s->offset * elemSize;
  char *dstBase = d->aligned + d->offset * elemSize;
  int64_t count = 1;
  for (int64_t i = 0; i < rank; ++i)
    count *= sizes[i];
  if (count == 0)
    return;
  /* Both contiguous and row-major: one memcpy. */
  int contiguous = 1;
  int64_t expected = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    if (sizes[i] != 1 && (srcStrides[i] != expected || dstStrides[i] != expected))
      contiguous = 0;
    expected *= sizes[i];
  }
  if (contiguous) {
    memmove(dstBase, srcBase, (size_t)(count * elemSize));
    return;
  }
  int64_t index[rank > 0 ? rank : 1];
  for (int64_t i = 0; i < rank; ++i)
    index[i] = 0;
  int64_t srcOffset = 0, dstOffset = 0;
  for (;;) {
    memcpy(dstBase + dstOffset * elemSize, srcBase + srcOffset * elemSize,
           (size_t)elemSize);
    int64_t axis = rank - 1;
    for (; axis >= 0; --axis) {
      ++index[axis];
      srcOffset += srcStrides[axis];
      dstOffset += dstStrides[axis];
      if (index[axis] < sizes[axis])
        break;
      srcOffset -= srcStrides[axis] * sizes[axis];
      dstOffset -= dstStrides[axis] * sizes[axis];
      index[axis] = 0;
    }
    if (axis < 0)
      return;
  }
}
