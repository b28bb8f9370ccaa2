//===- Activations.cpp - the expert activations, for every target --------===//

#include "lowering/Activations.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>

using namespace mlir;

Value moe::buildActivation(ImplicitLocOpBuilder &b, Activation act, Value x) {
  Type type = x.getType();
  auto c = [&](double v) -> Value {
    auto f = b.getF32FloatAttr(static_cast<float>(v));
    if (auto vt = dyn_cast<VectorType>(type))
      return arith::ConstantOp::create(b, vt, DenseElementsAttr::get(vt, f.getValue()));
    return arith::ConstantOp::create(b, f);
  };
  auto mul = [&](Value p, Value q) -> Value { return arith::MulFOp::create(b, p, q); };
  auto add = [&](Value p, Value q) -> Value { return arith::AddFOp::create(b, p, q); };
  switch (act) {
  case Activation::relu:
    return arith::MaximumFOp::create(b, x, c(0.0));
  case Activation::silu:
  case Activation::swiglu:
    return arith::DivFOp::create(
        b, x, add(c(1.0), math::ExpOp::create(b, arith::NegFOp::create(b, x))));
  case Activation::gelu:
  case Activation::geglu: {
    Value erf = math::ErfOp::create(b, mul(x, c(M_SQRT1_2)));
    return mul(mul(c(0.5), x), add(c(1.0), erf));
  }
  case Activation::gelu_tanh: {
    Value x3 = mul(mul(x, x), x);
    Value inner = mul(c(std::sqrt(2.0 / M_PI)), add(x, mul(c(0.044715), x3)));
    return mul(mul(c(0.5), x), add(c(1.0), math::TanhOp::create(b, inner)));
  }
  }
  llvm_unreachable("unknown activation");
}

