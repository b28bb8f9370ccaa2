//===- moe-ref.cpp - reference data and checks for the integration tests ---===//
//
// A test tool around the independent C++ reference (MoEReference.h): it
// writes seeded inputs, parameters (.safetensors) and the reference's
// expected outputs for moe-run, and checks moe-run's outputs.
//
//   moe-ref layer  ...   random moe.layer data + expected y (and loss)
//   moe-ref block  ...   N residual moe.layer blocks: x <- x + layer_l(x)
//                        (--soft-layers: some of them as soft-from-router)
//   moe-ref soft-from-router ...  random dense moe.layer data + the expected
//                        y of the Soft MoE layer --moe-dense-to-soft makes
//   moe-ref soft   ...   random moe.soft_layer data + expected y
//                        (layer and soft --vjp: + cotangents and the
//                        reference's gradients, MoEReferenceGrad.h)
//   moe-ref gate   ...   moe.gate's expected weights/indices for given logits
//   moe-ref compare ACTUAL.npy EXPECTED.npy [--tol 1e-4]
//   moe-ref sum-check W.npy --axes 1[,2..] [--expect 1] [--tol 1e-5]
//   moe-ref value-check W.npy --expect V [--tol T]
//   moe-ref pl-check INDICES.npy LOGITS.npy --k K [--alpha 0.001]
//   moe-ref gen-npy --shape 2,3 --dtype f32|i32|i64
//                   (--values v,.. | --random-seed S [--stddev X] | --eye)
//                   --out F.npy
//
// `moe-ref help` prints the options of every subcommand. Errors (bad
// options, unreadable files) print one line "moe-ref: ..." on stderr and exit
// with 1; a failed check prints one line "moe-ref SUBCOMMAND: FAIL: ..." with
// the figures on stderr and exits with 1; success prints the figures on
// stdout and exits with 0.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Quantized.h"
#include "runtime/io/TensorIO.h"
#include "test/reference/MoEReference.h"
#include "test/reference/MoEReferenceGrad.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace io = moe::io;
namespace ref = moe::ref;

namespace {

//===----------------------------------------------------------------------===//
// Errors and output
//===----------------------------------------------------------------------===//

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char buf[1024];
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

/// An error in the command line or the input files: one line, exit 1.
[[noreturn]] void die(const std::string &message) {
  std::fflush(stdout);
  std::fprintf(stderr, "moe-ref: %s\n", message.c_str());
  std::exit(1);
}

/// The current subcommand, for messages.
std::string subcommand = "";

/// A failed check: one line with the figures, exit 1.
[[noreturn]] void failCheck(const std::string &message) {
  std::fflush(stdout);
  std::fprintf(stderr, "moe-ref %s: FAIL: %s\n", subcommand.c_str(),
               message.c_str());
  std::exit(1);
}

//===----------------------------------------------------------------------===//
// Command line
//===----------------------------------------------------------------------===//

/// Options of one subcommand: `--name value`, `--name=value` or a flag.
class Args {
public:
  Args(int argc, char **argv, int first, std::set<std::string> valued,
       std::set<std::string> flagNames, size_t maxPositional)
      : valuedNames(std::move(valued)) {
    for (int i = first; i < argc; ++i) {
      std::string a = argv[i];
      if (a.size() < 3 || a.compare(0, 2, "--") != 0) {
        positional.push_back(a);
        continue;
      }
      std::string name = a.substr(2), value;
      bool hasValue = false;
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        hasValue = true;
      }
      if (flagNames.count(name)) {
        if (hasValue)
          die("option --" + name + " takes no value");
        if (!flags.insert(name).second)
          die("option --" + name + " given twice");
        continue;
      }
      if (!valuedNames.count(name))
        die("unknown option --" + name + " for '" + subcommand +
            "' (see 'moe-ref help')");
      if (!hasValue) {
        if (i + 1 >= argc)
          die("option --" + name + " needs a value");
        value = argv[++i];
      }
      if (values.count(name))
        die("option --" + name + " given twice");
      values[name] = value;
    }
    if (positional.size() > maxPositional)
      die("unexpected argument '" + positional[maxPositional] + "' for '" +
          subcommand + "'");
  }

  bool flag(const std::string &name) const { return flags.count(name) != 0; }
  bool has(const std::string &name) const { return values.count(name) != 0; }
  std::string str(const std::string &name) const {
    auto it = values.find(name);
    if (it == values.end())
      die("'" + subcommand + "' needs --" + name);
    return it->second;
  }
  std::string str(const std::string &name, const std::string &def) const {
    return has(name) ? str(name) : def;
  }
  int64_t integer(const std::string &name) const {
    return parseInt(str(name), "--" + name);
  }
  int64_t integer(const std::string &name, int64_t def) const {
    return has(name) ? integer(name) : def;
  }
  int64_t positiveInt(const std::string &name) const {
    int64_t v = integer(name);
    if (v < 1)
      die(format("--%s must be >= 1 (got %" PRId64 ")", name.c_str(), v));
    return v;
  }
  double real(const std::string &name) const {
    return parseReal(str(name), "--" + name);
  }
  double real(const std::string &name, double def) const {
    return has(name) ? real(name) : def;
  }
  uint64_t seed(const std::string &name) const {
    return parseSeed(str(name), "--" + name);
  }

  std::vector<std::string> positional;

  static int64_t parseInt(const std::string &s, const std::string &what) {
    errno = 0;
    char *end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || errno || *end)
      die(what + ": '" + s + "' is not an integer");
    return v;
  }
  static double parseReal(const std::string &s, const std::string &what) {
    errno = 0;
    char *end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || errno || *end || !std::isfinite(v))
      die(what + ": '" + s + "' is not a finite number");
    return v;
  }
  /// A 64-bit seed: 0 .. 2^64-1, or a negative i64 (two's complement).
  static uint64_t parseSeed(const std::string &s, const std::string &what) {
    errno = 0;
    char *end = nullptr;
    if (!s.empty() && s[0] == '-') {
      long long v = std::strtoll(s.c_str(), &end, 10);
      if (errno || *end)
        die(what + ": '" + s + "' is not a 64-bit integer");
      return uint64_t(v);
    }
    unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (s.empty() || errno || *end || s[0] == '+')
      die(what + ": '" + s + "' is not a 64-bit integer");
    return uint64_t(v);
  }

private:
  std::set<std::string> valuedNames;
  std::map<std::string, std::string> values;
  std::set<std::string> flags;
};

std::vector<std::string> splitList(const std::string &s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    size_t next = s.find(',', pos);
    out.push_back(s.substr(pos, next == std::string::npos ? next : next - pos));
    if (next == std::string::npos)
      break;
    pos = next + 1;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

/// A tensor read from a file, as doubles.
struct Array {
  std::string path;
  io::DType dtype = io::DType::F32;
  std::vector<int64_t> shape;
  std::vector<double> values;
};

Array readArray(const std::string &path) {
  io::Result<io::Tensor> t = io::readNpy(path);
  if (!t)
    die(t.error());
  Array a;
  a.path = path;
  a.dtype = t->dtype;
  a.shape = t->shape;
  switch (t->dtype) {
  case io::DType::I32:
    for (int32_t v : t->toVector<int32_t>())
      a.values.push_back(double(v));
    break;
  case io::DType::I64:
    for (int64_t v : t->toVector<int64_t>())
      a.values.push_back(double(v));
    break;
  default: {
    io::Result<io::Tensor> f = io::convertTensor(*t, io::DType::F32);
    if (!f)
      die(f.error());
    for (float v : f->toVector<float>())
      a.values.push_back(double(v));
    break;
  }
  }
  return a;
}

void writeTensor(const std::string &path, const io::Tensor &t) {
  io::Status s = io::writeNpy(path, t);
  if (!s)
    die(s.error());
}

void writeF32(const std::string &path, std::vector<int64_t> shape,
              const std::vector<float> &values) {
  writeTensor(path, io::Tensor::fromValues(io::DType::F32, std::move(shape),
                                           values));
}

io::Tensor f32Tensor(std::vector<int64_t> shape, const std::vector<float> &v) {
  return io::Tensor::fromValues(io::DType::F32, std::move(shape), v);
}

io::DType toIODType(ref::ElementType type) {
  switch (type) {
  case ref::ElementType::BF16:
    return io::DType::BF16;
  case ref::ElementType::F16:
    return io::DType::F16;
  case ref::ElementType::F32:
    break;
  }
  return io::DType::F32;
}

/// A parameter tensor in the layer's element type (the values are values of
/// that type, so the conversion is exact).
io::Tensor paramTensor(std::vector<int64_t> shape, const std::vector<float> &v,
                       ref::ElementType type) {
  io::Tensor t = f32Tensor(std::move(shape), v);
  if (type == ref::ElementType::F32)
    return t;
  io::Result<io::Tensor> converted = io::convertTensor(t, toIODType(type));
  if (!converted)
    die(converted.error());
  return converted.take();
}

void writeParams(const std::string &path,
                 const std::map<std::string, io::Tensor> &tensors) {
  io::Status s = io::writeSafeTensors(path, tensors);
  if (!s)
    die(s.error());
}

std::string indexString(const std::vector<int64_t> &shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  std::string s = "[";
  for (size_t d = 0; d < idx.size(); ++d)
    s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}

//===----------------------------------------------------------------------===//
// Shared layer options
//===----------------------------------------------------------------------===//

/// --dtype f32|bf16|f16 (default f32).
ref::ElementType parseDTypeOpt(const Args &args) {
  ref::ElementType type = ref::ElementType::F32;
  if (args.has("dtype") && !ref::parseElementType(args.str("dtype"), type))
    die("--dtype: unknown element type '" + args.str("dtype") +
        "' (f32, bf16, f16)");
  return type;
}

ref::Activation parseActivationOpt(const Args &args) {
  ref::Activation act;
  std::string name = args.str("activation");
  if (!ref::parseActivation(name, act))
    die("--activation: unknown activation '" + name +
        "' (gelu, gelu_tanh, relu, silu, swiglu, geglu)");
  return act;
}

/// --routing dense|top_k|moesart [--k K] [--adjust A] [--lambda F].
ref::Routing parseRoutingOpt(const Args &args, int64_t numExperts,
                             bool training) {
  std::string kind = args.str("routing");
  ref::Routing r;
  if (kind == "dense") {
    if (args.has("k"))
      die("--k is not used by --routing dense");
  } else if (kind == "top_k" || kind == "moesart") {
    int64_t k = args.integer("k");
    if (k < 1 || k > numExperts)
      die(format("--k %" PRId64 " must be in [1, E = %" PRId64 "]", k,
                 numExperts));
    r = kind == "top_k" ? ref::Routing::topK(k) : ref::Routing::moesart(k);
  } else {
    die("--routing: unknown routing '" + kind + "' (dense, top_k, moesart)");
  }
  if (r.kind != ref::RoutingKind::MoESART &&
      (args.has("adjust") || args.has("lambda")))
    die("--adjust and --lambda need --routing moesart");
  if (args.has("adjust")) {
    std::string a = args.str("adjust");
    if (!ref::parseAdjust(a, r.adjust))
      die("--adjust: unknown variant '" + a +
          "' (small_random, zero, large)");
  }
  if (args.has("lambda"))
    r.trimmedLasso = args.real("lambda");
  if (r.kind == ref::RoutingKind::MoESART && training && r.k < 2)
    die("MOESART training needs --k >= 2");
  // #moe.top_k's production parameters (docs/spec.md §3.1.1).
  bool production = args.has("score") || args.flag("no-normalize") || args.has("scale") ||
                    args.has("groups") || args.has("group-k");
  if (production && r.kind != ref::RoutingKind::TopK)
    die("--score, --no-normalize, --scale, --groups and --group-k need --routing top_k");
  if (args.has("score")) {
    std::string sc = args.str("score");
    if (sc == "softmax")
      r.score = ref::Score::Softmax;
    else if (sc == "sigmoid")
      r.score = ref::Score::Sigmoid;
    else
      die("--score: unknown score '" + sc + "' (softmax, sigmoid)");
  }
  r.normalize = !args.flag("no-normalize");
  if (args.has("scale")) {
    r.scale = args.real("scale");
    if (!(r.scale > 0) || !std::isfinite(r.scale))
      die("--scale must be finite and > 0");
  }
  if (args.has("groups"))
    r.groups = args.positiveInt("groups");
  if (args.has("group-k"))
    r.groupK = args.positiveInt("group-k");
  if (numExperts % r.groups != 0)
    die(format("--groups %" PRId64 " does not divide E = %" PRId64, r.groups, numExperts));
  const int64_t keptGroups = r.groupK > 0 ? r.groupK : r.groups;
  if (keptGroups > r.groups)
    die("--group-k must be <= --groups");
  if (r.kind == ref::RoutingKind::TopK && r.k > keptGroups * (numExperts / r.groups))
    die("--k exceeds group-k * E / groups");
  return r;
}

std::string routingString(const ref::Routing &r, bool training) {
  std::string s;
  switch (r.kind) {
  case ref::RoutingKind::Dense:
    s = "dense";
    break;
  case ref::RoutingKind::TopK:
    s = format("top_k<k = %" PRId64 "%s%s%s%s>", r.k,
               r.score == ref::Score::Sigmoid ? ", score = sigmoid" : "",
               r.normalize ? "" : ", normalize = false",
               r.scale != 1.0 ? format(", scale = %g", r.scale).c_str() : "",
               r.groups > 1 ? format(", groups = %" PRId64 ", group_k = %" PRId64, r.groups,
                                     r.groupK > 0 ? r.groupK : r.groups)
                                  .c_str()
                            : "");
    break;
  case ref::RoutingKind::MoESART:
    s = format("moesart<k = %" PRId64 ", adjust = %s, trimmed_lasso = %g>",
               r.k, ref::adjustName(r.adjust), r.trimmedLasso);
    break;
  }
  return training ? s + ", training" : s;
}

/// Checks every token's decision margin against --min-margin; prints the
/// minimum. `label` prefixes the printed line.
void checkMargins(const std::vector<double> &margins, double minMargin,
                  const std::string &label) {
  double worst = std::numeric_limits<double>::infinity();
  int64_t worstToken = -1;
  for (size_t t = 0; t < margins.size(); ++t) {
    if (margins[t] < worst) {
      worst = margins[t];
      worstToken = int64_t(t);
    }
  }
  // NaN: a decision between a NaN and a number, or among NaNs, which the
  // NaN rule of docs/spec.md §3 makes exactly (no rounding can flip it).
  for (size_t t = 0; t < margins.size(); ++t)
    if (margins[t] < minMargin)
      failCheck(format("%sborderline token %zu (margin %.3e < %.3e)",
                       label.c_str(), t, margins[t], minMargin));
  if (worstToken < 0 || std::isinf(worst))
    std::printf("%s%zu tokens, min decision margin inf\n", label.c_str(),
                margins.size());
  else
    std::printf("%s%zu tokens, min decision margin %.3e (token %" PRId64
                ", threshold %.1e)\n",
                label.c_str(), margins.size(), worst, worstToken, minMargin);
}

/// The parameter tensors of one layer, under the given names (router.weight
/// [, router.bias], w1, w2 [, b1, b2]).
/// One named tensor of a layer's data: x, or a parameter of --names.
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> *values;
  ref::ElementType type;
};

