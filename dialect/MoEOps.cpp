//===- MoEOps.cpp - moe dialect operations --------------------------------===//
//
// Verifiers of the moe ops. Every relation of docs/spec.md §2-§3 between
// known sizes is checked; each message names the operand at fault using the
// names of the assembly format (input, router_weight, router_bias, w1, w2,
// b1, b2, seed, slots, scale, output, aux_loss). ODS checks each operand's
// rank and element type alone (dialect/MoETypeConstraints.td).
//
// Result types: the ops whose result types follow from their operands and
// attributes infer them (InferTypeOpInterface; a declared type may refine a
// dynamic inferred size, never contradict a known one), and the chain ops
// reify their result shapes for dynamic sizes
// (ReifyRankedShapedTypeOpInterface). Canonicalization patterns are at the
// end of this file.
//
//===----------------------------------------------------------------------===//

#include "dialect/MoEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::moe;

namespace {
/// A named operand or result, as the diagnostics call it.
struct Named {
  StringRef name;
  Value value;
};

/// Verification helpers bound to one op.
class ShapeChecker {
public:
  explicit ShapeChecker(Operation *op) : op(op) {}

  static RankedTensorType type(Value v) {
    return cast<RankedTensorType>(v.getType());
  }

  /// All floating-point operands share one element type (ODS has checked
  /// that each is f32, f16 or bf16).
  LogicalResult elementTypes(ArrayRef<Named> values) {
    if (failed(byteSizes(values)))
      return failure();
    Type elt = type(values.front().value).getElementType();
    for (const Named &v : values.drop_front()) {
      if (!v.value)
        continue;
      Type other = type(v.value).getElementType();
      if (other != elt)
        return op->emitOpError()
               << v.name << " has element type " << other << ", but "
               << values.front().name << " has " << elt
               << " (all floating-point operands of one op share one element type)";
    }
    return success();
  }

  /// A routing quantity (router logits, routing weights) is f32 whatever the
  /// element type T of the op's data (docs/spec.md §2-§3: routing in f32),
  /// or T itself.
  LogicalResult routingType(Named v, Named data) {
    Type elt = type(v.value).getElementType();
    Type dataElt = type(data.value).getElementType();
    if (elt.isF32() || elt == dataElt)
      return success();
    return op->emitOpError() << v.name << " has element type " << elt << ", but "
                             << data.name << " has " << dataElt
                             << " (routing values are f32 or the data's element type)";
  }

  /// Dimension `idx` of `v` (the size `symbol`) must equal `expected`, which
  /// `source` fixed. Dynamic sizes on either side are not checked.
  LogicalResult dim(Named v, unsigned idx, StringRef symbol, int64_t expected,
                    StringRef source) {
    int64_t actual = type(v.value).getDimSize(idx);
    if (ShapedType::isDynamic(actual) || ShapedType::isDynamic(expected) ||
        actual == expected)
      return success();
    return op->emitOpError() << v.name << " dimension " << idx << " (" << symbol
                             << ") is " << actual << ", but " << source
                             << " has " << symbol << " = " << expected;
  }

  /// Verifies the expert FFN weights and biases against E and D.
  LogicalResult experts(Named w1, Named w2, Named b1, Named b2,
                        ActivationAttr activation, int64_t numExperts,
                        StringRef expertSource, int64_t modelDim) {
    bool gated = activation.isGated();
    if (failed(dim(w1, 0, "E", numExperts, expertSource)) ||
        failed(dim(w1, 1, "D", modelDim, "input")))
      return failure();
    // From here on E is whatever is known first.
    int64_t e = known(numExperts, type(w1.value).getDimSize(0));
    StringRef eSource = ShapedType::isDynamic(numExperts) ? "w1" : expertSource;
    if (failed(dim(w2, 0, "E", e, eSource)) ||
        failed(dim(w2, 2, "D", modelDim, "input")))
      return failure();

    int64_t w1Width = type(w1.value).getDimSize(2);
    int64_t hidden = type(w2.value).getDimSize(1);
    if (gated) {
      if (!ShapedType::isDynamic(w1Width) && w1Width % 2 != 0)
        return op->emitOpError()
               << "w1 dimension 2 (2H) is " << w1Width << ", but the gated activation "
               << stringifyActivation(activation.getValue())
               << " needs an even width holding the gate and up projections";
      if (!ShapedType::isDynamic(w1Width) && !ShapedType::isDynamic(hidden) &&
          w1Width != 2 * hidden)
        return op->emitOpError()
               << "w1 dimension 2 (2H) is " << w1Width << ", but the gated activation "
               << stringifyActivation(activation.getValue())
               << " needs 2H = " << 2 * hidden << " (w2 has H = " << hidden << ")";
    } else if (failed(dim(w2, 1, "H", w1Width, "w1"))) {
      return failure();
    }
    int64_t w1WidthKnown =
        known(w1Width, ShapedType::isDynamic(hidden) ? hidden : (gated ? 2 * hidden : hidden));

    if (static_cast<bool>(b1.value) != static_cast<bool>(b2.value))
      return op->emitOpError()
             << "has " << (b1.value ? "b1 without b2" : "b2 without b1")
             << ": expert biases come in pairs, expert_biases(b1, b2)";
    if (!b1.value)
      return success();
    StringRef hSym = gated ? "2H" : "H";
    if (failed(dim(b1, 0, "E", e, eSource)) ||
        failed(dim(b1, 1, hSym, w1WidthKnown, "w1")) ||
        failed(dim(b2, 0, "E", e, eSource)) ||
        failed(dim(b2, 1, "D", modelDim, "input")))
      return failure();
    return success();
  }

  /// An optional capacity factor must be finite and > 0, and the capacity
  /// C = ceil(cf * T * k / E) it gives (an i32 in the lowering) at most
  /// 2^31 - 1. T, k and E may be dynamic: with T static and k or E unknown,
  /// k / E is bounded by 1 (k <= E); with T dynamic only cf <= 2^31 - 1 is
  /// checked.
  LogicalResult capacityFactor(std::optional<llvm::APFloat> cf, int64_t tokens,
                               int64_t k, int64_t numExperts) {
    if (!cf)
      return success();
    double v = cf->convertToDouble();
    if (!(v > 0.0))
      return op->emitOpError() << "capacity_factor must be > 0, got " << v;
    const double limit = static_cast<double>(kMaxIndex);
    if (!std::isfinite(v) || v > limit)
      return op->emitOpError() << "capacity_factor must be finite and <= 2^31 - 1 "
                                  "(the capacity is an i32), got "
                               << v;
    if (ShapedType::isDynamic(tokens))
      return success();
    double ratio = 1.0;
    if (!ShapedType::isDynamic(k) && !ShapedType::isDynamic(numExperts) &&
        numExperts > 0)
      ratio = static_cast<double>(k) / static_cast<double>(numExperts);
    double capacity = std::ceil(v * static_cast<double>(tokens) * ratio);
    if (capacity > limit)
      return op->emitOpError()
             << "capacity_factor " << v << " gives a capacity ceil(cf * T * k / E) = "
             << capacity << " for T = " << tokens << " (input), above 2^31 - 1 "
             << "(the capacity is an i32)";
    return success();
  }

  /// The product `a * b` of two sizes (dynamic if either is), or failure with
  /// an error when it exceeds `limit`, naming `what` (e.g. "T*K (input T and
  /// indices K)").
  FailureOr<int64_t> product(int64_t a, int64_t b, const Twine &what,
                             int64_t limit, StringRef why) {
    if (ShapedType::isDynamic(a) || ShapedType::isDynamic(b))
      return ShapedType::kDynamic;
    int64_t result;
    if (llvm::MulOverflow(a, b, result) || result > limit)
      return op->emitOpError() << what << " = " << a << " * " << b
                               << " exceeds " << limit << " (" << why << ")";
    return result;
  }

  /// Every static tensor among `values` has a size in bytes that fits in
  /// int64 (so buffer sizes, strides and element counts cannot overflow).
  LogicalResult byteSizes(ArrayRef<Named> values) {
    for (const Named &v : values) {
      if (!v.value)
        continue;
      auto t = dyn_cast<RankedTensorType>(v.value.getType());
      if (!t || !t.hasStaticShape())
        continue;
      int64_t bits = t.getElementTypeBitWidth();
      int64_t size = std::max<int64_t>(bits / 8, 1);
      bool overflow = false;
      for (int64_t d : t.getShape())
        overflow |= llvm::MulOverflow(size, d, size);
      if (overflow)
        return op->emitOpError() << v.name << " has type " << t
                                 << ", whose size in bytes overflows int64";
    }
    return success();
  }

