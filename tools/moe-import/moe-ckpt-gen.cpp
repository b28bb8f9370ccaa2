//===- moe-ckpt-gen.cpp - Tiny synthetic Hugging Face MoE checkpoints -----===//
//
// Test helper. Writes a checkpoint directory (config.json + safetensors,
// sharded with model.safetensors.index.json when --shards > 1) with the
// tensor names, shapes and dtypes of a published model of the family, at a
// tiny size: attention, norms, embeddings and dense MLP layers are present
// (random values) next to the MoE layers. Optionally writes the MoE layers'
// weights stacked in the moe layout (one .safetensors per layer: wr [D,E],
// bias [E] (f32), w1 [E,D,2H], w2 [E,H,D], s1 [D,2Hs], s2 [Hs,D], sg [D,1]),
// takes one layer's weights from such a file (e.g. written by moe-ref), and
// breaks the checkpoint on purpose for error tests.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Json.h"
#include "runtime/io/TensorIO.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <sys/stat.h>

using namespace moe;

namespace {

const char *const usage = R"(usage: moe-ckpt-gen FAMILY OUTDIR [options]
  FAMILY: mixtral | qwen2_moe | qwen3_moe | olmoe | deepseek_v3
  --dtype=bf16|f32|f16      checkpoint dtype (default bf16)
  --shards=N                N > 1: sharded with model.safetensors.index.json
  --seed=S                  random values (default 1)
  --dim=D --experts=E --hidden=H --k=K   sizes (defaults 32, 8, 16, 2)
  --norm-topk-prob=true|false            override the family's published value
  --layer-weights=I:P.safetensors:WR,W1,W2
                            MoE layer I takes its router and experts from the
                            stacked tensors WR [D,E], W1 [E,D,2H], W2 [E,H,D]
                            of P (written by moe-ref layer, for example)
  --stacked=DIR             also write DIR/layer_<i>.safetensors per MoE layer
  --break=missing-tensor|wrong-shape|wrong-dtype|duplicate|missing-shard
)";

[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "moe-ckpt-gen: %s\n", message.c_str());
  std::exit(1);
}

struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double normal() {
    double u1 = static_cast<double>((next() >> 11) + 1) * 0x1.0p-53;
    double u2 = static_cast<double>((next() >> 11) + 1) * 0x1.0p-53;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
};

/// Floats rounded to the dtype once, so every copy of them agrees.
std::vector<float> roundTo(io::DType dtype, std::vector<float> v) {
  for (float &x : v) {
    if (dtype == io::DType::BF16)
      x = io::bfloat16BitsToFloat(io::floatToBFloat16Bits(x));
    else if (dtype == io::DType::F16)
      x = io::halfBitsToFloat(io::floatToHalfBits(x));
  }
  return v;
}

std::vector<float> randomValues(Rng &rng, size_t n, double scale) {
  std::vector<float> v(n);
  for (float &x : v)
    x = static_cast<float>(rng.normal() * scale);
  return v;
}

io::Tensor makeTensor(io::DType dtype, std::vector<int64_t> shape,
                      const std::vector<float> &values) {
  if (dtype == io::DType::I32)
    return io::Tensor::fromValues(io::DType::I32, std::move(shape),
                                  std::vector<int32_t>(values.size(), 0));
  io::Tensor f32 = io::Tensor::fromValues(io::DType::F32, shape, values);
  if (dtype == io::DType::F32)
    return f32;
  auto converted = io::convertTensor(f32, dtype);
  if (!converted)
    die(converted.error());
  return converted.take();
}

/// One MoE layer in the moe layout (row-major floats).
struct MoEWeights {
  std::vector<float> wr, bias, w1, w2, s1, s2, sg;
};

struct Options {
  std::string family, out;
  io::DType dtype = io::DType::BF16;
  int shards = 1;
  uint64_t seed = 1;
  int64_t d = 32, e = 8, h = 16, k = 2;
  int normTopk = -1; // -1: the family's published value
  int64_t weightsLayer = -1;
  std::string weightsFile, wrName, w1Name, w2Name;
  std::string stacked, breakKind;
};

bool startsWith(const std::string &s, const char *prefix) {
  return s.compare(0, std::strlen(prefix), prefix) == 0;
}

