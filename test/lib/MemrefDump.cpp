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

#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

template <typename T>
void dump(const char *name, int64_t rank, void *descriptor) {
  // A ranked descriptor: base, aligned, offset, sizes[rank], strides[rank].
  auto *words = static_cast<int64_t *>(descriptor);
  T *aligned = reinterpret_cast<T *>(words[1]);
  int64_t offset = words[2];
  const int64_t *sizes = words + 3, *strides = words + 3 + rank;
  int64_t count = 1;
  std::printf("moe-dump %s sizes=[", name);
  for (int64_t d = 0; d < rank; ++d) {
    std::printf(d ? ", %lld" : "%lld", static_cast<long long>(sizes[d]));
    count *= sizes[d];
  }
  std::printf("]\n");
  // Row-major element order whatever the strides; contiguous rows are
  // written in one call.
  std::vector<int64_t> index(rank, 0);
  int64_t inner = rank ? sizes[rank - 1] : 1;
  bool unitInner = rank == 0 || strides[rank - 1] == 1;
  std::vector<T> row(unitInner ? 0 : inner);
  for (int64_t done = 0; done < count; done += inner) {
    int64_t at = offset;
    for (int64_t d = 0; d + 1 < rank; ++d)
      at += index[d] * strides[d];
    if (unitInner) {
      std::fwrite(aligned + at, sizeof(T), inner, stdout);
    } else {
      for (int64_t j = 0; j < inner; ++j)
        row[j] = aligned[at + j * strides[rank - 1]];
      std::fwrite(row.data(), sizeof(T), inner, stdout);
    }
    for (int64_t d = rank - 2; d >= 0; --d) {
      if (++index[d] < sizes[d])
        break;
      index[d] = 0;
    }
  }
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
