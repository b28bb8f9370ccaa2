//===- IRBuilder.h - scalar IR emission for the GPU lowering ----*- C++ -*-===//
//
// A small helper around ImplicitLocOpBuilder used by the kernel builders
// (KernelSkeleton.h and the *Kernels.cpp emitters) and the host code
// (Host.cpp): index/i32/f32 arithmetic, memref loads and stores, and scf
// loops and conditionals.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_GPU_IRBUILDER_H
#define MOE_LOWERING_GPU_IRBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include "lowering/ScalarBuilder.h"

namespace mlir {
namespace moe {
namespace gpu_lowering {

class IRB : public ScalarBuilder {
public:
  explicit IRB(ImplicitLocOpBuilder &b) : ScalarBuilder(b) {}

  Type index() { return b.getIndexType(); }

  Value divui(Value x, Value y) { return arith::DivUIOp::create(b, x, y); }
  Value remui(Value x, Value y) { return arith::RemUIOp::create(b, x, y); }
  Value ceildiv(Value x, Value y) { return arith::CeilDivUIOp::create(b, x, y); }
  Value mini(Value x, Value y) { return arith::MinSIOp::create(b, x, y); }
  Value lt(Value x, Value y) { return cmpi(arith::CmpIPredicate::slt, x, y); }
  Value ult(Value x, Value y) { return cmpi(arith::CmpIPredicate::ult, x, y); }
  Value ule(Value x, Value y) { return cmpi(arith::CmpIPredicate::ule, x, y); }
  Value ge(Value x, Value y) { return cmpi(arith::CmpIPredicate::sge, x, y); }
  Value eq(Value x, Value y) { return cmpi(arith::CmpIPredicate::eq, x, y); }
  Value noti(Value x) { return arith::XOrIOp::create(b, x, ci1(true)); }
  /// Row `p` (index) as i32 when p < rows, else -1: the "no row" value of the
  /// GEMM skeleton's gathers (a zero row, never loaded).
  Value rowOrNone(Value p, Value rows) { return select(ult(p, rows), toI32(p), ci32(-1)); }

  Value load(Value m, Value i) { return memref::LoadOp::create(b, m, ValueRange{i}); }
  void store(Value v, Value m, Value i) { memref::StoreOp::create(b, v, m, ValueRange{i}); }

