/*===- moe-capi-test.c - the moe C API, driven from C -----------*- C -*-===*\
 *
 * Uses only the C API (moe-mlir-c/MoE.h, moe-mlir-c/MoEPasses.h and
 * MLIR's mlir-c/ headers, all in libMoEMLIRCAPI.so): creates a context,
 * registers the moe dialect (alone: no pass is registered until asked for,
 * group by group, and moe-opt's test passes never are), builds
 * and inspects every routing and activation attribute, parses a spec
 * example, runs moe-dense-to-moesart through the C pass manager, prints the
 * module, then lowers it with moe-cpu-pipeline. Built here as the ctest/lit
 * tool `moe-capi-test`, and again by test/consumer against the installed
 * package. Exits non-zero on the first failed expectation.
 *
 * RUN: moe-capi-test %examples/dense.mlir 2>&1 | FileCheck %s
 *
 * A missing file is an error, not a crash.
 * RUN: not moe-capi-test %t.does-not-exist.mlir 2>&1 | FileCheck %s --check-prefix=NOFILE
 * NOFILE: moe-capi-test: cannot parse
 *
\*===----------------------------------------------------------------------===*/

#include "moe-mlir-c/MoE.h"
#include "moe-mlir-c/MoEPasses.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/Diagnostics.h"
#include "mlir-c/Dialect/Func.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/RegisterEverything.h"
#include "mlir-c/Support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define EXPECT(cond)                                                           \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "moe-capi-test:%d: expectation failed: %s\n", __LINE__,  \
              #cond);                                                          \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

static void printToStdout(MlirStringRef str, void *userData) {
  (void)userData;
  fwrite(str.data, 1, str.length, stdout);
}

static void printAttr(const char *label, MlirAttribute attr) {
  printf("%s: ", label);
  if (mlirAttributeIsNull(attr))
    printf("<null>");
  else
    mlirAttributePrint(attr, printToStdout, NULL);
  printf("\n");
  fflush(stdout);
}

static MlirLogicalResult printDiagnostic(MlirDiagnostic diagnostic,
                                         void *userData) {
  (void)userData;
  printf("diagnostic: ");
  mlirDiagnosticPrint(diagnostic, printToStdout, NULL);
  printf("\n");
  fflush(stdout);
  return mlirLogicalResultSuccess();
}

static void printErrorToStderr(MlirStringRef str, void *userData) {
  (void)userData;
  fwrite(str.data, 1, str.length, stderr);
}

static void ignoreText(MlirStringRef str, void *userData) {
  (void)str;
  (void)userData;
}

/* Whether `pipeline` parses (names registered passes only); prints it. */
static int parses(MlirContext ctx, const char *pipeline) {
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  int ok = mlirLogicalResultIsSuccess(mlirParsePassPipeline(
      mlirPassManagerGetAsOpPassManager(pm),
      mlirStringRefCreateFromCString(pipeline), ignoreText, NULL));
  mlirPassManagerDestroy(pm);
  printf("%s: %s\n", pipeline, ok ? "registered" : "unknown");
  return ok;
}

/* The dialect handle registers the dialect alone; the passes come on
 * request: the generated group functions, then everything with the
 * pipelines. The test passes of moe-opt are never part of the C API. */
