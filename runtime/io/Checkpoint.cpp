//===- Checkpoint.cpp - Tensors of several safetensors files --------------===//

#include "runtime/io/Checkpoint.h"
#include "runtime/io/Internal.h"
#include "runtime/io/Json.h"
#include "runtime/io/Quantized.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sys/stat.h>

namespace moe {
namespace io {

namespace {

using detail::displayPath;
using detail::quote;

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.substr(s.size() - suffix.size()) == suffix;
}

std::string joinPath(const std::string &dir, const std::string &name) {
  if (dir.empty() || dir == ".")
    return name;
  if (dir.back() == '/')
    return dir + name;
  return dir + "/" + name;
}

std::string parentDir(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

/// A shape with '?' for dynamic dimensions: "[8, ?, 16]".
std::string formatShapeDynamic(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += shape[i] == kDynamicDim ? std::string("?") : std::to_string(shape[i]);
  }
  return s + "]";
}

float loadFloat(DType dtype, const uint8_t *base, uint64_t index) {
  switch (dtype) {
  case DType::F32: {
    float v;
    std::memcpy(&v, base + 4 * index, 4);
    return v;
  }
  case DType::F16: {
    uint16_t h;
    std::memcpy(&h, base + 2 * index, 2);
    return halfBitsToFloat(h);
  }
  case DType::BF16: {
    uint16_t h;
    std::memcpy(&h, base + 2 * index, 2);
    return bfloat16BitsToFloat(h);
  }
  default:
    return 0.0f;
  }
}

void storeFloat(DType dtype, uint8_t *base, uint64_t index, float v) {
  switch (dtype) {
  case DType::F32:
    std::memcpy(base + 4 * index, &v, 4);
    return;
  case DType::F16: {
    uint16_t h = floatToHalfBits(v);
    std::memcpy(base + 2 * index, &h, 2);
    return;
  }
  case DType::BF16: {
    uint16_t h = floatToBFloat16Bits(v);
    std::memcpy(base + 2 * index, &h, 2);
    return;
  }
  default:
    return;
  }
}

/// Stores `v` into element `index` of `base` (type `dtype`: F32, F16 or
/// BF16) rounded once to nearest even (F16/BF16 through f32 rounded to odd,
/// as for float64 .npy data).
inline void storeDoubleRounded(DType dtype, uint8_t *base, uint64_t index,
                               double v) {
  storeFloat(dtype, base, index,
             dtype == DType::F32 ? static_cast<float>(v)
                                 : detail::roundToOddF32(v));
}

/// Copies element `from` of `src` (type `srcType`) to element `to` of `dst`
/// (type `dstType`).
inline void copyElement(DType srcType, const uint8_t *src, uint64_t from,
                        DType dstType, uint8_t *dst, uint64_t to) {
  if (srcType == dstType) {
    size_t n = elementSize(srcType);
    std::memcpy(dst + n * to, src + n * from, n);
    return;
  }
  storeFloat(dstType, dst, to, loadFloat(srcType, src, from));
}

} // namespace

//===----------------------------------------------------------------------===//
// Index
//===----------------------------------------------------------------------===//

Result<std::map<std::string, std::string>>
parseSafeTensorsIndex(std::string_view text, std::string_view name) {
  json::Document doc;
  json::ParseError parseError;
  if (!doc.parse(text, parseError))
    return detail::fileError(name, "invalid JSON at byte " +
                                       std::to_string(parseError.offset) +
                                       ": " + parseError.message);
  json::Value root = doc.root();
  if (!root.isObject())
    return detail::fileError(name, "an index must be a JSON object");
  std::optional<json::Value> map = root.find("weight_map");
  if (!map || !map->isObject())
    return detail::fileError(name,
                             "an index needs a \"weight_map\" object mapping "
                             "tensor names to shard files");
  std::map<std::string, std::string> result;
  for (size_t i = 0; i < map->size(); ++i) {
    std::string tensor(map->keyAt(i));
    json::Value shard = map->at(i);
    if (!shard.isString() || shard.asString().empty())
      return detail::fileError(name, "weight_map entry " + quote(tensor) +
                                         " must be a non-empty string "
                                         "naming a shard file");
    std::string file(shard.asString());
    bool bad = file.front() == '/' || file.find('\0') != std::string::npos;
    for (size_t pos = 0; !bad && pos <= file.size();) {
      size_t end = file.find('/', pos);
      if (end == std::string::npos)
        end = file.size();
      if (file.compare(pos, end - pos, "..") == 0 && end - pos == 2)
        bad = true;
      pos = end + 1;
    }
    if (bad)
      return detail::fileError(name, "weight_map entry " + quote(tensor) +
                                         " names shard " + quote(file) +
                                         ", which is not a relative path "
                                         "inside the checkpoint");
    result.emplace(std::move(tensor), std::move(file));
  }
  return result;
}

//===----------------------------------------------------------------------===//
// TensorStore
//===----------------------------------------------------------------------===//

Status TensorStore::add(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return detail::fileError(path,
                             std::string("cannot open: ") + strerror(errno));

  // The safetensors files of this source, and (for an index) the tensor ->
  // shard map to check them against.
  std::vector<std::string> filePaths;
  std::string indexPath;
  std::map<std::string, std::string> weightMap;
  std::map<std::string, std::string> shardPathOf; // shard name -> path
  if (S_ISDIR(st.st_mode)) {
    std::string index = joinPath(path, "model.safetensors.index.json");
    std::string single = joinPath(path, "model.safetensors");
    struct stat s2;
    if (::stat(index.c_str(), &s2) == 0)
      indexPath = index;
    else if (::stat(single.c_str(), &s2) == 0)
      filePaths.push_back(single);
    else
      return detail::fileError(path, "checkpoint directory has neither "
                                     "model.safetensors.index.json nor "
                                     "model.safetensors");
  } else if (endsWith(path, ".json")) {
    indexPath = path;
  } else {
    filePaths.push_back(path);
  }

  if (!indexPath.empty()) {
    auto bytes = readFileBytes(indexPath);
    if (!bytes)
      return bytes.status();
    std::string_view text(reinterpret_cast<const char *>(bytes->data()),
                          bytes->size());
    auto map = parseSafeTensorsIndex(text, indexPath);
    if (!map)
      return map.status();
    weightMap = map.take();
    if (weightMap.empty())
      return detail::fileError(indexPath, "weight_map is empty");
    std::string dir = parentDir(indexPath);
    for (const auto &[tensor, shard] : weightMap) {
      if (shardPathOf.count(shard))
        continue;
      std::string shardPath = joinPath(dir, shard);
      shardPathOf.emplace(shard, shardPath);
      filePaths.push_back(shardPath);
    }
  }

  // Open and validate every file before touching the store.
  std::vector<OpenedFile> opened;
  std::vector<std::string> openedPaths;
  for (const std::string &filePath : filePaths) {
    struct stat fs;
    bool haveStat = ::stat(filePath.c_str(), &fs) == 0;
    if (haveStat) {
      auto same = [&](const OpenedFile &f) {
        return f.device == static_cast<uint64_t>(fs.st_dev) &&
               f.inode == static_cast<uint64_t>(fs.st_ino);
      };
      if (std::any_of(files.begin(), files.end(), same) ||
          std::any_of(opened.begin(), opened.end(), same))
        continue;
    }
    auto file = SafeTensorsFile::open(filePath);
    if (!file) {
      if (!indexPath.empty())
        return Error{displayPath(indexPath) + ": shard " + file.error()};
      return file.status();
    }
    OpenedFile entry;
    entry.file = std::make_unique<SafeTensorsFile>(file.take());
    if (haveStat) {
      entry.device = static_cast<uint64_t>(fs.st_dev);
      entry.inode = static_cast<uint64_t>(fs.st_ino);
    }
    opened.push_back(std::move(entry));
    openedPaths.push_back(filePath);
  }

  // The index must agree with its shards.
  for (const auto &[tensor, shard] : weightMap) {
    const std::string &shardPath = shardPathOf[shard];
    const SafeTensorsFile *file = nullptr;
    for (size_t i = 0; i < opened.size(); ++i)
      if (openedPaths[i] == shardPath)
        file = opened[i].file.get();
    if (!file) // Already in the store through another source.
      for (const OpenedFile &f : files)
        if (f.file->path() == shardPath)
          file = f.file.get();
    if (file && !file->contains(tensor))
      return Error{displayPath(indexPath) + ": tensor " + quote(tensor) +
                   " is mapped to " + displayPath(shardPath) +
                   ", which does not define it"};
  }

  // No name may be defined twice.
  std::map<std::string, Entry, std::less<>> added;
  for (const OpenedFile &f : opened) {
    for (const SafeTensorInfo &info : f.file->tensors()) {
      const Entry *previous = find(info.name);
      auto it = added.find(info.name);
      if (!previous && it != added.end())
        previous = &it->second;
      if (previous)
        return Error{"tensor " + quote(info.name) + " is defined in both " +
                     displayPath(previous->file->path()) + " and " +
                     displayPath(f.file->path())};
      added.emplace(info.name, Entry{f.file.get(), &info});
    }
  }

  for (auto &entry : added)
    byName.insert(std::move(entry));
  for (OpenedFile &f : opened)
    files.push_back(std::move(f));
  sources.push_back(path);
  return Status::success();
}

const TensorStore::Entry *TensorStore::find(std::string_view name) const {
  auto it = byName.find(name);
  return it == byName.end() ? nullptr : &it->second;
}

std::string TensorStore::describeSources() const {
  std::string s;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (i)
      s += ", ";
    s += displayPath(sources[i]);
  }
  return s.empty() ? std::string("(no --params)") : s;
}

