//===- MoEAttrs.h - moe dialect attributes ----------------------*- C++ -*-===//
#ifndef MOE_DIALECT_MOEATTRS_H
#define MOE_DIALECT_MOEATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/APFloat.h"

#include <optional>

namespace mlir {
/// Parses an f64 attribute parameter from a float (or integer) literal, e.g.
/// `trimmed_lasso = 1.0e-3`.
template <>
struct FieldParser<llvm::APFloat> {
  static FailureOr<llvm::APFloat> parse(AsmParser &parser) {
    double value;
    if (parser.parseFloat(value))
      return failure();
    return llvm::APFloat(value);
  }
};
} // namespace mlir

#include "dialect/MoEEnums.h.inc"

namespace mlir::moe {
/// The cp.async stages a #moe.gpu_config may ask for (0: the defaults).
constexpr int64_t kMinGpuStages = 2;
constexpr int64_t kMaxGpuStages = 8;
} // namespace mlir::moe

#include "dialect/MoEInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/MoEAttrs.h.inc"

#endif // MOE_DIALECT_MOEATTRS_H
