//===- SafeTensorsTest.cpp - .safetensors reader/writer tests -------------===//

#include "TestUtil.h"

#include <random>

using namespace moe::io;
using namespace moe::io::testing;

namespace {

/// A file image: 8-byte little-endian length of `header`, header, data.
std::string image(const std::string &header, const std::string &data = "") {
  std::string s;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    s += static_cast<char>((n >> (8 * i)) & 0xff);
  return s + header + data;
}

Result<SafeTensorsFile> load(const std::string &bytes) {
  return SafeTensorsFile::fromBuffer(bytesOf(bytes), "m.safetensors");
}

::testing::AssertionResult rejects(const std::string &bytes,
                                   const std::string &needle) {
  return failsWith(load(bytes), "m.safetensors", needle);
}

std::string f32Data(std::initializer_list<float> values) {
  std::string s(values.size() * 4, '\0');
  std::memcpy(&s[0], values.begin(), s.size());
  return s;
}

//===----------------------------------------------------------------------===//
// Byte-exact agreement with the reference implementation
// (huggingface/safetensors serialize(); expected bytes from its own tests).
//===----------------------------------------------------------------------===//

TEST(SafeTensorsFormat, MatchesReferenceSerialization) {
  // serialize({"attn.0": f32 [1, 2, 3] = 0..5}): a 64-byte header, no padding.
  Tensor t =
      Tensor::fromValues<float>(DType::F32, {1, 2, 3}, {0, 1, 2, 3, 4, 5});
  std::string expectedHeader =
      R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(expectedHeader.size(), 64u);
  Result<std::vector<uint8_t>> bytes = encodeSafeTensors({{"attn.0", t}});
  ASSERT_TRUE(bytes.ok()) << bytes.error();
  EXPECT_EQ(stringOf(*bytes),
            image(expectedHeader, f32Data({0, 1, 2, 3, 4, 5})));

  // {"attn0": f32 [1, 1, 2, 3]}: 65 bytes of JSON padded with 7 spaces to 72.
  Tensor t4 =
      Tensor::fromValues<float>(DType::F32, {1, 1, 2, 3}, {0, 1, 2, 3, 4, 5});
  bytes = encodeSafeTensors({{"attn0", t4}});
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(
      stringOf(*bytes),
      image(
          R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})"
          "       ",
          f32Data({0, 1, 2, 3, 4, 5})));
}

TEST(SafeTensorsFormat, MatchesReferenceEmptyAndMetadata) {
  Result<std::vector<uint8_t>> bytes = encodeSafeTensors({});
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(stringOf(*bytes), image("{}      "));
  bytes = encodeSafeTensors({}, {{"framework", "pt"}});
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(stringOf(*bytes), image(R"({"__metadata__":{"framework":"pt"}})"
                                    "     "));
}

TEST(SafeTensorsFormat, LayoutByAlignmentThenName) {
  // The reference sorts by descending dtype alignment (its Dtype enum order:
  // F16 < BF16 < I32 < F32 < I64), then by name; every tensor is then
  // naturally aligned in the data section.
  std::map<std::string, Tensor> tensors;
  tensors["a"] = Tensor(DType::F16, {3}, patternBytes(6, 1));
  tensors["b"] = Tensor(DType::F32, {1}, patternBytes(4, 2));
  tensors["c"] = Tensor(DType::I64, {1}, patternBytes(8, 3));
  tensors["d"] = Tensor(DType::BF16, {1}, patternBytes(2, 4));
  tensors["e"] = Tensor(DType::I32, {2}, patternBytes(8, 5));
  tensors["f"] = Tensor(DType::F32, {}, patternBytes(4, 6));
  Result<std::vector<uint8_t>> bytes =
      encodeSafeTensors(tensors, {{"b", "2"}, {"a", "1"}});
  ASSERT_TRUE(bytes.ok()) << bytes.error();
  std::string header =
      R"({"__metadata__":{"a":"1","b":"2"},)"
      R"("c":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
      R"("f":{"dtype":"F32","shape":[],"data_offsets":[12,16]},)"
      R"("e":{"dtype":"I32","shape":[2],"data_offsets":[16,24]},)"
      R"("d":{"dtype":"BF16","shape":[1],"data_offsets":[24,26]},)"
      R"("a":{"dtype":"F16","shape":[3],"data_offsets":[26,32]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string data;
  for (const char *name : {"c", "b", "f", "e", "d", "a"})
    data += stringOf(tensors[name].data);
  EXPECT_EQ(stringOf(*bytes), image(header, data));

  Result<SafeTensorsFile> file =
      SafeTensorsFile::fromBuffer(*bytes, "mixed.safetensors");
  ASSERT_TRUE(file.ok()) << file.error();
  EXPECT_EQ(file->names(),
            (std::vector<std::string>{"a", "b", "c", "d", "e", "f"}));
  for (const auto &[name, tensor] : tensors) {
    Result<Tensor> got = file->get(name);
    ASSERT_TRUE(got.ok()) << got.error();
    expectSameTensor(*got, tensor);
  }
}

