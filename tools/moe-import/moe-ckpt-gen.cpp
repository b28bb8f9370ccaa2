//===- moe-ckpt-gen.cpp - Tiny synthetic Hugging Face MoE checkpoints -----===//
//
// Test helper. Writes a checkpoint directory (config.json + safetensors,
// sharded with model.safetensors.index.json when --shards > 1) with the
// tensor names, shapes and dtypes of a published model of the family, at a
// tiny size: attention, norms, embeddings and dense MLP layers are present
// (random values) next to the MoE layers. Optionally writes the MoE layers'
// weights stacked in the moe layout (one .safetensors per layer: wr [D,E],
// bias [E] (f32), w1 [E,D,2H], w2 [E,H,D], s1 [D,2Hs], s2 [Hs,D], sg [D,1]),
// takes one layer's weights (router, selection bias, experts, shared expert
// and its gate) from such a file (e.g. written by moe-ref), sets the routing
// keys of config.json, and breaks the checkpoint on purpose for error tests.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Json.h"
#include "runtime/io/Quantized.h"
#include "runtime/io/TensorIO.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
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
                            (olmoe, qwen2_moe, qwen3_moe, deepseek_v3)
  --shared-hidden=Hs        qwen2_moe, deepseek_v3: width of the shared expert
                            (default 2H, or from the s1 of --layer-weights);
                            qwen2_moe writes shared_expert_intermediate_size =
                            Hs, deepseek_v3 n_shared_experts = Hs / H
  deepseek_v3 routing (published: sigmoid, n_group 4 if E % 4 == 0 else 1,
  topk_group 2 (1 with one group), scale 2.5); not range-checked, so a
  config moe-import rejects can be written on purpose:
  --scoring-func=sigmoid|softmax  --n-group=G  --topk-group=GK
  --routed-scaling-factor=F
  --layer-weights=I:P.safetensors:NAMES
                            MoE layer I takes its weights from the stacked
                            tensors of P (e.g. written by moe-ref layer; the
                            rest stays random). NAMES is either WR,W1,W2 or a
                            comma-separated list of KEY=NAME, KEY one of
                              wr    router [D,E]      -> gate.weight [E,D]
                              bias  f32 [E]           -> gate.e_score_correction_bias
                                                         (deepseek_v3)
                              w1    [E,D,2H]          -> experts.{e}.gate/up (w1/w3)
                              w2    [E,H,D]           -> experts.{e}.down (w2)
                              s1    [D,2Hs]           -> shared expert gate_proj,
                                                         up_proj [Hs,D] each
                              s2    [Hs,D]            -> shared expert down_proj
                              sg    [D,1]             -> shared_expert_gate.weight
                                                         [1,D] (qwen2_moe)
                            wr, w1, w2 are required; s1 and s2 go together.
                            Example (moe-ref layer ... --selection-bias
                            --shared-hidden 32 --names wr,b,w1,w2,s1,s2):
                              --layer-weights=1:p.safetensors:wr=wr,bias=b,w1=w1,w2=w2,s1=s1,s2=s2
  --quant=fp8_e4m3:BK,BN    FP8 block-scaled routed experts, as DeepSeek-V3
                            and Qwen3 FP8 publish them: every expert weight
                            F8_E4M3 [out, in] with `weight_scale_inv` F32
                            [ceil(out/BN), ceil(in/BK)], and config.json's
                            quantization_config (quant_method fp8, fmt e4m3,
                            activation_scheme dynamic, weight_block_size
                            [BN, BK]). Random experts are quantized per block
                            (scale = max|w| / 448); with --layer-weights, w1
                            and w2 are the F8_E4M3 codes of `moe-ref layer
                            --quant fp8_e4m3:BK,BN` and their scales the F32
                            tensors NAME_scale beside them. The shared
                            experts are FP8 too (from --layer-weights: the
                            codes of moe-ref layer --quant-shared); the
                            router stays in --dtype.
  --quant-format=fp8|compressed-tensors|gptq|awq
                            with --quant: config.json's quantization_config
                            as DeepSeek writes it (default: quant_method fp8,
                            weight_block_size) or as llm-compressor's FP8_BLOCK
                            scheme does (quant_method compressed-tensors,
                            config_groups with block_structure [BN, BK] and
                            dynamic activations; the scales are then named
                            weight_scale)
  --quant=int4:G[,zero_point]
                            int4 group-quantized routed experts (groups of G
                            along each weight's input), packed as
                            --quant-format says: gptq (the default with
                            zero_point; AutoGPTQ: qweight I32 [in/8, out],
                            qzeros I32 [in/G, out/8] holding the zero point
                            minus one, scales F16 [in/G, out], g_idx; needs
                            zero_point), awq (AutoAWQ GEMM: qweight I32
                            [in, out/8] and qzeros in its nibble order,
                            scales; needs zero_point) or compressed-tensors
                            (the default without zero_point; pack-quantized:
                            weight_packed I32 [out, in/8] of the codes plus
                            8, weight_scale [out, in/G], weight_shape; with
                            zero_point asymmetric: weight_zero_point I32
                            [out/8, in/G], packed along out), with config.json's
                            quantization_config. Random experts are quantized
                            as moe-ref layer --quant int4 does (for gptq
                            with zero points >= 1); with
                            --layer-weights, w1 and w2 are its U8 codes with
                            NAME_scale (and NAME_zero) beside them. Scales
                            are F16 (--scale-dtype, default f16 here).
  --scale-dtype=f32|bf16|f16 with --quant: the scales' dtype (default f32;
                            bf16 as some Qwen3 FP8 checkpoints store them:
                            random scales are rounded to bf16 before the
                            codes are made, those of --layer-weights must be
                            exact in bf16, from moe-ref --quant-scales bf16)
  --scale-name=weight_scale_inv|weight_scale
                            with --quant: the scales' name after the weight's
                            module (default weight_scale_inv, DeepSeek's and
                            Qwen3's; weight_scale is compressed-tensors')
  --unquantized-shared      with --quant: the shared experts stay in --dtype
                            (a checkpoint that leaves them out of the
                            quantization); by default they are quantized as
                            the routed experts are
  --fused-experts           the routed experts as fused 3-D tensors, as
                            transformers 5 saves Qwen3-MoE: experts.gate_up_proj
                            [E, 2H, D] (gate rows, then up rows) and
                            experts.down_proj [E, D, H], one nn.Linear matrix
                            per expert; with --quant, F8_E4M3 with
                            gate_up_proj_scale_inv [E, ceil(2H/BN), ceil(D/BK)]
                            and down_proj_scale_inv (or _scale) likewise, and
                            BN need not divide H (not mixtral)
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
  /// With --quant: the E4M3 codes of w1 and w2 (moe layout) and their scales
  /// [E, ceil(K/BK), ceil(N/BN)].
  std::vector<uint8_t> w1q, w2q, s1q, s2q;
  std::vector<float> w1s, w2s, s1s, s2s;
  /// With --quant=int4: w1q and w2q hold the codes (0..15, moe layout),
  /// w1s and w2s the scales [E, ceil(K/G), N], and these the zero points
  /// (with zero_point), shaped as the scales.
  std::vector<uint8_t> w1z, w2z;
  /// The shared expert's zero points, with --quant=int4 (s1q, s2q its codes,
  /// s1s, s2s its scales [ceil(K/G), N]).
  std::vector<uint8_t> s1z, s2z;
};

