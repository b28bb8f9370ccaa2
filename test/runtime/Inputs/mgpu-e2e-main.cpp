// Driver of Inputs/mgpu-e2e.mlir: calls the lowered @run on a host buffer
// and prints what came back and the runtime's sticky error.
#include "runtime/cuda/MgpuAbi.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

// @run(%host: memref<?xf32>, %v: f32), memref expanded by the lowering.
extern "C" void run(float *allocated, float *aligned, int64_t offset,
                    int64_t size, int64_t stride, float value);

int main(int argc, char **argv) {
  int64_t n = argc > 1 ? std::atoll(argv[1]) : 1000;
  std::vector<float> host(n, -1.0f);
  run(host.data(), host.data(), 0, n, 1, 2.5f);
  int good = 0;
  for (float x : host)
    good += x == 2.5f;
  std::printf("n = %lld, filled = %d, first = %g, last = %g\n", (long long)n,
              good, double(host.front()), double(host.back()));
  const char *error = moeRuntimeGetLastError();
  std::printf("runtime error: %s\n", error ? error : "none");
  return error ? 1 : 0;
}