//===----------------------------------------------------------------------===//
// CheckpointSpec
//===----------------------------------------------------------------------===//

bool CheckpointSpec::perExpert() const {
  return std::any_of(names.begin(), names.end(), [](const std::string &n) {
    return n.find("{e}") != std::string::npos;
  });
}

std::string CheckpointSpec::expand(std::string_view pattern, int64_t expert) {
  std::string out;
  std::string index = std::to_string(expert);
  for (size_t i = 0; i < pattern.size();) {
    if (pattern.compare(i, 3, "{e}") == 0) {
      out += index;
      i += 3;
    } else {
      out += pattern[i++];
    }
  }
  return out;
}

std::string CheckpointSpec::describe() const {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i)
      s += " ++ ";
    s += quote(names[i], 200);
  }
  if (transpose)
    s += " (transposed)";
  if (!fp8Scales.empty())
    s += " (FP8, dequantized in blocks of " + std::to_string(blockN) + " x " +
         std::to_string(blockK) + ")";
  if (int4 != Int4Packing::None && !int4Scales.empty())
    s += std::string(" (int4, ") + int4PackingName(int4) + ", dequantized in groups of " +
         std::to_string(group) + ")";
  else if (int4 != Int4Packing::None)
    s += std::string(" (int4 codes unpacked: ") + int4PackingName(int4) + ")";
  return s;
}

