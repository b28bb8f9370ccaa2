//===- moe-fuzz-io.cpp - libFuzzer target: .npy, .safetensors, index JSON -===//
//
// Built only with -DMOE_BUILD_FUZZERS=ON (see scripts/fuzz.sh). Each input is
// given, from memory, to
//  * the .npy reader (parseNpy), and moe-run's --input binding
//    (parseNpyConverting: float64 data converted; bindInputTensor: dtype and
//    shape checks, f32 -> bf16/f16; allocateArgument) against an argument
//    type derived from the input's hash (the file's shape, some dimensions
//    dynamic or changed, one of the five element types);
//  * the .safetensors reader (SafeTensorsFile::fromBuffer), then every
//    tensor is read (raw and converted to f32/f16/bf16) and bound as a
//    --params tensor (bindParamTensor) to an argument type as above, and the
//    tensors go through the quantized formats' decoders (Quantized.h);
//  * the sharded-checkpoint index parser (parseSafeTensorsIndex) and the JSON
//    parser under it (json::Document, whose tree is walked);
//  * checkpoint assembly, when the input is a bundle (moe-run's binding of a
//    #moe.checkpoint parameter: TensorStore::add on the bundle's files,
//    checkpointArgumentShape, checkAssembledArgument,
//    assembleCheckpointTensor). A bundle is text: a first line
//      #moe-fuzz-ckpt DTYPE SHAPE T|N[@BN,BK|#PACKING] NAME...
//    (the argument's element type and shape, `?` for a dynamic size,
//    transposed or not, with `@BN,BK` FP8 weights dequantized by the scale
//    tensors NAME_scale_inv in blocks of BN x BK (fp8_scales), with
//    `#PACKING` int4 codes unpacked from I32 words (int4 = gptq, gptq_zeros,
//    awq or pack_quantized; DTYPE ui8, the storage of i4), with
//    `#PACKING%G[z]` int4 weights dequantized in groups of G by NAME_scale
//    and, with `z`, NAME_zero (int4_scales, int4_zeros; a float DTYPE), the
//    tensor names, `{e}` per expert), then files,
//    each `\n=== FILENAME\n` and its bytes; the files are written to a
//    temporary directory and the `.json` ones (else all) added to the store.
// Findings are crashes, sanitizer reports, and round-trip invariants checked
// here (abort with a message on stderr): a tensor a reader accepts validates,
// and writing it back (encodeNpy / encodeSafeTensors) gives bytes the reader
// accepts again with the same dtype, shape and data.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Checkpoint.h"
#include "runtime/io/Json.h"
#include "runtime/io/Quantized.h"
#include "runtime/io/TensorIO.h"
#include "tools/moe-run/Binding.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <dirent.h>
#include <unistd.h>

using namespace moe::io;
using moe::run::HostTensor;
using moe::run::ValueInfo;

