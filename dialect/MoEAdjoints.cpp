//===- MoEAdjoints.cpp - the reverse-mode rules of the moe ops ------------===//
//
// AdjointOpInterface for the ops of the decomposed chains (docs/spec.md §9):
// each rule is one backward op of MoEGradOps.td, given the forward op's
// operands and results (the routing it chose, the plan it built) and the
// cotangents of its results. Layers and fused ops have no rule of their own:
// --moe-generate-vjp first rewrites them into this chain (their meaning),
// so that the forward runs once and its values are what the backward reads.
//
//===----------------------------------------------------------------------===//

#include "dialect/MoEAdjointInterface.h"
#include "dialect/MoEOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::moe;

#include "dialect/MoEAdjointInterface.cpp.inc"

Type mlir::moe::cotangentType(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !isa<FloatType>(t.getElementType()))
    return Type();
  return RankedTensorType::get(t.getShape(), Float32Type::get(v.getContext()));
}

Value mlir::moe::castToF32(OpBuilder &b, Location loc, Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getElementType().isF32())
    return v;
  return arith::ExtFOp::create(b, loc, cotangentType(v), v);
}

Value mlir::moe::zerosLike(OpBuilder &b, Location loc, Value like) {
  auto t = cast<RankedTensorType>(like.getType());
  Type f32 = b.getF32Type();
  auto type = RankedTensorType::get(t.getShape(), f32);
  if (t.hasStaticShape())
    return arith::ConstantOp::create(b, loc, type,
                                     DenseElementsAttr::get(type, b.getFloatAttr(f32, 0.0)));
  SmallVector<Value> dynamic;
  for (int64_t i = 0; i < t.getRank(); ++i)
    if (t.isDynamicDim(i))
      dynamic.push_back(tensor::DimOp::create(b, loc, like, i));
  Value empty = tensor::EmptyOp::create(b, loc, t.getShape(), f32, dynamic);
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0));
  return linalg::FillOp::create(b, loc, zero, empty).getResult(0);
}

namespace {
/// Puts `cotangent` at the position of the (optional) operand `range`.
void setCotangent(SmallVectorImpl<Value> &cotangents, MutableOperandRange range,
                  Value cotangent) {
  if (!range.empty())
    cotangents[range[0].getOperandNumber()] = cotangent;
}

/// The cotangent of `result`, or zeros shaped like it when it has none.
Value cotangentOrZeros(OpBuilder &b, Location loc, Value cotangent, Value result) {
  return cotangent ? cotangent : zerosLike(b, loc, result);
}
} // namespace

LogicalResult RouteOp::buildAdjoint(OpBuilder &b, ValueRange resultCotangents,
                                    SmallVectorImpl<Value> &operandCotangents) {
  operandCotangents.assign(getNumOperands(), Value());
  auto grad = RouteGradOp::create(b, getLoc(), getInput(), getRouterWeight(),
                                  resultCotangents[0]);
  copyLoweringConfig(*this, grad);
  setCotangent(operandCotangents, getInputMutable(), grad.getInputGrad());
  setCotangent(operandCotangents, getRouterWeightMutable(), grad.getRouterWeightGrad());
  setCotangent(operandCotangents, getRouterBiasMutable(), grad.getRouterBiasGrad());
  return success();
}

LogicalResult GateOp::buildAdjoint(OpBuilder &b, ValueRange resultCotangents,
                                   SmallVectorImpl<Value> &operandCotangents) {
  operandCotangents.assign(getNumOperands(), Value());
  Location loc = getLoc();
  Value dWeights = cotangentOrZeros(b, loc, resultCotangents[0], getWeights());
  Value dAux = getAuxLoss() ? resultCotangents[2] : Value();
  auto grad = GateGradOp::create(b, loc, getLogits(), getIndices(), dWeights, getSeed(),
                                 dAux, getRouting(), getTraining());
  setCotangent(operandCotangents, getLogitsMutable(), grad.getLogitsGrad());
  // selection_bias only chooses: its gradient is zero (docs/spec.md §9).
  return success();
}

LogicalResult DispatchOp::buildAdjoint(OpBuilder &b, ValueRange resultCotangents,
                                       SmallVectorImpl<Value> &operandCotangents) {
  operandCotangents.assign(getNumOperands(), Value());
  if (!resultCotangents[0])
    return success();
  auto grad = DispatchGradOp::create(b, getLoc(), resultCotangents[0], getPositions());
  setCotangent(operandCotangents, getInputMutable(), grad.getInputGrad());
  return success();
}

