//===- SafeTensors.cpp - .safetensors reader and writer -------------------===//
//
// Format (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of UTF-8 JSON mapping tensor names
// to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the
// data section that follows the header) plus an optional "__metadata__"
// object of strings, then the data section.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Internal.h"
#include "runtime/io/Json.h"
#include "runtime/io/TensorIO.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace moe {
namespace io {

namespace {

/// The reference implementation's limit on the JSON header size.
constexpr uint64_t kMaxHeaderSize = 100000000;

/// Position of a dtype in the reference implementation's Dtype enum, which
/// is ordered by alignment; the writer lays tensors out by descending rank.
int referenceDTypeRank(DType dtype) {
  switch (dtype) {
  case DType::U8:
    return -2;
  case DType::F8E4M3:
    return -1;
  case DType::F16:
    return 0;
  case DType::BF16:
    return 1;
  case DType::I32:
    return 2;
  case DType::F32:
    return 3;
  case DType::I64:
    return 4;
  }
  return 0;
}

} // namespace

//===----------------------------------------------------------------------===//
// Storage: a read-only mapping of the file, or an in-memory copy.
//===----------------------------------------------------------------------===//

struct SafeTensorsFile::Storage {
  std::vector<uint8_t> buffer;
  void *mapped = nullptr;
  size_t mappedSize = 0;

  Storage() = default;
  Storage(const Storage &) = delete;
  Storage &operator=(const Storage &) = delete;
  ~Storage() {
    if (mapped)
      ::munmap(mapped, mappedSize);
  }
  const uint8_t *data() const {
    return mapped ? static_cast<const uint8_t *>(mapped) : buffer.data();
  }
  size_t size() const { return mapped ? mappedSize : buffer.size(); }
};

SafeTensorsFile::SafeTensorsFile() = default;
SafeTensorsFile::SafeTensorsFile(SafeTensorsFile &&other) noexcept = default;
SafeTensorsFile &
SafeTensorsFile::operator=(SafeTensorsFile &&other) noexcept = default;
SafeTensorsFile::~SafeTensorsFile() = default;

Result<SafeTensorsFile> SafeTensorsFile::open(const std::string &path) {
  auto storage = std::make_unique<Storage>();
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0)
    return detail::fileError(path,
                             std::string("cannot open: ") + strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return detail::fileError(path,
                             std::string("cannot stat: ") + strerror(err));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return detail::fileError(path,
                             std::string("cannot read: ") + strerror(EISDIR));
  }
  if (S_ISREG(st.st_mode) && st.st_size > 0 &&
      static_cast<uint64_t>(st.st_size) <= static_cast<uint64_t>(SIZE_MAX)) {
    size_t size = static_cast<size_t>(st.st_size);
    void *p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      storage->mapped = p;
      storage->mappedSize = size;
    }
  }
  ::close(fd);
  if (!storage->mapped) {
    // Empty, special or unmappable file: read it instead.
    Result<std::vector<uint8_t>> bytes = readFileBytes(path);
    if (!bytes)
      return bytes.status();
    storage->buffer = bytes.take();
  }
  return validate(std::move(storage), path);
}

Result<SafeTensorsFile> SafeTensorsFile::fromBuffer(std::vector<uint8_t> bytes,
                                                    std::string name) {
  auto storage = std::make_unique<Storage>();
  storage->buffer = std::move(bytes);
  return validate(std::move(storage), std::move(name));
}

//===----------------------------------------------------------------------===//
// Header validation
//===----------------------------------------------------------------------===//

