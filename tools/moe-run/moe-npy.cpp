//===- moe-npy.cpp - write and print small .npy / .safetensors files
//-------===//
//
// A test helper for moe-run (no MLIR):
//
//   moe-npy write OUT.npy DTYPE SHAPE VALUE...
//       DTYPE: f32 f16 i32 i64; SHAPE: "2x3", "5", or "scalar" (0-d).
//       Give one value per element, or a single value for all of them.
//   moe-npy print FILE.npy
//       One line: "DTYPE [SHAPE]: v0 v1 ..." (floats with %g).
//   moe-npy pack OUT.safetensors NAME=FILE.npy[:DTYPE]...
//       A safetensors file from .npy files; DTYPE (f32, f16, bf16) converts
//       float tensors before storing them.
//   moe-npy list FILE.safetensors
//       One line per tensor: "NAME DTYPE [SHAPE]".
//
// Errors: one line "moe-npy: ..." on stderr, exit code 1.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Quantized.h"
#include "runtime/io/TensorIO.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

using namespace moe::io;

namespace {

int fail(const std::string &message) {
  std::fprintf(stderr, "moe-npy: %s\n", message.c_str());
  return 1;
}

const char *const usage =
    "usage: moe-npy write OUT.npy DTYPE SHAPE VALUE...\n"
    "       moe-npy print FILE.npy\n"
    "       moe-npy pack OUT.safetensors NAME=FILE.npy[:DTYPE]...\n"
    "       moe-npy list FILE.safetensors\n"
    "DTYPE: f32 f16 i32 i64 (pack also bf16); SHAPE: 2x3, 5 or scalar;\n"
    "one VALUE per element, or one for all.\n";

bool parseShape(const std::string &text, std::vector<int64_t> &shape) {
  shape.clear();
  if (text == "scalar")
    return true;
  size_t pos = 0;
  while (true) {
    size_t next = text.find('x', pos);
    std::string part = text.substr(
        pos, next == std::string::npos ? std::string::npos : next - pos);
    if (part.empty())
      return false;
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (errno || *end || v < 0)
      return false;
    shape.push_back(v);
    if (next == std::string::npos)
      return true;
    pos = next + 1;
  }
}

int cmdWrite(int argc, char **argv) {
  if (argc < 5)
    return fail("write needs OUT.npy DTYPE SHAPE VALUE...");
  std::string out = argv[2];
  auto dtype = parseDType(argv[3]);
  if (!dtype || !npyDescr(*dtype))
    return fail(std::string("unsupported dtype '") + argv[3] +
                "' (f32, f16, i32, i64)");
  std::vector<int64_t> shape;
  if (!parseShape(argv[4], shape))
    return fail(std::string("bad shape '") + argv[4] +
                "' (e.g. 2x3, 5 or scalar)");
  auto count = shapeNumElements(shape);
  if (!count || *count > (int64_t(1) << 32))
    return fail(std::string("shape '") + argv[4] + "' is too large");
  std::vector<std::string> values(argv + 5, argv + argc);
  if (values.size() != 1 && static_cast<int64_t>(values.size()) != *count)
    return fail("shape " + formatShape(shape) + " has " +
                std::to_string(*count) + " elements, got " +
                std::to_string(values.size()) + " values");

  std::vector<uint8_t> bytes(*count * elementSize(*dtype));
  for (int64_t i = 0; i < *count; ++i) {
    const std::string &text = values.size() == 1 ? values[0] : values[i];
    char *end = nullptr;
    errno = 0;
    uint8_t *p = bytes.data() + i * elementSize(*dtype);
    if (isFloatType(*dtype)) {
      double v = std::strtod(text.c_str(), &end);
      if (*end || text.empty())
        return fail("bad value '" + text + "'");
      float f = static_cast<float>(v);
      if (*dtype == DType::F32) {
        std::memcpy(p, &f, 4);
      } else {
        uint16_t h = floatToHalfBits(f);
        std::memcpy(p, &h, 2);
      }
    } else {
      long long v = std::strtoll(text.c_str(), &end, 0);
      if (*end || text.empty() || errno)
        return fail("bad value '" + text + "'");
      if (*dtype == DType::I32) {
        if (v < INT32_MIN || v > INT32_MAX)
          return fail("value '" + text + "' does not fit i32");
        int32_t x = static_cast<int32_t>(v);
        std::memcpy(p, &x, 4);
      } else {
        int64_t x = v;
        std::memcpy(p, &x, 8);
      }
    }
  }
  Status status = writeNpy(out, Tensor(*dtype, shape, std::move(bytes)));
  if (!status)
    return fail(status.error());
  return 0;
}

void printValues(const Tensor &t) {
  std::printf("%s %s:", dtypeName(t.dtype), formatShape(t.shape).c_str());
  const int64_t n = t.numElements();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t *p = t.data.data() + i * t.elementSize();
    switch (t.dtype) {
    case DType::F32: {
      float v;
      std::memcpy(&v, p, 4);
      std::printf(" %g", v);
      break;
    }
    case DType::F16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      std::printf(" %g", halfBitsToFloat(v));
      break;
    }
    case DType::BF16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      std::printf(" %g", bfloat16BitsToFloat(v));
      break;
    }
    case DType::I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      std::printf(" %" PRId32, v);
      break;
    }
    case DType::I64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      std::printf(" %" PRId64, v);
      break;
    }
    case DType::F8E4M3:
      std::printf(" %g", fp8E4M3ToFloat(*p));
      break;
    case DType::U8:
      std::printf(" %u", unsigned(*p));
      break;
    }
  }
  std::printf("\n");
}