/// The parameters of `in` under `names`, in the order of --names.
std::vector<NamedTensor> layerTensors(const std::vector<std::string> &names,
                                      ref::LayerInputs &in) {
  ref::Experts &ex = in.experts;
  const int64_t D = ex.modelDim, E = ex.numExperts, H = ex.hiddenDim,
                C = ex.w1Cols();
  std::vector<NamedTensor> out;
  auto add = [&](std::vector<int64_t> shape, std::vector<float> &v,
                 ref::ElementType type) {
    out.push_back({names[out.size()], std::move(shape), &v, type});
  };
  add({D, E}, in.wr, ex.elementType);
  if (!in.br.empty())
    add({E}, in.br, ex.elementType);
  // DeepSeek keeps the selection bias in f32 whatever the model's type.
  if (!in.selectionBias.empty())
    add({E}, in.selectionBias, ref::ElementType::F32);
  add({E, D, C}, ex.w1, ex.elementType);
  add({E, H, D}, ex.w2, ex.elementType);
  if (!ex.b1.empty()) {
    add({E, C}, ex.b1, ex.elementType);
    add({E, D}, ex.b2, ex.elementType);
  }
  if (in.sharedHidden > 0) {
    const int64_t Hs = in.sharedHidden, width = ref::isGated(ex.activation) ? 2 * Hs : Hs;
    add({D, width}, in.sharedW1, ex.elementType);
    add({Hs, D}, in.sharedW2, ex.elementType);
    if (!in.sharedGate.empty())
      add({D, 1}, in.sharedGate, ex.elementType);
  }
  return out;
}

void addParams(std::map<std::string, io::Tensor> &params,
               const std::vector<NamedTensor> &tensors) {
  for (const NamedTensor &t : tensors)
    if (!params.emplace(t.name, paramTensor(t.shape, *t.values, t.type)).second)
      die("--names: '" + t.name + "' is given twice");
}

/// --poison NAME:AT:VALUE[,NAME:AT:VALUE...] ('layer' and 'soft'): before
/// the reference computes anything, elements of x (NAME x) or of a
/// parameter (a name of --names) are set to VALUE (nan, inf, -inf or a
/// finite number, such as one that quantizes to a subnormal code). AT is
/// a flat element index, or rR: token R of x (soft: R = g M + m), or
/// slice R of a parameter's first dimension (an expert's weights).
void applyPoisons(const Args &args, const std::vector<NamedTensor> &tensors) {
  if (!args.has("poison"))
    return;
  for (const std::string &item : splitList(args.str("poison"))) {
    const size_t c1 = item.find(':'), c2 = item.rfind(':');
    if (c1 == std::string::npos || c1 == c2)
      die("--poison: '" + item + "' is not NAME:AT:VALUE");
    const std::string name = item.substr(0, c1), at = item.substr(c1 + 1, c2 - c1 - 1),
                      value = item.substr(c2 + 1);
    float v;
    if (value == "nan")
      v = std::numeric_limits<float>::quiet_NaN();
    else if (value == "inf")
      v = std::numeric_limits<float>::infinity();
    else if (value == "-inf")
      v = -std::numeric_limits<float>::infinity();
    else {
      // A finite number too (a value the quantizers must handle, such as
      // one that becomes an E4M3 subnormal code).
      char *end = nullptr;
      v = std::strtof(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !std::isfinite(v))
        die("--poison: value '" + value + "' is not nan, inf, -inf or a finite number");
    }
    auto it = std::find_if(tensors.begin(), tensors.end(),
                           [&](const NamedTensor &t) { return t.name == name; });
    if (it == tensors.end())
      die("--poison: no tensor named '" + name + "' (x or a name of --names)");
    const int64_t n = int64_t(it->values->size());
    int64_t first, count = 1;
    if (!at.empty() && at[0] == 'r') {
      // x: its tokens ([T, D], soft [G, M, D]); a parameter: its first
      // dimension (an expert's slice).
      const int64_t rows = it->shape.empty() ? 1
                           : name == "x" ? n / it->shape.back()
                                         : it->shape[0];
      const int64_t row = Args::parseInt(at.substr(1), "--poison row");
      if (row < 0 || row >= rows)
        die(format("--poison: row %" PRId64 " of '%s' is outside [0, %" PRId64 ")", row,
                   name.c_str(), rows));
      count = n / rows;
      first = row * count;
    } else {
      first = Args::parseInt(at, "--poison index");
      if (first < 0 || first >= n)
        die(format("--poison: index %" PRId64 " of '%s' is outside [0, %" PRId64 ")",
                   first, name.c_str(), n));
    }
    std::fill(it->values->begin() + first, it->values->begin() + first + count, v);
  }
}

std::vector<std::string> parseNames(const Args &args, size_t want,
                                    const std::string &what) {
  std::vector<std::string> names = splitList(args.str("names"));
  if (names.size() != want)
    die(format("--names: expected %zu names (%s), got %zu", want, what.c_str(),
               names.size()));
  for (const std::string &n : names)
    if (n.empty())
      die("--names: empty name");
  return names;
}

double maxAbs(const std::vector<float> &v) {
  double m = 0;
  for (float f : v)
    m = std::max(m, std::fabs(double(f)));
  return m;
}

double maxAbs(const std::vector<double> &v) {
  double m = 0;
  for (double d : v)
    m = std::max(m, std::fabs(d));
  return m;
}

/// The Soft MoE layer that --moe-dense-to-soft makes of a dense layer
/// (docs/spec.md §4): Phi[d, e, s] = Wr[d, e] for every slot s, scale 1, the router
/// bias dropped, x [T, D] regrouped to [T/M, M, D] (the same row-major data)
/// and the output back to [T, D].
std::vector<float> softFromRouter(const ref::LayerInputs &in, int64_t slots,
                                  int64_t groupSize, bool normalize) {
  const int64_t T = in.numTokens, D = in.experts.modelDim,
                E = in.experts.numExperts;
  ref::SoftLayerInputs s;
  s.numGroups = T / groupSize;
  s.groupSize = groupSize;
  s.slotsPerExpert = slots;
  s.x = in.x;
  s.phi.resize(size_t(D * E * slots));
  for (int64_t d = 0; d < D; ++d)
    for (int64_t e = 0; e < E; ++e)
      for (int64_t k = 0; k < slots; ++k)
        s.phi[size_t((d * E + e) * slots + k)] = in.wr[size_t(d * E + e)];
  s.scale = 1.0;
  s.normalize = normalize;
  s.experts = in.experts;
  return ref::softMoELayer(s).y;
}

/// The residual x + moe(x) of `moe-ref block`: one addition in T (for f32
/// the f32 addition of the compiled code, for bf16/f16 the exact sum rounded
/// once to T, what arith.addf on T computes).
float residual(ref::ElementType type, float x, float y) {
  if (type == ref::ElementType::F32)
    return x + y;
  return float(ref::roundTo(type, double(x) + double(y)));
}

/// A per-layer data seed for `moe-ref block`.
uint64_t layerSeed(uint64_t dataSeed, int64_t layer) {
  ref::TestRng rng(dataSeed ^ 0x626C6F636B212121ull);
  uint64_t s = 0;
  for (int64_t l = 0; l <= layer; ++l)
    s = rng.next();
  return s;
}

//===----------------------------------------------------------------------===//
// --vjp: cotangents and the reference's gradients
//===----------------------------------------------------------------------===//

/// One file of --vjp PREFIX: PREFIX + name + ".npy" (PREFIX may end in '/').
std::string vjpPath(const std::string &prefix, const std::string &name) {
  return prefix + name + ".npy";
}

/// The seeded cotangent dy of --vjp: n values ~ N(0, 1) rounded to T, from
/// a seed of their own derived from the data seed.
std::vector<float> vjpCotangent(int64_t n, uint64_t dataSeed,
                                ref::ElementType type) {
  ref::TestRng seeds(dataSeed ^ 0x636F74616E67656Eull);
  std::vector<float> dy = ref::randomNormal(n, seeds.next());
  ref::roundAll(type, dy);
  return dy;
}

/// Writes a gradient as PREFIX + "grad_" + name + ".npy" (f32).
void writeGradient(const std::string &prefix, const std::string &name,
                   std::vector<int64_t> shape, const std::vector<double> &g) {
  writeF32(vjpPath(prefix, "grad_" + name), std::move(shape),
           std::vector<float>(g.begin(), g.end()));
}

