//===- RoutingMathIRTest.cpp - the routing exp/log over a sweep -----------===//
//
// Builds a function around mlir::moe::buildRoutingExp/Log/Sigmoid (what the CPU
// and GPU lowerings emit for routing, docs/spec.md §7), JIT-compiles it
// with MLIR's ExecutionEngine and runs it over a sweep of f32 inputs:
//  * the compiled results equal, bit for bit, the independent C++
//    implementation of the written definition (test/reference/RoutingMath);
//  * against the correctly rounded values (glibc's expl/logl in 80-bit long
//    double, rounded once to f32), the error is at most 1 ulp, and the
//    number of inputs that are not correctly rounded is reported (the design
//    target is none "in practice");
//  * glibc's expf/logf are compared too, for information.
//
//===----------------------------------------------------------------------===//

#include "lowering/RoutingMath.h"
#include "test/reference/RoutingMath.h"
#include "test/unit/lowering/JitTestUtil.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>
#include <vector>

using namespace mlir;

namespace {

struct MemRef1D {
  float *allocated;
  float *aligned;
  int64_t offset;
  int64_t size;
  int64_t stride;
};

uint32_t bits(float f) { return moe_test::bitsOf(f); }
using moe_test::fromBits;
/// Distance in ulps (floats between a and b); NaN == NaN.
int64_t ulps(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b) ? 0 : std::numeric_limits<int64_t>::max();
  auto ordered = [](float f) {
    int64_t u = bits(f);
    return u & 0x80000000 ? -(u & 0x7fffffff) : u;
  };
  int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

float crExp(float x) { return float(expl((long double)x)); }
float crLog(float x) { return float(logl((long double)x)); }

class RoutingMathIR : public ::testing::Test {
protected:
  static void SetUpTestSuite() { moe_test::initJit(); }

  void SetUp() override {
    // func @routing(%in, %exp, %log, %sigmoid: memref<?xf32>)
    OpBuilder b(&context);
    Location loc = b.getUnknownLoc();
    auto type = MemRefType::get({ShapedType::kDynamic}, b.getF32Type());
    auto fn = moe_test::createJitFunction(context, module, b, "routing",
                                          b.getFunctionType({type, type, type, type}, {}));
    auto args = fn.getArguments();
    Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
    Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
    Value n = memref::DimOp::create(b, loc, args[0], 0);
    scf::ForOp::create(b, loc, c0, n, c1, ValueRange{},
                       [&](OpBuilder &nb, Location loc, Value i, ValueRange) {
                         Value x = memref::LoadOp::create(nb, loc, args[0], ValueRange{i});
                         memref::StoreOp::create(nb, loc, mlir::moe::buildRoutingExp(nb, loc, x),
                                                 args[1], ValueRange{i});
                         memref::StoreOp::create(nb, loc, mlir::moe::buildRoutingLog(nb, loc, x),
                                                 args[2], ValueRange{i});
                         memref::StoreOp::create(nb, loc, mlir::moe::buildRoutingSigmoid(nb, loc, x),
                                                 args[3], ValueRange{i});
                         scf::YieldOp::create(nb, loc);
                       });
    func::ReturnOp::create(b, loc);

    jit = moe_test::lowerAndJit(*module, "convert-scf-to-cf,finalize-memref-to-llvm,"
                                         "convert-math-to-llvm,convert-to-llvm,"
                                         "reconcile-unrealized-casts");
    ASSERT_TRUE(jit);
  }