TEST(SafeTensorsFormat, EscapesNames) {
  Tensor t = Tensor::fromValues<float>(DType::F32, {1}, {1});
  std::string name = "q\"\\\n\x01\xc3\xa9";
  Result<std::vector<uint8_t>> bytes = encodeSafeTensors({{name, t}});
  ASSERT_TRUE(bytes.ok());
  std::string text = stringOf(*bytes);
  EXPECT_NE(text.find(R"("q\"\\\n\u0001)"
                      "\xc3\xa9\""),
            std::string::npos);
  Result<SafeTensorsFile> file = SafeTensorsFile::fromBuffer(*bytes, "e");
  ASSERT_TRUE(file.ok()) << file.error();
  EXPECT_TRUE(file->contains(name));
  Result<Tensor> got = file->get(name);
  ASSERT_TRUE(got.ok());
  expectSameTensor(*got, t);
}

//===----------------------------------------------------------------------===//
// Round trips through files
//===----------------------------------------------------------------------===//

class SafeTensorsFiles : public TempDirTest {};

TEST_F(SafeTensorsFiles, RoundTripEveryDType) {
  std::map<std::string, Tensor> tensors;
  tensors["w.f32"] = Tensor(DType::F32, {2, 3, 4}, patternBytes(96, 1));
  tensors["w.f16"] = Tensor(DType::F16, {5}, patternBytes(10, 2));
  tensors["w.bf16"] = Tensor(DType::BF16, {3, 1}, patternBytes(6, 3));
  tensors["w.i32"] = Tensor(DType::I32, {2}, patternBytes(8, 4));
  tensors["w.i64"] = Tensor(DType::I64, {1, 1, 3}, patternBytes(24, 5));
  tensors["w.u8"] = Tensor(DType::U8, {3, 3}, patternBytes(9, 6));
  tensors["scalar"] = Tensor::fromValues<float>(DType::F32, {}, {3.25f});
  tensors["empty"] = Tensor(DType::F32, {0, 4}, {});
  std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                 {"note", "h\u00e9\n"}};
  std::string file = path("model.safetensors");
  ASSERT_TRUE(writeSafeTensors(file, tensors, metadata).ok());

  // What is written equals the in-memory encoding.
  Result<std::vector<uint8_t>> raw = readFileBytes(file);
  ASSERT_TRUE(raw.ok());
  Result<std::vector<uint8_t>> encoded = encodeSafeTensors(tensors, metadata);
  ASSERT_TRUE(encoded.ok());
  EXPECT_EQ(*raw, *encoded);
  // The data section starts at a multiple of 8.
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | (*raw)[i];
  EXPECT_EQ(n % 8, 0u);

  Result<SafeTensorsFile> st = SafeTensorsFile::open(file);
  ASSERT_TRUE(st.ok()) << st.error();
  EXPECT_EQ(st->path(), file);
  EXPECT_EQ(st->size(), tensors.size());
  EXPECT_EQ(st->metadata(), metadata);
  std::vector<std::string> expectedNames;
  for (const auto &entry : tensors)
    expectedNames.push_back(entry.first);
  EXPECT_EQ(st->names(), expectedNames);
  for (const auto &[name, tensor] : tensors) {
    const SafeTensorInfo *info = st->find(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_EQ(info->dtype, tensor.dtype);
    EXPECT_EQ(info->shape, tensor.shape);
    EXPECT_EQ(info->dataEnd - info->dataBegin, tensor.data.size());
    // Natural alignment of every tensor inside the data section.
    EXPECT_EQ(info->dataBegin % elementSize(tensor.dtype), 0u) << name;
    Result<Tensor> got = st->get(name);
    ASSERT_TRUE(got.ok()) << got.error();
    expectSameTensor(*got, tensor);
    if (!tensor.data.empty()) {
      EXPECT_EQ(std::memcmp(st->rawData(*info), tensor.data.data(),
                            tensor.data.size()),
                0);
    }
  }
  EXPECT_TRUE(failsWith(st->get("nope"), file, "no tensor named 'nope'"));

  // The object can be moved and still serves data.
  SafeTensorsFile moved = st.take();
  EXPECT_TRUE(moved.get("w.f32").ok());
}

