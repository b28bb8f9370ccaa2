//===- Npy.cpp - .npy reader and writer -----------------------------------===//
//
// Format:
// https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
//   "\x93NUMPY" major minor, header length (uint16 LE for 1.0, uint32 LE for
//   2.0 and 3.0), header (a Python dict literal, padded with spaces and a
//   final '\n'), then the raw data.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Internal.h"
#include "runtime/io/TensorIO.h"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <utility>

namespace moe {
namespace io {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kArrayAlign = 64;
/// numpy adds spare room after the dict so that the first dimension can grow
/// in place: 21 - len(repr(shape[0])) spaces (GROWTH_AXIS_MAX_DIGITS).
constexpr size_t kGrowthAxisMaxDigits = 21;
constexpr unsigned kMaxLiteralDepth = 32;

//===----------------------------------------------------------------------===//
// A parser for the Python literals that appear in .npy headers.
//===----------------------------------------------------------------------===//

struct PyValue {
  enum Kind { Str, Bool, Int, None, Tuple, List, Dict } kind = None;
  size_t offset = 0;
  std::string str;       // Str
  bool boolean = false;  // Bool
  bool negative = false; // Int
  bool tooLarge = false; // Int: magnitude does not fit in uint64
  uint64_t magnitude = 0;
  std::vector<PyValue> items;                       // Tuple, List
  std::vector<std::pair<PyValue, PyValue>> entries; // Dict
};

class LiteralParser {
public:
  explicit LiteralParser(std::string_view input) : text(input) {}

  /// Parses the whole text as one literal followed by whitespace only.
  bool parse(PyValue &out, std::string &error) {
    skipSpace();
    if (!parseValue(out, 1) || !expectEnd()) {
      error = message + " (header byte " + std::to_string(errorOffset) + ")";
      return false;
    }
    return true;
  }

private:
  std::string_view text;
  size_t pos = 0;
  size_t errorOffset = 0;
  std::string message;

  bool fail(std::string m) { return failAt(pos, std::move(m)); }
  bool failAt(size_t at, std::string m) {
    errorOffset = at;
    message = std::move(m);
    return false;
  }

  bool atEnd() const { return pos >= text.size(); }
  char peek() const { return text[pos]; }

  void skipSpace() {
    while (!atEnd()) {
      char c = peek();
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' &&
          c != '\v')
        return;
      ++pos;
    }
  }

  bool expectEnd() {
    skipSpace();
    if (!atEnd())
      return fail("unexpected " + detail::quote(text.substr(pos, 1)) +
                  " after the header dictionary");
    return true;
  }

  static bool isIdentChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_';
  }

  bool parseValue(PyValue &out, unsigned depth) {
    if (depth > kMaxLiteralDepth)
      return fail("nesting too deep");
    if (atEnd())
      return fail("unexpected end of header, expected a value");
    out = PyValue();
    out.offset = pos;
    char c = peek();
    if (c == '\'' || c == '"')
      return parseString(out);
    if (c == '(' || c == '[')
      return parseSequence(out, depth);
    if (c == '{')
      return parseDict(out, depth);
    if (c == '-' || c == '+' || (c >= '0' && c <= '9'))
      return parseInt(out);
    if (isIdentChar(c)) {
      size_t start = pos;
      while (!atEnd() && isIdentChar(peek()))
        ++pos;
      std::string_view word = text.substr(start, pos - start);
      if (word == "True" || word == "False") {
        out.kind = PyValue::Bool;
        out.boolean = word == "True";
        return true;
      }
      if (word == "None") {
        out.kind = PyValue::None;
        return true;
      }
      return failAt(start, "unexpected name " + detail::quote(word));
    }
    return fail("unexpected " + detail::quote(text.substr(pos, 1)) +
                ", expected a value");
  }

  bool parseString(PyValue &out) {
    char quoteChar = peek();
    size_t start = pos++;
    while (true) {
      if (atEnd() || peek() == '\n')
        return failAt(start, "unterminated string");
      char c = peek();
      if (c == quoteChar)
        break;
      if (c == '\\')
        return fail("escape sequences in header strings are not supported");
      out.str.push_back(c);
      ++pos;
    }
    ++pos;
    out.kind = PyValue::Str;
    return true;
  }

