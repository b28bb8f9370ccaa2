//===- GroupedGemmIRTest.cpp - the CPU grouped GEMM's forms against C++ ---===//
//
// cpu::emitGroupedGemm (lowering/cpu/ExpertKernels.h) for the forms of the
// grouped-GEMM description (lowering/GroupedGemm.h) that no moe op lowers
// to yet, the seams of the backward (docs/spec.md §9):
//  * the weight-gradient form (GemmReduction::groupRows): C[g] = A[rows of
//    g]^T B[rows of g], A gathered through a row map or not, K = the
//    group's row count, a group without rows giving exact zeros;
//  * a transposed B (bTransposed, B stored [G, N, K]), read element by
//    element or packed once into the micro-kernels' panels;
// and, as the baseline, the forward form they are compared with. Each is
// built into a function, JIT-compiled with MLIR's ExecutionEngine and
// checked against plain C++ loops that sum in the same order with fmaf
// (increasing k, or increasing plan row): the same bits are required. The
// shapes leave tails everywhere (37 rows for 6- or 4-row micro-tiles, 45
// columns for 8- or 16-lane vectors), under the AVX-512 and the AVX2
// configurations of #moe.cpu_config.
//
//===----------------------------------------------------------------------===//

#include "dialect/MoEDialect.h"
#include "lowering/cpu/ExpertKernels.h"
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
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

using namespace mlir;
using namespace mlir::moe;

namespace {

// Tokens, A's columns (the weight gradient's rows M, or K), output columns,
// groups and their plan rows (one empty group).
constexpr int64_t kT = 20, kM = 37, kN = 45, kG = 4;
const std::vector<int32_t> kOffsets = {0, 13, 13, 43, 50};
constexpr int64_t kP = 50;

/// A memref descriptor of any rank, as the LLVM lowering lays it out.
template <int Rank, typename T> struct Desc {
  T *allocated;
  T *aligned;
  int64_t offset;
  int64_t sizes[Rank];
  int64_t strides[Rank];
};

template <int Rank, typename T> Desc<Rank, T> desc(std::vector<T> &v, std::array<int64_t, Rank> s) {
  Desc<Rank, T> d{v.data(), v.data(), 0, {}, {}};
  int64_t stride = 1;
  for (int i = Rank - 1; i >= 0; --i) {
    d.sizes[i] = s[i];
    d.strides[i] = stride;
    stride *= s[i];
  }
  return d;
}

using moe_test::bitsOf;

enum class Form {
  forward,
  forwardTransposed,
  forwardTransposedPacked,
  weightGradient,
  // The weight gradient on A and B copied into the per-call panels of
  // emitPackColumns and emitPackRows (what the CPU backward runs).
  weightGradientPanels,
};

class GroupedGemmIR : public ::testing::TestWithParam<std::tuple<Form, bool, bool>> {
protected:
  static void SetUpTestSuite() { moe_test::initJit(); }

  void SetUp() override {
    moe_test::registerJitTranslations(context);
    context.loadDialect<func::FuncDialect, arith::ArithDialect, math::MathDialect,
                        memref::MemRefDialect, scf::SCFDialect, vector::VectorDialect,
                        LLVM::LLVMDialect, MoEDialect>();
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::uniform_int_distribution<int32_t> token(0, kT - 1);
    auto fill = [&](std::vector<float> &v, int64_t n) {
      v.resize(n);
      for (float &x : v)
        x = u(rng);
    };
    fill(x, kT * kM);
    fill(rows, kP * kM);
    fill(dz, kP * kN);
    fill(w, kG * kM * kN);
    for (int64_t r = 0; r < kP; ++r)
      rowMap.push_back(token(rng));
  }

  CpuConfigAttr config(bool avx2) {
    llvm::StringMap<bool> f;
    if (avx2) {
      f["avx2"] = true;
      f["fma"] = true;
    } else {
      f["avx512f"] = true;
      f["avx2"] = true;
      f["fma"] = true;
    }
    return cpu::chooseCpuConfig(&context, f);
  }