  /// Soft MoE: the E*G*S slot rows (E and S from `slots`, G from `input`)
  /// fit in i32, the type of their offsets.
  LogicalResult softRows(Value input, Value slots) {
    int64_t g = type(input).getDimSize(0);
    int64_t e = type(slots).getDimSize(1), s = type(slots).getDimSize(2);
    FailureOr<int64_t> eg =
        product(e, g, "E*G (slots E, input G)", kMaxIndex, "rows are indexed with i32");
    if (failed(eg))
      return failure();
    return product(*eg, s, "the number of slot rows E*G*S (slots E and S, input G)",
                   kMaxIndex, "rows are indexed with i32");
  }

  /// The largest i32: row indices, offsets, expert ids and capacities are
  /// i32 tensors.
  static constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();

  static int64_t mul(int64_t a, int64_t b) {
    return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) ? ShapedType::kDynamic
                                                                : a * b;
  }
  static int64_t add(int64_t a, int64_t b) {
    return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) ? ShapedType::kDynamic
                                                                : a + b;
  }

  /// The shared expert: s1 [D, Hs] (gated: [D, 2Hs]), s2 [Hs, D], optional
  /// gate sg [D, 1]; same element type as the data.
  LogicalResult sharedExpert(Named s1, Named s2, Named sg, ActivationAttr activation,
                             int64_t modelDim) {
    bool gated = activation.isGated();
    if (failed(dim(s1, 0, "D", modelDim, "input")) ||
        failed(dim(s2, 1, "D", modelDim, "input")))
      return failure();
    int64_t width = type(s1.value).getDimSize(1), hidden = type(s2.value).getDimSize(0);
    if (gated) {
      if (!ShapedType::isDynamic(width) && !ShapedType::isDynamic(hidden) &&
          width != 2 * hidden)
        return op->emitOpError() << s1.name << " dimension 1 (2Hs) is " << width
                                 << ", but the gated activation "
                                 << stringifyActivation(activation.getValue())
                                 << " needs 2Hs = " << 2 * hidden << " (" << s2.name
                                 << " has Hs = " << hidden << ")";
    } else if (failed(dim(s2, 0, "Hs", width, s1.name))) {
      return failure();
    }
    if (!sg.value)
      return success();
    if (failed(dim(sg, 0, "D", modelDim, "input")) ||
        failed(dim(sg, 1, "1", 1, "the gate's layout [D, 1]")))
      return failure();
    return success();
  }

  /// The optional shared expert output added by a combine ([T, D] f32 by
  /// ODS) has the shape of the result.
  LogicalResult sharedOutput(Named shared, Named output) {
    if (!shared.value)
      return success();
    if (failed(dim(shared, 0, "T", type(output.value).getDimSize(0), output.name)) ||
        failed(dim(shared, 1, "D", type(output.value).getDimSize(1), output.name)))
      return failure();
    return success();
  }

  static int64_t known(int64_t a, int64_t b) {
    return ShapedType::isDynamic(a) ? b : a;
  }

private:
  Operation *op;
};
} // namespace

//===----------------------------------------------------------------------===//
// LayerOp
//===----------------------------------------------------------------------===//

int64_t LayerOp::getNumExperts() {
  int64_t e = getRouterWeight().getType().getDimSize(1);
  if (ShapedType::isDynamic(e) && getW1().getType().getRank() == 3)
    e = getW1().getType().getDimSize(0);
  return e;
}

bool LayerOp::isCausal() {
  return (*this)->hasAttr(MoEDialect::getCausalAttrName());
}

LogicalResult moe::checkNotQuantized(Operation *op, QuantAttr quant, StringRef what) {
  if (!quant)
    return success();
  return op->emitOpError() << "has quantized expert weights (" << quant << "), which " << what
                           << " does not support yet (docs/quantization.md)";
}

/// The operands of an op with quantized expert weights (docs/spec.md
/// §2.1; moe.layer, moe.expert_ffn, moe.fused_experts): the weights'
/// storage type, the scales and zero points and their shapes.
template <typename OpT>
static LogicalResult verifyQuantization(OpT op) {
  QuantAttr quant = op.getQuantAttr();
  // The generic form can give one of a pair.
  if (static_cast<bool>(op.getW1Scale()) != static_cast<bool>(op.getW2Scale()))
    return op.emitOpError() << "has " << (op.getW1Scale() ? "w1_scale without w2_scale" : "w2_scale without w1_scale")
                            << ": scales come in pairs, expert_scales(s1, s2)";
  if (static_cast<bool>(op.getW1ZeroPoint()) != static_cast<bool>(op.getW2ZeroPoint()))
    return op.emitOpError() << "has "
                            << (op.getW1ZeroPoint() ? "w1_zero_point without w2_zero_point"
                                                    : "w2_zero_point without w1_zero_point")
                            << ": zero points come in pairs, expert_zero_points(z1, z2)";
  auto weights = {std::make_pair(StringRef("w1"), op.getW1()),
                  std::make_pair(StringRef("w2"), op.getW2())};
  if (!quant) {
    if (op.getW1Scale() || op.getW1ZeroPoint())
      return op.emitOpError() << "has expert_" << (op.getW1Scale() ? "scales" : "zero_points")
                              << " but no 'quant' attribute saying how w1 and w2 are quantized";
    return success();
  }
  Type storage = quant.getStorageType();
  for (auto [name, w] : weights) {
    Type elt = cast<RankedTensorType>(w.getType()).getElementType();
    if (elt != storage)
      return op.emitOpError() << name << " has element type " << elt << ", but " << quant
                              << " stores weights as " << storage;
  }
  if (!op.getW1Scale())
    return op.emitOpError() << "is quantized (" << quant
                            << ") and needs expert_scales(%s1, %s2), the f32 scales of w1 and w2";
  if (quant.getZeroPoint() != static_cast<bool>(op.getW1ZeroPoint()))
    return op.emitOpError() << (quant.getZeroPoint()
                                    ? "is quantized with zero_point and needs "
                                      "expert_zero_points(%z1, %z2)"
                                    : "has expert_zero_points, but its 'quant' attribute has "
                                      "no zero_point");
  auto check = [&](StringRef name, Value weight, StringRef what, Value v) -> LogicalResult {
    ArrayRef<int64_t> shape = cast<RankedTensorType>(v.getType()).getShape();
    SmallVector<int64_t> want =
        quant.getScaleShape(cast<RankedTensorType>(weight.getType()).getShape());
    for (auto [d, pair] : llvm::enumerate(llvm::zip(shape, want))) {
      auto [have, expected] = pair;
      if (!ShapedType::isDynamic(have) && !ShapedType::isDynamic(expected) && have != expected)
        return op.emitOpError() << what << " of " << name << " has " << v.getType()
                                << ", but " << quant << " gives " << name << " " << what
                                << " size " << expected << " in dimension " << d;
    }
    return success();
  };
  if (failed(check("w1", op.getW1(), "the scale", op.getW1Scale())) ||
      failed(check("w2", op.getW2(), "the scale", op.getW2Scale())))
    return failure();
  if (op.getW1ZeroPoint() &&
      (failed(check("w1", op.getW1(), "the zero point", op.getW1ZeroPoint())) ||
       failed(check("w2", op.getW2(), "the zero point", op.getW2ZeroPoint()))))
    return failure();
  return success();
}

