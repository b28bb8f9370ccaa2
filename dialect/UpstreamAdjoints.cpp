//===- UpstreamAdjoints.cpp - adjoints of upstream ops (external models) --===//
//
// AdjointOpInterface for the upstream ops real blocks put between layers
// (docs/spec.md §9): elementwise arith/math ops on tensors (residual adds,
// scalings), elementwise linalg ops, linalg.matmul (a dense projection) and
// tensor reshapes. Attached by registerUpstreamAdjoints; every cotangent is
// an f32 tensor of its value's shape (the interface's convention).
//
//===----------------------------------------------------------------------===//

#include "dialect/MoEAdjointInterface.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::moe;

namespace {

/// An f32 tensor of `sizes`, zero-filled.
Value zeros(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes) {
  Value empty = tensor::EmptyOp::create(b, loc, sizes, b.getF32Type());
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0));
  return linalg::FillOp::create(b, loc, zero, empty).getResult(0);
}

Value mul(OpBuilder &b, Location loc, Value x, Value y) {
  return arith::MulFOp::create(b, loc, x, y);
}

/// The cotangents of c = a + b, a - b, a * b (elementwise, same shapes),
/// shared by the arith and the linalg forms.
enum class Binary { Add, Sub, Mul };
void binaryAdjoint(Binary kind, OpBuilder &b, Location loc, Value lhs, Value rhs, Value dc,
                   SmallVectorImpl<Value> &operandCotangents) {
  switch (kind) {
  case Binary::Add:
    operandCotangents[0] = dc;
    operandCotangents[1] = dc;
    break;
  case Binary::Sub:
    operandCotangents[0] = dc;
    operandCotangents[1] = arith::NegFOp::create(b, loc, dc);
    break;
  case Binary::Mul:
    operandCotangents[0] = mul(b, loc, dc, castToF32(b, loc, rhs));
    operandCotangents[1] = mul(b, loc, dc, castToF32(b, loc, lhs));
    break;
  }
}

/// Elementwise binary and unary ops on tensors: c = a + b, a - b, a * b, -a,
/// extf / truncf (cotangents are f32 already: the identity), exp, tanh.
template <typename OpTy>
struct ElementwiseAdjoint
    : public AdjointOpInterface::ExternalModel<ElementwiseAdjoint<OpTy>, OpTy> {
  std::string whyNotDifferentiable(Operation *op) const {
    for (Value v : op->getOperands())
      if (!isa<RankedTensorType>(v.getType()))
        return "it is not on ranked tensors";
    return "";
  }

  LogicalResult buildAdjoint(Operation *op, OpBuilder &b, ValueRange resultCotangents,
                             SmallVectorImpl<Value> &operandCotangents) const {
    Location loc = op->getLoc();
    Value dc = resultCotangents[0];
    operandCotangents.assign(op->getNumOperands(), Value());
    if constexpr (std::is_same_v<OpTy, arith::AddFOp>) {
      binaryAdjoint(Binary::Add, b, loc, op->getOperand(0), op->getOperand(1), dc,
                    operandCotangents);
    } else if constexpr (std::is_same_v<OpTy, arith::SubFOp>) {
      binaryAdjoint(Binary::Sub, b, loc, op->getOperand(0), op->getOperand(1), dc,
                    operandCotangents);
    } else if constexpr (std::is_same_v<OpTy, arith::MulFOp>) {
      binaryAdjoint(Binary::Mul, b, loc, op->getOperand(0), op->getOperand(1), dc,
                    operandCotangents);
    } else if constexpr (std::is_same_v<OpTy, arith::NegFOp>) {
      operandCotangents[0] = arith::NegFOp::create(b, loc, dc);
    } else if constexpr (std::is_same_v<OpTy, arith::ExtFOp> ||
                         std::is_same_v<OpTy, arith::TruncFOp>) {
      operandCotangents[0] = dc;
    } else if constexpr (std::is_same_v<OpTy, math::ExpOp>) {
      // d exp(a) = exp(a) da: the forward's result.
      operandCotangents[0] = mul(b, loc, dc, castToF32(b, loc, op->getResult(0)));
    } else if constexpr (std::is_same_v<OpTy, math::TanhOp>) {
      // d tanh(a) = (1 - tanh(a)^2) da.
      Value t = castToF32(b, loc, op->getResult(0));
      Value tt = mul(b, loc, t, t);
      operandCotangents[0] = arith::SubFOp::create(b, loc, dc, mul(b, loc, dc, tt));
    }
    return success();
  }
};