  /// Builds, compiles and runs the GEMM of `form`; returns C.
  std::vector<float> run(Form form, bool gathered, bool avx2) {
    OpBuilder ob(&context);
    Location loc = ob.getUnknownLoc();
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
    ob.setInsertionPointToEnd(module->getBody());
    Type f32 = ob.getF32Type(), i32 = ob.getI32Type();
    bool panels = form == Form::weightGradientPanels;
    bool wg = form == Form::weightGradient || panels;
    bool transposed = form == Form::forwardTransposed || form == Form::forwardTransposedPacked;
    // Arguments: A, the row map, the offsets, B, C.
    auto aType = MemRefType::get({gathered ? kT : kP, kM}, f32);
    auto bType = wg ? MemRefType::get({kP, kN}, f32)
                    : transposed ? MemRefType::get({kG, kN, kM}, f32)
                                 : MemRefType::get({kG, kM, kN}, f32);
    auto cType = wg ? MemRefType::get({kG, kM, kN}, f32) : MemRefType::get({kP, kN}, f32);
    auto fn = func::FuncOp::create(
        ob, loc, "gemm",
        ob.getFunctionType({aType, MemRefType::get({kP}, i32), MemRefType::get({kG + 1}, i32),
                            bType, cType},
                           {}));
    fn->setAttr("llvm.emit_c_interface", ob.getUnitAttr());
    Block *body = fn.addEntryBlock();
    ImplicitLocOpBuilder b(loc, ob);
    b.setInsertionPointToStart(body);
    auto a = body->getArguments();
    cpu::GroupedGemm g;
    g.desc = wg ? expertWeightGradient(gathered, f32, f32, f32)
                : expertGemm2(false, false, false, f32, f32, f32);
    if (!wg && gathered)
      g.desc.rows = GemmRows::gathered;
    g.desc.bTransposed = transposed;
    g.config = config(avx2);
    g.a = a[0];
    g.aRowMap = gathered ? a[1] : Value();
    g.groupOffsets = a[2];
    g.numGroups = arith::ConstantIndexOp::create(b, kG);
    g.b = a[3];
    g.c = a[4];
    g.columns = arith::ConstantIndexOp::create(b, kN);
    if (wg)
      g.numRows = arith::ConstantIndexOp::create(b, kM);
    else
      g.reduction = arith::ConstantIndexOp::create(b, kM);
    if (form == Form::forwardTransposedPacked) {
      cpu::PackedWeights pw = cpu::declarePackedWeights(b, *module, a[3], g.config,
                                                        /*gated=*/false, /*vnni=*/false,
                                                        /*transposed=*/true);
      cpu::emitPackWeights(b, a[3], pw.packed, pw.key, g.config, false, false, true);
      g.b = pw.packed;
      g.bPacked = true;
    }
    SmallVector<Value> scratch;
    if (panels) {
      int64_t width = g.config.getTileColumns(/*gated=*/false), r = g.config.getMicroRows();
      Value bPanels = memref::AllocOp::create(
          b, MemRefType::get({(kN + width - 1) / width, kP, width}, f32));
      cpu::emitPackRows(b, a[3], bPanels, g.config);
      Value aPanels =
          memref::AllocOp::create(b, MemRefType::get({(kM + r - 1) / r, kP, r}, f32));
      cpu::emitPackColumns(b, a[0], aPanels, g.config);
      g.b = bPanels;
      g.a = aPanels;
      g.bPackedRows = g.aPackedColumns = true;
      scratch = {aPanels, bPanels};
    }
    cpu::emitGroupedGemm(b, g);
    for (Value v : scratch)
      memref::DeallocOp::create(b, v);
    func::ReturnOp::create(b);

    std::unique_ptr<ExecutionEngine> engine = moe_test::lowerAndJit(
        *module, "convert-scf-to-cf,convert-vector-to-llvm,expand-strided-metadata,"
                 "finalize-memref-to-llvm,convert-to-llvm,reconcile-unrealized-casts");
    if (!engine)
      return {};

    std::vector<float> &aData = gathered ? x : rows;
    std::vector<float> bData = wg ? dz : w;
    if (transposed) // stored [G, N, K]
      for (int64_t gi = 0; gi < kG; ++gi)
        for (int64_t k = 0; k < kM; ++k)
          for (int64_t n = 0; n < kN; ++n)
            bData[(gi * kN + n) * kM + k] = w[(gi * kM + k) * kN + n];
    std::vector<int32_t> map = rowMap, offsets = kOffsets;
    // NaN everywhere: an output the kernel does not write fails.
    std::vector<float> c(wg ? kG * kM * kN : kP * kN, NAN);
    auto dA = desc<2>(aData, {gathered ? kT : kP, kM});
    auto dMap = desc<1>(map, {kP});
    auto dOff = desc<1>(offsets, {kG + 1});
    auto dB2 = desc<2>(bData, {kP, kN});
    auto dB3 = desc<3>(bData, {kG, transposed ? kN : kM, transposed ? kM : kN});
    auto dC2 = desc<2>(c, {kP, kN});
    auto dC3 = desc<3>(c, {kG, kM, kN});
    void *pA = &dA, *pMap = &dMap, *pOff = &dOff, *pB = wg ? (void *)&dB2 : (void *)&dB3,
         *pC = wg ? (void *)&dC3 : (void *)&dC2;
    llvm::SmallVector<void *> packed{&pA, &pMap, &pOff, &pB, &pC};
    llvm::Error err = engine->invokePacked("_mlir_ciface_gemm", packed);
    EXPECT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
    return c;
  }

