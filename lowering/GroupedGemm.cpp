//===- GroupedGemm.cpp - one description of a grouped GEMM ----------------===//
//
// The epilogue math of every grouped-GEMM generator (GroupedGemm.h).
//
//===----------------------------------------------------------------------===//
#include "lowering/GroupedGemm.h"

#include "lowering/Activations.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/ErrorHandling.h"

using namespace mlir;
using namespace mlir::moe;

bool GemmEpilogue::has(EpilogueStep step) const { return llvm::is_contained(steps, step); }

/// swiglu and geglu: the activation multiplies act(gate) by the up half.
static bool isGatedActivation(Activation a) {
  return a == Activation::swiglu || a == Activation::geglu;
}

bool GemmEpilogue::gated() const {
  return has(EpilogueStep::activation) && isGatedActivation(activation);
}

bool GemmEpilogue::gatedGrad() const {
  return has(EpilogueStep::activationGrad) && isGatedActivation(activation);
}

GemmEpilogue &GemmEpilogue::then(EpilogueStep step) {
  steps.push_back(step);
  return *this;
}

GemmEpilogue GemmEpilogue::without(EpilogueStep step) const {
  GemmEpilogue e = *this;
  llvm::erase(e.steps, step);
  return e;
}

GroupedGemmDesc moe::expertGemm1(bool gathered, Activation act, bool bias, Type a, Type w,
                                 Type h) {
  GroupedGemmDesc d;
  d.rows = gathered ? GemmRows::gathered : GemmRows::direct;
  d.aType = a;
  d.bType = w;
  d.cType = h;
  if (bias)
    d.epilogue.then(EpilogueStep::bias);
  d.epilogue.then(EpilogueStep::activation).then(EpilogueStep::round);
  d.epilogue.activation = act;
  d.epilogue.roundTo = h;
  return d;
}

GroupedGemmDesc moe::expertGemm2(bool bias, bool routedWeight, bool combine, Type h, Type w,
                                 Type out) {
  GroupedGemmDesc d;
  d.aType = h;
  d.bType = w;
  d.cType = out;
  if (bias)
    d.epilogue.then(EpilogueStep::bias);
  if (routedWeight)
    d.epilogue.then(EpilogueStep::routedWeight);
  if (combine)
    d.epilogue.then(EpilogueStep::combine);
  return d;
}

std::string GroupedGemmDesc::invalidReason() const {
  if ((reduction == GemmReduction::groupRows) != (weights == GemmWeights::planRows))
    return "B is read by plan row exactly in the weight-gradient form";
  if (weightGradient()) {
    if (bTransposed)
      return "the weight-gradient form reads B (by plan row) untransposed";
    if (gated() || epilogue.has(EpilogueStep::routedWeight) ||
        epilogue.has(EpilogueStep::combine))
      return "the weight-gradient form's outputs belong to no row: no gated activation, "
             "routed weight or combine";
  }
  if (gated() && bTransposed)
    return "a gated GEMM reads B's gate and up columns untransposed";
  if (format == WeightFormat::fp8Block &&
      (weights != GemmWeights::perGroup || reduction != GemmReduction::columns || bTransposed ||
       blockK < 1 || blockN < 1))
    return "FP8 block-scaled weights are expert weights [G, K, N] of a forward GEMM, with "
           "both block sizes";
  if (format == WeightFormat::int4Group &&
      (weights != GemmWeights::perGroup || reduction != GemmReduction::columns || bTransposed ||
       blockK < 1 || blockN != 1))
    return "int4 group-quantized weights are expert weights [G, K, N] of a forward GEMM, with "
           "a group along K and one scale per column";
  if (zeroPoint && format != WeightFormat::int4Group)
    return "zero points belong to int4 weights";
  if (epilogue.has(EpilogueStep::round) && !epilogue.roundTo)
    return "the round step needs its type";
  if (epilogue.has(EpilogueStep::activationGrad)) {
    if (epilogue.steps.size() != 1)
      return "the activation-gradient step is the epilogue's only step";
    if (weightGradient())
      return "the weight-gradient form has no activation gradient";
    if (!epilogue.roundTo)
      return "the activation-gradient step needs the type H is rounded to";
  }
  return "";
}

