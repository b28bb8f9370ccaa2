//===- Philox.cpp - Philox4x32-10 in IR -----------------------------------===//

#include "lowering/Philox.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <cmath>

using namespace mlir;

std::array<Value, 4> moe::buildPhilox4x32x10(OpBuilder &b, Location loc,
                                             std::array<Value, 2> key,
                                             std::array<Value, 4> ctr) {
  auto c32 = [&](uint32_t v) -> Value {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(static_cast<int32_t>(v)));
  };
  Value m0 = c32(0xD2511F53u), m1 = c32(0xCD9E8D57u);
  Value w0 = c32(0x9E3779B9u), w1 = c32(0xBB67AE85u);
  auto xor3 = [&](Value a, Value c, Value d) -> Value {
    return arith::XOrIOp::create(b, loc, arith::XOrIOp::create(b, loc, a, c), d);
  };
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] = arith::AddIOp::create(b, loc, key[0], w0);
      key[1] = arith::AddIOp::create(b, loc, key[1], w1);
    }
    auto p0 = arith::MulUIExtendedOp::create(b, loc, m0, ctr[0]);
    auto p1 = arith::MulUIExtendedOp::create(b, loc, m1, ctr[2]);
    ctr = {xor3(p1.getHigh(), ctr[1], key[0]), p1.getLow(),
           xor3(p0.getHigh(), ctr[3], key[1]), p0.getLow()};
  }
  return ctr;
}

Value moe::buildPhiloxUniform(OpBuilder &b, Location loc, Value out0) {
  Value eight = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(8));
  Value top24 = arith::ShRUIOp::create(b, loc, out0, eight);
  Value asFloat = arith::UIToFPOp::create(b, loc, b.getF32Type(), top24);
  Value scale = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(static_cast<float>(std::ldexp(1.0, -24))));
  return arith::MulFOp::create(b, loc, asFloat, scale);
}