namespace {

[[noreturn]] void finding(const std::string &what) {
  std::fprintf(stderr, "moe-fuzz-io: %s\n", what.c_str());
  std::abort();
}

bool sameTensor(const Tensor &a, const Tensor &b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.data == b.data;
}

void checkTensor(const Tensor &tensor, const char *what) {
  Status valid = tensor.validate(what);
  if (!valid.ok())
    finding(std::string(what) + ": accepted tensor does not validate: " +
            valid.error());
  for (DType target : {DType::F32, DType::F16, DType::BF16}) {
    Result<Tensor> converted = convertTensor(tensor, target);
    if (!converted.ok())
      finding(std::string(what) + ": conversion failed: " + converted.error());
    if (converted->shape != tensor.shape || !converted->validate(what).ok())
      finding(std::string(what) + ": conversion changed the shape");
  }
}

uint64_t hashBytes(const uint8_t *data, size_t size) {
  uint64_t h = 1469598103934665603ull; // FNV-1a
  for (size_t i = 0; i < size; ++i)
    h = (h ^ data[i]) * 1099511628211ull;
  return h;
}

/// Tensors over this many bytes are not bound (allocation and copy only
/// slow the fuzzer down; their sizes are checked before any allocation).
constexpr uint64_t kMaxBoundBytes = uint64_t(1) << 24;

/// An argument type for `shape` chosen by `h`: one of the five element
/// types (or `dtype`), the shape with some dimensions dynamic, some changed.
ValueInfo argumentFor(DType dtype, const std::vector<int64_t> &shape,
                      uint64_t h) {
  static const DType dtypes[] = {DType::F32, DType::F16, DType::BF16,
                                 DType::I32, DType::I64};
  ValueInfo arg;
  arg.index = static_cast<unsigned>(h % 3);
  h /= 3;
  arg.dtype = (h % 3 == 0) ? dtype : dtypes[(h / 3) % 5];
  h /= 15;
  arg.shape = shape;
  for (int64_t &d : arg.shape) {
    switch (h % 8) {
    case 0:
    case 1:
      d = ValueInfo::kDynamic;
      break;
    case 2:
      d += 1;
      break;
    default:
      break;
    }
    h /= 8;
  }
  if (h % 16 == 0)
    arg.shape.push_back(1); // a rank mismatch
  arg.typeString = "tensor<";
  for (int64_t d : arg.shape)
    arg.typeString += (d == ValueInfo::kDynamic ? std::string("?")
                                                : std::to_string(d)) + "x";
  arg.typeString += std::string(dtypeName(arg.dtype)) + ">";
  return arg;
}

/// A tensor that binding accepted for `arg`: its dtype and shape fit, it
/// validates, and it allocates and copies into a HostTensor bit for bit.
void checkBound(const Tensor &tensor, const ValueInfo &arg, const char *what) {
  if (tensor.dtype != arg.dtype || !moe::run::shapeFits(arg.shape, tensor.shape))
    finding(std::string(what) + ": bound tensor does not fit " +
            arg.typeString);
  if (Status valid = tensor.validate(what); !valid)
    finding(std::string(what) + ": bound tensor does not validate: " +
            valid.error());
  if (tensor.data.size() > kMaxBoundBytes)
    return;
  HostTensor host;
  Status allocated = moe::run::allocateArgument(arg, tensor, host);
  if (!allocated)
    finding(std::string(what) + ": cannot allocate a bound tensor: " +
            allocated.error());
  if (host.byteSize() != tensor.data.size() ||
      (!tensor.data.empty() &&
       std::memcmp(host.data(), tensor.data.data(), tensor.data.size()) != 0))
    finding(std::string(what) + ": HostTensor differs from the bound tensor");
}

/// moe-run's --input binding of the input as a .npy file.
void fuzzInputBinding(const uint8_t *data, size_t size, uint64_t h) {
  static const DType targets[] = {DType::F32, DType::F16, DType::BF16,
                                  DType::I32, DType::I64};
  DType target = targets[h % 5];
  bool wasF64 = false;
  Result<Tensor> tensor =
      parseNpyConverting(data, size, "fuzz.npy", target, wasF64);
  if (!tensor) {
    if (tensor.error().empty())
      finding("npy binding: failure without a message");
    return;
  }
  if (wasF64) {
    if (tensor->dtype != target)
      finding("npy binding: float64 data not converted to the target");
    // f32: one rounding of each double (exact property).
    size_t count = tensor->data.size() / 4;
    if (target == DType::F32 && size >= count * 8) {
      const uint8_t *src = data + size - count * 8;
      for (size_t i = 0; i < count; ++i) {
        double v;
        float got;
        std::memcpy(&v, src + 8 * i, 8);
        std::memcpy(&got, tensor->data.data() + 4 * i, 4);
        float want = static_cast<float>(v);
        if (std::memcmp(&got, &want, 4) != 0 && !(got != got && want != want))
          finding("npy binding: float64 -> f32 is not one rounding");
      }
    }
  }
  if (Status valid = tensor->validate("npy binding"); !valid)
    finding("npy binding: accepted tensor does not validate: " +
            valid.error());
  ValueInfo arg = argumentFor(tensor->dtype, tensor->shape, h >> 8);
  Result<Tensor> bound =
      moe::run::bindInputTensor(tensor.take(), "fuzz.npy", arg);
  if (!bound) {
    if (bound.error().empty())
      finding("npy binding: refusal without a message");
    return;
  }
  checkBound(*bound, arg, "npy binding");
}

void fuzzNpy(const uint8_t *data, size_t size) {
  Result<Tensor> tensor = parseNpy(data, size, "fuzz.npy");
  if (!tensor.ok()) {
    if (tensor.error().empty())
      finding("npy: failure without a message");
    return;
  }
  checkTensor(*tensor, "npy");
  Result<std::vector<uint8_t>> encoded = encodeNpy(*tensor, "fuzz.npy");
  if (!encoded.ok()) {
    if (tensor->dtype != DType::BF16)
      finding("npy: cannot re-encode an accepted tensor: " + encoded.error());
    return;
  }
  Result<Tensor> again = parseNpy(encoded->data(), encoded->size(), "re.npy");
  if (!again.ok() || !sameTensor(*tensor, *again))
    finding("npy: re-encoded tensor differs: " + again.error());
}

/// The quantized formats' decoders (runtime/io/Quantized.h) on the accepted
/// tensors, in name order, as weight, scale, zeros and g_idx, with block
/// and group sizes from `h`: each decodes or refuses with a message.
void fuzzQuantized(const std::map<std::string, Tensor> &tensors, uint64_t h) {
  std::vector<const Tensor *> t;
  for (const auto &entry : tensors)
    t.push_back(&entry.second);
  if (t.size() < 2)
    return;
  const Tensor &a = *t[0], &b = *t[1], &c = t.size() > 2 ? *t[2] : *t[1];
  const Tensor *gIdx = t.size() > 3 ? t[3] : nullptr;
  const int64_t block = 1 + static_cast<int64_t>(h % 200),
                other = 1 + static_cast<int64_t>((h >> 8) % 200),
                group = 1 + static_cast<int64_t>((h >> 16) % 256),
                k = 1 + static_cast<int64_t>((h >> 24) % 4096);
  auto check = [&](const Result<Tensor> &r, const char *what) {
    if (!r.ok() && r.error().empty())
      finding(std::string(what) + ": refusal without a message");
    if (r.ok())
      checkTensor(*r, what);
  };
  check(dequantizeFp8Block(a, b, block, other, "fuzz"), "fp8 block");
  check(dequantizeGptq(a, b, c, gIdx, group, "fuzz"), "gptq");
  check(dequantizeAwq(a, b, c, group, "fuzz"), "awq");
  check(dequantizePackQuantized(a, b, k, group, "fuzz"), "pack-quantized");
  check(dequantizePackQuantized(a, b, k, group, "fuzz", &c), "pack-quantized zero points");
}

void fuzzSafeTensors(const uint8_t *data, size_t size) {
  Result<SafeTensorsFile> file = SafeTensorsFile::fromBuffer(
      std::vector<uint8_t>(data, data + size), "fuzz.safetensors");
  if (!file.ok()) {
    if (file.error().empty())
      finding("safetensors: failure without a message");
    return;
  }
  std::map<std::string, Tensor> tensors;
  for (const SafeTensorInfo &info : file->tensors()) {
    if (info.dataBegin > info.dataEnd)
      finding("safetensors: entry with begin > end");
    const uint8_t *raw = file->rawData(info);
    Result<Tensor> tensor = file->get(info.name);
    if (!tensor.ok())
      finding("safetensors: cannot read an accepted entry: " + tensor.error());
    checkTensor(*tensor, "safetensors");
    if (tensor->data.size() != info.dataEnd - info.dataBegin ||
        (!tensor->data.empty() &&
         std::memcmp(raw, tensor->data.data(), tensor->data.size()) != 0))
      finding("safetensors: get() differs from rawData()");
    for (DType target : {DType::F32, DType::F16, DType::BF16}) {
      Result<Tensor> converted = file->get(info.name, target);
      if (!converted.ok())
        finding("safetensors: cannot convert an accepted entry: " +
                converted.error());
    }
    if (file->find(info.name) != &info)
      finding("safetensors: find() does not return the entry");
    // moe-run's --params binding of the entry.
    uint64_t h = hashBytes(reinterpret_cast<const uint8_t *>(info.name.data()),
                           info.name.size()) ^
                 hashBytes(data, std::min<size_t>(size, 64));
    ValueInfo arg = argumentFor(info.dtype, info.shape, h);
    arg.param = info.name;
    if (info.dataEnd - info.dataBegin <= kMaxBoundBytes) {
      Result<Tensor> bound = moe::run::bindParamTensor(*file, info, arg);
      if (bound)
        checkBound(*bound, arg, "params binding");
      else if (bound.error().empty())
        finding("params binding: refusal without a message");
    }
    tensors.emplace(info.name, tensor.take());
  }
  (void)file->names();
  fuzzQuantized(tensors, hashBytes(data, std::min<size_t>(size, 64)));
  // Round trip: encode what was read (the metadata too) and read it again.
  Result<std::vector<uint8_t>> encoded =
      encodeSafeTensors(tensors, file->metadata(), "fuzz.safetensors");
  if (!encoded.ok())
    finding("safetensors: cannot re-encode accepted tensors: " +
            encoded.error());
  Result<SafeTensorsFile> again =
      SafeTensorsFile::fromBuffer(encoded.take(), "re.safetensors");
  if (!again.ok())
    finding("safetensors: re-encoded file rejected: " + again.error());
  if (again->size() != tensors.size() || again->metadata() != file->metadata())
    finding("safetensors: re-encoded file differs");
  for (const auto &[name, tensor] : tensors) {
    Result<Tensor> back = again->get(name);
    if (!back.ok() || !sameTensor(tensor, *back))
      finding("safetensors: re-encoded tensor '" + name + "' differs");
  }
}

size_t walk(const json::Value &value, unsigned depth) {
  size_t count = 1;
  switch (value.kind()) {
  case json::Kind::Array:
  case json::Kind::Object:
    for (size_t i = 0; i < value.size(); ++i) {
      if (value.isObject()) {
        std::string_view key = value.keyAt(i);
        std::optional<json::Value> found = value.find(key);
        if (!found)
          finding("json: find() misses a key of the object");
      }
      count += walk(value.at(i), depth + 1);
    }
    break;
  case json::Kind::Number: {
    uint64_t n;
    (void)value.getUInt64(n);
    (void)value.asString();
    break;
  }
  case json::Kind::String: {
    std::string quoted;
    json::appendQuoted(quoted, value.asString());
    json::Document doc;
    json::ParseError error;
    if (!doc.parse(quoted, error) || !doc.root().isString() ||
        doc.root().asString() != value.asString())
      finding("json: appendQuoted() output does not parse back: " +
              error.message);
    break;
  }
  default:
    (void)value.asBool();
    break;
  }
  (void)value.offset();
  return count;
}

bool relativeWithoutDotDot(const std::string &path) {
  if (path.empty() || path[0] == '/')
    return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos)
      end = path.size();
    if (path.compare(start, end - start, "..") == 0)
      return false;
    start = end + 1;
  }
  return true;
}

