//===- CheckpointTest.cpp - TensorStore and checkpoint assembly -----------===//

#include "runtime/io/Checkpoint.h"
#include "runtime/io/Internal.h"
#include "runtime/io/Quantized.h"

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

using namespace moe::io;
using moe::io::testing::TempDirTest;

namespace {

class CheckpointTest : public TempDirTest {
protected:
  void writeText(const std::string &name, const std::string &text) {
    std::ofstream(path(name)) << text;
  }
  void writeFile(const std::string &name,
                 const std::map<std::string, Tensor> &tensors) {
    ASSERT_TRUE(writeSafeTensors(path(name), tensors).ok());
  }
  static Tensor f32(std::vector<int64_t> shape, std::vector<float> v) {
    return Tensor::fromValues(DType::F32, std::move(shape), v);
  }
  static Tensor bf16(std::vector<int64_t> shape, std::vector<float> v) {
    auto t = convertTensor(f32(std::move(shape), v), DType::BF16);
    return t.take();
  }
};

TEST_F(CheckpointTest, FileIsMemoryMapped) {
  writeFile("a.safetensors", {{"w", f32({2}, {1, 2})}});
  TensorStore store;
  ASSERT_TRUE(store.add(path("a.safetensors")).ok());
  const TensorStore::Entry *entry = store.find("w");
  ASSERT_NE(entry, nullptr);
  const uint8_t *raw = store.rawData(*entry);
  float v[2];
  std::memcpy(v, raw, sizeof v);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 2.0f);
  EXPECT_EQ(store.numFiles(), 1u);
  EXPECT_EQ(store.find("missing"), nullptr);
  // The file is mapped while the store lives (Linux: /proc/self/maps).
  std::ifstream maps("/proc/self/maps");
  if (maps) {
    std::string all((std::istreambuf_iterator<char>(maps)),
                    std::istreambuf_iterator<char>());
    EXPECT_NE(all.find(path("a.safetensors")), std::string::npos);
  }
}

TEST_F(CheckpointTest, ParseIndex) {
  auto map = parseSafeTensorsIndex(
      R"({"metadata": {"total_size": 8}, "weight_map": {"a": "one.safetensors", "b": "sub/two.safetensors"}})",
      "i.json");
  ASSERT_TRUE(map.ok()) << map.error();
  EXPECT_EQ(map->size(), 2u);
  EXPECT_EQ(map->at("b"), "sub/two.safetensors");

  EXPECT_EQ(parseSafeTensorsIndex("{}", "i.json").error(),
            "i.json: an index needs a \"weight_map\" object mapping tensor "
            "names to shard files");
  EXPECT_EQ(parseSafeTensorsIndex(R"({"weight_map": {"a": 3}})", "i.json")
                .error(),
            "i.json: weight_map entry 'a' must be a non-empty string naming "
            "a shard file");
  EXPECT_EQ(
      parseSafeTensorsIndex(R"({"weight_map": {"a": "/etc/x"}})", "i.json")
          .error(),
      "i.json: weight_map entry 'a' names shard '/etc/x', which is not a "
      "relative path inside the checkpoint");
  EXPECT_FALSE(
      parseSafeTensorsIndex(R"({"weight_map": {"a": "x/../../y"}})", "i.json")
          .ok());
  EXPECT_TRUE(
      parseSafeTensorsIndex(R"({"weight_map": {"a": "..x"}})", "i.json").ok());
  EXPECT_FALSE(parseSafeTensorsIndex("{", "i.json").ok());
}

TEST_F(CheckpointTest, ShardedDirectory) {
  writeFile("model-1.safetensors", {{"a", f32({1}, {1})}});
  writeFile("model-2.safetensors", {{"b", f32({1}, {2})}});
  writeText("model.safetensors.index.json",
            R"({"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}})");
  TensorStore store;
  Status status = store.add(dir);
  ASSERT_TRUE(status.ok()) << status.error();
  EXPECT_EQ(store.numFiles(), 2u);
  ASSERT_NE(store.find("a"), nullptr);
  EXPECT_EQ(store.find("b")->file->path(), path("model-2.safetensors"));
  // The same files again (through the index path): nothing is added twice.
  EXPECT_TRUE(store.add(path("model.safetensors.index.json")).ok());
  EXPECT_EQ(store.numFiles(), 2u);
}

