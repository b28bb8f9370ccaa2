/* aot-call: calls an entry point of a moe-compile library with zero-filled
 * buffers, for the tests of moe-compile's C ABI.
 *
 *   aot-call LIB.so FUNC [--args=B0,B1,...] [--results=B0,...] [--dims=D0,...]
 *            [--null-dims] [--device] [--stream] [--streams=S] [--calls=N]
 *            [--sync]
 *
 * B: buffer sizes in bytes. --device: buffers from mgpuMemAlloc of the
 * library's libMoECudaRuntime (device memory), --stream: a stream from
 * mgpuStreamCreate instead of NULL (CUDA's default stream), --streams=S:
 * S such streams, call N on stream (N-1) mod S. The calls are
 * stream-ordered (docs/aot.md): --sync synchronizes every stream used after
 * the last call, as a caller does before it reads the results. Prints the
 * signature, then per call "call N: rc=R error='...'", "synchronized" and,
 * with --device, the runtime's pending error. Exit code 0 unless the
 * library cannot be used. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*entry_fn)(void *const *, void *const *, const int64_t *, void *);
typedef const char *(*text_fn)(void);
typedef void *(*alloc_fn)(uint64_t, void *, int8_t);
typedef void *(*stream_fn)(void);
typedef void (*sync_fn)(void *);

static int parse_list(const char *text, int64_t *out, int max) {
  int n = 0;
  while (*text && n < max) {
    char *end;
    out[n++] = strtoll(text, &end, 10);
    text = *end == ',' ? end + 1 : end;
  }
  return n;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: aot-call LIB.so FUNC [options]\n");
    return 2;
  }
  int64_t argBytes[64], resultBytes[64], dims[64];
  int numArgs = 0, numResults = 0, numDims = 0, device = 0, useStream = 0;
  int nullDims = 0, calls = 1, numStreams = 0, sync = 0;
  for (int i = 3; i < argc; ++i) {
    if (!strncmp(argv[i], "--args=", 7))
      numArgs = parse_list(argv[i] + 7, argBytes, 64);
    else if (!strncmp(argv[i], "--results=", 10))
      numResults = parse_list(argv[i] + 10, resultBytes, 64);
    else if (!strncmp(argv[i], "--dims=", 7))
      numDims = parse_list(argv[i] + 7, dims, 64);
    else if (!strcmp(argv[i], "--null-dims"))
      nullDims = 1;
    else if (!strcmp(argv[i], "--device"))
      device = 1;
    else if (!strcmp(argv[i], "--stream"))
      useStream = 1;
    else if (!strncmp(argv[i], "--streams=", 10))
      numStreams = atoi(argv[i] + 10);
    else if (!strcmp(argv[i], "--sync"))
      sync = 1;
    else if (!strncmp(argv[i], "--calls=", 8))
      calls = atoi(argv[i] + 8);
    else {
      fprintf(stderr, "aot-call: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "aot-call: %s\n", dlerror());
    return 2;
  }
  char name[256];
  snprintf(name, sizeof name, "moe_%s", argv[2]);
  entry_fn entry = (entry_fn)dlsym(lib, name);
  snprintf(name, sizeof name, "moe_%s_signature", argv[2]);
  text_fn signature = (text_fn)dlsym(lib, name);
  text_fn lastError = (text_fn)dlsym(lib, "moe_last_error");
  if (!entry || !signature || !lastError) {
    fprintf(stderr, "aot-call: %s does not export moe_%s\n", argv[1], argv[2]);
    return 2;
  }
  printf("signature: %s\n", signature());
  alloc_fn alloc = 0;
  text_fn runtimeError = 0;
  sync_fn synchronize = 0;
  void *streams[16] = {0};
  if (useStream && numStreams == 0)
    numStreams = 1;
  if (numStreams < 0 || numStreams > 16) {
    fprintf(stderr, "aot-call: --streams must be in [0, 16]\n");
    return 2;
  }
  if (device) {
    alloc = (alloc_fn)dlsym(lib, "mgpuMemAlloc");
    runtimeError = (text_fn)dlsym(lib, "moeRuntimeGetLastError");
    stream_fn create = (stream_fn)dlsym(lib, "mgpuStreamCreate");
    synchronize = (sync_fn)dlsym(lib, "mgpuStreamSynchronize");
    if (!alloc || !runtimeError || !create || !synchronize) {
      fprintf(stderr, "aot-call: %s does not bring libMoECudaRuntime\n", argv[1]);
      return 2;
    }
    for (int i = 0; i < numStreams; ++i)
      streams[i] = create();
  }
  void *args[64], *results[64];
  for (int i = 0; i < numArgs; ++i)
    args[i] = device ? alloc((uint64_t)argBytes[i], 0, 0) : calloc(1, (size_t)argBytes[i] + 1);
  for (int i = 0; i < numResults; ++i)
    results[i] = device ? alloc((uint64_t)resultBytes[i], 0, 0)
                        : calloc(1, (size_t)resultBytes[i] + 1);
  for (int c = 1; c <= calls; ++c) {
    void *stream = numStreams ? streams[(c - 1) % numStreams] : 0;
    int rc = entry(args, results, nullDims ? NULL : (numDims ? dims : NULL), stream);
    printf("call %d: rc=%d error='%s'\n", c, rc, lastError());
  }
  if (sync && synchronize) {
    for (int i = 0; i < (numStreams ? numStreams : 1); ++i)
      synchronize(streams[i]);
    printf("synchronized\n");
  }
  if (device) {
    const char *pending = runtimeError();
    printf("runtime error: %s\n", pending ? pending : "none");
  }
  return 0;
}