//===----------------------------------------------------------------------===//
// Assembly
//===----------------------------------------------------------------------===//

namespace {

/// One tensor of one expert, as it enters the concatenation.
struct Part {
  std::string name;
  const TensorStore::Entry *entry = nullptr;
  std::vector<int64_t> shape; ///< after the transposition
  /// With fp8_scales: the scale tensor of this FP8 weight. With
  /// int4_scales: its scales, and its zero points (null: none).
  const TensorStore::Entry *scale = nullptr;
  const TensorStore::Entry *zeros = nullptr;
};

/// The codes of an int4 weight packed as `packing` (#moe.checkpoint
/// int4_scales): the unpacking of its zero points, and whether the unpacked
/// codes are [out, in] (compressed-tensors) rather than [in, out].
Int4Packing int4ZeroPacking(Int4Packing packing) {
  return packing == Int4Packing::Gptq ? Int4Packing::GptqZeros
         : packing == Int4Packing::Awq ? Int4Packing::Awq
                                       : Int4Packing::Gptq;
}
bool int4OutMajor(Int4Packing packing) { return packing == Int4Packing::PackQuantized; }

/// The tensor of `names[index]` (with `{e}` = `expert`, unless it is -1)
/// that goes with the weight `weight` (its `what`: "scales", "zero
/// points"), or an error naming both.
Result<const TensorStore::Entry *> findCompanion(const TensorStore &store,
                                                 const std::vector<std::string> &names,
                                                 size_t index, int64_t expert, const char *what,
                                                 const std::string &weight,
                                                 std::string_view subject) {
  std::string name = expert < 0 ? names[index] : CheckpointSpec::expand(names[index], expert);
  if (const TensorStore::Entry *found = store.find(name))
    return found;
  return Error{"tensor " + quote(name, 200) + " (the " + what + " of " + quote(weight, 200) +
               ", for " + std::string(subject) + ") not found in " + store.describeSources()};
}

/// Whether a tensor of dtype `source` assembles into a parameter of dtype
/// `target` (checkpointShape's rules); the reason when it does not.
std::optional<std::string> dtypeMismatch(DType source, DType target) {
  if (target == DType::U8) {
    if (source == DType::U8)
      return std::nullopt;
    return std::string("an i4 parameter takes U8 tensors (one code per byte) or "
                       "int4-packed I32 tensors (#moe.checkpoint int4 = ...)");
  }
  if (source == DType::U8)
    return std::string("U8 tensors (int4 codes) assemble only into an i4 parameter, not ") +
           dtypeName(target);
  if (target == DType::F8E4M3) {
    if (source == DType::F8E4M3)
      return std::nullopt;
    return std::string("an f8E4M3FN parameter takes F8_E4M3 tensors only");
  }
  if (!isFloatType(target))
    return std::string("a parameter of type ") + dtypeName(target) +
           " cannot be assembled";
  if (source == DType::F8E4M3)
    return std::string("F8_E4M3 tensors (FP8 codes, which need their "
                       "scales) assemble only into an f8E4M3FN parameter, "
                       "not ") +
           dtypeName(target);
  return std::nullopt;
}

/// The parts of expert `expert` (-1: not per-expert) and their concatenated
/// shape.
Result<std::vector<int64_t>> expertParts(const TensorStore &store,
                                         const CheckpointSpec &spec,
                                         int64_t expert,
                                         std::string_view subject,
                                         std::vector<Part> *parts,
                                         std::optional<DType> target) {
  std::vector<int64_t> shape;
  std::string firstName;
  const bool dequantize = !spec.fp8Scales.empty();
  if (dequantize && (spec.fp8Scales.size() != spec.names.size() ||
                     spec.blockN < 1 || spec.blockK < 1))
    return Error{std::string(subject) +
                 ": #moe.checkpoint needs one fp8_scales name per tensor and "
                 "a block of two sizes >= 1"};
  if (dequantize && target && !isFloatType(*target))
    return Error{std::string(subject) +
                 ": #moe.checkpoint with fp8_scales dequantizes into f32, "
                 "f16 or bf16, not " +
                 dtypeName(*target)};
  const bool int4Values = !spec.int4Scales.empty();
  if (int4Values &&
      (spec.int4Scales.size() != spec.names.size() || spec.group < 1 || spec.transpose ||
       (!spec.int4Zeros.empty() && spec.int4Zeros.size() != spec.names.size()) ||
       (spec.int4 != Int4Packing::Gptq && spec.int4 != Int4Packing::Awq &&
        spec.int4 != Int4Packing::PackQuantized) ||
       (spec.int4Zeros.empty() && spec.int4 != Int4Packing::PackQuantized)))
    return Error{std::string(subject) +
                 ": #moe.checkpoint int4_scales need one scale (and zero point) name per "
                 "tensor, a group >= 1, no transpose, and int4 = gptq, awq or "
                 "pack_quantized (zero points required but for pack_quantized)"};
  if (int4Values && target && !isFloatType(*target))
    return Error{std::string(subject) +
                 ": #moe.checkpoint with int4_scales dequantizes into f32, f16 or bf16, not " +
                 (*target == DType::U8 ? "i4" : dtypeName(*target))};
  for (size_t index = 0; index < spec.names.size(); ++index) {
    const std::string &pattern = spec.names[index];
    Part part;
    part.name =
        expert < 0 ? pattern : CheckpointSpec::expand(pattern, expert);
    part.entry = store.find(part.name);
    if (!part.entry)
      return Error{"tensor " + quote(part.name, 200) + " (for " +
                   std::string(subject) + ") not found in " +
                   store.describeSources()};
    const SafeTensorInfo &info = *part.entry->info;
    std::string where = "tensor " + quote(part.name, 200) + " in " +
                        displayPath(part.entry->file->path());
    if (int4Values) {
      // The weight, its scales [G, N] ([N, G] out-major) and zero points
      // (packed [G, N/8]; out-major [N/8, G]), G = ceil(K / group).
      if (info.dtype != DType::I32 || info.shape.size() != 2)
        return Error{where + " has dtype " + safetensorsDTypeName(info.dtype) +
                     " and shape " + formatShape(info.shape) + " (for " +
                     std::string(subject) + "): int4_scales dequantize 2-D I32 tensors"};
      std::vector<int64_t> codes = int4UnpackedShape(info.shape, spec.int4);
      const bool outMajor = int4OutMajor(spec.int4);
      const int64_t k = outMajor ? codes[1] : codes[0], n = outMajor ? codes[0] : codes[1];
      const int64_t groups = (k + spec.group - 1) / spec.group;
      auto companion = [&](const std::vector<std::string> &names, const char *what,
                           const std::vector<int64_t> &expected, bool isFloat,
                           const TensorStore::Entry *&found) -> Status {
        auto entry = findCompanion(store, names, index, expert, what, part.name, subject);
        if (!entry)
          return entry.status();
        found = *entry;
        const SafeTensorInfo &zi = *found->info;
        if ((isFloat ? !isFloatType(zi.dtype) : zi.dtype != DType::I32) || zi.shape != expected)
          return Error{"tensor " + quote(zi.name, 200) + " in " +
                       displayPath(found->file->path()) + " has dtype " +
                       safetensorsDTypeName(zi.dtype) + " and shape " + formatShape(zi.shape) +
                       ", expected " + (isFloat ? "F32, BF16 or F16 " : "I32 ") +
                       formatShape(expected) + " (the " + what + " of " +
                       quote(part.name, 200) + ", " + std::to_string(k) + " inputs x " +
                       std::to_string(n) + " outputs in groups of " +
                       std::to_string(spec.group) + ")"};
        return Status::success();
      };
      if (Status st = companion(spec.int4Scales, "scales",
                                outMajor ? std::vector<int64_t>{n, groups}
                                         : std::vector<int64_t>{groups, n},
                                true, part.scale);
          !st)
        return st;
      if (!spec.int4Zeros.empty()) {
        if (n % 8 != 0)
          return Error{where + " (for " + std::string(subject) + "): " + std::to_string(n) +
                       " outputs, not a multiple of 8, cannot have packed zero points"};
        if (Status st = companion(spec.int4Zeros, "zero points",
                                  outMajor ? std::vector<int64_t>{n / 8, groups}
                                           : std::vector<int64_t>{groups, n / 8},
                                  false, part.zeros);
            !st)
          return st;
      }
    } else if (spec.int4 != Int4Packing::None) {
      if (info.dtype != DType::I32 || info.shape.size() != 2)
        return Error{where + " has dtype " + safetensorsDTypeName(info.dtype) +
                     " and shape " + formatShape(info.shape) + " (for " +
                     std::string(subject) + "): int4 = " + int4PackingName(spec.int4) +
                     " unpacks 2-D I32 tensors"};
      if (target && *target != DType::U8)
        return Error{where + " (for " + std::string(subject) + "): int4 = " +
                     int4PackingName(spec.int4) + " unpacks codes into an i4 parameter, not " +
                     dtypeName(*target)};
    } else if (!isFloatType(info.dtype) && info.dtype != DType::F8E4M3 &&
               info.dtype != DType::U8) {
      return Error{where + " has dtype " +
                   safetensorsDTypeName(info.dtype) + "; parameters need " +
                   "F32, F16, BF16, F8_E4M3 or U8 (int4 codes), or int4 = ... for packed I32"};
    } else if (dequantize) {
      if (info.dtype != DType::F8E4M3 || info.shape.size() != 2)
        return Error{where + " has dtype " + safetensorsDTypeName(info.dtype) +
                     " and shape " + formatShape(info.shape) + " (for " +
                     std::string(subject) +
                     "): fp8_scales dequantize 2-D F8_E4M3 tensors"};
      auto scale = findCompanion(store, spec.fp8Scales, index, expert, "scales", part.name,
                                 subject);
      if (!scale)
        return scale.status();
      part.scale = *scale;
      const SafeTensorInfo &sinfo = *part.scale->info;
      const std::string &scaleName = sinfo.name;
      std::vector<int64_t> expected{
          (info.shape[0] + spec.blockN - 1) / spec.blockN,
          (info.shape[1] + spec.blockK - 1) / spec.blockK};
      if (!isFloatType(sinfo.dtype) || sinfo.shape != expected)
        return Error{"tensor " + quote(scaleName, 200) + " in " +
                     displayPath(part.scale->file->path()) + " has dtype " +
                     safetensorsDTypeName(sinfo.dtype) + " and shape " +
                     formatShape(sinfo.shape) + ", expected F32, BF16 or F16 " +
                     formatShape(expected) + " (the scales of " +
                     quote(part.name, 200) + " " + formatShape(info.shape) +
                     " in blocks of " + std::to_string(spec.blockN) + " x " +
                     std::to_string(spec.blockK) + ")"};
    } else if (target) {
      if (std::optional<std::string> why = dtypeMismatch(info.dtype, *target))
        return Error{where + " has dtype " +
                     safetensorsDTypeName(info.dtype) + " (for " +
                     std::string(subject) + "): " + *why};
    }
    // int4: the shape of the unpacked codes, one per byte; dequantized
    // int4 weights: [in, out].
    part.shape = spec.int4 == Int4Packing::None ? info.shape
                                                : int4UnpackedShape(info.shape, spec.int4);
    if (int4Values && int4OutMajor(spec.int4))
      std::swap(part.shape[0], part.shape[1]);
    if (spec.transpose) {
      // The last two dimensions; leading ones (a fused [E, out, in] expert
      // tensor's E) are a batch of matrices.
      const size_t rank = part.shape.size();
      if (rank < 2)
        return Error{where + " has shape " + formatShape(info.shape) +
                     "; transpose needs a tensor of 2 or more dimensions"};
      std::swap(part.shape[rank - 2], part.shape[rank - 1]);
    }
    if (shape.empty() && firstName.empty()) {
      shape = part.shape;
      firstName = part.name;
    } else {
      bool fits = !shape.empty() && part.shape.size() == shape.size() &&
                  std::equal(shape.begin(), shape.end() - 1,
                             part.shape.begin());
      if (!fits)
        return Error{where + " has shape " + formatShape(info.shape) +
                     (spec.transpose ? " (transposed: " +
                                           formatShape(part.shape) + ")"
                                     : std::string()) +
                     ", which cannot be concatenated along the last "
                     "dimension with " +
                     quote(firstName, 200) + " (" + formatShape(shape) + ")"};
      shape.back() += part.shape.back();
    }
    if (parts)
      parts->push_back(std::move(part));
  }
  return shape;
}

} // namespace

