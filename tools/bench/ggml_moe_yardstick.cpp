//===- ggml_moe_yardstick.cpp - ggml's MUL_MAT_ID at a MoE layer's shapes ===//
//
// A yardstick for tools/bench/cpu_quant_bench.py (--ggml=DIR), never a
// dependency of moe-mlir: it is compiled by the benchmark, against a ggml
// build the user made outside the repository (tools/bench/README.md), only
// when one is given.
//
// It times the two expert GEMMs of one MoE layer as llama.cpp's ggml runs
// them (ggml_mul_mat_id, the op test-backend-ops calls MUL_MAT_ID): the gate
// and up projections, weights [D -> 2H] per expert, on the token rows
// broadcast to their K experts, then the down projection, [H -> D] per
// expert, on the K rows of every token. The activation between them and the
// routing are left out (ggml's time is a lower bound of its layer). Weights
// of `type` (q4_0, q8_0, f16 or bf16: ggml quantizes the activations to its
// vec-dot type itself), activations f32, each token's K experts distinct
// and drawn uniformly (seeded), as the moe-run layers of the benchmark route
// on average. `layers` independent layers per graph, each with its own
// weights, so that every run reads all their weights from memory.
//
// usage: ggml_moe_yardstick TYPE D H E K T LAYERS THREADS RUNS
// prints: "ggml ms/layer <median over RUNS of graph time / LAYERS>"
//
//===----------------------------------------------------------------------===//

#include "ggml-cpu.h"
#include "ggml.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "ggml_moe_yardstick: %s\n", message.c_str());
  std::exit(1);
}

/// Uniform values in [-a, a) from a 64-bit LCG (fast: the weights of a
/// benchmark run are GBs).
struct Uniform {
  uint64_t state;
  float operator()(float a) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return a * (float(uint32_t(state >> 40)) * 0x1.0p-23f - 1.0f);
  }
};

