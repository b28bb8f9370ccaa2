//===- RoutingMath.cpp - the routing exp/log in IR ------------------------===//
//
// See RoutingMath.h and docs/routing-numerics.md. The constants are written
// as hexadecimal doubles so that they are exact.
//
//===----------------------------------------------------------------------===//

#include "lowering/RoutingMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>
#include <limits>

using namespace mlir;

namespace {

/// ln 2 split in a high part with trailing zero bits and the rest (fdlibm).
constexpr double kLn2Hi = 0x1.62e42feep-1; // 0x1.62e42fee00000p-1
constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;
constexpr double kLog2E = 0x1.71547652b82fep0;
constexpr double kSqrt2 = 0x1.6a09e667f3bcdp0;
/// 1.5 * 2^52: adding and subtracting it rounds an f64 of magnitude below
/// 2^51 to the nearest integer (ties to even).
constexpr double kRoundMagic = 0x1.8p52;
/// exp's input range after clamping: exp(-160) and exp(100) round to 0 and
/// +inf in f32, and every 2^k below stays a normal f64.
constexpr double kExpLow = -160.0, kExpHigh = 100.0;
/// exp(r) = sum_{i=0}^{13} r^i / i! for |r| <= ln(2)/2 (r^14/14! < 2^-57):
/// the f64 values nearest to 1/i!.
constexpr double kExpCoef[] = {
    0x1p+0,  0x1p+0, 0x1p-1, 0x1.5555555555555p-3, 0x1.5555555555555p-5,
    0x1.1111111111111p-7,  0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-13,
    0x1.a01a01a01a01ap-16, 0x1.71de3a556c734p-19, 0x1.27e4fb7789f5cp-22,
    0x1.ae64567f544e4p-26, 0x1.1eed8eff8d898p-29, 0x1.6124613a86d09p-33};
/// log(m) = 2s + s z P(z), P(z) = sum_{i=0}^{10} 2/(2i+3) z^i for
/// |s| <= 0.1716 (z^11 / 23 < 2^-60): the f64 values nearest to 2/(2i+3).
constexpr double kLogCoef[] = {
    0x1.5555555555555p-1, 0x1.999999999999ap-2, 0x1.2492492492492p-2,
    0x1.c71c71c71c71cp-3, 0x1.745d1745d1746p-3, 0x1.3b13b13b13b14p-3,
    0x1.1111111111111p-3, 0x1.e1e1e1e1e1e1ep-4, 0x1.af286bca1af28p-4,
    0x1.8618618618618p-4, 0x1.642c8590b2164p-4};
constexpr int kExpDegree = 13, kLogTerms = 11;

struct F64 {
  OpBuilder &b;
  Location loc;
  Type f64() { return b.getF64Type(); }
  Type i64() { return b.getI64Type(); }
  Value c(double v) { return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(v)); }
  Value ci(int64_t v) { return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v)); }
  Value fma(Value x, Value y, Value z) { return math::FmaOp::create(b, loc, x, y, z); }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value neg(Value x) { return arith::NegFOp::create(b, loc, x); }
  Value select(Value c, Value x, Value y) { return arith::SelectOp::create(b, loc, c, x, y); }
  Value cmp(arith::CmpFPredicate p, Value x, Value y) {
    return arith::CmpFOp::create(b, loc, p, x, y);
  }
  Value toF64(Value x) { return arith::ExtFOp::create(b, loc, f64(), x); }
  Value toF32(Value x) { return arith::TruncFOp::create(b, loc, b.getF32Type(), x); }
  Value bitsOf(Value x) { return arith::BitcastOp::create(b, loc, i64(), x); }
  Value fromBits(Value x) { return arith::BitcastOp::create(b, loc, f64(), x); }
  Value f32c(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(static_cast<float>(v)));
  }
};

} // namespace

