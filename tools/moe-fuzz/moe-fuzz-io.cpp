//===- moe-fuzz-io.cpp - libFuzzer target: .npy, .safetensors, index JSON -===//
//
// Built only with -DMOE_BUILD_FUZZERS=ON (see scripts/fuzz.sh). Each input is
// given, from memory, to
//  * the .npy reader (parseNpy);
//  * the .safetensors reader (SafeTensorsFile::fromBuffer), then every
//    tensor is read (raw and converted to f32/f16/bf16);
//  * the sharded-checkpoint index parser (parseSafeTensorsIndex) and the JSON
//    parser under it (json::Document, whose tree is walked).
// Findings are crashes, sanitizer reports, and round-trip invariants checked
// here (abort with a message on stderr): a tensor a reader accepts validates,
// and writing it back (encodeNpy / encodeSafeTensors) gives bytes the reader
// accepts again with the same dtype, shape and data.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Checkpoint.h"
#include "runtime/io/Json.h"
#include "runtime/io/TensorIO.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <vector>

using namespace moe::io;

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
    tensors.emplace(info.name, tensor.take());
  }
  (void)file->names();
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

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 20))
    return 0;
  fuzzNpy(data, size);
  fuzzSafeTensors(data, size);
  fuzzJson(data, size);
  return 0;
}