Result<SafeTensorsFile>
SafeTensorsFile::validate(std::unique_ptr<Storage> storage, std::string name) {
  auto err = [&](const std::string &what) {
    return detail::fileError(name, what);
  };
  const uint8_t *bytes = storage->data();
  const size_t size = storage->size();
  if (size < 8)
    return err("file too small for a safetensors header (" +
               std::to_string(size) + " bytes)");
  const uint64_t headerLength = detail::readLE64(bytes);
  if (headerLength > size - 8)
    return err("header length " + std::to_string(headerLength) +
               " exceeds the file size (" + std::to_string(size) + " bytes)");
  if (headerLength > kMaxHeaderSize)
    return err("header length " + std::to_string(headerLength) +
               " exceeds the limit of " + std::to_string(kMaxHeaderSize) +
               " bytes");
  const uint64_t dataStart = 8 + headerLength;
  const uint64_t dataSize = size - dataStart;

  std::string_view text(reinterpret_cast<const char *>(bytes) + 8,
                        static_cast<size_t>(headerLength));
  json::Document doc;
  json::ParseError parseError;
  if (!doc.parse(text, parseError))
    return err("invalid JSON header: " + parseError.message + " (file offset " +
               std::to_string(8 + parseError.offset) + ")");
  json::Value root = doc.root();
  if (!root.isObject())
    return err("invalid header: the JSON header is not an object");

  SafeTensorsFile file;
  file.filePath = name;
  file.dataStart = dataStart;
  file.entries.reserve(root.size());

  for (size_t i = 0, e = root.size(); i < e; ++i) {
    std::string_view key = root.keyAt(i);
    json::Value value = root.at(i);

    if (key == "__metadata__") {
      if (!value.isObject())
        return err("invalid header: '__metadata__' is not an object");
      for (size_t j = 0, je = value.size(); j < je; ++j) {
        if (!value.at(j).isString())
          return err("invalid header: '__metadata__' value for key " +
                     detail::quote(value.keyAt(j)) + " is not a string");
        file.metadataMap.emplace(std::string(value.keyAt(j)),
                                 std::string(value.at(j).asString()));
      }
      continue;
    }

    const std::string tensor = "tensor " + detail::quote(key);
    if (!value.isObject())
      return err(tensor + ": header entry is not a JSON object");

    SafeTensorInfo info;
    info.name = std::string(key);

    std::optional<json::Value> field = value.find("dtype");
    if (!field)
      return err(tensor + ": missing 'dtype'");
    if (!field->isString())
      return err(tensor + ": 'dtype' is not a string");
    std::string_view dtypeText = field->asString();
    std::optional<DType> dtype;
    for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I32,
                    DType::I64, DType::F8E4M3, DType::U8})
      if (dtypeText == safetensorsDTypeName(d))
        dtype = d;
    if (!dtype)
      return err(tensor + ": unsupported dtype " + detail::quote(dtypeText) +
                 " (supported: F32, F16, BF16, I32, I64, F8_E4M3, U8)");
    info.dtype = *dtype;

    field = value.find("shape");
    if (!field)
      return err(tensor + ": missing 'shape'");
    if (!field->isArray())
      return err(tensor + ": 'shape' is not an array");
    info.shape.reserve(field->size());
    for (size_t j = 0, je = field->size(); j < je; ++j) {
      uint64_t dim;
      if (!field->at(j).getUInt64(dim))
        return err(tensor + ": 'shape' entries must be non-negative integers");
      if (dim > static_cast<uint64_t>(INT64_MAX))
        return err(tensor + ": shape dimension " + std::to_string(dim) +
                   " is too large");
      info.shape.push_back(static_cast<int64_t>(dim));
    }

    field = value.find("data_offsets");
    if (!field)
      return err(tensor + ": missing 'data_offsets'");
    uint64_t begin, end;
    if (!field->isArray() || field->size() != 2 ||
        !field->at(0).getUInt64(begin) || !field->at(1).getUInt64(end))
      return err(tensor + ": 'data_offsets' must be [begin, end] with "
                          "non-negative integers");
    if (begin > end)
      return err(tensor + ": data_offsets begin " + std::to_string(begin) +
                 " is after end " + std::to_string(end));
    if (end > dataSize)
      return err(tensor + ": data_offsets end " + std::to_string(end) +
                 " exceeds the data section size (" + std::to_string(dataSize) +
                 " bytes)");
    info.dataBegin = begin;
    info.dataEnd = end;

    uint64_t count, needed;
    if (!detail::checkedNumElements(info.shape, count) ||
        !detail::checkedMul(count, elementSize(info.dtype), needed))
      return err(tensor + ": shape " + formatShape(info.shape) +
                 " is too large (element count overflows)");
    if (end - begin != needed)
      return err(tensor + ": data_offsets span " + std::to_string(end - begin) +
                 " bytes but shape " + formatShape(info.shape) + " of " +
                 safetensorsDTypeName(info.dtype) + " needs " +
                 std::to_string(needed));
    file.entries.push_back(std::move(info));
  }

  // No two tensors may share bytes (empty tensors occupy none).
  std::vector<const SafeTensorInfo *> byOffset;
  byOffset.reserve(file.entries.size());
  for (const SafeTensorInfo &info : file.entries)
    if (info.dataEnd > info.dataBegin)
      byOffset.push_back(&info);
  std::sort(byOffset.begin(), byOffset.end(),
            [](const SafeTensorInfo *a, const SafeTensorInfo *b) {
              if (a->dataBegin != b->dataBegin)
                return a->dataBegin < b->dataBegin;
              return a->name < b->name;
            });
  for (size_t i = 1; i < byOffset.size(); ++i) {
    const SafeTensorInfo *prev = byOffset[i - 1], *cur = byOffset[i];
    if (cur->dataBegin < prev->dataEnd)
      return err("tensors " + detail::quote(prev->name) + " and " +
                 detail::quote(cur->name) + " overlap (bytes [" +
                 std::to_string(prev->dataBegin) + ", " +
                 std::to_string(prev->dataEnd) + ") and [" +
                 std::to_string(cur->dataBegin) + ", " +
                 std::to_string(cur->dataEnd) + "))");
  }

  std::sort(file.entries.begin(), file.entries.end(),
            [](const SafeTensorInfo &a, const SafeTensorInfo &b) {
              return a.name < b.name;
            });
  file.storage = std::move(storage);
  return file;
}

//===----------------------------------------------------------------------===//
// Access
//===----------------------------------------------------------------------===//

std::vector<std::string> SafeTensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(entries.size());
  for (const SafeTensorInfo &info : entries)
    out.push_back(info.name);
  return out;
}

