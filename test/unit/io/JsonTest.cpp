//===- JsonTest.cpp - strict JSON parser tests ----------------------------===//

#include "runtime/io/Json.h"

#include <gtest/gtest.h>

#include <string>

using namespace moe::io::json;

namespace {

bool parses(const std::string &text) {
  Document doc;
  ParseError error;
  return doc.parse(text, error);
}

std::string errorOf(const std::string &text, size_t *offset = nullptr) {
  Document doc;
  ParseError error;
  if (doc.parse(text, error))
    return "";
  if (offset)
    *offset = error.offset;
  return error.message;
}

TEST(Json, Scalars) {
  Document doc;
  ParseError error;
  ASSERT_TRUE(doc.parse(" true ", error));
  EXPECT_TRUE(doc.root().isBool());
  EXPECT_TRUE(doc.root().asBool());
  ASSERT_TRUE(doc.parse("false", error));
  EXPECT_FALSE(doc.root().asBool());
  ASSERT_TRUE(doc.parse("null", error));
  EXPECT_TRUE(doc.root().isNull());
  ASSERT_TRUE(doc.parse("-12.5e+3", error));
  EXPECT_TRUE(doc.root().isNumber());
  EXPECT_EQ(doc.root().asString(), "-12.5e+3");
  ASSERT_TRUE(doc.parse("\"hi\"", error));
  EXPECT_EQ(doc.root().asString(), "hi");
}

TEST(Json, ObjectsAndArrays) {
  Document doc;
  ParseError error;
  ASSERT_TRUE(
      doc.parse(R"( {"a": [1, 2, {"b": []}], "c": {}, "d": "x"} )", error))
      << error.message;
  Value root = doc.root();
  ASSERT_TRUE(root.isObject());
  ASSERT_EQ(root.size(), 3u);
  EXPECT_EQ(root.keyAt(0), "a");
  EXPECT_EQ(root.keyAt(1), "c");
  EXPECT_EQ(root.keyAt(2), "d");
  Value a = root.at(0);
  ASSERT_TRUE(a.isArray());
  ASSERT_EQ(a.size(), 3u);
  uint64_t v = 0;
  EXPECT_TRUE(a.at(1).getUInt64(v));
  EXPECT_EQ(v, 2u);
  std::optional<Value> b = a.at(2).find("b");
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->isArray());
  EXPECT_EQ(b->size(), 0u);
  EXPECT_TRUE(root.at(1).isObject());
  EXPECT_EQ(root.at(1).size(), 0u);
  EXPECT_FALSE(root.find("zz").has_value());
  EXPECT_EQ(root.find("d")->asString(), "x");
}

