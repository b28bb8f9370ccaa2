//===- ScalarBuilder.h - scalar IR emission helpers --------------*- C++ -*-===//
//
// Constants, arithmetic, comparisons and casts on an ImplicitLocOpBuilder,
// shared by the CPU lowering (ConvertMoEToCPU.cpp) and the GPU kernel
// builders (gpu/IRBuilder.h), which add tensor and memref helpers on top.
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_SCALARBUILDER_H
#define MOE_LOWERING_SCALARBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include "lowering/RoutingMath.h"

#include <limits>

namespace mlir {
namespace moe {

class ScalarBuilder {
public:
  explicit ScalarBuilder(ImplicitLocOpBuilder &b) : b(b) {}

  ImplicitLocOpBuilder &b;

  Type f32() { return b.getF32Type(); }
  Type i32() { return b.getI32Type(); }

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value ci32(int64_t v) {
    return arith::ConstantOp::create(b, b.getI32IntegerAttr(static_cast<int32_t>(v)));
  }
  Value cf32(double v) {
    return arith::ConstantOp::create(b, b.getF32FloatAttr(static_cast<float>(v)));
  }
  Value ci1(bool v) { return arith::ConstantOp::create(b, b.getBoolAttr(v)); }

  Value addf(Value x, Value y) { return arith::AddFOp::create(b, x, y); }
  Value subf(Value x, Value y) { return arith::SubFOp::create(b, x, y); }
  Value mulf(Value x, Value y) { return arith::MulFOp::create(b, x, y); }
  Value divf(Value x, Value y) { return arith::DivFOp::create(b, x, y); }
  Value maxf(Value x, Value y) { return arith::MaximumFOp::create(b, x, y); }
  Value exp(Value x) { return math::ExpOp::create(b, x); }
  Value log(Value x) { return math::LogOp::create(b, x); }
  /// The routing exp/log/sigmoid (lowering/RoutingMath.h): the same f32 bits
  /// on every target. Routing (softmax, sigmoid scores, MOESART, the shared
  /// expert's gate) uses only these.
  Value routingExp(Value x) { return buildRoutingExp(b, b.getLoc(), x); }
  Value routingLog(Value x) { return buildRoutingLog(b, b.getLoc(), x); }
  Value routingSigmoid(Value x) { return buildRoutingSigmoid(b, b.getLoc(), x); }
  /// The Soft MoE softmaxes (docs/spec.md, Soft MoE), one definition for the
  /// CPU and GPU paths: max-subtracted in f32; the running maximum starts at
  /// softmaxMaxInit() and folds with softmaxMax, the denominator sums
  /// softmaxTerm(x, max), and each weight is softmaxWeight(x, max, sum).
  Value softmaxMaxInit() { return cf32(-std::numeric_limits<double>::infinity()); }
  Value softmaxMax(Value acc, Value x) { return maxf(acc, x); }
  Value softmaxTerm(Value x, Value max) { return exp(subf(x, max)); }
  Value softmaxWeight(Value x, Value max, Value sum) { return divf(softmaxTerm(x, max), sum); }
  Value addi(Value x, Value y) { return arith::AddIOp::create(b, x, y); }
  Value subi(Value x, Value y) { return arith::SubIOp::create(b, x, y); }
  Value muli(Value x, Value y) { return arith::MulIOp::create(b, x, y); }
  Value cmpf(arith::CmpFPredicate p, Value x, Value y) {
    return arith::CmpFOp::create(b, p, x, y);
  }
  Value cmpi(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, p, x, y);
  }
  Value select(Value c, Value x, Value y) { return arith::SelectOp::create(b, c, x, y); }
  Value andi(Value x, Value y) { return arith::AndIOp::create(b, x, y); }
  Value ori(Value x, Value y) { return arith::OrIOp::create(b, x, y); }
  Value toIndex(Value v) { return arith::IndexCastOp::create(b, b.getIndexType(), v); }
  Value toI32(Value v) { return arith::IndexCastOp::create(b, i32(), v); }
  /// A float value as f32 (extended from bf16/f16; f32 as it is).
  Value widenF32(Value v) {
    return v.getType().isF32() ? v : arith::ExtFOp::create(b, f32(), v).getResult();
  }
  /// index or i32 -> f32.
  Value toF32(Value v) {
    if (v.getType().isIndex())
      v = arith::IndexCastOp::create(b, b.getI64Type(), v);
    return arith::SIToFPOp::create(b, f32(), v);
  }
};

} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_SCALARBUILDER_H