TEST_F(CheckpointTest, DuplicateAcrossFiles) {
  writeFile("one.safetensors", {{"a", f32({1}, {1})}, {"b", f32({1}, {1})}});
  writeFile("two.safetensors", {{"b", f32({1}, {2})}});
  TensorStore store;
  ASSERT_TRUE(store.add(path("one.safetensors")).ok());
  Status status = store.add(path("two.safetensors"));
  EXPECT_EQ(status.error(), "tensor 'b' is defined in both " +
                                path("one.safetensors") + " and " +
                                path("two.safetensors"));
  // The failed add left the store as it was.
  EXPECT_EQ(store.numFiles(), 1u);
  EXPECT_EQ(store.find("b")->file->path(), path("one.safetensors"));

  // Inside one index too.
  writeText("dup.json", R"({"weight_map": {"a": "one.safetensors", "b": "two.safetensors"}})");
  TensorStore fresh;
  EXPECT_NE(fresh.add(path("dup.json")).error().find("is defined in both"),
            std::string::npos);
}

TEST_F(CheckpointTest, MissingShard) {
  writeFile("one.safetensors", {{"a", f32({1}, {1})}});
  writeText("model.safetensors.index.json",
            R"({"weight_map": {"a": "one.safetensors", "b": "gone.safetensors"}})");
  TensorStore store;
  Status status = store.add(dir);
  EXPECT_EQ(status.error(), path("model.safetensors.index.json") +
                                ": shard " + path("gone.safetensors") +
                                ": cannot open: No such file or directory");
  EXPECT_EQ(store.numFiles(), 0u);
}

TEST_F(CheckpointTest, IndexTensorNotInShard) {
  writeFile("one.safetensors", {{"a", f32({1}, {1})}});
  writeText("i.json", R"({"weight_map": {"c": "one.safetensors"}})");
  TensorStore store;
  EXPECT_EQ(store.add(path("i.json")).error(),
            path("i.json") + ": tensor 'c' is mapped to " +
                path("one.safetensors") + ", which does not define it");
}

TEST_F(CheckpointTest, EmptyDirectory) {
  TensorStore store;
  EXPECT_EQ(store.add(dir).error(),
            dir + ": checkpoint directory has neither "
                  "model.safetensors.index.json nor model.safetensors");
}

TEST_F(CheckpointTest, StackTransposeConcatenate) {
  // Two experts, gate [H=2, D=3] and up [2, 3] each (nn.Linear layout).
  writeFile("m.safetensors",
            {{"e.0.g", bf16({2, 3}, {1, 2, 3, 4, 5, 6})},
             {"e.0.u", bf16({2, 3}, {7, 8, 9, 10, 11, 12})},
             {"e.1.g", bf16({2, 3}, {-1, -2, -3, -4, -5, -6})},
             {"e.1.u", bf16({2, 3}, {0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f})}});
  TensorStore store;
  ASSERT_TRUE(store.add(path("m.safetensors")).ok());
  CheckpointSpec spec{{"e.{e}.g", "e.{e}.u"}, true};
  EXPECT_TRUE(spec.perExpert());
  auto shape = checkpointShape(store, spec, {2, kDynamicDim, 4}, "arg");
  ASSERT_TRUE(shape.ok()) << shape.error();
  EXPECT_EQ(*shape, (std::vector<int64_t>{2, 3, 4}));
  std::vector<float> out(24);
  ASSERT_TRUE(assembleCheckpointTensor(store, spec, *shape, DType::F32,
                                       reinterpret_cast<uint8_t *>(out.data()))
                  .ok());
  // out[e][d] = [g[0][d], g[1][d], u[0][d], u[1][d]].
  std::vector<float> expected = {1,  4,  7,  10, 2,  5,  8,  11,
                                 3,  6,  9,  12, -1, -4, 0.5f, 3.5f,
                                 -2, -5, 1.5f, 4.5f, -3, -6, 2.5f, 5.5f};
  EXPECT_EQ(out, expected);

  // bf16 -> bf16 keeps the bits; f32 -> bf16 rounds to nearest even.
  std::vector<uint16_t> half(24);
  ASSERT_TRUE(assembleCheckpointTensor(store, spec, *shape, DType::BF16,
                                       reinterpret_cast<uint8_t *>(half.data()))
                  .ok());
  for (size_t i = 0; i < 24; ++i)
    EXPECT_EQ(bfloat16BitsToFloat(half[i]), expected[i]);
}

