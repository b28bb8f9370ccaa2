//===- moe-import.cpp - MoE layers of a Hugging Face checkpoint as moe IR -===//
//
// moe-import CHECKPOINT_DIR -o OUT.mlir [--dtype=auto|f32|bf16|f16]
//            [--layers=all|i,j,...]
//
// Reads config.json and the safetensors headers (never the tensor data) of a
// Hugging Face checkpoint of model_type mixtral, qwen2_moe, qwen3_moe, olmoe
// or deepseek_v3 and writes one public function per MoE layer, @layer_<i>,
// whose parameters name the checkpoint's own tensors through
// #moe.checkpoint attributes (docs/spec.md §3.1.1 and §5). FP8 block-scaled
// checkpoints are imported as FP8 layers (docs/quantization.md, "Importing").
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Checkpoint.h"
#include "runtime/io/Json.h"
#include "runtime/io/TensorIO.h"
#include "tools/version/Version.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

using namespace moe;

namespace {

llvm::cl::OptionCategory importCategory("moe-import options");

llvm::cl::opt<std::string> checkpointDir(llvm::cl::Positional,
                                         llvm::cl::desc("CHECKPOINT_DIR"),
                                         llvm::cl::Required,
                                         llvm::cl::cat(importCategory));
llvm::cl::opt<std::string>
    outputPath("o", llvm::cl::desc("Output file ('-' for stdout)"),
               llvm::cl::value_desc("OUT.mlir"), llvm::cl::Required,
               llvm::cl::cat(importCategory));
llvm::cl::opt<std::string> dtypeOption(
    "dtype",
    llvm::cl::desc("Element type of the layers: auto (the checkpoint's, "
                   "default), f32, bf16 or f16"),
    llvm::cl::value_desc("auto|f32|bf16|f16"), llvm::cl::init("auto"),
    llvm::cl::cat(importCategory));
llvm::cl::opt<bool> int8ActivationsOption(
    "int8-activations",
    llvm::cl::desc("int4 checkpoints: the layers in the int8-activation mode "
                   "(#moe.quant<..., int8_activations>, docs/spec.md §2.1: the "
                   "activations quantized to int8 per group, integer dot products "
                   "on the CPU); an error for other checkpoints"),
    llvm::cl::init(false), llvm::cl::cat(importCategory));
llvm::cl::opt<std::string> layersOption(
    "layers",
    llvm::cl::desc("Layers to import: all (every MoE layer, default) or a "
                   "comma-separated list of layer indices (each a MoE layer)"),
    llvm::cl::value_desc("all|i,j,..."), llvm::cl::init("all"),
    llvm::cl::cat(importCategory));

const char *const overview = R"(moe-import: MoE layers of a Hugging Face checkpoint as moe IR

Reads CHECKPOINT_DIR/config.json and the headers of its safetensors files
(model.safetensors, or the shards of model.safetensors.index.json) and writes
one public function per MoE layer:

  func.func @layer_<i>(%x: tensor<?xDxT>, <parameters>) -> tensor<?xDxT>

holding one moe.layer with the model's routing, activation and shared
experts. Every parameter carries {moe.param = #moe.checkpoint<[...]>} naming
the checkpoint's own tensors, so

  moe-run OUT.mlir --entry=layer_<i> --params=CHECKPOINT_DIR --input=x.npy

runs the layer from the checkpoint as it is. Dense layers are skipped.
Supported model_type: mixtral, qwen2_moe, qwen3_moe, olmoe, deepseek_v3.
Routed experts are per-expert 2-D tensors or fused 3-D ones
(mlp.experts.gate_up_proj [E, 2H, D] and mlp.experts.down_proj [E, D, H],
as transformers 5 saves Qwen3-MoE). FP8 block-scaled checkpoints (quantization_config quant_method "fp8",
DeepSeek-V3/R1, Qwen3 FP8) become FP8 layers (f8E4M3FN expert weights with
f32 block scales, #moe.quant); FP8 shared experts are dequantized at load.
int4 checkpoints (quant_method "gptq" or "awq", or compressed-tensors'
pack-quantized) become int4 layers (i4 expert weights unpacked at load from
the I32 words, #moe.checkpoint int4 = ..., f32 scales, zero points,
#moe.quant<int4, group = G[, zero_point]>; with --int8-activations in the
int8-activation mode); int4 shared experts are dequantized at load
(#moe.checkpoint int4_scales).

Errors: one line on stderr starting with "moe-import: ", exit code 1, and
nothing written.
)";

int fail(const std::string &message) {
  llvm::outs().flush();
  llvm::errs() << "moe-import: " << message << "\n";
  return 1;
}

/// An error already formatted; thrown around as a value (no exceptions).
struct Failure {
  std::string message;
};

//===----------------------------------------------------------------------===//
// config.json
//===----------------------------------------------------------------------===//

class Config {
public:
  Config(io::json::Value root, std::string path)
      : root(root), path(std::move(path)) {}

  bool has(const char *key) const {
    auto v = root.find(key);
    return v && !v->isNull();
  }
  std::string where(const char *key) const {
    return path + ": " + key;
  }

  std::optional<Failure> getInt(const char *key, int64_t &out,
                                std::optional<int64_t> fallback,
                                int64_t min = 0) const {
    auto v = root.find(key);
    if (!v || v->isNull()) {
      if (!fallback)
        return Failure{path + ": missing key '" + key + "'"};
      out = *fallback;
      return std::nullopt;
    }
    uint64_t u;
    // -1 where the minimum allows it (GPTQ's and AWQ's group_size).
    if (min < 0 && v->isNumber() && v->asString() == "-1") {
      out = -1;
      return std::nullopt;
    }
    if (!v->getUInt64(u) || u > uint64_t(1) << 40)
      return Failure{path + ": key '" + key +
                     "' must be a non-negative integer" + (min < 0 ? " or -1" : "") + ", got " +
                     std::string(v->isNumber() || v->isString()
                                     ? v->asString()
                                     : "a non-number")};
    out = static_cast<int64_t>(u);
    if (out < min)
      return Failure{path + ": key '" + key + "' = " + std::to_string(out) +
                     " is out of range (must be >= " + std::to_string(min) +
                     ")"};
    return std::nullopt;
  }
  std::optional<Failure> getDouble(const char *key, double &out,
                                   double fallback) const {
    auto v = root.find(key);
    if (!v || v->isNull()) {
      out = fallback;
      return std::nullopt;
    }
    if (!v->isNumber())
      return Failure{path + ": key '" + key + "' must be a number"};
    std::string text(v->asString());
    char *end = nullptr;
    out = std::strtod(text.c_str(), &end);
    if (!end || *end || !std::isfinite(out))
      return Failure{path + ": key '" + key + "' must be a finite number, got " +
                     text};
    return std::nullopt;
  }
  std::optional<Failure> getBool(const char *key, bool &out,
                                 bool fallback) const {
    auto v = root.find(key);
    if (!v || v->isNull()) {
      out = fallback;
      return std::nullopt;
    }
    if (!v->isBool())
      return Failure{path + ": key '" + key + "' must be true or false"};
    out = v->asBool();
    return std::nullopt;
  }
  std::optional<Failure> getString(const char *key, std::string &out,
                                   std::optional<std::string> fallback) const {
    auto v = root.find(key);
    if (!v || v->isNull()) {
      if (!fallback)
        return Failure{path + ": missing key '" + key + "'"};
      out = *fallback;
      return std::nullopt;
    }
    if (!v->isString())
      return Failure{path + ": key '" + key + "' must be a string"};
    out = std::string(v->asString());
    return std::nullopt;
  }
  /// Every member of this object as a Config whose messages name it, in
  /// order; a Failure when a member is not an object.
  std::optional<Failure>
  getMembers(std::vector<std::pair<std::string, Config>> &out) const {
    for (size_t i = 0; i < root.size(); ++i) {
      std::string key(root.keyAt(i));
      if (!root.at(i).isObject())
        return Failure{path + ": key '" + key + "' must be an object"};
      out.emplace_back(key, Config(root.at(i), path + ": " + key));
    }
    return std::nullopt;
  }
  /// The object under `key` as a Config whose messages name it
  /// ("config.json: quantization_config: fmt"); std::nullopt when the key is
  /// absent or null, a Failure when it is not an object.
  std::optional<Failure> getObject(const char *key,
                                   std::optional<Config> &out) const {
    auto v = root.find(key);
    if (!v || v->isNull())
      return std::nullopt;
    if (!v->isObject())
      return Failure{path + ": key '" + key + "' must be an object"};
    out.emplace(*v, path + ": " + key);
    return std::nullopt;
  }
  /// A list of exactly `count` positive integers.
  std::optional<Failure> getPositiveInts(const char *key, size_t count,
                                         std::vector<int64_t> &out) const {
    auto v = root.find(key);
    if (!v || v->isNull())
      return Failure{path + ": missing key '" + key + "'"};
    auto bad = [&] {
      return Failure{path + ": key '" + key + "' must be a list of " +
                     std::to_string(count) + " positive integers"};
    };
    if (!v->isArray() || v->size() != count)
      return bad();
    out.clear();
    for (size_t i = 0; i < count; ++i) {
      uint64_t u;
      if (!v->at(i).getUInt64(u) || u < 1 || u > uint64_t(1) << 31)
        return bad();
      out.push_back(static_cast<int64_t>(u));
    }
    return std::nullopt;
  }
  std::optional<Failure> getIntList(const char *key,
                                    std::set<int64_t> &out) const {
    auto v = root.find(key);
    if (!v || v->isNull())
      return std::nullopt;
    if (!v->isArray())
      return Failure{path + ": key '" + key +
                     "' must be a list of layer indices"};
    for (size_t i = 0; i < v->size(); ++i) {
      uint64_t u;
      if (!v->at(i).getUInt64(u) || u > uint64_t(1) << 31)
        return Failure{path + ": key '" + key +
                       "' must be a list of non-negative integers"};
      out.insert(static_cast<int64_t>(u));
    }
    return std::nullopt;
  }

private:
  io::json::Value root;
  std::string path;
};

//===----------------------------------------------------------------------===//
// The model description
//===----------------------------------------------------------------------===//

/// One parameter of an imported layer.
struct Param {
  std::string argName; ///< "wr", "w1", ...
  io::CheckpointSpec spec;
  /// The shape of each checkpoint tensor (per expert for {e} names), as
  /// stored: [out, in] for nn.Linear weights.
  std::vector<std::vector<int64_t>> tensorShapes;
  std::vector<int64_t> argShape;
  /// What the parameter holds: values of the layer's type, f32 values
  /// (the selection bias, FP8 and int4 scales), FP8 E4M3 codes, or int4
  /// codes unpacked at load from I32 words (spec.int4).
  enum class Kind { Value, F32, Fp8Codes, Int4Codes } kind = Kind::Value;
};

struct Model {
  std::string modelType;
  int64_t hidden = 0, layers = 0, experts = 0, topK = 0, expertWidth = 0;
  std::string activation; ///< swiglu | geglu
  // Routing.
  bool sigmoid = false, normalize = true;
  double scale = 1.0;
  int64_t groups = 1, groupK = 1;
  // Shared experts.
  int64_t sharedWidth = 0;
  bool sharedGate = false;
  bool selectionBias = false;
  /// FP8 block-scaled expert weights (quantization_config quant_method
  /// "fp8"): the block [bN, bK] of weight_block_size, in the checkpoint's
  /// [out, in] order; 0 when the weights are not quantized. The suffix of
  /// the scale tensors' names is looked up in the checkpoint.
  int64_t fp8BlockN = 0, fp8BlockK = 0;
  std::string scaleSuffix = "_scale_inv";
  /// Where config.json sets the block and under which key, for messages.
  std::string blockWhere;
  std::string blockKey = "weight_block_size";
  /// The routed experts are fused 3-D tensors (`mlp.experts.gate_up_proj`
  /// [E, 2H, D] and `mlp.experts.down_proj` [E, D, H], one nn.Linear
  /// matrix per expert, as transformers 5 saves Qwen3-MoE) rather than one
  /// 2-D tensor per expert; found in the checkpoint.
  bool fusedExperts = false;
  /// The shared experts are FP8 too (DeepSeek-V3): the layer takes them as
  /// values of its type, dequantized at load (#moe.checkpoint fp8_scales).
  bool fp8Shared = false;
  /// int4 group-quantized expert weights (quant_method "gptq", "awq", or
  /// compressed-tensors' pack-quantized): how the words pack the codes
  /// (None: not int4), the group along the input dimension K (-1: one
  /// group per column, GPTQ's and AWQ's group_size -1, compressed-tensors'
  /// strategy channel), and whether zero points are stored (GPTQ, AWQ,
  /// compressed-tensors' asymmetric form; its symmetric form has none: the
  /// codes are stored plus 8, the dialect's default zero point).
  io::Int4Packing int4 = io::Int4Packing::None;
  int64_t int4Group = 0;
  bool int4ZeroPoint = false;
  std::string int4Method; ///< for messages: "gptq", "awq", "compressed-tensors"
  /// The shared experts are int4 too (their nn.Linear weights packed as the
  /// routed experts'): the layer takes them as values of its type,
  /// dequantized at load (#moe.checkpoint int4_scales).
  bool int4Shared = false;
  /// The group of #moe.quant: int4Group, or for -1 the larger of D and H
  /// (then one group spans every K of both GEMMs).
  int64_t quantGroup() const {
    return int4Group > 0 ? int4Group : std::max(hidden, expertWidth);
  }
  /// Which layers are MoE layers.
  std::vector<bool> isMoE;
  std::string denseReason; ///< why a layer is dense, for --layers errors
};

/// compressed-tensors' `actorder` of a weights scheme: "group" (or its
/// alias "dynamic", or true) reorders the groups with a stored
/// `weight_g_idx`, which the dialect's groups (k / G) cannot express;
/// "weight" ("static"), false or null keep the groups in order.
std::optional<Failure> checkActOrder(const Config &w) {
  if (!w.has("actorder"))
    return std::nullopt;
  bool flag = false;
  if (!w.getBool("actorder", flag, false))
    return flag ? std::optional<Failure>(Failure{
                      w.where("actorder") + " is true: act-order groups (weight_g_idx) put "
                      "the rows of K out of the dialect's group order (k / G); not supported"})
                : std::nullopt;
  std::string order;
  if (w.getString("actorder", order, std::nullopt))
    return Failure{w.where("actorder") + " must be a string, a boolean or null"};
  if (order == "weight" || order == "static")
    return std::nullopt;
  if (order == "group" || order == "dynamic")
    return Failure{w.where("actorder") + " is '" + order + "': act-order groups "
                   "(weight_g_idx) put the rows of K out of the dialect's group order "
                   "(k / G); not supported ('weight' is)"};
  return Failure{w.where("actorder") + " is '" + order +
                 "'; expected 'group', 'weight', 'static', 'dynamic', a boolean or null"};
}

/// compressed-tensors' quantization_config: every group of config_groups
/// quantizes its weights either as FP8 blocks (llm-compressor's FP8_BLOCK:
/// num_bits 8, type float, strategy block, one block_structure [bN, bK] for
/// all, dynamic or no input activations; the scales are named
/// `weight_scale`, found in the checkpoint) or as pack-quantized int4
/// (num_bits 4, type int, strategy group or channel, symmetric or with
/// zero points, weight-only, one scheme for all).
std::optional<Failure> describeCompressedTensors(const Config &q, Model &m) {
  std::optional<Config> groups;
  std::optional<Failure> f;
  if ((f = q.getObject("config_groups", groups)))
    return f;
  std::vector<std::pair<std::string, Config>> members;
  if (groups && (f = groups->getMembers(members)))
    return f;
  if (members.empty())
    return Failure{q.where("config_groups") + " is missing or empty"};
  std::vector<int64_t> first;
  int64_t int4Group = 0; // -1: strategy channel
  bool int4Symmetric = true;
  for (const auto &[name, group] : members) {
    std::optional<Config> w, in;
    if ((f = group.getObject("weights", w)) || (f = group.getObject("input_activations", in)))
      return f;
    if (!w)
      return Failure{group.where("weights") + " is missing"};
    int64_t bits;
    std::string type, strategy;
    if ((f = w->getInt("num_bits", bits, std::nullopt)) ||
        (f = w->getString("type", type, std::string("int"))) ||
        (f = w->getString("strategy", strategy, std::string("tensor"))))
      return f;
    if (bits == 4 && type == "int" && (strategy == "group" || strategy == "channel")) {
      // pack-quantized int4, weight-only: groups along the input dimension
      // (strategy group) or one per output column (channel: the scales are
      // [out, 1]); symmetric (the codes stored plus 8) or with zero points
      // (weight_zero_point); one scheme for all groups; no activation
      // quantization; no reordering of the groups (actorder group).
      bool symmetric = true;
      int64_t groupSize = -1;
      if ((f = w->getBool("symmetric", symmetric, true)) ||
          (strategy == "group" && (f = w->getInt("group_size", groupSize, std::nullopt, 1))))
        return f;
      if (std::optional<Failure> a = checkActOrder(*w))
        return a;
      if (int4Group && (groupSize != int4Group || symmetric != int4Symmetric))
        return Failure{w->where(groupSize != int4Group ? "group_size" : "symmetric") +
                       ": strategy '" + strategy + "', symmetric " +
                       (symmetric ? "true" : "false") + ", group_size " +
                       std::to_string(groupSize) + " differs from the first group's scheme"};
      if (in)
        return Failure{group.where("input_activations") + " is set: moe-import reads "
                       "weight-only int4 (w4a16) checkpoints"};
      if (!first.empty())
        return Failure{group.where("weights") + " is int4, another group FP8 blocks"};
      int4Group = groupSize;
      int4Symmetric = symmetric;
      continue;
    }
    if (bits != 8 || type != "float" || strategy != "block")
      return Failure{group.where("weights") + " has num_bits " + std::to_string(bits) +
                     ", type '" + type + "', strategy '" + strategy +
                     "': moe-import reads compressed-tensors FP8 block weights (8, float, "
                     "block) and int4 (4, int, group or channel); this scheme is not supported"};
    if (int4Group)
      return Failure{group.where("weights") + " is FP8 blocks, another group int4"};
    std::vector<int64_t> block;
    if ((f = w->getPositiveInts("block_structure", 2, block)))
      return f;
    if (!first.empty() && block != first)
      return Failure{group.where("weights") + ": block_structure [" + std::to_string(block[0]) +
                     ", " + std::to_string(block[1]) + "] differs from the first group's [" +
                     std::to_string(first[0]) + ", " + std::to_string(first[1]) + "]"};
    first = block;
    bool dynamic = false;
    if (in && (f = in->getBool("dynamic", dynamic, false)))
      return f;
    if (in && !dynamic)
      return Failure{in->where("dynamic") + " is false; moe-import computes weight-only "
                     "(activations in the layer's type), so static activation scales "
                     "would be ignored"};
  }
  if (int4Group) {
    std::string format;
    if ((f = q.getString("format", format, std::string("pack-quantized"))))
      return f;
    if (format != "pack-quantized")
      return Failure{q.where("format") + " is '" + format +
                     "'; int4 weights must be 'pack-quantized'"};
    m.int4 = io::Int4Packing::PackQuantized;
    m.int4Group = int4Group;
    m.int4ZeroPoint = !int4Symmetric;
    m.int4Method = "compressed-tensors";
    return std::nullopt;
  }
  m.fp8BlockN = first[0];
  m.fp8BlockK = first[1];
  m.blockWhere = q.where("config_groups");
  m.blockKey = "block_structure";
  return std::nullopt;
}

/// GPTQ's (AutoGPTQ, GPTQModel) and AWQ's (AutoAWQ, GEMM kernels)
/// quantization_config: 4 bits, a group size (or -1), GPTQ without
/// act-order and in the original checkpoint format, AWQ with zero points.
std::optional<Failure> describeGptqAwq(const Config &q, const std::string &method, Model &m) {
  std::optional<Failure> f;
  int64_t bits, group;
  if ((f = q.getInt("bits", bits, std::nullopt)) ||
      (f = q.getInt("group_size", group, std::nullopt, -1)))
    return f;
  if (bits != 4)
    return Failure{q.where("bits") + " = " + std::to_string(bits) +
                   "; moe-import reads 4-bit " + method + " checkpoints"};
  if (group == 0 || group < -1)
    return Failure{q.where("group_size") + " = " + std::to_string(group) +
                   " is out of range (a size >= 1, or -1 for one group per column)"};
  if (method == "gptq") {
    bool descAct = false;
    std::string format;
    if ((f = q.getBool("desc_act", descAct, false)) ||
        (f = q.getString("checkpoint_format", format, std::string("gptq"))))
      return f;
    if (descAct)
      return Failure{q.where("desc_act") + " is true: act-order checkpoints put the rows "
                     "of K in the order of g_idx, which the dialect's groups (k / G) do "
                     "not; not supported"};
    if (format != "gptq")
      return Failure{q.where("checkpoint_format") + " is '" + format +
                     "'; moe-import reads 'gptq' (zero points stored minus one)"};
    m.int4 = io::Int4Packing::Gptq;
  } else {
    bool zeroPoint = true;
    std::string version;
    if ((f = q.getBool("zero_point", zeroPoint, true)) ||
        (f = q.getString("version", version, std::string("gemm"))))
      return f;
    if (!zeroPoint)
      return Failure{q.where("zero_point") + " is false; moe-import reads AWQ checkpoints "
                     "with zero points"};
    if (version != "gemm" && version != "GEMM")
      return Failure{q.where("version") + " is '" + version +
                     "'; moe-import reads AWQ's GEMM packing ('gemm')"};
    m.int4 = io::Int4Packing::Awq;
  }
  m.int4Group = group;
  m.int4ZeroPoint = true;
  m.int4Method = method;
  return std::nullopt;
}

/// The quantization_config of `cfg`, if any, into `m` (docs/quantization.md,
/// "moe-import"). FP8 block-scaled weights (quant_method "fp8", DeepSeek-V3/R1
/// and Qwen3 FP8, or compressed-tensors' FP8_BLOCK) are imported; the other
/// methods are one error.
std::optional<Failure> describeQuantization(const Config &cfg, Model &m) {
  std::optional<Config> q;
  std::optional<Failure> f;
  if ((f = cfg.getObject("quantization_config", q)) || !q)
    return f;
  std::string method;
  if ((f = q->getString("quant_method", method, std::nullopt)))
    return f;
  if (method == "compressed-tensors")
    return describeCompressedTensors(*q, m);
  if (method == "gptq" || method == "awq")
    return describeGptqAwq(*q, method, m);
  if (method != "fp8")
    return Failure{q->where("quant_method") + " is '" + method +
                   "': moe-import reads FP8 block-scaled (quant_method 'fp8', "
                   "compressed-tensors' FP8 blocks) and int4 (gptq, awq, "
                   "compressed-tensors' pack-quantized) checkpoints; this method is unknown"};

  std::string fmt, activations;
  if ((f = q->getString("fmt", fmt, std::string("e4m3"))) ||
      (f = q->getString("activation_scheme", activations,
                        std::string("dynamic"))))
    return f;
  if (fmt != "e4m3")
    return Failure{q->where("fmt") + " is '" + fmt +
                   "'; FP8 weights must be e4m3 (float8_e4m3fn)"};
  // "dynamic": activations are quantized on the fly (DeepSeek's w8a8),
  // which the weight-only numerics replace by the layer's type; "static"
  // checkpoints carry activation scales that would be ignored.
  if (activations != "dynamic")
    return Failure{q->where("activation_scheme") + " is '" + activations +
                   "'; moe-import computes weight-only (activations in the "
                   "layer's type), so only 'dynamic' checkpoints carry no "
                   "activation scales it would ignore"};
  std::vector<int64_t> block;
  if ((f = q->getPositiveInts("weight_block_size", 2, block)))
    return f;
  m.fp8BlockN = block[0];
  m.fp8BlockK = block[1];
  return std::nullopt;
}

std::optional<Failure> describeModel(const Config &cfg, Model &m) {
  std::optional<Failure> f;
  if ((f = cfg.getString("model_type", m.modelType, std::nullopt)))
    return f;
  const std::string &t = m.modelType;
  if (t != "mixtral" && t != "qwen2_moe" && t != "qwen3_moe" && t != "olmoe" &&
      t != "deepseek_v3")
    return Failure{cfg.where("model_type") + " is '" + t +
                   "', which moe-import does not know (supported: mixtral, "
                   "qwen2_moe, qwen3_moe, olmoe, deepseek_v3)"};
  if ((f = describeQuantization(cfg, m)))
    return f;
  if ((f = cfg.getInt("hidden_size", m.hidden, std::nullopt, 1)) ||
      (f = cfg.getInt("num_hidden_layers", m.layers, std::nullopt, 1)) ||
      (f = cfg.getInt("num_experts_per_tok", m.topK, std::nullopt, 1)))
    return f;
  std::string act;
  if ((f = cfg.getString("hidden_act", act, std::string("silu"))))
    return f;
  if (act == "silu" || act == "swish")
    m.activation = "swiglu";
  else if (act == "gelu")
    m.activation = "geglu";
  else
    return Failure{cfg.where("hidden_act") + " is '" + act +
                   "'; gated experts need silu or gelu"};

  const char *expertsKey = t == "mixtral"       ? "num_local_experts"
                           : t == "deepseek_v3" ? "n_routed_experts"
                                                : "num_experts";
  if ((f = cfg.getInt(expertsKey, m.experts, std::nullopt, 1)))
    return f;
  const char *widthKey = t == "mixtral" || t == "olmoe"
                             ? "intermediate_size"
                             : "moe_intermediate_size";
  if ((f = cfg.getInt(widthKey, m.expertWidth, std::nullopt, 1)))
    return f;
  if (m.topK > m.experts)
    return Failure{cfg.where("num_experts_per_tok") + " = " +
                   std::to_string(m.topK) + " is out of range: the model has " +
                   std::to_string(m.experts) + " experts (" + expertsKey +
                   ")"};

  m.isMoE.assign(m.layers, true);
  if (t == "mixtral") {
    m.normalize = true;
  } else if (t == "olmoe") {
    if ((f = cfg.getBool("norm_topk_prob", m.normalize, false)))
      return f;
  } else if (t == "qwen2_moe" || t == "qwen3_moe") {
    if ((f = cfg.getBool("norm_topk_prob", m.normalize, false)))
      return f;
    int64_t step;
    std::set<int64_t> mlpOnly;
    if ((f = cfg.getInt("decoder_sparse_step", step, 1, 1)) ||
        (f = cfg.getIntList("mlp_only_layers", mlpOnly)))
      return f;
    for (int64_t i = 0; i < m.layers; ++i)
      m.isMoE[i] = !mlpOnly.count(i) && (i + 1) % step == 0;
    m.denseReason = "decoder_sparse_step = " + std::to_string(step) +
                    ", mlp_only_layers";
    if (t == "qwen2_moe") {
      if ((f = cfg.getInt("shared_expert_intermediate_size", m.sharedWidth,
                          std::nullopt, 1)))
        return f;
      m.sharedGate = true;
    }
  } else { // deepseek_v3
    std::string scoring;
    if ((f = cfg.getString("scoring_func", scoring, std::string("sigmoid"))))
      return f;
    if (scoring != "sigmoid" && scoring != "softmax")
      return Failure{cfg.where("scoring_func") + " is '" + scoring +
                     "' (supported: sigmoid, softmax)"};
    m.sigmoid = scoring == "sigmoid";
    int64_t nShared, firstDense, freq;
    if ((f = cfg.getBool("norm_topk_prob", m.normalize, true)) ||
        (f = cfg.getDouble("routed_scaling_factor", m.scale, 1.0)) ||
        (f = cfg.getInt("n_group", m.groups, 1, 1)) ||
        (f = cfg.getInt("topk_group", m.groupK, m.groups, 1)) ||
        (f = cfg.getInt("n_shared_experts", nShared, 0, 0)) ||
        (f = cfg.getInt("first_k_dense_replace", firstDense, 0, 0)) ||
        (f = cfg.getInt("moe_layer_freq", freq, 1, 1)))
      return f;
    if (!(m.scale > 0))
      return Failure{cfg.where("routed_scaling_factor") +
                     " is out of range (must be > 0)"};
    if (m.experts % m.groups != 0)
      return Failure{cfg.where("n_group") + " = " + std::to_string(m.groups) +
                     " is out of range: it does not divide n_routed_experts = " +
                     std::to_string(m.experts)};
    if (m.groupK > m.groups)
      return Failure{cfg.where("topk_group") + " = " +
                     std::to_string(m.groupK) +
                     " is out of range: it exceeds n_group = " +
                     std::to_string(m.groups)};
    if (m.topK > m.groupK * (m.experts / m.groups))
      return Failure{cfg.where("num_experts_per_tok") + " = " +
                     std::to_string(m.topK) +
                     " is out of range: the topk_group = " +
                     std::to_string(m.groupK) + " kept groups hold only " +
                     std::to_string(m.groupK * (m.experts / m.groups)) +
                     " experts"};
    m.sharedWidth = nShared * m.expertWidth;
    m.selectionBias = true;
    for (int64_t i = 0; i < m.layers; ++i)
      m.isMoE[i] = i >= firstDense && i % freq == 0;
    m.denseReason = "first_k_dense_replace = " + std::to_string(firstDense) +
                    ", moe_layer_freq = " + std::to_string(freq);
  }
  if (m.blockWhere.empty())
    m.blockWhere = cfg.where("quantization_config");
  return std::nullopt;
}

/// Per-expert FP8 gate and up projections are joined into one w1, their
/// scales too: a block of bN rows must not straddle them (fused experts
/// hold the joined matrix and its scales as they are).
std::optional<Failure> checkJoinedBlocks(const Model &m) {
  if (m.fp8BlockN == 0 || m.fusedExperts || m.expertWidth % m.fp8BlockN == 0)
    return std::nullopt;
  return Failure{m.blockWhere + ": " + m.blockKey + " = [" +
                 std::to_string(m.fp8BlockN) + ", " +
                 std::to_string(m.fp8BlockK) + "] does not divide the " +
                 "experts' width " + std::to_string(m.expertWidth) +
                 " (the gate and up projections' blocks of rows, joined "
                 "into one w1, would straddle them)"};
}

std::vector<Param> layerParams(const Model &m, int64_t layer);

/// The prefix of layer `layer`'s shared-expert tensors.
std::string sharedPrefix(const Model &m, int64_t layer) {
  return "model.layers." + std::to_string(layer) + "." +
         (m.modelType == "qwen2_moe" ? "mlp.shared_expert." : "mlp.shared_experts.");
}

/// The suffixes of an int4 nn.Linear's tensors after its module name:
/// AutoGPTQ's and AutoAWQ's, or compressed-tensors'.
struct Int4Names {
  const char *codes, *scales, *zeros;
};
Int4Names int4Names(const Model &m) {
  if (m.int4 == io::Int4Packing::PackQuantized)
    return {".weight_packed", ".weight_scale", ".weight_zero_point"};
  return {".qweight", ".scales", ".qzeros"};
}

/// The stored shapes of an int4 nn.Linear with `in` inputs and `out`
/// outputs in groups of G along `in` (`groups` = ceil(in / G)): its packed
/// codes (AutoGPTQ `[in/8, out]`, AutoAWQ `[in, out/8]`, compressed-tensors
/// `[out, in/8]`), scales (`[groups, out]`; compressed-tensors
/// `[out, groups]`) and zero points (`[groups, out/8]`; compressed-tensors
/// `[out/8, groups]`).
std::vector<int64_t> packedShape(const Model &m, int64_t in, int64_t out) {
  switch (m.int4) {
  case io::Int4Packing::PackQuantized:
    return {out, in / 8};
  case io::Int4Packing::Gptq:
    return {in / 8, out};
  default:
    return {in, out / 8};
  }
}
std::vector<int64_t> int4ScaleShape(const Model &m, int64_t groups, int64_t out) {
  if (m.int4 == io::Int4Packing::PackQuantized)
    return {out, groups};
  return {groups, out};
}
std::vector<int64_t> int4ZeroShape(const Model &m, int64_t groups, int64_t out) {
  if (m.int4 == io::Int4Packing::PackQuantized)
    return {out / 8, groups};
  return {groups, out / 8};
}

/// int4 checkpoints: the packing needs the widths in whole words (8 codes,
/// the shared experts' too when they are int4) and the routed experts one
/// tensor per nn.Linear; GPTQ's `g_idx`, when stored, must be the trivial
/// k / group (act-order is refused by the config already).
std::optional<Failure> checkInt4Model(const Model &m, const io::TensorStore &store,
                                      int64_t layer) {
  if (m.int4 == io::Int4Packing::None)
    return std::nullopt;
  if (m.hidden % 8 != 0 || m.expertWidth % 8 != 0)
    return Failure{"config.json: hidden_size " + std::to_string(m.hidden) +
                   " and the experts' width " + std::to_string(m.expertWidth) +
                   " must be multiples of 8 for int4 weights packed 8 to a word"};
  if (m.int4Shared && m.sharedWidth % 8 != 0)
    return Failure{"config.json: the shared experts' width " + std::to_string(m.sharedWidth) +
                   " must be a multiple of 8 for int4 weights packed 8 to a word"};
  if (m.fusedExperts)
    return Failure{"model.layers." + std::to_string(layer) +
                   ".mlp.experts.gate_up_proj: fused 3-D experts in an int4 (" + m.int4Method +
                   ") checkpoint are not supported"};
  if (m.int4 != io::Int4Packing::Gptq)
    return std::nullopt;
  // g_idx of every expert projection of the first MoE layer.
  const int64_t group = m.quantGroup();
  for (const Param &param : layerParams(m, layer)) {
    if (param.argName != "w1" && param.argName != "w2" &&
        !(m.int4Shared && (param.argName == "s1" || param.argName == "s2")))
      continue;
    const int64_t experts = param.spec.perExpert() ? m.experts : 1;
    for (int64_t e = 0; e < experts; ++e)
      for (const std::string &pattern : param.spec.names) {
        std::string name = io::CheckpointSpec::expand(pattern, e);
        name = name.substr(0, name.size() - std::string(".qweight").size()) + ".g_idx";
        const io::TensorStore::Entry *entry = store.find(name);
        if (!entry)
          continue;
        const io::SafeTensorInfo &info = *entry->info;
        const int64_t k = param.argName == "w1" || param.argName == "s1" ? m.hidden
                          : param.argName == "w2"                          ? m.expertWidth
                                                                           : m.sharedWidth;
        if (info.dtype != io::DType::I32 || info.shape != std::vector<int64_t>{k})
          return Failure{"tensor '" + name + "' in " + entry->file->path() + " has dtype " +
                         io::safetensorsDTypeName(info.dtype) + " and shape " +
                         io::formatShape(info.shape) + ", expected I32 [" + std::to_string(k) +
                         "]"};
        const uint8_t *data = store.rawData(*entry);
        for (int64_t i = 0; i < k; ++i) {
          int32_t g;
          std::memcpy(&g, data + 4 * i, 4);
          if (g != i / group)
            return Failure{"tensor '" + name + "': row " + std::to_string(i) + " is in group " +
                           std::to_string(g) + ", not " + std::to_string(i / group) +
                           " (row / group_size): act-order rows are not supported"};
        }
      }
  }
  return std::nullopt;
}

/// The parameters of MoE layer `layer`.

std::vector<Param> layerParams(const Model &m, int64_t layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  const int64_t d = m.hidden, e = m.experts, h = m.expertWidth;
  std::string gate, expert, w1, w3, w2;
  if (m.modelType == "mixtral") {
    gate = p + "block_sparse_moe.gate.weight";
    expert = p + "block_sparse_moe.experts.{e}.";
    w1 = "w1.weight", w3 = "w3.weight", w2 = "w2.weight";
  } else {
    gate = p + "mlp.gate.weight";
    expert = p + "mlp.experts.{e}.";
    w1 = "gate_proj.weight", w3 = "up_proj.weight", w2 = "down_proj.weight";
  }
  std::vector<Param> params;
  using Kind = Param::Kind;
  // Appends a parameter; the reference is valid until the next add.
  auto add = [&](std::string arg, std::vector<std::string> names,
                 bool transpose, std::vector<std::vector<int64_t>> shapes,
                 std::vector<int64_t> argShape,
                 Kind kind = Kind::Value) -> Param & {
    Param q;
    q.argName = std::move(arg);
    q.spec.names = std::move(names);
    q.spec.transpose = transpose;
    q.tensorShapes = std::move(shapes);
    q.argShape = std::move(argShape);
    q.kind = kind;
    params.push_back(std::move(q));
    return params.back();
  };
  // The shared experts (Qwen2-MoE's shared_expert, DeepSeek's
  // shared_experts), taken by the layer as values of its type: as stored,
  // FP8 ones dequantized at load (fp8_scales), int4 ones too (int4_scales).
  auto addShared = [&] {
    if (m.sharedWidth <= 0)
      return;
    const int64_t hs = m.sharedWidth;
    const std::string shared = sharedPrefix(m, layer);
    if (m.int4Shared) {
      // Each nn.Linear's packed words, scales and zero points as the routed
      // experts' (packedShape), dequantized to [in, out].
      auto dequantized = [&](const char *arg, std::vector<std::string> modules, int64_t in,
                             int64_t out, std::vector<int64_t> argShape) {
        std::vector<std::string> names;
        std::vector<std::vector<int64_t>> shapes;
        Int4Names n = int4Names(m);
        for (const std::string &module : modules)
          names.push_back(shared + module + n.codes), shapes.push_back(packedShape(m, in, out));
        Param &q = add(arg, names, false, shapes, argShape);
        q.spec.int4 = m.int4;
        q.spec.group = m.quantGroup();
        for (const std::string &module : modules) {
          q.spec.int4Scales.push_back(shared + module + n.scales);
          if (m.int4ZeroPoint)
            q.spec.int4Zeros.push_back(shared + module + n.zeros);
        }
      };
      dequantized("s1", {"gate_proj", "up_proj"}, d, hs, {d, 2 * hs});
      dequantized("s2", {"down_proj"}, hs, d, {hs, d});
    } else {
      // FP8 shared experts are dequantized at load (fp8_scales).
      auto dequantizedIfFp8 = [&](Param &q) {
        if (!m.fp8Shared)
          return;
        for (const std::string &name : q.spec.names)
          q.spec.fp8Scales.push_back(name + m.scaleSuffix);
        q.spec.blockN = m.fp8BlockN;
        q.spec.blockK = m.fp8BlockK;
      };
      dequantizedIfFp8(add("s1", {shared + "gate_proj.weight", shared + "up_proj.weight"},
                           true, {{hs, d}, {hs, d}}, {d, 2 * hs}));
      dequantizedIfFp8(add("s2", {shared + "down_proj.weight"}, true, {{d, hs}}, {hs, d}));
    }
    if (m.sharedGate)
      add("sg", {p + "mlp.shared_expert_gate.weight"}, true, {{1, d}}, {d, 1});
  };
  add("wr", {gate}, true, {{e, d}}, {d, e});
  if (m.selectionBias)
    add("bias", {p + "mlp.gate.e_score_correction_bias"}, false, {{e}}, {e},
        Kind::F32);
  if (m.int4 != io::Int4Packing::None) {
    // One I32 tensor of packed codes per nn.Linear (AutoGPTQ's `qweight`
    // [in/8, out], AutoAWQ's [in, out/8], compressed-tensors'
    // `weight_packed` [out, in/8], transposed), its scales ([G, out];
    // compressed-tensors [out, G], transposed) and zero points (GPTQ, AWQ:
    // `qzeros` [G, out/8]), G = ceil(in / group); the gate and up
    // projections joined into w1 as bf16 weights are.
    auto base = [](const std::string &module) {
      return module.substr(0, module.size() - std::string(".weight").size());
    };
    const std::string g1 = expert + base(w1), g3 = expert + base(w3), g2 = expert + base(w2);
    const int64_t group = m.quantGroup();
    auto blocksOf = [](int64_t n, int64_t b) { return (n + b - 1) / b; };
    const int64_t k1 = blocksOf(d, group), k2 = blocksOf(h, group);
    const bool ct = m.int4 == io::Int4Packing::PackQuantized;
    const Int4Names n = int4Names(m);
    auto codes = [&](const char *arg, std::vector<std::string> modules, int64_t in,
                     int64_t out, std::vector<int64_t> argShape) {
      std::vector<std::string> names;
      std::vector<std::vector<int64_t>> shapes;
      for (const std::string &module : modules)
        names.push_back(module + n.codes), shapes.push_back(packedShape(m, in, out));
      add(arg, names, ct, shapes, argShape, Kind::Int4Codes).spec.int4 = m.int4;
    };
    auto scales = [&](const char *arg, std::vector<std::string> modules, int64_t groups,
                      int64_t out, std::vector<int64_t> argShape) {
      std::vector<std::string> names;
      std::vector<std::vector<int64_t>> shapes;
      for (const std::string &module : modules)
        names.push_back(module + n.scales), shapes.push_back(int4ScaleShape(m, groups, out));
      add(arg, names, ct, shapes, argShape, Kind::F32);
    };
    // Zero points: GPTQ's and AWQ's `qzeros` [G, out/8] packed along out;
    // compressed-tensors' `weight_zero_point` [out/8, G] packed along out,
    // its rows, as GPTQ packs qweight (stored plus 8, as the codes are, so
    // the unsigned codes need no offset), transposed.
    auto zeros = [&](const char *arg, std::vector<std::string> modules, int64_t groups,
                     int64_t out, std::vector<int64_t> argShape) {
      std::vector<std::string> names;
      std::vector<std::vector<int64_t>> shapes;
      for (const std::string &module : modules)
        names.push_back(module + n.zeros), shapes.push_back(int4ZeroShape(m, groups, out));
      add(arg, names, ct, shapes, argShape, Kind::Int4Codes).spec.int4 =
          ct                                 ? io::Int4Packing::Gptq
          : m.int4 == io::Int4Packing::Gptq ? io::Int4Packing::GptqZeros
                                             : io::Int4Packing::Awq;
    };
    codes("w1", {g1, g3}, d, h, {e, d, 2 * h});
    codes("w2", {g2}, h, d, {e, h, d});
    scales("w1_scale", {g1, g3}, k1, h, {e, k1, 2 * h});
    scales("w2_scale", {g2}, k2, d, {e, k2, d});
    if (m.int4ZeroPoint) {
      zeros("w1_zero", {g1, g3}, k1, h, {e, k1, 2 * h});
      zeros("w2_zero", {g2}, k2, d, {e, k2, d});
    }
    addShared();
    return params;
  }
  const bool fp8 = m.fp8BlockN > 0;
  const Kind weights = fp8 ? Kind::Fp8Codes : Kind::Value;
  auto blocks = [](int64_t n, int64_t b) { return (n + b - 1) / b; };
  const int64_t bN = m.fp8BlockN, bK = m.fp8BlockK;
  const std::string &suffix = m.scaleSuffix;
  if (m.fusedExperts) {
    // One [E, out, in] tensor per projection (gate rows, then up rows),
    // each expert's matrix transposed; FP8 scales [E, ceil(out/bN),
    // ceil(in/bK)] likewise. The joined gate and up rows have their blocks
    // as stored, so bN need not divide H.
    const std::string fused = p + "mlp.experts.";
    add("w1", {fused + "gate_up_proj"}, true, {{e, 2 * h, d}}, {e, d, 2 * h}, weights);
    add("w2", {fused + "down_proj"}, true, {{e, d, h}}, {e, h, d}, weights);
    if (fp8) {
      add("w1_scale", {fused + "gate_up_proj" + suffix}, true,
          {{e, blocks(2 * h, bN), blocks(d, bK)}}, {e, blocks(d, bK), blocks(2 * h, bN)},
          Kind::F32);
      add("w2_scale", {fused + "down_proj" + suffix}, true,
          {{e, blocks(d, bN), blocks(h, bK)}}, {e, blocks(h, bK), blocks(d, bN)}, Kind::F32);
    }
  } else {
    add("w1", {expert + w1, expert + w3}, true, {{h, d}, {h, d}}, {e, d, 2 * h}, weights);
    add("w2", {expert + w2}, true, {{d, h}}, {e, h, d}, weights);
    if (fp8) {
      // The scales of each nn.Linear weight [out, in]: [ceil(out/bN),
      // ceil(in/bK)], transposed, stacked and concatenated as the weights
      // are (checkJoinedBlocks: H is a multiple of bN, so the gate's and the
      // up projection's blocks of columns do not straddle).
      add("w1_scale", {expert + w1 + suffix, expert + w3 + suffix}, true,
          {{blocks(h, bN), blocks(d, bK)}, {blocks(h, bN), blocks(d, bK)}},
          {e, blocks(d, bK), 2 * blocks(h, bN)}, Kind::F32);
      add("w2_scale", {expert + w2 + suffix}, true, {{blocks(d, bN), blocks(h, bK)}},
          {e, blocks(h, bK), blocks(d, bN)}, Kind::F32);
    }
  }
  addShared();
  return params;
}

/// Checks that every tensor of `param` is in the checkpoint with the
/// expected shape and a float dtype.
std::optional<Failure> checkTensors(const io::TensorStore &store,
                                    const Model &m, const Param &param) {
  int64_t experts = param.spec.perExpert() ? m.experts : 1;
  for (int64_t e = 0; e < experts; ++e) {
    for (size_t i = 0; i < param.spec.names.size(); ++i) {
      std::string name = param.spec.perExpert()
                             ? io::CheckpointSpec::expand(param.spec.names[i], e)
                             : param.spec.names[i];
      const io::TensorStore::Entry *entry = store.find(name);
      if (!entry)
        return Failure{"tensor '" + name + "' not found in " +
                       store.describeSources()};
      const io::SafeTensorInfo &info = *entry->info;
      const std::string where = "tensor '" + name + "' in " +
                                entry->file->path() + " has dtype " +
                                io::safetensorsDTypeName(info.dtype);
      if (param.kind == Param::Kind::Int4Codes || !param.spec.int4Scales.empty()) {
        if (info.dtype != io::DType::I32)
          return Failure{where + ", expected I32 (packed int4 codes; config.json: "
                                 "quantization_config, quant_method '" +
                         m.int4Method + "')"};
      } else if (param.kind == Param::Kind::Fp8Codes ||
          !param.spec.fp8Scales.empty()) {
        if (info.dtype != io::DType::F8E4M3)
          return Failure{where + ", expected F8_E4M3 (config.json: "
                                 "quantization_config, quant_method 'fp8')"};
      } else if (info.dtype == io::DType::F8E4M3) {
        return Failure{
            where + ", " +
            (m.fp8BlockN > 0
                 ? std::string("which moe-import takes for the experts' "
                               "weights only (FP8 routers are not supported)")
                 : std::string("but config.json has no quantization_config "
                               "(FP8 weights need their block scales)"))};
      } else if (!io::isFloatType(info.dtype)) {
        return Failure{where + ", expected F32, F16 or BF16"};
      }
      if (info.shape != param.tensorShapes[i])
        return Failure{"tensor '" + name + "' in " + entry->file->path() +
                       " has shape " + io::formatShape(info.shape) +
                       ", expected " + io::formatShape(param.tensorShapes[i]) +
                       " from config.json"};
    }
  }
  // FP8 and int4 weights dequantized at load: their scales' (and zero
  // points') names, dtypes and shapes (as moe-run will check them).
  if (!param.spec.fp8Scales.empty() || !param.spec.int4Scales.empty()) {
    auto shape = io::checkpointShape(store, param.spec, param.argShape,
                                     "%" + param.argName, io::DType::F32);
    if (!shape)
      return Failure{shape.error()};
  }
  // Experts beyond the configured count mean the config does not describe
  // this checkpoint.
  if (param.spec.perExpert()) {
    std::string extra =
        io::CheckpointSpec::expand(param.spec.names[0], m.experts);
    if (store.find(extra))
      return Failure{"tensor '" + extra + "' exists, but config.json has " +
                     std::to_string(m.experts) + " experts"};
  }
  return std::nullopt;
}

std::string tensorType(const std::vector<int64_t> &shape,
                       const std::string &elem) {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += (d < 0 ? std::string("?") : std::to_string(d)) + "x";
  return s + elem + ">";
}

std::string quoteMLIR(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      out += '\\';
      out += llvm::hexdigit(c >> 4, true);
      out += llvm::hexdigit(c & 15, true);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string routingAttr(const Model &m) {
  std::string s = "#moe.top_k<k = " + std::to_string(m.topK);
  if (m.sigmoid)
    s += ", score = sigmoid";
  if (!m.normalize)
    s += ", normalize = false";
  if (m.scale != 1.0)
    s += ", scale = " + moe::io::json::formatShortestDouble(m.scale);
  if (m.groups > 1) {
    s += ", groups = " + std::to_string(m.groups);
    if (m.groupK != m.groups)
      s += ", group_k = " + std::to_string(m.groupK);
  }
  return s + ">";
}

void emitLayer(std::string &out, const Model &m, int64_t layer,
               const std::vector<Param> &params, const std::string &elem) {
  const std::string xType = tensorType({-1, m.hidden}, elem);
  out += "// Layer " + std::to_string(layer) + ": " +
         std::to_string(m.experts) + " experts (H = " +
         std::to_string(m.expertWidth) + "), top-" + std::to_string(m.topK);
  if (m.sharedWidth)
    out += ", shared expert (Hs = " + std::to_string(m.sharedWidth) + ")";
  out += ".\n";
  out += "func.func @layer_" + std::to_string(layer) + "(%x: " + xType;
  std::vector<std::string> types{xType};
  for (const Param &p : params) {
    std::string type = tensorType(
        p.argShape, p.kind == Param::Kind::F32         ? "f32"
                    : p.kind == Param::Kind::Fp8Codes  ? "f8E4M3FN"
                    : p.kind == Param::Kind::Int4Codes ? "i4"
                                                       : elem);
    types.push_back(type);
    // `["a", "b"]`, each name quoted.
    auto names = [](const std::vector<std::string> &list) {
      std::string s = "[";
      for (size_t i = 0; i < list.size(); ++i)
        s += (i ? ", " : "") + quoteMLIR(list[i]);
      return s + "]";
    };
    // `,\n        KEY = [...]` unless the list is empty.
    auto list = [&](const char *key, const std::vector<std::string> &entries) {
      if (!entries.empty())
        out += std::string(",\n        ") + key + " = " + names(entries);
    };
    out += ",\n    %" + p.argName + ": " + type + " {moe.param = #moe.checkpoint<" +
           names(p.spec.names);
    if (p.spec.transpose)
      out += ", transpose";
    list("fp8_scales", p.spec.fp8Scales);
    if (!p.spec.fp8Scales.empty())
      out += ", block = [" + std::to_string(p.spec.blockN) + ", " +
             std::to_string(p.spec.blockK) + "]";
    if (p.spec.int4 != io::Int4Packing::None)
      out += std::string(", int4 = ") + io::int4PackingName(p.spec.int4);
    list("int4_scales", p.spec.int4Scales);
    list("int4_zeros", p.spec.int4Zeros);
    if (p.spec.group > 0)
      out += ", group = " + std::to_string(p.spec.group);
    out += ">}";
  }
  out += ") -> " + xType + " {\n";
  auto has = [&](const char *name) {
    for (const Param &p : params)
      if (p.argName == name)
        return true;
    return false;
  };
  out += "  %y = moe.layer %x router(%wr)";
  if (has("bias"))
    out += " selection_bias(%bias)";
  out += " experts(%w1, %w2)";
  if (has("w1_scale"))
    out += " expert_scales(%w1_scale, %w2_scale)";
  if (has("w1_zero"))
    out += " expert_zero_points(%w1_zero, %w2_zero)";
  if (has("s1"))
    out += " shared(%s1, %s2)";
  if (has("sg"))
    out += " shared_gate(%sg)";
  out += "\n         {routing = " + routingAttr(m) +
         ", activation = #moe.activation<" + m.activation + ">";
  if (m.fp8BlockN > 0)
    out += ",\n          quant = #moe.quant<fp8_e4m3, block = [" +
           std::to_string(m.fp8BlockK) + ", " + std::to_string(m.fp8BlockN) +
           "]>";
  if (m.int4 != io::Int4Packing::None)
    out += ",\n          quant = #moe.quant<int4, group = " + std::to_string(m.quantGroup()) +
           (m.int4ZeroPoint ? ", zero_point" : "") +
           (int8ActivationsOption ? ", int8_activations" : "") + ">";
  out += "}\n         : (";
  for (size_t i = 0; i < types.size(); ++i)
    out += (i ? ", " : "") + types[i];
  out += ") -> " + xType + "\n";
  out += "  return %y : " + xType + "\n}\n";
}

/// Writes `text` to `path` through a temporary file in the same directory,
/// renamed into place, so a failure leaves nothing behind.
std::optional<Failure> writeAtomically(const std::string &path,
                                       const std::string &text) {
  if (path == "-") {
    llvm::outs() << text;
    llvm::outs().flush();
    return std::nullopt;
  }
  std::string tmpl = path + ".tmp.XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0)
    return Failure{path + ": cannot write: " + std::strerror(errno)};
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(name.data());
      return Failure{path + ": cannot write: " + std::strerror(err)};
    }
    done += static_cast<size_t>(n);
  }
  ::fchmod(fd, 0644);
  if (::close(fd) != 0 || ::rename(name.data(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(name.data());
    return Failure{path + ": cannot write: " + std::strerror(err)};
  }
  return std::nullopt;
}

int runMain() {
  std::string dir = checkpointDir;
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  std::optional<io::DType> forced;
  if (dtypeOption != "auto") {
    if (dtypeOption == "f32")
      forced = io::DType::F32;
    else if (dtypeOption == "bf16")
      forced = io::DType::BF16;
    else if (dtypeOption == "f16")
      forced = io::DType::F16;
    else
      return fail("--dtype must be auto, f32, bf16 or f16, got '" +
                  dtypeOption + "'");
  }

  const std::string configPath = dir + "/config.json";
  auto bytes = io::readFileBytes(configPath);
  if (!bytes)
    return fail(bytes.error());
  io::json::Document doc;
  io::json::ParseError parseError;
  std::string_view text(reinterpret_cast<const char *>(bytes->data()),
                        bytes->size());
  if (!doc.parse(text, parseError))
    return fail(configPath + ": invalid JSON at byte " +
                std::to_string(parseError.offset) + ": " +
                parseError.message);
  if (!doc.root().isObject())
    return fail(configPath + ": must be a JSON object");
  Config cfg(doc.root(), configPath);
  Model model;
  if (auto f = describeModel(cfg, model))
    return fail(f->message);
  if (int8ActivationsOption && model.int4 == io::Int4Packing::None)
    return fail("--int8-activations is a mode of int4 layers, but " + configPath +
                " has no int4 quantization_config (gptq, awq or compressed-tensors "
                "pack-quantized)");

  // The layers to import.
  std::vector<int64_t> layers;
  if (layersOption == "all") {
    for (int64_t i = 0; i < model.layers; ++i)
      if (model.isMoE[i])
        layers.push_back(i);
  } else {
    llvm::SmallVector<llvm::StringRef> items;
    llvm::StringRef(layersOption).split(items, ',');
    for (llvm::StringRef item : items) {
      int64_t index;
      if (item.trim().getAsInteger(10, index) || index < 0)
        return fail("--layers must be 'all' or a comma-separated list of "
                    "layer indices, got '" +
                    layersOption + "'");
      if (index >= model.layers)
        return fail("--layers: layer " + std::to_string(index) +
                    " is out of range (num_hidden_layers = " +
                    std::to_string(model.layers) + ")");
      if (!model.isMoE[index])
        return fail("--layers: layer " + std::to_string(index) +
                    " is a dense layer (" + model.denseReason + ")");
      if (std::find(layers.begin(), layers.end(), index) == layers.end())
        layers.push_back(index);
    }
  }
  if (layers.empty())
    return fail(configPath + ": the model has no MoE layer");

  io::TensorStore store;
  if (io::Status status = store.add(dir); !status)
    return fail(status.error());

  // Fused experts: the first MoE layer has `mlp.experts.gate_up_proj`.
  if (model.modelType != "mixtral")
    model.fusedExperts = store.find("model.layers." + std::to_string(layers.front()) +
                                    ".mlp.experts.gate_up_proj") != nullptr;
  if (auto f = checkJoinedBlocks(model))
    return fail(f->message);
  // int4 shared experts: their gate projection packed (qweight,
  // weight_packed) rather than a plain weight.
  if (model.int4 != io::Int4Packing::None && model.sharedWidth > 0) {
    const std::string gate = sharedPrefix(model, layers.front()) + "gate_proj";
    model.int4Shared = !store.find(gate + ".weight") &&
                       store.find(gate + int4Names(model).codes) != nullptr;
  }
  if (auto f = checkInt4Model(model, store, layers.front()))
    return fail(f->message);

  std::string out = "// Imported by moe-import from " + dir + " (model_type " +
                    model.modelType + ", " + std::to_string(layers.size()) +
                    " MoE layer" + (layers.size() == 1 ? "" : "s") + ").\n";
  // FP8 scales are named `<weight>_scale_inv` (DeepSeek, Qwen3 FP8) or
  // `<weight>_scale` (compressed-tensors FP8_BLOCK): the first expert's
  // gate projection says which. FP8 shared experts (DeepSeek-V3) are
  // dequantized at load.
  if (model.fp8BlockN > 0) {
    auto isFp8 = [&](const std::string &name) {
      const io::TensorStore::Entry *w = store.find(name);
      return w && w->info->dtype == io::DType::F8E4M3;
    };
    for (const Param &p : layerParams(model, layers.front())) {
      const std::string weight =
          io::CheckpointSpec::expand(p.spec.names[0], 0);
      if (p.argName == "s1")
        model.fp8Shared = isFp8(weight);
      // Weights that are not FP8 codes are checkTensors' error.
      if (p.argName != "w1" || !isFp8(weight))
        continue;
      const std::string inv = weight + "_scale_inv", plain = weight + "_scale";
      if (!store.find(inv) && store.find(plain))
        model.scaleSuffix = "_scale";
      else if (!store.find(inv))
        return fail("tensor '" + inv + "' (or '" + plain +
                    "'), the block scales of the FP8 weight '" + weight +
                    "', not found in " + store.describeSources());
    }
  }

  std::optional<io::DType> autoType;
  for (int64_t layer : layers) {
    std::vector<Param> params = layerParams(model, layer);
    for (const Param &p : params)
      if (auto f = checkTensors(store, model, p))
        return fail(f->message);
    if (!autoType) {
      // The type of the experts' first weight (of the router when the
      // experts are FP8 codes).
      for (const Param &p : params)
        if (p.argName ==
            (model.fp8BlockN > 0 || model.int4 != io::Int4Packing::None ? "wr" : "w1"))
          autoType = store.find(io::CheckpointSpec::expand(p.spec.names[0], 0))
                         ->info->dtype;
    }
    io::DType type = forced ? *forced : *autoType;
    out += "\n";
    emitLayer(out, model, layer, params, io::dtypeName(type));
  }
  if (auto f = writeAtomically(outputPath, out))
    return fail(f->message);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  moe::installVersionPrinter("moe-import");
  llvm::cl::HideUnrelatedOptions(importCategory);
  llvm::cl::ParseCommandLineOptions(argc, argv, overview);
  return runMain();
}
