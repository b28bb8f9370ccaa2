//===- GemmEpilogueIRTest.cpp - buildEpilogue against plain C++ ----------===//
//
// moe::buildEpilogue (lowering/GroupedGemm.h) is the epilogue of every
// grouped-GEMM generator: the GPU kernels call it on f32 scalars, the CPU
// micro-kernels on vector<8xf32> / vector<16xf32>. This test builds one
// function per (epilogue, scalar or vector form), JIT-compiles it with
// MLIR's ExecutionEngine and compares every output with the steps written
// out in C++ float arithmetic, in list order (docs/spec.md §3): bias, then
// the activation (gated: act(gate) * up), the routed weight, rounding to
// bf16/f16 (round to nearest even, carried on in f32); and the backward's
// activation-gradient step (buildActivationGradEpilogue: dZ = dH act'(z),
// H = round(act(z))) against act and act' in double. The steps that are
// exact in f32 (bias, relu, routed weight, rounding) must give the same
// bits; activations through exp/erf/tanh within a few ulps (their MLIR
// polynomial expansions are not libm). The scalar and vector forms must
// give the same bits as each other for every epilogue.
//
//===----------------------------------------------------------------------===//

#include "lowering/GroupedGemm.h"
#include "test/unit/lowering/JitTestUtil.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

using namespace mlir;
using namespace mlir::moe;

