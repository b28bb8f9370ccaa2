//===- MoESpmdOps.cpp - moe expert-parallel exchange ops ------------------===//

#include "dialect/MoESpmdOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::moe;

#define GET_OP_CLASSES
#include "dialect/MoESpmdOps.cpp.inc"

FailureOr<int64_t> mlir::moe::lookupGridSize(Operation *from,
                                             FlatSymbolRefAttr grid) {
  auto gridOp = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(from, grid);
  if (!gridOp)
    return from->emitOpError() << "grid " << grid
                               << " does not name a shard.grid";
  if (gridOp.getRank() != 1 || ShapedType::isDynamic(gridOp.getShape()[0]))
    return from->emitOpError() << "grid " << grid
                               << " must be 1-D with a static size";
  return gridOp.getShape()[0];
}

namespace {
/// The checks both exchanges share: rows [R, D], offsets [E+1] i32,
/// counts [N, E] i32 with N the grid's size and E % N == 0, a result of
/// rank 2 with the rows' element type and width.
LogicalResult verifyExchange(Operation *op, Value rows, Value offsets,
                             Value counts, Type resultType,
                             FlatSymbolRefAttr grid) {
  auto rowsType = cast<RankedTensorType>(rows.getType());
  auto offType = cast<RankedTensorType>(offsets.getType());
  auto cntType = cast<RankedTensorType>(counts.getType());
  auto resType = cast<RankedTensorType>(resultType);
  // Ranks and element kinds are ODS constraints; the relations are here.
  if (resType.getElementType() != rowsType.getElementType() ||
      resType.getDimSize(1) != rowsType.getDimSize(1))
    return op->emitOpError("result must be [?, D] with the rows' element type "
                           "and D, got ")
           << resType << " for rows " << rowsType;
  FailureOr<int64_t> ranks = lookupGridSize(op, grid);
  if (failed(ranks))
    return failure();
  if (!cntType.isDynamicDim(0) && cntType.getDimSize(0) != *ranks)
    return op->emitOpError("counts has ")
           << cntType.getDimSize(0) << " rows, but grid " << grid << " has "
           << *ranks << " ranks";
  if (!cntType.isDynamicDim(1)) {
    int64_t experts = cntType.getDimSize(1);
    if (!offType.isDynamicDim(0) && offType.getDimSize(0) != experts + 1)
      return op->emitOpError("offsets must have E+1 = ")
             << experts + 1 << " entries, got " << offType.getDimSize(0);
    if (experts % *ranks != 0)
      return op->emitOpError("E = ")
             << experts << " experts cannot be split over " << *ranks
             << " ranks (E % N != 0)";
  } else {
    return op->emitOpError("counts must have a static expert count E, got ")
           << cntType;
  }
  return success();
}
} // namespace

LogicalResult ExchangeDispatchOp::verify() {
  return verifyExchange(*this, getRows(), getOffsets(), getCounts(),
                        getResult().getType(), getGridAttr());
}

LogicalResult ExchangeCombineOp::verify() {
  if (getDest().getType() != getResult().getType())
    return emitOpError("result type ")
           << getResult().getType() << " must be the type of dest "
           << getDest().getType();
  return verifyExchange(*this, getRows(), getOffsets(), getCounts(),
                        getResult().getType(), getGridAttr());
}