TEST_F(CheckpointTest, FusedExpertTensorsTransposePerExpert) {
  // Fused experts (Qwen3 as transformers 5 saves it): gate_up [E=2, 2H=4,
  // D=3] and down [E, D, H=2], one nn.Linear matrix per expert; transpose
  // swaps each expert's two dimensions. The same values as per-expert 2-D
  // tensors give the same parameter, FP8 codes included (bit for bit).
  std::vector<float> gu(24), dn(12);
  for (size_t i = 0; i < gu.size(); ++i)
    gu[i] = static_cast<float>(i) - 7.5f;
  for (size_t i = 0; i < dn.size(); ++i)
    dn[i] = 0.25f * static_cast<float>(i) + 1.0f;
  std::vector<uint8_t> codes(24);
  for (size_t i = 0; i < codes.size(); ++i)
    codes[i] = static_cast<uint8_t>(i * 11 + 1);
  auto slice = [](const std::vector<float> &v, size_t from, size_t n) {
    return std::vector<float>(v.begin() + from, v.begin() + from + n);
  };
  auto f8 = [](std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
    return Tensor::fromValues(DType::F8E4M3, std::move(shape), bytes);
  };
  writeFile("f.safetensors",
            {{"gate_up", f32({2, 4, 3}, gu)},
             {"down", f32({2, 3, 2}, dn)},
             {"q", f8({2, 4, 3}, codes)},
             {"e.0.gate_up", f32({4, 3}, slice(gu, 0, 12))},
             {"e.1.gate_up", f32({4, 3}, slice(gu, 12, 12))},
             {"e.0.down", f32({3, 2}, slice(dn, 0, 6))},
             {"e.1.down", f32({3, 2}, slice(dn, 6, 6))},
             {"e.0.q", f8({4, 3}, std::vector<uint8_t>(codes.begin(), codes.begin() + 12))},
             {"e.1.q", f8({4, 3}, std::vector<uint8_t>(codes.begin() + 12, codes.end()))}});
  TensorStore store;
  ASSERT_TRUE(store.add(path("f.safetensors")).ok());
  struct Case {
    const char *fused, *perExpert;
    std::vector<int64_t> shape;
    DType type;
  };
  for (const Case &c : {Case{"gate_up", "e.{e}.gate_up", {2, 3, 4}, DType::F32},
                        Case{"gate_up", "e.{e}.gate_up", {2, 3, 4}, DType::BF16},
                        Case{"down", "e.{e}.down", {2, 2, 3}, DType::F32},
                        Case{"q", "e.{e}.q", {2, 3, 4}, DType::F8E4M3}}) {
    SCOPED_TRACE(c.fused);
    CheckpointSpec fused{{c.fused}, true}, perExpert{{c.perExpert}, true};
    EXPECT_FALSE(fused.perExpert());
    auto shape = checkpointShape(store, fused, c.shape, "arg", c.type);
    ASSERT_TRUE(shape.ok()) << shape.error();
    EXPECT_EQ(*shape, c.shape);
    size_t bytes = 24 * elementSize(c.type);
    if (c.shape[2] == 3)
      bytes = 12 * elementSize(c.type);
    std::vector<uint8_t> a(bytes), b(bytes);
    ASSERT_TRUE(assembleCheckpointTensor(store, fused, c.shape, c.type, a.data()).ok());
    ASSERT_TRUE(assembleCheckpointTensor(store, perExpert, c.shape, c.type, b.data()).ok());
    EXPECT_EQ(a, b);
  }
  // out[e][d][n] = gate_up[e][n][d], checked directly for one element of
  // each expert.
  std::vector<float> out(24);
  ASSERT_TRUE(assembleCheckpointTensor(store, {{"gate_up"}, true}, {2, 3, 4}, DType::F32,
                                       reinterpret_cast<uint8_t *>(out.data()))
                  .ok());
  EXPECT_EQ(out[0 * 12 + 2 * 4 + 1], gu[0 * 12 + 1 * 3 + 2]);
  EXPECT_EQ(out[1 * 12 + 1 * 4 + 3], gu[1 * 12 + 3 * 3 + 1]);
  // A fused tensor is not concatenated with a per-expert shape.
  EXPECT_EQ(checkpointShape(store, {{"gate_up"}, true}, {2, 4, 3}, "w1").error(),
            "checkpoint tensors 'gate_up' (transposed) assemble to shape "
            "[2, 3, 4], but w1 has shape [2, 4, 3]");
}