/// The gradients of one layer's parameters, named and shaped as
/// layerTensors lists the parameters; returns how many were written.
size_t writeParamGradients(const std::string &prefix,
                           const std::vector<std::string> &names,
                           const ref::LayerInputs &in, const ref::LayerGradients &g) {
  const ref::Experts &ex = in.experts;
  const int64_t D = ex.modelDim, E = ex.numExperts, H = ex.hiddenDim, C = ex.w1Cols();
  // The order and the shapes of layerTensors.
  size_t n = 0;
  writeGradient(prefix, names[n++], {D, E}, g.dwr);
  if (!in.br.empty())
    writeGradient(prefix, names[n++], {E}, g.dbr);
  if (!in.selectionBias.empty())
    writeGradient(prefix, names[n++], {E}, g.dSelectionBias);
  writeGradient(prefix, names[n++], {E, D, C}, g.dw1);
  writeGradient(prefix, names[n++], {E, H, D}, g.dw2);
  if (!ex.b1.empty()) {
    writeGradient(prefix, names[n++], {E, C}, g.db1);
    writeGradient(prefix, names[n++], {E, D}, g.db2);
  }
  if (in.sharedHidden > 0) {
    const int64_t Hs = in.sharedHidden,
                  width = ref::isGated(ex.activation) ? 2 * Hs : Hs;
    writeGradient(prefix, names[n++], {D, width}, g.dSharedW1);
    writeGradient(prefix, names[n++], {Hs, D}, g.dSharedW2);
    if (!in.sharedGate.empty())
      writeGradient(prefix, names[n++], {D, 1}, g.dSharedGate);
  }
  return n;
}

/// --vjp for `layer`: dy [T, D] (an f32 .npy holding values of T, like
/// --input), for training the aux loss's cotangent daux (a scalar f32), and
/// moeLayerVjp's gradients with the routing of `res`: grad_x and grad_NAME
/// for each parameter NAME of --names, in the parameters' shapes.
void writeLayerVjp(const std::string &prefix,
                   const std::vector<std::string> &names,
                   const ref::LayerInputs &in, const ref::LayerOptions &opt,
                   const ref::LayerResult &res, uint64_t dataSeed,
                   bool auxOnly) {
  const ref::Experts &ex = in.experts;
  const int64_t T = in.numTokens, D = ex.modelDim;
  std::vector<float> dy = vjpCotangent(T * D, dataSeed, ex.elementType);
  if (auxOnly)
    std::fill(dy.begin(), dy.end(), 0.0f);
  ref::LayerCotangents cot;
  cot.dy.assign(dy.begin(), dy.end());
  writeF32(vjpPath(prefix, "dy"), {T, D}, dy);
  if (opt.training) {
    ref::TestRng rng(dataSeed ^ 0x6461757821212121ull);
    cot.dAuxLoss = double(float(rng.normal()));
    writeF32(vjpPath(prefix, "daux"), {}, {float(cot.dAuxLoss)});
  }
  const ref::LayerGradients g =
      ref::moeLayerVjp(in, opt, ref::layerDecisions(res, opt), cot);
  writeGradient(prefix, "x", {T, D}, g.dx);
  size_t n = writeParamGradients(prefix, names, in, g);
  std::printf("vjp: dy%s and %zu gradients (max |grad_x| %.6g) under %s\n",
              opt.training ? ", daux" : "", n + 1, maxAbs(g.dx),
              prefix.c_str());
}

//===----------------------------------------------------------------------===//
// moe-ref layer / block
//===----------------------------------------------------------------------===//

const std::set<std::string> layerValued = {
    "tokens", "dim", "experts", "hidden", "activation", "routing", "k",
    "adjust", "lambda", "seed-value", "capacity-factor", "data-seed", "names",
    "params", "input", "seed-input", "expected", "expected-loss",
    "min-margin", "layers", "slots", "group-size", "soft-layers", "dtype",
    "score", "scale", "groups", "group-k", "shared-hidden", "vjp", "poison",
    "quant", "quant-scales"};
const std::set<std::string> layerFlags = {"training", "router-bias", "expert-biases",
                                          "normalize", "no-normalize", "selection-bias",
                                          "shared-gate", "vjp-aux-only", "quant-shared"};

/// `layer`, `block` and `soft-from-router` share the data and the options.
enum class LayerMode { Layer, Block, SoftFromRouter };

