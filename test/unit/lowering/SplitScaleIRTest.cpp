//===- SplitScaleIRTest.cpp - the f16 backward's scaled split terms ------===//
//
// The f16 tensor-core backward (lowering/gpu/MmaGemm.h, scaledSplit) takes
// an f32 cotangent as two f16 terms of x * s, s a power of two chosen from
// the tensor's largest finite magnitude: IRB::finiteAbsBits (the magnitude
// as ordered integer bits), IRB::splitScale (s and 1/s) and IRB::splitTerms.
// This test JIT-compiles the three on the host (one function: the maximum
// over a vector, the scale, the terms of every element) and checks their
// properties against C++ over vectors whose magnitudes span f32's range:
//  * the maximum is the bits of the largest finite |x| (NaN and infinities
//    ignored);
//  * s and 1/s are powers of two with s * (1/s) = 1, s * max in [2^13, 2^14)
//    (far inside f16's range, so neither term overflows), s = 1 when the
//    maximum is 0 or subnormal, and both stay normal f32 numbers;
//  * (hi + lo) / s recovers x to within 2^-21 |x| + 2^-24 / s (two f16
//    terms of a value that f16 can hold);
//  * a non-finite x gives a non-finite hi and lo = 0.
//
//===----------------------------------------------------------------------===//

#include "lowering/gpu/IRBuilder.h"
#include "test/unit/lowering/JitTestUtil.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace mlir;

namespace {

template <typename T> struct MemRef1D {
  T *allocated, *aligned;
  int64_t offset, size, stride;
};

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// f16 bits -> float (every f16 value is exact in float).
float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023;
  if (exp == 31)
    return fromBits(sign | 0x7f800000 | (man << 13));
  if (exp == 0)
    return (sign ? -1.0f : 1.0f) * std::ldexp(float(man), -24);
  return fromBits(sign | ((exp + 112) << 23) | (man << 13));
}

class SplitScaleIR : public ::testing::Test {
protected:
  static void SetUpTestSuite() { moe_test::initJit(); }

  void SetUp() override {
    // func @split(%x: memref<?xf32>, %max: memref<?xi32>, %scale: memref<?xf32>,
    //             %hi: memref<?xf16>, %lo: memref<?xf16>)
    OpBuilder ob(&context);
    auto vec = [&](Type t) { return MemRefType::get({ShapedType::kDynamic}, t); };
    Type f32 = ob.getF32Type(), f16 = ob.getF16Type(), i32 = ob.getI32Type();
    auto fn = moe_test::createJitFunction(
        context, module, ob, "split",
        ob.getFunctionType({vec(f32), vec(i32), vec(f32), vec(f16), vec(f16)}, {}));
    ImplicitLocOpBuilder b(ob.getUnknownLoc(), ob);
    moe::gpu_lowering::IRB e(b);
    auto args = fn.getArguments();
    Value n = memref::DimOp::create(b, args[0], 0);
    Value maxBits = e.forLoop(e.idx(0), n, e.idx(1), {e.ci32(0)},
                              [&](moe::gpu_lowering::IRB &e, Value i, ValueRange m) {
                                Value bits = e.finiteAbsBits(e.load(args[0], i));
                                return SmallVector<Value>{
                                    arith::MaxSIOp::create(e.b, m[0], bits)};
                              })[0];
    e.store(maxBits, args[1], e.idx(0));
    std::pair<Value, Value> scale = e.splitScale(maxBits);
    Value s = scale.first;
    e.store(s, args[2], e.idx(0));
    e.store(scale.second, args[2], e.idx(1));
    e.forEach(e.idx(0), n, e.idx(1), [&](moe::gpu_lowering::IRB &e, Value i) {
      auto [hi, lo] = e.splitTerms(e.mulf(e.load(args[0], i), s), f16);
      e.store(hi, args[3], i);
      e.store(lo, args[4], i);
    });
    func::ReturnOp::create(b);

    jit = moe_test::lowerAndJit(*module, "convert-scf-to-cf,finalize-memref-to-llvm,"
                                         "convert-math-to-llvm,convert-to-llvm,"
                                         "reconcile-unrealized-casts");
    ASSERT_TRUE(jit);
  }

  struct Result {
    uint32_t maxBits = 0;
    float s = 0, inv = 0;
    std::vector<uint16_t> hi, lo;
  };
  Result run(std::vector<float> &x) {
    Result r;
    std::vector<int32_t> maxBits(1);
    std::vector<float> scale(2);
    r.hi.resize(x.size());
    r.lo.resize(x.size());
    MemRef1D<float> dx{x.data(), x.data(), 0, int64_t(x.size()), 1};
    MemRef1D<int32_t> dm{maxBits.data(), maxBits.data(), 0, 1, 1};
    MemRef1D<float> ds{scale.data(), scale.data(), 0, 2, 1};
    MemRef1D<uint16_t> dh{r.hi.data(), r.hi.data(), 0, int64_t(x.size()), 1};
    MemRef1D<uint16_t> dl{r.lo.data(), r.lo.data(), 0, int64_t(x.size()), 1};
    void *p[5] = {&dx, &dm, &ds, &dh, &dl};
    llvm::SmallVector<void *> packed{&p[0], &p[1], &p[2], &p[3], &p[4]};
    llvm::Error err = jit->invokePacked("_mlir_ciface_split", packed);
    EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
    r.maxBits = uint32_t(maxBits[0]);
    r.s = scale[0];
    r.inv = scale[1];
    return r;
  }