LogicalResult LayerOp::verify() {
  ShapeChecker check(*this);
  Named input{"input", getInput()}, routerWeight{"router_weight", getRouterWeight()},
      routerBias{"router_bias", getRouterBias()}, w1{"w1", getW1()},
      w2{"w2", getW2()}, b1{"b1", getB1()}, b2{"b2", getB2()},
      output{"output", getOutput()};
  Named selectionBias{"selection_bias", getSelectionBias()},
      sharedW1{"shared_w1", getSharedW1()}, sharedW2{"shared_w2", getSharedW2()},
      sharedGate{"shared_gate", getSharedGate()};
  // Quantized weights have their storage type; the other floating-point
  // operands share one element type.
  Named noValue{"", Value()};
  if (failed(check.elementTypes({input, routerWeight, routerBias, isQuantized() ? noValue : w1,
                                 isQuantized() ? noValue : w2, b1, b2, sharedW1, sharedW2,
                                 sharedGate, output})) ||
      failed(verifyQuantization(*this)))
    return failure();

  auto inputType = getInput().getType();
  int64_t tokens = inputType.getDimSize(0), modelDim = inputType.getDimSize(1);
  if (failed(check.dim(routerWeight, 0, "D", modelDim, "input")))
    return failure();
  int64_t numExperts = getRouterWeight().getType().getDimSize(1);
  if (getRouterBias() &&
      failed(check.dim(routerBias, 0, "E", numExperts, "router_weight")))
    return failure();
  if (failed(check.experts(w1, w2, b1, b2, getActivationAttr(), numExperts,
                           "router_weight", modelDim)))
    return failure();
  if (failed(check.dim(output, 0, "T", tokens, "input")) ||
      failed(check.dim(output, 1, "D", modelDim, "input")))
    return failure();

  if (getSelectionBias()) {
    if (!isa<TopKRoutingAttr>(getRouting()))
      return emitOpError("has a selection_bias, which only #moe.top_k routing uses "
                         "(it shifts the scores that choose the experts)");
    if (failed(check.dim(selectionBias, 0, "E", numExperts, "router_weight")) ||
        failed(check.routingType(selectionBias, input)))
      return failure();
  }
  if (getSharedGate() && !getSharedW1())
    return emitOpError("has a shared_gate but no shared expert; shared_gate(%sg) "
                       "scales the shared(%s1, %s2) expert's output");
  if (getSharedW1() &&
      failed(check.sharedExpert(sharedW1, sharedW2, sharedGate, getActivationAttr(),
                                modelDim)))
    return failure();

  // Mode: training needs a seed and returns (output, aux_loss).
  bool training = getTraining();
  if (training) {
    if (!getSeed())
      return emitOpError("is in training mode and needs a 'seed' operand "
                         "(tensor<i64>) keying its random stream");
    if (!getAuxLoss())
      return emitOpError("is in training mode and returns two results "
                         "(output, aux_loss), got 1");
  } else {
    if (getSeed())
      return emitOpError("has a 'seed' operand but is not in training mode; "
                         "add the 'training' attribute or drop the seed");
    if (getAuxLoss())
      return emitOpError("is in inference mode and returns one result; the "
                         "aux_loss result needs the 'training' attribute");
  }
  int64_t e = ShapeChecker::known(numExperts, getW1().getType().getDimSize(0));
  if (e == 0)
    return emitOpError() << "has E = 0 experts (router_weight dimension 1); a "
                            "layer needs at least one";
  if (!ShapedType::isDynamic(e) && e > ShapeChecker::kMaxIndex)
    return emitOpError() << "has E = " << e
                         << " experts (router_weight), above 2^31 - 1 (expert "
                            "ids are i32)";
  if (failed(getRouting().verifyForLayer(e, training,
                                         [&]() { return emitOpError(); })))
    return failure();
  int64_t k = ShapedType::kDynamic;
  if (!ShapedType::isDynamic(e))
    k = getRouting().getExpertsPerToken(e);
  else if (auto fixed = getRouting().getFixedK())
    k = *fixed;
  if (failed(check.product(tokens, k, "the number of assignments T*K (input T, "
                                      "routing K)",
                           std::numeric_limits<int64_t>::max() / 64,
                           "sizes of the dispatched rows overflow")))
    return failure();
  return check.capacityFactor(getCapacityFactor(), tokens, k, e);
}

//===----------------------------------------------------------------------===//
// SoftLayerOp
//===----------------------------------------------------------------------===//

int64_t SoftLayerOp::getNumExperts() {
  int64_t e = getSlots().getType().getDimSize(1);
  if (ShapedType::isDynamic(e) && getW1().getType().getRank() == 3)
    e = getW1().getType().getDimSize(0);
  return e;
}

int64_t SoftLayerOp::getSlotsPerExpert() {
  return getSlots().getType().getDimSize(2);
}

LogicalResult SoftLayerOp::verify() {
  ShapeChecker check(*this);
  Named input{"input", getInput()}, slots{"slots", getSlots()},
      scale{"scale", getScale()}, w1{"w1", getW1()}, w2{"w2", getW2()},
      b1{"b1", getB1()}, b2{"b2", getB2()}, output{"output", getOutput()};
  if (failed(check.elementTypes({input, slots, scale, w1, w2, b1, b2, output})))
    return failure();
  auto inputType = getInput().getType();
  int64_t modelDim = inputType.getDimSize(2);
  if (failed(check.dim(slots, 0, "D", modelDim, "input")))
    return failure();
  if (failed(check.experts(w1, w2, b1, b2, getActivationAttr(),
                           getSlots().getType().getDimSize(1), "slots",
                           modelDim)))
    return failure();
  if (failed(check.dim(output, 0, "G", inputType.getDimSize(0), "input")) ||
      failed(check.dim(output, 1, "M", inputType.getDimSize(1), "input")) ||
      failed(check.dim(output, 2, "D", modelDim, "input")))
    return failure();
  return check.softRows(getInput(), getSlots());
}

//===----------------------------------------------------------------------===//
// RouteOp
//===----------------------------------------------------------------------===//

