//===- MoECAPI.cpp - C API of the moe dialect -----------------------------===//
//
// Implements moe-mlir-c/MoE.h over the dialect alone (library MoEDialect);
// the pass entry points are in MoEPassesCAPI.cpp.
//
//===----------------------------------------------------------------------===//

#include "moe-mlir-c/MoE.h"

#include "dialect/MoEAttrs.h"
#include "dialect/MoEDialect.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"

#include <type_traits>

using namespace mlir;
using namespace mlir::moe;

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(MoE, moe, mlir::moe::MoEDialect)

//===----------------------------------------------------------------------===//
// Enums: the C values are the dialect's enum cases.
//===----------------------------------------------------------------------===//

#define MOE_CHECK_ENUM(C, CXX)                                                 \
  static_assert(static_cast<int>(C) ==                                         \
                    static_cast<int>(static_cast<std::underlying_type_t<       \
                                         decltype(CXX)>>(CXX)),                \
                #C " must equal " #CXX)
MOE_CHECK_ENUM(MlirMoEActivationGelu, Activation::gelu);
MOE_CHECK_ENUM(MlirMoEActivationGeluTanh, Activation::gelu_tanh);
MOE_CHECK_ENUM(MlirMoEActivationRelu, Activation::relu);
MOE_CHECK_ENUM(MlirMoEActivationSilu, Activation::silu);
MOE_CHECK_ENUM(MlirMoEActivationSwiglu, Activation::swiglu);
MOE_CHECK_ENUM(MlirMoEActivationGeglu, Activation::geglu);
MOE_CHECK_ENUM(MlirMoEMoesartAdjustSmallRandom, MoesartAdjust::small_random);
MOE_CHECK_ENUM(MlirMoEMoesartAdjustZero, MoesartAdjust::zero);
MOE_CHECK_ENUM(MlirMoEMoesartAdjustLarge, MoesartAdjust::large);
#undef MOE_CHECK_ENUM

/// An error emitter for attribute construction from C (no source location).
static auto unknownLocError(MLIRContext *ctx) {
  return [ctx]() { return emitError(UnknownLoc::get(ctx)); };
}

//===----------------------------------------------------------------------===//
// Routing attributes
//===----------------------------------------------------------------------===//

bool mlirAttributeIsAMoERouting(MlirAttribute attr) {
  return llvm::isa<RoutingAttrInterface>(unwrap(attr));
}

bool mlirAttributeIsAMoEDenseRouting(MlirAttribute attr) {
  return llvm::isa<DenseRoutingAttr>(unwrap(attr));
}

MlirAttribute mlirMoEDenseRoutingAttrGet(MlirContext ctx) {
  return wrap(DenseRoutingAttr::get(unwrap(ctx)));
}

MlirTypeID mlirMoEDenseRoutingAttrGetTypeID(void) {
  return wrap(DenseRoutingAttr::getTypeID());
}

bool mlirAttributeIsAMoETopKRouting(MlirAttribute attr) {
  return llvm::isa<TopKRoutingAttr>(unwrap(attr));
}

MlirAttribute mlirMoETopKRoutingAttrGet(MlirContext ctx, int64_t k) {
  MLIRContext *context = unwrap(ctx);
  return wrap(TopKRoutingAttr::getClassicChecked(unknownLocError(context), context, k));
}

int64_t mlirMoETopKRoutingAttrGetK(MlirAttribute attr) {
  return llvm::cast<TopKRoutingAttr>(unwrap(attr)).getK();
}

MlirTypeID mlirMoETopKRoutingAttrGetTypeID(void) {
  return wrap(TopKRoutingAttr::getTypeID());
}

bool mlirAttributeIsAMoEMoesartRouting(MlirAttribute attr) {
  return llvm::isa<MoesartRoutingAttr>(unwrap(attr));
}

MlirAttribute mlirMoEMoesartRoutingAttrGet(MlirContext ctx, int64_t k,
                                           MlirMoEMoesartAdjust adjust,
                                           double trimmedLasso) {
  MLIRContext *context = unwrap(ctx);
  std::optional<MoesartAdjust> cxxAdjust =
      symbolizeMoesartAdjust(static_cast<uint32_t>(adjust));
  if (!cxxAdjust) {
    emitError(UnknownLoc::get(context))
        << "#moe.moesart: unknown adjust value " << static_cast<int>(adjust);
    return MlirAttribute{nullptr};
  }
  return wrap(MoesartRoutingAttr::getChecked(unknownLocError(context), context,
                                             k, *cxxAdjust,
                                             llvm::APFloat(trimmedLasso)));
}

int64_t mlirMoEMoesartRoutingAttrGetK(MlirAttribute attr) {
  return llvm::cast<MoesartRoutingAttr>(unwrap(attr)).getK();
}

MlirMoEMoesartAdjust mlirMoEMoesartRoutingAttrGetAdjust(MlirAttribute attr) {
  return static_cast<MlirMoEMoesartAdjust>(
      llvm::cast<MoesartRoutingAttr>(unwrap(attr)).getAdjust());
}

double mlirMoEMoesartRoutingAttrGetTrimmedLasso(MlirAttribute attr) {
  return llvm::cast<MoesartRoutingAttr>(unwrap(attr))
      .getTrimmedLasso()
      .convertToDouble();
}

MlirTypeID mlirMoEMoesartRoutingAttrGetTypeID(void) {
  return wrap(MoesartRoutingAttr::getTypeID());
}

//===----------------------------------------------------------------------===//
// Activation attribute
//===----------------------------------------------------------------------===//

bool mlirAttributeIsAMoEActivation(MlirAttribute attr) {
  return llvm::isa<ActivationAttr>(unwrap(attr));
}

MlirAttribute mlirMoEActivationAttrGet(MlirContext ctx,
                                       MlirMoEActivation kind) {
  MLIRContext *context = unwrap(ctx);
  std::optional<Activation> cxxKind =
      symbolizeActivation(static_cast<uint32_t>(kind));
  if (!cxxKind) {
    emitError(UnknownLoc::get(context))
        << "#moe.activation: unknown activation value "
        << static_cast<int>(kind);
    return MlirAttribute{nullptr};
  }
  return wrap(ActivationAttr::get(context, *cxxKind));
}

MlirMoEActivation mlirMoEActivationAttrGetValue(MlirAttribute attr) {
  return static_cast<MlirMoEActivation>(
      llvm::cast<ActivationAttr>(unwrap(attr)).getValue());
}

bool mlirMoEActivationAttrIsGated(MlirAttribute attr) {
  return llvm::cast<ActivationAttr>(unwrap(attr)).isGated();
}

MlirTypeID mlirMoEActivationAttrGetTypeID(void) {
  return wrap(ActivationAttr::getTypeID());
}
