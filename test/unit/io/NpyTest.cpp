//===- NpyTest.cpp - .npy reader/writer tests -----------------------------===//

#include "TestUtil.h"

#include <cmath>
#include <fstream>
#include <random>

using namespace moe::io;
using namespace moe::io::testing;

namespace {

constexpr char kMagic[] = "\x93NUMPY";

/// A version 1.0 file: magic, version, 2-byte header length, header, data.
std::string npyV1(const std::string &header, const std::string &data = "") {
  std::string s(kMagic, 6);
  s += '\x01';
  s += '\x00';
  s += static_cast<char>(header.size() & 0xff);
  s += static_cast<char>((header.size() >> 8) & 0xff);
  return s + header + data;
}

/// A version 2.0 / 3.0 file: 4-byte header length.
std::string npyV23(int major, const std::string &header,
                   const std::string &data = "") {
  std::string s(kMagic, 6);
  s += static_cast<char>(major);
  s += '\x00';
  for (int i = 0; i < 4; ++i)
    s += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return s + header + data;
}

Result<Tensor> parse(const std::string &bytes) {
  return parseNpy(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(),
                  "x.npy");
}

std::string f32Data(std::initializer_list<float> values) {
  std::string s(values.size() * 4, '\0');
  std::memcpy(&s[0], values.begin(), s.size());
  return s;
}

//===----------------------------------------------------------------------===//
// Byte-exact agreement with numpy.save (headers spelled out from the spec)
//===----------------------------------------------------------------------===//

// numpy.save(f, np.arange(6, dtype=np.float32).reshape(2, 3)):
//   magic "\x93NUMPY", version 1.0, header length 118 (0x76 0x00);
//   the dict repr with sorted keys (59 characters);
//   21 - len("2") = 20 spaces of growth room (numpy >= 1.23);
//   38 spaces so that 10 + 59 + 20 + 38 + 1 = 128 is a multiple of 64; '\n'.
TEST(NpyFormat, MatchesNumpyF32Matrix) {
  std::string expected = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                         "{'descr': '<f4', 'fortran_order': False, "
                         "'shape': (2, 3), }" +
                         std::string(20 + 38, ' ') + "\n" +
                         f32Data({0, 1, 2, 3, 4, 5});
  ASSERT_EQ(expected.size(), 128u + 24u);
  Tensor t = Tensor::fromValues<float>(DType::F32, {2, 3}, {0, 1, 2, 3, 4, 5});
  Result<std::vector<uint8_t>> bytes = encodeNpy(t);
  ASSERT_TRUE(bytes.ok()) << bytes.error();
  EXPECT_EQ(stringOf(*bytes), expected);

  Result<Tensor> back = parse(expected);
  ASSERT_TRUE(back.ok()) << back.error();
  expectSameTensor(*back, t);
}

// np.save(f, np.float32(3.5)) writes a 0-d array: "shape': ()", no growth
// room, 62 spaces of padding (10 + 55 + 62 + 1 = 128).
TEST(NpyFormat, MatchesNumpyScalar) {
  std::string expected = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                         "{'descr': '<f4', 'fortran_order': False, "
                         "'shape': (), }" +
                         std::string(62, ' ') + "\n" + f32Data({3.5f});
  Tensor t = Tensor::fromValues<float>(DType::F32, {}, {3.5f});
  Result<std::vector<uint8_t>> bytes = encodeNpy(t);
  ASSERT_TRUE(bytes.ok()) << bytes.error();
  EXPECT_EQ(stringOf(*bytes), expected);
  Result<Tensor> back = parse(expected);
  ASSERT_TRUE(back.ok()) << back.error();
  expectSameTensor(*back, t);
  EXPECT_EQ(back->rank(), 0);
  EXPECT_EQ(back->numElements(), 1);
}

// np.save(f, np.arange(5, dtype=np.int64)): a 1-tuple is written "(5,)".
TEST(NpyFormat, MatchesNumpyVectorI64) {
  std::string data(40, '\0');
  for (int i = 0; i < 5; ++i)
    data[8 * i] = static_cast<char>(i);
  std::string expected = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                         "{'descr': '<i8', 'fortran_order': False, "
                         "'shape': (5,), }" +
                         std::string(20 + 40, ' ') + "\n" + data;
  Tensor t = Tensor::fromValues<int64_t>(DType::I64, {5}, {0, 1, 2, 3, 4});
  Result<std::vector<uint8_t>> bytes = encodeNpy(t);
  ASSERT_TRUE(bytes.ok()) << bytes.error();
  EXPECT_EQ(stringOf(*bytes), expected);
  Result<Tensor> back = parse(expected);
  ASSERT_TRUE(back.ok()) << back.error();
  expectSameTensor(*back, t);
}

// np.save(f, np.arange(3, dtype=np.uint8)): the storage of int4 codes.
TEST(NpyFormat, MatchesNumpyVectorU8) {
  std::string expected = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                         "{'descr': '|u1', 'fortran_order': False, "
                         "'shape': (3,), }" +
                         std::string(20 + 40, ' ') + "\n" +
                         std::string("\x00\x01\x0f", 3);
  Tensor t = Tensor::fromValues<uint8_t>(DType::U8, {3}, {0, 1, 15});
  Result<std::vector<uint8_t>> bytes = encodeNpy(t);
  ASSERT_TRUE(bytes.ok()) << bytes.error();
  EXPECT_EQ(stringOf(*bytes), expected);
  Result<Tensor> back = parse(expected);
  ASSERT_TRUE(back.ok()) << back.error();
  expectSameTensor(*back, t);
}

// np.save(f, np.zeros((2, 3, 4), np.float16)).
TEST(NpyFormat, MatchesNumpyF16Rank3) {
  std::string expected = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                         "{'descr': '<f2', 'fortran_order': False, "
                         "'shape': (2, 3, 4), }" +
                         std::string(20 + 35, ' ') + "\n" +
                         std::string(48, '\0');
  Tensor t(DType::F16, {2, 3, 4}, std::vector<uint8_t>(48, 0));
  Result<std::vector<uint8_t>> bytes = encodeNpy(t);
  ASSERT_TRUE(bytes.ok()) << bytes.error();
  EXPECT_EQ(stringOf(*bytes), expected);
}

// np.save(f, np.zeros((0, 1000, 1000, 1000, 1000, 4, 4, 1000, 100),
// np.float32)) The dict is 97 characters; the 20 spaces of growth room push the
// header past 128 bytes (without them it would be 118 in total), and since 10 +
// 97 + 20 + 1 = 128 is already aligned numpy still adds a full 64 spaces
// (padlen = 64 - 0): header length 182 = 0xb6, data at 192.
TEST(NpyFormat, GrowthRoomAndFullPadding) {
  std::string expected =
      std::string("\x93NUMPY\x01\x00\xb6\x00", 10) +
      "{'descr': '<f4', 'fortran_order': False, "
      "'shape': (0, 1000, 1000, 1000, 1000, 4, 4, 1000, 100), }" +
      std::string(20 + 64, ' ') + "\n";
  ASSERT_EQ(expected.size(), 192u);
  Tensor t(DType::F32, {0, 1000, 1000, 1000, 1000, 4, 4, 1000, 100}, {});
  Result<std::vector<uint8_t>> bytes = encodeNpy(t);
  ASSERT_TRUE(bytes.ok()) << bytes.error();
  EXPECT_EQ(stringOf(*bytes), expected);
  Result<Tensor> back = parse(expected);
  ASSERT_TRUE(back.ok()) << back.error();
  expectSameTensor(*back, t);
}

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

class NpyRoundTrip : public TempDirTest {};

TEST_F(NpyRoundTrip, EveryDTypeAndRank) {
  const DType dtypes[] = {DType::F32, DType::F16, DType::I32, DType::I64, DType::U8};
  const std::vector<std::vector<int64_t>> shapes = {
      {}, {1}, {5}, {2, 3}, {2, 3, 4}, {0}, {3, 0, 2}, {1, 1, 1, 1, 7}};
  unsigned seed = 0;
  for (DType dtype : dtypes) {
    for (const auto &shape : shapes) {
      size_t n = static_cast<size_t>(*shapeNumElements(shape));
      Tensor t(dtype, shape, patternBytes(n * elementSize(dtype), ++seed));
      std::string file = path(std::string(dtypeName(dtype)) + "_" +
                              std::to_string(seed) + ".npy");
      ASSERT_TRUE(writeNpy(file, t).ok());
      Result<Tensor> back = readNpy(file);
      ASSERT_TRUE(back.ok()) << back.error();
      expectSameTensor(*back, t);
      // The data starts at a multiple of 64 bytes.
      Result<std::vector<uint8_t>> raw = readFileBytes(file);
      ASSERT_TRUE(raw.ok());
      EXPECT_EQ((raw->size() - t.data.size()) % 64, 0u);
      EXPECT_EQ((*raw)[raw->size() - t.data.size() - 1], '\n');
    }
  }
}

TEST_F(NpyRoundTrip, WritesVersion2WhenHeaderTooLong) {
  // 30000 dimensions of size 1: the header cannot fit in 65535 bytes.
  Tensor t(DType::F32, std::vector<int64_t>(30000, 1), patternBytes(4));
  std::string file = path("long.npy");
  ASSERT_TRUE(writeNpy(file, t).ok());
  Result<std::vector<uint8_t>> raw = readFileBytes(file);
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ((*raw)[6], 2);
  EXPECT_EQ((*raw)[7], 0);
  EXPECT_EQ((raw->size() - 4) % 64, 0u);
  Result<Tensor> back = readNpy(file);
  ASSERT_TRUE(back.ok()) << back.error();
  expectSameTensor(*back, t);
}

TEST(Npy, WriteRejectsBF16AndBadTensors) {
  Tensor bf(DType::BF16, {2}, std::vector<uint8_t>(4, 0));
  EXPECT_TRUE(failsWith(encodeNpy(bf, "y.npy"), "y.npy", "bf16"));
  Tensor wrongSize(DType::F32, {2, 3}, std::vector<uint8_t>(20, 0));
  EXPECT_TRUE(failsWith(encodeNpy(wrongSize, "y.npy"), "y.npy", "needs 24"));
  Tensor negative(DType::F32, {-1}, {});
  EXPECT_TRUE(failsWith(encodeNpy(negative, "y.npy"), "y.npy", "negative"));
}

//===----------------------------------------------------------------------===//
// Accepted header variants
//===----------------------------------------------------------------------===//

TEST(NpyRead, AcceptsHeaderVariants) {
  const std::string data = f32Data({1, 2, 3, 4, 5, 6});
  const std::vector<std::string> headers = {
      // No padding, no trailing comma, double quotes, other key order.
      "{\"shape\":(2,3),\"fortran_order\":False,\"descr\":\"<f4\"}",
      "{'descr': '|f4', 'fortran_order': False, 'shape': (2, 3)}   \n",
      "{'descr': '=f4', 'fortran_order': False, 'shape': (2, 3), }\n",
      "{'descr': 'f4', 'fortran_order': False, 'shape': (2, 3,), }\n",
      // Python 2 long suffix, tolerated by numpy for 1.0 / 2.0 files.
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }\n",
      "\t{ 'descr' : '<f4' ,\n 'fortran_order' : False , 'shape' : ( 2 , 3 ) }",
  };
  for (const std::string &h : headers) {
    Result<Tensor> t = parse(npyV1(h, data));
    ASSERT_TRUE(t.ok()) << h << ": " << t.error();
    EXPECT_EQ(t->dtype, DType::F32);
    EXPECT_EQ(t->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(t->toVector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  }
}

TEST(NpyRead, AcceptsVersions2And3) {
  const std::string h =
      "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }\n";
  std::string data("\x07\x00\x00\x00\xff\xff\xff\xff", 8);
  for (int major : {2, 3}) {
    Result<Tensor> t = parse(npyV23(major, h, data));
    ASSERT_TRUE(t.ok()) << t.error();
    EXPECT_EQ(t->toVector<int32_t>(), (std::vector<int32_t>{7, -1}));
  }
}

TEST(NpyRead, DTypes) {
  struct Case {
    const char *descr;
    DType dtype;
  } cases[] = {{"<f4", DType::F32},
               {"<f2", DType::F16},
               {"<i4", DType::I32},
               {"<i8", DType::I64}};
  for (const Case &c : cases) {
    std::string h = std::string("{'descr': '") + c.descr +
                    "', 'fortran_order': False, 'shape': (3,), }\n";
    size_t bytes = 3 * elementSize(c.dtype);
    Result<Tensor> t = parse(npyV1(h, std::string(bytes, '\x01')));
    ASSERT_TRUE(t.ok()) << t.error();
    EXPECT_EQ(t->dtype, c.dtype);
    EXPECT_EQ(t->data.size(), bytes);
  }
}

TEST(NpyRead, ZeroSizedArrays) {
  Result<Tensor> t = parse(
      npyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }"));
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_EQ(t->numElements(), 0);
  // A huge dimension next to a zero one is still an empty array.
  t = parse(npyV1("{'descr': '<f4', 'fortran_order': False, "
                  "'shape': (9223372036854775807, 0), }"));
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_EQ(t->numElements(), 0);
}

//===----------------------------------------------------------------------===//
// Malformed files
//===----------------------------------------------------------------------===//

const char *kGoodHeader =
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";

TEST(NpyMalformed, BadMagic) {
  std::string bytes = npyV1(kGoodHeader, f32Data({1, 2}));
  bytes[1] = 'M';
  EXPECT_TRUE(failsWith(parse(bytes), "x.npy", "bad magic"));
  EXPECT_TRUE(failsWith(parse(""), "x.npy", "bad magic"));
  EXPECT_TRUE(failsWith(parse("\x93NUM"), "x.npy", "bad magic"));
  EXPECT_TRUE(
      failsWith(parse("PK\x03\x04 this is a zip"), "x.npy", "bad magic"));
}

TEST(NpyMalformed, TruncatedHeader) {
  std::string full = npyV1(kGoodHeader, f32Data({1, 2}));
  EXPECT_TRUE(failsWith(parse(full.substr(0, 7)), "x.npy", "truncated"));
  EXPECT_TRUE(failsWith(parse(full.substr(0, 9)), "x.npy", "truncated"));
  EXPECT_TRUE(failsWith(parse(full.substr(0, 30)), "x.npy",
                        "header length 58 exceeds the file size (30 bytes)"));
  std::string v2 = npyV23(2, kGoodHeader, f32Data({1, 2}));
  EXPECT_TRUE(failsWith(parse(v2.substr(0, 11)), "x.npy", "truncated"));
}

TEST(NpyMalformed, HeaderLengthBeyondFile) {
  std::string bytes = npyV1(kGoodHeader, f32Data({1, 2}));
  bytes[8] = '\xff';
  bytes[9] = '\xff';
  EXPECT_TRUE(failsWith(parse(bytes), "x.npy",
                        "header length 65535 exceeds the file size"));
  std::string v2 = npyV23(2, kGoodHeader, f32Data({1, 2}));
  v2[8] = v2[9] = v2[10] = v2[11] = '\xff';
  EXPECT_TRUE(failsWith(parse(v2), "x.npy",
                        "header length 4294967295 exceeds the file size"));
}

TEST(NpyMalformed, UnsupportedVersion) {
  std::string bytes = npyV1(kGoodHeader, f32Data({1, 2}));
  bytes[6] = 4;
  EXPECT_TRUE(failsWith(parse(bytes), "x.npy",
                        "unsupported .npy format "
                        "version 4.0"));
  bytes[6] = 1;
  bytes[7] = 1;
  EXPECT_TRUE(failsWith(parse(bytes), "x.npy", "version 1.1"));
}

TEST(NpyMalformed, FortranOrder) {
  EXPECT_TRUE(failsWith(
      parse(npyV1("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                  f32Data({1, 2, 3, 4}))),
      "x.npy", "fortran_order=True"));
  EXPECT_TRUE(failsWith(
      parse(npyV1("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }",
                  f32Data({1, 2}))),
      "x.npy", "'fortran_order' is not True or False"));
}

TEST(NpyMalformed, BigEndian) {
  EXPECT_TRUE(failsWith(
      parse(npyV1("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
                  f32Data({1, 2}))),
      "x.npy", "big-endian dtype '>f4' is not supported"));
  EXPECT_TRUE(failsWith(
      parse(npyV1("{'descr': '>i8', 'fortran_order': False, 'shape': (1,), }",
                  std::string(8, '\0'))),
      "x.npy", "big-endian"));
}

TEST(NpyMalformed, UnknownDType) {
  EXPECT_TRUE(failsWith(
      parse(npyV1("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
                  std::string(8, '\0'))),
      "x.npy", "unsupported dtype '<c8'"));
  for (const char *descr : {"<f8", "<u2", "|i1", "|b1", "<U3", "|O", "float32", ""}) {
    std::string h = std::string("{'descr': '") + descr +
                    "', 'fortran_order': False, 'shape': (1,), }";
    EXPECT_TRUE(failsWith(parse(npyV1(h, std::string(8, '\0'))), "x.npy",
                          "unsupported dtype"))
        << descr;
  }
  // Structured dtypes are lists.
  EXPECT_TRUE(failsWith(parse(npyV1("{'descr': [('a', '<f4')], "
                                    "'fortran_order': False, 'shape': (1,), }",
                                    f32Data({1}))),
                        "x.npy", "structured"));
}

TEST(NpyMalformed, NegativeShape) {
  EXPECT_TRUE(failsWith(
      parse(npyV1(
          "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 3), }")),
      "x.npy", "negative dimension -1"));
}

TEST(NpyMalformed, ShapeOverflow) {
  EXPECT_TRUE(failsWith(parse(npyV1("{'descr': '<f4', 'fortran_order': False, "
                                    "'shape': (4294967296, 4294967296), }")),
                        "x.npy", "overflows"));
  EXPECT_TRUE(failsWith(parse(npyV1("{'descr': '<f4', 'fortran_order': False, "
                                    "'shape': (4611686018427387904,), }")),
                        "x.npy", "overflows"));
  EXPECT_TRUE(failsWith(parse(npyV1("{'descr': '<f4', 'fortran_order': False, "
                                    "'shape': (99999999999999999999999,), }")),
                        "x.npy", "too large"));
}

TEST(NpyMalformed, DataTooShort) {
  EXPECT_TRUE(failsWith(parse(npyV1(kGoodHeader, f32Data({1}))), "x.npy",
                        "data too short: shape [2] of f32 needs 8 bytes, "
                        "file has 4"));
  EXPECT_TRUE(failsWith(parse(npyV1(kGoodHeader)), "x.npy", "data too short"));
  // A huge shape with little data: no allocation, just an error.
  EXPECT_TRUE(failsWith(parse(npyV1("{'descr': '<f4', 'fortran_order': False, "
                                    "'shape': (1000000000, 1000000000), }",
                                    f32Data({1}))),
                        "x.npy", "data too short"));
}

TEST(NpyMalformed, TrailingData) {
  EXPECT_TRUE(failsWith(parse(npyV1(kGoodHeader, f32Data({1, 2, 3}))), "x.npy",
                        "unexpected trailing data"));
  EXPECT_TRUE(failsWith(parse(npyV1(kGoodHeader, f32Data({1, 2}) + "x")),
                        "x.npy", "unexpected trailing data"));
}

TEST(NpyMalformed, BadDictSyntax) {
  struct Case {
    const char *header;
    const char *needle;
  } cases[] = {
      {"", "expected a value"},
      {"   \n", "expected a value"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), ",
       "missing '}'"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (2,)}",
       "expected ':'"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}",
       "expected ',' or '}'"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}",
       "invalid header"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x",
       "after the header dictionary"},
      {"['descr', '<f4']", "not a dictionary"},
      {"{'descr': '<f4', 'fortran_order': False}", "missing key 'shape'"},
      {"{'fortran_order': False, 'shape': (2,)}", "missing key 'descr'"},
      {"{'descr': '<f4', 'shape': (2,)}", "missing key 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
       "unexpected key 'x'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
       "'shape': (2,)}",
       "duplicate key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2]}",
       "'shape' is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2)}",
       "'shape' is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': 2}",
       "'shape' is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,)}",
       "expected an integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ('2',)}",
       "entries must be integers"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}",
       "expected a value"},
      {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}",
       "unexpected name 'Maybe'"},
      {"{'descr': 7, 'fortran_order': False, 'shape': (2,)}",
       "'descr' is not a string"},
      {"{1: '<f4', 'fortran_order': False, 'shape': (2,)}",
       "keys must be strings"},
      {"{'descr': '\\x3cf4', 'fortran_order': False, 'shape': (2,)}", "escape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': "
       "((((((((((((((((((((((((((((((((((((2,))))))))))))))))))))))))))))))))"
       "))))}",
       "nesting too deep"},
  };
  for (const Case &c : cases) {
    Result<Tensor> t = parse(npyV1(c.header, f32Data({1, 2})));
    EXPECT_TRUE(failsWith(t, "x.npy", c.needle)) << c.header;
  }
}