static void testPassRegistration(MlirContext ctx) {
  printf("--- passes on request\n");
  EXPECT(!parses(ctx, "builtin.module(moe-decompose)"));
  mlirRegisterMoEPasses();
  EXPECT(parses(ctx, "builtin.module(moe-decompose)"));
  EXPECT(!parses(ctx, "builtin.module(convert-moe-to-cpu)"));
  mlirRegisterMoECpuPasses();
  EXPECT(parses(ctx, "builtin.module(convert-moe-to-cpu)"));
  EXPECT(!parses(ctx, "builtin.module(convert-moe-to-gpu)"));
  mlirRegisterMoEGpuPasses();
  EXPECT(parses(ctx, "builtin.module(convert-moe-to-gpu)"));
  EXPECT(parses(ctx, "builtin.module(gpu.module(moe-gpu-kernel-math))"));
  mlirRegisterMoELoweringPasses(); /* deprecated: both groups again */
  EXPECT(!parses(ctx, "builtin.module(moe-cpu-pipeline)"));
  mlirMoERegisterAllPasses();
  mlirMoERegisterAllPasses(); /* idempotent */
  EXPECT(parses(ctx, "builtin.module(moe-cpu-pipeline)"));
  EXPECT(parses(ctx, "builtin.module(moe-nvptx-pipeline)"));
  EXPECT(parses(ctx, "builtin.module(convert-moe-spmd-to-mpi)"));
  EXPECT(parses(ctx, "builtin.module(moe-gpu-configure)"));
  EXPECT(parses(ctx, "builtin.module(moe-gpu-launch-pipeline)"));
  EXPECT(!parses(ctx, "builtin.module(moe-test-emulate-gpu)"));
  EXPECT(!parses(ctx, "builtin.module(moe-test-build-mma-kernels)"));
  /* A pass from its generated C constructor, owned by a pass manager. */
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirPass decompose = mlirCreateMoEMoEDecompose();
  EXPECT(decompose.ptr != NULL);
  mlirPassManagerAddOwnedPass(pm, decompose);
  /* The CPU lowering by its name and by its deprecated former names. */
  MlirPass toCPU = mlirCreateMoECpuConvertMoEToCPU();
  MlirPass formerGroup = mlirCreateMoELoweringConvertMoEToCPU();
  MlirPass formerName = mlirCreateMoELoweringConvertMoEToLinalg();
  EXPECT(toCPU.ptr != NULL && formerName.ptr != NULL && formerGroup.ptr != NULL &&
         toCPU.ptr != formerName.ptr && toCPU.ptr != formerGroup.ptr);
  mlirPassManagerAddOwnedPass(pm, toCPU);
  mlirPassManagerAddOwnedPass(pm, formerGroup);
  mlirPassManagerAddOwnedPass(pm, formerName);
  mlirPassManagerDestroy(pm);
}

