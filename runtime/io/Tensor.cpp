//===- Tensor.cpp - Element types, tensors, files, shared helpers ---------===//

#include "runtime/io/Internal.h"
#include "runtime/io/TensorIO.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace moe {
namespace io {

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

size_t elementSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I32:
    return 4;
  case DType::I64:
    return 8;
  case DType::F8E4M3:
  case DType::U8:
    return 1;
  }
  return 0;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::F8E4M3:
    return "f8E4M3FN";
  case DType::U8:
    return "ui8";
  }
  return "?";
}

const char *safetensorsDTypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "F32";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::I32:
    return "I32";
  case DType::I64:
    return "I64";
  case DType::F8E4M3:
    return "F8_E4M3";
  case DType::U8:
    return "U8";
  }
  return "?";
}

const char *npyDescr(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "<f4";
  case DType::F16:
    return "<f2";
  case DType::BF16:
    return nullptr;
  case DType::I32:
    return "<i4";
  case DType::I64:
    return "<i8";
  case DType::F8E4M3:
    return nullptr;
  case DType::U8:
    return "|u1";
  }
  return nullptr;
}

std::optional<DType> parseDType(std::string_view name) {
  static const DType all[] = {DType::F32, DType::F16, DType::BF16,
                              DType::I32, DType::I64, DType::F8E4M3,
                              DType::U8};
  for (DType d : all)
    if (name == dtypeName(d) || name == safetensorsDTypeName(d))
      return d;
  return std::nullopt;
}

bool isFloatType(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

//===----------------------------------------------------------------------===//
// Shapes and tensors
//===----------------------------------------------------------------------===//

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  s += "]";
  return s;
}

namespace detail {

bool checkedNumElements(const std::vector<int64_t> &shape, uint64_t &out) {
  bool hasZero = false;
  for (int64_t d : shape) {
    if (d < 0)
      return false;
    if (d == 0)
      hasZero = true;
  }
  if (hasZero) {
    out = 0;
    return true;
  }
  uint64_t n = 1;
  for (int64_t d : shape)
    if (!checkedMul(n, static_cast<uint64_t>(d), n) ||
        n > static_cast<uint64_t>(INT64_MAX))
      return false;
  out = n;
  return true;
}

} // namespace detail

std::optional<int64_t> shapeNumElements(const std::vector<int64_t> &shape) {
  uint64_t n;
  if (!detail::checkedNumElements(shape, n))
    return std::nullopt;
  return static_cast<int64_t>(n);
}

int64_t Tensor::numElements() const {
  std::optional<int64_t> n = shapeNumElements(shape);
  return n ? *n : -1;
}

size_t Tensor::byteSize() const {
  int64_t n = numElements();
  return n < 0 ? 0 : static_cast<size_t>(n) * elementSize();
}

Status Tensor::validate(std::string_view name) const {
  for (int64_t d : shape)
    if (d < 0)
      return detail::fileError(name, "tensor shape " + formatShape(shape) +
                                         " has a negative dimension");
  uint64_t n, bytes;
  if (!detail::checkedNumElements(shape, n) ||
      !detail::checkedMul(n, elementSize(), bytes) ||
      bytes > static_cast<uint64_t>(SIZE_MAX))
    return detail::fileError(name, "tensor shape " + formatShape(shape) +
                                       " is too large");
  if (data.size() != bytes)
    return detail::fileError(
        name, "tensor data has " + std::to_string(data.size()) +
                  " bytes but shape " + formatShape(shape) + " of " +
                  dtypeName(dtype) + " needs " + std::to_string(bytes));
  return Status();
}

//===----------------------------------------------------------------------===//
// Message helpers
//===----------------------------------------------------------------------===//

namespace detail {

static void appendEscapedByte(std::string &out, unsigned char c) {
  static const char hex[] = "0123456789abcdef";
  switch (c) {
  case '\n':
    out += "\\n";
    return;
  case '\r':
    out += "\\r";
    return;
  case '\t':
    out += "\\t";
    return;
  default:
    out += "\\x";
    out.push_back(hex[c >> 4]);
    out.push_back(hex[c & 0xF]);
  }
}

std::string quote(std::string_view s, size_t maxLen) {
  std::string out = "'";
  size_t n = s.size() > maxLen ? maxLen : s.size();
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\'' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c >= 0x7f) {
      appendEscapedByte(out, c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out += "'";
  if (n < s.size())
    out += "...";
  return out;
}

std::string displayPath(std::string_view path) {
  std::string out;
  for (char ch : path) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f)
      appendEscapedByte(out, c);
    else
      out.push_back(ch);
  }
  return out;
}

Error fileError(std::string_view name, const std::string &what) {
  return Error{displayPath(name) + ": " + what};
}

size_t utf8SequenceLength(std::string_view s, size_t i, uint32_t *codePoint) {
  if (i >= s.size())
    return 0;
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  size_t len;
  uint32_t cp, min;
  if (c < 0x80) {
    if (codePoint)
      *codePoint = c;
    return 1;
  } else if ((c & 0xE0) == 0xC0) {
    len = 2;
    cp = c & 0x1F;
    min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
    min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    cp = c & 0x07;
    min = 0x10000;
  } else {
    return 0;
  }
  if (s.size() - i < len)
    return 0;
  for (size_t k = 1; k < len; ++k) {
    unsigned char cc = byte(i + k);
    if ((cc & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  if (codePoint)
    *codePoint = cp;
  return len;
}

} // namespace detail

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

static Error errnoError(const std::string &path, const char *what, int err) {
  return detail::fileError(path, std::string(what) + ": " + strerror(err));
}

Result<std::vector<uint8_t>> readFileBytes(const std::string &path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0)
    return errnoError(path, "cannot open", errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return errnoError(path, "cannot stat", err);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return errnoError(path, "cannot read", EISDIR);
  }
  std::vector<uint8_t> bytes;
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    if (static_cast<uint64_t>(st.st_size) > static_cast<uint64_t>(SIZE_MAX)) {
      ::close(fd);
      return detail::fileError(path, "file too large");
    }
    bytes.reserve(static_cast<size_t>(st.st_size));
  }
  // Read until EOF (handles files that change size and non-regular files).
  uint8_t chunk[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      int err = errno;
      ::close(fd);
      return errnoError(path, "cannot read", err);
    }
    if (n == 0)
      break;
    bytes.insert(bytes.end(), chunk, chunk + n);
  }
  ::close(fd);
  return bytes;
}

namespace detail {

FileWriter::FileWriter(const std::string &filePath) : path(filePath) {
  errno = 0;
  file = std::fopen(filePath.c_str(), "wb");
  if (!file)
    error = errno ? errno : EIO;
}

FileWriter::~FileWriter() {
  if (file)
    std::fclose(file);
}

void FileWriter::write(const void *data, size_t size) {
  if (!file || error || size == 0)
    return;
  errno = 0;
  if (std::fwrite(data, 1, size, file) != size)
    error = errno ? errno : EIO;
}

Status FileWriter::close() {
  if (!file)
    return errnoError(path, "cannot open for writing", error);
  errno = 0;
  int rc = std::fclose(file);
  file = nullptr;
  if (!error && rc != 0)
    error = errno ? errno : EIO;
  if (error)
    return errnoError(path, "cannot write", error);
  return Status();
}

} // namespace detail

Status writeFileBytes(const std::string &path, const uint8_t *bytes,
                      size_t size) {
  detail::FileWriter writer(path);
  writer.write(bytes, size);
  return writer.close();
}

} // namespace io
} // namespace moe