LogicalResult RouteOp::verify() {
  ShapeChecker check(*this);
  Named input{"input", getInput()}, routerWeight{"router_weight", getRouterWeight()},
      routerBias{"router_bias", getRouterBias()}, logits{"logits", getLogits()};
  if (failed(check.elementTypes({input, routerWeight, routerBias})) ||
      failed(check.routingType(logits, input)) ||
      failed(check.dim(routerWeight, 0, "D",
                       getInput().getType().getDimSize(1), "input")))
    return failure();
  int64_t numExperts = getRouterWeight().getType().getDimSize(1);
  if (getRouterBias() &&
      failed(check.dim(routerBias, 0, "E", numExperts, "router_weight")))
    return failure();
  if (failed(check.dim(logits, 0, "T", getInput().getType().getDimSize(0),
                       "input")) ||
      failed(check.dim(logits, 1, "E", numExperts, "router_weight")))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// GateOp
//===----------------------------------------------------------------------===//

int64_t GateOp::getNumExperts() { return getLogits().getType().getDimSize(1); }

LogicalResult GateOp::verify() {
  ShapeChecker check(*this);
  Named logits{"logits", getLogits()}, weights{"weights", getWeights()},
      indices{"indices", getIndices()};
  if (failed(check.elementTypes({logits, weights})))
    return failure();
  int64_t tokens = getLogits().getType().getDimSize(0);
  int64_t numExperts = getNumExperts();
  int64_t k = ShapedType::kDynamic;
  if (!ShapedType::isDynamic(numExperts))
    k = getRouting().getExpertsPerToken(numExperts);
  else if (auto fixed = getRouting().getFixedK())
    k = *fixed;
  if (failed(check.dim(weights, 0, "T", tokens, "logits")) ||
      failed(check.dim(weights, 1, "K", k, "the routing")) ||
      failed(check.dim(indices, 0, "T", tokens, "logits")) ||
      failed(check.dim(indices, 1, "K", k, "the routing")))
    return failure();
  bool training = getTraining();
  if (training && !getSeed())
    return emitOpError("is in training mode and needs a 'seed' operand "
                       "(tensor<i64>) keying its random stream");
  if (!training && getSeed())
    return emitOpError("has a 'seed' operand but is not in training mode; "
                       "add the 'training' attribute or drop the seed");
  if (training != static_cast<bool>(getAuxLoss()))
    return emitOpError() << (training ? "is in training mode and returns the "
                                        "aux_loss as a third result"
                                      : "is in inference mode and returns no "
                                        "aux_loss");
  if (getSelectionBias()) {
    Named bias{"selection_bias", getSelectionBias()};
    if (!isa<TopKRoutingAttr>(getRouting()))
      return emitOpError("has a selection_bias, which only #moe.top_k routing uses "
                         "(it shifts the scores that choose the experts)");
    if (failed(check.dim(bias, 0, "E", numExperts, "logits")) ||
        failed(check.routingType(bias, logits)))
      return failure();
  }
  return getRouting().verifyForLayer(numExperts, training,
                                     [&]() { return emitOpError(); });
}

//===----------------------------------------------------------------------===//
// DispatchOp
//===----------------------------------------------------------------------===//

LogicalResult DispatchOp::verify() {
  ShapeChecker check(*this);
  Named input{"input", getInput()}, indices{"indices", getIndices()},
      rows{"rows", getRows()}, offsets{"offsets", getOffsets()},
      sourceRows{"source_rows", getSourceRows()},
      positions{"positions", getPositions()};
  if (failed(check.elementTypes({input, rows})))
    return failure();
  int64_t tokens = getInput().getType().getDimSize(0);
  int64_t modelDim = getInput().getType().getDimSize(1);
  int64_t k = getIndices().getType().getDimSize(1);
  if (getNumExperts() > ShapeChecker::kMaxIndex)
    return emitOpError() << "num_experts = " << getNumExperts()
                         << " is above 2^31 - 1 (expert ids are i32)";
  FailureOr<int64_t> product =
      check.product(tokens, k, "the number of rows T*K (input T, indices K)",
                    ShapeChecker::kMaxIndex, "rows are indexed with i32");
  if (failed(product))
    return failure();
  int64_t assignments = *product;
  if (failed(check.dim(indices, 0, "T", tokens, "input")) ||
      failed(check.dim(rows, 0, "T*K", assignments, "input and indices")) ||
      failed(check.dim(rows, 1, "D", modelDim, "input")) ||
      failed(check.dim(offsets, 0, "E+1", getNumExperts() + 1, "num_experts")) ||
      failed(check.dim(sourceRows, 0, "T*K", assignments, "input and indices")) ||
      failed(check.dim(positions, 0, "T", tokens, "input")) ||
      failed(check.dim(positions, 1, "K", k, "indices")))
    return failure();
  return check.capacityFactor(getCapacityFactor(), tokens, k, getNumExperts());
}

//===----------------------------------------------------------------------===//
// ExpertFFNOp
//===----------------------------------------------------------------------===//

LogicalResult ExpertFFNOp::verify() {
  ShapeChecker check(*this);
  Named rows{"rows", getRows()}, w1{"w1", getW1()}, w2{"w2", getW2()},
      b1{"b1", getB1()}, b2{"b2", getB2()}, output{"output", getOutput()};
  // The output is in the element type T, or f32 for T = bf16/f16: the
  // FFN's f32 result not yet rounded, for a moe.combine that sums it in f32
  // before the one rounding of y (what the layer does; expert parallelism
  // exchanges these rows, docs/expert-parallelism.md).
  bool f32Output = getOutput().getType().getElementType().isF32();
  // Quantized weights have their storage type (docs/spec.md §2.1).
  Named noValue{"", Value()};
  if (failed(check.elementTypes({rows, isQuantized() ? noValue : w1,
                                 isQuantized() ? noValue : w2, b1, b2,
                                 f32Output ? noValue : output})) ||
      failed(verifyQuantization(*this)))
    return failure();
  int64_t groups = getOffsets().getType().getDimSize(0);
  int64_t numExperts = ShapedType::isDynamic(groups) ? groups : groups - 1;
  int64_t modelDim = getRows().getType().getDimSize(1);
  if (numExperts == 0)
    return emitOpError("expects offsets of shape [E+1] with E >= 1, got ")
           << getOffsets().getType();
  if (failed(check.experts(w1, w2, b1, b2, getActivationAttr(), numExperts,
                           "offsets", modelDim)) ||
      failed(check.dim(output, 0, "N", getRows().getType().getDimSize(0), "rows")) ||
      failed(check.dim(output, 1, "D", modelDim, "rows")))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// CombineOp
//===----------------------------------------------------------------------===//

LogicalResult CombineOp::verify() {
  ShapeChecker check(*this);
  Named expertOut{"expert_output", getExpertOutput()}, weights{"weights", getWeights()},
      positions{"positions", getPositions()}, output{"output", getOutput()};
  // expert_output may be f32 whatever y's element type (an unrounded
  // moe.expert_ffn result, see there).
  bool f32Rows = getExpertOutput().getType().getElementType().isF32();
  if (failed(check.elementTypes({f32Rows ? output : expertOut, output})) ||
      failed(check.routingType(weights, output)))
    return failure();
  auto wType = getWeights().getType();
  if (failed(check.dim(positions, 0, "T", wType.getDimSize(0), "weights")) ||
      failed(check.dim(positions, 1, "K", wType.getDimSize(1), "weights")) ||
      failed(check.dim(output, 0, "T", wType.getDimSize(0), "weights")) ||
      failed(check.dim(output, 1, "D", getExpertOutput().getType().getDimSize(1),
                       "expert_output")))
    return failure();
  return check.sharedOutput({"shared_output", getSharedOutput()}, output);
}

//===----------------------------------------------------------------------===//
// SoftDispatchOp
//===----------------------------------------------------------------------===//

LogicalResult SoftDispatchOp::verify() {
  ShapeChecker check(*this);
  Named input{"input", getInput()}, slots{"slots", getSlots()},
      scale{"scale", getScale()}, rows{"rows", getRows()},
      offsets{"offsets", getOffsets()},
      combine{"combine_weights", getCombineWeights()};
  if (failed(check.elementTypes({input, slots, scale, rows, combine})))
    return failure();
  auto x = getInput().getType();
  auto phi = getSlots().getType();
  int64_t g = x.getDimSize(0), m = x.getDimSize(1), d = x.getDimSize(2);
  int64_t e = phi.getDimSize(1), sl = phi.getDimSize(2);
  FailureOr<int64_t> eg = check.product(e, g, "E*G (slots E, input G)",
                                        ShapeChecker::kMaxIndex,
                                        "rows are indexed with i32");
  if (failed(eg))
    return failure();
  FailureOr<int64_t> egs = check.product(*eg, sl, "the number of rows E*G*S "
                                                  "(slots E and S, input G)",
                                         ShapeChecker::kMaxIndex,
                                         "rows are indexed with i32");
  if (failed(egs))
    return failure();
  if (failed(check.dim(slots, 0, "D", d, "input")) ||
      failed(check.dim(rows, 0, "E*G*S", *egs, "input and slots")) ||
      failed(check.dim(rows, 1, "D", d, "input")) ||
      failed(check.dim(offsets, 0, "E+1", ShapeChecker::add(e, 1), "slots")) ||
      failed(check.dim(combine, 0, "G", g, "input")) ||
      failed(check.dim(combine, 1, "M", m, "input")) ||
      failed(check.dim(combine, 2, "E", e, "slots")) ||
      failed(check.dim(combine, 3, "S", sl, "slots")))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// SoftCombineOp
//===----------------------------------------------------------------------===//

LogicalResult SoftCombineOp::verify() {
  ShapeChecker check(*this);
  Named expertOut{"expert_output", getExpertOutput()},
      combine{"combine_weights", getCombineWeights()}, output{"output", getOutput()};
  if (failed(check.elementTypes({expertOut, combine, output})))
    return failure();
  auto cw = getCombineWeights().getType();
  int64_t g = cw.getDimSize(0), e = cw.getDimSize(2), sl = cw.getDimSize(3);
  int64_t d = getExpertOutput().getType().getDimSize(1);
  FailureOr<int64_t> eg = check.product(e, g, "E*G (combine_weights E and G)",
                                        ShapeChecker::kMaxIndex,
                                        "rows are indexed with i32");
  if (failed(eg))
    return failure();
  FailureOr<int64_t> egs = check.product(*eg, sl, "the number of rows E*G*S "
                                                  "(combine_weights E, G and S)",
                                         ShapeChecker::kMaxIndex,
                                         "rows are indexed with i32");
  if (failed(egs))
    return failure();
  if (failed(check.dim(expertOut, 0, "E*G*S", *egs, "combine_weights")) ||
      failed(check.dim(output, 0, "G", g, "combine_weights")) ||
      failed(check.dim(output, 1, "M", cw.getDimSize(1), "combine_weights")) ||
      failed(check.dim(output, 2, "D", d, "expert_output")))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// FusedExpertsOp
//===----------------------------------------------------------------------===//

LogicalResult FusedExpertsOp::verify() {
  ShapeChecker check(*this);
  Named input{"input", getInput()}, indices{"indices", getIndices()},
      weights{"weights", getWeights()}, w1{"w1", getW1()}, w2{"w2", getW2()},
      b1{"b1", getB1()}, b2{"b2", getB2()}, output{"output", getOutput()};
  Named noValue{"", Value()};
  if (failed(check.elementTypes({input, isQuantized() ? noValue : w1,
                                 isQuantized() ? noValue : w2, b1, b2, output})) ||
      failed(verifyQuantization(*this)) || failed(check.routingType(weights, input)))
    return failure();
  auto x = getInput().getType();
  int64_t tokens = x.getDimSize(0), modelDim = x.getDimSize(1);
  int64_t k = getIndices().getType().getDimSize(1);
  if (failed(check.dim(indices, 0, "T", tokens, "input")) ||
      failed(check.dim(weights, 0, "T", tokens, "input")) ||
      failed(check.dim(weights, 1, "K", k, "indices")) ||
      failed(check.experts(w1, w2, b1, b2, getActivationAttr(), getNumExperts(),
                           "num_experts", modelDim)) ||
      failed(check.dim(output, 0, "T", tokens, "input")) ||
      failed(check.dim(output, 1, "D", modelDim, "input")))
    return failure();
  if (getNumExperts() > ShapeChecker::kMaxIndex)
    return emitOpError() << "num_experts = " << getNumExperts()
                         << " is above 2^31 - 1 (expert ids are i32)";
  if (failed(check.product(tokens, k, "the number of rows T*K (input T, indices K)",
                           ShapeChecker::kMaxIndex, "rows are indexed with i32")))
    return failure();
  if (failed(check.capacityFactor(getCapacityFactor(), tokens, k, getNumExperts())))
    return failure();
  return check.sharedOutput({"shared_output", getSharedOutput()}, output);
}

//===----------------------------------------------------------------------===//
// FusedSoftExpertsOp
//===----------------------------------------------------------------------===//

LogicalResult FusedSoftExpertsOp::verify() {
  ShapeChecker check(*this);
  Named input{"input", getInput()}, slots{"slots", getSlots()},
      scale{"scale", getScale()}, w1{"w1", getW1()}, w2{"w2", getW2()},
      b1{"b1", getB1()}, b2{"b2", getB2()}, output{"output", getOutput()};
  if (failed(check.elementTypes({input, slots, scale, w1, w2, b1, b2, output})))
    return failure();
  auto x = getInput().getType();
  int64_t modelDim = x.getDimSize(2);
  if (failed(check.dim(slots, 0, "D", modelDim, "input")) ||
      failed(check.experts(w1, w2, b1, b2, getActivationAttr(),
                           getSlots().getType().getDimSize(1), "slots", modelDim)) ||
      failed(check.dim(output, 0, "G", x.getDimSize(0), "input")) ||
      failed(check.dim(output, 1, "M", x.getDimSize(1), "input")) ||
      failed(check.dim(output, 2, "D", modelDim, "input")))
    return failure();
  return check.softRows(getInput(), getSlots());
}

#define GET_OP_CLASSES
#include "dialect/MoEOps.cpp.inc"

//===----------------------------------------------------------------------===//
// SharedExpertOp
//===----------------------------------------------------------------------===//

LogicalResult SharedExpertOp::verify() {
  ShapeChecker check(*this);
  Named input{"input", getInput()}, s1{"shared_w1", getSharedW1()},
      s2{"shared_w2", getSharedW2()}, sg{"shared_gate", getSharedGate()},
      output{"output", getOutput()};
  if (failed(check.elementTypes({input, s1, s2, sg})) ||
      failed(check.sharedExpert(s1, s2, sg, getActivationAttr(),
                                getInput().getType().getDimSize(1))))
    return failure();
  if (failed(check.dim(output, 0, "T", getInput().getType().getDimSize(0), "input")) ||
      failed(check.dim(output, 1, "D", getInput().getType().getDimSize(1), "input")))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// Result type inference (docs/spec.md §3.3: the result shapes of the chain)
//===----------------------------------------------------------------------===//

namespace {
/// The ranked tensor type of `v`, or null (a builder given a wrong value:
/// inference then fails instead of crashing).
RankedTensorType rankedOf(Value v) {
  return v ? dyn_cast<RankedTensorType>(v.getType()) : RankedTensorType();
}


/// K of a gate over E experts (dynamic when E is and the routing runs all).
int64_t expertsPerToken(RoutingAttrInterface routing, int64_t numExperts) {
  if (!routing)
    return ShapedType::kDynamic;
  if (!ShapedType::isDynamic(numExperts))
    return routing.getExpertsPerToken(numExperts);
  if (std::optional<int64_t> k = routing.getFixedK())
    return *k;
  return ShapedType::kDynamic;
}

/// Declared result types are compatible with the inferred ones when they
/// have the same element type and rank and no static size differs: a
/// declared static size may refine an inferred dynamic one (and a declared
/// dynamic size may forget a known one), as for upstream tensor ops.
bool compatibleResultTypes(TypeRange inferred, TypeRange declared) {
  if (inferred.size() != declared.size())
    return false;
  for (auto [a, b] : llvm::zip(inferred, declared)) {
    auto ta = dyn_cast<RankedTensorType>(a), tb = dyn_cast<RankedTensorType>(b);
    if (!ta || !tb || ta.getElementType() != tb.getElementType() ||
        failed(verifyCompatibleShape(ta, tb)))
      return false;
  }
  return true;
}

LogicalResult inferenceFailure(std::optional<Location> loc, StringRef op) {
  return emitOptionalError(loc, "'", op,
                           "' cannot infer its result types: an operand is not a "
                           "ranked tensor of the expected rank");
}

/// The result type of the ops whose output is shaped like their input
/// `input` of rank `rank` (layer, soft_layer, fused_experts,
/// fused_soft_experts).
LogicalResult inferLikeInput(std::optional<Location> loc, StringRef op, Value input,
                             int64_t rank, SmallVectorImpl<Type> &inferred) {
  RankedTensorType x = rankedOf(input);
  if (!x || x.getRank() != rank)
    return inferenceFailure(loc, op);
  inferred.push_back(x);
  return success();
}
} // namespace

#define MOE_COMPATIBLE_RESULTS(OpTy)                                             \
  bool OpTy::isCompatibleReturnTypes(TypeRange l, TypeRange r) {                 \
    return compatibleResultTypes(l, r);                                          \
  }
MOE_COMPATIBLE_RESULTS(LayerOp)
MOE_COMPATIBLE_RESULTS(SoftLayerOp)
MOE_COMPATIBLE_RESULTS(GateOp)
MOE_COMPATIBLE_RESULTS(DispatchOp)
MOE_COMPATIBLE_RESULTS(SharedExpertOp)
MOE_COMPATIBLE_RESULTS(SoftDispatchOp)
MOE_COMPATIBLE_RESULTS(SoftCombineOp)
MOE_COMPATIBLE_RESULTS(FusedExpertsOp)
MOE_COMPATIBLE_RESULTS(FusedSoftExpertsOp)
#undef MOE_COMPATIBLE_RESULTS

/// y: [T, D] in the input's element type; in training mode also the aux loss
/// tensor<f32>.
LogicalResult LayerOp::inferReturnTypes(MLIRContext *context,
                                        std::optional<Location> location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  if (failed(inferLikeInput(location, getOperationName(), adaptor.getInput(), 2, inferred)))
    return failure();
  if (adaptor.getTraining())
    inferred.push_back(RankedTensorType::get({}, Float32Type::get(context)));
  return success();
}

/// y: [G, M, D] like the input.
LogicalResult SoftLayerOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  return inferLikeInput(location, getOperationName(), adaptor.getInput(), 3, inferred);
}

/// weights: [T, K] in the logits' element type, indices: [T, K] i32,
/// K = routing.getExpertsPerToken(E); training: the aux loss tensor<f32>.
LogicalResult GateOp::inferReturnTypes(MLIRContext *context,
                                       std::optional<Location> location,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  RankedTensorType logits = rankedOf(adaptor.getLogits());
  if (!logits || logits.getRank() != 2)
    return inferenceFailure(location, getOperationName());
  int64_t tokens = logits.getDimSize(0);
  int64_t k = expertsPerToken(adaptor.getRouting(), logits.getDimSize(1));
  inferred.push_back(RankedTensorType::get({tokens, k}, logits.getElementType()));
  inferred.push_back(RankedTensorType::get({tokens, k}, IntegerType::get(context, 32)));
  if (adaptor.getTraining())
    inferred.push_back(RankedTensorType::get({}, Float32Type::get(context)));
  return success();
}

/// rows: [T*K, D] in the input's element type; offsets: [E+1], source_rows:
/// [T*K], positions: [T, K], all i32.
LogicalResult DispatchOp::inferReturnTypes(MLIRContext *context,
                                           std::optional<Location> location,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &inferred) {
  RankedTensorType x = rankedOf(adaptor.getInput());
  RankedTensorType ids = rankedOf(adaptor.getIndices());
  if (!x || x.getRank() != 2 || !ids || ids.getRank() != 2)
    return inferenceFailure(location, getOperationName());
  Type i32 = IntegerType::get(context, 32);
  int64_t tokens = ShapeChecker::known(x.getDimSize(0), ids.getDimSize(0));
  int64_t k = ids.getDimSize(1);
  int64_t assignments = ShapeChecker::mul(tokens, k);
  int64_t numExperts = adaptor.getNumExperts();
  inferred.push_back(
      RankedTensorType::get({assignments, x.getDimSize(1)}, x.getElementType()));
  inferred.push_back(RankedTensorType::get(
      {numExperts > 0 && numExperts < std::numeric_limits<int64_t>::max()
           ? numExperts + 1
           : ShapedType::kDynamic},
      i32));
  inferred.push_back(RankedTensorType::get({assignments}, i32));
  inferred.push_back(RankedTensorType::get({tokens, k}, i32));
  return success();
}

/// [T, D] f32 whatever the inputs' element type.
LogicalResult SharedExpertOp::inferReturnTypes(MLIRContext *context,
                                               std::optional<Location> location,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &inferred) {
  RankedTensorType x = rankedOf(adaptor.getInput());
  if (!x || x.getRank() != 2)
    return inferenceFailure(location, getOperationName());
  inferred.push_back(RankedTensorType::get(x.getShape(), Float32Type::get(context)));
  return success();
}

/// rows: [E*G*S, D], offsets: [E+1] i32, combine_weights: [G, M, E, S].
LogicalResult SoftDispatchOp::inferReturnTypes(MLIRContext *context,
                                               std::optional<Location> location,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &inferred) {
  RankedTensorType x = rankedOf(adaptor.getInput());
  RankedTensorType phi = rankedOf(adaptor.getSlots());
  if (!x || x.getRank() != 3 || !phi || phi.getRank() != 3)
    return inferenceFailure(location, getOperationName());
  int64_t g = x.getDimSize(0), m = x.getDimSize(1), d = x.getDimSize(2);
  int64_t e = phi.getDimSize(1), sl = phi.getDimSize(2);
  Type elt = x.getElementType();
  inferred.push_back(RankedTensorType::get(
      {ShapeChecker::mul(ShapeChecker::mul(e, g), sl), d}, elt));
  inferred.push_back(
      RankedTensorType::get({ShapeChecker::add(e, 1)}, IntegerType::get(context, 32)));
  inferred.push_back(RankedTensorType::get({g, m, e, sl}, elt));
  return success();
}

/// y: [G, M, D] with G, M from combine_weights and D from expert_output.
LogicalResult SoftCombineOp::inferReturnTypes(MLIRContext *context,
                                              std::optional<Location> location,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  RankedTensorType rows = rankedOf(adaptor.getExpertOutput());
  RankedTensorType cw = rankedOf(adaptor.getCombineWeights());
  if (!rows || rows.getRank() != 2 || !cw || cw.getRank() != 4)
    return inferenceFailure(location, getOperationName());
  inferred.push_back(RankedTensorType::get(
      {cw.getDimSize(0), cw.getDimSize(1), rows.getDimSize(1)}, rows.getElementType()));
  return success();
}

/// y: [T, D] like the input.
LogicalResult FusedExpertsOp::inferReturnTypes(MLIRContext *context,
                                               std::optional<Location> location,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &inferred) {
  return inferLikeInput(location, getOperationName(), adaptor.getInput(), 2, inferred);
}

/// y: [G, M, D] like the input.
LogicalResult FusedSoftExpertsOp::inferReturnTypes(MLIRContext *context,
                                                   std::optional<Location> location,
                                                   Adaptor adaptor,
                                                   SmallVectorImpl<Type> &inferred) {
  return inferLikeInput(location, getOperationName(), adaptor.getInput(), 3, inferred);
}

//===----------------------------------------------------------------------===//
// Result shapes (ReifyRankedShapedTypeOpInterface)
//===----------------------------------------------------------------------===//

namespace {
/// Builds the reified shape of one result: a static size of the declared
/// result type is used as is; a dynamic one comes from `compute`, which
/// creates `tensor.dim` / `arith.muli` ops only then.
class ShapeReifier {
public:
  ShapeReifier(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  /// Size `d` of `v`: an attribute when static, else a tensor.dim.
  OpFoldResult dim(Value v, int64_t d) { return tensor::getMixedSize(b, loc, v, d); }

  /// `lhs * rhs`, folded when both are constants.
  OpFoldResult mul(OpFoldResult lhs, OpFoldResult rhs) {
    std::optional<int64_t> l = getConstantIntValue(lhs), r = getConstantIntValue(rhs);
    if (l && r)
      return b.getIndexAttr(*l * *r);
    Value lv = getValueOrCreateConstantIndexOp(b, loc, lhs);
    Value rv = getValueOrCreateConstantIndexOp(b, loc, rhs);
    return arith::MulIOp::create(b, loc, lv, rv).getResult();
  }

  OpFoldResult constant(int64_t v) { return b.getIndexAttr(v); }

  /// Appends the shape of `result`, calling `compute(i)` for its dynamic
  /// sizes only.
  void add(ReifiedRankedShapedTypeDims &shapes, Value result,
           llvm::function_ref<OpFoldResult(unsigned)> compute) {
    auto type = cast<RankedTensorType>(result.getType());
    SmallVector<OpFoldResult> sizes;
    for (unsigned i = 0, e = type.getRank(); i < e; ++i)
      sizes.push_back(type.isDynamicDim(i) ? compute(i)
                                           : OpFoldResult(b.getIndexAttr(type.getDimSize(i))));
    shapes.push_back(std::move(sizes));
  }

private:
  OpBuilder &b;
  Location loc;
};
} // namespace

LogicalResult LayerOp::reifyResultShapes(OpBuilder &b,
                                         ReifiedRankedShapedTypeDims &shapes) {
  ShapeReifier r(b, getLoc());
  r.add(shapes, getOutput(), [&](unsigned i) { return r.dim(getInput(), i); });
  if (getAuxLoss())
    r.add(shapes, getAuxLoss(), [&](unsigned) { return r.constant(1); });
  return success();
}

LogicalResult RouteOp::reifyResultShapes(OpBuilder &b,
                                         ReifiedRankedShapedTypeDims &shapes) {
  ShapeReifier r(b, getLoc());
  r.add(shapes, getLogits(), [&](unsigned i) {
    return i == 0 ? r.dim(getInput(), 0) : r.dim(getRouterWeight(), 1);
  });
  return success();
}

LogicalResult GateOp::reifyResultShapes(OpBuilder &b,
                                        ReifiedRankedShapedTypeDims &shapes) {
  ShapeReifier r(b, getLoc());
  int64_t k = expertsPerToken(getRouting(), getNumExperts());
  // [T, K]: K is fixed by the routing, or E (dense routing over dynamic E).
  auto tk = [&](unsigned i) {
    if (i == 0)
      return r.dim(getLogits(), 0);
    return ShapedType::isDynamic(k) ? r.dim(getLogits(), 1) : r.constant(k);
  };
  r.add(shapes, getWeights(), tk);
  r.add(shapes, getIndices(), tk);
  if (getAuxLoss())
    r.add(shapes, getAuxLoss(), [&](unsigned) { return r.constant(1); });
  return success();
}

LogicalResult DispatchOp::reifyResultShapes(OpBuilder &b,
                                            ReifiedRankedShapedTypeDims &shapes) {
  ShapeReifier r(b, getLoc());
  auto assignments = [&]() {
    return r.mul(r.dim(getIndices(), 0), r.dim(getIndices(), 1));
  };
  r.add(shapes, getRows(), [&](unsigned i) {
    return i == 0 ? assignments() : r.dim(getInput(), 1);
  });
  r.add(shapes, getOffsets(), [&](unsigned) { return r.constant(getNumExperts() + 1); });
  r.add(shapes, getSourceRows(), [&](unsigned) { return assignments(); });
  r.add(shapes, getPositions(), [&](unsigned i) { return r.dim(getIndices(), i); });
  return success();
}

LogicalResult ExpertFFNOp::reifyResultShapes(OpBuilder &b,
                                             ReifiedRankedShapedTypeDims &shapes) {
  ShapeReifier r(b, getLoc());
  r.add(shapes, getOutput(), [&](unsigned i) { return r.dim(getRows(), i); });
  return success();
}

LogicalResult SharedExpertOp::reifyResultShapes(OpBuilder &b,
                                                ReifiedRankedShapedTypeDims &shapes) {
  ShapeReifier r(b, getLoc());
  r.add(shapes, getOutput(), [&](unsigned i) { return r.dim(getInput(), i); });
  return success();
}

LogicalResult CombineOp::reifyResultShapes(OpBuilder &b,
                                           ReifiedRankedShapedTypeDims &shapes) {
  ShapeReifier r(b, getLoc());
  r.add(shapes, getOutput(), [&](unsigned i) {
    return i == 0 ? r.dim(getWeights(), 0) : r.dim(getExpertOutput(), 1);
  });
  return success();
}

LogicalResult FusedExpertsOp::reifyResultShapes(OpBuilder &b,
                                                ReifiedRankedShapedTypeDims &shapes) {
  ShapeReifier r(b, getLoc());
  r.add(shapes, getOutput(), [&](unsigned i) { return r.dim(getInput(), i); });
  return success();
}

//===----------------------------------------------------------------------===//
// Canonicalization
//===----------------------------------------------------------------------===//

namespace {
/// Whether `v` is an all-zero float tensor (x + 0 == x exactly, so a zero
/// bias is dropped without changing any result): a zero constant, or a
/// linalg.fill with zero (how --moe-raise-linalg supplies a missing bias).
bool isZeroTensor(Value v) {
  if (!v)
    return false;
  if (auto fill = v.getDefiningOp<linalg::FillOp>())
    return fill.getInputs().size() == 1 &&
           matchPattern(fill.getInputs().front(), m_AnyZeroFloat());
  return matchPattern(v, m_AnyZeroFloat());
}

/// A capacity factor cf >= E is no capacity: C = ceil(cf * T * K / E) >= T * K,
/// the number of assignments, so no expert can be full (whatever the ids).
bool isDroplessCapacity(std::optional<llvm::APFloat> cf, int64_t numExperts) {
  return cf && !ShapedType::isDynamic(numExperts) &&
         cf->convertToDouble() >= static_cast<double>(numExperts);
}

/// Drops a pair of constant-zero expert biases (b1, b2) of `op`.
template <typename OpTy>
bool dropZeroExpertBiases(OpTy op, PatternRewriter &rewriter) {
  if (!op.getB1() || !isZeroTensor(op.getB1()) || !isZeroTensor(op.getB2()))
    return false;
  rewriter.modifyOpInPlace(op, [&] {
    op.getB1Mutable().clear();
    op.getB2Mutable().clear();
  });
  return true;
}

/// Drops the capacity factor of `op` when it cannot drop anything.
template <typename OpTy>
bool dropDroplessCapacity(OpTy op, int64_t numExperts, PatternRewriter &rewriter) {
  if (!isDroplessCapacity(op.getCapacityFactor(), numExperts))
    return false;
  rewriter.modifyOpInPlace(op, [&] { op.removeCapacityFactorAttr(); });
  return true;
}

/// moe.layer:
/// * zero router_bias, selection_bias or expert biases are dropped;
/// * a capacity_factor >= E is dropped (dropless);
/// * `#moe.top_k<k = E>` with softmax scores, normalize, scale 1 and one
///   group, without a capacity, is `#moe.dense` (every expert runs; the
///   normalized weights are the softmax itself, up to the rounding of the
///   normalization), and its selection_bias chooses nothing.
struct SimplifyLayer : public OpRewritePattern<LayerOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(LayerOp op, PatternRewriter &rewriter) const override {
    bool changed = false;
    if (isZeroTensor(op.getRouterBias())) {
      rewriter.modifyOpInPlace(op, [&] { op.getRouterBiasMutable().clear(); });
      changed = true;
    }
    if (isZeroTensor(op.getSelectionBias())) {
      rewriter.modifyOpInPlace(op, [&] { op.getSelectionBiasMutable().clear(); });
      changed = true;
    }
    changed |= dropZeroExpertBiases(op, rewriter);
    int64_t numExperts = op.getNumExperts();
    changed |= dropDroplessCapacity(op, numExperts, rewriter);
    auto topK = dyn_cast<TopKRoutingAttr>(op.getRouting());
    if (topK && topK.isClassic() && !ShapedType::isDynamic(numExperts) &&
        topK.getK() == numExperts && !op.getCapacityFactor()) {
      rewriter.modifyOpInPlace(op, [&] {
        op.setRoutingAttr(DenseRoutingAttr::get(op.getContext()));
        op.getSelectionBiasMutable().clear();
      });
      changed = true;
    }
    return success(changed);
  }
};

/// moe.route: a zero router_bias is dropped.
struct DropZeroRouterBias : public OpRewritePattern<RouteOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(RouteOp op, PatternRewriter &rewriter) const override {
    if (!isZeroTensor(op.getRouterBias()))
      return failure();
    rewriter.modifyOpInPlace(op, [&] { op.getRouterBiasMutable().clear(); });
    return success();
  }
};

/// moe.dispatch / moe.fused_experts: a capacity_factor >= E is dropped.
template <typename OpTy>
struct DropDroplessCapacity : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;

  LogicalResult matchAndRewrite(OpTy op, PatternRewriter &rewriter) const override {
    return success(dropDroplessCapacity(op, op.getNumExperts(), rewriter));
  }
};

/// Ops with expert FFNs: zero expert biases are dropped.
template <typename OpTy>
struct DropZeroExpertBiases : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;

  LogicalResult matchAndRewrite(OpTy op, PatternRewriter &rewriter) const override {
    return success(dropZeroExpertBiases(op, rewriter));
  }
};
} // namespace

void LayerOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                          MLIRContext *context) {
  results.add<SimplifyLayer>(context);
}

void SoftLayerOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<DropZeroExpertBiases<SoftLayerOp>>(context);
}

void RouteOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                          MLIRContext *context) {
  results.add<DropZeroRouterBias>(context);
}

void DispatchOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                             MLIRContext *context) {
  results.add<DropDroplessCapacity<DispatchOp>>(context);
}

void ExpertFFNOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<DropZeroExpertBiases<ExpertFFNOp>>(context);
}

void FusedExpertsOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                                 MLIRContext *context) {
  results.add<DropDroplessCapacity<FusedExpertsOp>,
              DropZeroExpertBiases<FusedExpertsOp>>(context);
}

void FusedSoftExpertsOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                                     MLIRContext *context) {
  results.add<DropZeroExpertBiases<FusedSoftExpertsOp>>(context);
}

//===----------------------------------------------------------------------===//
// The adjoint ops (MoEGradOps.td): verifiers and result types
//===----------------------------------------------------------------------===//
//
// Every cotangent a backward op returns is an f32 tensor shaped like the
// operand it belongs to (AdjointOpInterface's convention); the verifiers
// check the operands against each other as the forward op does.

namespace {
/// An f32 tensor of `v`'s shape.
RankedTensorType f32Like(RankedTensorType t) {
  return RankedTensorType::get(t.getShape(), Float32Type::get(t.getContext()));
}
} // namespace