  struct Results {
    std::vector<float> exp, log, sigmoid;
  };
  Results run(std::vector<float> &in) {
    Results r;
    r.exp.resize(in.size());
    r.log.resize(in.size());
    r.sigmoid.resize(in.size());
    auto desc = [](std::vector<float> &v) {
      return MemRef1D{v.data(), v.data(), 0, int64_t(v.size()), 1};
    };
    MemRef1D d[4] = {desc(in), desc(r.exp), desc(r.log), desc(r.sigmoid)};
    MemRef1D *p[4] = {&d[0], &d[1], &d[2], &d[3]};
    llvm::SmallVector<void *> packed{&p[0], &p[1], &p[2], &p[3]};
    llvm::Error err = jit->invokePacked("_mlir_ciface_routing", packed);
    EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
    return r;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::unique_ptr<ExecutionEngine> jit;
};

/// Bit patterns [lo, hi] with a stride, plus both ends.
void sweep(std::vector<float> &v, uint32_t lo, uint32_t hi, uint32_t stride) {
  for (uint64_t u = lo; u <= hi; u += stride)
    v.push_back(fromBits(uint32_t(u)));
  v.push_back(fromBits(hi));
}

struct Stats {
  int64_t maxUlp = 0, notCR = 0, n = 0;
  float worst = 0;
  void add(float x, int64_t d) {
    ++n;
    if (d > 0)
      ++notCR;
    if (d > maxUlp) {
      maxUlp = d;
      worst = x;
    }
  }
};

TEST_F(RoutingMathIR, ExpMatchesDefinitionAndIsCorrectlyRounded) {
  std::vector<float> in;
  // Every exp argument that gives neither 0 nor inf (|x| < 104), both signs,
  // about one bit pattern in 257, and the edges.
  sweep(in, 0x00000000u, 0x42d00000u, 257);
  sweep(in, 0x80000000u, 0xc2d00000u, 257);
  for (float x : {88.72283172607421875f, 88.72283935546875f, -87.33654f, -103.27893f,
                  -103.97208f, -104.0f, 0.0f, -0.0f, 1.0f, -1.0f,
                  std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), 1e-30f, -1e-30f})
    in.push_back(x);
  Results r = run(in);
  Stats cr, glibc;
  int64_t defMismatch = 0, sigMismatch = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    float x = in[i];
    if (bits(r.exp[i]) != bits(::moe::ref::routingExp(x)) &&
        !(std::isnan(r.exp[i]) && std::isnan(::moe::ref::routingExp(x))))
      ++defMismatch;
    if (bits(r.sigmoid[i]) != bits(::moe::ref::routingSigmoid(x)) &&
        !(std::isnan(r.sigmoid[i]) && std::isnan(::moe::ref::routingSigmoid(x))))
      ++sigMismatch;
    cr.add(x, ulps(r.exp[i], crExp(x)));
    glibc.add(x, ulps(r.exp[i], std::exp(x)));
  }
  std::cout << "routing exp: " << cr.n << " inputs, max " << cr.maxUlp
            << " ulp from the correctly rounded value (at " << cr.worst << "), " << cr.notCR
            << " not correctly rounded; vs glibc expf: max " << glibc.maxUlp << " ulp, "
            << glibc.notCR << " differ\n";
  EXPECT_EQ(defMismatch, 0) << "compiled exp differs from the reference definition";
  EXPECT_EQ(sigMismatch, 0) << "compiled sigmoid differs from the reference definition";
  EXPECT_LE(cr.maxUlp, 1);
  EXPECT_LE(cr.notCR, cr.n / 1000000 + 2);
  EXPECT_TRUE(std::isnan(r.exp[in.size() - 3]));
  RecordProperty("exp_max_ulp", int(cr.maxUlp));
  RecordProperty("exp_not_correctly_rounded", int(cr.notCR));
}

TEST_F(RoutingMathIR, LogMatchesDefinitionAndIsCorrectlyRounded) {
  std::vector<float> in;
  // Every positive float (subnormals included) (one bit pattern in 257), and the
  // special values.
  sweep(in, 0x00000001u, 0x7f7fffffu, 257);
  for (float x : {1.0f, 2.0f, 0.5f, 1e-10f, 1.0000001f, 0.99999994f,
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()})
    in.push_back(x);
  size_t specials = in.size();
  for (float x : {0.0f, -0.0f, -1.0f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()})
    in.push_back(x);
  Results r = run(in);
  Stats cr, glibc;
  int64_t defMismatch = 0;
  for (size_t i = 0; i < specials; ++i) {
    float x = in[i];
    if (bits(r.log[i]) != bits(::moe::ref::routingLog(x)))
      ++defMismatch;
    cr.add(x, ulps(r.log[i], crLog(x)));
    glibc.add(x, ulps(r.log[i], std::log(x)));
  }
  std::cout << "routing log: " << cr.n << " inputs, max " << cr.maxUlp
            << " ulp from the correctly rounded value (at " << cr.worst << "), " << cr.notCR
            << " not correctly rounded; vs glibc logf: max " << glibc.maxUlp << " ulp, "
            << glibc.notCR << " differ\n";
  EXPECT_EQ(defMismatch, 0) << "compiled log differs from the reference definition";
  EXPECT_LE(cr.maxUlp, 1);
  EXPECT_LE(cr.notCR, cr.n / 1000000 + 2);
  // log(+-0) = -inf, log(-1) = NaN, log(inf) = inf, log(-inf) = NaN, NaN.
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(r.log[specials + 0], -inf);
  EXPECT_EQ(r.log[specials + 1], -inf);
  EXPECT_TRUE(std::isnan(r.log[specials + 2]));
  EXPECT_EQ(r.log[specials + 3], inf);
  EXPECT_TRUE(std::isnan(r.log[specials + 4]));
  EXPECT_TRUE(std::isnan(r.log[specials + 5]));
  for (size_t i = specials; i < in.size(); ++i) {
    float want = ::moe::ref::routingLog(in[i]);
    EXPECT_TRUE(bits(r.log[i]) == bits(want) || (std::isnan(r.log[i]) && std::isnan(want)))
        << "log(" << in[i] << ")";
  }
  RecordProperty("log_max_ulp", int(cr.maxUlp));
  RecordProperty("log_not_correctly_rounded", int(cr.notCR));
}

} // namespace
