/*===-- moe-mlir-c/MoE.h - C API of the moe dialect -------------*- C -*-===*\
|*                                                                            *|
|* The C API of moe-mlir, in the style of MLIR's own C API (mlir-c/): the     *|
|* dialect handle and constructors and accessors of the routing and          *|
|* activation attributes: the dialect alone. The passes are registered on    *|
|* request through moe-mlir-c/MoEPasses.h. Installed as                     *|
|* <prefix>/include/moe-mlir-c/MoE.h; link the CMake target                 *|
|* `MoEMLIR::MoECAPI` (libMoEMLIRCAPI.so).                                   *|
|*                                                                            *|
|* libMoEMLIRCAPI.so also exports MLIR's upstream C API (mlir-c/IR.h,        *|
|* mlir-c/Pass.h, mlir-c/Dialect/Func.h, mlir-c/RegisterEverything.h,        *|
|* mlir-c/Transforms.h), built over the same libMLIR.so: Debian ships those  *|
|* only as static archives, so the library carries their thin C wrappers.    *|
|*                                                                            *|
|* Attributes are checked on construction: a constructor given invalid       *|
|* parameters (k < 1, a negative or non-finite trimmed-lasso coefficient, an *|
|* unknown enum value) emits an error diagnostic on the context and returns  *|
|* a null attribute (test with mlirAttributeIsNull). Accessors require an    *|
|* attribute of their kind (check with the matching mlirAttributeIsAMoE...). *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef MOE_MLIR_C_MOE_H
#define MOE_MLIR_C_MOE_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The dialect handle: mlirGetDialectHandle__moe__(). Insert it into a
 * registry with mlirDialectHandleInsertDialect, or load it into a context
 * with mlirDialectHandleLoadDialect. */
MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(MoE, moe);

/*===----------------------------------------------------------------------===*
 * Enums (values equal to the dialect's I32 enum cases)
 *===----------------------------------------------------------------------===*/

/* The expert activation of #moe.activation<...>. */
enum MlirMoEActivation {
  MlirMoEActivationGelu = 0,
  MlirMoEActivationGeluTanh = 1,
  MlirMoEActivationRelu = 2,
  MlirMoEActivationSilu = 3,
  MlirMoEActivationSwiglu = 4,
  MlirMoEActivationGeglu = 5
};
typedef enum MlirMoEActivation MlirMoEActivation;

/* The training-mode weight adjustment of #moe.moesart<...>. */
enum MlirMoEMoesartAdjust {
  MlirMoEMoesartAdjustSmallRandom = 0,
  MlirMoEMoesartAdjustZero = 1,
  MlirMoEMoesartAdjustLarge = 2
};
typedef enum MlirMoEMoesartAdjust MlirMoEMoesartAdjust;

/*===----------------------------------------------------------------------===*
 * Routing attributes
 *===----------------------------------------------------------------------===*/

/* Whether `attr` is any routing policy (implements RoutingAttrInterface):
 * #moe.dense, #moe.top_k<...> or #moe.moesart<...>. */
MLIR_CAPI_EXPORTED bool mlirAttributeIsAMoERouting(MlirAttribute attr);

/* #moe.dense */
MLIR_CAPI_EXPORTED bool mlirAttributeIsAMoEDenseRouting(MlirAttribute attr);
MLIR_CAPI_EXPORTED MlirAttribute mlirMoEDenseRoutingAttrGet(MlirContext ctx);
MLIR_CAPI_EXPORTED MlirTypeID mlirMoEDenseRoutingAttrGetTypeID(void);

/* #moe.top_k<k = K> (K >= 1) */
MLIR_CAPI_EXPORTED bool mlirAttributeIsAMoETopKRouting(MlirAttribute attr);
MLIR_CAPI_EXPORTED MlirAttribute mlirMoETopKRoutingAttrGet(MlirContext ctx,
                                                           int64_t k);
MLIR_CAPI_EXPORTED int64_t mlirMoETopKRoutingAttrGetK(MlirAttribute attr);
MLIR_CAPI_EXPORTED MlirTypeID mlirMoETopKRoutingAttrGetTypeID(void);

/* #moe.moesart<k = K, adjust = A, trimmed_lasso = L> (K >= 1, L finite and
 * >= 0). The dialect's defaults are adjust = small_random, L = 1.0e-3. */
MLIR_CAPI_EXPORTED bool mlirAttributeIsAMoEMoesartRouting(MlirAttribute attr);
MLIR_CAPI_EXPORTED MlirAttribute
mlirMoEMoesartRoutingAttrGet(MlirContext ctx, int64_t k,
                             MlirMoEMoesartAdjust adjust,
                             double trimmedLasso);
MLIR_CAPI_EXPORTED int64_t mlirMoEMoesartRoutingAttrGetK(MlirAttribute attr);
MLIR_CAPI_EXPORTED MlirMoEMoesartAdjust
mlirMoEMoesartRoutingAttrGetAdjust(MlirAttribute attr);
MLIR_CAPI_EXPORTED double
mlirMoEMoesartRoutingAttrGetTrimmedLasso(MlirAttribute attr);
MLIR_CAPI_EXPORTED MlirTypeID mlirMoEMoesartRoutingAttrGetTypeID(void);

/*===----------------------------------------------------------------------===*
 * Activation attribute
 *===----------------------------------------------------------------------===*/

/* #moe.activation<kind> */
MLIR_CAPI_EXPORTED bool mlirAttributeIsAMoEActivation(MlirAttribute attr);
MLIR_CAPI_EXPORTED MlirAttribute
mlirMoEActivationAttrGet(MlirContext ctx, MlirMoEActivation kind);
MLIR_CAPI_EXPORTED MlirMoEActivation
mlirMoEActivationAttrGetValue(MlirAttribute attr);
/* Whether the activation is gated (swiglu, geglu: W1 is [E, D, 2H]). */
MLIR_CAPI_EXPORTED bool mlirMoEActivationAttrIsGated(MlirAttribute attr);
MLIR_CAPI_EXPORTED MlirTypeID mlirMoEActivationAttrGetTypeID(void);

#ifdef __cplusplus
}
#endif

#endif /* MOE_MLIR_C_MOE_H */