TEST_F(CheckpointTest, RoundToNearestEven) {
  // 1 + 2^-8 is halfway between two bf16 values: it rounds to 1 (even).
  float halfway = 1.0f + 0x1.0p-8f, above = 1.0f + 0x1.8p-8f;
  writeFile("r.safetensors", {{"w", f32({2}, {halfway, above})}});
  TensorStore store;
  ASSERT_TRUE(store.add(path("r.safetensors")).ok());
  CheckpointSpec spec{{"w"}, false};
  std::vector<uint16_t> bits(2);
  ASSERT_TRUE(assembleCheckpointTensor(store, spec, {2}, DType::BF16,
                                       reinterpret_cast<uint8_t *>(bits.data()))
                  .ok());
  EXPECT_EQ(bfloat16BitsToFloat(bits[0]), 1.0f);
  EXPECT_EQ(bfloat16BitsToFloat(bits[1]), 1.0f + 0x1.0p-7f);
}

TEST_F(CheckpointTest, ShapeErrors) {
  writeFile("s.safetensors", {{"a", f32({2, 3}, {1, 2, 3, 4, 5, 6})},
                              {"v", f32({3}, {1, 2, 3})},
                              {"i", Tensor::fromValues(DType::I32, {1},
                                                       std::vector<int32_t>{1})}});
  TensorStore store;
  ASSERT_TRUE(store.add(path("s.safetensors")).ok());
  EXPECT_EQ(checkpointShape(store, {{"a"}, true}, {2, 3}, "argument #1")
                .error(),
            "checkpoint tensors 'a' (transposed) assemble to shape [3, 2], "
            "but argument #1 has shape [2, 3]");
  EXPECT_EQ(checkpointShape(store, {{"v"}, true}, {3}, "x").error(),
            "tensor 'v' in " + path("s.safetensors") +
                " has shape [3]; transpose needs a tensor of 2 or more dimensions");
  EXPECT_EQ(checkpointShape(store, {{"i"}, false}, {1}, "x").error(),
            "tensor 'i' in " + path("s.safetensors") +
                " has dtype I32; parameters need F32, F16, BF16, F8_E4M3 or U8 (int4 codes), "
                "or int4 = ... for packed I32");
  EXPECT_EQ(checkpointShape(store, {{"nope"}, false}, {1}, "x").error(),
            "tensor 'nope' (for x) not found in " + path("s.safetensors"));
  EXPECT_EQ(
      checkpointShape(store, {{"w.{e}"}, false}, {kDynamicDim, 3}, "x")
          .error(),
      "x: #moe.checkpoint with {e} needs a static leading dimension (the "
      "expert count), got shape [?, 3]");
}

