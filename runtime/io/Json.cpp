//===- Json.cpp - A small strict JSON parser ------------------------------===//

#include "runtime/io/Json.h"
#include "runtime/io/Internal.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace moe {
namespace io {
namespace json {

//===----------------------------------------------------------------------===//
// Value
//===----------------------------------------------------------------------===//

Kind Value::kind() const { return doc->nodes[index].kind; }

bool Value::asBool() const {
  const Document::Node &n = doc->nodes[index];
  return n.kind == Kind::Bool && n.a != 0;
}

std::string_view Value::asString() const {
  const Document::Node &n = doc->nodes[index];
  if (n.kind != Kind::String && n.kind != Kind::Number)
    return {};
  return std::string_view(doc->pool).substr(n.a, n.b);
}

bool Value::getUInt64(uint64_t &out) const {
  if (!isNumber())
    return false;
  std::string_view text = asString();
  if (text.empty())
    return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false; // sign, fraction or exponent
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10)
      return false;
    v = v * 10 + digit;
  }
  out = v;
  return true;
}

size_t Value::size() const {
  const Document::Node &n = doc->nodes[index];
  if (n.kind != Kind::Array && n.kind != Kind::Object)
    return 0;
  return n.b;
}

Value Value::at(size_t i) const {
  const Document::Node &n = doc->nodes[index];
  if (n.kind == Kind::Array)
    return Value(doc, doc->children[n.a + i]);
  return Value(doc, doc->children[n.a + 2 * i + 1]);
}

std::string_view Value::keyAt(size_t i) const {
  const Document::Node &n = doc->nodes[index];
  return Value(doc, doc->children[n.a + 2 * i]).asString();
}

std::optional<Value> Value::find(std::string_view key) const {
  if (!isObject())
    return std::nullopt;
  for (size_t i = 0, e = size(); i < e; ++i)
    if (keyAt(i) == key)
      return at(i);
  return std::nullopt;
}

size_t Value::offset() const { return doc->nodes[index].offset; }

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

class Parser {
public:
  Parser(Document &document, std::string_view input, unsigned depthLimit)
      : doc(document), text(input), maxDepth(depthLimit) {}

  bool run(ParseError &error) {
    skipWhitespace();
    uint32_t root;
    if (!parseValue(root, 1))
      return fail(error);
    skipWhitespace();
    if (pos != text.size()) {
      setError("unexpected characters after the JSON value");
      return fail(error);
    }
    return true;
  }

private:
  Document &doc;
  std::string_view text;
  unsigned maxDepth;
  size_t pos = 0;
  size_t errorOffset = 0;
  std::string errorMessage;

  bool fail(ParseError &error) {
    error.offset = errorOffset;
    error.message = errorMessage;
    return false;
  }
  bool setError(std::string message) { return setErrorAt(pos, message); }
  bool setErrorAt(size_t at, std::string message) {
    errorOffset = at;
    errorMessage = std::move(message);
    return false;
  }

  bool atEnd() const { return pos >= text.size(); }
  char peek() const { return text[pos]; }

  void skipWhitespace() {
    while (pos < text.size()) {
      char c = text[pos];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
        return;
      ++pos;
    }
  }

  uint32_t addNode(Kind kind, size_t offset, uint32_t a, uint32_t b) {
    doc.nodes.push_back(
        Document::Node{kind, static_cast<uint32_t>(offset), a, b});
    return static_cast<uint32_t>(doc.nodes.size() - 1);
  }

  std::string describeHere() const {
    if (atEnd())
      return "end of input";
    return "character " + detail::quote(text.substr(pos, 1));
  }

  bool parseValue(uint32_t &out, unsigned depth) {
    if (atEnd())
      return setError("unexpected end of input, expected a value");
    char c = peek();
    switch (c) {
    case '{':
      return parseObject(out, depth);
    case '[':
      return parseArray(out, depth);
    case '"':
      return parseString(out);
    case 't':
      return parseLiteral("true", Kind::Bool, 1, out);
    case 'f':
      return parseLiteral("false", Kind::Bool, 0, out);
    case 'n':
      return parseLiteral("null", Kind::Null, 0, out);
    default:
      if (c == '-' || (c >= '0' && c <= '9'))
        return parseNumber(out);
      return setError("expected a value, found " + describeHere());
    }
  }

  bool parseLiteral(std::string_view word, Kind kind, uint32_t a,
                    uint32_t &out) {
    if (text.substr(pos, word.size()) != word)
      return setError("invalid literal (expected '" + std::string(word) + "')");
    out = addNode(kind, pos, a, 0);
    pos += word.size();
    return true;
  }

  static bool isDigit(char c) { return c >= '0' && c <= '9'; }