GroupedGemmDesc moe::expertWeightGradient(bool gathered, Type a, Type dz, Type dw) {
  GroupedGemmDesc d;
  d.rows = gathered ? GemmRows::gathered : GemmRows::direct;
  d.weights = GemmWeights::planRows;
  d.reduction = GemmReduction::groupRows;
  d.aType = a;
  d.bType = dz;
  d.cType = dw;
  return d;
}

/// v rounded to `type` and carried on in f32 (a scalar or a vector).
static Value roundTo(ImplicitLocOpBuilder &b, Type type, Value v) {
  if (type.isF32())
    return v;
  Type narrow = type, wide = v.getType();
  if (auto vt = dyn_cast<VectorType>(wide))
    narrow = vt.clone(type);
  Value narrowed = arith::TruncFOp::create(b, narrow, v);
  return arith::ExtFOp::create(b, wide, narrowed);
}

Value moe::buildEpilogue(ImplicitLocOpBuilder &b, const GemmEpilogue &epilogue,
                         const EpilogueValues &in) {
  bool gated = epilogue.gated();
  Value v = in.acc, up = in.accUp;
  assert((!gated || up) && "a gated epilogue needs the up sum");
  for (EpilogueStep step : epilogue.steps) {
    switch (step) {
    case EpilogueStep::bias:
      assert(in.bias && (!gated || in.biasUp) && "the bias step needs its values");
      v = arith::AddFOp::create(b, v, in.bias);
      if (gated)
        up = arith::AddFOp::create(b, up, in.biasUp);
      break;
    case EpilogueStep::activation:
      v = buildActivation(b, epilogue.activation, v);
      if (gated)
        v = arith::MulFOp::create(b, v, up);
      break;
    case EpilogueStep::routedWeight: {
      assert(in.weight && "the routed-weight step needs the weight");
      Value w = in.weight;
      if (auto vt = dyn_cast<VectorType>(v.getType()); vt && !isa<VectorType>(w.getType()))
        w = vector::BroadcastOp::create(b, vt, w);
      v = arith::MulFOp::create(b, v, w);
      break;
    }
    case EpilogueStep::round:
      assert(epilogue.roundTo && "the round step needs its type");
      v = roundTo(b, epilogue.roundTo, v);
      break;
    case EpilogueStep::combine:
      break; // the generator's (it follows the stores)
    case EpilogueStep::activationGrad:
      llvm_unreachable("the activation gradient has its own builder");
    }
  }
  return v;
}

ActivationGradValues moe::buildActivationGradEpilogue(ImplicitLocOpBuilder &b,
                                                      const GemmEpilogue &epilogue, Value dh,
                                                      Value z, Value zUp) {
  assert(epilogue.has(EpilogueStep::activationGrad) && epilogue.roundTo &&
         "an activation-gradient epilogue");
  bool gated = epilogue.gatedGrad();
  assert((!gated || zUp) && "a gated activation gradient needs the up column");
  Value a = buildActivation(b, epilogue.activation, z);
  Value da = buildActivationDerivative(b, epilogue.activation, z);
  ActivationGradValues out;
  if (gated) {
    out.h = roundTo(b, epilogue.roundTo, arith::MulFOp::create(b, a, zUp));
    out.dz = arith::MulFOp::create(b, arith::MulFOp::create(b, dh, zUp), da);
    out.dzUp = arith::MulFOp::create(b, dh, a);
  } else {
    out.h = roundTo(b, epilogue.roundTo, a);
    out.dz = arith::MulFOp::create(b, dh, da);
  }
  return out;
}

/// `type` with the element type `elt` (a vector keeps its shape).
static Type withElement(Type type, Type elt) {
  if (auto v = dyn_cast<VectorType>(type))
    return v.clone(elt);
  return elt;
}