std::vector<int64_t> int4UnpackedShape(const std::vector<int64_t> &shape,
                                       Int4Packing packing) {
  std::vector<int64_t> out = shape;
  (packing == Int4Packing::Gptq ? out.at(0) : out.at(1)) *= 8;
  return out;
}

const char *int4PackingName(Int4Packing packing) {
  switch (packing) {
  case Int4Packing::None:
    return "none";
  case Int4Packing::Gptq:
    return "gptq";
  case Int4Packing::GptqZeros:
    return "gptq_zeros";
  case Int4Packing::Awq:
    return "awq";
  case Int4Packing::PackQuantized:
    return "pack_quantized";
  }
  return "?";
}

Result<std::vector<uint8_t>> unpackInt4(const uint8_t *data, const std::vector<int64_t> &shape,
                                        Int4Packing packing, std::string_view name) {
  static const int awqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  const uint64_t rows = uint64_t(shape.at(0)), cols = uint64_t(shape.at(1));
  std::vector<uint8_t> out(rows * cols * 8);
  auto word = [&](uint64_t i) {
    uint32_t w;
    std::memcpy(&w, data + 4 * i, 4);
    return w;
  };
  if (packing == Int4Packing::Gptq) {
    // [rows, cols] words -> [8 rows, cols] codes.
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t c = 0; c < cols; ++c) {
        uint32_t w = word(r * cols + c);
        for (uint64_t p = 0; p < 8; ++p)
          out[(8 * r + p) * cols + c] = uint8_t((w >> (4 * p)) & 15);
      }
    return out;
  }
  // Along the columns: [rows, cols] words -> [rows, 8 cols] codes.
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c) {
      uint32_t w = word(r * cols + c);
      for (int p = 0; p < 8; ++p) {
        uint32_t q = (w >> (4 * p)) & 15;
        uint64_t column = 8 * c + uint64_t(packing == Int4Packing::Awq ? awqOrder[p] : p);
        if (packing == Int4Packing::GptqZeros) {
          if (q == 15)
            return Error{"tensor " + quote(name, 200) + ": zero point of row " +
                         std::to_string(r) + ", column " + std::to_string(column) +
                         " is stored as 15, so it would be 16 (GPTQ stores it minus "
                         "one), outside an int4 code"};
          ++q;
        }
        out[r * 8 * cols + column] = uint8_t(q);
      }
    }
  return out;
}