  bool parseInt(PyValue &out) {
    size_t start = pos;
    bool negative = false;
    while (!atEnd() && (peek() == '-' || peek() == '+')) {
      if (peek() == '-')
        negative = !negative;
      ++pos;
      skipSpace();
    }
    if (atEnd() || peek() < '0' || peek() > '9')
      return failAt(start, "expected an integer");
    uint64_t v = 0;
    bool tooLarge = false;
    while (!atEnd() && peek() >= '0' && peek() <= '9') {
      uint64_t digit = static_cast<uint64_t>(peek() - '0');
      if (v > (UINT64_MAX - digit) / 10)
        tooLarge = true;
      else
        v = v * 10 + digit;
      ++pos;
    }
    // Python 2 long suffix, which numpy also tolerates for 1.0/2.0 files.
    if (!atEnd() && (peek() == 'L' || peek() == 'l'))
      ++pos;
    if (!atEnd() && (isIdentChar(peek()) || peek() == '.'))
      return failAt(start, "expected an integer");
    out.kind = PyValue::Int;
    out.negative = negative && v != 0;
    out.magnitude = v;
    out.tooLarge = tooLarge;
    return true;
  }

  /// Tuples "(...)" and lists "[...]". "(x)" is just x, as in Python.
  bool parseSequence(PyValue &out, unsigned depth) {
    char open = peek();
    char close = open == '(' ? ')' : ']';
    size_t start = pos++;
    std::vector<PyValue> items;
    bool sawComma = false;
    while (true) {
      skipSpace();
      if (atEnd())
        return failAt(start, std::string("missing '") + close + "'");
      if (peek() == close) {
        ++pos;
        break;
      }
      PyValue item;
      if (!parseValue(item, depth + 1))
        return false;
      items.push_back(std::move(item));
      skipSpace();
      if (atEnd())
        return failAt(start, std::string("missing '") + close + "'");
      if (peek() == ',') {
        sawComma = true;
        ++pos;
        continue;
      }
      if (peek() != close)
        return fail("expected ',' or '" + std::string(1, close) + "', found " +
                    detail::quote(text.substr(pos, 1)));
    }
    if (open == '(' && items.size() == 1 && !sawComma) {
      size_t offset = out.offset;
      out = std::move(items[0]); // parenthesized expression
      out.offset = offset;
      return true;
    }
    out.kind = open == '(' ? PyValue::Tuple : PyValue::List;
    out.items = std::move(items);
    return true;
  }

  bool parseDict(PyValue &out, unsigned depth) {
    size_t start = pos++;
    while (true) {
      skipSpace();
      if (atEnd())
        return failAt(start, "missing '}'");
      if (peek() == '}') {
        ++pos;
        break;
      }
      PyValue key, value;
      if (!parseValue(key, depth + 1))
        return false;
      skipSpace();
      if (atEnd() || peek() != ':')
        return fail("expected ':' after a dictionary key");
      ++pos;
      skipSpace();
      if (!parseValue(value, depth + 1))
        return false;
      out.entries.emplace_back(std::move(key), std::move(value));
      skipSpace();
      if (atEnd())
        return failAt(start, "missing '}'");
      if (peek() == ',') {
        ++pos;
        continue;
      }
      if (peek() != '}')
        return fail("expected ',' or '}', found " +
                    detail::quote(text.substr(pos, 1)));
    }
    out.kind = PyValue::Dict;
    return true;
  }
};