/* The attributes: every constructor, predicate and accessor. */
static void testAttributes(MlirContext ctx) {
  printf("--- attributes\n");

  MlirAttribute dense = mlirMoEDenseRoutingAttrGet(ctx);
  printAttr("dense", dense);
  EXPECT(mlirAttributeIsAMoEDenseRouting(dense));
  EXPECT(mlirAttributeIsAMoERouting(dense));
  EXPECT(!mlirAttributeIsAMoETopKRouting(dense));
  EXPECT(!mlirAttributeIsAMoEMoesartRouting(dense));
  EXPECT(!mlirAttributeIsAMoEActivation(dense));
  EXPECT(mlirTypeIDEqual(mlirAttributeGetTypeID(dense),
                         mlirMoEDenseRoutingAttrGetTypeID()));

  MlirAttribute topk = mlirMoETopKRoutingAttrGet(ctx, 3);
  printAttr("top_k", topk);
  EXPECT(mlirAttributeIsAMoETopKRouting(topk));
  EXPECT(mlirAttributeIsAMoERouting(topk));
  EXPECT(!mlirAttributeIsAMoEDenseRouting(topk));
  EXPECT(mlirTypeIDEqual(mlirAttributeGetTypeID(topk),
                         mlirMoETopKRoutingAttrGetTypeID()));
  printf("top_k k: %lld\n", (long long)mlirMoETopKRoutingAttrGetK(topk));
  EXPECT(mlirMoETopKRoutingAttrGetK(topk) == 3);

  MlirAttribute moesart = mlirMoEMoesartRoutingAttrGet(
      ctx, 4, MlirMoEMoesartAdjustLarge, 0.01);
  printAttr("moesart", moesart);
  EXPECT(mlirAttributeIsAMoEMoesartRouting(moesart));
  EXPECT(mlirAttributeIsAMoERouting(moesart));
  EXPECT(!mlirAttributeIsAMoETopKRouting(moesart));
  EXPECT(mlirTypeIDEqual(mlirAttributeGetTypeID(moesart),
                         mlirMoEMoesartRoutingAttrGetTypeID()));
  printf("moesart k: %lld adjust: %d trimmed_lasso: %g\n",
         (long long)mlirMoEMoesartRoutingAttrGetK(moesart),
         (int)mlirMoEMoesartRoutingAttrGetAdjust(moesart),
         mlirMoEMoesartRoutingAttrGetTrimmedLasso(moesart));
  EXPECT(mlirMoEMoesartRoutingAttrGetK(moesart) == 4);
  EXPECT(mlirMoEMoesartRoutingAttrGetAdjust(moesart) ==
         MlirMoEMoesartAdjustLarge);
  EXPECT(mlirMoEMoesartRoutingAttrGetTrimmedLasso(moesart) == 0.01);

  /* The constructed attribute is the one the parser makes from the text. */
  MlirAttribute parsed = mlirAttributeParseGet(
      ctx, mlirStringRefCreateFromCString(
               "#moe.moesart<k = 4, adjust = large, trimmed_lasso = 1.0e-2>"));
  EXPECT(mlirAttributeEqual(parsed, moesart));
  MlirAttribute defaults = mlirAttributeParseGet(
      ctx, mlirStringRefCreateFromCString("#moe.moesart<k = 2>"));
  EXPECT(mlirAttributeEqual(
      defaults, mlirMoEMoesartRoutingAttrGet(
                    ctx, 2, MlirMoEMoesartAdjustSmallRandom, 1.0e-3)));
  printf("moesart<k = 2> adjust: %d trimmed_lasso: %g\n",
         (int)mlirMoEMoesartRoutingAttrGetAdjust(defaults),
         mlirMoEMoesartRoutingAttrGetTrimmedLasso(defaults));
  MlirAttribute zero =
      mlirMoEMoesartRoutingAttrGet(ctx, 2, MlirMoEMoesartAdjustZero, 0.0);
  printAttr("moesart zero", zero);
  EXPECT(mlirMoEMoesartRoutingAttrGetAdjust(zero) == MlirMoEMoesartAdjustZero);
  EXPECT(mlirMoEMoesartRoutingAttrGetTrimmedLasso(zero) == 0.0);
  EXPECT(mlirMoEMoesartRoutingAttrGetAdjust(defaults) ==
         MlirMoEMoesartAdjustSmallRandom);
  EXPECT(mlirMoEMoesartRoutingAttrGetTrimmedLasso(defaults) == 1.0e-3);

  static const MlirMoEActivation kinds[] = {
      MlirMoEActivationGelu,   MlirMoEActivationGeluTanh,
      MlirMoEActivationRelu,   MlirMoEActivationSilu,
      MlirMoEActivationSwiglu, MlirMoEActivationGeglu};
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); ++i) {
    MlirAttribute act = mlirMoEActivationAttrGet(ctx, kinds[i]);
    EXPECT(mlirAttributeIsAMoEActivation(act));
    EXPECT(!mlirAttributeIsAMoERouting(act));
    EXPECT(mlirTypeIDEqual(mlirAttributeGetTypeID(act),
                           mlirMoEActivationAttrGetTypeID()));
    EXPECT(mlirMoEActivationAttrGetValue(act) == kinds[i]);
    EXPECT(mlirMoEActivationAttrIsGated(act) ==
           (kinds[i] == MlirMoEActivationSwiglu ||
            kinds[i] == MlirMoEActivationGeglu));
    printf("activation %d gated %d: ", (int)mlirMoEActivationAttrGetValue(act),
           (int)mlirMoEActivationAttrIsGated(act));
    mlirAttributePrint(act, printToStdout, NULL);
    printf("\n");
  }

  /* Invalid parameters: an error diagnostic and a null attribute. */
  MlirDiagnosticHandlerID handler =
      mlirContextAttachDiagnosticHandler(ctx, printDiagnostic, NULL, NULL);
  EXPECT(mlirAttributeIsNull(mlirMoETopKRoutingAttrGet(ctx, -1)));
  printAttr("top_k k=0", mlirMoETopKRoutingAttrGet(ctx, 0));
  printAttr("moesart k=0", mlirMoEMoesartRoutingAttrGet(
                               ctx, 0, MlirMoEMoesartAdjustZero, 0.0));
  printAttr("moesart lambda<0", mlirMoEMoesartRoutingAttrGet(
                                    ctx, 2, MlirMoEMoesartAdjustZero, -1.0));
  printAttr("moesart adjust=7", mlirMoEMoesartRoutingAttrGet(
                                    ctx, 2, (MlirMoEMoesartAdjust)7, 0.0));
  printAttr("activation 42",
            mlirMoEActivationAttrGet(ctx, (MlirMoEActivation)42));
  mlirContextDetachDiagnosticHandler(ctx, handler);
  /* Not a moe attribute. */
  EXPECT(!mlirAttributeIsAMoERouting(mlirUnitAttrGet(ctx)));
  EXPECT(!mlirAttributeIsAMoEActivation(mlirUnitAttrGet(ctx)));
}