TEST(NpyMalformed, MessagesStayOnOneLine) {
  // Control characters and non-ASCII bytes from the file are escaped.
  Result<Tensor> t = parse(
      npyV1("{'descr': '<f\n4\xff', 'fortran_order': False, 'shape': (2,), }",
            f32Data({1, 2})));
  EXPECT_TRUE(failsWith(t, "x.npy", "invalid header"));
  t = parse(npyV1("{'descr': '<f4\x01\xff', 'fortran_order': False, "
                  "'shape': (2,), }",
                  f32Data({1, 2})));
  EXPECT_TRUE(failsWith(t, "x.npy", "unsupported dtype '<f4\\x01\\xff'"));
}

TEST(NpyMalformed, RandomCorruptionNeverCrashes) {
  Tensor t = Tensor::fromValues<float>(DType::F32, {2, 3}, {0, 1, 2, 3, 4, 5});
  Result<std::vector<uint8_t>> good = encodeNpy(t);
  ASSERT_TRUE(good.ok());
  std::mt19937 rng(1234);
  int failures = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::vector<uint8_t> bytes = *good;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % bytes.size();
      switch (rng() % 4) {
      case 0:
        bytes[at] = static_cast<uint8_t>(rng());
        break;
      case 1:
        bytes.resize(at);
        break;
      case 2:
        bytes.insert(bytes.begin() + static_cast<long>(at),
                     static_cast<uint8_t>(rng()));
        break;
      default:
        bytes[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      }
      if (bytes.empty())
        break;
    }
    Result<Tensor> r = parseNpy(bytes.data(), bytes.size(), "fuzz.npy");
    if (!r.ok()) {
      ++failures;
      EXPECT_TRUE(isOneLineError(r.error(), "fuzz.npy", ""));
    } else {
      EXPECT_TRUE(r->validate("fuzz").ok());
    }
  }
  EXPECT_GT(failures, 0);
}

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

