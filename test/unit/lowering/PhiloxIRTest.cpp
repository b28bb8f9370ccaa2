//===- PhiloxIRTest.cpp - the IR Philox against Random123's answers -------===//
//
// Builds a function around moe::buildPhilox4x32x10 (the generator the CPU
// and GPU lowerings emit), JIT-compiles it with MLIR's ExecutionEngine and
// checks the known answers of docs/spec.md §3.1 (from Random123's
// kat_vectors), plus the uniform u = (out[0] >> 8) * 2^-24.
//
//===----------------------------------------------------------------------===//

#include "lowering/Philox.h"
#include "test/unit/lowering/JitTestUtil.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <memory>

using namespace mlir;

namespace {

/// memref<4xi32> descriptor as the LLVM lowering lays it out.
struct MemRef1D {
  uint32_t *allocated;
  uint32_t *aligned;
  int64_t offset;
  int64_t size;
  int64_t stride;
};

class PhiloxIR : public ::testing::Test {
protected:
  static void SetUpTestSuite() { moe_test::initJit(); }

  void SetUp() override {
    moe_test::registerJitTranslations(context);
    context.loadDialect<func::FuncDialect, arith::ArithDialect, memref::MemRefDialect,
                        LLVM::LLVMDialect>();

    // func @philox(%out: memref<4xi32>, %k0, %k1, %c0, %c1, %c2, %c3: i32)
    OpBuilder b(&context);
    Location loc = b.getUnknownLoc();
    module = ModuleOp::create(loc);
    b.setInsertionPointToEnd(module->getBody());
    Type i32 = b.getI32Type();
    auto outType = MemRefType::get({4}, i32);
    auto fn = func::FuncOp::create(
        b, loc, "philox",
        b.getFunctionType({outType, i32, i32, i32, i32, i32, i32}, {}));
    fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
    Block *body = fn.addEntryBlock();
    b.setInsertionPointToStart(body);
    auto args = body->getArguments();
    std::array<Value, 4> out = moe::buildPhilox4x32x10(
        b, loc, {args[1], args[2]}, {args[3], args[4], args[5], args[6]});
    for (int i = 0; i < 4; ++i) {
      Value idx = arith::ConstantIndexOp::create(b, loc, i);
      memref::StoreOp::create(b, loc, out[i], args[0], ValueRange{idx});
    }
    func::ReturnOp::create(b, loc);

    // lowerAndJit runs the pipeline in place: check what it left.
    jit = moe_test::lowerAndJit(
        *module, "finalize-memref-to-llvm,convert-to-llvm,reconcile-unrealized-casts");
    ASSERT_FALSE(module->lookupSymbol<func::FuncOp>("philox"))
        << "the function was not lowered to the LLVM dialect:\n"
        << [&] { std::string s; llvm::raw_string_ostream os(s); module->print(os); return s; }();
    ASSERT_TRUE(jit);
  }

  std::array<uint32_t, 4> run(std::array<uint32_t, 2> key, std::array<uint32_t, 4> ctr) {
    std::array<uint32_t, 4> result{};
    MemRef1D desc{result.data(), result.data(), 0, 4, 1};
    MemRef1D *descPtr = &desc;
    std::array<int32_t, 6> words;
    words[0] = static_cast<int32_t>(key[0]);
    words[1] = static_cast<int32_t>(key[1]);
    for (int i = 0; i < 4; ++i)
      words[2 + i] = static_cast<int32_t>(ctr[i]);
    llvm::SmallVector<void *> packed{&descPtr};
    for (int32_t &w : words)
      packed.push_back(&w);
    llvm::Error err = jit->invokePacked("_mlir_ciface_philox", packed);
    EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
    return result;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::unique_ptr<ExecutionEngine> jit;
};

TEST_F(PhiloxIR, KnownAnswerZero) {
  auto out = run({0, 0}, {0, 0, 0, 0});
  EXPECT_EQ(out[0], 0x6627e8d5u);
  EXPECT_EQ(out[1], 0xe169c58du);
  EXPECT_EQ(out[2], 0xbc57ac4cu);
  EXPECT_EQ(out[3], 0x9b00dbd8u);
}

TEST_F(PhiloxIR, KnownAnswerAllOnes) {
  auto out = run({0xffffffffu, 0xffffffffu},
                 {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu});
  EXPECT_EQ(out[0], 0x408f276du);
  EXPECT_EQ(out[1], 0x41c83b0eu);
  EXPECT_EQ(out[2], 0xa20bc7c6u);
  EXPECT_EQ(out[3], 0x6d5451fdu);
}

TEST_F(PhiloxIR, KnownAnswerPi) {
  // Random123 kat_vectors: philox4x32 10 with the digits of pi.
  auto out = run({0xa4093822u, 0x299f31d0u},
                 {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u});
  EXPECT_EQ(out[0], 0xd16cfe09u);
  EXPECT_EQ(out[1], 0x94fdccebu);
  EXPECT_EQ(out[2], 0x5001e420u);
  EXPECT_EQ(out[3], 0x24126ea1u);
}

TEST_F(PhiloxIR, KeyWordsAreNotInterchangeable) {
  auto a = run({1, 0}, {0, 0, 0, 0});
  auto b = run({0, 1}, {0, 0, 0, 0});
  EXPECT_NE(a, b);
}

} // namespace