TEST_F(CheckpointTest, Fp8CodesAreStackedTransposedAndConcatenatedBitForBit) {
  // FP8 expert weights: two experts, gate and up [H=2, D=3] of E4M3 codes
  // (bytes 0x00..0xFF, the NaN codes 0x7F and 0xFF among them), assembled
  // into an f8E4M3FN [E, D, 2H] parameter: the bytes move, nothing is
  // converted.
  auto codes = [](uint8_t first) {
    Tensor t;
    t.dtype = DType::F8E4M3;
    t.shape = {2, 3};
    t.data.resize(6);
    for (int i = 0; i < 6; ++i)
      t.data[i] = static_cast<uint8_t>(first + 0x31 * i);
    return t;
  };
  writeFile("q.safetensors", {{"e.0.g", codes(0x7F)},
                              {"e.0.u", codes(0x01)},
                              {"e.1.g", codes(0xFF)},
                              {"e.1.u", codes(0x80)},
                              {"e.0.s", f32({1, 1}, {0.5f})},
                              {"e.1.s", bf16({1, 1}, {0.25f})}});
  TensorStore store;
  ASSERT_TRUE(store.add(path("q.safetensors")).ok());
  CheckpointSpec spec{{"e.{e}.g", "e.{e}.u"}, true};
  auto shape = checkpointShape(store, spec, {2, 3, 4}, "w1", DType::F8E4M3);
  ASSERT_TRUE(shape.ok()) << shape.error();
  std::vector<uint8_t> out(24);
  ASSERT_TRUE(
      assembleCheckpointTensor(store, spec, *shape, DType::F8E4M3, out.data())
          .ok());
  const uint8_t firsts[2][2] = {{0x7F, 0x01}, {0xFF, 0x80}};
  for (int e = 0; e < 2; ++e)
    for (int d = 0; d < 3; ++d)
      for (int c = 0; c < 4; ++c) {
        // Column c is row c % 2 of the gate (c < 2) or of the up projection.
        uint8_t expected =
            static_cast<uint8_t>(firsts[e][c / 2] + 0x31 * ((c % 2) * 3 + d));
        EXPECT_EQ(out[(e * 3 + d) * 4 + c], expected)
            << "e " << e << " d " << d << " c " << c;
      }

  // The scales beside them are ordinary F32/BF16 tensors (BF16 widens
  // exactly to an f32 parameter).
  CheckpointSpec scales{{"e.{e}.s"}, true};
  std::vector<float> s(2);
  ASSERT_TRUE(assembleCheckpointTensor(store, scales, {2, 1, 1}, DType::F32,
                                       reinterpret_cast<uint8_t *>(s.data()))
                  .ok());
  EXPECT_EQ(s, (std::vector<float>{0.5f, 0.25f}));

  // Codes are not values without their scales: no F8_E4M3 tensor becomes a
  // float parameter, and an f8E4M3FN parameter takes nothing else.
  EXPECT_EQ(checkpointShape(store, spec, {2, 3, 4}, "w1", DType::BF16).error(),
            "tensor 'e.0.g' in " + path("q.safetensors") +
                " has dtype F8_E4M3 (for w1): F8_E4M3 tensors (FP8 codes, "
                "which need their scales) assemble only into an f8E4M3FN "
                "parameter, not bf16");
  EXPECT_EQ(
      checkpointShape(store, scales, {2, 1, 1}, "w1s", DType::F8E4M3).error(),
      "tensor 'e.0.s' in " + path("q.safetensors") +
          " has dtype F32 (for w1s): an f8E4M3FN parameter takes F8_E4M3 "
          "tensors only");
  std::vector<uint8_t> bytes(24);
  EXPECT_FALSE(
      assembleCheckpointTensor(store, spec, {2, 3, 4}, DType::F32, bytes.data())
          .ok());
}