#define MOE_COMPATIBLE_RESULTS(OpTy)                                             \
  bool OpTy::isCompatibleReturnTypes(TypeRange l, TypeRange r) {                 \
    return compatibleResultTypes(l, r);                                          \
  }
MOE_COMPATIBLE_RESULTS(RouteGradOp)
MOE_COMPATIBLE_RESULTS(GateGradOp)
MOE_COMPATIBLE_RESULTS(DispatchGradOp)
MOE_COMPATIBLE_RESULTS(ExpertFFNGradOp)
MOE_COMPATIBLE_RESULTS(SharedExpertGradOp)
MOE_COMPATIBLE_RESULTS(CombineGradOp)
MOE_COMPATIBLE_RESULTS(SoftDispatchGradOp)
MOE_COMPATIBLE_RESULTS(SoftCombineGradOp)
#undef MOE_COMPATIBLE_RESULTS

LogicalResult RouteGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                            Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType x = rankedOf(adaptor.getInput()), wr = rankedOf(adaptor.getRouterWeight());
  if (!x || x.getRank() != 2 || !wr || wr.getRank() != 2)
    return inferenceFailure(location, getOperationName());
  inferred.push_back(f32Like(x));
  inferred.push_back(f32Like(wr));
  inferred.push_back(RankedTensorType::get({wr.getDimSize(1)}, Float32Type::get(x.getContext())));
  return success();
}