struct LayerCounts {
  int layers;
  int moeOps;
  int llvmFuncs;
  int moesartK2Zero; /* layers with #moe.moesart<k = 2, adjust = zero, 0.01> */
};

static MlirWalkResult inspectOp(MlirOperation op, void *userData) {
  struct LayerCounts *counts = (struct LayerCounts *)userData;
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  if (name.length >= 4 && strncmp(name.data, "moe.", 4) == 0)
    ++counts->moeOps;
  if (name.length == 9 && strncmp(name.data, "llvm.func", 9) == 0)
    ++counts->llvmFuncs;
  if (name.length == 9 && strncmp(name.data, "moe.layer", 9) == 0) {
    ++counts->layers;
    MlirAttribute routing = mlirOperationGetAttributeByName(
        op, mlirStringRefCreateFromCString("routing"));
    MlirAttribute activation = mlirOperationGetAttributeByName(
        op, mlirStringRefCreateFromCString("activation"));
    printAttr("layer routing", routing);
    if (mlirAttributeIsAMoEMoesartRouting(routing) &&
        mlirMoEMoesartRoutingAttrGetK(routing) == 2 &&
        mlirMoEMoesartRoutingAttrGetAdjust(routing) ==
            MlirMoEMoesartAdjustZero &&
        mlirMoEMoesartRoutingAttrGetTrimmedLasso(routing) == 0.01)
      ++counts->moesartK2Zero;
    if (mlirAttributeIsAMoEMoesartRouting(routing))
      printf("layer moesart k: %lld adjust: %d trimmed_lasso: %g\n",
             (long long)mlirMoEMoesartRoutingAttrGetK(routing),
             (int)mlirMoEMoesartRoutingAttrGetAdjust(routing),
             mlirMoEMoesartRoutingAttrGetTrimmedLasso(routing));
    if (mlirAttributeIsAMoEActivation(activation))
      printf("layer activation: %d\n",
             (int)mlirMoEActivationAttrGetValue(activation));
  }
  return MlirWalkResultAdvance;
}