int64_t parseInt(const std::string &s, const char *what) {
  char *end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end || v < 1 || v > (1 << 20))
    die(std::string(what) + " must be a positive integer, got '" + s + "'");
  return v;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char *flag) { return a.substr(std::strlen(flag)); };
    if (a == "--help" || a == "-h") {
      std::fputs(usage, stdout);
      return 0;
    } else if (startsWith(a, "--dtype=")) {
      auto t = io::parseDType(value("--dtype="));
      if (!t || !io::isFloatType(*t))
        die("--dtype must be bf16, f32 or f16");
      o.dtype = *t;
    } else if (startsWith(a, "--shards=")) {
      o.shards = static_cast<int>(parseInt(value("--shards="), "--shards"));
    } else if (startsWith(a, "--seed=")) {
      o.seed = parseInt(value("--seed="), "--seed");
    } else if (startsWith(a, "--dim=")) {
      o.d = parseInt(value("--dim="), "--dim");
    } else if (startsWith(a, "--experts=")) {
      o.e = parseInt(value("--experts="), "--experts");
    } else if (startsWith(a, "--hidden=")) {
      o.h = parseInt(value("--hidden="), "--hidden");
    } else if (startsWith(a, "--k=")) {
      o.k = parseInt(value("--k="), "--k");
    } else if (startsWith(a, "--norm-topk-prob=")) {
      std::string v = value("--norm-topk-prob=");
      if (v != "true" && v != "false")
        die("--norm-topk-prob must be true or false");
      o.normTopk = v == "true";
    } else if (startsWith(a, "--layer-weights=")) {
      std::string v = value("--layer-weights=");
      size_t c1 = v.find(':'), c2 = v.rfind(':');
      if (c1 == std::string::npos || c2 == c1)
        die("--layer-weights=I:FILE:WR,W1,W2");
      o.weightsLayer = std::atoll(v.substr(0, c1).c_str());
      o.weightsFile = v.substr(c1 + 1, c2 - c1 - 1);
      std::string names = v.substr(c2 + 1);
      size_t n1 = names.find(','), n2 = names.rfind(',');
      if (n1 == std::string::npos || n2 == n1)
        die("--layer-weights=I:FILE:WR,W1,W2");
      o.wrName = names.substr(0, n1);
      o.w1Name = names.substr(n1 + 1, n2 - n1 - 1);
      o.w2Name = names.substr(n2 + 1);
    } else if (startsWith(a, "--stacked=")) {
      o.stacked = value("--stacked=");
    } else if (startsWith(a, "--break=")) {
      o.breakKind = value("--break=");
      static const std::set<std::string> kinds{
          "missing-tensor", "wrong-shape", "wrong-dtype", "duplicate",
          "missing-shard"};
      if (!kinds.count(o.breakKind))
        die("unknown --break kind '" + o.breakKind + "'");
    } else if (startsWith(a, "-")) {
      die("unknown option '" + a + "'");
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() != 2) {
    std::fputs(usage, stderr);
    return 1;
  }
  o.family = positional[0];
  o.out = positional[1];
  const std::string &f = o.family;
  if (f != "mixtral" && f != "qwen2_moe" && f != "qwen3_moe" && f != "olmoe" &&
      f != "deepseek_v3")
    die("unknown family '" + f + "'");
  if ((o.breakKind == "duplicate" || o.breakKind == "missing-shard") &&
      o.shards < 2)
    die("--break=" + o.breakKind + " needs --shards >= 2");

  // The family's layout at a tiny size.
  const int64_t d = o.d, e = o.e, h = o.h, k = o.k;
  const int64_t vocab = 64, dense = 4 * d;
  int64_t layers = 2;
  std::vector<bool> isMoE;
  std::string moeKey = f == "mixtral" ? "block_sparse_moe" : "mlp";
  std::string w1 = "gate_proj", w3 = "up_proj", w2 = "down_proj";
  if (f == "mixtral")
    w1 = "w1", w3 = "w3", w2 = "w2";
  int64_t sharedWidth = 0;
  std::string config;
  auto kv = [&](const std::string &key, const std::string &v) {
    config += ",\n  \"" + key + "\": " + v;
  };
  config = "{\n  \"model_type\": \"" + f + "\"";
  kv("architectures", std::string("[\"") +
                          (f == "mixtral"       ? "MixtralForCausalLM"
                           : f == "qwen2_moe"   ? "Qwen2MoeForCausalLM"
                           : f == "qwen3_moe"   ? "Qwen3MoeForCausalLM"
                           : f == "olmoe"       ? "OlmoeForCausalLM"
                                                : "DeepseekV3ForCausalLM") +
                          "\"]");
  kv("hidden_size", std::to_string(d));
  kv("hidden_act", "\"silu\"");
  kv("num_attention_heads", "4");
  kv("num_key_value_heads", "2");
  kv("vocab_size", std::to_string(vocab));
  kv("rms_norm_eps", "1e-06");
  kv("torch_dtype", o.dtype == io::DType::BF16  ? "\"bfloat16\""
                    : o.dtype == io::DType::F16 ? "\"float16\""
                                                : "\"float32\"");
  kv("num_experts_per_tok", std::to_string(k));
  auto norm = [&](bool published) {
    kv("norm_topk_prob",
       (o.normTopk < 0 ? published : o.normTopk == 1) ? "true" : "false");
  };
  if (f == "mixtral") {
    layers = 2;
    isMoE.assign(layers, true);
    kv("num_local_experts", std::to_string(e));
    kv("intermediate_size", std::to_string(h));
    kv("router_aux_loss_coef", "0.02");
  } else if (f == "olmoe") {
    layers = 2;
    isMoE.assign(layers, true);
    kv("num_experts", std::to_string(e));
    kv("intermediate_size", std::to_string(h));
    norm(false);
  } else if (f == "qwen2_moe") {
    // decoder_sparse_step 2: layers 1, 3, 5 are sparse; mlp_only_layers
    // makes 3 dense again.
    layers = 6;
    isMoE = {false, true, false, false, false, true};
    sharedWidth = 2 * h;
    kv("num_experts", std::to_string(e));
    kv("moe_intermediate_size", std::to_string(h));
    kv("shared_expert_intermediate_size", std::to_string(sharedWidth));
    kv("intermediate_size", std::to_string(dense));
    kv("decoder_sparse_step", "2");
    kv("mlp_only_layers", "[3]");
    norm(false);
  } else if (f == "qwen3_moe") {
    layers = 4;
    isMoE = {false, true, true, true};
    kv("num_experts", std::to_string(e));
    kv("moe_intermediate_size", std::to_string(h));
    kv("intermediate_size", std::to_string(dense));
    kv("decoder_sparse_step", "1");
    kv("mlp_only_layers", "[0]");
    kv("head_dim", std::to_string(d / 4));
    norm(true);
  } else {
    layers = 3;
    isMoE = {false, true, true};
    sharedWidth = 2 * h;
    int64_t groups = e % 4 == 0 ? 4 : 1;
    kv("n_routed_experts", std::to_string(e));
    kv("n_shared_experts", "2");
    kv("moe_intermediate_size", std::to_string(h));
    kv("intermediate_size", std::to_string(dense));
    kv("first_k_dense_replace", "1");
    kv("moe_layer_freq", "1");
    kv("n_group", std::to_string(groups));
    kv("topk_group", std::to_string(groups > 1 ? 2 : 1));
    kv("routed_scaling_factor", "2.5");
    kv("scoring_func", "\"sigmoid\"");
    kv("topk_method", "\"noaux_tc\"");
    kv("q_lora_rank", std::to_string(d / 2));
    kv("kv_lora_rank", std::to_string(d / 4));
    norm(true);
  }
  kv("num_hidden_layers", std::to_string(layers));
  config += "\n}\n";

  Rng rng{o.seed};
  // name -> tensor, with the layer each belongs to (-1: none) for sharding.
  std::map<std::string, io::Tensor> tensors;
  std::map<std::string, int64_t> layerOf;
  auto put = [&](const std::string &name, int64_t layer,
                 std::vector<int64_t> shape, const std::vector<float> &v,
                 io::DType dtype) {
    tensors[name] = makeTensor(dtype, std::move(shape), v);
    layerOf[name] = layer;
  };
  auto random = [&](const std::string &name, int64_t layer,
                    std::vector<int64_t> shape) {
    size_t n = 1;
    for (int64_t s : shape)
      n *= s;
    double scale = 1.0 / std::sqrt(static_cast<double>(shape.back()));
    put(name, layer, shape, roundTo(o.dtype, randomValues(rng, n, scale)),
        o.dtype);
  };
  auto ones = [&](const std::string &name, int64_t layer, int64_t n) {
    put(name, layer, {n}, std::vector<float>(n, 1.0f), o.dtype);
  };

  random("model.embed_tokens.weight", -1, {vocab, d});
  std::map<int64_t, MoEWeights> stackedLayers;
  for (int64_t l = 0; l < layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    ones(p + "input_layernorm.weight", l, d);
    ones(p + "post_attention_layernorm.weight", l, d);
    if (f == "deepseek_v3") {
      random(p + "self_attn.q_a_proj.weight", l, {d / 2, d});
      ones(p + "self_attn.q_a_layernorm.weight", l, d / 2);
      random(p + "self_attn.q_b_proj.weight", l, {d, d / 2});
      random(p + "self_attn.kv_a_proj_with_mqa.weight", l, {d / 4 + 8, d});
      ones(p + "self_attn.kv_a_layernorm.weight", l, d / 4);
      random(p + "self_attn.kv_b_proj.weight", l, {d, d / 4});
      random(p + "self_attn.o_proj.weight", l, {d, d});
    } else {
      random(p + "self_attn.q_proj.weight", l, {d, d});
      random(p + "self_attn.k_proj.weight", l, {d / 2, d});
      random(p + "self_attn.v_proj.weight", l, {d / 2, d});
      random(p + "self_attn.o_proj.weight", l, {d, d});
      if (f == "qwen2_moe") {
        random(p + "self_attn.q_proj.bias", l, {d});
        random(p + "self_attn.k_proj.bias", l, {d / 2});
        random(p + "self_attn.v_proj.bias", l, {d / 2});
      }
      if (f == "olmoe") {
        ones(p + "self_attn.q_norm.weight", l, d);
        ones(p + "self_attn.k_norm.weight", l, d / 2);
      }
      if (f == "qwen3_moe") {
        ones(p + "self_attn.q_norm.weight", l, d / 4);
        ones(p + "self_attn.k_norm.weight", l, d / 4);
      }
    }
    if (!isMoE[l]) {
      random(p + "mlp.gate_proj.weight", l, {dense, d});
      random(p + "mlp.up_proj.weight", l, {dense, d});
      random(p + "mlp.down_proj.weight", l, {d, dense});
      continue;
    }
    // The MoE layer, first in the moe layout.
    MoEWeights m;
    auto rnd = [&](size_t n, int64_t fanIn) {
      return roundTo(o.dtype,
                     randomValues(rng, n, 1.0 / std::sqrt(double(fanIn))));
    };
    if (l == o.weightsLayer) {
      auto file = io::SafeTensorsFile::open(o.weightsFile);
      if (!file)
        die(file.error());
      auto get = [&](const std::string &name, std::vector<int64_t> shape) {
        auto t = file->get(name, io::DType::F32);
        if (!t)
          die(t.error());
        if (t->shape != shape)
          die(o.weightsFile + ": '" + name + "' has shape " +
              io::formatShape(t->shape) + ", expected " +
              io::formatShape(shape));
        return roundTo(o.dtype, t->toVector<float>());
      };
      m.wr = get(o.wrName, {d, e});
      m.w1 = get(o.w1Name, {e, d, 2 * h});
      m.w2 = get(o.w2Name, {e, h, d});
    } else {
      m.wr = rnd(d * e, d);
      m.w1 = rnd(e * d * 2 * h, d);
      m.w2 = rnd(e * h * d, h);
    }
    if (f == "deepseek_v3") {
      m.bias = randomValues(rng, e, 0.1); // f32 in the checkpoint
    }
    if (sharedWidth) {
      m.s1 = rnd(d * 2 * sharedWidth, d);
      m.s2 = rnd(sharedWidth * d, sharedWidth);
      if (f == "qwen2_moe")
        m.sg = rnd(d, d);
    }
    // Then in the checkpoint's layout: nn.Linear [out, in] per expert.
    std::string q = p + moeKey + ".";
    std::vector<float> gate(e * d);
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < e; ++j)
        gate[j * d + i] = m.wr[i * e + j];
    io::DType routerType =
        o.breakKind == "wrong-dtype" && stackedLayers.empty() ? io::DType::I32
                                                               : o.dtype;
    put(q + "gate.weight", l, {e, d}, gate, routerType);
    if (!m.bias.empty())
      put(q + "gate.e_score_correction_bias", l, {e}, m.bias,
          io::DType::F32);
    for (int64_t x = 0; x < e; ++x) {
      std::string ex = q + "experts." + std::to_string(x) + ".";
      std::vector<float> g(h * d), u(h * d), dn(d * h);
      for (int64_t i = 0; i < d; ++i)
        for (int64_t j = 0; j < h; ++j) {
          g[j * d + i] = m.w1[(x * d + i) * 2 * h + j];
          u[j * d + i] = m.w1[(x * d + i) * 2 * h + h + j];
          dn[i * h + j] = m.w2[(x * h + j) * d + i];
        }
      bool first = stackedLayers.empty();
      if (!(first && x == 1 && o.breakKind == "missing-tensor"))
        put(ex + w3 + ".weight", l, {h, d}, u, o.dtype);
      put(ex + w1 + ".weight", l, {h, d}, g, o.dtype);
      if (first && x == 2 && o.breakKind == "wrong-shape") {
        dn.resize(d * (h + 1), 0.0f);
        put(ex + w2 + ".weight", l, {d, h + 1}, dn, o.dtype);
      } else {
        put(ex + w2 + ".weight", l, {d, h}, dn, o.dtype);
      }
    }
    if (sharedWidth) {
      const int64_t hs = sharedWidth;
      std::string sh = q + (f == "qwen2_moe" ? "shared_expert." : "shared_experts.");
      std::vector<float> g(hs * d), u(hs * d), dn(d * hs);
      for (int64_t i = 0; i < d; ++i)
        for (int64_t j = 0; j < hs; ++j) {
          g[j * d + i] = m.s1[i * 2 * hs + j];
          u[j * d + i] = m.s1[i * 2 * hs + hs + j];
          dn[i * hs + j] = m.s2[j * d + i];
        }
      put(sh + "gate_proj.weight", l, {hs, d}, g, o.dtype);
      put(sh + "up_proj.weight", l, {hs, d}, u, o.dtype);
      put(sh + "down_proj.weight", l, {d, hs}, dn, o.dtype);
      if (!m.sg.empty())
        put(q + "shared_expert_gate.weight", l, {1, d}, m.sg, o.dtype);
    }
    stackedLayers[l] = std::move(m);
  }
  ones("model.norm.weight", layers, d);
  random("lm_head.weight", layers, {vocab, d});

  // Write.
  ::mkdir(o.out.c_str(), 0755);
  auto writeText = [&](const std::string &path, const std::string &text) {
    io::Status s = io::writeFileBytes(
        path, reinterpret_cast<const uint8_t *>(text.data()), text.size());
    if (!s)
      die(s.error());
  };
  writeText(o.out + "/config.json", config);
  if (o.shards == 1) {
    if (io::Status s = io::writeSafeTensors(o.out + "/model.safetensors",
                                            tensors);
        !s)
      die(s.error());
  } else {
    std::vector<std::map<std::string, io::Tensor>> shards(o.shards);
    auto shardName = [&](int i) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", i + 1,
                    o.shards);
      return std::string(buf);
    };
    std::string index = "{\n  \"metadata\": {\n    \"total_size\": ";
    uint64_t total = 0;
    std::string map;
    for (auto &[name, tensor] : tensors) {
      int64_t l = layerOf[name];
      int shard = l < 0 ? 0
                        : static_cast<int>(std::min<int64_t>(
                              o.shards - 1, l * o.shards / (layers + 1)));
      total += tensor.data.size();
      map += std::string(map.empty() ? "" : ",\n") + "    ";
      io::json::appendQuoted(map, name);
      map += ": ";
      io::json::appendQuoted(map, shardName(shard));
      shards[shard][name] = tensor;
    }
    if (o.breakKind == "duplicate") {
      // The first MoE layer's router also lands in the last shard.
      std::string name = "model.layers." +
                         std::to_string(stackedLayers.begin()->first) + "." +
                         moeKey + ".gate.weight";
      shards[o.shards - 1][name] = tensors[name];
      if (shards[0].count(name) && o.shards - 1 == 0)
        die("internal: duplicate in one shard");
    }
    index += std::to_string(total) + "\n  },\n  \"weight_map\": {\n" + map +
             "\n  }\n}\n";
    writeText(o.out + "/model.safetensors.index.json", index);
    for (int i = 0; i < o.shards; ++i) {
      if (o.breakKind == "missing-shard" && i == o.shards - 1)
        continue;
      if (io::Status s =
              io::writeSafeTensors(o.out + "/" + shardName(i), shards[i]);
          !s)
        die(s.error());
    }
  }

  if (!o.stacked.empty()) {
    ::mkdir(o.stacked.c_str(), 0755);
    for (auto &[l, m] : stackedLayers) {
      std::map<std::string, io::Tensor> t;
      const int64_t hs = sharedWidth;
      t["wr"] = makeTensor(o.dtype, {d, e}, m.wr);
      t["w1"] = makeTensor(o.dtype, {e, d, 2 * h}, m.w1);
      t["w2"] = makeTensor(o.dtype, {e, h, d}, m.w2);
      if (!m.bias.empty())
        t["bias"] = makeTensor(io::DType::F32, {e}, m.bias);
      if (!m.s1.empty()) {
        t["s1"] = makeTensor(o.dtype, {d, 2 * hs}, m.s1);
        t["s2"] = makeTensor(o.dtype, {hs, d}, m.s2);
      }
      if (!m.sg.empty())
        t["sg"] = makeTensor(o.dtype, {d, 1}, m.sg);
      std::string path =
          o.stacked + "/layer_" + std::to_string(l) + ".safetensors";
      if (io::Status s = io::writeSafeTensors(path, t); !s)
        die(s.error());
    }
  }
  return 0;
}