/// linalg.add / sub / mul (named elementwise ops): ins(a, b) outs(init);
/// the init is overwritten, so it gets no cotangent.
template <typename OpTy>
struct LinalgElementwiseAdjoint
    : public AdjointOpInterface::ExternalModel<LinalgElementwiseAdjoint<OpTy>, OpTy> {
  std::string whyNotDifferentiable(Operation *op) const {
    auto linalgOp = cast<linalg::LinalgOp>(op);
    if (!linalgOp.hasPureTensorSemantics())
      return "it is not on tensors";
    for (Value v : linalgOp.getDpsInputs())
      if (cast<ShapedType>(v.getType()).getShape() !=
          cast<ShapedType>(op->getResult(0).getType()).getShape())
        return "its operands are broadcast";
    return "";
  }

  LogicalResult buildAdjoint(Operation *op, OpBuilder &b, ValueRange resultCotangents,
                             SmallVectorImpl<Value> &operandCotangents) const {
    Location loc = op->getLoc();
    Value dc = resultCotangents[0];
    operandCotangents.assign(op->getNumOperands(), Value());
    Binary kind = std::is_same_v<OpTy, linalg::AddOp>   ? Binary::Add
                  : std::is_same_v<OpTy, linalg::SubOp> ? Binary::Sub
                                                        : Binary::Mul;
    binaryAdjoint(kind, b, loc, op->getOperand(0), op->getOperand(1), dc, operandCotangents);
    return success();
  }
};

/// C = C0 + A B: dA = dC B^T, dB = A^T dC, dC0 = dC.
struct MatmulAdjoint : public AdjointOpInterface::ExternalModel<MatmulAdjoint, linalg::MatmulOp> {
  std::string whyNotDifferentiable(Operation *op) const {
    auto matmul = cast<linalg::MatmulOp>(op);
    if (!matmul.hasPureTensorSemantics())
      return "it is not on tensors";
    if (matmul.hasUserDefinedMaps())
      return "it has user-defined indexing maps (only the plain A B form is supported)";
    return "";
  }

  LogicalResult buildAdjoint(Operation *op, OpBuilder &b, ValueRange resultCotangents,
                             SmallVectorImpl<Value> &operandCotangents) const {
    auto matmul = cast<linalg::MatmulOp>(op);
    Location loc = op->getLoc();
    Value dc = resultCotangents[0];
    Value a = castToF32(b, loc, matmul.getDpsInputs()[0]);
    Value bm = castToF32(b, loc, matmul.getDpsInputs()[1]);
    auto transpose = [&](Value v) {
      OpFoldResult d0 = tensor::getMixedSize(b, loc, v, 0), d1 = tensor::getMixedSize(b, loc, v, 1);
      Value init = tensor::EmptyOp::create(b, loc, ArrayRef<OpFoldResult>{d1, d0}, b.getF32Type());
      return linalg::TransposeOp::create(b, loc, v, init, ArrayRef<int64_t>{1, 0}).getResult()[0];
    };
    OpFoldResult m = tensor::getMixedSize(b, loc, a, 0), k = tensor::getMixedSize(b, loc, a, 1),
                 n = tensor::getMixedSize(b, loc, bm, 1);
    Value da = linalg::MatmulOp::create(b, loc, ValueRange{dc, transpose(bm)},
                                        ValueRange{zeros(b, loc, {m, k})})
                   .getResult(0);
    Value db = linalg::MatmulOp::create(b, loc, ValueRange{transpose(a), dc},
                                        ValueRange{zeros(b, loc, {k, n})})
                   .getResult(0);
    operandCotangents.assign(op->getNumOperands(), Value());
    operandCotangents[0] = da;
    operandCotangents[1] = db;
    operandCotangents[2] = dc;
    return success();
  }
};