int cmdLayer(int argc, char **argv, LayerMode mode) {
  Args args(argc, argv, 2, layerValued, layerFlags, 0);
  const bool block = mode == LayerMode::Block;
  const bool softOnly = mode == LayerMode::SoftFromRouter;
  const int64_t T = args.positiveInt("tokens"), D = args.positiveInt("dim"),
                E = args.positiveInt("experts"), H = args.positiveInt("hidden");
  const ref::Activation act = parseActivationOpt(args);
  const ref::ElementType dtype = parseDTypeOpt(args);
  // Soft MoE from the router (soft-from-router, block --soft-layers).
  if (softOnly)
    for (const char *name :
         {"routing", "k", "adjust", "lambda", "seed-value", "seed-input",
          "expected-loss", "capacity-factor", "min-margin", "soft-layers"})
      if (args.has(name))
        die(std::string("--") + name + " is not a 'soft-from-router' option");
  if (softOnly && args.flag("training"))
    die("'soft-from-router' has no training mode");
  if (mode == LayerMode::Layer)
    for (const char *name : {"slots", "group-size", "soft-layers"})
      if (args.has(name))
        die(std::string("--") + name +
            " is a 'soft-from-router' or 'block --soft-layers' option");
  if (mode == LayerMode::Layer && args.flag("normalize"))
    die("--normalize is a 'soft-from-router' or 'block --soft-layers' option");
  if (mode == LayerMode::SoftFromRouter && args.has("vjp"))
    die("--vjp is a 'layer', 'block' or 'soft' option");
  if (block && args.has("vjp") && args.has("soft-layers"))
    die("--vjp: 'block' has no gradient of soft layers yet");
  if (mode != LayerMode::Layer && args.has("poison"))
    die("--poison is a 'layer' or 'soft' option");
  if (args.flag("vjp-aux-only") && !(args.has("vjp") && args.flag("training")))
    die("--vjp-aux-only needs --vjp and --training");
  std::set<int64_t> softLayers;
  if (softOnly)
    softLayers.insert(0);
  if (args.has("soft-layers"))
    for (const std::string &part : splitList(args.str("soft-layers")))
      if (!softLayers.insert(Args::parseInt(part, "--soft-layers")).second)
        die("--soft-layers: layer " + part + " given twice");
  if (block && softLayers.empty() &&
      (args.has("slots") || args.has("group-size") || args.flag("normalize")))
    die("--slots, --group-size and --normalize need --soft-layers");
  const int64_t slots = args.has("slots") ? args.positiveInt("slots") : 1;
  const int64_t groupSize =
      args.has("group-size") ? args.positiveInt("group-size") : T;
  if (T % groupSize != 0)
    die(format("--group-size %" PRId64 " does not divide --tokens %" PRId64,
               groupSize, T));
  const bool normalize = args.flag("normalize");
  const bool training = args.flag("training");
  const bool routerBias = args.flag("router-bias");
  const bool expertBiases = args.flag("expert-biases");
  const int64_t layers = block ? args.integer("layers", 2) : 1;
  if (!block && args.has("layers"))
    die("--layers is a 'block' option");
  if (layers < 1)
    die("--layers must be >= 1");
  if (block && training)
    die("'block' has no training mode");
  if (T > int64_t(0xFFFFFFFFll))
    die("--tokens does not fit the Philox counter");

  ref::LayerOptions opt;
  if (!softOnly)
    opt.routing = parseRoutingOpt(args, E, training);
  opt.training = training;
  if (args.has("seed-value")) {
    if (!training)
      die("--seed-value needs --training");
    opt.seed = args.seed("seed-value");
  } else if (training) {
    die("--training needs --seed-value");
  }
  if (args.has("seed-input") && !training)
    die("--seed-input needs --training");
  if (args.has("expected-loss") && !training)
    die("--expected-loss needs --training (the loss is a training result)");
  if (args.has("capacity-factor")) {
    opt.capacityFactor = args.real("capacity-factor");
    if (!(opt.capacityFactor > 0))
      die("--capacity-factor must be > 0");
  }
  const double minMargin = args.real("min-margin", 1e-6);
  const uint64_t dataSeed = args.seed("data-seed");

  // --quant fp8_e4m3:BK,BN or int4:G[,zero_point][,int8_activations] (docs/spec.md §2.1,
  // 'layer' only). int4: quantBlockK is the group, quantBlockN 0.
  int64_t quantBlockK = 0, quantBlockN = 0;
  bool quantInt4 = false, quantZeroPoint = false, quantInt8Activations = false;
  if (args.has("quant")) {
    if (mode != LayerMode::Layer)
      die("--quant is a 'layer' option");
    if (args.has("vjp"))
      die("--quant: no --vjp with quantized weights");
    const std::string q = args.str("quant");
    const std::string fp8 = "fp8_e4m3:", int4 = "int4:";
    const std::string usage = "--quant: '" + q +
                              "' is not fp8_e4m3:BK,BN or int4:G[,zero_point][,int8_activations]";
    std::vector<std::string> sizes;
    if (q.compare(0, fp8.size(), fp8) == 0) {
      sizes = splitList(q.substr(fp8.size()));
      if (sizes.size() != 2)
        die(usage);
      quantBlockK = Args::parseInt(sizes[0], "--quant");
      quantBlockN = Args::parseInt(sizes[1], "--quant");
      if (quantBlockK < 1 || quantBlockN < 1)
        die("--quant: the block sizes must be >= 1");
    } else if (q.compare(0, int4.size(), int4) == 0) {
      sizes = splitList(q.substr(int4.size()));
      if (sizes.empty() || sizes.size() > 3)
        die(usage);
      for (size_t i = 1; i < sizes.size(); ++i) {
        bool &flag = sizes[i] == "zero_point" ? quantZeroPoint : quantInt8Activations;
        if ((sizes[i] != "zero_point" && sizes[i] != "int8_activations") || flag)
          die(usage);
        flag = true;
      }
      quantInt4 = true;
      quantBlockK = Args::parseInt(sizes[0], "--quant");
      if (quantBlockK < 1)
        die("--quant: the group must be >= 1");
    } else {
      die(usage);
    }
  }
  // --quant-scales bf16|f16: scales rounded to it (exact in such a tensor).
  float (*roundScale)(float) = nullptr;
  if (args.has("quant-scales")) {
    if (quantBlockK == 0)
      die("--quant-scales needs --quant");
    const std::string to = args.str("quant-scales");
    if (to != "bf16" && to != "f16")
      die("--quant-scales: the scales may be rounded to bf16 or f16 only, got '" + to + "'");
    if (to == "bf16")
      roundScale = [](float s) {
        return io::bfloat16BitsToFloat(io::floatToBFloat16Bits(s));
      };
    else
      roundScale = [](float s) { return io::halfBitsToFloat(io::floatToHalfBits(s)); };
  }

  // docs/spec.md §3.1.1 parts ('layer' only).
  const bool selectionBias = args.flag("selection-bias");
  const int64_t sharedHidden = args.has("shared-hidden") ? args.positiveInt("shared-hidden") : 0;
  const bool quantShared = args.flag("quant-shared");
  if (quantShared && (quantBlockK == 0 || sharedHidden == 0))
    die("--quant-shared needs --quant and --shared-hidden");
  const bool sharedGate = args.flag("shared-gate");
  if (mode != LayerMode::Layer && (selectionBias || sharedHidden > 0 || sharedGate))
    die("--selection-bias, --shared-hidden and --shared-gate are 'layer' options");
  if (sharedGate && sharedHidden == 0)
    die("--shared-gate needs --shared-hidden");
  if (selectionBias && opt.routing.kind != ref::RoutingKind::TopK)
    die("--selection-bias needs --routing top_k");
  const size_t perLayer = 3 + (routerBias ? 1 : 0) + (selectionBias ? 1 : 0) +
                          (expertBiases ? 2 : 0) + (sharedHidden > 0 ? 2 : 0) +
                          (sharedGate ? 1 : 0);
  std::string what = std::string("router.weight") +
                     (routerBias ? ", router.bias" : "") +
                     (selectionBias ? ", selection_bias" : "") + ", w1, w2" +
                     (expertBiases ? ", b1, b2" : "") +
                     (sharedHidden > 0 ? ", shared_w1, shared_w2" : "") +
                     (sharedGate ? ", shared_gate" : "");
  if (block)
    what = format("%" PRId64 " x (%s)", layers, what.c_str());
  for (int64_t l : softLayers)
    if (l < 0 || l >= layers)
      die(format("--soft-layers: layer %" PRId64 " out of range [0, %" PRId64
                 ")",
                 l, layers));
  std::vector<std::string> names =
      parseNames(args, perLayer * size_t(layers), what);
  const std::string paramsPath = args.str("params"),
                    inputPath = args.str("input"),
                    expectedPath = args.str("expected");

  std::map<std::string, io::Tensor> params;
  std::vector<float> x0, x;
  double loss = 0;
  // block --vjp: every layer's inputs and routing, for the backward sweep.
  std::vector<ref::LayerInputs> blockInputs;
  std::vector<ref::LayerResult> blockResults;
  for (int64_t l = 0; l < layers; ++l) {
    ref::LayerInputs in =
        ref::randomLayerInputs(T, D, E, H, act, routerBias, expertBiases,
                               block ? layerSeed(dataSeed, l) : dataSeed,
                               dtype);
    if (selectionBias || sharedHidden > 0)
      ref::addRandomProductionParts(in, selectionBias, sharedHidden, sharedGate, dataSeed);
    std::vector<std::string> layerNames(names.begin() + l * perLayer,
                                        names.begin() + (l + 1) * perLayer);
    std::vector<uint8_t> codes1, codes2, zeros1, zeros2;
    std::vector<float> scales1, scales2;
    std::vector<NamedTensor> tensors = layerTensors(layerNames, in);
    if (l == 0) {
      tensors.push_back({"x", {T, D}, &in.x, dtype});
      applyPoisons(args, tensors);
      tensors.pop_back();
      x0 = x = in.x;
    } else {
      in.x = x;
    }
    // Quantized expert weights (after --poison: a NaN weight becomes the NaN
    // code): the codes and scales are written, the reference computes with
    // the dequantized weights.
    if (quantInt4) {
      ref::Experts &ex = in.experts;
      ex.quantizedWeights = true;
      ex.int8ActivationGroup = quantInt8Activations ? quantBlockK : 0;
      ref::quantizeInt4Group(ex.w1, E, D, ex.w1Cols(), quantBlockK, quantZeroPoint, codes1,
                             scales1, zeros1, roundScale);
      ref::quantizeInt4Group(ex.w2, E, H, D, quantBlockK, quantZeroPoint, codes2, scales2,
                             zeros2, roundScale);
    } else if (quantBlockK > 0) {
      ref::Experts &ex = in.experts;
      ex.quantizedWeights = true;
      ref::quantizeFp8Block(ex.w1, E, D, ex.w1Cols(), quantBlockK, quantBlockN,
                            io::floatToFp8E4M3, codes1, scales1, roundScale);
      ref::quantizeFp8Block(ex.w2, E, H, D, quantBlockK, quantBlockN,
                            io::floatToFp8E4M3, codes2, scales2, roundScale);
    }
    // --quant-shared: the shared expert's weights quantized the same way
    // but taken by the layer as values of T (as moe-import binds FP8 and
    // int4 shared experts, #moe.checkpoint fp8_scales or int4_scales): each
    // q * s (int4: (q - z) * s) exact, rounded once to T. Written as codes
    // NAME and F32 scales NAME_scale [ceil(K/BK), ceil(N/BN)] (int4:
    // [ceil(K/G), N], and U8 zero points NAME_zero with zero_point).
    std::vector<uint8_t> sharedCodes1, sharedCodes2, sharedZeros1, sharedZeros2;
    std::vector<float> sharedScales1, sharedScales2;
    if (quantShared && quantInt4) {
      auto quantize = [&](std::vector<float> &w, int64_t K, int64_t N,
                          std::vector<uint8_t> &codes, std::vector<float> &scales,
                          std::vector<uint8_t> &zeros) {
        ref::quantizeInt4Group(w, 1, K, N, quantBlockK, quantZeroPoint, codes, scales, zeros,
                               roundScale);
        for (int64_t k = 0; k < K; ++k)
          for (int64_t n = 0; n < N; ++n) {
            const size_t g = size_t((k / quantBlockK) * N + n);
            const double z = zeros.empty() ? 8.0 : double(zeros[g]);
            w[k * N + n] = static_cast<float>(ref::roundTo(
                dtype, (double(codes[k * N + n]) - z) * double(scales[g])));
          }
      };
      const int64_t width = static_cast<int64_t>(in.sharedW1.size()) / D;
      quantize(in.sharedW1, D, width, sharedCodes1, sharedScales1, sharedZeros1);
      quantize(in.sharedW2, in.sharedHidden, D, sharedCodes2, sharedScales2, sharedZeros2);
    } else if (quantShared) {
      auto quantize = [&](std::vector<float> &w, int64_t K, int64_t N,
                          std::vector<uint8_t> &codes,
                          std::vector<float> &scales) {
        ref::quantizeFp8Block(w, 1, K, N, quantBlockK, quantBlockN,
                              io::floatToFp8E4M3, codes, scales, roundScale);
        const int64_t nb = (N + quantBlockN - 1) / quantBlockN;
        for (int64_t k = 0; k < K; ++k)
          for (int64_t n = 0; n < N; ++n)
            w[k * N + n] = static_cast<float>(ref::roundTo(
                dtype, ref::fp8E4M3Value(codes[k * N + n]) *
                           static_cast<double>(
                               scales[(k / quantBlockK) * nb + n / quantBlockN])));
      };
      const int64_t hs = in.sharedHidden;
      const int64_t width = static_cast<int64_t>(in.sharedW1.size()) / D;
      quantize(in.sharedW1, D, width, sharedCodes1, sharedScales1);
      quantize(in.sharedW2, hs, D, sharedCodes2, sharedScales2);
    }
    addParams(params, tensors);
    // The quantized tensors ([..., K, N]), by the values they replace:
    // written as their codes under their names and their F32 scales
    // [..., ceil(K/BK), ceil(N/BN)] under NAME_scale.
    std::map<const std::vector<float> *,
             std::pair<const std::vector<uint8_t> *, const std::vector<float> *>>
        quantized;
    if (quantBlockK > 0) {
      quantized[&in.experts.w1] = {&codes1, &scales1};
      quantized[&in.experts.w2] = {&codes2, &scales2};
    }
    std::map<const std::vector<float> *, const std::vector<uint8_t> *> zeroPoints;
    if (quantZeroPoint) {
      zeroPoints[&in.experts.w1] = &zeros1;
      zeroPoints[&in.experts.w2] = &zeros2;
    }
    if (quantShared) {
      quantized[&in.sharedW1] = {&sharedCodes1, &sharedScales1};
      quantized[&in.sharedW2] = {&sharedCodes2, &sharedScales2};
      if (quantInt4 && quantZeroPoint) {
        zeroPoints[&in.sharedW1] = &sharedZeros1;
        zeroPoints[&in.sharedW2] = &sharedZeros2;
      }
    }
    for (const NamedTensor &nt : tensors) {
      auto it = quantized.find(nt.values);
      if (it == quantized.end())
        continue;
      const size_t rank = nt.shape.size();
      const int64_t K = nt.shape[rank - 2], N = nt.shape[rank - 1];
      std::vector<int64_t> scaleShape(nt.shape.begin(), nt.shape.end() - 2);
      scaleShape.push_back((K + quantBlockK - 1) / quantBlockK);
      scaleShape.push_back(quantInt4 ? N : (N + quantBlockN - 1) / quantBlockN);
      params[nt.name] = io::Tensor(quantInt4 ? io::DType::U8 : io::DType::F8E4M3, nt.shape,
                                   *it->second.first);
      if (!params.emplace(nt.name + "_scale", f32Tensor(scaleShape, *it->second.second))
               .second)
        die("--names: '" + nt.name + "_scale' is given twice");
      if (auto z = zeroPoints.find(nt.values); z != zeroPoints.end())
        if (!params.emplace(nt.name + "_zero", io::Tensor(io::DType::U8, scaleShape, *z->second))
                 .second)
          die("--names: '" + nt.name + "_zero' is given twice");
    }

    std::string label = block ? format("layer %" PRId64 ": ", l) : "";
    ref::LayerResult res;
    if (softLayers.count(l)) {
      res.y = softFromRouter(in, slots, groupSize, normalize);
      std::printf("%ssoft from router: G=%" PRId64 " M=%" PRId64 " S=%" PRId64
                  "%s, scale 1, %s, activation %s, T=%" PRId64 " D=%" PRId64
                  " E=%" PRId64 " H=%" PRId64 "\n",
                  label.c_str(), T / groupSize, groupSize, slots,
                  normalize ? ", normalize" : "",
                  routerBias ? "router bias dropped" : "no router bias",
                  ref::activationName(act), T, D, E, H);
      if (block)
        for (size_t i = 0; i < x.size(); ++i)
          x[i] = residual(dtype, x[i], res.y[i]);
      else
        x = res.y;
      continue;
    }
    res = ref::moeLayer(in, opt);
    std::printf("%s%s, activation %s, T=%" PRId64 " D=%" PRId64 " E=%" PRId64
                " H=%" PRId64 "%s\n",
                label.c_str(), routingString(opt.routing, training).c_str(),
                ref::activationName(act), T, D, E, H,
                training ? format(", seed %" PRIu64, opt.seed).c_str() : "");
    if (res.capacity >= 0) {
      int64_t dropped = 0;
      for (const auto &d : res.dropped)
        dropped += std::count(d.begin(), d.end(), true);
      std::printf("%scapacity %" PRId64 ", %" PRId64 " assignments dropped\n",
                  label.c_str(), res.capacity, dropped);
    }
    checkMargins(res.decisionMargin, minMargin, label);
    if (training) {
      loss = res.auxLoss;
      std::printf("aux loss %.9g\n", loss);
    }
    if (args.has("vjp") && !block)
      writeLayerVjp(args.str("vjp"), layerNames, in, opt, res, dataSeed,
                    args.flag("vjp-aux-only"));
    if (args.has("vjp") && block) {
      blockInputs.push_back(in);
      blockResults.push_back(res);
    }
    if (block) {
      // The residual: x + moe(x), added in f32 like the compiled code.
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = residual(dtype, x[i], res.y[i]);
    } else {
      x = res.y;
    }
  }
  if (quantInt4)
    std::printf("expert weights int4 codes (U8, one per byte) with F32 scales <name>_scale%s "
                "per group of %" PRId64 " along K and column%s (docs/spec.md §2.1)\n",
                quantZeroPoint ? " and U8 zero points <name>_zero" : " (zero point 8)",
                quantBlockK, quantInt8Activations ? ", activations quantized to int8" : "");
  else if (quantBlockK > 0)
    std::printf("expert weights F8_E4M3 with F32 scales <name>_scale per block "
                "of %" PRId64 " x %" PRId64 " (docs/spec.md §2.1)%s\n",
                quantBlockK, quantBlockN,
                quantShared ? "; shared expert too, taken as values of T"
                            : "");
  if (dtype != ref::ElementType::F32)
    std::printf("element type %s (parameters %s, x and y f32 .npy holding "
                "%s values)\n",
                ref::elementTypeName(dtype),
                io::safetensorsDTypeName(toIODType(dtype)),
                ref::elementTypeName(dtype));
  std::printf("max |y| %.6g\n", maxAbs(x));

  if (block && args.has("vjp")) {
    // The backward of x_{l+1} = x_l + layer_l(x_l), last layer first: the
    // cotangent g of x_l is g of x_{l+1} plus layer l's dx under g (the
    // residual adds' roundings are not differentiated: they are identities).
    const std::string prefix = args.str("vjp");
    const std::vector<float> dy = vjpCotangent(T * D, dataSeed, dtype);
    writeF32(vjpPath(prefix, "dy"), {T, D}, dy);
    std::vector<double> g(dy.begin(), dy.end());
    size_t n = 0;
    for (int64_t l = layers - 1; l >= 0; --l) {
      ref::LayerCotangents cot;
      cot.dy = g;
      const ref::LayerGradients lg = ref::moeLayerVjp(
          blockInputs[l], opt, ref::layerDecisions(blockResults[l], opt), cot);
      std::vector<std::string> layerNames(names.begin() + l * perLayer,
                                          names.begin() + (l + 1) * perLayer);
      n += writeParamGradients(prefix, layerNames, blockInputs[l], lg);
      for (size_t i = 0; i < g.size(); ++i)
        g[i] += lg.dx[i];
    }
    writeGradient(prefix, "x", {T, D}, g);
    std::printf("vjp: dy and %zu gradients (max |grad_x| %.6g) under %s\n", n + 1,
                maxAbs(g), prefix.c_str());
  }
  writeParams(paramsPath, params);
  writeF32(inputPath, {T, D}, x0);
  writeF32(expectedPath, {T, D}, x);
  if (args.has("seed-input"))
    writeTensor(args.str("seed-input"),
                io::Tensor::fromValues(io::DType::I64, {},
                                       std::vector<int64_t>{
                                           int64_t(opt.seed)}));
  if (args.has("expected-loss"))
    writeF32(args.str("expected-loss"), {},
             std::vector<float>{float(loss)});
  return 0;
}