namespace {

constexpr int64_t kLanes = 8;
constexpr int64_t kCount = 4096; // elements per call (a multiple of kLanes)

struct MemRef1D {
  float *allocated;
  float *aligned;
  int64_t offset;
  int64_t size;
  int64_t stride;
};

using moe_test::bitsOf;
using moe_test::fromBits;

/// Round to nearest even to bf16 (the upper 16 bits), back in f32. NaN stays
/// NaN.
float roundBF16(float x) {
  uint32_t u = bitsOf(x);
  if (std::isnan(x))
    return x;
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return fromBits(u & 0xffff0000u);
}

/// Round to nearest even to IEEE half, back in f32 (normal, subnormal,
/// overflow to infinity), by scaling to the spacing of halves at x.
float roundF16(float x) {
  if (!std::isfinite(x))
    return x;
  float a = std::fabs(x);
  if (a >= 65520.0f) // halfway between the largest half (65504) and 2^16
    return std::copysign(INFINITY, x);
  int e;
  std::frexp(a, &e); // a = m 2^e, m in [0.5, 1)
  // Spacing of halves: 2^(e - 11) for normals, 2^-24 below 2^-14.
  int spacingExp = std::max(e - 11, -24);
  float q = std::ldexp(a, -spacingExp);
  float r = std::nearbyint(q); // round half to even (default mode)
  return std::copysign(std::ldexp(r, spacingExp), x);
}

double act(Activation a, double x) {
  switch (a) {
  case Activation::relu:
    return x > 0 ? x : 0;
  case Activation::gelu:
  case Activation::geglu:
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  case Activation::gelu_tanh:
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  case Activation::silu:
  case Activation::swiglu:
    return x / (1 + std::exp(-x));
  }
  return 0;
}

/// act'(x) (docs/spec.md §9; relu'(0) = 0).
double actDerivative(Activation a, double x) {
  switch (a) {
  case Activation::relu:
    return x > 0 ? 1 : 0;
  case Activation::gelu:
  case Activation::geglu:
    return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
           x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
  case Activation::gelu_tanh: {
    double c = std::sqrt(2 / M_PI), t = std::tanh(c * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
  }
  case Activation::silu:
  case Activation::swiglu: {
    double sg = 1 / (1 + std::exp(-x));
    return sg * (1 + x * (1 - sg));
  }
  }
  return 0;
}

struct Inputs {
  std::vector<float> acc, up, bias, biasUp, weight, out;
};

class GemmEpilogueIR : public ::testing::Test {
protected:
  static void SetUpTestSuite() { moe_test::initJit(); }

  void SetUp() override {
    moe_test::registerJitTranslations(context);
    context.loadDialect<func::FuncDialect, arith::ArithDialect, math::MathDialect,
                        memref::MemRefDialect, scf::SCFDialect, vector::VectorDialect,
                        LLVM::LLVMDialect>();
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    for (auto *v : {&in.acc, &in.up, &in.bias, &in.biasUp})
      for (int64_t i = 0; i < kCount; ++i)
        v->push_back(normal(rng));
    // One routed weight per row: the vector form reads one scalar per
    // kLanes outputs (the CPU's row of a micro-tile), so the weight is the
    // same for the kLanes elements of a vector.
    for (int64_t i = 0; i < kCount; ++i)
      in.weight.push_back(i % kLanes ? in.weight[i - i % kLanes] : unit(rng));
    // Values that round to ties and edge cases: exact bf16/f16 halfway
    // points, zeros of both signs, large values (f16 overflow).
    in.acc[0] = 1.0f + 1.0f / 256; // bf16 tie, rounds to even (1.0)
    in.acc[1] = 1.0f + 3.0f / 256; // bf16 tie, rounds up
    in.acc[2] = -0.0f;
    in.acc[3] = 70000.0f;
    in.acc[4] = 1.0f + 1.0f / 2048; // f16 tie
    in.acc[5] = 6.1e-5f;            // near the f16 normal limit
    in.out.assign(kCount, 0.0f);
  }

  /// Builds func @epilogue over six memref<kCount x f32> whose loop runs
  /// `body` at every index i (step `lanes`), JIT-compiles it and calls it on
  /// the six buffers `ptrs`. False when it does not compile.
  bool runLoop(int64_t lanes, float *const ptrs[6],
               function_ref<void(ImplicitLocOpBuilder &, Value, ValueRange)> body) {
    OpBuilder ob(&context);
    Location loc = ob.getUnknownLoc();
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    ob.setInsertionPointToEnd(module->getBody());
    auto buf = MemRefType::get({kCount}, ob.getF32Type());
    auto fn = func::FuncOp::create(ob, loc, "epilogue",
                                   ob.getFunctionType({buf, buf, buf, buf, buf, buf}, {}));
    fn->setAttr("llvm.emit_c_interface", ob.getUnitAttr());
    Block *entry = fn.addEntryBlock();
    ImplicitLocOpBuilder b(loc, ob);
    b.setInsertionPointToStart(entry);
    ValueRange args = entry->getArguments();
    scf::ForOp::create(
        b, arith::ConstantIndexOp::create(b, 0), arith::ConstantIndexOp::create(b, kCount),
        arith::ConstantIndexOp::create(b, lanes), ValueRange{},
        [&](OpBuilder &nested, Location l, Value i, ValueRange) {
          ImplicitLocOpBuilder nb(l, nested);
          body(nb, i, args);
          scf::YieldOp::create(nb);
        });
    func::ReturnOp::create(b);
    std::unique_ptr<ExecutionEngine> engine = moe_test::lowerAndJit(
        *module, "convert-scf-to-cf,convert-vector-to-llvm,convert-math-to-llvm,"
                 "convert-math-to-libm,finalize-memref-to-llvm,convert-to-llvm,"
                 "reconcile-unrealized-casts");
    if (!engine)
      return false;
    MemRef1D d[6];
    MemRef1D *dp[6];
    llvm::SmallVector<void *> packed;
    for (int k = 0; k < 6; ++k) {
      d[k] = {ptrs[k], ptrs[k], 0, kCount, 1};
      dp[k] = &d[k];
      packed.push_back(&dp[k]);
    }
    llvm::Error err = engine->invokePacked("_mlir_ciface_epilogue", packed);
    EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
    return true;
  }

  /// m[i] (scalar form, `lanes` = 1) or m[i .. i+lanes) (vector form), and
  /// the store of such a value.
  static Value loadAt(ImplicitLocOpBuilder &b, int64_t lanes, Value m, Value i) {
    if (lanes == 1)
      return memref::LoadOp::create(b, m, i);
    return vector::LoadOp::create(b, VectorType::get({lanes}, b.getF32Type()), m, i);
  }
  static void storeAt(ImplicitLocOpBuilder &b, int64_t lanes, Value v, Value m, Value i) {
    if (lanes == 1)
      memref::StoreOp::create(b, v, m, i);
    else
      vector::StoreOp::create(b, v, m, i);
  }

  /// Runs `epilogue` over the inputs in scalar (`lanes` = 1) or vector form
  /// and returns the outputs.
  std::vector<float> run(const GemmEpilogue &epilogue, int64_t lanes) {
    std::vector<float> out(kCount, 0.0f);
    std::vector<float> acc = in.acc, up = in.up, bias = in.bias, biasUp = in.biasUp,
                       weight = in.weight;
    float *ptrs[6] = {acc.data(), up.data(), bias.data(), biasUp.data(), weight.data(),
                      out.data()};
    bool ok = runLoop(lanes, ptrs, [&](ImplicitLocOpBuilder &b, Value i, ValueRange a) {
      EpilogueValues v;
      v.acc = loadAt(b, lanes, a[0], i);
      v.accUp = loadAt(b, lanes, a[1], i);
      v.bias = loadAt(b, lanes, a[2], i);
      v.biasUp = loadAt(b, lanes, a[3], i);
      // The weight as the CPU passes it: one scalar per row.
      v.weight = memref::LoadOp::create(b, a[4], i);
      storeAt(b, lanes, buildEpilogue(b, epilogue, v), a[5], i);
    });
    return ok ? out : std::vector<float>();
  }

  /// The steps of `epilogue` in C++ (activations in double, rounded to f32).
  float expected(const GemmEpilogue &epilogue, int64_t i) {
    bool gated = epilogue.gated();
    float v = in.acc[i], up = in.up[i];
    for (EpilogueStep s : epilogue.steps) {
      switch (s) {
      case EpilogueStep::bias:
        v = v + in.bias[i];
        up = up + in.biasUp[i];
        break;
      case EpilogueStep::activation:
        v = static_cast<float>(act(epilogue.activation, v));
        if (gated)
          v = v * up;
        break;
      case EpilogueStep::routedWeight:
        v = v * in.weight[i];
        break;
      case EpilogueStep::round:
        if (epilogue.roundTo.isBF16())
          v = roundBF16(v);
        else if (epilogue.roundTo.isF16())
          v = roundF16(v);
        break;
      case EpilogueStep::combine:
        break;
      case EpilogueStep::activationGrad:
        ADD_FAILURE() << "activationGrad is the backward's epilogue; "
                         "this test checks the forward steps";
        break;
      }
    }
    return v;
  }

  /// Checks both forms against the C++ steps: bit for bit when `exact`,
  /// else within `ulps` units in the last place of f32; and the forms
  /// against each other bit for bit.
  void check(const GemmEpilogue &epilogue, bool exact, int ulps = 0) {
    std::vector<float> scalar = run(epilogue, 1);
    std::vector<float> vec = run(epilogue, kLanes);
    ASSERT_EQ(scalar.size(), static_cast<size_t>(kCount));
    ASSERT_EQ(vec.size(), static_cast<size_t>(kCount));
    int bad = 0;
    for (int64_t i = 0; i < kCount && bad < 5; ++i) {
      float want = expected(epilogue, i);
      if (bitsOf(scalar[i]) != bitsOf(vec[i])) {
        ++bad;
        ADD_FAILURE() << "element " << i << ": scalar " << scalar[i] << " != vector " << vec[i];
      }
      if (exact) {
        if (bitsOf(scalar[i]) != bitsOf(want)) {
          ++bad;
          ADD_FAILURE() << "element " << i << ": " << scalar[i] << " != " << want;
        }
        continue;
      }
      // Relative to the operands as well as the result: gelu(x) for x << 0
      // is a difference of nearly equal terms.
      float scale = std::fabs(want) + (std::fabs(in.acc[i]) + std::fabs(in.bias[i]) + 1) *
                                          (1 + std::fabs(in.up[i]) + std::fabs(in.biasUp[i]));
      if (!(std::fabs(scalar[i] - want) <= ulps * std::ldexp(scale, -23))) {
        ++bad;
        ADD_FAILURE() << "element " << i << ": " << scalar[i] << " vs " << want;
      }
    }
  }

  /// EpilogueStep::activationGrad over the inputs (dH = acc, z = bias, the
  /// up half of z = biasUp), scalar or vector form: {dZ, dZ up, H}.
  std::vector<std::vector<float>> runGrad(const GemmEpilogue &epilogue, int64_t lanes) {
    bool gated = epilogue.gatedGrad();
    std::vector<std::vector<float>> out(3, std::vector<float>(kCount, 0.0f));
    std::vector<float> dh = in.acc, z = in.bias, zUp = in.biasUp;
    float *ptrs[6] = {dh.data(),     z.data(),      zUp.data(),
                      out[0].data(), out[1].data(), out[2].data()};
    bool ok = runLoop(lanes, ptrs, [&](ImplicitLocOpBuilder &b, Value i, ValueRange a) {
      ActivationGradValues r =
          buildActivationGradEpilogue(b, epilogue, loadAt(b, lanes, a[0], i),
                                      loadAt(b, lanes, a[1], i),
                                      gated ? loadAt(b, lanes, a[2], i) : Value());
      storeAt(b, lanes, r.dz, a[3], i);
      if (gated)
        storeAt(b, lanes, r.dzUp, a[4], i);
      storeAt(b, lanes, r.h, a[5], i);
    });
    return ok ? out : std::vector<std::vector<float>>();
  }

  /// The activation gradient against C++ (act and act' in double): dZ, dZ up
  /// within `ulps` of the operands' scale (bit for bit when 0), H exactly
  /// as the round of act(z) (gated: act(g) * u) computed the same way
  /// within `ulps` before rounding (the rounding of a value within ulps of a
  /// tie may differ: at most one unit of roundTo then); the scalar and
  /// vector forms bit for bit.
  void checkGrad(const GemmEpilogue &epilogue, int ulps) {
    std::vector<std::vector<float>> scalar = runGrad(epilogue, 1);
    std::vector<std::vector<float>> vec = runGrad(epilogue, kLanes);
    ASSERT_EQ(scalar.size(), 3u);
    ASSERT_EQ(vec.size(), 3u);
    bool gated = epilogue.gatedGrad();
    int bad = 0;
    for (int64_t i = 0; i < kCount && bad < 5; ++i) {
      double dh = in.acc[i], z = in.bias[i], u = in.biasUp[i];
      double a = act(epilogue.activation, z), da = actDerivative(epilogue.activation, z);
      double want[3] = {gated ? dh * u * da : dh * da, gated ? dh * a : 0.0,
                        gated ? a * u : a};
      for (int o = 0; o < 3; ++o) {
        if (o == 1 && !gated)
          continue;
        if (bitsOf(scalar[o][i]) != bitsOf(vec[o][i])) {
          ++bad;
          ADD_FAILURE() << "output " << o << " element " << i << ": scalar " << scalar[o][i]
                        << " != vector " << vec[o][i];
        }
        double scale = (1 + std::fabs(dh)) * (1 + std::fabs(z)) * (1 + std::fabs(u));
        double tol = ulps * std::ldexp(scale, -23);
        if (o == 2 && !epilogue.roundTo.isF32()) {
          // One unit of bf16 / f16 at the value, plus the f32 tolerance.
          int e;
          std::frexp(std::fabs(want[2]) + 1e-30, &e);
          tol += std::ldexp(1.0, e - (epilogue.roundTo.isBF16() ? 8 : 11));
        }
        if (ulps == 0 && o != 2 ? bitsOf(scalar[o][i]) != bitsOf(static_cast<float>(want[o]))
                                : !(std::fabs(scalar[o][i] - want[o]) <= tol)) {
          ++bad;
          ADD_FAILURE() << "output " << o << " element " << i << ": " << scalar[o][i]
                        << " vs " << want[o];
        }
      }
    }
  }

  MLIRContext context;
  Inputs in;
};

GemmEpilogue steps(std::initializer_list<EpilogueStep> list) {
  GemmEpilogue e;
  for (EpilogueStep s : list)
    e.then(s);
  return e;
}

TEST_F(GemmEpilogueIR, EmptyEpilogueIsTheSum) {
  check(GemmEpilogue(), /*exact=*/true);
}

TEST_F(GemmEpilogueIR, BiasThenReluThenRoundBF16) {
  GemmEpilogue e = steps({EpilogueStep::bias, EpilogueStep::activation, EpilogueStep::round});
  e.activation = Activation::relu;
  e.roundTo = BFloat16Type::get(&context);
  check(e, /*exact=*/true);
}

TEST_F(GemmEpilogueIR, RoundF16IsRoundToNearestEven) {
  GemmEpilogue e = steps({EpilogueStep::round});
  e.roundTo = Float16Type::get(&context);
  check(e, /*exact=*/true);
  std::vector<float> out = run(e, 1);
  EXPECT_EQ(out[3], INFINITY); // 70000 overflows f16
  EXPECT_EQ(out[4], 1.0f);     // the tie rounds to even
}

TEST_F(GemmEpilogueIR, RoundF32IsTheIdentity) {
  GemmEpilogue e = steps({EpilogueStep::round});
  e.roundTo = Float32Type::get(&context);
  check(e, /*exact=*/true);
}

TEST_F(GemmEpilogueIR, BiasThenRoutedWeight) {
  // GEMM2: (sum + bias) * w, in that order ((a + b) * w differs from
  // a * w + b * w in f32).
  check(steps({EpilogueStep::bias, EpilogueStep::routedWeight}), /*exact=*/true);
}

TEST_F(GemmEpilogueIR, RoutedWeightThenBiasIsAnotherOrder) {
  GemmEpilogue wb = steps({EpilogueStep::routedWeight, EpilogueStep::bias});
  check(wb, /*exact=*/true);
  std::vector<float> a = run(wb, 1);
  std::vector<float> b = run(steps({EpilogueStep::bias, EpilogueStep::routedWeight}), 1);
  int differ = 0;
  for (int64_t i = 0; i < kCount; ++i)
    differ += bitsOf(a[i]) != bitsOf(b[i]);
  EXPECT_GT(differ, kCount / 2) << "the list order must be the order of the steps";
}

TEST_F(GemmEpilogueIR, GatedBiasTouchesBothHalves) {
  // swiglu with relu's exactness is not available; silu within ulps.
  GemmEpilogue e = steps({EpilogueStep::bias, EpilogueStep::activation});
  e.activation = Activation::swiglu;
  check(e, /*exact=*/false, /*ulps=*/8);
}

TEST_F(GemmEpilogueIR, Activations) {
  for (Activation a : {Activation::gelu, Activation::gelu_tanh, Activation::silu,
                       Activation::geglu}) {
    SCOPED_TRACE(stringifyActivation(a).str());
    GemmEpilogue e = steps({EpilogueStep::activation});
    e.activation = a;
    check(e, /*exact=*/false, /*ulps=*/8);
  }
}

TEST_F(GemmEpilogueIR, CombineIsNotElementWise) {
  // The combine step is the generator's: buildEpilogue leaves the value.
  check(steps({EpilogueStep::combine}), /*exact=*/true);
}

TEST_F(GemmEpilogueIR, ReluGradIsExact) {
  // relu: dZ = dH or 0 and H = round(max(z, 0)), exact in f32.
  GemmEpilogue e = steps({EpilogueStep::activationGrad});
  e.activation = Activation::relu;
  e.roundTo = Float32Type::get(&context);
  checkGrad(e, /*ulps=*/0);
  std::vector<std::vector<float>> out = runGrad(e, kLanes);
  for (int64_t i = 0; i < kCount; ++i) {
    float z = in.bias[i];
    ASSERT_EQ(bitsOf(out[0][i]), bitsOf(z > 0 ? in.acc[i] : in.acc[i] * 0.0f)) << i;
    ASSERT_EQ(bitsOf(out[2][i]), bitsOf(z > 0 ? z : 0.0f)) << i;
  }
}

TEST_F(GemmEpilogueIR, ActivationGrads) {
  for (Activation a : {Activation::gelu, Activation::gelu_tanh, Activation::silu,
                       Activation::swiglu, Activation::geglu}) {
    for (Type t : {Type(Float32Type::get(&context)), Type(BFloat16Type::get(&context))}) {
      SCOPED_TRACE(stringifyActivation(a).str() + (t.isF32() ? " f32" : " bf16"));
      GemmEpilogue e = steps({EpilogueStep::activationGrad});
      e.activation = a;
      e.roundTo = t;
      checkGrad(e, /*ulps=*/16);
    }
  }
}

TEST_F(GemmEpilogueIR, ActivationGradRoundsHOnly) {
  // H rounded to bf16 (GEMM2 read it so); dZ stays f32.
  GemmEpilogue e = steps({EpilogueStep::activationGrad});
  e.activation = Activation::silu;
  e.roundTo = BFloat16Type::get(&context);
  std::vector<std::vector<float>> out = runGrad(e, kLanes);
  int unrounded = 0;
  for (int64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(bitsOf(out[2][i]) & 0xffffu, 0u) << "H " << i << " is not a bf16";
    unrounded += (bitsOf(out[0][i]) & 0xffffu) != 0;
  }
  EXPECT_GT(unrounded, kCount / 2) << "dZ must not be rounded";
}

TEST(GemmEpilogue, ActivationGradIsAloneAndNotAWeightGradient) {
  MLIRContext ctx;
  Type f32 = Float32Type::get(&ctx);
  GroupedGemmDesc d;
  d.bTransposed = true;
  d.aType = d.bType = d.cType = f32;
  d.epilogue.then(EpilogueStep::activationGrad);
  d.epilogue.activation = Activation::swiglu;
  EXPECT_EQ(d.invalidReason(), "the activation-gradient step needs the type H is rounded to");
  d.epilogue.roundTo = f32;
  EXPECT_EQ(d.invalidReason(), "");
  EXPECT_TRUE(d.epilogue.gatedGrad());
  EXPECT_FALSE(d.gated()) << "B and the sum have N columns";
  GroupedGemmDesc withBias = d;
  withBias.epilogue.then(EpilogueStep::bias);
  EXPECT_EQ(withBias.invalidReason(),
            "the activation-gradient step is the epilogue's only step");
  GroupedGemmDesc w = expertWeightGradient(false, f32, f32, f32);
  w.epilogue = d.epilogue;
  EXPECT_EQ(w.invalidReason(), "the weight-gradient form has no activation gradient");
}

TEST(GemmEpilogue, Description) {
  MLIRContext ctx;
  Type bf16 = BFloat16Type::get(&ctx), f32 = Float32Type::get(&ctx);
  GroupedGemmDesc g1 = expertGemm1(true, Activation::swiglu, true, bf16, bf16, bf16);
  EXPECT_TRUE(g1.gathered());
  EXPECT_TRUE(g1.gated());
  EXPECT_EQ(g1.epilogue.steps,
            (llvm::SmallVector<EpilogueStep, 4>{EpilogueStep::bias, EpilogueStep::activation,
                                                EpilogueStep::round}));
  EXPECT_EQ(g1.epilogue.roundTo, bf16);
  GemmEpilogue noBias = g1.epilogue.without(EpilogueStep::bias);
  EXPECT_FALSE(noBias.has(EpilogueStep::bias));
  EXPECT_TRUE(noBias.gated());
  GroupedGemmDesc g2 = expertGemm2(false, true, true, bf16, bf16, f32);
  EXPECT_FALSE(g2.gathered());
  EXPECT_FALSE(g2.gated());
  EXPECT_EQ(g2.epilogue.steps, (llvm::SmallVector<EpilogueStep, 4>{
                                   EpilogueStep::routedWeight, EpilogueStep::combine}));
  EXPECT_EQ(g2.cType, f32);
}

} // namespace