void fuzzJson(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  json::Document doc;
  json::ParseError error;
  if (doc.parse(text, error)) {
    walk(doc.root(), 0);
  } else if (error.message.empty() || error.offset > size) {
    finding("json: bad error (empty message or offset past the end)");
  }
  Result<std::map<std::string, std::string>> index =
      parseSafeTensorsIndex(text, "fuzz.index.json");
  if (index.ok()) {
    for (const auto &[tensor, shard] : *index)
      if (!relativeWithoutDotDot(shard))
        finding("index: accepted shard name '" + shard + "'");
  } else if (index.error().empty()) {
    finding("index: failure without a message");
  }
}

/// A private directory for the files of checkpoint bundles (removed at
/// exit).
const std::string &scratchDir() {
  // Never destroyed: the atexit handler below uses it.
  static const std::string &dir = *new std::string([] {
    const char *tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") +
                          "/moe-fuzz-io.XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data()))
      finding("cannot create a scratch directory under " + pattern);
    std::atexit([] {
      const std::string &d = scratchDir();
      if (DIR *dirp = ::opendir(d.c_str())) {
        while (dirent *entry = ::readdir(dirp))
          if (entry->d_name[0] != '.')
            ::unlink((d + "/" + entry->d_name).c_str());
        ::closedir(dirp);
      }
      ::rmdir(d.c_str());
    });
    return std::string(buf.data());
  }());
  return dir;
}

