//===- TensorTest.cpp - Tensor value type and helpers ---------------------===//

#include "TestUtil.h"

using namespace moe::io;
using namespace moe::io::testing;

namespace {

TEST(DType, Properties) {
  EXPECT_EQ(elementSize(DType::F32), 4u);
  EXPECT_EQ(elementSize(DType::F16), 2u);
  EXPECT_EQ(elementSize(DType::BF16), 2u);
  EXPECT_EQ(elementSize(DType::I32), 4u);
  EXPECT_EQ(elementSize(DType::I64), 8u);
  EXPECT_STREQ(dtypeName(DType::BF16), "bf16");
  EXPECT_STREQ(dtypeName(DType::I64), "i64");
  EXPECT_STREQ(safetensorsDTypeName(DType::BF16), "BF16");
  EXPECT_STREQ(npyDescr(DType::F16), "<f2");
  EXPECT_EQ(npyDescr(DType::BF16), nullptr);
  EXPECT_EQ(parseDType("f32"), DType::F32);
  EXPECT_EQ(parseDType("BF16"), DType::BF16);
  EXPECT_EQ(parseDType("i64"), DType::I64);
  EXPECT_FALSE(parseDType("F64").has_value());
  EXPECT_FALSE(parseDType("").has_value());
  EXPECT_TRUE(isFloatType(DType::BF16));
  EXPECT_FALSE(isFloatType(DType::I32));
}

TEST(Shape, ElementCounts) {
  EXPECT_EQ(shapeNumElements({}), 1);
  EXPECT_EQ(shapeNumElements({5}), 5);
  EXPECT_EQ(shapeNumElements({2, 3, 4}), 24);
  EXPECT_EQ(shapeNumElements({0, 7}), 0);
  EXPECT_EQ(shapeNumElements({INT64_MAX, 0}), 0);
  EXPECT_EQ(shapeNumElements({INT64_MAX}), INT64_MAX);
  EXPECT_FALSE(shapeNumElements({INT64_MAX, 2}).has_value());
  EXPECT_FALSE(shapeNumElements({1LL << 32, 1LL << 32}).has_value());
  EXPECT_FALSE(shapeNumElements({-1}).has_value());
  EXPECT_EQ(formatShape({}), "[]");
  EXPECT_EQ(formatShape({2, 3}), "[2, 3]");
}

TEST(TensorValue, Basics) {
  Tensor t = Tensor::fromValues<int32_t>(DType::I32, {2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(t.rank(), 2);
  EXPECT_EQ(t.numElements(), 4);
  EXPECT_EQ(t.elementSize(), 4u);
  EXPECT_EQ(t.byteSize(), 16u);
  EXPECT_TRUE(t.validate("t").ok());
  EXPECT_EQ(t.toVector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4}));

  Tensor scalar = Tensor::fromValues<float>(DType::F32, {}, {1.5f});
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.numElements(), 1);
  EXPECT_TRUE(scalar.validate("s").ok());

  Tensor defaultTensor;
  EXPECT_FALSE(defaultTensor.validate("d").ok()); // 0-d needs 4 bytes
}

TEST(TensorValue, Validate) {
  Tensor shortData(DType::F32, {2, 3}, std::vector<uint8_t>(23));
  EXPECT_TRUE(failsWith(shortData.validate("a.bin"), "a.bin",
                        "tensor data has 23 bytes but shape [2, 3] of f32 "
                        "needs 24"));
  Tensor negative(DType::F32, {2, -3}, {});
  EXPECT_TRUE(failsWith(negative.validate("a.bin"), "a.bin", "negative"));
  EXPECT_EQ(negative.numElements(), -1);
  Tensor huge(DType::I64, {1LL << 62}, {});
  EXPECT_TRUE(failsWith(huge.validate("a.bin"), "a.bin", "too large"));
}

TEST(ResultType, ValueAndError) {
  Result<int> ok = 5;
  EXPECT_TRUE(ok.ok());
  EXPECT_TRUE(static_cast<bool>(ok));
  EXPECT_EQ(*ok, 5);
  EXPECT_TRUE(ok.error().empty());
  EXPECT_TRUE(ok.status().ok());

  Result<int> bad = Error{"f: broken"};
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), "f: broken");
  EXPECT_EQ(bad.status().error(), "f: broken");

  Status s;
  EXPECT_TRUE(s.ok());
  Status e = Error{"g: nope"};
  EXPECT_FALSE(e.ok());
  Result<std::string> forwarded = e;
  EXPECT_EQ(forwarded.error(), "g: nope");

  Result<std::vector<int>> moved = std::vector<int>{1, 2};
  std::vector<int> taken = moved.take();
  EXPECT_EQ(taken.size(), 2u);
}

class Files : public TempDirTest {};

TEST_F(Files, ReadWriteBytes) {
  std::string file = path("raw.bin");
  std::vector<uint8_t> bytes = patternBytes(200000);
  ASSERT_TRUE(writeFileBytes(file, bytes.data(), bytes.size()).ok());
  Result<std::vector<uint8_t>> back = readFileBytes(file);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, bytes);

  ASSERT_TRUE(writeFileBytes(file, nullptr, 0).ok());
  back = readFileBytes(file);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->empty());
}

TEST_F(Files, Errors) {
  std::string missing = path("missing.bin");
  EXPECT_TRUE(failsWith(readFileBytes(missing), missing,
                        "cannot open: No such file or directory"));
  EXPECT_TRUE(failsWith(readFileBytes(dir), dir, "Is a directory"));
  std::string bad = path("nodir/x.bin");
  uint8_t byte = 0;
  EXPECT_TRUE(
      failsWith(writeFileBytes(bad, &byte, 1), bad, "cannot open for writing"));
  // A path with a newline is escaped so the message stays on one line.
  std::string odd = path("line\nbreak.bin");
  Result<std::vector<uint8_t>> r = readFileBytes(odd);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().find('\n'), std::string::npos);
  EXPECT_NE(r.error().find("line\\nbreak.bin"), std::string::npos);
}

TEST_F(Files, ReadsSpecialFiles) {
  // Non-regular files are read until EOF.
  Result<std::vector<uint8_t>> r = readFileBytes("/dev/null");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(r->empty());
}

} // namespace