Result<std::vector<int64_t>>
checkpointShape(const TensorStore &store, const CheckpointSpec &spec,
                const std::vector<int64_t> &shape, std::string_view subject,
                std::optional<DType> target) {
  if (spec.names.empty())
    return Error{std::string(subject) + ": #moe.checkpoint names no tensor"};
  std::vector<int64_t> result;
  if (spec.perExpert()) {
    if (shape.empty() || shape[0] == kDynamicDim || shape[0] < 1)
      return Error{std::string(subject) +
                   ": #moe.checkpoint with {e} needs a static leading "
                   "dimension (the expert count), got shape " +
                   formatShapeDynamic(shape)};
    int64_t experts = shape[0];
    std::vector<int64_t> first;
    for (int64_t e = 0; e < experts; ++e) {
      std::vector<Part> parts;
      auto s = expertParts(store, spec, e, subject, &parts, target);
      if (!s)
        return s.status();
      if (e == 0) {
        first = s.take();
        continue;
      }
      if (*s != first)
        return Error{"tensor " + quote(parts.front().name, 200) + " in " +
                     displayPath(parts.front().entry->file->path()) +
                     ": expert " + std::to_string(e) + " assembles to " +
                     formatShape(*s) + ", expert 0 to " +
                     formatShape(first) + " (" + std::string(subject) + ")"};
    }
    result.push_back(experts);
    result.insert(result.end(), first.begin(), first.end());
  } else {
    auto s = expertParts(store, spec, -1, subject, nullptr, target);
    if (!s)
      return s.status();
    result = s.take();
  }
  bool fits = result.size() == shape.size();
  for (size_t i = 0; fits && i < shape.size(); ++i)
    fits = shape[i] == kDynamicDim || shape[i] == result[i];
  if (!fits)
    return Error{"checkpoint tensors " + spec.describe() +
                 (spec.perExpert() ? " stacked over " +
                                         std::to_string(result[0]) +
                                         " experts"
                                   : std::string()) +
                 " assemble to shape " + formatShape(result) + ", but " +
                 std::string(subject) + " has shape " +
                 formatShapeDynamic(shape)};
  return result;
}