  bool parseNumber(uint32_t &out) {
    size_t start = pos;
    if (peek() == '-')
      ++pos;
    if (atEnd() || !isDigit(peek()))
      return setError("invalid number: expected a digit");
    if (peek() == '0') {
      ++pos;
      if (!atEnd() && isDigit(peek()))
        return setError("invalid number: leading zero");
    } else {
      while (!atEnd() && isDigit(peek()))
        ++pos;
    }
    if (!atEnd() && peek() == '.') {
      ++pos;
      if (atEnd() || !isDigit(peek()))
        return setError("invalid number: expected a digit after '.'");
      while (!atEnd() && isDigit(peek()))
        ++pos;
    }
    if (!atEnd() && (peek() == 'e' || peek() == 'E')) {
      ++pos;
      if (!atEnd() && (peek() == '+' || peek() == '-'))
        ++pos;
      if (atEnd() || !isDigit(peek()))
        return setError("invalid number: expected a digit in the exponent");
      while (!atEnd() && isDigit(peek()))
        ++pos;
    }
    uint32_t poolStart = static_cast<uint32_t>(doc.pool.size());
    doc.pool.append(text.substr(start, pos - start));
    out = addNode(Kind::Number, start, poolStart,
                  static_cast<uint32_t>(pos - start));
    return true;
  }

  static int hexValue(char c) {
    if (c >= '0' && c <= '9')
      return c - '0';
    if (c >= 'a' && c <= 'f')
      return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
      return c - 'A' + 10;
    return -1;
  }

