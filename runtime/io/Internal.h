//===- Internal.h - Helpers shared by the tensor I/O sources ---*- C++ -*-===//
//
// Not part of the public API.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_IO_INTERNAL_H
#define MOE_RUNTIME_IO_INTERNAL_H

#include "runtime/io/TensorIO.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "moe tensor I/O assumes a little-endian host");
#endif

namespace moe {
namespace io {
namespace detail {

/// `s` in single quotes, made printable ASCII: control characters, quotes,
/// backslashes and non-ASCII bytes are escaped; longer than `maxLen` bytes is
/// cut and marked with "...". Safe to embed in a one-line message.
std::string quote(std::string_view s, size_t maxLen = 64);

/// A path for an error message: control characters and non-ASCII bytes are
/// escaped so that the message stays on one line.
std::string displayPath(std::string_view path);

/// Error{displayPath(name) + ": " + what}.
Error fileError(std::string_view name, const std::string &what);

/// out = a * b; false on uint64 overflow.
inline bool checkedMul(uint64_t a, uint64_t b, uint64_t &out) {
  if (a != 0 && b > UINT64_MAX / a)
    return false;
  out = a * b;
  return true;
}

/// Element count of a shape given as unsigned dimensions: 1 for 0-d, 0 if a
/// dimension is 0 (whatever the others are). False if the count does not fit
/// in int64.
bool checkedNumElements(const std::vector<int64_t> &shape, uint64_t &out);

inline uint64_t readLE64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}
inline uint32_t readLE32(const uint8_t *p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}
inline void appendLE(std::string &out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

/// Writes a file with stdio and reports the first failure (including the one
/// at close, e.g. a full disk) as "PATH: cannot write: <strerror>".
class FileWriter {
public:
  explicit FileWriter(const std::string &path);
  ~FileWriter();
  FileWriter(const FileWriter &) = delete;
  FileWriter &operator=(const FileWriter &) = delete;
  void write(const void *data, size_t size);
  Status close();

private:
  std::string path;
  std::FILE *file = nullptr;
  int error = 0;
};

/// Length of the valid UTF-8 sequence starting at s[i] (1..4), or 0 if the
/// bytes there are not valid UTF-8 (overlong forms, surrogates and code
/// points above U+10FFFF are invalid). If `codePoint` is non-null it receives
/// the decoded value.
size_t utf8SequenceLength(std::string_view s, size_t i,
                          uint32_t *codePoint = nullptr);

/// `value` rounded to f32 with round-to-odd: the nearest f32 toward zero,
/// with the last bit set when inexact (beyond the f32 range: the largest
/// finite f32, odd). A second rounding of that f32 to a narrower type (bf16,
/// f16: at least 2 bits fewer) is then exactly the correctly rounded
/// (nearest even) result of `value`. Npy.cpp.
float roundToOddF32(double value);

} // namespace detail
} // namespace io
} // namespace moe

#endif // MOE_RUNTIME_IO_INTERNAL_H