LogicalResult RouteGradOp::verify() {
  ShapeChecker check(*this);
  Named input{"input", getInput()}, wr{"router_weight", getRouterWeight()},
      dlogits{"logits_grad", getLogitsGrad()};
  auto x = getInput().getType();
  if (failed(check.elementTypes({input, wr})) ||
      failed(check.dim(wr, 0, "D", x.getDimSize(1), "input")) ||
      failed(check.dim(dlogits, 0, "T", x.getDimSize(0), "input")) ||
      failed(check.dim(dlogits, 1, "E", getRouterWeight().getType().getDimSize(1),
                       "router_weight")))
    return failure();
  return success();
}

LogicalResult GateGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                           Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  RankedTensorType logits = rankedOf(adaptor.getLogits());
  if (!logits || logits.getRank() != 2)
    return inferenceFailure(location, getOperationName());
  inferred.push_back(f32Like(logits));
  return success();
}

LogicalResult GateGradOp::verify() {
  ShapeChecker check(*this);
  Named indices{"indices", getIndices()}, dweights{"weights_grad", getWeightsGrad()};
  auto o = getLogits().getType();
  int64_t numExperts = o.getDimSize(1);
  int64_t k = expertsPerToken(getRouting(), numExperts);
  if (failed(check.dim(indices, 0, "T", o.getDimSize(0), "logits")) ||
      failed(check.dim(indices, 1, "K", k, "the routing")) ||
      failed(check.dim(dweights, 0, "T", o.getDimSize(0), "logits")) ||
      failed(check.dim(dweights, 1, "K", k, "the routing")))
    return failure();
  bool training = getTraining();
  if (!training && getAuxLossGrad())
    return emitOpError("has an aux_loss_grad but is not in training mode (only a "
                       "training gate returns an aux loss)");
  auto moesart = dyn_cast<MoesartRoutingAttr>(getRouting());
  bool needsSeed = training && moesart && getRouting().isSampling(training) &&
                   moesart.getAdjust() == MoesartAdjust::small_random;
  if (needsSeed && !getSeed())
    return emitOpError("needs the forward gate's 'seed': small_random's unadjusted "
                       "expert j is recomputed from it");
  if (getSeed() && !training)
    return emitOpError("has a 'seed' operand but is not in training mode");
  return getRouting().verifyForLayer(numExperts, training, [&]() { return emitOpError(); });
}