class NpyFiles : public TempDirTest {};

TEST_F(NpyFiles, MissingFile) {
  std::string file = path("does-not-exist.npy");
  EXPECT_TRUE(
      failsWith(readNpy(file), file, "cannot open: No such file or directory"));
}

TEST_F(NpyFiles, Directory) {
  EXPECT_TRUE(failsWith(readNpy(dir), dir, "Is a directory"));
}

TEST_F(NpyFiles, UnwritablePath) {
  std::string file = path("no-such-dir/out.npy");
  Tensor t = Tensor::fromValues<float>(DType::F32, {1}, {1});
  EXPECT_TRUE(failsWith(writeNpy(file, t), file,
                        "cannot open for writing: No such file or directory"));
}

TEST_F(NpyFiles, ErrorsNameTheFile) {
  std::string file = path("bad.npy");
  std::string bytes =
      npyV1("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
            std::string(8, '\0'));
  ASSERT_TRUE(writeFileBytes(file,
                             reinterpret_cast<const uint8_t *>(bytes.data()),
                             bytes.size())
                  .ok());
  Result<Tensor> t = readNpy(file);
  EXPECT_TRUE(failsWith(t, file, "unsupported dtype '<c8'"));
}

} // namespace

//===----------------------------------------------------------------------===//
// float64 data converted on read (readNpyConverting)
//===----------------------------------------------------------------------===//