//===----------------------------------------------------------------------===//
// moe-ref soft
//===----------------------------------------------------------------------===//

int cmdSoft(int argc, char **argv) {
  Args args(argc, argv, 2,
            {"groups", "tokens", "dim", "experts", "slots", "hidden",
             "activation", "scale", "data-seed", "names", "params", "input",
             "expected", "expected-slots", "expected-dispatch",
             "expected-combine", "dtype", "vjp", "poison"},
            {"normalize", "scale-param", "expert-biases"}, 0);
  const int64_t G = args.positiveInt("groups"), M = args.positiveInt("tokens"),
                D = args.positiveInt("dim"), E = args.positiveInt("experts"),
                S = args.positiveInt("slots"), H = args.positiveInt("hidden");
  const ref::Activation act = parseActivationOpt(args);
  const ref::ElementType dtype = parseDTypeOpt(args);
  const bool scaleParam = args.flag("scale-param");
  const bool expertBiases = args.flag("expert-biases");
  if (args.has("scale") && !scaleParam)
    die("--scale needs --scale-param (without it the layer's scale is 1)");
  const uint64_t dataSeed = args.seed("data-seed");
  const size_t want = 3 + (scaleParam ? 1 : 0) + (expertBiases ? 2 : 0);
  std::vector<std::string> names = parseNames(
      args, want,
      std::string("phi") + (scaleParam ? ", scale" : "") + ", w1, w2" +
          (expertBiases ? ", b1, b2" : ""));

  ref::SoftLayerInputs in;
  in.numGroups = G;
  in.groupSize = M;
  in.slotsPerExpert = S;
  in.normalize = args.flag("normalize");
  in.scale = scaleParam ? args.real("scale", 2.5) : 1.0;
  ref::TestRng seeds(dataSeed ^ 0x736F66742D6D6F65ull);
  in.x = ref::randomNormal(G * M * D, seeds.next(), 1.0);
  in.phi = ref::randomNormal(D * E * S, seeds.next(), 1.0 / std::sqrt(double(D)));
  in.experts =
      ref::randomExperts(E, D, H, act, expertBiases, seeds.next(), dtype);
  ref::roundAll(dtype, in.x);
  ref::roundAll(dtype, in.phi);

  ref::Experts &ex = in.experts;
  std::vector<float> scale = {float(in.scale)};
  std::vector<NamedTensor> tensors;
  auto add = [&](std::vector<int64_t> shape, std::vector<float> &v, ref::ElementType type) {
    tensors.push_back({names[tensors.size()], std::move(shape), &v, type});
  };
  add({D, E, S}, in.phi, dtype);
  // The scale operand is tensor<f32> whatever T is.
  if (scaleParam)
    add({}, scale, ref::ElementType::F32);
  add({E, D, ex.w1Cols()}, ex.w1, dtype);
  add({E, H, D}, ex.w2, dtype);
  if (expertBiases) {
    add({E, ex.w1Cols()}, ex.b1, dtype);
    add({E, D}, ex.b2, dtype);
  }
  tensors.push_back({"x", {G, M, D}, &in.x, dtype});
  applyPoisons(args, tensors);
  tensors.pop_back();
  if (!(scale[0] == float(in.scale)))
    in.scale = scale[0]; // poisoned
  std::map<std::string, io::Tensor> params;
  addParams(params, tensors);

  ref::SoftLayerResult res = ref::softMoELayer(in);
  std::printf("soft layer G=%" PRId64 " M=%" PRId64 " D=%" PRId64 " E=%" PRId64
              " S=%" PRId64 " H=%" PRId64 ", activation %s%s, scale %g\n",
              G, M, D, E, S, H, ref::activationName(act),
              in.normalize ? ", normalize" : "", in.scale);
  if (dtype != ref::ElementType::F32)
    std::printf("element type %s\n", ref::elementTypeName(dtype));
  std::printf("max |y| %.6g\n", maxAbs(res.y));

  writeParams(args.str("params"), params);
  writeF32(args.str("input"), {G, M, D}, in.x);
  writeF32(args.str("expected"), {G, M, D}, res.y);
  const int64_t ES = E * S;
  if (args.has("expected-slots")) {
    // moe.soft_dispatch's rows: slot (g, e, s) at row (e*G + g)*S + s.
    std::vector<float> rows(size_t(E * G * S * D));
    for (int64_t g = 0; g < G; ++g)
      for (int64_t e = 0; e < E; ++e)
        for (int64_t s = 0; s < S; ++s)
          for (int64_t d = 0; d < D; ++d)
            rows[size_t(((e * G + g) * S + s) * D + d)] =
                float(res.slots[size_t((g * ES + e * S + s) * D + d)]);
    writeF32(args.str("expected-slots"), {E * G * S, D}, rows);
  }
  auto toF32 = [](const std::vector<double> &v) {
    return std::vector<float>(v.begin(), v.end());
  };
  if (args.has("expected-dispatch"))
    writeF32(args.str("expected-dispatch"), {G, M, E, S}, toF32(res.dispatch));
  if (args.has("expected-combine"))
    writeF32(args.str("expected-combine"), {G, M, E, S}, toF32(res.combine));
  if (args.has("vjp")) {
    // dy [G, M, D] (an f32 .npy holding values of T, like --input) and
    // softMoELayerVjp's gradients: grad_x and grad_NAME for each of --names.
    const std::string prefix = args.str("vjp");
    const std::vector<float> dy = vjpCotangent(G * M * D, dataSeed, dtype);
    writeF32(vjpPath(prefix, "dy"), {G, M, D}, dy);
    const ref::SoftLayerGradients g = ref::softMoELayerVjp(
        in, std::vector<double>(dy.begin(), dy.end()));
    writeGradient(prefix, "x", {G, M, D}, g.dx);
    size_t n = 0;
    writeGradient(prefix, names[n++], {D, E, S}, g.dphi);
    if (scaleParam)
      writeGradient(prefix, names[n++], {}, {g.dscale});
    writeGradient(prefix, names[n++], {E, D, ex.w1Cols()}, g.dw1);
    writeGradient(prefix, names[n++], {E, H, D}, g.dw2);
    if (expertBiases) {
      writeGradient(prefix, names[n++], {E, ex.w1Cols()}, g.db1);
      writeGradient(prefix, names[n++], {E, D}, g.db2);
    }
    std::printf("vjp: dy and %zu gradients (max |grad_x| %.6g) under %s\n",
                n + 1, maxAbs(g.dx), prefix.c_str());
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// moe-ref gate
//===----------------------------------------------------------------------===//

int cmdGate(int argc, char **argv) {
  Args args(argc, argv, 2,
            {"logits", "routing", "k", "adjust", "lambda", "seed-value",
             "expected-weights", "expected-indices", "expected-loss",
             "min-margin"},
            {"training"}, 0);
  Array logits = readArray(args.str("logits"));
  if (logits.shape.size() != 2 || logits.dtype != io::DType::F32)
    die(logits.path + ": logits must be a 2-D f32 array, got " +
        io::dtypeName(logits.dtype) + " " + io::formatShape(logits.shape));
  const int64_t T = logits.shape[0], E = logits.shape[1];
  if (E < 1)
    die(logits.path + ": no experts");
  const bool training = args.flag("training");
  ref::Routing routing = parseRoutingOpt(args, E, training);
  uint64_t seed = 0;
  if (training)
    seed = args.seed("seed-value");
  else if (args.has("seed-value"))
    die("--seed-value needs --training");
  if (args.has("expected-loss") && !training)
    die("--expected-loss needs --training");
  const int64_t K = routing.expertsPerToken(E);
  std::vector<float> weights;
  std::vector<int32_t> indices;
  std::vector<double> margins, probs;
  for (int64_t t = 0; t < T; ++t) {
    const double *o = logits.values.data() + t * E;
    ref::TokenRouting tr =
        ref::routeToken(o, E, routing, training, seed, uint32_t(t));
    for (int64_t i = 0; i < K; ++i) {
      weights.push_back(float(tr.weights[size_t(i)]));
      indices.push_back(int32_t(tr.selected[size_t(i)]));
    }
    margins.push_back(tr.decisionMargin);
    std::vector<double> g = ref::softmax(o, E);
    probs.insert(probs.end(), g.begin(), g.end());
  }
  std::printf("gate %s, T=%" PRId64 " E=%" PRId64 "%s\n",
              routingString(routing, training).c_str(), T, E,
              training ? format(", seed %" PRIu64, seed).c_str() : "");
  checkMargins(margins, args.real("min-margin", 1e-6), "");
  double loss = 0;
  if (training && routing.kind == ref::RoutingKind::MoESART)
    loss = ref::trimmedLassoLoss(probs, T, E, routing.k, routing.trimmedLasso);
  if (training)
    std::printf("aux loss %.9g\n", loss);
  if (args.has("expected-weights"))
    writeF32(args.str("expected-weights"), {T, K}, weights);
  if (args.has("expected-indices"))
    writeTensor(args.str("expected-indices"),
                io::Tensor::fromValues(io::DType::I32, {T, K}, indices));
  if (args.has("expected-loss"))
    writeF32(args.str("expected-loss"), {}, std::vector<float>{float(loss)});
  return 0;
}

//===----------------------------------------------------------------------===//
// moe-ref compare / sum-check / value-check
//===----------------------------------------------------------------------===//

int cmdCompare(int argc, char **argv) {
  Args args(argc, argv, 2, {"tol", "rtol", "dtype"}, {"nonfinite-equal"}, 2);
  if (args.positional.size() != 2)
    die("compare needs ACTUAL.npy EXPECTED.npy");
  // --nonfinite-equal: a NaN must meet a NaN and an infinity the same
  // infinity (the data of docs/spec.md §3 "NaN and infinities"); the finite
  // elements are compared as usual, max|e| over them.
  const bool nonFiniteEqual = args.flag("nonfinite-equal");
  // --dtype bf16|f16: the tolerance of MoEReference.h for compiled results
  // of that element type (atol = 2u max|e|, rtol = 4u).
  const ref::ElementType dtype = parseDTypeOpt(args);
  const ref::Tolerance typeTol = ref::tolerance(dtype);
  const bool typed = dtype != ref::ElementType::F32;
  const double tol = args.real("tol", typed ? typeTol.atolScale : 1e-4);
  const double rtol = args.real("rtol", typed ? typeTol.rtol : 0.0);
  if (tol < 0)
    die("--tol must be >= 0");
  if (rtol < 0)
    die("--rtol must be >= 0");
  Array a = readArray(args.positional[0]), e = readArray(args.positional[1]);
  if (a.shape != e.shape)
    failCheck("shape " + io::formatShape(a.shape) + " of " + a.path +
              " differs from shape " + io::formatShape(e.shape) + " of " +
              e.path);
  double maxErr = 0, maxExp = 0;
  int64_t worst = -1, nonFinite = -1, matched = 0;
  for (size_t i = 0; i < a.values.size(); ++i) {
    const double av = a.values[i], ev = e.values[i];
    if (!std::isfinite(av) || !std::isfinite(ev)) {
      const bool same = (std::isnan(av) && std::isnan(ev)) || (std::isinf(av) && av == ev);
      if (nonFiniteEqual && same)
        ++matched;
      else if (nonFinite < 0)
        nonFinite = int64_t(i);
      continue;
    }
    double err = std::fabs(a.values[i] - e.values[i]);
    if (worst < 0 || err > maxErr) {
      maxErr = err;
      worst = int64_t(i);
    }
    maxExp = std::max(maxExp, std::fabs(e.values[i]));
  }
  if (nonFinite >= 0)
    failCheck(format("non-finite value at %s (actual %g, expected %g)",
                     indexString(a.shape, nonFinite).c_str(),
                     a.values[size_t(nonFinite)], e.values[size_t(nonFinite)]));
  const double bound = tol * maxExp;
  // Per element: |a - e| <= tol max|e| + rtol |e|.
  int64_t firstOver = -1, over = 0;
  for (size_t i = 0; i < a.values.size(); ++i) {
    if (!std::isfinite(a.values[i]) || !std::isfinite(e.values[i]))
      continue;
    if (!(std::fabs(a.values[i] - e.values[i]) <=
          bound + rtol * std::fabs(e.values[i]))) {
      if (firstOver < 0)
        firstOver = int64_t(i);
      ++over;
    }
  }
  const double ratio = maxExp > 0 ? maxErr / maxExp : (maxErr > 0 ? INFINITY : 0);
  std::string figures = format(
      "%zu elements %s: max abs error %.3e, max |expected| %.3e, ratio %.3e "
      "(tol %.1e%s)",
      a.values.size(), io::formatShape(a.shape).c_str(), maxErr, maxExp, ratio,
      tol, rtol > 0 ? format(", rtol %.1e", rtol).c_str() : "");
  if (nonFiniteEqual)
    figures += format("; %" PRId64 " non-finite elements equal", matched);
  if (worst >= 0)
    figures += format("; worst element %s: actual %.9g, expected %.9g",
                      indexString(a.shape, worst).c_str(),
                      a.values[size_t(worst)], e.values[size_t(worst)]);
  if (a.shape.size() == 2 && a.shape[0] > 0 && a.shape[1] > 0) {
    // Rows: the tokens of a [T, D] output. Count the rows that exceed the
    // bound (a routing difference shows as a few whole rows).
    const int64_t R = a.shape[0], C = a.shape[1];
    int64_t bad = 0, worstRow = 0;
    double worstSum = -1;
    std::string firstBad;
    for (int64_t r = 0; r < R; ++r) {
      double sum = 0;
      bool rowOver = false;
      for (int64_t c = 0; c < C; ++c) {
        double ev = e.values[size_t(r * C + c)];
        double err = std::fabs(a.values[size_t(r * C + c)] - ev);
        sum += err;
        rowOver |= err > bound + rtol * std::fabs(ev);
      }
      if (sum > worstSum) {
        worstSum = sum;
        worstRow = r;
      }
      if (rowOver) {
        if (bad < 8)
          firstBad += (bad ? "," : "") + std::to_string(r);
        ++bad;
      }
    }
    figures += format("; worst row %" PRId64 " (sum of abs errors %.3e)",
                      worstRow, worstSum);
    if (bad)
      figures += format("; %" PRId64 " of %" PRId64
                        " rows over tolerance (first: %s)",
                        bad, R, firstBad.c_str());
  }
  if (over > 0 && rtol > 0)
    figures += format("; %" PRId64 " elements over tolerance (first: %s)",
                      over, indexString(a.shape, firstOver).c_str());
  if (over > 0)
    failCheck(figures);
  std::printf("PASS: %s\n", figures.c_str());
  return 0;
}

std::vector<int64_t> parseAxes(const std::string &s, size_t rank) {
  std::vector<int64_t> axes;
  for (const std::string &part : splitList(s)) {
    int64_t a = Args::parseInt(part, "--axes");
    if (a < 0)
      a += int64_t(rank);
    if (a < 0 || a >= int64_t(rank))
      die(format("--axes: axis %s out of range for rank %zu", part.c_str(),
                 rank));
    if (std::find(axes.begin(), axes.end(), a) != axes.end())
      die("--axes: axis " + part + " given twice");
    axes.push_back(a);
  }
  return axes;
}

int cmdSumCheck(int argc, char **argv) {
  Args args(argc, argv, 2, {"axes", "expect", "tol"}, {}, 1);
  if (args.positional.size() != 1)
    die("sum-check needs W.npy");
  Array w = readArray(args.positional[0]);
  std::vector<int64_t> axes = parseAxes(args.str("axes"), w.shape.size());
  const double expect = args.real("expect", 1.0), tol = args.real("tol", 1e-5);
  // Index of the sum an element belongs to: its index over the kept axes.
  std::vector<bool> summed(w.shape.size(), false);
  for (int64_t a : axes)
    summed[size_t(a)] = true;
  std::vector<int64_t> keptShape;
  for (size_t d = 0; d < w.shape.size(); ++d)
    if (!summed[d])
      keptShape.push_back(w.shape[d]);
  int64_t numSums = 1;
  for (int64_t s : keptShape)
    numSums *= s;
  std::vector<double> sums(size_t(numSums), 0.0);
  const size_t rank = w.shape.size();
  std::vector<int64_t> idx(rank, 0);
  for (size_t i = 0; i < w.values.size(); ++i) {
    int64_t flat = int64_t(i), key = 0;
    for (size_t d = rank; d-- > 0;) {
      idx[d] = flat % w.shape[d];
      flat /= w.shape[d];
    }
    for (size_t d = 0; d < rank; ++d)
      if (!summed[d])
        key = key * w.shape[d] + idx[d];
    sums[size_t(key)] += w.values[i];
  }
  double worstDev = -1;
  int64_t worst = 0;
  for (int64_t s = 0; s < numSums; ++s) {
    double dev = std::fabs(sums[size_t(s)] - expect);
    if (std::isnan(dev))
      dev = INFINITY;
    if (dev > worstDev) {
      worstDev = dev;
      worst = s;
    }
  }
  std::string figures =
      format("%" PRId64 " sums over axes %s of %s %s: max |sum - %g| %.3e "
             "(tol %.1e)",
             numSums, args.str("axes").c_str(), w.path.c_str(),
             io::formatShape(w.shape).c_str(), expect, worstDev, tol);
  if (numSums > 0)
    figures += format("; worst sum at %s = %.9g",
                      indexString(keptShape, worst).c_str(),
                      sums[size_t(worst)]);
  if (!(worstDev <= tol))
    failCheck(figures);
  std::printf("PASS: %s\n", figures.c_str());
  return 0;
}

int cmdValueCheck(int argc, char **argv) {
  Args args(argc, argv, 2, {"expect", "tol"}, {}, 1);
  if (args.positional.size() != 1)
    die("value-check needs W.npy");
  Array w = readArray(args.positional[0]);
  const double expect = args.real("expect"), tol = args.real("tol", 1e-6);
  double worstDev = -1;
  int64_t worst = -1;
  for (size_t i = 0; i < w.values.size(); ++i) {
    double dev = std::fabs(w.values[i] - expect);
    if (std::isnan(dev))
      dev = INFINITY;
    if (dev > worstDev) {
      worstDev = dev;
      worst = int64_t(i);
    }
  }
  std::string figures =
      format("%zu elements of %s %s: max |v - %g| %.3e (tol %.1e)",
             w.values.size(), w.path.c_str(), io::formatShape(w.shape).c_str(),
             expect, std::max(worstDev, 0.0), tol);
  if (worst >= 0)
    figures += format("; worst element %s = %.9g",
                      indexString(w.shape, worst).c_str(),
                      w.values[size_t(worst)]);
  if (!(worstDev <= tol))
    failCheck(figures);
  std::printf("PASS: %s\n", figures.c_str());
  return 0;
}

//===----------------------------------------------------------------------===//
// moe-ref pl-check
//===----------------------------------------------------------------------===//

/// Regularized lower incomplete gamma P(a, x) (Numerical Recipes 6.2).
double gammaP(double a, double x) {
  if (x <= 0)
    return 0;
  const double lg = std::lgamma(a);
  if (x < a + 1) {
    double ap = a, sum = 1.0 / a, del = sum;
    for (int n = 0; n < 10000; ++n) {
      ap += 1;
      del *= x / ap;
      sum += del;
      if (std::fabs(del) < std::fabs(sum) * 1e-15)
        break;
    }
    return sum * std::exp(-x + a * std::log(x) - lg);
  }
  // Continued fraction for Q(a, x) (modified Lentz).
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < tiny)
      d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny)
      c = tiny;
    d = 1 / d;
    double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < 1e-15)
      break;
  }
  return 1.0 - std::exp(-x + a * std::log(x) - lg) * h;
}

