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


Value moe::buildActivationDerivative(ImplicitLocOpBuilder &b, Activation act, Value x) {
  Type type = x.getType();
  auto c = [&](double v) -> Value {
    auto f = b.getF32FloatAttr(static_cast<float>(v));
    if (auto vt = dyn_cast<VectorType>(type))
      return arith::ConstantOp::create(b, vt, DenseElementsAttr::get(vt, f.getValue()));
    return arith::ConstantOp::create(b, f);
  };
  auto mul = [&](Value p, Value q) -> Value { return arith::MulFOp::create(b, p, q); };
  auto add = [&](Value p, Value q) -> Value { return arith::AddFOp::create(b, p, q); };
  auto sub = [&](Value p, Value q) -> Value { return arith::SubFOp::create(b, p, q); };
  switch (act) {
  case Activation::relu: {
    // relu'(0) = 0 (docs/spec.md §9).
    Value positive = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT, x, c(0.0));
    return arith::SelectOp::create(b, positive, c(1.0), c(0.0));
  }
  case Activation::silu:
  case Activation::swiglu: {
    // s = sigmoid(x): silu' = s (1 + x (1 - s)).
    Value s = arith::DivFOp::create(
        b, c(1.0), add(c(1.0), math::ExpOp::create(b, arith::NegFOp::create(b, x))));
    return mul(s, add(c(1.0), mul(x, sub(c(1.0), s))));
  }
  case Activation::gelu:
  case Activation::geglu: {
    // Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
    Value erf = math::ErfOp::create(b, mul(x, c(M_SQRT1_2)));
    Value cdf = mul(c(0.5), add(c(1.0), erf));
    Value pdf = mul(c(0.5 * M_2_SQRTPI * M_SQRT1_2),
                    math::ExpOp::create(b, mul(c(-0.5), mul(x, x))));
    return add(cdf, mul(x, pdf));
  }
  case Activation::gelu_tanh: {
    // u = sqrt(2/pi) (x + 0.044715 x^3), t = tanh(u):
    // 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
    Value x2 = mul(x, x);
    Value k = c(std::sqrt(2.0 / M_PI));
    Value u = mul(k, add(x, mul(c(0.044715), mul(x2, x))));
    Value t = math::TanhOp::create(b, u);
    Value du = mul(k, add(c(1.0), mul(c(3.0 * 0.044715), x2)));
    return add(mul(c(0.5), add(c(1.0), t)),
               mul(mul(c(0.5), x), mul(sub(c(1.0), mul(t, t)), du)));
  }
  }
  llvm_unreachable("unknown activation");
}