/// Maps a numpy descr string to a DType; fills `problem` otherwise.
std::optional<DType> descrToDType(const std::string &descr,
                                  std::string &problem, bool *isF64) {
  std::string_view code = descr;
  char order = '=';
  if (!code.empty() &&
      (code[0] == '<' || code[0] == '>' || code[0] == '|' || code[0] == '=')) {
    order = code[0];
    code.remove_prefix(1);
  }
  std::optional<DType> dtype;
  if (code == "f4")
    dtype = DType::F32;
  else if (code == "f2")
    dtype = DType::F16;
  else if (code == "i4")
    dtype = DType::I32;
  else if (code == "i8")
    dtype = DType::I64;
  else if (code == "u1")
    dtype = DType::U8;
  else if (code == "f8" && isF64) {
    // Read as float64; the caller converts the data (readNpyConverting).
    *isF64 = true;
    dtype = DType::I64; // 8-byte elements, for the size checks below.
  }
  if (!dtype) {
    problem = "unsupported dtype " + detail::quote(descr) +
              " (supported: '<f4', '<f2', '<i4', '<i8', '|u1')";
    return std::nullopt;
  }
  if (order == '>') {
    problem = "big-endian dtype " + detail::quote(descr) +
              " is not supported (only little-endian data)";
    return std::nullopt;
  }
  return dtype;
}

} // namespace

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

namespace {

/// Validates a whole .npy image; on success returns a tensor with dtype and
/// shape set but no data, and the offset of the data in `dataOffset` (the
/// data is exactly the rest of the image).
Result<Tensor> parseNpyHeader(const uint8_t *bytes, size_t size,
                              std::string_view name, size_t &dataOffset,
                              bool *isF64 = nullptr) {
  auto err = [&](const std::string &what) {
    return detail::fileError(name, what);
  };
  if (size < kMagicLen || std::memcmp(bytes, kMagic, kMagicLen) != 0)
    return err("not a .npy file (bad magic string)");
  if (size < kMagicLen + 2)
    return err("truncated header: file ends inside the version number");
  unsigned major = bytes[6], minor = bytes[7];
  size_t lengthBytes;
  if (major == 1 && minor == 0)
    lengthBytes = 2;
  else if ((major == 2 || major == 3) && minor == 0)
    lengthBytes = 4;
  else
    return err("unsupported .npy format version " + std::to_string(major) +
               "." + std::to_string(minor));
  size_t prefix = kMagicLen + 2 + lengthBytes;
  if (size < prefix)
    return err("truncated header: file ends inside the header length");
  uint64_t headerLength = lengthBytes == 2
                              ? (static_cast<uint64_t>(bytes[8]) |
                                 static_cast<uint64_t>(bytes[9]) << 8)
                              : detail::readLE32(bytes + 8);
  if (headerLength > size - prefix)
    return err("header length " + std::to_string(headerLength) +
               " exceeds the file size (" + std::to_string(size) + " bytes)");
  std::string_view header(reinterpret_cast<const char *>(bytes) + prefix,
                          static_cast<size_t>(headerLength));

  PyValue dict;
  std::string parseError;
  if (!LiteralParser(header).parse(dict, parseError))
    return err("invalid header: " + parseError);
  if (dict.kind != PyValue::Dict)
    return err("invalid header: not a dictionary");

  const PyValue *descr = nullptr, *fortran = nullptr, *shape = nullptr;
  for (const auto &[key, value] : dict.entries) {
    if (key.kind != PyValue::Str)
      return err("invalid header: dictionary keys must be strings");
    const PyValue **slot = nullptr;
    if (key.str == "descr")
      slot = &descr;
    else if (key.str == "fortran_order")
      slot = &fortran;
    else if (key.str == "shape")
      slot = &shape;
    else
      return err("invalid header: unexpected key " + detail::quote(key.str));
    if (*slot)
      return err("invalid header: duplicate key " + detail::quote(key.str));
    *slot = &value;
  }
  if (!descr)
    return err("invalid header: missing key 'descr'");
  if (!fortran)
    return err("invalid header: missing key 'fortran_order'");
  if (!shape)
    return err("invalid header: missing key 'shape'");

  if (descr->kind == PyValue::List)
    return err("unsupported dtype: structured arrays are not supported");
  if (descr->kind != PyValue::Str)
    return err("invalid header: 'descr' is not a string");
  std::string problem;
  std::optional<DType> dtype = descrToDType(descr->str, problem, isF64);
  if (!dtype)
    return err(problem);

  if (fortran->kind != PyValue::Bool)
    return err("invalid header: 'fortran_order' is not True or False");
  if (fortran->boolean)
    return err("fortran_order=True (column-major data) is not supported");

  if (shape->kind != PyValue::Tuple)
    return err("invalid header: 'shape' is not a tuple");
  std::vector<int64_t> dims;
  for (const PyValue &d : shape->items) {
    if (d.kind != PyValue::Int)
      return err("invalid header: 'shape' entries must be integers");
    if (d.negative)
      return err(
          "invalid shape: negative dimension -" +
          (d.tooLarge ? std::string("<huge>") : std::to_string(d.magnitude)));
    if (d.tooLarge || d.magnitude > static_cast<uint64_t>(INT64_MAX))
      return err("invalid shape: dimension too large");
    dims.push_back(static_cast<int64_t>(d.magnitude));
  }

  uint64_t count, expected;
  if (!detail::checkedNumElements(dims, count) ||
      !detail::checkedMul(count, elementSize(*dtype), expected))
    return err("invalid shape " + formatShape(dims) +
               ": element count overflows");
  dataOffset = prefix + static_cast<size_t>(headerLength);
  uint64_t available = size - dataOffset;
  if (available < expected)
    return err("data too short: shape " + formatShape(dims) + " of " +
               dtypeName(*dtype) + " needs " + std::to_string(expected) +
               " bytes, file has " + std::to_string(available));
  if (available > expected)
    return err("unexpected trailing data: shape " + formatShape(dims) + " of " +
               dtypeName(*dtype) + " needs " + std::to_string(expected) +
               " bytes, file has " + std::to_string(available));

  return Tensor(*dtype, std::move(dims), {});
}

} // namespace