/// P(chi2_df <= x).
double chiSquareCdf(double x, int64_t df) { return gammaP(0.5 * df, 0.5 * x); }

/// The q-quantile of chi2_df (bisection).
double chiSquareQuantile(double q, int64_t df) {
  double lo = 0, hi = std::max(10.0, 4.0 * double(df));
  while (chiSquareCdf(hi, df) < q)
    hi *= 2;
  for (int i = 0; i < 200; ++i) {
    double mid = 0.5 * (lo + hi);
    if (chiSquareCdf(mid, df) < q)
      lo = mid;
    else
      hi = mid;
  }
  return 0.5 * (lo + hi);
}

struct ChiSquare {
  double stat = 0;
  int64_t df = 0;
  double critical = 0;
  double pValue = 1;
  int64_t bins = 0;
  int64_t pooled = 0; // categories pooled because their expected count < 5
};

/// Pearson's chi-square of observed vs expected counts; categories with an
/// expected count below 5 are pooled into one bin (merged into the smallest
/// bin if the pool itself stays below 5). Fails on an observed count in a
/// category of probability 0.
ChiSquare chiSquare(const std::vector<double> &observed,
                    const std::vector<double> &expected, double alpha,
                    const std::string &what,
                    const std::vector<std::string> &labels) {
  std::vector<std::pair<double, double>> bins; // (observed, expected)
  double poolObs = 0, poolExp = 0;
  ChiSquare r;
  for (size_t i = 0; i < observed.size(); ++i) {
    if (expected[i] <= 0 && observed[i] > 0)
      failCheck(format("%s: %g draws of %s, whose probability is 0",
                       what.c_str(), observed[i], labels[i].c_str()));
    if (expected[i] < 5) {
      poolObs += observed[i];
      poolExp += expected[i];
      if (expected[i] > 0)
        ++r.pooled;
    } else {
      bins.push_back({observed[i], expected[i]});
    }
  }
  if (poolExp > 0) {
    if (poolExp >= 5 || bins.empty()) {
      bins.push_back({poolObs, poolExp});
    } else {
      auto smallest = std::min_element(
          bins.begin(), bins.end(),
          [](const auto &a, const auto &b) { return a.second < b.second; });
      smallest->first += poolObs;
      smallest->second += poolExp;
    }
  }
  for (const auto &b : bins)
    r.stat += (b.first - b.second) * (b.first - b.second) / b.second;
  r.bins = int64_t(bins.size());
  r.df = r.bins - 1;
  if (r.df >= 1) {
    r.critical = chiSquareQuantile(1 - alpha, r.df);
    r.pValue = 1 - chiSquareCdf(r.stat, r.df);
  }
  return r;
}