/// A reshape's adjoint is the inverse reshape of the cotangent.
struct ExpandShapeAdjoint
    : public AdjointOpInterface::ExternalModel<ExpandShapeAdjoint, tensor::ExpandShapeOp> {
  LogicalResult buildAdjoint(Operation *op, OpBuilder &b, ValueRange resultCotangents,
                             SmallVectorImpl<Value> &operandCotangents) const {
    auto expand = cast<tensor::ExpandShapeOp>(op);
    operandCotangents.assign(op->getNumOperands(), Value());
    operandCotangents[0] = tensor::CollapseShapeOp::create(
        b, op->getLoc(), cotangentType(expand.getSrc()), resultCotangents[0],
        expand.getReassociationIndices());
    return success();
  }
};

struct CollapseShapeAdjoint
    : public AdjointOpInterface::ExternalModel<CollapseShapeAdjoint, tensor::CollapseShapeOp> {
  std::string whyNotDifferentiable(Operation *op) const {
    auto collapse = cast<tensor::CollapseShapeOp>(op);
    // The inverse expand_shape infers its sizes from one dynamic size per
    // group at most.
    for (const ReassociationIndices &group : collapse.getReassociationIndices()) {
      int dynamic = 0;
      for (int64_t d : group)
        dynamic += collapse.getSrcType().isDynamicDim(d);
      if (dynamic > 1)
        return "a collapsed group has more than one dynamic size";
    }
    return "";
  }

  LogicalResult buildAdjoint(Operation *op, OpBuilder &b, ValueRange resultCotangents,
                             SmallVectorImpl<Value> &operandCotangents) const {
    auto collapse = cast<tensor::CollapseShapeOp>(op);
    Location loc = op->getLoc();
    SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, collapse.getSrc());
    operandCotangents.assign(op->getNumOperands(), Value());
    operandCotangents[0] = tensor::ExpandShapeOp::create(
        b, loc, cotangentType(collapse.getSrc()), resultCotangents[0],
        collapse.getReassociationIndices(), sizes);
    return success();
  }
};

} // namespace

void mlir::moe::registerUpstreamAdjoints(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, arith::ArithDialect *) {
    arith::AddFOp::attachInterface<ElementwiseAdjoint<arith::AddFOp>>(*ctx);
    arith::SubFOp::attachInterface<ElementwiseAdjoint<arith::SubFOp>>(*ctx);
    arith::MulFOp::attachInterface<ElementwiseAdjoint<arith::MulFOp>>(*ctx);
    arith::NegFOp::attachInterface<ElementwiseAdjoint<arith::NegFOp>>(*ctx);
    arith::ExtFOp::attachInterface<ElementwiseAdjoint<arith::ExtFOp>>(*ctx);
    arith::TruncFOp::attachInterface<ElementwiseAdjoint<arith::TruncFOp>>(*ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, math::MathDialect *) {
    math::ExpOp::attachInterface<ElementwiseAdjoint<math::ExpOp>>(*ctx);
    math::TanhOp::attachInterface<ElementwiseAdjoint<math::TanhOp>>(*ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, linalg::LinalgDialect *) {
    linalg::AddOp::attachInterface<LinalgElementwiseAdjoint<linalg::AddOp>>(*ctx);
    linalg::SubOp::attachInterface<LinalgElementwiseAdjoint<linalg::SubOp>>(*ctx);
    linalg::MulOp::attachInterface<LinalgElementwiseAdjoint<linalg::MulOp>>(*ctx);
    linalg::MatmulOp::attachInterface<MatmulAdjoint>(*ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, tensor::TensorDialect *) {
    tensor::ExpandShapeOp::attachInterface<ExpandShapeAdjoint>(*ctx);
    tensor::CollapseShapeOp::attachInterface<CollapseShapeAdjoint>(*ctx);
  });
}