namespace {

std::string f64File(const std::vector<double> &values) {
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (" +
                       std::to_string(values.size()) + ",), }";
  header += std::string(64 - (10 + header.size() + 1) % 64, ' ') + "\n";
  std::string data(values.size() * 8, '\0');
  std::memcpy(&data[0], values.data(), data.size());
  return npyV1(header, data);
}

/// Whether `got` (a value of the narrow type, exactly representable as a
/// double) is `value` rounded to nearest, ties to even: no neighbour of
/// `got` in the narrow type is nearer, and on a tie got's last bit is 0.
/// `prev`/`next` are got's neighbours (infinities beyond the range).
bool isNearestEven(double value, double got, double prev, double next,
                   uint16_t gotBits) {
  double d = std::fabs(value - got);
  double dPrev = std::fabs(value - prev), dNext = std::fabs(value - next);
  if (d > dPrev || d > dNext)
    return false;
  if (d == dPrev || d == dNext)
    return (gotBits & 1) == 0;
  return true;
}

double narrowToDouble(uint16_t bits, DType type) {
  return type == DType::BF16 ? bfloat16BitsToFloat(bits)
                             : halfBitsToFloat(bits);
}

} // namespace

TEST_F(NpyRoundTrip, Float64ConvertsWithOneRounding) {
  // Random doubles across the exponent ranges of bf16 and f16, plus the
  // hard cases: just above a midpoint by less than an f32 ulp (a rounding
  // through f32 would make them exact ties and round them to even).
  std::mt19937_64 rng(42);
  std::vector<double> values = {1.0 + 0x1p-8 + 0x1p-30, -(1.0 + 0x1p-8),
                                1.0 + 0x1p-8 - 0x1p-30, 0x1p-133, 65504.0,
                                1.0 + 0x1p-11 + 0x1p-40, 0.0, -0.0};
  for (int i = 0; i < 20000; ++i) {
    double mantissa = 1.0 + std::ldexp(static_cast<double>(rng() >> 12), -52);
    int exponent = static_cast<int>(rng() % 60) - 30;
    values.push_back((rng() & 1 ? -1 : 1) * std::ldexp(mantissa, exponent));
  }
  std::string file = path("f64.npy");
  {
    std::ofstream out(file, std::ios::binary);
    std::string bytes = f64File(values);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  for (DType type : {DType::BF16, DType::F16}) {
    bool wasF64 = false;
    Result<Tensor> t = readNpyConverting(file, type, wasF64);
    ASSERT_TRUE(t.ok()) << t.error();
    EXPECT_TRUE(wasF64);
    ASSERT_EQ(t->dtype, type);
    ASSERT_EQ(t->shape, std::vector<int64_t>{static_cast<int64_t>(values.size())});
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t bits;
      std::memcpy(&bits, t->data.data() + 2 * i, 2);
      double got = narrowToDouble(bits, type);
      if (std::isinf(got))
        continue; // beyond the type's range (f16 above 65520)
      // Neighbours: one unit in the last place either way (same sign).
      double a = narrowToDouble(static_cast<uint16_t>(bits + 1), type);
      double b = (bits & 0x7fff) == 0
                     ? -narrowToDouble(static_cast<uint16_t>(bits ^ 0x8001), type)
                     : narrowToDouble(static_cast<uint16_t>(bits - 1), type);
      ASSERT_TRUE(isNearestEven(values[i], got, std::min(a, b),
                                std::max(a, b), bits))
          << dtypeName(type) << " of " << values[i] << " gave " << got;
    }
  }
  // Exactly the documented hard case: 1 + 2^-8 + 2^-30 -> bf16 1 + 2^-7.
  bool wasF64 = false;
  Result<Tensor> bf = readNpyConverting(file, DType::BF16, wasF64);
  ASSERT_TRUE(bf.ok());
  uint16_t first;
  std::memcpy(&first, bf->data.data(), 2);
  EXPECT_EQ(bfloat16BitsToFloat(first), 1.0f + 0x1p-7f);
  // f32: one rounding too.
  Result<Tensor> f = readNpyConverting(file, DType::F32, wasF64);
  ASSERT_TRUE(f.ok());
  float f0;
  std::memcpy(&f0, f->data.data(), 4);
  EXPECT_EQ(f0, static_cast<float>(values[0]));
}

TEST_F(NpyRoundTrip, ParseNpyConvertingMatchesTheFileReader) {
  // The in-memory reader (moe-run's binding, fuzzed by moe-fuzz-io) gives
  // exactly what readNpyConverting gives for the same bytes, errors included.
  std::string bytes = f64File({1.0 + 0x1p-8 + 0x1p-30, -3.25, 65504.0, 0x1p-133});
  std::string file = path("f64c.npy");
  {
    std::ofstream out(file, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  const auto *raw = reinterpret_cast<const uint8_t *>(bytes.data());
  for (DType type : {DType::F32, DType::BF16, DType::F16, DType::I32}) {
    bool fromFile = false, fromMemory = false;
    Result<Tensor> a = readNpyConverting(file, type, fromFile);
    Result<Tensor> b = parseNpyConverting(raw, bytes.size(), file, type, fromMemory);
    EXPECT_EQ(fromFile, fromMemory);
    ASSERT_EQ(a.ok(), b.ok()) << dtypeName(type);
    if (a.ok())
      expectSameTensor(*b, *a);
    else
      EXPECT_EQ(a.error(), b.error());
  }
  // A truncated image is an error naming the given name, never a read past
  // the end.
  bool wasF64 = false;
  Result<Tensor> cut = parseNpyConverting(raw, bytes.size() - 3, "cut.npy", DType::F32, wasF64);
  EXPECT_FALSE(cut.ok());
  EXPECT_NE(cut.error().find("cut.npy"), std::string::npos) << cut.error();
}

TEST_F(NpyRoundTrip, Float64OnlyThroughConvertingReader) {
  std::string file = path("f64b.npy");
  {
    std::ofstream out(file, std::ios::binary);
    std::string bytes = f64File({1.5, 2.5});
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  EXPECT_TRUE(failsWith(readNpy(file), file, "unsupported dtype '<f8'"));
  bool wasF64 = false;
  EXPECT_TRUE(failsWith(readNpyConverting(file, DType::I32, wasF64), file,
                        "float64 data cannot bind to i32"));
  // Other dtypes pass through unchanged.
  Tensor t(DType::I64, {2}, patternBytes(16, 3));
  std::string plain = path("i64.npy");
  ASSERT_TRUE(writeNpy(plain, t).ok());
  Result<Tensor> back = readNpyConverting(plain, DType::F32, wasF64);
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(wasF64);
  expectSameTensor(*back, t);
}