int cmdPlCheck(int argc, char **argv) {
  Args args(argc, argv, 2, {"k", "alpha"}, {}, 2);
  if (args.positional.size() != 2)
    die("pl-check needs INDICES.npy LOGITS.npy");
  Array ind = readArray(args.positional[0]);
  Array logits = readArray(args.positional[1]);
  const int64_t K = args.positiveInt("k");
  const double alpha = args.real("alpha", 1e-3);
  if (!(alpha > 0 && alpha < 1))
    die("--alpha must be in (0, 1)");
  if (ind.dtype != io::DType::I32 && ind.dtype != io::DType::I64)
    die(ind.path + ": indices must be i32 or i64");
  if (logits.shape.size() != 2 || !io::isFloatType(logits.dtype))
    die(logits.path + ": logits must be a 2-D float array");
  const int64_t T = logits.shape[0], E = logits.shape[1];
  if (ind.shape != std::vector<int64_t>{T, K})
    die(format("%s: indices shape %s, expected [%" PRId64 ", %" PRId64 "]",
               ind.path.c_str(), io::formatShape(ind.shape).c_str(), T, K));
  if (K > E)
    die("--k exceeds the number of experts");

  // Row checks: ids in range, no repeats.
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < K; ++i) {
      double v = ind.values[size_t(t * K + i)];
      if (v < 0 || v >= double(E))
        failCheck(format("token %" PRId64 ": index %g out of range [0, %" PRId64
                         ")",
                         t, v, E));
      for (int64_t j = 0; j < i; ++j)
        if (ind.values[size_t(t * K + j)] == v)
          failCheck(format("token %" PRId64 ": expert %g drawn twice", t, v));
    }
  }
  std::printf("%" PRId64 " tokens, %" PRId64 " experts, k = %" PRId64
              ": indices in range, no repeats\n",
              T, E, K);

  // Plackett-Luce: p = softmax(logits row); the first draw is i with
  // probability p_i, the second j with p_j / (1 - p_i).
  std::vector<std::vector<double>> probs(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t)
    probs[size_t(t)] = ref::softmax(logits.values.data() + t * E, E);
  auto second = [&](int64_t t) { return int64_t(ind.values[size_t(t * K + 1)]); };
  auto first = [&](int64_t t) { return int64_t(ind.values[size_t(t * K)]); };
  /// P(second = j | first = i) for token t (1 - p_i without cancellation).
  auto conditional = [&](int64_t t, int64_t i, int64_t j) {
    const std::vector<double> &p = probs[size_t(t)];
    double rest = 0;
    for (int64_t l = 0; l < E; ++l)
      if (l != i)
        rest += p[size_t(l)];
    return rest > 0 ? p[size_t(j)] / rest : 0.0;
  };

  bool failed = false;
  std::string failure;
  int64_t tests = 0;
  auto report = [&](const std::string &name, const ChiSquare &c) {
    ++tests;
    std::printf("%s: chi2 %.3f, df %" PRId64 ", critical %.3f (alpha %g), "
                "p-value %.4f, %" PRId64 " bins (%" PRId64 " pooled)\n",
                name.c_str(), c.stat, c.df, c.critical, alpha, c.pValue,
                c.bins, c.pooled);
    if (c.df >= 1 && c.stat > c.critical && !failed) {
      failed = true;
      failure = format("%s: chi2 %.3f > critical %.3f (df %" PRId64
                       ", alpha %g, p-value %.2e)",
                       name.c_str(), c.stat, c.critical, c.df, alpha,
                       c.pValue);
    }
  };

  // 1. Tokens with identical logits rows form a group; every group of at
  //    least kMinGroup tokens gets exact tests of its first-draw counts and
  //    of its ordered-pair counts (draws 1, 2). The remaining tokens are
  //    tested together, expected counts summed over their rows.
  const int64_t kMinGroup = 100;
  std::map<std::vector<double>, std::vector<int64_t>> byRow;
  for (int64_t t = 0; t < T; ++t)
    byRow[std::vector<double>(logits.values.begin() + t * E,
                              logits.values.begin() + (t + 1) * E)]
        .push_back(t);
  std::vector<std::vector<int64_t>> groups;
  std::vector<int64_t> rest;
  for (auto &entry : byRow) {
    if (int64_t(entry.second.size()) >= kMinGroup)
      groups.push_back(entry.second);
    else
      rest.insert(rest.end(), entry.second.begin(), entry.second.end());
  }
  std::sort(groups.begin(), groups.end()); // by first token: deterministic
  std::sort(rest.begin(), rest.end());
  if (!rest.empty())
    groups.push_back(rest);
  std::printf("%zu distinct logits rows: %zu groups of >= %" PRId64
              " tokens%s\n",
              byRow.size(), groups.size() - (rest.empty() ? 0 : 1), kMinGroup,
              rest.empty()
                  ? ""
                  : format(", %zu tokens tested together", rest.size()).c_str());

  std::vector<std::string> labels1, labels2;
  for (int64_t i = 0; i < E; ++i)
    labels1.push_back("expert " + std::to_string(i) + " first");
  for (int64_t i = 0; i < E; ++i)
    for (int64_t j = 0; j < E; ++j)
      labels2.push_back(format("(%" PRId64 ", %" PRId64 ")", i, j));
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const std::vector<int64_t> &g = groups[gi];
    std::vector<double> obs1(size_t(E), 0), exp1(size_t(E), 0);
    std::vector<double> obs2(size_t(E * E), 0), exp2(size_t(E * E), 0);
    for (int64_t t : g) {
      const std::vector<double> &p = probs[size_t(t)];
      for (int64_t i = 0; i < E; ++i) {
        exp1[size_t(i)] += p[size_t(i)];
        if (K >= 2)
          for (int64_t j = 0; j < E; ++j)
            if (j != i)
              exp2[size_t(i * E + j)] += p[size_t(i)] * conditional(t, i, j);
      }
      obs1[size_t(first(t))] += 1;
      if (K >= 2)
        obs2[size_t(first(t) * E + second(t))] += 1;
    }
    std::string name =
        (!rest.empty() && gi + 1 == groups.size())
            ? format("other tokens (%zu)", g.size())
            : format("group %zu (%zu tokens from token %" PRId64 ")", gi,
                     g.size(), g[0]);
    std::printf("%s first draws (observed/expected):", name.c_str());
    for (int64_t i = 0; i < E && i < 16; ++i)
      std::printf(" %g/%.1f", obs1[size_t(i)], exp1[size_t(i)]);
    std::printf("\n");
    report(name + ", first draw",
           chiSquare(obs1, exp1, alpha, name + ", first draw", labels1));
    if (K >= 2)
      report(name + ", ordered pairs",
             chiSquare(obs2, exp2, alpha, name + ", ordered pairs", labels2));
  }

  // 2. Calibration over all tokens: the (token, expert) pairs binned by the
  //    probability the model gives them (tenths of [0, 1]); the observed
  //    number of draws in a bin against the sum of its probabilities. For
  //    the second draw the probability is conditional on the first draw.
  //    A sampler that favours likely experts (e.g. top-k) fails this even
  //    when every token has its own logits.
  const int64_t kBins = 10;
  auto binOf = [&](double p) {
    return std::min<int64_t>(kBins - 1, int64_t(p * double(kBins)));
  };
  std::vector<std::string> binLabels;
  for (int64_t b = 0; b < kBins; ++b)
    binLabels.push_back(format("probability bin [%.1f, %.1f)",
                               double(b) / kBins, double(b + 1) / kBins));
  for (int64_t draw = 0; draw < std::min<int64_t>(K, 2); ++draw) {
    std::vector<double> obs(size_t(kBins), 0), expc(size_t(kBins), 0);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t f = first(t);
      for (int64_t j = 0; j < E; ++j) {
        if (draw == 1 && j == f)
          continue;
        double q = draw == 0 ? probs[size_t(t)][size_t(j)]
                             : conditional(t, f, j);
        expc[size_t(binOf(q))] += q;
      }
      const int64_t d = draw == 0 ? f : second(t);
      double q = draw == 0 ? probs[size_t(t)][size_t(d)] : conditional(t, f, d);
      obs[size_t(binOf(q))] += 1;
    }
    std::string name = draw == 0 ? "calibration, first draw"
                                 : "calibration, second draw";
    std::printf("%s (observed/expected per tenth):", name.c_str());
    for (int64_t b = 0; b < kBins; ++b)
      std::printf(" %g/%.1f", obs[size_t(b)], expc[size_t(b)]);
    std::printf("\n");
    report(name, chiSquare(obs, expc, alpha, name, binLabels));
  }
  if (failed)
    failCheck(failure);
  std::printf("PASS (%" PRId64 " chi-square tests at alpha %g)\n", tests, alpha);
  return 0;
}

//===----------------------------------------------------------------------===//
// moe-ref gen-npy
//===----------------------------------------------------------------------===//