Result<Tensor> parseNpy(const uint8_t *bytes, size_t size,
                        std::string_view name) {
  size_t dataOffset = 0;
  Result<Tensor> tensor = parseNpyHeader(bytes, size, name, dataOffset);
  if (!tensor)
    return tensor;
  // The data size was checked against the shape: this copy is bounded by
  // the input size.
  tensor->data.assign(bytes + dataOffset, bytes + size);
  return tensor;
}

Result<Tensor> readNpy(const std::string &path) {
  Result<std::vector<uint8_t>> bytes = readFileBytes(path);
  if (!bytes)
    return bytes.status();
  size_t dataOffset = 0;
  Result<Tensor> tensor =
      parseNpyHeader(bytes->data(), bytes->size(), path, dataOffset);
  if (!tensor)
    return tensor;
  // Reuse the file buffer for the data instead of copying it.
  std::vector<uint8_t> data = bytes.take();
  data.erase(data.begin(),
             data.begin() + static_cast<std::ptrdiff_t>(dataOffset));
  tensor->data = std::move(data);
  return tensor;
}

float detail::roundToOddF32(double value) {
  float f = static_cast<float>(value);
  if (std::isnan(value) || static_cast<double>(f) == value)
    return f;
  if (std::isinf(f)) // beyond the f32 range: the largest finite, odd
    f = std::copysign(std::numeric_limits<float>::max(), f);
  else if (std::fabs(static_cast<double>(f)) > std::fabs(value))
    f = std::nextafter(f, 0.0f);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= 1;
  std::memcpy(&f, &bits, 4);
  return f;
}

namespace {
/// readNpyConverting / parseNpyConverting on a whole .npy image (its data
/// moves into the result when no conversion is needed).
Result<Tensor> npyImageConverting(std::vector<uint8_t> bytes,
                                  std::string_view name, DType target,
                                  bool &wasF64) {
  wasF64 = false;
  size_t dataOffset = 0;
  Result<Tensor> tensor = parseNpyHeader(bytes.data(), bytes.size(), name,
                                         dataOffset, &wasF64);
  if (!tensor)
    return tensor;
  if (!wasF64) {
    bytes.erase(bytes.begin(),
                bytes.begin() + static_cast<std::ptrdiff_t>(dataOffset));
    tensor->data = std::move(bytes);
    return tensor;
  }
  if (target != DType::F32 && target != DType::BF16 && target != DType::F16)
    return detail::fileError(name, std::string("float64 data cannot bind to ") +
                                       dtypeName(target) + " (only to f32, "
                                       "bf16 or f16)");
  const uint8_t *src = bytes.data() + dataOffset;
  const size_t count = (bytes.size() - dataOffset) / 8;
  Tensor out(target, tensor->shape, {});
  out.data.resize(count * elementSize(target));
  for (size_t i = 0; i < count; ++i) {
    double v;
    std::memcpy(&v, src + 8 * i, 8);
    if (target == DType::F32) {
      float f = static_cast<float>(v); // nearest even
      std::memcpy(out.data.data() + 4 * i, &f, 4);
      continue;
    }
    float odd = detail::roundToOddF32(v);
    uint16_t h = target == DType::BF16 ? floatToBFloat16Bits(odd)
                                       : floatToHalfBits(odd);
    std::memcpy(out.data.data() + 2 * i, &h, 2);
  }
  return out;
}
} // namespace

