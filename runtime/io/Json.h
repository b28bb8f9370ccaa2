//===- Json.h - A small strict JSON parser ---------------------*- C++ -*-===//
//
// RFC 8259 JSON, strict: no comments, no trailing commas, no NaN/Infinity, no
// leading zeros, no raw control characters or invalid UTF-8 in strings, lone
// UTF-16 surrogates in \u escapes rejected, duplicate object keys rejected,
// nesting limited, nothing but whitespace after the value.
//
// The parsed document is stored compactly (one 16-byte node per value plus
// the decoded string bytes), so its size stays a small multiple of the text.
// Numbers keep their source text; getUInt64() interprets integers exactly.
//
//===----------------------------------------------------------------------===//

#ifndef MOE_RUNTIME_IO_JSON_H
#define MOE_RUNTIME_IO_JSON_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moe {
namespace io {
namespace json {

enum class Kind : uint8_t { Null, Bool, Number, String, Array, Object };

class Document;

/// A handle to one value of a Document (valid while the Document lives).
class Value {
public:
  Kind kind() const;
  bool isNull() const { return kind() == Kind::Null; }
  bool isBool() const { return kind() == Kind::Bool; }
  bool isNumber() const { return kind() == Kind::Number; }
  bool isString() const { return kind() == Kind::String; }
  bool isArray() const { return kind() == Kind::Array; }
  bool isObject() const { return kind() == Kind::Object; }

  /// Bool value (false unless isBool()).
  bool asBool() const;
  /// Decoded string (String), source text (Number); empty otherwise.
  std::string_view asString() const;
  /// For a Number that is a non-negative integer without fraction or
  /// exponent that fits in uint64: stores it and returns true.
  bool getUInt64(uint64_t &out) const;

  /// Number of elements (Array) or members (Object); 0 otherwise.
  size_t size() const;
  /// Array element / object member value `i` (i < size()).
  Value at(size_t i) const;
  /// Object member key `i` (i < size()).
  std::string_view keyAt(size_t i) const;
  /// Object member called `key`; std::nullopt if absent or not an object.
  std::optional<Value> find(std::string_view key) const;

  /// Offset of the value's first character in the parsed text.
  size_t offset() const;

private:
  friend class Document;
  Value(const Document *d, uint32_t i) : doc(d), index(i) {}
  const Document *doc;
  uint32_t index;
};

struct ParseError {
  size_t offset = 0;   ///< byte offset in the text
  std::string message; ///< one line, no offset
};

class Document {
public:
  static constexpr unsigned kDefaultMaxDepth = 64;

  /// An empty document: root() is null until parse() succeeds.
  Document();

  /// Parses `text` (replacing any previous content). On failure returns
  /// false, fills `error` and leaves a null root. Texts of 4 GiB - 1 bytes or
  /// more are rejected.
  bool parse(std::string_view text, ParseError &error,
             unsigned maxDepth = kDefaultMaxDepth);

  Value root() const { return Value(this, 0); }

private:
  friend class Value;
  friend class Parser;
  struct Node {
    Kind kind;
    uint32_t offset; ///< source offset
    /// String/Number: start in `pool`; Array/Object: start in `children`;
    /// Bool: 0/1.
    uint32_t a;
    /// String/Number: byte length; Array/Object: element / member count.
    uint32_t b;
  };
  std::vector<Node> nodes;
  /// Arrays: node indices. Objects: pairs (key string node, value node).
  std::vector<uint32_t> children;
  std::string pool;
};

/// Appends `s` to `out` as a JSON string literal (quotes included), escaping
/// like serde_json: \" \\ \b \f \n \r \t, other control characters as \u00xx;
/// everything else (including non-ASCII UTF-8) verbatim.
void appendQuoted(std::string &out, std::string_view s);

/// The shortest decimal text of a finite `v` that reads back as exactly `v`
/// (%.Ng with the smallest N), with ".0" added when it would otherwise read
/// as an integer: a float literal for JSON configs and MLIR attributes.
std::string formatShortestDouble(double v);

} // namespace json
} // namespace io
} // namespace moe

#endif // MOE_RUNTIME_IO_JSON_H