  /// Checks every property of the header on `x`.
  void check(std::vector<float> x, const char *what) {
    SCOPED_TRACE(what);
    float expectMax = 0;
    for (float v : x)
      if (std::isfinite(v))
        expectMax = std::max(expectMax, std::fabs(v));
    Result r = run(x);
    EXPECT_EQ(r.maxBits, moe_test::bitsOf(expectMax));
    // Powers of two, normal, inverse of each other.
    int es = 0, ei = 0;
    EXPECT_EQ(std::frexp(r.s, &es), 0.5f);
    EXPECT_EQ(std::frexp(r.inv, &ei), 0.5f);
    EXPECT_TRUE(std::isnormal(r.s) && std::isnormal(r.inv));
    EXPECT_EQ(r.s * r.inv, 1.0f);
    if (!std::isnormal(expectMax)) {
      EXPECT_EQ(r.s, 1.0f);
    } else if (expectMax >= 0x1p-113f && expectMax < 0x1p114f) {
      // Within the clamp of s to [2^-126, 2^126].
      EXPECT_GE(r.s * expectMax, 0x1p13f);
      EXPECT_LT(r.s * expectMax, 0x1p14f);
    }
    for (size_t i = 0; i < x.size(); ++i) {
      float hi = halfToFloat(r.hi[i]), lo = halfToFloat(r.lo[i]);
      if (!std::isfinite(x[i])) {
        EXPECT_FALSE(std::isfinite(hi)) << "x = " << x[i];
        EXPECT_EQ(lo, 0.0f) << "x = " << x[i];
        continue;
      }
      ASSERT_TRUE(std::isfinite(hi)) << "x = " << x[i] << ", s = " << r.s;
      double back = (double(hi) + double(lo)) / double(r.s);
      double bound = 0x1p-21 * std::fabs(double(x[i])) + 0x1p-24 / double(r.s);
      EXPECT_LE(std::fabs(back - double(x[i])), bound) << "x = " << x[i] << ", s = " << r.s;
    }
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::unique_ptr<ExecutionEngine> jit;
};

/// n values of random sign and magnitude 10^u, u uniform in [lo, hi].
std::vector<float> spread(unsigned seed, double lo, double hi, int n = 4096) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<float> v;
  for (int i = 0; i < n; ++i)
    v.push_back(float((gen() & 1 ? -1.0 : 1.0) * std::pow(10.0, u(gen))));
  return v;
}

TEST_F(SplitScaleIR, GradientLikeMagnitudes) {
  check(spread(1, -12, -3), "10^-12 .. 10^-3 (below f16's normal range)");
  check(spread(2, -3, 3), "10^-3 .. 10^3");
  check(spread(3, 3, 9), "10^3 .. 10^9 (beyond f16's largest value)");
}

TEST_F(SplitScaleIR, ExtremesOfF32) {
  check(spread(4, 25, 38.5), "up to 3e38 (s = 2^-114)");
  check(spread(5, -37.9, -30), "1.3e-38 .. 1e-30 (s = 2^113)");
  check(spread(9, -37.9, -36), "at most 1e-36 (s clamped to 2^126)");
  std::vector<float> maxFloat = spread(6, 30, 36);
  maxFloat.push_back(std::numeric_limits<float>::max());
  check(maxFloat, "FLT_MAX among them");
}

TEST_F(SplitScaleIR, ZeroSubnormalAndNonFinite) {
  check(std::vector<float>(64, 0.0f), "all zeros: s = 1");
  check({0.0f, 0x1p-140f, -0x1p-130f, 0x1p-149f}, "subnormal maximum: s = 1");
  std::vector<float> mixed = spread(7, -6, 2, 512);
  mixed[3] = std::numeric_limits<float>::infinity();
  mixed[100] = -std::numeric_limits<float>::infinity();
  mixed[200] = std::numeric_limits<float>::quiet_NaN();
  check(mixed, "NaN and infinities are not the maximum and pass unchanged");
}

/// The reason for the scale: without it, the f16 terms of a cotangent of
/// 10^-7 are subnormal and lose most of its bits; with it, they keep them.
TEST_F(SplitScaleIR, ScaleKeepsSmallCotangents) {
  std::vector<float> x = spread(8, -8, -7, 256);
  Result r = run(x);
  double worstScaled = 0, worstUnscaled = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double back = (double(halfToFloat(r.hi[i])) + double(halfToFloat(r.lo[i]))) / r.s;
    worstScaled = std::max(worstScaled, std::fabs(back / x[i] - 1));
    // The unscaled terms, in C++: f16 has 2^-24 steps down there.
    double step = 0x1p-24, hi = std::nearbyint(x[i] / step) * step;
    double lo = std::nearbyint((x[i] - hi) / step) * step;
    worstUnscaled = std::max(worstUnscaled, std::fabs((hi + lo) / x[i] - 1));
  }
  EXPECT_LT(worstScaled, 0x1p-20);
  EXPECT_GT(worstUnscaled, 0.01);
}

} // namespace