/// Quantizes `w` ([E, K, N], moe layout) per group of G rows of K and
/// column, as moe-ref layer --quant int4:G[,zero_point] does (docs/spec.md
/// §2.1): with zero points s = (max(w,0) - min(w,0)) / 15 and z =
/// round(-min(w,0) / s), else s = max|w| / 7 and z = 8 (each s rounded to
/// `scaleDType` first, 1 when 0); q = clamp(round(w / s) + z, 0, 15).
/// `minZero` 1 keeps z >= 1 (GPTQ stores z - 1 in 4 bits).
void quantizeInt4(const std::vector<float> &w, int64_t e, int64_t k, int64_t n, int64_t group,
                  bool zeroPoint, std::vector<uint8_t> &codes, std::vector<float> &scales,
                  std::vector<uint8_t> &zeros, io::DType scaleDType, double minZero) {
  const int64_t groups = (k + group - 1) / group;
  codes.assign(w.size(), 0);
  scales.assign(e * groups * n, 1.0f);
  zeros.assign(zeroPoint ? e * groups * n : 0, 0);
  for (int64_t x = 0; x < e; ++x)
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t k0 = g * group, k1 = std::min(k, k0 + group);
        double lo = 0, hi = 0;
        for (int64_t i = k0; i < k1; ++i) {
          lo = std::min(lo, double(w[(x * k + i) * n + j]));
          hi = std::max(hi, double(w[(x * k + i) * n + j]));
        }
        double range = zeroPoint ? hi - lo : std::max(-lo, hi);
        float s = range > 0 ? float(range / (zeroPoint ? 15.0 : 7.0)) : 1.0f;
        s = roundTo(scaleDType, {s})[0];
        const double z =
            zeroPoint ? std::clamp(std::nearbyint(-lo / double(s)), minZero, 15.0) : 8.0;
        scales[(x * groups + g) * n + j] = s;
        if (zeroPoint)
          zeros[(x * groups + g) * n + j] = uint8_t(z);
        for (int64_t i = k0; i < k1; ++i)
          codes[(x * k + i) * n + j] = uint8_t(std::clamp(
              std::nearbyint(double(w[(x * k + i) * n + j]) / double(s)) + z, 0.0, 15.0));
      }
}

/// Quantizes `w` ([E, K, N], moe layout) per block of BK x BN: scale =
/// max|w| / 448 over the block (1 for an all-zero block), code = the E4M3
/// nearest to w / scale.
void quantizeFp8(const std::vector<float> &w, int64_t e, int64_t k, int64_t n,
                 int64_t bk, int64_t bn, std::vector<uint8_t> &codes,
                 std::vector<float> &scales, io::DType scaleDType) {
  const int64_t kb = (k + bk - 1) / bk, nb = (n + bn - 1) / bn;
  codes.assign(w.size(), 0);
  scales.assign(e * kb * nb, 1.0f);
  for (int64_t x = 0; x < e; ++x)
    for (int64_t i0 = 0; i0 < kb; ++i0)
      for (int64_t j0 = 0; j0 < nb; ++j0) {
        float max = 0;
        for (int64_t i = i0 * bk; i < std::min(k, (i0 + 1) * bk); ++i)
          for (int64_t j = j0 * bn; j < std::min(n, (j0 + 1) * bn); ++j)
            max = std::max(max, std::fabs(w[(x * k + i) * n + j]));
        float scale = roundTo(scaleDType, {max > 0 ? max / 448.0f : 1.0f})[0];
        scales[(x * kb + i0) * nb + j0] = scale;
        for (int64_t i = i0 * bk; i < std::min(k, (i0 + 1) * bk); ++i)
          for (int64_t j = j0 * bn; j < std::min(n, (j0 + 1) * bn); ++j)
            codes[(x * k + i) * n + j] =
                io::floatToFp8E4M3(w[(x * k + i) * n + j] / scale);
      }
}

/// One nn.Linear weight in the checkpoint's layout, codes [n, K] ([out,
/// in]) and scales [ceil(n/BN), ceil(K/BK)], from the columns [n0, n0 + n)
/// of one moe-layout matrix: codes [K, N], scales [ceil(K/BK), ceil(N/BN)]
/// (n0 a multiple of BN).
void linearFromMoE(const uint8_t *codes, const float *scales, int64_t k,
                   int64_t n, int64_t n0, int64_t width, int64_t bk, int64_t bn,
                   std::vector<uint8_t> &outCodes, std::vector<float> &outScales) {
  const int64_t kb = (k + bk - 1) / bk, nbAll = (n + bn - 1) / bn,
                nb = (width + bn - 1) / bn;
  outCodes.assign(width * k, 0);
  outScales.assign(nb * kb, 0.0f);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < width; ++j)
      outCodes[j * k + i] = codes[i * n + n0 + j];
  for (int64_t ib = 0; ib < kb; ++ib)
    for (int64_t jb = 0; jb < nb; ++jb)
      outScales[jb * kb + ib] = scales[ib * nbAll + n0 / bn + jb];
}