static int runPipeline(MlirContext ctx, MlirModule module,
                       const char *pipeline) {
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  MlirLogicalResult parsed = mlirParsePassPipeline(
      opm, mlirStringRefCreateFromCString(pipeline), printErrorToStderr, NULL);
  int ok = mlirLogicalResultIsSuccess(parsed);
  if (!ok)
    fprintf(stderr, "\nmoe-capi-test: cannot parse pipeline %s\n", pipeline);
  if (ok) {
    MlirLogicalResult ran =
        mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module));
    ok = mlirLogicalResultIsSuccess(ran);
    if (!ok)
      fprintf(stderr, "moe-capi-test: %s failed\n", pipeline);
  }
  mlirPassManagerDestroy(pm);
  return ok;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: moe-capi-test FILE.mlir\n");
    return 2;
  }
  /* One stream order for stdout and stderr (both go to FileCheck). */
  setvbuf(stdout, NULL, _IONBF, 0);
  MlirStringRef file = mlirStringRefCreateFromCString(argv[1]);

  /* Phase 1: a context with the moe and func dialects only. */
  MlirDialectHandle moe = mlirGetDialectHandle__moe__();
  MlirStringRef ns = mlirDialectHandleGetNamespace(moe);
  printf("dialect namespace: %.*s\n", (int)ns.length, ns.data);
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirDialectHandleInsertDialect(moe, registry);
  mlirDialectHandleInsertDialect(mlirGetDialectHandle__func__(), registry);
  MlirContext ctx = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);
  /* Attributes need the dialect loaded (parsing loads it on demand). */
  MlirDialect loaded = mlirDialectHandleLoadDialect(moe, ctx);
  EXPECT(!mlirDialectIsNull(loaded));

  testPassRegistration(ctx);
  testAttributes(ctx);

  MlirModule module = mlirModuleCreateParseFromFile(ctx, file);
  if (mlirModuleIsNull(module)) {
    fprintf(stderr, "moe-capi-test: cannot parse %s\n", argv[1]);
    mlirContextDestroy(ctx);
    return 1;
  }
  printf("--- parsed\n");
  struct LayerCounts before = {0, 0, 0, 0};
  mlirOperationWalk(mlirModuleGetOperation(module), inspectOp, &before,
                    MlirWalkPreOrder);

  printf("--- moe-dense-to-moesart\n");
  EXPECT(runPipeline(ctx, module,
                     "builtin.module(moe-dense-to-moesart{k=2 adjust=zero "
                     "trimmed-lasso=0.01})"));
  mlirOperationPrint(mlirModuleGetOperation(module), printToStdout, NULL);
  printf("\n");
  struct LayerCounts after = {0, 0, 0, 0};
  mlirOperationWalk(mlirModuleGetOperation(module), inspectOp, &after,
                    MlirWalkPreOrder);
  EXPECT(after.layers == before.layers && after.layers > 0);
  EXPECT(before.moesartK2Zero == 0 && after.moesartK2Zero == after.layers);
  /* An unknown pass is an error through the C API too. */
  {
    MlirPassManager pm = mlirPassManagerCreate(ctx);
    EXPECT(!mlirLogicalResultIsSuccess(mlirParsePassPipeline(
        mlirPassManagerGetAsOpPassManager(pm),
        mlirStringRefCreateFromCString("builtin.module(moe-no-such-pass)"),
        printErrorToStderr, NULL)));
    fprintf(stderr, "\n");
    mlirPassManagerDestroy(pm);
  }
  mlirModuleDestroy(module);
  mlirContextDestroy(ctx);

  /* Phase 2: every upstream dialect and pass too, and the CPU pipeline. */
  printf("--- moe-cpu-pipeline\n");
  registry = mlirDialectRegistryCreate();
  mlirRegisterAllDialects(registry);
  mlirDialectHandleInsertDialect(moe, registry);
  ctx = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);
  mlirRegisterAllPasses();
  module = mlirModuleCreateParseFromFile(ctx, file);
  EXPECT(!mlirModuleIsNull(module));
  if (!mlirModuleIsNull(module)) {
    EXPECT(runPipeline(ctx, module, "builtin.module(moe-cpu-pipeline)"));
    struct LayerCounts lowered = {0, 0, 0, 0};
    mlirOperationWalk(mlirModuleGetOperation(module), inspectOp, &lowered,
                      MlirWalkPreOrder);
    printf("lowered: %d moe op(s), %d llvm.func\n", lowered.moeOps,
           lowered.llvmFuncs);
    EXPECT(lowered.moeOps == 0 && lowered.llvmFuncs > 0);
    mlirModuleDestroy(module);
  }
  mlirContextDestroy(ctx);

  printf("%s\n", failures ? "FAILED" : "moe-capi-test: OK");
  return failures ? 1 : 0;
}