/// Random weights [rows of n_per_row] into `t` (of its type): quantized by
/// ggml for q4_0 / q8_0, converted for f16 / bf16.
void fillWeights(ggml_tensor *t, Uniform &rng) {
  const int64_t perRow = t->ne[0], rows = ggml_nrows(t);
  const float a = std::sqrt(3.0f / float(perRow)); // variance 1 / perRow
  // One expert's matrix at a time: the f32 copy stays small.
  const int64_t chunk = t->ne[1];
  std::vector<float> src(size_t(chunk * perRow));
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    for (float &v : src)
      v = rng(a);
    char *dst = static_cast<char *>(t->data) + r0 * ggml_row_size(t->type, perRow);
    if (t->type == GGML_TYPE_F16)
      ggml_fp32_to_fp16_row(src.data(), reinterpret_cast<ggml_fp16_t *>(dst), chunk * perRow);
    else if (t->type == GGML_TYPE_BF16)
      ggml_fp32_to_bf16_row(src.data(), reinterpret_cast<ggml_bf16_t *>(dst), chunk * perRow);
    else
      ggml_quantize_chunk(t->type, src.data(), dst, 0, chunk, perRow, nullptr);
  }
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 10)
    die("usage: ggml_moe_yardstick TYPE D H E K T LAYERS THREADS RUNS");
  const std::string typeName = argv[1];
  ggml_type type;
  if (typeName == "q4_0")
    type = GGML_TYPE_Q4_0;
  else if (typeName == "q8_0")
    type = GGML_TYPE_Q8_0;
  else if (typeName == "f16")
    type = GGML_TYPE_F16;
  else if (typeName == "bf16")
    type = GGML_TYPE_BF16;
  else
    die("TYPE must be q4_0, q8_0, f16 or bf16, got '" + typeName + "'");
  int64_t v[8];
  for (int i = 0; i < 8; ++i) {
    char *end = nullptr;
    v[i] = std::strtoll(argv[2 + i], &end, 10);
    if (!end || *end || v[i] < 1)
      die(std::string("argument '") + argv[2 + i] + "' must be an integer >= 1");
  }
  const int64_t D = v[0], H = v[1], E = v[2], K = v[3], T = v[4], L = v[5];
  const int threads = int(v[6]), runs = int(v[7]);
  if (K > E)
    die("K must be at most E");
  if (D % ggml_blck_size(type) || H % ggml_blck_size(type))
    die("D and H must be multiples of the type's block");

  ggml_cpu_init();
  // Weights, activations, outputs and the graph, all in one context.
  const size_t weights =
      size_t(L) * size_t(E) *
      (ggml_row_size(type, D) * size_t(2 * H) + ggml_row_size(type, H) * size_t(D));
  const size_t acts = size_t(L) * size_t(T) * size_t(K) * sizeof(float) *
                          size_t(D + 2 * H + H + D) +
                      size_t(T) * sizeof(float) * size_t(D) + size_t(T * K) * 4;
  const size_t graphNodes = size_t(16 * L + 16);
  ggml_init_params params{weights + acts + 64 * ggml_tensor_overhead() * size_t(L + 2) +
                              ggml_graph_overhead_custom(graphNodes, false) + (64u << 20),
                          nullptr, false};
  ggml_context *ctx = ggml_init(params);
  if (!ctx)
    die("ggml_init failed (" + std::to_string(params.mem_size >> 20) + " MiB)");

  std::mt19937 rng(1);
  Uniform uniform{1};
  // x [D, 1, T] (broadcast to the K experts of its token), ids [K, T].
  ggml_tensor *x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, D, 1, T);
  for (int64_t i = 0; i < D * T; ++i)
    static_cast<float *>(x->data)[i] = uniform(1.7f);
  ggml_tensor *ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, K, T);
  std::vector<int32_t> experts(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e)
      experts[size_t(e)] = int32_t(e);
    std::shuffle(experts.begin(), experts.end(), rng);
    std::memcpy(static_cast<int32_t *>(ids->data) + t * K, experts.data(), size_t(K) * 4);
  }
  // The down projection's input [H, K, T]: the rows' activations.
  ggml_tensor *h = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, H, K, T);
  for (int64_t i = 0; i < H * K * T; ++i)
    static_cast<float *>(h->data)[i] = uniform(1.7f);

  ggml_cgraph *graph = ggml_new_graph_custom(ctx, graphNodes, false);
  for (int64_t l = 0; l < L; ++l) {
    ggml_tensor *w13 = ggml_new_tensor_3d(ctx, type, D, 2 * H, E); // [D -> 2H] per expert
    ggml_tensor *w2 = ggml_new_tensor_3d(ctx, type, H, D, E);      // [H -> D] per expert
    fillWeights(w13, uniform);
    fillWeights(w2, uniform);
    ggml_build_forward_expand(graph, ggml_mul_mat_id(ctx, w13, x, ids)); // [2H, K, T]
    ggml_build_forward_expand(graph, ggml_mul_mat_id(ctx, w2, h, ids));  // [D, K, T]
  }

  ggml_threadpool_params tpp = ggml_threadpool_params_default(threads);
  ggml_threadpool *pool = ggml_threadpool_new(&tpp);
  if (!pool)
    die("ggml_threadpool_new failed");
  ggml_cplan plan = ggml_graph_plan(graph, threads, pool);
  std::vector<uint8_t> work(plan.work_size);
  plan.work_data = work.data();
  std::vector<double> ms;
  for (int r = 0; r < runs + 2; ++r) {
    auto start = std::chrono::steady_clock::now();
    if (ggml_graph_compute(graph, &plan) != GGML_STATUS_SUCCESS)
      die("ggml_graph_compute failed");
    std::chrono::duration<double, std::milli> d = std::chrono::steady_clock::now() - start;
    if (r >= 2) // two warm-up runs
      ms.push_back(d.count() / double(L));
  }
  std::sort(ms.begin(), ms.end());
  std::printf("ggml ms/layer %.4f\n", ms[ms.size() / 2]);
  ggml_threadpool_free(pool);
  ggml_free(ctx);
  return 0;
}