const SafeTensorInfo *SafeTensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(
      entries.begin(), entries.end(), name,
      [](const SafeTensorInfo &a, std::string_view n) { return a.name < n; });
  if (it == entries.end() || it->name != name)
    return nullptr;
  return &*it;
}

const uint8_t *SafeTensorsFile::rawData(const SafeTensorInfo &info) const {
  return storage->data() + dataStart + info.dataBegin;
}

Result<Tensor> SafeTensorsFile::get(std::string_view name) const {
  const SafeTensorInfo *info = find(name);
  if (!info)
    return detail::fileError(filePath,
                             "no tensor named " + detail::quote(name, 256));
  const uint8_t *begin = rawData(*info);
  // Validated when the file was opened: the range lies inside the file.
  return Tensor(
      info->dtype, info->shape,
      std::vector<uint8_t>(begin, begin + (info->dataEnd - info->dataBegin)));
}

Result<Tensor> SafeTensorsFile::get(std::string_view name, DType target) const {
  Result<Tensor> tensor = get(name);
  if (!tensor)
    return tensor;
  if (tensor->dtype == target)
    return tensor;
  Result<Tensor> converted = convertTensor(*tensor, target);
  if (!converted)
    return detail::fileError(filePath, "tensor " + detail::quote(name) + ": " +
                                           converted.error());
  return converted;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

namespace {

struct Prepared {
  std::string header; ///< JSON, padded to a multiple of 8 bytes
  std::vector<const Tensor *> order;
};

Result<Prepared> prepare(const std::map<std::string, Tensor> &tensors,
                         const std::map<std::string, std::string> &metadata,
                         std::string_view name) {
  Prepared p;
  std::vector<std::pair<const std::string *, const Tensor *>> order;
  order.reserve(tensors.size());
  for (const auto &[tensorName, tensor] : tensors) {
    if (tensorName == "__metadata__")
      return detail::fileError(
          name, "'__metadata__' is reserved and cannot name a tensor");
    std::string context =
        detail::displayPath(name) + ": tensor " + detail::quote(tensorName);
    if (Status s = tensor.validate(context); !s)
      return s;
    order.emplace_back(&tensorName, &tensor);
  }
  // Names are unique, so this order is total.
  std::sort(order.begin(), order.end(), [](const auto &a, const auto &b) {
    int ra = referenceDTypeRank(a.second->dtype);
    int rb = referenceDTypeRank(b.second->dtype);
    if (ra != rb)
      return ra > rb;
    return *a.first < *b.first;
  });

  std::string &h = p.header;
  h = "{";
  bool first = true;
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    for (const auto &[key, value] : metadata) {
      if (!first)
        h += ",";
      first = false;
      json::appendQuoted(h, key);
      h += ":";
      json::appendQuoted(h, value);
    }
    h += "}";
    first = false;
  }
  uint64_t offset = 0;
  for (const auto &[tensorName, tensor] : order) {
    if (!first)
      h += ",";
    first = false;
    json::appendQuoted(h, *tensorName);
    h += ":{\"dtype\":\"";
    h += safetensorsDTypeName(tensor->dtype);
    h += "\",\"shape\":[";
    for (size_t i = 0; i < tensor->shape.size(); ++i) {
      if (i)
        h += ",";
      h += std::to_string(tensor->shape[i]);
    }
    h += "],\"data_offsets\":[";
    h += std::to_string(offset);
    h += ",";
    offset += tensor->data.size();
    h += std::to_string(offset);
    h += "]}";
    p.order.push_back(tensor);
  }
  h += "}";
  h.append((8 - h.size() % 8) % 8, ' ');
  return p;
}

} // namespace

Result<std::vector<uint8_t>>
encodeSafeTensors(const std::map<std::string, Tensor> &tensors,
                  const std::map<std::string, std::string> &metadata,
                  std::string_view name) {
  Result<Prepared> p = prepare(tensors, metadata, name);
  if (!p)
    return p.status();
  size_t total = 8 + p->header.size();
  for (const Tensor *t : p->order)
    total += t->data.size();
  std::vector<uint8_t> out;
  out.reserve(total);
  std::string prefix;
  detail::appendLE(prefix, p->header.size(), 8);
  out.insert(out.end(), prefix.begin(), prefix.end());
  out.insert(out.end(), p->header.begin(), p->header.end());
  for (const Tensor *t : p->order)
    out.insert(out.end(), t->data.begin(), t->data.end());
  return out;
}

Status writeSafeTensors(const std::string &path,
                        const std::map<std::string, Tensor> &tensors,
                        const std::map<std::string, std::string> &metadata) {
  Result<Prepared> p = prepare(tensors, metadata, path);
  if (!p)
    return p.status();
  std::string prefix;
  detail::appendLE(prefix, p->header.size(), 8);
  detail::FileWriter writer(path);
  writer.write(prefix.data(), prefix.size());
  writer.write(p->header.data(), p->header.size());
  for (const Tensor *t : p->order)
    writer.write(t->data.data(), t->data.size());
  return writer.close();
}

} // namespace io
} // namespace moe