std::vector<std::string> splitWords(std::string_view line) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ')
      ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ')
      ++j;
    if (j > i)
      words.emplace_back(line.substr(i, j - i));
    i = j;
  }
  return words;
}

/// "4x?x8" -> {4, kDynamic, 8}; "scalar" -> {}.
std::optional<std::vector<int64_t>> parseShapeWord(const std::string &word) {
  std::vector<int64_t> shape;
  if (word == "scalar")
    return shape;
  size_t i = 0;
  while (i <= word.size()) {
    size_t j = word.find('x', i);
    if (j == std::string::npos)
      j = word.size();
    std::string dim = word.substr(i, j - i);
    if (dim == "?") {
      shape.push_back(ValueInfo::kDynamic);
    } else {
      if (dim.empty() || dim.size() > 12 ||
          dim.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
      shape.push_back(std::stoll(dim));
    }
    i = j + 1;
  }
  return shape;
}

/// moe-run's binding of a #moe.checkpoint parameter, on a bundle.
void fuzzCheckpoint(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  static constexpr std::string_view magic = "#moe-fuzz-ckpt ";
  if (text.substr(0, magic.size()) != magic)
    return;
  size_t eol = text.find('\n');
  std::vector<std::string> words =
      splitWords(text.substr(magic.size(), eol == std::string_view::npos
                                               ? std::string_view::npos
                                               : eol - magic.size()));
  if (words.size() < 4 || words.size() > 16)
    return;
  std::optional<DType> dtype = parseDType(words[0]);
  std::optional<std::vector<int64_t>> shape = parseShapeWord(words[1]);
  if (!dtype || !shape || shape->size() > 6)
    return;
  ValueInfo arg;
  arg.index = 1;
  arg.dtype = *dtype;
  arg.shape = *shape;
  arg.typeString = "tensor<" + words[1] + "x" + words[0] + ">";
  CheckpointSpec spec;
  spec.transpose = words[2][0] == 'T';
  spec.names.assign(words.begin() + 3, words.end());
  if (size_t at = words[2].find('@'); at != std::string::npos) {
    // Block sizes of 1..999: what a fuzzed header may ask for.
    size_t comma = words[2].find(',', at);
    std::string bn = words[2].substr(at + 1, comma - at - 1),
                bk = comma == std::string::npos ? "" : words[2].substr(comma + 1);
    auto small = [](const std::string &v) {
      return !v.empty() && v.size() <= 3 &&
             v.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!small(bn) || !small(bk))
      return;
    spec.blockN = std::stoll(bn);
    spec.blockK = std::stoll(bk);
    for (const std::string &name : spec.names)
      spec.fp8Scales.push_back(name + "_scale_inv");
  }
  if (size_t hash = words[2].find('#'); hash != std::string::npos) {
    // `#KIND%G[z]`: int4 weights dequantized in groups of G (1..999) by
    // NAME_scale (and NAME_zero with `z`): int4_scales, int4_zeros, group.
    const size_t pct = words[2].find('%', hash);
    const std::string kind = words[2].substr(hash + 1, pct == std::string::npos
                                                           ? std::string::npos
                                                           : pct - hash - 1);
    if (pct != std::string::npos) {
      std::string group = words[2].substr(pct + 1);
      const bool zeros = !group.empty() && group.back() == 'z';
      if (zeros)
        group.pop_back();
      if (group.empty() || group.size() > 3 ||
          group.find_first_not_of("0123456789") != std::string::npos)
        return;
      spec.group = std::stoll(group);
      for (const std::string &name : spec.names) {
        spec.int4Scales.push_back(name + "_scale");
        if (zeros)
          spec.int4Zeros.push_back(name + "_zero");
      }
    }
    for (Int4Packing p : {Int4Packing::Gptq, Int4Packing::GptqZeros, Int4Packing::Awq,
                          Int4Packing::PackQuantized})
      if (kind == int4PackingName(p))
        spec.int4 = p;
    if (spec.int4 == Int4Packing::None)
      return;
  }
  arg.param = spec.describe();
  arg.checkpoint = spec;

  // The files: "\n=== NAME\n" then the bytes up to the next such line.
  const std::string &dir = scratchDir();
  std::vector<std::string> written, sources;
  static constexpr std::string_view sep = "\n=== ";
  size_t pos = eol == std::string_view::npos ? text.size() : eol;
  while (pos < text.size() && text.substr(pos, sep.size()) == sep &&
         written.size() < 8) {
    size_t nameEnd = text.find('\n', pos + sep.size());
    if (nameEnd == std::string_view::npos)
      break;
    std::string name(text.substr(pos + sep.size(), nameEnd - pos - sep.size()));
    size_t next = text.find(sep, nameEnd + 1);
    if (next == std::string_view::npos)
      next = text.size();
    bool plain = !name.empty() && name.size() <= 64 && name[0] != '.' &&
                 name.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                                        "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789._-") == std::string::npos;
    if (plain) {
      std::string path = dir + "/" + name;
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(text.data() + nameEnd + 1,
                static_cast<std::streamsize>(next - nameEnd - 1));
      out.close();
      written.push_back(path);
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0)
        sources.push_back(path);
    }
    pos = next;
  }
  if (sources.empty())
    sources = written;
  TensorStore store;
  bool added = true;
  for (const std::string &path : sources) {
    Status status = store.add(path);
    if (!status) {
      if (status.error().empty())
        finding("checkpoint: add() failed without a message");
      added = false;
      break;
    }
  }
  if (added) {
    Result<std::vector<int64_t>> assembled =
        moe::run::checkpointArgumentShape(store, arg);
    if (!assembled) {
      if (assembled.error().empty())
        finding("checkpoint: shape refused without a message");
    } else if (!moe::run::shapeFits(arg.shape, *assembled)) {
      finding("checkpoint: assembled shape " + formatShape(*assembled) +
              " does not fit " + arg.typeString);
    } else if (Status ok = moe::run::checkAssembledArgument(arg, *assembled);
               ok) {
      std::optional<int64_t> count = shapeNumElements(*assembled);
      if (!count)
        finding("checkpoint: an accepted shape overflows");
      uint64_t bytes = uint64_t(*count) * elementSize(arg.dtype);
      if (bytes <= kMaxBoundBytes) {
        // Twice: assembly is deterministic and writes exactly its bytes
        // (the guard bytes after the buffer stay as they were).
        std::vector<uint8_t> first(bytes + 16, 0xa5), second(bytes + 16, 0x5a);
        Status a = assembleCheckpointTensor(store, spec, *assembled,
                                            arg.dtype, first.data());
        Status b = assembleCheckpointTensor(store, spec, *assembled,
                                            arg.dtype, second.data());
        if (a.ok() != b.ok())
          finding("checkpoint: assembly is not deterministic");
        if (a.ok()) {
          if (std::memcmp(first.data(), second.data(), bytes) != 0)
            finding("checkpoint: two assemblies differ");
          for (size_t i = 0; i < 16; ++i)
            if (first[bytes + i] != 0xa5 || second[bytes + i] != 0x5a)
              finding("checkpoint: assembly wrote past the tensor");
        } else if (a.error().empty()) {
          finding("checkpoint: assembly failed without a message");
        }
      }
    } else if (ok.error().empty()) {
      finding("checkpoint: refusal without a message");
    }
  }
  for (const std::string &path : written)
    ::unlink(path.c_str());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 20))
    return 0;
  fuzzNpy(data, size);
  fuzzInputBinding(data, size, hashBytes(data, size));
  fuzzSafeTensors(data, size);
  fuzzJson(data, size);
  fuzzCheckpoint(data, size);
  return 0;
}