TEST_F(CheckpointTest, Fp8ScalesDequantizeOnceIntoTheParameterType) {
  // w: F8_E4M3 [2, 3] codes, scales [ceil(2/2), ceil(3/2)] = [1, 2] in
  // blocks of 2 x 2. s0 * 1.125 = 1 + 2^-8 + 2^-28.3 (exact in double): f32
  // rounds it to 1 + 2^-8, halfway between two bf16 values, which bf16
  // would then round to 1 (even); rounded once it is 1 + 2^-7.
  float s0;
  const uint32_t s0Bits = 0x3f6471c8u;
  std::memcpy(&s0, &s0Bits, 4);
  Tensor w;
  w.dtype = DType::F8E4M3;
  w.shape = {2, 3};
  // 1.125, 1.125, 1 | 2, -1, NaN.
  w.data = {0x39, 0x39, 0x38, 0x40, 0xB8, 0x7F};
  writeFile("d.safetensors",
            {{"w", w}, {"s", f32({1, 2}, {s0, 0.5f})},
             {"sb", bf16({1, 2}, {0.25f, 4.0f})}, {"bad", f32({2, 2}, {1, 1, 1, 1})}});
  TensorStore store;
  ASSERT_TRUE(store.add(path("d.safetensors")).ok());
  CheckpointSpec spec{{"w"}, false, {"s"}, 2, 2};
  auto shape = checkpointShape(store, spec, {2, 3}, "s1", DType::BF16);
  ASSERT_TRUE(shape.ok()) << shape.error();
  std::vector<uint16_t> half(6);
  ASSERT_TRUE(assembleCheckpointTensor(store, spec, {2, 3}, DType::BF16,
                                       reinterpret_cast<uint8_t *>(half.data()))
                  .ok());
  EXPECT_EQ(bfloat16BitsToFloat(half[0]), 1.0f + 0x1.0p-7f);
  EXPECT_EQ(bfloat16BitsToFloat(half[1]), 1.0f + 0x1.0p-7f);
  EXPECT_EQ(bfloat16BitsToFloat(half[2]), 0.5f);
  EXPECT_EQ(bfloat16BitsToFloat(half[4]),
            bfloat16BitsToFloat(floatToBFloat16Bits(-s0)));
  EXPECT_TRUE(std::isnan(bfloat16BitsToFloat(half[5])));

  // Into f32, transposed ([3, 2]); a BF16 scale widens exactly.
  CheckpointSpec transposed{{"w"}, true, {"sb"}, 2, 2};
  auto tshape = checkpointShape(store, transposed, {3, 2}, "s1", DType::F32);
  ASSERT_TRUE(tshape.ok()) << tshape.error();
  std::vector<float> out(6);
  ASSERT_TRUE(assembleCheckpointTensor(store, transposed, {3, 2}, DType::F32,
                                       reinterpret_cast<uint8_t *>(out.data()))
                  .ok());
  EXPECT_EQ(out[0], 1.125f * 0.25f); // (0, 0) <- w[0][0]
  EXPECT_EQ(out[1], 2.0f * 0.25f);   // (0, 1) <- w[1][0]
  EXPECT_EQ(out[4], 1.0f * 4.0f);    // (2, 0) <- w[0][2], block column 1
  EXPECT_TRUE(std::isnan(out[5]));

  // The scales must fit the weight and its block; the parameter must be
  // values, not codes.
  CheckpointSpec wrong{{"w"}, false, {"bad"}, 2, 2};
  EXPECT_EQ(checkpointShape(store, wrong, {2, 3}, "s1", DType::F32).error(),
            "tensor 'bad' in " + path("d.safetensors") +
                " has dtype F32 and shape [2, 2], expected F32, BF16 or F16 "
                "[1, 2] (the scales of 'w' [2, 3] in blocks of 2 x 2)");
  EXPECT_EQ(checkpointShape(store, spec, {2, 3}, "s1", DType::F8E4M3).error(),
            "s1: #moe.checkpoint with fp8_scales dequantizes into f32, f16 or "
            "bf16, not f8E4M3FN");
  CheckpointSpec missing{{"w"}, false, {"nope"}, 2, 2};
  EXPECT_EQ(checkpointShape(store, missing, {2, 3}, "s1", DType::F32).error(),
            "tensor 'nope' (the scales of 'w', for s1) not found in " +
                path("d.safetensors"));
  CheckpointSpec values{{"s"}, false, {"s"}, 2, 2};
  EXPECT_EQ(checkpointShape(store, values, {1, 2}, "s1", DType::F32).error(),
            "tensor 's' in " + path("d.safetensors") +
                " has dtype F32 and shape [1, 2] (for s1): fp8_scales "
                "dequantize 2-D F8_E4M3 tensors");
}