Value moe::buildRoutingExp(OpBuilder &b, Location loc, Value x) {
  F64 f{b, loc};
  Value xd = f.toF64(x);
  // Clamp (minimumf/maximumf propagate a NaN, selected away at the end).
  Value xc = arith::MinimumFOp::create(
      b, loc, arith::MaximumFOp::create(b, loc, xd, f.c(kExpLow)), f.c(kExpHigh));
  // k = nearest integer to x / ln 2.
  Value kf = f.sub(f.fma(xc, f.c(kLog2E), f.c(kRoundMagic)), f.c(kRoundMagic));
  Value negK = f.neg(kf);
  Value r = f.fma(negK, f.c(kLn2Lo), f.fma(negK, f.c(kLn2Hi), xc));
  // exp(r) = sum_{i=0}^{13} r^i / i!, Horner from the top term.
  Value p = f.c(kExpCoef[kExpDegree]);
  for (int i = kExpDegree - 1; i >= 0; --i)
    p = f.fma(p, r, f.c(kExpCoef[i]));
  // 2^k from the exponent bits (k in [-231, 145]: a normal f64).
  Value k = arith::FPToSIOp::create(b, loc, f.i64(), kf);
  Value bits = arith::ShLIOp::create(b, loc, arith::AddIOp::create(b, loc, k, f.ci(1023)),
                                     f.ci(52));
  Value y = f.toF32(f.mul(p, f.fromBits(bits)));
  Value isNan = f.cmp(arith::CmpFPredicate::UNO, x, x);
  return f.select(isNan, x, y);
}

Value moe::buildRoutingLog(OpBuilder &b, Location loc, Value x) {
  F64 f{b, loc};
  Value xd = f.toF64(x);
  Value bits = f.bitsOf(xd);
  // x = m * 2^e, m in [1, 2) (x > 0 finite; other inputs are selected away).
  Value e = arith::SubIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, bits, f.ci(52)), f.ci(1023));
  Value mBits = arith::OrIOp::create(
      b, loc, arith::AndIOp::create(b, loc, bits, f.ci(0x000fffffffffffffLL)),
      f.ci(0x3ff0000000000000LL));
  Value m = f.fromBits(mBits);
  // m in [sqrt(2)/2, sqrt(2)].
  Value big = f.cmp(arith::CmpFPredicate::OGT, m, f.c(kSqrt2));
  m = f.select(big, f.mul(m, f.c(0.5)), m);
  e = arith::SelectOp::create(b, loc, big, arith::AddIOp::create(b, loc, e, f.ci(1)), e);
  Value fm = f.sub(m, f.c(1.0));
  Value s = f.div(fm, f.add(f.c(2.0), fm));
  Value z = f.mul(s, s);
  // log(m) = 2 atanh(s) = 2s + s z P(z), P(z) = sum_i 2/(2i+3) z^i.
  Value p = f.c(kLogCoef[kLogTerms - 1]);
  for (int i = kLogTerms - 2; i >= 0; --i)
    p = f.fma(p, z, f.c(kLogCoef[i]));
  Value logm = f.fma(f.mul(s, z), p, f.mul(s, f.c(2.0)));
  Value ef = arith::SIToFPOp::create(b, loc, f.f64(), e);
  Value y = f.toF32(f.fma(ef, f.c(kLn2Hi), f.fma(ef, f.c(kLn2Lo), logm)));
  // Special values.
  Value zero = f.f32c(0.0);
  Value inf = f.f32c(std::numeric_limits<double>::infinity());
  y = f.select(f.cmp(arith::CmpFPredicate::OEQ, x, inf), inf, y);
  y = f.select(f.cmp(arith::CmpFPredicate::OEQ, x, zero), f.f32c(-INFINITY), y);
  Value bad = f.cmp(arith::CmpFPredicate::ULT, x, zero); // x < 0 or NaN
  return f.select(bad, f.f32c(std::numeric_limits<double>::quiet_NaN()), y);
}

Value moe::buildRoutingSigmoid(OpBuilder &b, Location loc, Value x) {
  Value one = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f));
  Value e = buildRoutingExp(b, loc, arith::NegFOp::create(b, loc, x));
  return arith::DivFOp::create(b, loc, one, arith::AddFOp::create(b, loc, one, e));
}