Status assembleCheckpointTensor(const TensorStore &store,
                                const CheckpointSpec &spec,
                                const std::vector<int64_t> &shape,
                                DType target, uint8_t *out) {
  if (!isFloatType(target) && target != DType::F8E4M3 && target != DType::U8)
    return Error{std::string("checkpoint tensors ") + spec.describe() +
                 ": cannot assemble a parameter of type " +
                 dtypeName(target)};
  const bool perExpert = spec.perExpert();
  const int64_t experts = perExpert ? shape.at(0) : 1;
  std::vector<int64_t> expertShape =
      perExpert ? std::vector<int64_t>(shape.begin() + 1, shape.end())
                : shape;
  uint64_t expertCount = 1;
  for (int64_t d : expertShape)
    expertCount *= static_cast<uint64_t>(d);
  const uint64_t width = expertShape.empty() ? 1 : expertShape.back();
  const uint64_t rows = width ? expertCount / width : 0;
  for (int64_t e = 0; e < experts; ++e) {
    std::vector<Part> parts;
    auto s = expertParts(store, spec, perExpert ? e : -1, "assembly", &parts,
                         target);
    if (!s)
      return s.status();
    if (*s != expertShape)
      return Error{"checkpoint tensors " + spec.describe() +
                   ": shapes changed since they were checked"};
    uint8_t *dst = out + static_cast<uint64_t>(e) * expertCount *
                             elementSize(target);
    uint64_t column = 0;
    for (const Part &part : parts) {
      const SafeTensorInfo &info = *part.entry->info;
      const uint8_t *src = store.rawData(*part.entry);
      DType srcType = info.dtype;
      std::vector<int64_t> srcShape = info.shape;
      const uint64_t partWidth = part.shape.empty() ? 1 : part.shape.back();
      // int4: the codes unpacked, one per byte, then placed as U8 data.
      std::vector<uint8_t> codes;
      if (!spec.int4Scales.empty()) {
        // int4 weight dequantized: (q - z) * s exact in double, rounded
        // once, into [in, out] at columns [column, column + N).
        auto q = unpackInt4(src, info.shape, spec.int4, part.name);
        if (!q)
          return q.status();
        std::vector<uint8_t> zeros;
        if (part.zeros) {
          auto z = unpackInt4(store.rawData(*part.zeros), part.zeros->info->shape,
                              int4ZeroPacking(spec.int4), part.zeros->info->name);
          if (!z)
            return z.status();
          zeros = z.take();
        }
        const bool outMajor = int4OutMajor(spec.int4);
        const uint64_t k = part.shape[0], n = part.shape[1];
        const uint64_t groups = (k + spec.group - 1) / spec.group;
        const SafeTensorInfo &sinfo = *part.scale->info;
        const uint8_t *scales = store.rawData(*part.scale);
        for (uint64_t i = 0; i < k; ++i) {
          const uint64_t g = i / spec.group;
          for (uint64_t j = 0; j < n; ++j) {
            const uint64_t gj = outMajor ? j * groups + g : g * n + j;
            const int code = (*q)[outMajor ? j * k + i : i * n + j];
            const int zero = zeros.empty() ? 8 : zeros[gj];
            const double v = static_cast<double>(code - zero) * loadFloat(sinfo.dtype, scales, gj);
            storeDoubleRounded(target, dst, i * width + column + j, v);
          }
        }
        column += partWidth;
        continue;
      }
      if (spec.int4 != Int4Packing::None) {
        auto unpacked = unpackInt4(src, info.shape, spec.int4, part.name);
        if (!unpacked)
          return unpacked.status();
        codes = unpacked.take();
        src = codes.data();
        srcType = DType::U8;
        srcShape = int4UnpackedShape(info.shape, spec.int4);
      } else if (target == DType::U8) {
        // U8 codes as stored: each byte must be one.
        const uint64_t n = info.dataEnd - info.dataBegin;
        for (uint64_t i = 0; i < n; ++i)
          if (src[i] > 15)
            return Error{"tensor " + quote(part.name, 200) + " in " +
                         displayPath(part.entry->file->path()) + ": element " +
                         std::to_string(i) + " is " + std::to_string(src[i]) +
                         "; an i4 parameter takes one code 0..15 per byte"};
      }
      if (part.scale) {
        // FP8 codes [a, b] times their block's scale, exact in double,
        // rounded once: out(r, column + c) from src(r, c), or from src(c, r)
        // transposed.
        const uint64_t a = info.shape[0], b = info.shape[1];
        const SafeTensorInfo &sinfo = *part.scale->info;
        const uint8_t *scales = store.rawData(*part.scale);
        const uint64_t scaleCols = sinfo.shape[1];
        for (uint64_t i = 0; i < a; ++i)
          for (uint64_t j = 0; j < b; ++j) {
            double s = loadFloat(sinfo.dtype, scales,
                                 (i / spec.blockN) * scaleCols + j / spec.blockK);
            double v = static_cast<double>(fp8E4M3ToFloat(src[i * b + j])) * s;
            uint64_t to = spec.transpose ? j * width + column + i
                                         : i * width + column + j;
            storeDoubleRounded(target, dst, to, v);
          }
      } else if (spec.transpose) {
        // Source [T..., A, B] -> [T..., B, A], each of the T matrices on its
        // own: out(t, r, column + c) = src(t, c, r).
        const size_t rank = srcShape.size();
        const uint64_t a = srcShape[rank - 2], b = srcShape[rank - 1];
        uint64_t batch = 1;
        for (size_t i = 0; i + 2 < rank; ++i)
          batch *= static_cast<uint64_t>(srcShape[i]);
        constexpr uint64_t kBlock = 64;
        for (uint64_t t = 0; t < batch; ++t) {
          const uint64_t from = t * a * b, to = t * b * width;
          for (uint64_t c0 = 0; c0 < a; c0 += kBlock)
            for (uint64_t r0 = 0; r0 < b; r0 += kBlock)
              for (uint64_t c = c0; c < std::min(a, c0 + kBlock); ++c)
                for (uint64_t r = r0; r < std::min(b, r0 + kBlock); ++r)
                  copyElement(srcType, src, from + c * b + r, target, dst,
                              to + r * width + column + c);
        }
      } else if (srcType == target && partWidth == width) {
        std::memcpy(dst, src, expertCount * elementSize(target));
      } else {
        for (uint64_t r = 0; r < rows; ++r)
          for (uint64_t c = 0; c < partWidth; ++c)
            copyElement(srcType, src, r * partWidth + c, target, dst,
                        r * width + column + c);
      }
      column += partWidth;
    }
  }
  return Status::success();
}

} // namespace io
} // namespace moe