// int4 weights dequantized at load (#moe.checkpoint int4_scales): each
// packing's weight, F16 scales and zero points give, element for element,
// the values the format decoders of Quantized.h (written from the writers'
// definitions) compute, [in, out]; two weights concatenate along out. K =
// 24 inputs, N = 16 outputs, groups of 8 (3 groups).
TEST_F(CheckpointTest, Int4ScalesDequantizeAsTheDecoders) {
  const int64_t K = 24, N = 16, G = 3;
  auto words = [](size_t n, uint32_t seed, bool below15 = false) {
    std::vector<uint32_t> w(n);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (uint32_t &v : w) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      v = uint32_t(x >> 32);
      if (below15) // a GPTQ zero point stored as 15 would be 16
        for (int p = 0; p < 8; ++p)
          if (((v >> (4 * p)) & 15) == 15)
            v &= ~(1u << (4 * p));
    }
    return w;
  };
  auto i32 = [](std::vector<int64_t> shape, const std::vector<uint32_t> &w) {
    return Tensor::fromValues(DType::I32, std::move(shape), w);
  };
  auto f16 = [](std::vector<int64_t> shape, uint32_t seed) {
    std::vector<float> v(size_t(shape[0] * shape[1]));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = float(int((i * 37 + seed) % 23) - 11) * 0.0625f + 0.03125f;
    return convertTensor(Tensor::fromValues(DType::F32, std::move(shape), v), DType::F16).take();
  };
  std::map<std::string, Tensor> t{
      {"g.q", i32({K / 8, N}, words(K / 8 * N, 1))},
      {"g.z", i32({G, N / 8}, words(G * N / 8, 2, true))},
      {"g.s", f16({G, N}, 3)},
      {"a.q", i32({K, N / 8}, words(K * N / 8, 4))},
      {"a.z", i32({G, N / 8}, words(G * N / 8, 5))},
      {"a.s", f16({G, N}, 6)},
      {"c.q", i32({N, K / 8}, words(N * K / 8, 7))},
      {"c.z", i32({N / 8, G}, words(N / 8 * G, 8))},
      {"c.s", f16({N, G}, 9)},
      {"bad", f16({G + 1, N}, 10)}};
  writeFile("q.safetensors", t);
  TensorStore store;
  ASSERT_TRUE(store.add(path("q.safetensors")).ok());
  auto expectDecoded = [&](const CheckpointSpec &spec, const std::vector<Tensor> &decoded) {
    const int64_t width = N * int64_t(decoded.size());
    auto shape = checkpointShape(store, spec, {K, width}, "s1", DType::F32);
    ASSERT_TRUE(shape.ok()) << shape.error();
    std::vector<float> out(size_t(K * width));
    ASSERT_TRUE(assembleCheckpointTensor(store, spec, {K, width}, DType::F32,
                                         reinterpret_cast<uint8_t *>(out.data()))
                    .ok());
    for (size_t part = 0; part < decoded.size(); ++part)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t n = 0; n < N; ++n) {
          float want;
          std::memcpy(&want, decoded[part].data.data() + 4 * (k * N + n), 4);
          ASSERT_EQ(out[size_t(k * width + int64_t(part) * N + n)], want)
              << spec.describe() << " part " << part << " (" << k << ", " << n << ")";
        }
  };
  CheckpointSpec gptq{{"g.q"}, false};
  gptq.int4 = Int4Packing::Gptq;
  gptq.int4Scales = {"g.s"};
  gptq.int4Zeros = {"g.z"};
  gptq.group = 8;
  expectDecoded(gptq, {dequantizeGptq(t["g.q"], t["g.z"], t["g.s"], nullptr, 8, "g").take()});
  CheckpointSpec awq{{"a.q", "a.q"}, false};
  awq.int4 = Int4Packing::Awq;
  awq.int4Scales = {"a.s", "a.s"};
  awq.int4Zeros = {"a.z", "a.z"};
  awq.group = 8;
  Tensor a = dequantizeAwq(t["a.q"], t["a.z"], t["a.s"], 8, "a").take();
  expectDecoded(awq, {a, a});
  CheckpointSpec ct{{"c.q"}, false};
  ct.int4 = Int4Packing::PackQuantized;
  ct.int4Scales = {"c.s"};
  ct.int4Zeros = {"c.z"};
  ct.group = 8;
  expectDecoded(ct, {dequantizePackQuantized(t["c.q"], t["c.s"], K, 8, "c", &t["c.z"]).take()});
  ct.int4Zeros.clear(); // symmetric: zero 8
  expectDecoded(ct, {dequantizePackQuantized(t["c.q"], t["c.s"], K, 8, "c").take()});

  // Errors name the tensor: scales of the wrong shape, missing zero points,
  // a parameter of codes.
  gptq.int4Scales = {"bad"};
  EXPECT_EQ(checkpointShape(store, gptq, {K, N}, "s1", DType::F32).error(),
            "tensor 'bad' in " + path("q.safetensors") +
                " has dtype F16 and shape [4, 16], expected F32, BF16 or F16 [3, 16] (the "
                "scales of 'g.q', 24 inputs x 16 outputs in groups of 8)");
  gptq.int4Scales = {"g.s"};
  gptq.int4Zeros = {"nope"};
  EXPECT_EQ(checkpointShape(store, gptq, {K, N}, "s1", DType::F32).error(),
            "tensor 'nope' (the zero points of 'g.q', for s1) not found in " +
                path("q.safetensors"));
  gptq.int4Zeros = {"g.z"};
  // Rounded once: 3 * s0 = 1 + 2^-8 + 2^-24.2 exactly; f32 would round it to
  // 1 + 2^-8, halfway between two bf16 values, and bf16 then to 1 (even);
  // rounded once to bf16 it is 1 + 2^-7.
  float s0;
  const uint32_t s0Bits = 0x3eab5556u;
  std::memcpy(&s0, &s0Bits, 4);
  writeFile("r.safetensors",
            {{"r.q", i32({1, 1}, {0x8888888Bu})}, // u = 11 at k = 0, 8 elsewhere
             {"r.s", Tensor::fromValues(DType::F32, {1, 1}, std::vector<float>{s0})}});
  TensorStore once;
  ASSERT_TRUE(once.add(path("r.safetensors")).ok());
  CheckpointSpec r{{"r.q"}, false};
  r.int4 = Int4Packing::PackQuantized;
  r.int4Scales = {"r.s"};
  r.group = 8;
  ASSERT_TRUE(checkpointShape(once, r, {8, 1}, "s1", DType::BF16).ok());
  std::vector<uint16_t> bf(8);
  ASSERT_TRUE(assembleCheckpointTensor(once, r, {8, 1}, DType::BF16,
                                       reinterpret_cast<uint8_t *>(bf.data()))
                  .ok());
  EXPECT_EQ(bfloat16BitsToFloat(bf[0]), 1.0f + 0x1.0p-7f);
  EXPECT_EQ(bfloat16BitsToFloat(bf[1]), 0.0f);
  EXPECT_EQ(checkpointShape(store, gptq, {K, N}, "s1", DType::U8).error(),
            "s1: #moe.checkpoint with int4_scales dequantizes into f32, f16 or bf16, not i4");
}

TEST(CheckpointSpecTest, Expand) {
  EXPECT_EQ(CheckpointSpec::expand("l.3.e.{e}.w{e}", 12), "l.3.e.12.w12");
  EXPECT_EQ(CheckpointSpec::expand("plain", 1), "plain");
  EXPECT_FALSE((CheckpointSpec{{"a"}, false}).perExpert());
}

} // namespace
