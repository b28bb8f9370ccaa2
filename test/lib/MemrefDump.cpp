//===- MemrefDump.cpp - binary memref output for the lit tests -------------===//
//
// libMoETestMemrefDump.so (in %mlir_runner_libs): moeTestDumpF32 and
// moeTestDumpI32, called like the MLIR runner utilities' printMemrefF32
// (an unranked memref: rank and descriptor pointer), write a memref to stdout
// as one header line, `moe-dump f32|i32 sizes=[S0, S1, ...]\n`, then its
// elements in row-major order as raw little-endian 4-byte words, then `\n`.
// test/gpu/Inputs/make-driver.py --dump=binary calls them instead of the text
// printers, and compare-memrefs.py reads either form: the gradients' weight
// results are millions of values, which the text form printed and parsed
// again at several seconds per run.
//
//===----------------------------------------------------------------------===//

#include "mlir/ExecutionEngine/CRunnerUtils.h"

#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

template <typename T>
void dump(const char *name, int64_t rank, void *descriptor) {
  // MLIR's view of the descriptor: sizes, strides, row-major iteration.
  DynamicMemRefType<T> m(UnrankedMemRefType<T>{rank, descriptor});
  std::printf("moe-dump %s sizes=[", name);
  for (int64_t d = 0; d < m.rank; ++d)
    std::printf(d ? ", %lld" : "%lld", static_cast<long long>(m.sizes[d]));
  std::printf("]\n");
  std::vector<T> values(m.begin(), m.end());
  std::fwrite(values.data(), sizeof(T), values.size(), stdout);
  std::printf("\n");
  std::fflush(stdout);
}

} // namespace

extern "C" void moeTestDumpF32(int64_t rank, void *descriptor) {
  dump<float>("f32", rank, descriptor);
}

extern "C" void moeTestDumpI32(int64_t rank, void *descriptor) {
  dump<int32_t>("i32", rank, descriptor);
}