  /// scf.for lb..ub step `step` with iter_args.
  SmallVector<Value> forLoop(Value lb, Value ub, Value step, ValueRange init,
                             function_ref<SmallVector<Value>(IRB &, Value, ValueRange)> body) {
    auto loop = scf::ForOp::create(
        b, lb, ub, step, init,
        [&](OpBuilder &nested, Location loc, Value iv, ValueRange args) {
          ImplicitLocOpBuilder nb(loc, nested);
          IRB ne(nb);
          scf::YieldOp::create(nb, body(ne, iv, args));
        });
    return SmallVector<Value>(loop.getResults().begin(), loop.getResults().end());
  }
  SmallVector<Value> forLoop(Value lb, Value ub, ValueRange init,
                             function_ref<SmallVector<Value>(IRB &, Value, ValueRange)> body) {
    return forLoop(lb, ub, idx(1), init, body);
  }
  /// A loop without iter_args.
  void forEach(Value lb, Value ub, Value step, function_ref<void(IRB &, Value)> body) {
    forLoop(lb, ub, step, {}, [&](IRB &e, Value iv, ValueRange) {
      body(e, iv);
      return SmallVector<Value>{};
    });
  }
  /// scf.if without results.
  void ifThen(Value cond, function_ref<void(IRB &)> thenBody) {
    auto ifOp = scf::IfOp::create(b, cond, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    IRB ne(b);
    thenBody(ne);
  }
  /// scf.if with results.
  SmallVector<Value> ifElse(Value cond, TypeRange types,
                            function_ref<SmallVector<Value>(IRB &)> thenBody,
                            function_ref<SmallVector<Value>(IRB &)> elseBody) {
    auto ifOp = scf::IfOp::create(
        b, cond,
        [&](OpBuilder &nested, Location loc) {
          ImplicitLocOpBuilder nb(loc, nested);
          IRB ne(nb);
          scf::YieldOp::create(nb, thenBody(ne));
        },
        [&](OpBuilder &nested, Location loc) {
          ImplicitLocOpBuilder nb(loc, nested);
          IRB ne(nb);
          scf::YieldOp::create(nb, elseBody(ne));
        });
    (void)types;
    return SmallVector<Value>(ifOp.getResults().begin(), ifOp.getResults().end());
  }
  /// An f32 value x as two terms of type `t` (bf16): hi = t(x) and lo =
  /// t(x - hi), rounded to nearest even, so hi + lo = x to within 2^-16 |x|
  /// and a product of either term with a `t` value is exact in f32 (the
  /// split operands of the backward's tensor-core GEMMs, MmaGemm.h). When hi
  /// is not finite lo is 0, so an infinite or NaN x stays what it is.
  std::pair<Value, Value> splitTerms(Value x, Type t) {
    Value hi = arith::TruncFOp::create(b, t, x);
    Value wide = arith::ExtFOp::create(b, x.getType(), hi);
    Value finite = cmpf(arith::CmpFPredicate::ONE, math::AbsFOp::create(b, wide),
                        arith::ConstantOp::create(
                            b, b.getFloatAttr(x.getType(), APFloat::getInf(APFloat::IEEEsingle())))
                            .getResult());
    Value lo = arith::TruncFOp::create(b, t, arith::SubFOp::create(b, x, wide));
    Value zero = arith::ConstantOp::create(b, b.getFloatAttr(t, 0.0));
    return {hi, arith::SelectOp::create(b, finite, lo, zero)};
  }

  /// The bits of |x| as an i32 when x is finite, else 0. Non-negative
  /// floats order as their bit patterns do, so the largest finite
  /// magnitude of a tensor is an integer maximum (exact and independent of
  /// the order of the reduction; KernelLibrary::absMaxBits).
  Value finiteAbsBits(Value x) {
    Value a = math::AbsFOp::create(b, x);
    Value inf = arith::ConstantOp::create(
        b, b.getFloatAttr(x.getType(), APFloat::getInf(APFloat::IEEEsingle())));
    Value finite = cmpf(arith::CmpFPredicate::OLT, a, inf);
    Value bits = arith::BitcastOp::create(b, b.getI32Type(), a);
    return arith::SelectOp::create(b, finite, bits, ci32(0));
  }
  /// The power-of-two scale s, and 1/s, that an f32 tensor whose largest
  /// finite magnitude has the bits `maxBits` (finiteAbsBits) is multiplied
  /// by before it is split into f16 terms (the f16 backward's split
  /// operands, MmaGemm.h): s * max lies in [2^13, 2^14), far inside f16's
  /// range, with s and 1/s normal f32 numbers (s in [2^-126, 2^126]); 1
  /// when the maximum is 0 or subnormal. Multiplying by either is exact.
  std::pair<Value, Value> splitScale(Value maxBits) {
    Type f32 = b.getF32Type();
    Value biased = arith::AndIOp::create(
        b, arith::ShRUIOp::create(b, maxBits, ci32(23)), ci32(255));
    // max in [2^(biased-127), 2^(biased-126)): s = 2^(140 - biased).
    Value exp = arith::SubIOp::create(b, ci32(140), biased);
    exp = arith::MaxSIOp::create(b, arith::MinSIOp::create(b, exp, ci32(126)), ci32(-126));
    exp = arith::SelectOp::create(b, eq(biased, ci32(0)), ci32(0), exp);
    auto pow2 = [&](Value e) {
      Value bits = arith::ShLIOp::create(b, arith::AddIOp::create(b, e, ci32(127)), ci32(23));
      return arith::BitcastOp::create(b, f32, bits).getResult();
    };
    return {pow2(exp), pow2(arith::SubIOp::create(b, ci32(0), exp))};
  }

  /// `cond ? load(m, i) : zero` without reading out of bounds.
  Value guardedLoad(Value cond, Type type, function_ref<Value(IRB &)> load) {
    Value zero = isa<FloatType>(type)
                     ? arith::ConstantOp::create(b, b.getFloatAttr(type, 0.0)).getResult()
                     : arith::ConstantOp::create(b, b.getIntegerAttr(type, 0)).getResult();
    return ifElse(cond, {type},
                  [&](IRB &e) { return SmallVector<Value>{load(e)}; },
                  [&](IRB &) { return SmallVector<Value>{zero}; })[0];
  }
};

} // namespace gpu_lowering
} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_GPU_IRBUILDER_H