TEST_F(SafeTensorsFiles, GetWithConversion) {
  std::map<std::string, Tensor> tensors;
  tensors["h"] =
      Tensor::fromValues<uint16_t>(DType::F16, {3}, {0x3C00, 0xC000, 0x7BFF});
  tensors["b"] =
      Tensor::fromValues<uint16_t>(DType::BF16, {2}, {0x3F80, 0x4000});
  tensors["f"] = Tensor::fromValues<float>(DType::F32, {2}, {1.0f, 65520.0f});
  tensors["i"] = Tensor::fromValues<int64_t>(DType::I64, {1}, {3});
  std::string file = path("conv.safetensors");
  ASSERT_TRUE(writeSafeTensors(file, tensors).ok());
  Result<SafeTensorsFile> st = SafeTensorsFile::open(file);
  ASSERT_TRUE(st.ok()) << st.error();

  Result<Tensor> h = st->get("h", DType::F32);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->toVector<float>(), (std::vector<float>{1.0f, -2.0f, 65504.0f}));
  Result<Tensor> b = st->get("b", DType::F32);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->toVector<float>(), (std::vector<float>{1.0f, 2.0f}));
  Result<Tensor> f16 = st->get("f", DType::F16);
  ASSERT_TRUE(f16.ok());
  EXPECT_EQ(f16->toVector<uint16_t>(), (std::vector<uint16_t>{0x3C00, 0x7C00}));
  Result<Tensor> bf = st->get("f", DType::BF16);
  ASSERT_TRUE(bf.ok());
  EXPECT_EQ(bf->toVector<uint16_t>(), (std::vector<uint16_t>{0x3F80, 0x4780}));
  Result<Tensor> i = st->get("i", DType::F32);
  ASSERT_TRUE(i.ok());
  EXPECT_EQ(i->toVector<float>(), (std::vector<float>{3.0f}));
  EXPECT_TRUE(failsWith(st->get("f", DType::I32), file, "cannot convert"));
  EXPECT_TRUE(failsWith(st->get("zz", DType::F32), file, "no tensor named"));
}

TEST_F(SafeTensorsFiles, OpenErrors) {
  std::string missing = path("missing.safetensors");
  EXPECT_TRUE(failsWith(SafeTensorsFile::open(missing), missing,
                        "cannot open: No such file or directory"));
  EXPECT_TRUE(failsWith(SafeTensorsFile::open(dir), dir, "Is a directory"));
  std::string empty = path("empty.safetensors");
  ASSERT_TRUE(writeFileBytes(empty, nullptr, 0).ok());
  EXPECT_TRUE(failsWith(SafeTensorsFile::open(empty), empty,
                        "file too small for a safetensors header (0 bytes)"));
  std::string bad = path("bad.safetensors");
  std::string bytes = image(R"({"w":{"dtype":"F64","shape":[1],)"
                            R"("data_offsets":[0,8]}})",
                            std::string(8, '\0'));
  ASSERT_TRUE(writeFileBytes(bad,
                             reinterpret_cast<const uint8_t *>(bytes.data()),
                             bytes.size())
                  .ok());
  EXPECT_TRUE(failsWith(SafeTensorsFile::open(bad), bad,
                        "tensor 'w': unsupported dtype 'F64'"));
}

TEST_F(SafeTensorsFiles, WriteErrors) {
  std::string file = path("nodir/x.safetensors");
  Tensor t = Tensor::fromValues<float>(DType::F32, {1}, {1});
  EXPECT_TRUE(failsWith(writeSafeTensors(file, {{"t", t}}), file,
                        "cannot open for writing: No such file or directory"));
  std::string ok = path("x.safetensors");
  EXPECT_TRUE(
      failsWith(writeSafeTensors(ok, {{"__metadata__", t}}), ok, "reserved"));
  Tensor inconsistent(DType::F32, {2}, std::vector<uint8_t>(4));
  EXPECT_TRUE(
      failsWith(writeSafeTensors(ok, {{"w", inconsistent}}), ok, "tensor 'w'"));
}