TEST(Json, Escapes) {
  Document doc;
  ParseError error;
  ASSERT_TRUE(doc.parse(
      R"("q\" b\\ s\/ \b\f\n\r\t \u0041\u00e9\u20ac\ud83d\ude00")", error))
      << error.message;
  EXPECT_EQ(doc.root().asString(),
            "q\" b\\ s/ \b\f\n\r\t A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  ASSERT_TRUE(doc.parse(R"("\u0000")", error));
  EXPECT_EQ(doc.root().asString(), std::string(1, '\0'));
  // Raw UTF-8 passes through.
  ASSERT_TRUE(doc.parse("\"\xc3\xa9\xf0\x9f\x98\x80\"", error));
  EXPECT_EQ(doc.root().asString(), "\xc3\xa9\xf0\x9f\x98\x80");
}

TEST(Json, IntegerAccess) {
  Document doc;
  ParseError error;
  uint64_t v = 0;
  ASSERT_TRUE(doc.parse("18446744073709551615", error));
  EXPECT_TRUE(doc.root().getUInt64(v));
  EXPECT_EQ(v, UINT64_MAX);
  ASSERT_TRUE(doc.parse("18446744073709551616", error));
  EXPECT_FALSE(doc.root().getUInt64(v));
  for (const char *s : {"-1", "1.0", "1e3", "-0"}) {
    ASSERT_TRUE(doc.parse(s, error)) << s;
    EXPECT_FALSE(doc.root().getUInt64(v)) << s;
  }
  ASSERT_TRUE(doc.parse("0", error));
  EXPECT_TRUE(doc.root().getUInt64(v));
  EXPECT_EQ(v, 0u);
  ASSERT_TRUE(doc.parse("\"5\"", error));
  EXPECT_FALSE(doc.root().getUInt64(v));
}

TEST(Json, RejectsInvalidText) {
  struct Case {
    const char *text;
    const char *needle;
  } cases[] = {
      {"", "unexpected end of input"},
      {"   ", "unexpected end of input"},
      {"{", "unterminated object"},
      {"[1, 2", "unterminated array"},
      {"{\"a\" 1}", "expected ':'"},
      {"{\"a\": 1,}", "expected a string key"},
      {"[1, 2,]", "expected a value"},
      {"{a: 1}", "expected a string key"},
      {"{'a': 1}", "expected a string key"},
      {"[1 2]", "expected ',' or ']'"},
      {"{\"a\": 1 \"b\": 2}", "expected ',' or '}'"},
      {"01", "leading zero"},
      {"-", "expected a digit"},
      {"1.", "after '.'"},
      {".5", "expected a value"},
      {"1e", "exponent"},
      {"+1", "expected a value"},
      {"NaN", "expected a value"},
      {"Infinity", "expected a value"},
      {"tru", "invalid literal"},
      {"nul", "invalid literal"},
      {"\"abc", "unterminated string"},
      {"\"a\nb\"", "control character"},
      {"\"a\tb\"", "control character"},
      {"\"\\x41\"", "invalid escape"},
      {"\"\\u12\"", "4 hex digits"},
      {"\"\\u12g4\"", "4 hex digits"},
      {"\"\\ud83d\"", "lone high surrogate"},
      {"\"\\ud83d\\u0041\"", "lone high surrogate"},
      {"\"\\ude00\"", "lone low surrogate"},
      {"\"\xc0\x80\"", "invalid UTF-8"},         // overlong
      {"\"\xed\xa0\x80\"", "invalid UTF-8"},     // UTF-16 surrogate
      {"\"\xf4\x90\x80\x80\"", "invalid UTF-8"}, // above U+10FFFF
      {"\"\xe2\x82\"", "invalid UTF-8"},         // truncated
      {"\"\xff\"", "invalid UTF-8"},
      {"{} x", "unexpected characters after the JSON value"},
      {"{}{}", "unexpected characters after the JSON value"},
      {"[] // comment", "unexpected characters"},
      {"{\"a\": 1, \"a\": 2}", "duplicate key 'a'"},
      {"{\"a\": {\"x\": 1, \"y\": 2, \"x\": 3}}", "duplicate key 'x'"},
      {"\xef\xbb\xbf{}", "expected a value"}, // byte order mark
  };
  for (const Case &c : cases) {
    std::string message = errorOf(c.text);
    EXPECT_NE(message.find(c.needle), std::string::npos)
        << "text: " << c.text << "\nmessage: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(Json, ErrorOffsets) {
  size_t offset = 0;
  errorOf("{\"a\": 1, \"a\": 2}", &offset);
  EXPECT_EQ(offset, 9u); // the second "a"
  errorOf("[1, 2, x]", &offset);
  EXPECT_EQ(offset, 7u);
  errorOf("{} x", &offset);
  EXPECT_EQ(offset, 3u);
}

TEST(Json, DuplicateKeysAreExact) {
  // Keys that differ only after decoding escapes are duplicates.
  EXPECT_FALSE(parses(R"({"a": 1, "\u0061": 2})"));
  // Keys that differ are fine, and so is the same key in different objects.
  EXPECT_TRUE(parses(R"({"a": 1, "A": 2, "b": {"a": 3}})"));
}

TEST(Json, NestingLimit) {
  std::string ok(64, '['), okEnd(64, ']');
  EXPECT_TRUE(parses(ok + okEnd));
  std::string tooDeep(65, '['), tooDeepEnd(65, ']');
  EXPECT_NE(errorOf(tooDeep + tooDeepEnd).find("nesting deeper than 64"),
            std::string::npos);
  // Deeply nested garbage does not overflow the stack.
  EXPECT_FALSE(parses(std::string(100000, '[')));
  std::string objects;
  for (int i = 0; i < 100; ++i)
    objects += "{\"a\":";
  EXPECT_NE(errorOf(objects).find("nesting deeper"), std::string::npos);
}

TEST(Json, AppendQuoted) {
  std::string out;
  appendQuoted(out, std::string("a\"b\\c\b\f\n\r\t\x01\x1f/\xc3\xa9", 15));
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\b\\f\\n\\r\\t\\u0001\\u001f/\xc3\xa9\"");
  // What appendQuoted writes parses back to the same bytes.
  std::string original("x\0y\x7f\"z", 6);
  std::string quoted;
  appendQuoted(quoted, original);
  Document doc;
  ParseError error;
  ASSERT_TRUE(doc.parse(quoted, error)) << error.message;
  EXPECT_EQ(doc.root().asString(), original);
}

TEST(Json, FailedParseLeavesNullRoot) {
  Document doc;
  ParseError error;
  EXPECT_TRUE(doc.root().isNull());
  ASSERT_TRUE(doc.parse("[1]", error));
  EXPECT_TRUE(doc.root().isArray());
  EXPECT_FALSE(doc.parse("[1", error));
  EXPECT_TRUE(doc.root().isNull());
}

} // namespace