int cmdGenNpy(int argc, char **argv) {
  Args args(argc, argv, 2,
            {"shape", "dtype", "values", "random-seed", "stddev", "distinct-rows",
             "out"},
            {"eye"}, 0);
  std::vector<int64_t> shape;
  std::string shapeText = args.str("shape");
  if (!shapeText.empty() && shapeText != "scalar")
    for (const std::string &part : splitList(shapeText)) {
      int64_t d = Args::parseInt(part, "--shape");
      if (d < 0)
        die("--shape: negative dimension " + part);
      shape.push_back(d);
    }
  auto numel = io::shapeNumElements(shape);
  if (!numel || *numel > (int64_t(1) << 31))
    die("--shape: too many elements");
  const int64_t n = *numel;
  std::string dtypeText = args.str("dtype", "f32");
  auto dtype = io::parseDType(dtypeText);
  if (!dtype || (*dtype != io::DType::F32 && *dtype != io::DType::I32 &&
                 *dtype != io::DType::I64))
    die("--dtype: '" + dtypeText + "' is not f32, i32 or i64");
  int sources = int(args.has("values")) + int(args.has("random-seed")) +
                int(args.flag("eye"));
  if (sources != 1)
    die("gen-npy needs exactly one of --values, --random-seed, --eye");
  if ((args.has("stddev") || args.has("distinct-rows")) &&
      !args.has("random-seed"))
    die("--stddev and --distinct-rows need --random-seed");

  std::vector<double> values(size_t(n), 0.0);
  if (args.has("values")) {
    std::vector<std::string> parts = splitList(args.str("values"));
    if (int64_t(parts.size()) != n && parts.size() != 1)
      die(format("--values: %zu values for %" PRId64
                 " elements (give one per element, or one for all)",
                 parts.size(), n));
    for (int64_t i = 0; i < n; ++i) {
      const std::string &s = parts.size() == 1 ? parts[0] : parts[size_t(i)];
      values[size_t(i)] = *dtype == io::DType::F32
                              ? Args::parseReal(s, "--values")
                              : double(Args::parseInt(s, "--values"));
    }
  } else if (args.has("random-seed")) {
    if (*dtype != io::DType::F32)
      die("--random-seed needs --dtype f32");
    // --distinct-rows R: R random rows (the last dimension), repeated
    // cyclically (row t is row t % R).
    const int64_t rowLen = shape.empty() ? 1 : shape.back();
    const int64_t rows = rowLen ? n / rowLen : 0;
    const int64_t distinct = args.integer("distinct-rows", rows);
    if (distinct < 1 || distinct > std::max<int64_t>(rows, 1))
      die("--distinct-rows must be in [1, number of rows]");
    std::vector<float> r = ref::randomNormal(
        distinct * rowLen, args.seed("random-seed"), args.real("stddev", 1.0));
    for (int64_t i = 0; i < n; ++i)
      values[size_t(i)] = r[size_t(((i / std::max<int64_t>(rowLen, 1)) %
                                    distinct) * rowLen +
                                   i % std::max<int64_t>(rowLen, 1))];
  } else {
    if (shape.size() < 2 || shape[shape.size() - 1] != shape[shape.size() - 2])
      die("--eye needs a shape [..., N, N]");
    const int64_t N = shape.back();
    for (int64_t i = 0; i < n; ++i)
      values[size_t(i)] = (i % N) == ((i / N) % N) ? 1.0 : 0.0;
  }

  io::Tensor t;
  if (*dtype == io::DType::F32)
    t = io::Tensor::fromValues(*dtype, shape,
                               std::vector<float>(values.begin(), values.end()));
  else if (*dtype == io::DType::I32)
    t = io::Tensor::fromValues(
        *dtype, shape, std::vector<int32_t>(values.begin(), values.end()));
  else
    t = io::Tensor::fromValues(
        *dtype, shape, std::vector<int64_t>(values.begin(), values.end()));
  writeTensor(args.str("out"), t);
  std::printf("wrote %s %s %s\n", args.str("out").c_str(),
              io::dtypeName(*dtype), io::formatShape(shape).c_str());
  return 0;
}

const char *const usage = R"(usage: moe-ref SUBCOMMAND [options]

moe-ref layer --tokens T --dim D --experts E --hidden H --activation A
    --routing dense|top_k|moesart [--k K] [--adjust small_random|zero|large]
    [--lambda F] [--training --seed-value N] [--router-bias] [--expert-biases]
    [--capacity-factor CF] [--dtype f32|bf16|f16] --data-seed S
    --names N1,N2,...
    --params OUT.safetensors --input OUT_X.npy [--seed-input OUT_SEED.npy]
    --expected OUT_Y.npy [--expected-loss OUT_LOSS.npy] [--min-margin M]
    [--vjp PREFIX [--vjp-aux-only]]
  Seeded random x [T,D] and parameters (named, in the order router.weight
  [,router.bias][,selection_bias],w1,w2[,b1,b2][,shared_w1,shared_w2
  [,shared_gate]]), and the reference y (and the training loss).
  Production routers (docs/spec.md §3.1.1, --routing top_k): [--score softmax|sigmoid]
  [--no-normalize] [--scale F] [--groups G [--group-k GK]] [--selection-bias
  (an f32 [E] bias that only chooses)]; a shared expert: [--shared-hidden Hs
  [--shared-gate]] (s1 [D,Hs] or [D,2Hs] gated, s2 [Hs,D], gate [D,1]).
  --poison NAME:AT:V[,...] (also for soft): before anything is computed, set
  elements of x (NAME x) or of the parameter NAME of --names to V (nan, inf,
  -inf or a finite number); AT is a flat index or rR: token R of x, slice R of a
  parameter's first dimension. Selections follow docs/spec.md §3 "NaN and infinities"
  (NaN below every number; a decision against a NaN has no margin).
  --dtype bf16|f16 (also for block, soft-from-router and soft): the data
  rounded to that type, the parameters written as BF16/F16 safetensors, x and
  y as f32 .npy holding exact values of the type, y computed with the
  rounding points of docs/spec.md §2-§3 (h rounded to T, y once); compare with
  'moe-ref compare --dtype'. Any --tokens works for a tensor<?xDxT> layer.
  Fails with "borderline token" when a token's decision margin (logit gap for
  top-k selections, |u - cumsum| for MOESART sampling) is below M (1e-6).
  --vjp PREFIX (also for block and soft): cotangents to pass to f_vjp and the
  reference's gradients (MoEReferenceGrad.h, the forward's routing held
  fixed) as PREFIX + NAME.npy (PREFIX may be DIR/): dy (seeded N(0, 1) in
  T, an f32 .npy like --input), with --training daux (the aux loss's
  cotangent, scalar f32), and f32 gradients grad_x and grad_NAME for each
  parameter NAME of --names, in the parameters' shapes. --vjp-aux-only
  (with --training): dy is zero, only the aux loss has a cotangent.
  --quant fp8_e4m3:BK,BN: w1 and w2 quantized per block of BK x BN (their
  [in, out] dims, docs/spec.md §2.1): written as F8_E4M3 codes under their
  names and F32 scales under NAME_scale [E, ceil(K/BK), ceil(N/BN)] (scale
  max|w|/448 per block); the reference computes with the dequantized
  weights (each q * s exact in double, rounded once to f32), never rounded
  to --dtype. --poison applies before the quantization (a NaN weight
  becomes the NaN code, an infinity saturates to +-448). Not with --vjp.
  --quant int4:G[,zero_point]: w1 and w2 quantized per group of G rows of
  K and column (docs/spec.md §2.1): written as U8 codes 0..15 (one per
  byte, as an i4 tensor is laid out) under their names, F32 scales under
  NAME_scale [E, ceil(K/G), N] and, with zero_point, U8 zero points under
  NAME_zero (same shape): with zero_point s = (max(w,0) - min(w,0)) / 15,
  z = round(-min(w,0) / s); symmetric s = max|w| / 7, z = 8; q =
  clamp(round(w / s) + z, 0, 15); the reference computes with (q - z) * s
  exact in double, rounded once to f32. A NaN weight quantizes as 0.
  --quant int4:G[,zero_point],int8_activations: the same weights, and the
  layer in the int8-activation mode (#moe.quant<..., int8_activations>):
  x and h (rounded to --dtype) quantized to int8 per row and group of G
  (s = max|a| / 127 in float, q = a / s rounded to nearest even) and
  replaced by q * s before their GEMMs.
  --quant-scales bf16|f16 (with --quant): every scale rounded to bf16 or
  f16 first (the codes made with it), so a checkpoint may store the scales
  as BF16 or F16 (GPTQ's and AWQ's are F16).
  --quant-shared (with --quant and --shared-hidden): the shared expert's
  weights quantized the same way (codes NAME, F32 scales NAME_scale
  [ceil(K/BK), ceil(N/BN)]; int4: [ceil(K/G), N] and U8 NAME_zero with
  zero_point), the reference using each q * s (int4: (q - z) * s) exact,
  rounded once to --dtype (how moe-import binds FP8 and int4 shared
  experts).
moe-ref block --layers N (default 2) + the layer options (no training)
    [--soft-layers L1,L2,... [--slots S] [--group-size M] [--normalize]]
    [--vjp PREFIX (no soft layers)]
  N residual layers x <- x + layer_l(x) (x + moe(x), f32 adds); --names holds
  N groups of layer names; the layers' weights use distinct seeds. The
  layers listed in --soft-layers (0-based) are computed as soft-from-router.
moe-ref soft-from-router --tokens T --dim D --experts E --hidden H
    --activation A [--slots S (1)] [--group-size M (T)] [--normalize]
    [--router-bias] [--expert-biases] --data-seed S --names N1,N2,...
    --params P --input X --expected Y
  The data of 'moe-ref layer' (same seed, same names: a dense layer's
  parameters) and the expected y of the Soft MoE layer that
  --moe-dense-to-soft makes of it: Phi[:, e, s] = Wr[:, e] for every slot s,
  scale 1, the router bias (if any) ignored, x [T, D] regrouped to
  [T/M, M, D] and y back to [T, D].
moe-ref soft --groups G --tokens M --dim D --experts E --slots S --hidden H
    --activation A [--normalize] [--scale-param [--scale V (2.5)]]
    [--expert-biases] --data-seed S --names phi[,scale],w1,w2[,b1,b2]
    --params P --input X --expected Y [--expected-slots ROWS.npy]
    [--expected-dispatch DW.npy] [--expected-combine CW.npy] [--vjp PREFIX]
  ROWS: moe.soft_dispatch's rows [E*G*S, D]; DW, CW: [G, M, E, S].
moe-ref gate --logits L.npy --routing ... [--k K] [--adjust A] [--lambda F]
    [--training --seed-value N] [--expected-weights W.npy]
    [--expected-indices I.npy] [--expected-loss LOSS.npy] [--min-margin M]
moe-ref compare ACTUAL.npy EXPECTED.npy [--tol 1e-4] [--rtol 0]
    [--dtype f32|bf16|f16] [--nonfinite-equal]
  Passes iff |a - e| <= tol * max|e| + rtol * |e| for every element (shapes
  must match; f16/bf16/f32/i32/i64 arrays are compared by value). --dtype
  bf16|f16 sets the defaults to the tolerance MoEReference.h derives for
  compiled results of that element type: tol = 2u, rtol = 4u (u = 2^-8 for
  bf16, 2^-11 for f16). A non-finite element fails, unless
  --nonfinite-equal: then NaN must meet NaN and +-inf the same infinity, and
  max|e| is taken over the finite elements.
moe-ref sum-check W.npy --axes 1[,2..] [--expect 1] [--tol 1e-5]
moe-ref value-check W.npy --expect V [--tol 1e-6]
moe-ref pl-check INDICES.npy LOGITS.npy --k K [--alpha 0.001]
  INDICES [T, K] (draw order) sampled without replacement from
  softmax(LOGITS [T, E]) per token: no repeats; chi-square tests (critical
  value: the 1 - alpha quantile) of the first-draw counts and the ordered
  pair counts (draws 1, 2) per group of >= 100 tokens with identical logits
  rows (the other tokens together), and calibration tests (draws binned by
  their Plackett-Luce probability) over all tokens.
moe-ref gen-npy --shape 2,3|scalar [--dtype f32|i32|i64]
    (--values v1,v2,... | --random-seed S [--stddev X] [--distinct-rows R]
     | --eye) --out F.npy
  --values: one value per element, or one for all; --random-seed: normal
  values (TestRng), R distinct rows repeated cyclically; --eye: identity
  matrices in the last two dimensions.
)";

} // namespace

int main(int argc, char **argv) {
  if (argc < 2)
    die("missing subcommand (see 'moe-ref help')");
  subcommand = argv[1];
  if (subcommand == "help" || subcommand == "--help" || subcommand == "-h") {
    std::fputs(usage, stdout);
    return 0;
  }
  if (subcommand == "layer")
    return cmdLayer(argc, argv, LayerMode::Layer);
  if (subcommand == "block")
    return cmdLayer(argc, argv, LayerMode::Block);
  if (subcommand == "soft-from-router")
    return cmdLayer(argc, argv, LayerMode::SoftFromRouter);
  if (subcommand == "soft")
    return cmdSoft(argc, argv);
  if (subcommand == "gate")
    return cmdGate(argc, argv);
  if (subcommand == "compare")
    return cmdCompare(argc, argv);
  if (subcommand == "sum-check")
    return cmdSumCheck(argc, argv);
  if (subcommand == "value-check")
    return cmdValueCheck(argc, argv);
  if (subcommand == "pl-check")
    return cmdPlCheck(argc, argv);
  if (subcommand == "gen-npy")
    return cmdGenNpy(argc, argv);
  die("unknown subcommand '" + subcommand + "' (see 'moe-ref help')");
}