//===----------------------------------------------------------------------===//
// Header validation, one rule at a time
//===----------------------------------------------------------------------===//

const std::string kEntry =
    R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

TEST(SafeTensorsValidation, AcceptsMinimalFile) {
  Result<SafeTensorsFile> f = load(image(kEntry, f32Data({1, 2})));
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->names(), (std::vector<std::string>{"w"}));
  EXPECT_TRUE(f->metadata().empty());
  EXPECT_EQ(f->get("w")->toVector<float>(), (std::vector<float>{1, 2}));
}

TEST(SafeTensorsValidation, FileTooSmall) {
  EXPECT_TRUE(rejects("", "file too small"));
  EXPECT_TRUE(rejects("\x02\x00\x00", "file too small"));
}

TEST(SafeTensorsValidation, HeaderLengthBeyondFile) {
  std::string bytes = image(kEntry, f32Data({1, 2}));
  bytes[0] = static_cast<char>(bytes.size()); // > size - 8
  EXPECT_TRUE(rejects(bytes, "exceeds the file size"));
  std::string huge = bytes;
  for (int i = 0; i < 8; ++i)
    huge[i] = '\xff';
  EXPECT_TRUE(rejects(huge, "header length 18446744073709551615 exceeds the "
                            "file size"));
}

TEST(SafeTensorsValidation, InvalidJson) {
  EXPECT_TRUE(rejects(image(R"({"w":{"dtype":"F32",)"), "invalid JSON header"));
  EXPECT_TRUE(rejects(image("{'w': 1}"), "invalid JSON header"));
  EXPECT_TRUE(rejects(image(""), "invalid JSON header"));
  EXPECT_TRUE(rejects(image(R"({"w\x": 1})"), "invalid JSON header"));
  // Invalid UTF-8 inside a string.
  EXPECT_TRUE(rejects(image("{\"\xff\": 1}"), "invalid UTF-8"));
  // The message gives the file offset of the problem.
  EXPECT_TRUE(rejects(image("{\"a\" 1}"), "(file offset 13)"));
}

TEST(SafeTensorsValidation, TrailingGarbage) {
  EXPECT_TRUE(rejects(image("{} x"), "unexpected characters after the JSON"));
  EXPECT_TRUE(
      rejects(image(kEntry + "}", f32Data({1, 2})), "unexpected characters"));
  // Trailing spaces (the writer's padding) are fine.
  EXPECT_TRUE(load(image(kEntry + "    \n\t", f32Data({1, 2}))).ok());
}

TEST(SafeTensorsValidation, NotAnObject) {
  EXPECT_TRUE(rejects(image("[]"), "not an object"));
  EXPECT_TRUE(rejects(image(R"({"w": [1]})"), "tensor 'w': header entry is "
                                              "not a JSON object"));
}

TEST(SafeTensorsValidation, UnknownDType) {
  for (const char *dtype : {"F64", "I8", "U16", "BOOL", "F8_E5M2", "f32", ""}) {
    std::string h = std::string(R"({"layer.w":{"dtype":")") + dtype +
                    R"(","shape":[1],"data_offsets":[0,4]}})";
    EXPECT_TRUE(rejects(image(h, f32Data({1})),
                        std::string("tensor 'layer.w': unsupported dtype '") +
                            dtype + "'"))
        << dtype;
  }
  EXPECT_TRUE(
      rejects(image(R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})",
                    f32Data({1})),
              "tensor 'w': 'dtype' is not a string"));
}