  /// Parses the 4 hex digits after "\u" at pos.
  bool parseHex4(uint32_t &out) {
    if (text.size() - pos < 4)
      return setError("invalid \\u escape: expected 4 hex digits");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      int h = hexValue(text[pos + i]);
      if (h < 0)
        return setError("invalid \\u escape: expected 4 hex digits");
      v = (v << 4) | static_cast<uint32_t>(h);
    }
    pos += 4;
    out = v;
    return true;
  }

  static void appendUtf8(std::string &s, uint32_t cp) {
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  bool parseString(uint32_t &out) {
    size_t start = pos;
    ++pos; // opening quote
    uint32_t poolStart = static_cast<uint32_t>(doc.pool.size());
    std::string &pool = doc.pool;
    while (true) {
      if (atEnd())
        return setErrorAt(start, "unterminated string");
      unsigned char c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++pos;
        break;
      }
      if (c < 0x20)
        return setError("unescaped control character in string");
      if (c == '\\') {
        ++pos;
        if (atEnd())
          return setErrorAt(start, "unterminated string");
        char e = peek();
        ++pos;
        switch (e) {
        case '"':
          pool.push_back('"');
          break;
        case '\\':
          pool.push_back('\\');
          break;
        case '/':
          pool.push_back('/');
          break;
        case 'b':
          pool.push_back('\b');
          break;
        case 'f':
          pool.push_back('\f');
          break;
        case 'n':
          pool.push_back('\n');
          break;
        case 'r':
          pool.push_back('\r');
          break;
        case 't':
          pool.push_back('\t');
          break;
        case 'u': {
          size_t escapeStart = pos - 2;
          uint32_t cp;
          if (!parseHex4(cp))
            return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF)
            return setErrorAt(escapeStart,
                              "invalid \\u escape: lone low surrogate");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (text.substr(pos, 2) != "\\u")
              return setErrorAt(escapeStart,
                                "invalid \\u escape: lone high surrogate");
            pos += 2;
            uint32_t low;
            if (!parseHex4(low))
              return false;
            if (low < 0xDC00 || low > 0xDFFF)
              return setErrorAt(escapeStart,
                                "invalid \\u escape: lone high surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          appendUtf8(pool, cp);
          break;
        }
        default:
          pos -= 2;
          return setError("invalid escape sequence in string");
        }
        continue;
      }
      if (c < 0x80) {
        pool.push_back(static_cast<char>(c));
        ++pos;
        continue;
      }
      size_t len = detail::utf8SequenceLength(text, pos);
      if (len == 0)
        return setError("invalid UTF-8 in string");
      pool.append(text.substr(pos, len));
      pos += len;
    }
    out = addNode(Kind::String, start, poolStart,
                  static_cast<uint32_t>(pool.size() - poolStart));
    return true;
  }

  bool checkDepth(unsigned depth) {
    if (depth > maxDepth)
      return setError("nesting deeper than " + std::to_string(maxDepth) +
                      " levels");
    return true;
  }

  uint32_t finishContainer(Kind kind, size_t start,
                           const std::vector<uint32_t> &items, uint32_t count) {
    uint32_t first = static_cast<uint32_t>(doc.children.size());
    doc.children.insert(doc.children.end(), items.begin(), items.end());
    return addNode(kind, start, first, count);
  }

  bool parseArray(uint32_t &out, unsigned depth) {
    if (!checkDepth(depth))
      return false;
    size_t start = pos;
    ++pos; // '['
    std::vector<uint32_t> items;
    skipWhitespace();
    if (!atEnd() && peek() == ']') {
      ++pos;
      out = finishContainer(Kind::Array, start, items, 0);
      return true;
    }
    while (true) {
      skipWhitespace();
      uint32_t item;
      if (!parseValue(item, depth + 1))
        return false;
      items.push_back(item);
      skipWhitespace();
      if (atEnd())
        return setErrorAt(start, "unterminated array");
      if (peek() == ',') {
        ++pos;
        continue;
      }
      if (peek() == ']') {
        ++pos;
        break;
      }
      return setError("expected ',' or ']' in array, found " + describeHere());
    }
    out = finishContainer(Kind::Array, start, items,
                          static_cast<uint32_t>(items.size()));
    return true;
  }

  bool parseObject(uint32_t &out, unsigned depth) {
    if (!checkDepth(depth))
      return false;
    size_t start = pos;
    ++pos;                       // '{'
    std::vector<uint32_t> items; // key, value, key, value, ...
    skipWhitespace();
    if (!atEnd() && peek() == '}') {
      ++pos;
      out = finishContainer(Kind::Object, start, items, 0);
      return true;
    }
    while (true) {
      skipWhitespace();
      if (atEnd())
        return setErrorAt(start, "unterminated object");
      if (peek() != '"')
        return setError("expected a string key in object, found " +
                        describeHere());
      uint32_t key;
      if (!parseString(key))
        return false;
      skipWhitespace();
      if (atEnd() || peek() != ':')
        return setError("expected ':' after object key, found " +
                        describeHere());
      ++pos;
      skipWhitespace();
      uint32_t value;
      if (!parseValue(value, depth + 1))
        return false;
      items.push_back(key);
      items.push_back(value);
      skipWhitespace();
      if (atEnd())
        return setErrorAt(start, "unterminated object");
      if (peek() == ',') {
        ++pos;
        continue;
      }
      if (peek() == '}') {
        ++pos;
        break;
      }
      return setError("expected ',' or '}' in object, found " + describeHere());
    }
    if (!checkDuplicateKeys(items))
      return false;
    out = finishContainer(Kind::Object, start, items,
                          static_cast<uint32_t>(items.size() / 2));
    return true;
  }

  bool checkDuplicateKeys(const std::vector<uint32_t> &items) {
    size_t count = items.size() / 2;
    if (count < 2)
      return true;
    // (key, source offset), sorted by key then offset: a duplicate is
    // reported at its second occurrence.
    std::vector<std::pair<std::string_view, uint32_t>> keys;
    keys.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      const Document::Node &n = doc.nodes[items[2 * i]];
      keys.emplace_back(std::string_view(doc.pool).substr(n.a, n.b), n.offset);
    }
    std::sort(keys.begin(), keys.end());
    for (size_t i = 1; i < count; ++i)
      if (keys[i].first == keys[i - 1].first)
        return setErrorAt(keys[i].second,
                          "duplicate key " + detail::quote(keys[i].first));
    return true;
  }
};

Document::Document() { nodes.push_back(Node{Kind::Null, 0, 0, 0}); }

bool Document::parse(std::string_view text, ParseError &error,
                     unsigned maxDepth) {
  nodes.clear();
  children.clear();
  pool.clear();
  if (text.size() >= UINT32_MAX) {
    nodes.push_back(Node{Kind::Null, 0, 0, 0});
    error.offset = 0;
    error.message = "JSON text too large";
    return false;
  }
  // Node 0 is reserved for the root. Nodes are created children first, so
  // the root is the last node created and no child refers to it: move it to
  // slot 0 once parsing is done.
  nodes.push_back(Node{Kind::Null, 0, 0, 0});
  Parser parser(*this, text, maxDepth);
  if (!parser.run(error)) {
    nodes.assign(1, Node{Kind::Null, 0, 0, 0});
    children.clear();
    pool.clear();
    return false;
  }
  nodes[0] = nodes.back();
  nodes.pop_back();
  return true;
}

void appendQuoted(std::string &out, std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  out.push_back('"');
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        out += "\\u00";
        out.push_back(hex[c >> 4]);
        out.push_back(hex[c & 0xF]);
      } else {
        out.push_back(ch);
      }
    }
  }
  out.push_back('"');
}

std::string formatShortestDouble(double v) {
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos)
    s += ".0";
  return s;
}

} // namespace json
} // namespace io
} // namespace moe