LogicalResult DispatchGradOp::inferReturnTypes(MLIRContext *context,
                                               std::optional<Location> location,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &inferred) {
  RankedTensorType rows = rankedOf(adaptor.getRowsGrad()),
                   pos = rankedOf(adaptor.getPositions());
  if (!rows || rows.getRank() != 2 || !pos || pos.getRank() != 2)
    return inferenceFailure(location, getOperationName());
  inferred.push_back(RankedTensorType::get({pos.getDimSize(0), rows.getDimSize(1)},
                                           Float32Type::get(context)));
  return success();
}

LogicalResult DispatchGradOp::verify() {
  ShapeChecker check(*this);
  auto pos = getPositions().getType();
  return check.dim({"rows_grad", getRowsGrad()}, 0, "T*K",
                   ShapeChecker::mul(pos.getDimSize(0), pos.getDimSize(1)), "positions");
}

LogicalResult ExpertFFNGradOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> location,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &inferred) {
  RankedTensorType rows = rankedOf(adaptor.getRows()), w1 = rankedOf(adaptor.getW1()),
                   w2 = rankedOf(adaptor.getW2());
  if (!rows || rows.getRank() != 2 || !w1 || w1.getRank() != 3 || !w2 || w2.getRank() != 3)
    return inferenceFailure(location, getOperationName());
  inferred.push_back(f32Like(rows));
  inferred.push_back(f32Like(w1));
  inferred.push_back(f32Like(w2));
  if (RankedTensorType b1 = rankedOf(adaptor.getB1()))
    inferred.push_back(f32Like(b1));
  if (RankedTensorType b2 = rankedOf(adaptor.getB2()))
    inferred.push_back(f32Like(b2));
  return success();
}

LogicalResult ExpertFFNGradOp::verify() {
  ShapeChecker check(*this);
  Named rows{"rows", getRows()}, w1{"w1", getW1()}, w2{"w2", getW2()}, b1{"b1", getB1()},
      b2{"b2", getB2()}, dout{"output_grad", getOutputGrad()};
  if (failed(check.elementTypes({rows, w1, w2, b1, b2})))
    return failure();
  int64_t groups = getOffsets().getType().getDimSize(0);
  int64_t numExperts = ShapedType::isDynamic(groups) ? groups : groups - 1;
  if (numExperts == 0)
    return emitOpError("expects offsets of shape [E+1] with E >= 1, got ")
           << getOffsets().getType();
  int64_t modelDim = getRows().getType().getDimSize(1);
  if (failed(check.experts(w1, w2, b1, b2, getActivationAttr(), numExperts, "offsets",
                           modelDim)) ||
      failed(check.dim(dout, 0, "N", getRows().getType().getDimSize(0), "rows")) ||
      failed(check.dim(dout, 1, "D", modelDim, "rows")))
    return failure();
  return success();
}

LogicalResult SharedExpertGradOp::inferReturnTypes(MLIRContext *,
                                                   std::optional<Location> location,
                                                   Adaptor adaptor,
                                                   SmallVectorImpl<Type> &inferred) {
  RankedTensorType x = rankedOf(adaptor.getInput()), s1 = rankedOf(adaptor.getSharedW1()),
                   s2 = rankedOf(adaptor.getSharedW2());
  if (!x || x.getRank() != 2 || !s1 || s1.getRank() != 2 || !s2 || s2.getRank() != 2)
    return inferenceFailure(location, getOperationName());
  inferred.push_back(f32Like(x));
  inferred.push_back(f32Like(s1));
  inferred.push_back(f32Like(s2));
  if (RankedTensorType sg = rankedOf(adaptor.getSharedGate()))
    inferred.push_back(f32Like(sg));
  return success();
}

LogicalResult SharedExpertGradOp::verify() {
  ShapeChecker check(*this);
  Named input{"input", getInput()}, s1{"shared_w1", getSharedW1()},
      s2{"shared_w2", getSharedW2()}, sg{"shared_gate", getSharedGate()},
      dout{"output_grad", getOutputGrad()};
  auto x = getInput().getType();
  if (failed(check.elementTypes({input, s1, s2, sg})) ||
      failed(check.sharedExpert(s1, s2, sg, getActivationAttr(), x.getDimSize(1))) ||
      failed(check.dim(dout, 0, "T", x.getDimSize(0), "input")) ||
      failed(check.dim(dout, 1, "D", x.getDimSize(1), "input")))
    return failure();
  return success();
}

LogicalResult CombineGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  RankedTensorType out = rankedOf(adaptor.getExpertOutput()),
                   w = rankedOf(adaptor.getWeights());
  if (!out || out.getRank() != 2 || !w || w.getRank() != 2)
    return inferenceFailure(location, getOperationName());
  inferred.push_back(f32Like(out));
  inferred.push_back(f32Like(w));
  return success();
}

LogicalResult CombineGradOp::verify() {
  ShapeChecker check(*this);
  Named dy{"output_grad", getOutputGrad()}, positions{"positions", getPositions()};
  auto w = getWeights().getType();
  if (failed(check.dim(positions, 0, "T", w.getDimSize(0), "weights")) ||
      failed(check.dim(positions, 1, "K", w.getDimSize(1), "weights")) ||
      failed(check.dim(dy, 0, "T", w.getDimSize(0), "weights")) ||
      failed(check.dim(dy, 1, "D", getExpertOutput().getType().getDimSize(1),
                       "expert_output")))
    return failure();
  return success();
}

LogicalResult SoftDispatchGradOp::inferReturnTypes(MLIRContext *context,
                                                   std::optional<Location> location,
                                                   Adaptor adaptor,
                                                   SmallVectorImpl<Type> &inferred) {
  RankedTensorType x = rankedOf(adaptor.getInput()), phi = rankedOf(adaptor.getSlots());
  if (!x || x.getRank() != 3 || !phi || phi.getRank() != 3)
    return inferenceFailure(location, getOperationName());
  inferred.push_back(f32Like(x));
  inferred.push_back(f32Like(phi));
  if (adaptor.getScale())
    inferred.push_back(RankedTensorType::get({}, Float32Type::get(context)));
  return success();
}

LogicalResult SoftDispatchGradOp::verify() {
  ShapeChecker check(*this);
  Named input{"input", getInput()}, slots{"slots", getSlots()};
  if (failed(check.elementTypes({input, slots})))
    return failure();
  auto x = getInput().getType();
  auto phi = getSlots().getType();
  int64_t g = x.getDimSize(0), m = x.getDimSize(1), d = x.getDimSize(2);
  int64_t e = phi.getDimSize(1), sl = phi.getDimSize(2);
  if (failed(check.dim(slots, 0, "D", d, "input")))
    return failure();
  if (Value rowsGrad = getRowsGrad()) {
    Named rows{"rows_grad", rowsGrad};
    if (failed(check.dim(rows, 0, "E*G*S",
                         ShapeChecker::mul(ShapeChecker::mul(e, g), sl), "input and slots")) ||
        failed(check.dim(rows, 1, "D", d, "input")))
      return failure();
  }
  if (Value cwGrad = getCombineWeightsGrad()) {
    Named cw{"combine_weights_grad", cwGrad};
    if (failed(check.dim(cw, 0, "G", g, "input")) ||
        failed(check.dim(cw, 1, "M", m, "input")) ||
        failed(check.dim(cw, 2, "E", e, "slots")) ||
        failed(check.dim(cw, 3, "S", sl, "slots")))
      return failure();
  }
  return success();
}

LogicalResult SoftCombineGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> location,
                                                  Adaptor adaptor,
                                                  SmallVectorImpl<Type> &inferred) {
  RankedTensorType out = rankedOf(adaptor.getExpertOutput()),
                   cw = rankedOf(adaptor.getCombineWeights());
  if (!out || out.getRank() != 2 || !cw || cw.getRank() != 4)
    return inferenceFailure(location, getOperationName());
  inferred.push_back(f32Like(out));
  inferred.push_back(f32Like(cw));
  return success();
}

LogicalResult SoftCombineGradOp::verify() {
  ShapeChecker check(*this);
  Named dy{"output_grad", getOutputGrad()}, out{"expert_output", getExpertOutput()},
      cw{"combine_weights", getCombineWeights()};
  if (failed(check.elementTypes({out, cw})))
    return failure();
  auto cwType = getCombineWeights().getType();
  int64_t g = cwType.getDimSize(0), m = cwType.getDimSize(1), e = cwType.getDimSize(2),
          sl = cwType.getDimSize(3);
  int64_t d = getExpertOutput().getType().getDimSize(1);
  if (failed(check.dim(out, 0, "E*G*S", ShapeChecker::mul(ShapeChecker::mul(e, g), sl),
                       "combine_weights")) ||
      failed(check.dim(dy, 0, "G", g, "combine_weights")) ||
      failed(check.dim(dy, 1, "M", m, "combine_weights")) ||
      failed(check.dim(dy, 2, "D", d, "expert_output")))
    return failure();
  return success();
}