TEST(SafeTensorsValidation, MissingFields) {
  EXPECT_TRUE(
      rejects(image(R"({"w":{"dtype":"F32","shape":[2]}})", f32Data({1, 2})),
              "tensor 'w': missing 'data_offsets'"));
  EXPECT_TRUE(rejects(
      image(R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", f32Data({1, 2})),
      "tensor 'w': missing 'shape'"));
  EXPECT_TRUE(rejects(
      image(R"({"w":{"shape":[2],"data_offsets":[0,8]}})", f32Data({1, 2})),
      "tensor 'w': missing 'dtype'"));
}

TEST(SafeTensorsValidation, BadShape) {
  for (const char *shape : {"[-2]", "[2.0]", "[\"2\"]", "2", "[null]", "[1e1]",
                            "[18446744073709551616]"}) {
    std::string h = std::string(R"({"w":{"dtype":"F32","shape":)") + shape +
                    R"(,"data_offsets":[0,8]}})";
    EXPECT_TRUE(rejects(image(h, f32Data({1, 2})), "tensor 'w': 'shape'"))
        << shape;
  }
  EXPECT_TRUE(
      rejects(image(R"({"w":{"dtype":"F32","shape":[9223372036854775808],)"
                    R"("data_offsets":[0,8]}})",
                    f32Data({1, 2})),
              "too large"));
}

TEST(SafeTensorsValidation, BadDataOffsets) {
  for (const char *offsets :
       {"[0]", "[0,8,8]", "[0,-8]", "[0,8.0]", "{}", "\"0,8\"", "[]"}) {
    std::string h =
        std::string(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":)") +
        offsets + "}}";
    EXPECT_TRUE(rejects(image(h, f32Data({1, 2})),
                        "tensor 'w': 'data_offsets' must be [begin, end]"))
        << offsets;
  }
}

TEST(SafeTensorsValidation, OffsetsBeyondFile) {
  EXPECT_TRUE(rejects(
      image(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
            f32Data({1, 2})),
      "tensor 'w': data_offsets end 12 exceeds the data section size (8 "
      "bytes)"));
  // Huge offsets: no allocation, no overflow.
  EXPECT_TRUE(rejects(
      image(R"({"w":{"dtype":"F32","shape":[2],)"
            R"("data_offsets":[18446744073709551608,18446744073709551615]}})",
            f32Data({1, 2})),
      "exceeds the data section size"));
}

TEST(SafeTensorsValidation, BeginAfterEnd) {
  EXPECT_TRUE(
      rejects(image(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})",
                    f32Data({1, 2})),
              "tensor 'w': data_offsets begin 8 is after end 0"));
}

TEST(SafeTensorsValidation, SizeMismatch) {
  EXPECT_TRUE(rejects(
      image(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,8]}})",
            f32Data({1, 2})),
      "tensor 'w': data_offsets span 8 bytes but shape [2, 3] of F32 needs "
      "24"));
  EXPECT_TRUE(
      rejects(image(R"({"w":{"dtype":"F16","shape":[2],"data_offsets":[0,8]}})",
                    f32Data({1, 2})),
              "needs 4"));
  // Element count overflow is reported, not wrapped.
  EXPECT_TRUE(
      rejects(image(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],)"
                    R"("data_offsets":[0,0]}})"),
              "is too large (element count overflows)"));
  EXPECT_TRUE(
      rejects(image(R"({"w":{"dtype":"I64","shape":[4611686018427387904],)"
                    R"("data_offsets":[0,0]}})"),
              "overflows"));
}

TEST(SafeTensorsValidation, Overlap) {
  EXPECT_TRUE(
      rejects(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                    f32Data({1, 2, 3})),
              "tensors 'a' and 'b' overlap (bytes [0, 8) and [4, 12))"));
  // Same range twice.
  EXPECT_TRUE(
      rejects(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})",
                    f32Data({1})),
              "overlap"));
  // One range inside another, listed in reverse order.
  EXPECT_TRUE(rejects(
      image(R"({"in":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
            R"("out":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
            f32Data({1, 2, 3, 4})),
      "overlap"));
  // Touching ranges and empty tensors anywhere are fine.
  Result<SafeTensorsFile> f =
      load(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                 R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                 R"("e":{"dtype":"F32","shape":[0],"data_offsets":[2,2]},)"
                 R"("z":{"dtype":"F32","shape":[0,3],"data_offsets":[8,8]}})",
                 f32Data({1, 2})));
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->get("b")->toVector<float>(), (std::vector<float>{2}));
  EXPECT_TRUE(f->get("e")->data.empty());
}

TEST(SafeTensorsValidation, DuplicateKeys) {
  EXPECT_TRUE(
      rejects(image(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                    f32Data({1, 2})),
              "duplicate key 'w'"));
  EXPECT_TRUE(rejects(image(R"({"w":{"dtype":"F32","dtype":"F16","shape":[1],)"
                            R"("data_offsets":[0,4]}})",
                            f32Data({1})),
                      "duplicate key 'dtype'"));
}