int cmdPrint(int argc, char **argv) {
  if (argc != 3)
    return fail("print needs one FILE.npy");
  auto t = readNpy(argv[2]);
  if (!t)
    return fail(t.error());
  printValues(*t);
  return 0;
}

int cmdPack(int argc, char **argv) {
  if (argc < 3)
    return fail("pack needs OUT.safetensors NAME=FILE.npy[:DTYPE]...");
  std::map<std::string, Tensor> tensors;
  for (int i = 3; i < argc; ++i) {
    std::string spec = argv[i];
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return fail("bad tensor '" + spec + "' (expected NAME=FILE.npy)");
    std::string name = spec.substr(0, eq);
    std::string path = spec.substr(eq + 1);
    std::optional<DType> target;
    size_t colon = path.rfind(':');
    if (colon != std::string::npos) {
      target = parseDType(path.substr(colon + 1));
      if (!target || !isFloatType(*target))
        return fail("bad dtype '" + path.substr(colon + 1) +
                    "' (f32, f16, bf16)");
      path = path.substr(0, colon);
    }
    auto t = readNpy(path);
    if (!t)
      return fail(t.error());
    Tensor tensor = t.take();
    if (target) {
      auto converted = convertTensor(tensor, *target);
      if (!converted)
        return fail(converted.error());
      tensor = converted.take();
    }
    tensors[name] = std::move(tensor);
  }
  Status status = writeSafeTensors(argv[2], tensors);
  if (!status)
    return fail(status.error());
  return 0;
}

int cmdList(int argc, char **argv) {
  if (argc != 3)
    return fail("list needs one FILE.safetensors");
  auto file = SafeTensorsFile::open(argv[2]);
  if (!file)
    return fail(file.error());
  for (const SafeTensorInfo &info : file->tensors())
    std::printf("%s %s %s\n", info.name.c_str(),
                safetensorsDTypeName(info.dtype),
                formatShape(info.shape).c_str());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") ||
      !std::strcmp(argv[1], "-h")) {
    std::fputs(usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 1 : 0;
  }
  std::string cmd = argv[1];
  if (cmd == "write")
    return cmdWrite(argc, argv);
  if (cmd == "print")
    return cmdPrint(argc, argv);
  if (cmd == "pack")
    return cmdPack(argc, argv);
  if (cmd == "list")
    return cmdList(argc, argv);
  return fail("unknown command '" + cmd + "' (write, print, pack, list)");
}