io::Tensor codesTensor(std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  io::Tensor t;
  t.dtype = io::DType::F8E4M3;
  t.shape = std::move(shape);
  t.data = std::move(bytes);
  return t;
}

struct Options {
  std::string family, out;
  io::DType dtype = io::DType::BF16;
  int shards = 1;
  uint64_t seed = 1;
  int64_t d = 32, e = 8, h = 16, k = 2;
  int normTopk = -1; // -1: the family's published value
  int64_t sharedHidden = 0; // 0: 2H, or the s1 of --layer-weights
  // deepseek_v3 routing; empty / 0: the published values.
  std::string scoringFunc, scale;
  int64_t nGroup = 0, topkGroup = 0;
  int64_t weightsLayer = -1;
  std::string weightsFile;
  /// --layer-weights: key (wr, bias, w1, w2, s1, s2, sg) -> tensor name.
  std::map<std::string, std::string> weightNames;
  std::string stacked, breakKind;
  /// --quant=fp8_e4m3:BK,BN; 0 without.
  int64_t fp8BlockK = 0, fp8BlockN = 0;
  /// --quant=int4:G[,zero_point]; 0 without. --quant-format names the
  /// packing (gptq, awq, compressed-tensors).
  int64_t int4Group = 0;
  bool int4ZeroPoint = false;
  std::string int4Format;
  bool scaleDTypeSet = false;
  std::string scaleName = "weight_scale_inv";
  io::DType scaleDType = io::DType::F32;
  bool fusedExperts = false;
  bool compressedTensors = false;
  bool unquantizedShared = false;
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

/// Parses --layer-weights=I:FILE:NAMES (see the usage text).
void parseLayerWeights(const std::string &v, Options &o) {
  const std::string syntax =
      "--layer-weights=I:FILE:WR,W1,W2 or I:FILE:KEY=NAME,... (see --help)";
  size_t c1 = v.find(':'), c2 = v.rfind(':');
  if (c1 == std::string::npos || c2 == c1)
    die("expected " + syntax + ", got '" + v + "'");
  std::string index = v.substr(0, c1);
  if (index.empty() ||
      index.find_first_not_of("0123456789") != std::string::npos)
    die("--layer-weights: layer index must be a non-negative integer, got '" +
        index + "'");
  o.weightsLayer = std::atoll(index.c_str());
  o.weightsFile = v.substr(c1 + 1, c2 - c1 - 1);
  std::vector<std::string> items;
  std::string names = v.substr(c2 + 1);
  for (size_t start = 0;;) {
    size_t comma = names.find(',', start);
    items.push_back(names.substr(start, comma - start));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  bool keyed = names.find('=') != std::string::npos;
  if (!keyed) {
    if (items.size() != 3)
      die("expected " + syntax + ", got '" + v + "'");
    o.weightNames = {{"wr", items[0]}, {"w1", items[1]}, {"w2", items[2]}};
  } else {
    static const std::set<std::string> keys{"wr", "bias", "w1", "w2",
                                            "s1", "s2",   "sg"};
    for (const std::string &item : items) {
      size_t eq = item.find('=');
      std::string key = item.substr(0, eq);
      if (eq == std::string::npos || eq + 1 == item.size())
        die("--layer-weights: '" + item + "' is not KEY=NAME");
      if (!keys.count(key))
        die("--layer-weights: unknown key '" + key +
            "' (keys: wr, bias, w1, w2, s1, s2, sg)");
      if (!o.weightNames.emplace(key, item.substr(eq + 1)).second)
        die("--layer-weights: key '" + key + "' given twice");
    }
  }
  for (const char *key : {"wr", "w1", "w2"})
    if (!o.weightNames.count(key))
      die(std::string("--layer-weights: key '") + key + "' is required");
  if (o.weightNames.count("s1") != o.weightNames.count("s2"))
    die("--layer-weights: s1 and s2 go together");
  if (o.weightNames.count("sg") && !o.weightNames.count("s1"))
    die("--layer-weights: sg needs s1 and s2");
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
    } else if (startsWith(a, "--shared-hidden=")) {
      o.sharedHidden = parseInt(value("--shared-hidden="), "--shared-hidden");
    } else if (startsWith(a, "--scoring-func=")) {
      o.scoringFunc = value("--scoring-func=");
      if (o.scoringFunc != "sigmoid" && o.scoringFunc != "softmax")
        die("--scoring-func must be sigmoid or softmax");
    } else if (startsWith(a, "--n-group=")) {
      o.nGroup = parseInt(value("--n-group="), "--n-group");
    } else if (startsWith(a, "--topk-group=")) {
      o.topkGroup = parseInt(value("--topk-group="), "--topk-group");
    } else if (startsWith(a, "--routed-scaling-factor=")) {
      std::string v = value("--routed-scaling-factor=");
      char *end = nullptr;
      double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !std::isfinite(x))
        die("--routed-scaling-factor must be a number, got '" + v + "'");
      o.scale = moe::io::json::formatShortestDouble(x);
    } else if (startsWith(a, "--layer-weights=")) {
      parseLayerWeights(value("--layer-weights="), o);
    } else if (startsWith(a, "--quant=int4:")) {
      std::string v = value("--quant=int4:");
      size_t comma = v.find(',');
      if (comma != std::string::npos && v.substr(comma + 1) != "zero_point")
        die("--quant must be fp8_e4m3:BK,BN or int4:G[,zero_point], got 'int4:" + v + "'");
      o.int4Group = parseInt(v.substr(0, comma), "--quant's G");
      o.int4ZeroPoint = comma != std::string::npos;
    } else if (startsWith(a, "--quant=")) {
      std::string v = value("--quant="), prefix = "fp8_e4m3:";
      size_t comma = v.find(',');
      if (!startsWith(v, prefix.c_str()) || comma == std::string::npos)
        die("--quant must be fp8_e4m3:BK,BN or int4:G[,zero_point], got '" + v + "'");
      o.fp8BlockK = parseInt(v.substr(prefix.size(), comma - prefix.size()),
                             "--quant's BK");
      o.fp8BlockN = parseInt(v.substr(comma + 1), "--quant's BN");
    } else if (startsWith(a, "--scale-dtype=")) {
      std::string v = value("--scale-dtype=");
      if (v != "f32" && v != "bf16" && v != "f16")
        die("--scale-dtype must be f32, bf16 or f16");
      o.scaleDType = v == "bf16" ? io::DType::BF16 : v == "f16" ? io::DType::F16 : io::DType::F32;
      o.scaleDTypeSet = true;
    } else if (startsWith(a, "--scale-name=")) {
      o.scaleName = value("--scale-name=");
      if (o.scaleName != "weight_scale_inv" && o.scaleName != "weight_scale")
        die("--scale-name must be weight_scale_inv or weight_scale");
    } else if (startsWith(a, "--quant-format=")) {
      std::string v = value("--quant-format=");
      if (v != "fp8" && v != "compressed-tensors" && v != "gptq" && v != "awq")
        die("--quant-format must be fp8, compressed-tensors, gptq or awq");
      o.compressedTensors = v == "compressed-tensors";
      if (o.compressedTensors)
        o.scaleName = "weight_scale";
      o.int4Format = v;
    } else if (a == "--fused-experts") {
      o.fusedExperts = true;
    } else if (a == "--unquantized-shared") {
      o.unquantizedShared = true;
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
  const bool hasShared = f == "qwen2_moe" || f == "deepseek_v3";
  if (o.normTopk >= 0 && f == "mixtral")
    die("--norm-topk-prob: mixtral has no norm_topk_prob (it always "
        "renormalises)");
  if (o.sharedHidden && !hasShared)
    die("--shared-hidden: " + f + " has no shared expert");
  if (f != "deepseek_v3" && (!o.scoringFunc.empty() || !o.scale.empty() ||
                             o.nGroup || o.topkGroup))
    die("--scoring-func, --n-group, --topk-group and --routed-scaling-factor "
        "are deepseek_v3 keys");
  if (o.weightNames.count("bias") && f != "deepseek_v3")
    die("--layer-weights: bias (e_score_correction_bias) is a deepseek_v3 "
        "tensor");
  if (o.weightNames.count("s1") && !hasShared)
    die("--layer-weights: s1, s2: " + f + " has no shared expert");
  if (o.weightNames.count("sg") && f != "qwen2_moe")
    die("--layer-weights: sg (shared_expert_gate) is a qwen2_moe tensor");

  // The stacked weights of --layer-weights, read once.
  std::optional<io::SafeTensorsFile> weights;
  if (o.weightsLayer >= 0) {
    auto file = io::SafeTensorsFile::open(o.weightsFile);
    if (!file)
      die(file.error());
    weights.emplace(file.take());
    if (o.weightNames.count("s1") && !o.sharedHidden) {
      const std::string &name = o.weightNames["s1"];
      const io::SafeTensorInfo *info = weights->find(name);
      if (!info)
        die(o.weightsFile + ": no tensor named '" + name + "'");
      if (info->shape.size() != 2 || info->shape[1] % 2 != 0)
        die(o.weightsFile + ": '" + name + "' has shape " +
            io::formatShape(info->shape) + ", expected [D, 2Hs]");
      o.sharedHidden = info->shape[1] / 2;
    }
  }

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
  if (hasShared) {
    sharedWidth = o.sharedHidden ? o.sharedHidden : 2 * o.h;
    if (f == "deepseek_v3" && sharedWidth % o.h != 0)
      die("--shared-hidden: deepseek_v3's shared width is n_shared_experts * "
          "H, so Hs = " +
          std::to_string(sharedWidth) + " must be a multiple of H = " +
          std::to_string(o.h));
  }
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
    int64_t groups = o.nGroup ? o.nGroup : e % 4 == 0 ? 4 : 1;
    int64_t topkGroup = o.topkGroup ? o.topkGroup : groups > 1 ? 2 : 1;
    kv("n_routed_experts", std::to_string(e));
    kv("n_shared_experts", std::to_string(sharedWidth / h));
    kv("moe_intermediate_size", std::to_string(h));
    kv("intermediate_size", std::to_string(dense));
    kv("first_k_dense_replace", "1");
    kv("moe_layer_freq", "1");
    kv("n_group", std::to_string(groups));
    kv("topk_group", std::to_string(topkGroup));
    kv("routed_scaling_factor", o.scale.empty() ? "2.5" : o.scale);
    kv("scoring_func", "\"" +
                           (o.scoringFunc.empty() ? "sigmoid" : o.scoringFunc) +
                           "\"");
    kv("topk_method", "\"noaux_tc\"");
    kv("q_lora_rank", std::to_string(d / 2));
    kv("kv_lora_rank", std::to_string(d / 4));
    norm(true);
  }
  kv("num_hidden_layers", std::to_string(layers));
  const bool fp8 = o.fp8BlockK > 0;
  const bool int4 = o.int4Group > 0;
  if (o.unquantizedShared && !fp8 && !int4)
    die("--unquantized-shared needs --quant");
  if (fp8 && (o.int4Format == "gptq" || o.int4Format == "awq"))
    die("--quant-format=" + o.int4Format + " packs int4 weights (--quant=int4:G)");
  if (int4) {
    const std::string &fmt = o.int4Format;
    if (fmt.empty() || fmt == "fp8")
      o.int4Format = o.int4ZeroPoint ? "gptq" : "compressed-tensors";
    if ((o.int4Format == "gptq" || o.int4Format == "awq") && !o.int4ZeroPoint)
      die("--quant-format=" + o.int4Format + " stores zero points: --quant=int4:G,zero_point");
    if (o.fusedExperts || !o.stacked.empty())
      die("--quant=int4: not with --fused-experts or --stacked");
    if (d % 8 || h % 8 || (!o.unquantizedShared && sharedWidth % 8))
      die("--quant=int4: D, H and the shared width must be multiples of 8 (8 codes to a "
          "word)");
    if (!o.scaleDTypeSet)
      o.scaleDType = io::DType::F16;
    const std::string g = std::to_string(o.int4Group);
    if (o.int4Format == "gptq")
      kv("quantization_config",
         "{\"bits\": 4, \"checkpoint_format\": \"gptq\", \"damp_percent\": 0.01, "
         "\"desc_act\": false, \"group_size\": " + g + ", \"quant_method\": \"gptq\", "
         "\"static_groups\": false, \"sym\": false, \"true_sequential\": true}");
    else if (o.int4Format == "awq")
      kv("quantization_config",
         "{\"bits\": 4, \"group_size\": " + g + ", \"modules_to_not_convert\": null, "
         "\"quant_method\": \"awq\", \"version\": \"gemm\", \"zero_point\": true}");
    else
      kv("quantization_config",
         "{\"config_groups\": {\"group_0\": {\"input_activations\": null, "
         "\"output_activations\": null, \"targets\": [\"Linear\"], \"weights\": "
         "{\"actorder\": null, \"block_structure\": null, \"dynamic\": false, "
         "\"group_size\": " + g + ", \"num_bits\": 4, \"observer\": \"minmax\", "
         "\"strategy\": \"group\", \"symmetric\": " +
         (o.int4ZeroPoint ? "false" : "true") + ", \"type\": \"int\"}}}, "
         "\"format\": \"pack-quantized\", \"ignore\": [\"lm_head\", \"re:.*mlp.gate$\"], "
         "\"quant_method\": \"compressed-tensors\", \"quantization_status\": \"compressed\"}");
  }
  if (o.fusedExperts && f == "mixtral")
    die("--fused-experts: mixtral checkpoints have per-expert w1/w2/w3 only");
  if (fp8) {
    if (o.h % o.fp8BlockN != 0 && !o.fusedExperts)
      die("--quant: BN = " + std::to_string(o.fp8BlockN) +
          " must divide H = " + std::to_string(o.h) +
          " (moe-import joins the gate and up projections' scales)");
    const std::string block =
        "[" + std::to_string(o.fp8BlockN) + ", " + std::to_string(o.fp8BlockK) + "]";
    if (o.compressedTensors)
      kv("quantization_config",
         "{\"config_groups\": {\"group_0\": {\"input_activations\": {\"dynamic\": true, "
         "\"group_size\": " + std::to_string(o.fp8BlockK) + ", \"num_bits\": 8, "
         "\"strategy\": \"group\", \"symmetric\": true, \"type\": \"float\"}, "
         "\"output_activations\": null, \"targets\": [\"Linear\"], \"weights\": "
         "{\"block_structure\": " + block + ", \"dynamic\": false, \"num_bits\": 8, "
         "\"observer\": \"minmax\", \"strategy\": \"block\", \"symmetric\": true, "
         "\"type\": \"float\"}}}, \"format\": \"float-quantized\", \"ignore\": "
         "[\"lm_head\", \"re:.*mlp.gate$\"], \"quant_method\": \"compressed-tensors\", "
         "\"quantization_status\": \"compressed\"}");
    else
      kv("quantization_config",
         "{\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", "
         "\"quant_method\": \"fp8\", \"weight_block_size\": " + block + "}");
  }
  if (o.weightsLayer >= 0 &&
      (o.weightsLayer >= layers || !isMoE[o.weightsLayer])) {
    std::string moeLayers;
    for (int64_t l = 0; l < layers; ++l)
      if (isMoE[l])
        moeLayers += (moeLayers.empty() ? "" : ", ") + std::to_string(l);
    die("--layer-weights: layer " + std::to_string(o.weightsLayer) +
        " is not a MoE layer of " + f + " (MoE layers: " + moeLayers + ")");
  }
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
  // I32 words (int4 packings), as they are.
  auto putWords = [&](const std::string &name, int64_t layer, std::vector<int64_t> shape,
                      const std::vector<int32_t> &words) {
    tensors[name] = io::Tensor::fromValues<int32_t>(io::DType::I32, std::move(shape), words);
    layerOf[name] = layer;
  };
  // With --quant=int4: the nn.Linear `module` of layer `layer` from the
  // columns [n0, n0 + width) of a moe-layout matrix [k, n] of codes, its
  // scales and zero points [ceil(k/G), n], packed as --quant-format says.
  auto putInt4Linear = [&](const std::string &module, int64_t layer, const uint8_t *codes,
                           const float *scales, const uint8_t *zeros, int64_t k, int64_t n,
                           int64_t n0, int64_t width) {
    const int64_t gs = o.int4Group, groups = (k + gs - 1) / gs;
    auto code = [&](int64_t i, int64_t j) -> uint32_t { return codes[i * n + n0 + j]; };
    std::vector<float> sc(groups * width);
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t j = 0; j < width; ++j)
        sc[g * width + j] = scales[g * n + n0 + j];
    // AutoAWQ's nibble p holds column 8w + {0,2,4,6,1,3,5,7}[p]: the nibble
    // of column c (mod 8) is awqNibble[c].
    static const int awqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    if (o.int4Format == "compressed-tensors") {
      // [out, in/8], element k of row j at 4*(k%8) of word [j][k/8].
      std::vector<int32_t> w(width * (k / 8));
      for (int64_t j = 0; j < width; ++j)
        for (int64_t i = 0; i < k; ++i)
          w[j * (k / 8) + i / 8] |= int32_t(code(i, j) << (4 * (i % 8)));
      putWords(module + ".weight_packed", layer, {width, k / 8}, w);
      std::vector<float> st(width * groups);
      for (int64_t g = 0; g < groups; ++g)
        for (int64_t j = 0; j < width; ++j)
          st[j * groups + g] = sc[g * width + j];
      put(module + ".weight_scale", layer, {width, groups}, st, o.scaleDType);
      tensors[module + ".weight_shape"] =
          io::Tensor::fromValues<int64_t>(io::DType::I64, {2}, {width, k});
      layerOf[module + ".weight_shape"] = layer;
      if (zeros) {
        // Asymmetric: weight_zero_point [out/8, G], the zero of (j, g) at
        // 4*(j%8) of word [j/8][g] (packed along out), stored plus 8 as the
        // codes are: the moe layout's unsigned zero as it is.
        std::vector<int32_t> zw((width / 8) * groups);
        for (int64_t g = 0; g < groups; ++g)
          for (int64_t j = 0; j < width; ++j)
            zw[(j / 8) * groups + g] |= int32_t(uint32_t(zeros[g * n + n0 + j]) << (4 * (j % 8)));
        putWords(module + ".weight_zero_point", layer, {width / 8, groups}, zw);
      }
      return;
    }
    const bool awq = o.int4Format == "awq";
    std::vector<int32_t> qw(awq ? k * (width / 8) : (k / 8) * width);
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < width; ++j) {
        if (awq) {
          qw[i * (width / 8) + j / 8] |= int32_t(code(i, j) << (4 * awqNibble[j % 8]));
        } else {
          qw[(i / 8) * width + j] |= int32_t(code(i, j) << (4 * (i % 8)));
        }
      }
    putWords(module + ".qweight", layer,
             awq ? std::vector<int64_t>{k, width / 8} : std::vector<int64_t>{k / 8, width}, qw);
    std::vector<int32_t> qz(groups * (width / 8));
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t j = 0; j < width; ++j) {
        uint32_t z = zeros[g * n + n0 + j];
        if (!awq && z == 0)
          die("--quant=int4 --quant-format=gptq: the zero point of " + module + " group " +
              std::to_string(g) + ", column " + std::to_string(j) +
              " is 0, which GPTQ (storing it minus one) cannot hold");
        const int p = awq ? awqNibble[j % 8] : int(j % 8);
        qz[g * (width / 8) + j / 8] |= int32_t(((awq ? z : z - 1) & 15) << (4 * p));
      }
    putWords(module + ".qzeros", layer, {groups, width / 8}, qz);
    put(module + ".scales", layer, {groups, width}, sc, o.scaleDType);
    if (!awq) {
      std::vector<int32_t> gidx(k);
      for (int64_t i = 0; i < k; ++i)
        gidx[i] = int32_t(i / gs);
      putWords(module + ".g_idx", layer, {k}, gidx);
    }
  };
  // F8_E4M3 codes, as they are.

  auto putCodes = [&](const std::string &name, int64_t layer,
                      std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
    tensors[name] = codesTensor(std::move(shape), std::move(bytes));
    layerOf[name] = layer;
  };
  // With --quant: the nn.Linear weight `module` of layer `layer`, codes
  // [width, k] ([out, in]) and, with `withScale`, its scales, from the
  // columns [n0, n0 + width) of a moe-layout matrix: codes [k, n], scales
  // [ceil(k/BK), ceil(n/BN)] (linearFromMoE).
  auto putFp8Linear = [&](const std::string &module, int64_t layer,
                          const uint8_t *codes, const float *scales, int64_t k,
                          int64_t n, int64_t n0, int64_t width,
                          bool withScale = true) {
    const int64_t bk = o.fp8BlockK, bn = o.fp8BlockN;
    std::vector<uint8_t> q;
    std::vector<float> sc;
    linearFromMoE(codes, scales, k, n, n0, width, bk, bn, q, sc);
    putCodes(module + ".weight", layer, {width, k}, std::move(q));
    if (withScale)
      put(module + "." + o.scaleName, layer,
          {(width + bn - 1) / bn, (k + bk - 1) / bk}, sc, o.scaleDType);
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
    // Random values are drawn for every tensor, also those taken from
    // --layer-weights, so the other tensors do not depend on that option.
    const int64_t hs = sharedWidth;
    m.wr = rnd(d * e, d);
    m.w1 = rnd(e * d * 2 * h, d);
    m.w2 = rnd(e * h * d, h);
    if (f == "deepseek_v3")
      m.bias = randomValues(rng, e, 0.1); // f32 in the checkpoint
    if (sharedWidth) {
      m.s1 = rnd(d * 2 * hs, d);
      m.s2 = rnd(hs * d, hs);
      if (f == "qwen2_moe")
        m.sg = rnd(d, d);
    }
    if (l == o.weightsLayer) {
      // Values of the checkpoint's dtype (the bias stays f32, as published).
      auto take = [&](const char *key, std::vector<float> &out,
                      std::vector<int64_t> shape, bool f32 = false) {
        auto it = o.weightNames.find(key);
        if (it == o.weightNames.end())
          return;
        auto t = weights->get(it->second, io::DType::F32);
        if (!t)
          die(t.error());
        if (t->shape != shape)
          die(o.weightsFile + ": '" + it->second + "' (" + key +
              ") has shape " + io::formatShape(t->shape) + ", expected " +
              io::formatShape(shape));
        out = f32 ? t->toVector<float>() : roundTo(o.dtype, t->toVector<float>());
      };
      take("wr", m.wr, {d, e});
      take("bias", m.bias, {e}, /*f32=*/true);
      take("w1", m.w1, {e, d, 2 * h});
      take("w2", m.w2, {e, h, d});
      if ((!fp8 && !int4) || o.unquantizedShared) { // Else the codes, below.
        take("s1", m.s1, {d, 2 * hs});
        take("s2", m.s2, {hs, d});
      }
      take("sg", m.sg, {d, 1});
    }
    // The codes and scales of moe-ref layer --quant [--quant-shared] for the
    // weight of --layer-weights key `key`: F8_E4M3 [lead..., k, n] and F32
    // NAME_scale [lead..., ceil(k/BK), ceil(n/BN)], as they are.
    auto takeCodes = [&](const char *key, std::vector<int64_t> lead, int64_t k,
                         int64_t n, std::vector<uint8_t> &out,
                         std::vector<float> &scales) {
      const int64_t bk = o.fp8BlockK, bn = o.fp8BlockN;
      const std::string &name = o.weightNames[key];
      const io::SafeTensorInfo *info = weights->find(name);
      std::vector<int64_t> shape = lead, sshape = lead;
      shape.insert(shape.end(), {k, n});
      sshape.insert(sshape.end(), {(k + bk - 1) / bk, (n + bn - 1) / bn});
      if (!info || info->dtype != io::DType::F8E4M3 || info->shape != shape)
        die(o.weightsFile + ": '" + name + "' (" + key + ") must be F8_E4M3 " +
            io::formatShape(shape) + " with --quant");
      const uint8_t *raw = weights->rawData(*info);
      out.assign(raw, raw + (info->dataEnd - info->dataBegin));
      auto t = weights->get(name + "_scale", io::DType::F32);
      if (!t)
        die(t.error());
      if (t->shape != sshape)
        die(o.weightsFile + ": '" + name + "_scale' has shape " +
            io::formatShape(t->shape) + ", expected " + io::formatShape(sshape));
      scales = t->toVector<float>();
      if (scales != roundTo(o.scaleDType, scales))
        die(o.weightsFile + ": '" + name + "_scale' is not exact in " +
            io::dtypeName(o.scaleDType) +
            " (--scale-dtype; moe-ref layer --quant-scales bf16 makes it so)");
    };
    // The int4 codes, scales and zero points of moe-ref layer --quant
    // int4:G[,zero_point] [--quant-shared] for the weight of --layer-weights
    // key `key`: U8 [lead..., k, n], F32 NAME_scale and U8 NAME_zero
    // [lead..., ceil(k/G), n].
    auto takeInt4 = [&](const char *key, std::vector<int64_t> lead, int64_t k, int64_t n,
                        std::vector<uint8_t> &codes, std::vector<float> &scales,
                        std::vector<uint8_t> &zeros) {
      const std::string &name = o.weightNames[key];
      const int64_t groups = (k + o.int4Group - 1) / o.int4Group;
      auto with = [&](int64_t rows) {
        std::vector<int64_t> shape = lead;
        shape.insert(shape.end(), {rows, n});
        return shape;
      };
      auto raw = [&](const std::string &t, std::vector<int64_t> shape,
                     std::vector<uint8_t> &out) {
        const io::SafeTensorInfo *info = weights->find(t);
        if (!info || info->dtype != io::DType::U8 || info->shape != shape)
          die(o.weightsFile + ": '" + t + "' (" + key + ") must be U8 " +
              io::formatShape(shape) + " with --quant=int4");
        const uint8_t *p = weights->rawData(*info);
        out.assign(p, p + (info->dataEnd - info->dataBegin));
      };
      raw(name, with(k), codes);
      if (o.int4ZeroPoint)
        raw(name + "_zero", with(groups), zeros);
      auto t = weights->get(name + "_scale", io::DType::F32);
      if (!t)
        die(t.error());
      if (t->shape != with(groups))
        die(o.weightsFile + ": '" + name + "_scale' has shape " + io::formatShape(t->shape) +
            ", expected " + io::formatShape(with(groups)));
      scales = t->toVector<float>();
      if (scales != roundTo(o.scaleDType, scales))
        die(o.weightsFile + ": '" + name + "_scale' is not exact in " +
            io::dtypeName(o.scaleDType) +
            " (--scale-dtype; moe-ref layer --quant-scales f16 makes it so)");
    };
    if (int4) {
      const double minZero = o.int4Format == "gptq" ? 1.0 : 0.0;
      quantizeInt4(m.w1, e, d, 2 * h, o.int4Group, o.int4ZeroPoint, m.w1q, m.w1s, m.w1z,
                   o.scaleDType, minZero);
      quantizeInt4(m.w2, e, h, d, o.int4Group, o.int4ZeroPoint, m.w2q, m.w2s, m.w2z,
                   o.scaleDType, minZero);
      if (l == o.weightsLayer) {
        takeInt4("w1", {e}, d, 2 * h, m.w1q, m.w1s, m.w1z);
        takeInt4("w2", {e}, h, d, m.w2q, m.w2s, m.w2z);
      }
      // The shared experts are int4 too, as AutoGPTQ, AutoAWQ and
      // llm-compressor quantize every nn.Linear of the block.
      if (sharedWidth && !o.unquantizedShared) {
        quantizeInt4(m.s1, 1, d, 2 * hs, o.int4Group, o.int4ZeroPoint, m.s1q, m.s1s, m.s1z,
                     o.scaleDType, minZero);
        quantizeInt4(m.s2, 1, hs, d, o.int4Group, o.int4ZeroPoint, m.s2q, m.s2s, m.s2z,
                     o.scaleDType, minZero);
        if (l == o.weightsLayer && o.weightNames.count("s1")) {
          takeInt4("s1", {}, d, 2 * hs, m.s1q, m.s1s, m.s1z);
          takeInt4("s2", {}, hs, d, m.s2q, m.s2s, m.s2z);
        }
      }
    }
    if (fp8) {
      const int64_t bk = o.fp8BlockK, bn = o.fp8BlockN;
      quantizeFp8(m.w1, e, d, 2 * h, bk, bn, m.w1q, m.w1s, o.scaleDType);
      quantizeFp8(m.w2, e, h, d, bk, bn, m.w2q, m.w2s, o.scaleDType);
      if (l == o.weightsLayer) {
        takeCodes("w1", {e}, d, 2 * h, m.w1q, m.w1s);
        takeCodes("w2", {e}, h, d, m.w2q, m.w2s);
      }
    }
    // The shared experts are FP8 too, as DeepSeek-V3 publishes them.
    if (fp8 && sharedWidth && !o.unquantizedShared) {
      const int64_t bk = o.fp8BlockK, bn = o.fp8BlockN, hs = sharedWidth;
      if (hs % bn != 0)
        die("--quant: BN = " + std::to_string(bn) +
            " must divide the shared width " + std::to_string(hs));
      quantizeFp8(m.s1, 1, d, 2 * hs, bk, bn, m.s1q, m.s1s, o.scaleDType);
      quantizeFp8(m.s2, 1, hs, d, bk, bn, m.s2q, m.s2s, o.scaleDType);
      if (l == o.weightsLayer && o.weightNames.count("s1")) {
        takeCodes("s1", {}, d, 2 * hs, m.s1q, m.s1s);
        takeCodes("s2", {}, hs, d, m.s2q, m.s2s);
      }
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
    if (o.fusedExperts) {
      // gate_up [E, 2H, D] and down [E, D, H]: each expert's w1 [D, 2H] and
      // w2 [H, D] transposed; FP8 codes and scales ([E, KB, NB] in the
      // moe layout) likewise.
      auto transposed = [&](auto &from, int64_t rows, int64_t cols) {
        std::remove_reference_t<decltype(from)> out(from.size());
        for (int64_t x = 0; x < e; ++x)
          for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < cols; ++j)
              out[(x * cols + j) * rows + i] = from[(x * rows + i) * cols + j];
        return out;
      };
      const std::string gu = q + "experts.gate_up_proj", dp = q + "experts.down_proj";
      if (!fp8) {
        put(gu, l, {e, 2 * h, d}, transposed(m.w1, d, 2 * h), o.dtype);
        put(dp, l, {e, d, h}, transposed(m.w2, h, d), o.dtype);
      } else {
        const int64_t bk = o.fp8BlockK, bn = o.fp8BlockN;
        auto blocks = [](int64_t n, int64_t b) { return (n + b - 1) / b; };
        // weight_scale_inv -> gate_up_proj_scale_inv (weight_scale -> _scale).
        const std::string suffix = o.scaleName.substr(std::strlen("weight"));
        putCodes(gu, l, {e, 2 * h, d}, transposed(m.w1q, d, 2 * h));
        putCodes(dp, l, {e, d, h}, transposed(m.w2q, h, d));
        put(gu + suffix, l, {e, blocks(2 * h, bn), blocks(d, bk)},
            transposed(m.w1s, blocks(d, bk), blocks(2 * h, bn)), o.scaleDType);
        put(dp + suffix, l, {e, blocks(d, bn), blocks(h, bk)},
            transposed(m.w2s, blocks(h, bk), blocks(d, bn)), o.scaleDType);
      }
    } else {
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
        if (int4) {
          const int64_t gs = o.int4Group, g1 = (d + gs - 1) / gs, g2 = (h + gs - 1) / gs;
          const uint8_t *c1 = m.w1q.data() + x * d * 2 * h;
          const float *s1 = m.w1s.data() + x * g1 * 2 * h;
          const uint8_t *z1 = o.int4ZeroPoint ? m.w1z.data() + x * g1 * 2 * h : nullptr;
          putInt4Linear(ex + w1, l, c1, s1, z1, d, 2 * h, 0, h);
          putInt4Linear(ex + w3, l, c1, s1, z1, d, 2 * h, h, h);
          putInt4Linear(ex + w2, l, m.w2q.data() + x * h * d, m.w2s.data() + x * g2 * d,
                        o.int4ZeroPoint ? m.w2z.data() + x * g2 * d : nullptr, h, d, 0, d);
          continue;
        }
        if (fp8) {

          // Codes [out, in] and scales [ceil(out/BN), ceil(in/BK)] per weight.
          const int64_t bk = o.fp8BlockK, bn = o.fp8BlockN;
          const int64_t dk = (d + bk - 1) / bk, hk = (h + bk - 1) / bk;
          const int64_t n1 = 2 * h / bn, dn = (d + bn - 1) / bn;
          const uint8_t *c1 = m.w1q.data() + x * d * 2 * h;
          const float *s1 = m.w1s.data() + x * dk * n1;
          // --break=missing-tensor: the first expert's gate has no scales.
          putFp8Linear(ex + w1, l, c1, s1, d, 2 * h, 0, h,
                       !(first && x == 0 && o.breakKind == "missing-tensor"));
          putFp8Linear(ex + w3, l, c1, s1, d, 2 * h, h, h);
          putFp8Linear(ex + w2, l, m.w2q.data() + x * h * d,
                       m.w2s.data() + x * hk * dn, h, d, 0, d);
          continue;
        }
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
    }
    if (sharedWidth) {
      std::string sh = q + (f == "qwen2_moe" ? "shared_expert." : "shared_experts.");
      std::vector<float> g(hs * d), u(hs * d), dn(d * hs);
      for (int64_t i = 0; i < d; ++i)
        for (int64_t j = 0; j < hs; ++j) {
          g[j * d + i] = m.s1[i * 2 * hs + j];
          u[j * d + i] = m.s1[i * 2 * hs + hs + j];
          dn[i * hs + j] = m.s2[j * d + i];
        }
      if (int4 && !o.unquantizedShared) {
        const uint8_t *z1 = o.int4ZeroPoint ? m.s1z.data() : nullptr;
        putInt4Linear(sh + "gate_proj", l, m.s1q.data(), m.s1s.data(), z1, d, 2 * hs, 0, hs);
        putInt4Linear(sh + "up_proj", l, m.s1q.data(), m.s1s.data(), z1, d, 2 * hs, hs, hs);
        putInt4Linear(sh + "down_proj", l, m.s2q.data(), m.s2s.data(),
                      o.int4ZeroPoint ? m.s2z.data() : nullptr, hs, d, 0, d);
      } else if (fp8 && !o.unquantizedShared) {
        putFp8Linear(sh + "gate_proj", l, m.s1q.data(), m.s1s.data(), d,
                     2 * hs, 0, hs);
        putFp8Linear(sh + "up_proj", l, m.s1q.data(), m.s1s.data(), d, 2 * hs,
                     hs, hs);
        putFp8Linear(sh + "down_proj", l, m.s2q.data(), m.s2s.data(), hs, d, 0,
                     d);
      } else {
        put(sh + "gate_proj.weight", l, {hs, d}, g, o.dtype);
        put(sh + "up_proj.weight", l, {hs, d}, u, o.dtype);
        put(sh + "down_proj.weight", l, {d, hs}, dn, o.dtype);
      }
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
      if (fp8) {
        const int64_t bk = o.fp8BlockK, bn = o.fp8BlockN;
        t["w1"] = codesTensor({e, d, 2 * h}, m.w1q);
        t["w2"] = codesTensor({e, h, d}, m.w2q);
        t["w1_scale"] = makeTensor(io::DType::F32,
                                   {e, (d + bk - 1) / bk, (2 * h + bn - 1) / bn}, m.w1s);
        t["w2_scale"] = makeTensor(
            io::DType::F32, {e, (h + bk - 1) / bk, (d + bn - 1) / bn}, m.w2s);
      } else {
        t["w1"] = makeTensor(o.dtype, {e, d, 2 * h}, m.w1);
        t["w2"] = makeTensor(o.dtype, {e, h, d}, m.w2);
      }
      if (!m.bias.empty())
        t["bias"] = makeTensor(io::DType::F32, {e}, m.bias);
      if (!m.s1q.empty()) {
        const int64_t bk = o.fp8BlockK, bn = o.fp8BlockN;
        t["s1"] = codesTensor({d, 2 * hs}, m.s1q);
        t["s2"] = codesTensor({hs, d}, m.s2q);
        t["s1_scale"] = makeTensor(io::DType::F32,
                                   {(d + bk - 1) / bk, 2 * hs / bn}, m.s1s);
        t["s2_scale"] = makeTensor(
            io::DType::F32, {(hs + bk - 1) / bk, (d + bn - 1) / bn}, m.s2s);
      } else if (!m.s1.empty()) {
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