TEST(SafeTensorsValidation, ZeroDTensorIsFine) {
  Result<SafeTensorsFile> f =
      load(image(R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})",
                 f32Data({7})));
  ASSERT_TRUE(f.ok()) << f.error();
  Result<Tensor> s = f->get("s");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->toVector<float>(), (std::vector<float>{7}));
  // A 0-d tensor needs exactly one element.
  EXPECT_TRUE(rejects(image(R"({"s":{"dtype":"F32","shape":[],)"
                            R"("data_offsets":[0,0]}})"),
                      "needs 4"));
}

TEST(SafeTensorsValidation, MetadataIsFine) {
  Result<SafeTensorsFile> f =
      load(image(R"({"__metadata__":{"format":"pt","x":"\u00e9"},)"
                 R"("w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                 f32Data({1})));
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->names(), (std::vector<std::string>{"w"}));
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(f->metadata().at("x"), "\xc3\xa9");
  EXPECT_FALSE(f->contains("__metadata__"));
  // Only metadata, no tensors.
  EXPECT_TRUE(load(image(R"({"__metadata__":{}})")).ok());
}

TEST(SafeTensorsValidation, BadMetadata) {
  EXPECT_TRUE(rejects(image(R"({"__metadata__":{"a":1}})"),
                      "'__metadata__' value for key 'a' is not a string"));
  EXPECT_TRUE(rejects(image(R"({"__metadata__":["a"]})"),
                      "'__metadata__' is not an object"));
}

TEST(SafeTensorsValidation, LenientWhereTheReferenceIsToo) {
  // Unknown fields in an entry are ignored (serde ignores them as well).
  EXPECT_TRUE(load(image(R"({"w":{"dtype":"F32","shape":[1],"extra":[1,{}],)"
                         R"("data_offsets":[0,4]}})",
                         f32Data({1})))
                  .ok());
  // Gaps and unused trailing bytes are accepted (the reference rejects them).
  Result<SafeTensorsFile> f =
      load(image(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                 f32Data({1, 2, 3})));
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ(f->get("w")->toVector<float>(), (std::vector<float>{2}));
}

TEST(SafeTensorsValidation, DeepNesting) {
  std::string deep(200, '[');
  EXPECT_TRUE(rejects(image(R"({"w":{"dtype":"F32","shape":[1],"x":)" + deep),
                      "nesting deeper than 64"));
}

TEST(SafeTensorsValidation, MessagesStayOnOneLine) {
  // Tensor names are quoted and escaped in messages.
  EXPECT_TRUE(
      rejects(image(R"({"a\nb\u0001\u00e9":{"dtype":"F64","shape":[1],)"
                    R"("data_offsets":[0,8]}})",
                    std::string(8, '\0')),
              "tensor 'a\\nb\\x01\\xc3\\xa9': unsupported dtype 'F64'"));
  Result<SafeTensorsFile> f = load(image(kEntry, f32Data({1, 2})));
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(
      failsWith(f->get("x\ny"), "m.safetensors", "no tensor named 'x\\ny'"));
}

TEST(SafeTensorsValidation, RandomCorruptionNeverCrashes) {
  std::map<std::string, Tensor> tensors;
  tensors["a"] = Tensor(DType::F32, {2, 3}, patternBytes(24, 1));
  tensors["b"] = Tensor(DType::I64, {2}, patternBytes(16, 2));
  tensors["c"] = Tensor(DType::F16, {}, patternBytes(2, 3));
  Result<std::vector<uint8_t>> good = encodeSafeTensors(tensors, {{"k", "v"}});
  ASSERT_TRUE(good.ok());
  std::mt19937 rng(99);
  int failures = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::vector<uint8_t> bytes = *good;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !bytes.empty(); ++e) {
      size_t at = rng() % bytes.size();
      switch (rng() % 5) {
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
      case 3:
        // Digits are the interesting bytes of a header.
        bytes[at] = static_cast<uint8_t>('0' + rng() % 10);
        break;
      default:
        bytes[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      }
    }
    Result<SafeTensorsFile> f =
        SafeTensorsFile::fromBuffer(bytes, "fuzz.safetensors");
    if (!f.ok()) {
      ++failures;
      EXPECT_TRUE(isOneLineError(f.error(), "fuzz.safetensors", ""));
      continue;
    }
    for (const SafeTensorInfo &info : f->tensors()) {
      Result<Tensor> t = f->get(info.name);
      ASSERT_TRUE(t.ok());
      EXPECT_TRUE(t->validate("t").ok());
      EXPECT_TRUE(f->get(info.name, DType::F32).ok());
    }
  }
  EXPECT_GT(failures, 0);
}

} // namespace