  /// The C++ loops, in the kernels' order of summation (fmaf, increasing k
  /// or plan row).
  std::vector<float> expected(Form form, bool gathered) {
    bool wg = form == Form::weightGradient || form == Form::weightGradientPanels;
    auto aAt = [&](int64_t r, int64_t m) {
      return gathered ? x[rowMap[r] * kM + m] : rows[r * kM + m];
    };
    std::vector<float> c(wg ? kG * kM * kN : kP * kN, 0.0f);
    for (int64_t gi = 0; gi < kG; ++gi)
      for (int64_t n = 0; n < kN; ++n) {
        if (wg) {
          for (int64_t m = 0; m < kM; ++m) {
            float acc = 0.0f;
            for (int64_t r = kOffsets[gi]; r < kOffsets[gi + 1]; ++r)
              acc = std::fmaf(aAt(r, m), dz[r * kN + n], acc);
            c[(gi * kM + m) * kN + n] = acc;
          }
          continue;
        }
        for (int64_t r = kOffsets[gi]; r < kOffsets[gi + 1]; ++r) {
          float acc = 0.0f;
          for (int64_t k = 0; k < kM; ++k)
            acc = std::fmaf(aAt(r, k), w[(gi * kM + k) * kN + n], acc);
          c[r * kN + n] = acc;
        }
      }
    return c;
  }

  MLIRContext context;
  std::vector<float> x, rows, dz, w;
  std::vector<int32_t> rowMap;
};

TEST_P(GroupedGemmIR, SameBitsAsTheLoops) {
  auto [form, gathered, avx2] = GetParam();
  if (form == Form::weightGradientPanels && gathered)
    GTEST_SKIP() << "the per-call panels copy A's rows as they are (no gather)";
  std::vector<float> got = run(form, gathered, avx2);
  std::vector<float> want = expected(form, gathered);
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i)
    if (bitsOf(got[i]) != bitsOf(want[i])) {
      ++bad;
      ADD_FAILURE() << "element " << i << ": " << got[i] << " != " << want[i];
    }
  if (form == Form::weightGradient || form == Form::weightGradientPanels) {
    // Group 1 has no rows: its dW is exactly +0.
    for (int64_t i = kM * kN; i < 2 * kM * kN; ++i)
      ASSERT_EQ(bitsOf(got[i]), 0u) << "element " << i << " of the empty group";
  }
}

std::string formName(const ::testing::TestParamInfo<std::tuple<Form, bool, bool>> &info) {
  static const char *const forms[] = {"Forward", "ForwardTransposedB",
                                      "ForwardTransposedBPacked", "WeightGradient",
                                      "WeightGradientPanels"};
  return std::string(forms[static_cast<int>(std::get<0>(info.param))]) +
         (std::get<1>(info.param) ? "_Gathered" : "_Direct") +
         (std::get<2>(info.param) ? "_AVX2" : "_AVX512");
}

INSTANTIATE_TEST_SUITE_P(Forms, GroupedGemmIR,
                         ::testing::Combine(::testing::Values(Form::forward,
                                                              Form::forwardTransposed,
                                                              Form::forwardTransposedPacked,
                                                              Form::weightGradient,
                                                              Form::weightGradientPanels),
                                            ::testing::Bool(), ::testing::Bool()),
                         formName);

TEST(GroupedGemmDesc, InvalidForms) {
  MLIRContext ctx;
  Type f32 = Float32Type::get(&ctx);
  GroupedGemmDesc wg = expertWeightGradient(true, f32, f32, f32);
  EXPECT_EQ(wg.invalidReason(), "");
  wg.bTransposed = true;
  EXPECT_NE(wg.invalidReason(), "");
  GroupedGemmDesc planRowsForward = expertGemm2(false, true, false, f32, f32, f32);
  planRowsForward.weights = GemmWeights::planRows;
  EXPECT_NE(planRowsForward.invalidReason(), "");
  GroupedGemmDesc gated = expertGemm1(true, Activation::swiglu, false, f32, f32, f32);
  EXPECT_EQ(gated.invalidReason(), "");
  gated.bTransposed = true;
  EXPECT_NE(gated.invalidReason(), "");
  GroupedGemmDesc weighted = expertWeightGradient(false, f32, f32, f32);
  weighted.epilogue.then(EpilogueStep::routedWeight);
  EXPECT_NE(weighted.invalidReason(), "");
}

} // namespace