Result<Tensor> readNpyConverting(const std::string &path, DType target,
                                 bool &wasF64) {
  wasF64 = false;
  Result<std::vector<uint8_t>> bytes = readFileBytes(path);
  if (!bytes)
    return bytes.status();
  return npyImageConverting(bytes.take(), path, target, wasF64);
}

Result<Tensor> parseNpyConverting(const uint8_t *bytes, size_t size,
                                  std::string_view name, DType target,
                                  bool &wasF64) {
  return npyImageConverting(std::vector<uint8_t>(bytes, bytes + size), name,
                            target, wasF64);
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

namespace {

/// The header bytes numpy.save writes for `tensor` (magic to '\n').
Result<std::string> npyHeader(const Tensor &tensor, std::string_view name) {
  if (Status s = tensor.validate(name); !s)
    return s;
  const char *descr = npyDescr(tensor.dtype);
  if (!descr)
    return detail::fileError(name, std::string("cannot store ") +
                                       dtypeName(tensor.dtype) +
                                       " in .npy (numpy has no such dtype)");
  // Same text as numpy: repr of the dict with sorted keys.
  std::string dict = "{'descr': '";
  dict += descr;
  dict += "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < tensor.shape.size(); ++i) {
    if (i)
      dict += ", ";
    dict += std::to_string(tensor.shape[i]);
  }
  if (tensor.shape.size() == 1)
    dict += ",";
  dict += "), }";
  if (!tensor.shape.empty()) {
    size_t digits = std::to_string(tensor.shape[0]).size();
    if (digits < kGrowthAxisMaxDigits)
      dict.append(kGrowthAxisMaxDigits - digits, ' ');
  }

  // numpy's _wrap_header: hlen = len(header) + 1 (for '\n');
  // padlen = 64 - (magic + length field + hlen) % 64 (so 1..64 spaces).
  size_t hlen = dict.size() + 1;
  size_t lengthBytes = 2;
  size_t padlen =
      kArrayAlign - (kMagicLen + 2 + lengthBytes + hlen) % kArrayAlign;
  if (hlen + padlen > 0xFFFF) {
    lengthBytes = 4;
    padlen = kArrayAlign - (kMagicLen + 2 + lengthBytes + hlen) % kArrayAlign;
    if (hlen + padlen > 0xFFFFFFFFull)
      return detail::fileError(name, "array header too large");
  }
  std::string out(kMagic, kMagicLen);
  out.push_back(static_cast<char>(lengthBytes == 2 ? 1 : 2)); // major
  out.push_back(0);                                           // minor
  detail::appendLE(out, hlen + padlen, static_cast<int>(lengthBytes));
  out += dict;
  out.append(padlen, ' ');
  out.push_back('\n');
  return out;
}

} // namespace

Result<std::vector<uint8_t>> encodeNpy(const Tensor &tensor,
                                       std::string_view name) {
  Result<std::string> header = npyHeader(tensor, name);
  if (!header)
    return header.status();
  std::vector<uint8_t> out;
  out.reserve(header->size() + tensor.data.size());
  out.insert(out.end(), header->begin(), header->end());
  out.insert(out.end(), tensor.data.begin(), tensor.data.end());
  return out;
}

Status writeNpy(const std::string &path, const Tensor &tensor) {
  Result<std::string> header = npyHeader(tensor, path);
  if (!header)
    return header.status();
  detail::FileWriter writer(path);
  writer.write(header->data(), header->size());
  writer.write(tensor.data.data(), tensor.data.size());
  return writer.close();
}

} // namespace io
} // namespace moe