LogicalResult ExpertFFNOp::buildAdjoint(OpBuilder &b, ValueRange resultCotangents,
                                        SmallVectorImpl<Value> &operandCotangents) {
  operandCotangents.assign(getNumOperands(), Value());
  auto grad = ExpertFFNGradOp::create(b, getLoc(), getRows(), getOffsets(),
                                      resultCotangents[0], getW1(), getW2(), getB1(),
                                      getB2(), getActivationAttr());
  copyLoweringConfig(*this, grad);
  setCotangent(operandCotangents, getRowsMutable(), grad.getRowsGrad());
  setCotangent(operandCotangents, getW1Mutable(), grad.getW1Grad());
  setCotangent(operandCotangents, getW2Mutable(), grad.getW2Grad());
  setCotangent(operandCotangents, getB1Mutable(), grad.getB1Grad());
  setCotangent(operandCotangents, getB2Mutable(), grad.getB2Grad());
  return success();
}

LogicalResult SharedExpertOp::buildAdjoint(OpBuilder &b, ValueRange resultCotangents,
                                           SmallVectorImpl<Value> &operandCotangents) {
  operandCotangents.assign(getNumOperands(), Value());
  auto grad = SharedExpertGradOp::create(b, getLoc(), getInput(), resultCotangents[0],
                                         getSharedW1(), getSharedW2(), getSharedGate(),
                                         getActivationAttr());
  copyLoweringConfig(*this, grad);
  setCotangent(operandCotangents, getInputMutable(), grad.getInputGrad());
  setCotangent(operandCotangents, getSharedW1Mutable(), grad.getSharedW1Grad());
  setCotangent(operandCotangents, getSharedW2Mutable(), grad.getSharedW2Grad());
  setCotangent(operandCotangents, getSharedGateMutable(), grad.getSharedGateGrad());
  return success();
}

LogicalResult CombineOp::buildAdjoint(OpBuilder &b, ValueRange resultCotangents,
                                      SmallVectorImpl<Value> &operandCotangents) {
  operandCotangents.assign(getNumOperands(), Value());
  Value dy = resultCotangents[0];
  auto grad = CombineGradOp::create(b, getLoc(), dy, getExpertOutput(), getWeights(),
                                    getPositions());
  setCotangent(operandCotangents, getExpertOutputMutable(), grad.getExpertOutputGrad());
  setCotangent(operandCotangents, getWeightsMutable(), grad.getWeightsGrad());
  // The shared output is added to the sum as it is.
  setCotangent(operandCotangents, getSharedOutputMutable(), dy);
  return success();
}

LogicalResult SoftDispatchOp::buildAdjoint(OpBuilder &b, ValueRange resultCotangents,
                                           SmallVectorImpl<Value> &operandCotangents) {
  operandCotangents.assign(getNumOperands(), Value());
  Value dRows = resultCotangents[0], dCombine = resultCotangents[2];
  if (!dRows && !dCombine)
    return success();
  auto grad = SoftDispatchGradOp::create(b, getLoc(), getInput(), getSlots(), getScale(), dRows,
                                         dCombine, getNormalize());
  setCotangent(operandCotangents, getInputMutable(), grad.getInputGrad());
  setCotangent(operandCotangents, getSlotsMutable(), grad.getSlotsGrad());
  setCotangent(operandCotangents, getScaleMutable(), grad.getScaleGrad());
  return success();
}

LogicalResult SoftCombineOp::buildAdjoint(OpBuilder &b, ValueRange resultCotangents,
                                          SmallVectorImpl<Value> &operandCotangents) {
  operandCotangents.assign(getNumOperands(), Value());
  Value dy = cotangentOrZeros(b, getLoc(), resultCotangents[0], getOutput());
  auto grad =
      SoftCombineGradOp::create(b, getLoc(), dy, getExpertOutput(), getCombineWeights());
  setCotangent(operandCotangents, getExpertOutputMutable(), grad.getExpertOutputGrad());
  setCotangent(operandCotangents, getCombineWeightsMutable(), grad.getCombineWeightsGrad());
  return success();
}