/* The expected output for test/examples/dense.mlir.
 *
 * CHECK:      dialect namespace: moe
 * CHECK:      --- passes on request
 * CHECK-NEXT: builtin.module(moe-decompose): unknown
 * CHECK-NEXT: builtin.module(moe-decompose): registered
 * CHECK-NEXT: builtin.module(convert-moe-to-cpu): unknown
 * CHECK-NEXT: builtin.module(convert-moe-to-cpu): registered
 * CHECK-NEXT: builtin.module(convert-moe-to-gpu): unknown
 * CHECK-NEXT: builtin.module(convert-moe-to-gpu): registered
 * CHECK-NEXT: builtin.module(gpu.module(moe-gpu-kernel-math)): registered
 * CHECK-NEXT: builtin.module(moe-cpu-pipeline): unknown
 * CHECK-NEXT: builtin.module(moe-cpu-pipeline): registered
 * CHECK-NEXT: builtin.module(moe-nvptx-pipeline): registered
 * CHECK-NEXT: builtin.module(convert-moe-spmd-to-mpi): registered
 * CHECK-NEXT: builtin.module(moe-gpu-configure): registered
 * CHECK-NEXT: builtin.module(moe-gpu-launch-pipeline): registered
 * CHECK-NEXT: builtin.module(moe-test-emulate-gpu): unknown
 * CHECK-NEXT: builtin.module(moe-test-build-mma-kernels): unknown
 * CHECK:      --- attributes
 * CHECK-NEXT: dense: #moe.dense
 * CHECK-NEXT: top_k: #moe.top_k<k = 3>
 * CHECK-NEXT: top_k k: 3
 * CHECK-NEXT: moesart: #moe.moesart<k = 4, adjust = large, trimmed_lasso = 1.000000e-02>
 * CHECK-NEXT: moesart k: 4 adjust: 2 trimmed_lasso: 0.01
 * CHECK-NEXT: moesart<k = 2> adjust: 0 trimmed_lasso: 0.001
 * CHECK-NEXT: moesart zero: #moe.moesart<k = 2, adjust = zero, trimmed_lasso = 0.000000e+00>
 * CHECK-NEXT: activation 0 gated 0: #moe.activation<gelu>
 * CHECK-NEXT: activation 1 gated 0: #moe.activation<gelu_tanh>
 * CHECK-NEXT: activation 2 gated 0: #moe.activation<relu>
 * CHECK-NEXT: activation 3 gated 0: #moe.activation<silu>
 * CHECK-NEXT: activation 4 gated 1: #moe.activation<swiglu>
 * CHECK-NEXT: activation 5 gated 1: #moe.activation<geglu>
 * CHECK-NEXT: diagnostic: #moe.top_k needs k >= 1, got k = -1
 * CHECK-NEXT: diagnostic: #moe.top_k needs k >= 1, got k = 0
 * CHECK-NEXT: top_k k=0: <null>
 * CHECK-NEXT: diagnostic: #moe.moesart needs k >= 1, got k = 0
 * CHECK-NEXT: moesart k=0: <null>
 * CHECK-NEXT: diagnostic: #moe.moesart needs a finite trimmed_lasso >= 0, got -1.000000e+00
 * CHECK-NEXT: moesart lambda<0: <null>
 * CHECK-NEXT: diagnostic: #moe.moesart: unknown adjust value 7
 * CHECK-NEXT: moesart adjust=7: <null>
 * CHECK-NEXT: diagnostic: #moe.activation: unknown activation value 42
 * CHECK-NEXT: activation 42: <null>
 *
 * CHECK:      --- parsed
 * CHECK-NEXT: layer routing: #moe.dense
 * CHECK-NEXT: layer activation: 0
 *
 * CHECK:      --- moe-dense-to-moesart
 * CHECK:      func.func @forward(
 * CHECK:        moe.layer
 * CHECK-SAME:     routing = #moe.moesart<k = 2, adjust = zero, trimmed_lasso = 1.000000e-02>
 * CHECK:      layer routing: #moe.moesart<k = 2, adjust = zero, trimmed_lasso = 1.000000e-02>
 * CHECK-NEXT: layer moesart k: 2 adjust: 1 trimmed_lasso: 0.01
 * CHECK-NEXT: layer activation: 0
 * CHECK:      'moe-no-such-pass' does not refer to a registered pass or pass pipeline
 *
 * CHECK:      --- moe-cpu-pipeline
 * CHECK-NEXT: lowered: 0 moe op(s), {{[1-9][0-9]*}} llvm.func
 * CHECK-NEXT: moe-capi-test: OK
 */