/// The integer or float constant `c` of `type` (splat for a vector).
static Value constantOf(ImplicitLocOpBuilder &b, Type type, double c) {
  Type elt = getElementTypeOrSelf(type);
  TypedAttr attr = isa<FloatType>(elt) ? TypedAttr(b.getFloatAttr(elt, c))
                                       : TypedAttr(b.getIntegerAttr(elt, static_cast<int64_t>(c)));
  if (auto v = dyn_cast<VectorType>(type))
    return arith::ConstantOp::create(b, v, DenseElementsAttr::get(v, attr));
  return arith::ConstantOp::create(b, attr);
}

Value moe::buildFp8Value(ImplicitLocOpBuilder &b, Value codes) {
  Type type = codes.getType();
  Type i8 = withElement(type, b.getI8Type()), i16 = withElement(type, b.getI16Type());
  Value x = arith::ExtUIOp::create(b, i16, arith::BitcastOp::create(b, i8, codes));
  Value magnitude = arith::AndIOp::create(b, x, constantOf(b, i16, 0x7F));
  Value sign = arith::ShLIOp::create(b, arith::AndIOp::create(b, x, constantOf(b, i16, 0x80)),
                                     constantOf(b, i16, 8));
  Value bits = arith::OrIOp::create(
      b, arith::ShLIOp::create(b, magnitude, constantOf(b, i16, 7)), sign);
  Value nan = arith::CmpIOp::create(b, arith::CmpIPredicate::eq, magnitude,
                                    constantOf(b, i16, 0x7F));
  bits = arith::SelectOp::create(b, nan, constantOf(b, i16, 0x7E00), bits);
  Value half = arith::BitcastOp::create(b, withElement(type, b.getF16Type()), bits);
  Type f32 = withElement(type, b.getF32Type());
  return arith::MulFOp::create(b, arith::ExtFOp::create(b, f32, half), constantOf(b, f32, 256.0));
}

Value moe::buildQuantizedFactor(ImplicitLocOpBuilder &b, const GroupedGemmDesc &desc,
                                Value code, Value zero) {
  assert(desc.quantized() && "a quantized weight format");
  if (desc.format == WeightFormat::fp8Block)
    return buildFp8Value(b, code);
  Type type = code.getType();
  Type i32 = withElement(type, b.getI32Type()), f32 = withElement(type, b.getF32Type());
  auto value = [&](Value q) -> Value {
    return arith::SIToFPOp::create(b, f32, arith::ExtUIOp::create(b, i32, q));
  };
  Value z = zero ? value(zero) : constantOf(b, f32, 8.0);
  return arith::SubFOp::create(b, value(code), z);
}

Value moe::buildDequantized(ImplicitLocOpBuilder &b, const GroupedGemmDesc &desc, Value code,
                            Value scale, Value zero) {
  return arith::MulFOp::create(b, buildQuantizedFactor(b, desc, code, zero), scale);
}

void GroupedGemmDesc::setQuant(QuantAttr quant) {
  if (!quant) {
    format = WeightFormat::dense;
    blockK = blockN = 0;
    zeroPoint = int8Activations = false;
    return;
  }
  if (quant.getKind() == QuantKind::int4) {
    format = WeightFormat::int4Group;
    blockK = quant.getGroup();
    blockN = 1;
    zeroPoint = quant.getZeroPoint();
    int8Activations = quant.getInt8Activations();
    return;
  }
  format = WeightFormat::fp8Block;
  blockK = quant.getBlock()[0];
  blockN = quant.getBlock()[1];
  zeroPoint = int8Activations = false;
}

std::string GroupedGemmDesc::formatSuffix() const {
  if (format == WeightFormat::int4Group)
    return "_int4g" + std::to_string(blockK) + (zeroPoint ? "_zp" : "") +
           (int8Activations ? "_a8" : "");
  if (format == WeightFormat::fp8Block)
    return "_fp8b" + std::to_string(blockK) + "x" + std::to_string(blockN);
  return "";
}
