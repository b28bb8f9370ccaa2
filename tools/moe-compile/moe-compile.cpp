//===- moe-compile.cpp - ahead-of-time shared libraries of moe modules ----===//
//
// moe-compile FILE.mlir -o LIB.so --target=cpu|cuda [--chip=sm_80|sm_90a]
//             [--entry=NAME]... [--vjp]
//
// Lowers the public functions of a moe module with --moe-cpu-pipeline
// (target cpu) or --moe-nvptx-pipeline with device-abi and a fatbin of the
// cubin (ptxas) and the PTX (target cuda), adds one C entry point per
// function (the ABI of docs/aot.md: moe_<f>, moe_<f>_signature,
// moe_<f>_result_shapes), emits an
// object file for the host with LLVM and links LIB.so with ld.lld against
// libc/libm, the static support archives (runtime/aot) and, for cuda,
// libMoECudaRuntime.so (RUNPATH $ORIGIN). LIB.so needs no LLVM or MLIR.
//
//===----------------------------------------------------------------------===//

#include "tools/diagnostics/OneLineDiagnostic.h"
#include "tools/diagnostics/OptLevel.h"
#include "dialect/MoEDialect.h"
#include "dialect/MoEOps.h"
#include "lowering/cpu/Passes.h"
#include "lowering/gpu/Passes.h"
#include "lowering/Pipelines.h"
#include "lowering/InitAllMoE.h"
#include "passes/Passes.h"

#include "mlir/Support/DebugStringHelper.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SHA256.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/TargetParser/Triple.h"

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

using namespace mlir;

namespace {

llvm::cl::OptionCategory category("moe-compile options");

llvm::cl::opt<std::string> inputFile(llvm::cl::Positional, llvm::cl::desc("FILE.mlir"),
                                     llvm::cl::cat(category));
llvm::cl::opt<std::string> outputFile("o", llvm::cl::desc("The shared library to write"),
                                      llvm::cl::value_desc("LIB.so"), llvm::cl::cat(category));
llvm::cl::opt<std::string> target("target",
                                  llvm::cl::desc("cpu (host code) or cuda (NVIDIA GPU kernels "
                                                 "and host code calling libMoECudaRuntime.so)"),
                                  llvm::cl::value_desc("cpu|cuda"), llvm::cl::cat(category));
llvm::cl::opt<std::string> chip("chip",
                                llvm::cl::desc("cuda: the GPU architecture of the cubin (sm_80, "
                                               "sm_90a, ...; default sm_80); the PTX in the "
                                               "fatbin serves newer GPUs"),
                                llvm::cl::init("sm_80"), llvm::cl::cat(category));
llvm::cl::list<std::string> entries("entry",
                                    llvm::cl::desc("A public function to export (repeatable; "
                                                   "default: every public function)"),
                                    llvm::cl::value_desc("NAME"), llvm::cl::cat(category));
llvm::cl::opt<bool> vjp("vjp",
                        llvm::cl::desc("Also export @f_vjp, the gradient (--moe-generate-vjp, "
                                       "docs/spec.md 9), of every exported @f; "
                                       "--entry=f_vjp alone exports just the gradient"),
                        llvm::cl::init(false), llvm::cl::cat(category));
llvm::cl::opt<std::string> mcpu("mcpu",
                                llvm::cl::desc("The host CPU the code is optimized for "
                                               "(default native: this machine's CPU and "
                                               "features; e.g. x86-64-v3 for a portable "
                                               "library)"),
                                llvm::cl::init("native"), llvm::cl::cat(category));
llvm::cl::opt<std::string> cudaPath("cuda-path",
                                    llvm::cl::desc("cuda: the CUDA toolkit (ptxas, "
                                                   "fatbinary); default $CUDA_ROOT, $CUDA_HOME, "
                                                   "$CUDA_PATH or /usr/local/cuda"),
                                    llvm::cl::value_desc("DIR"), llvm::cl::cat(category));
llvm::cl::opt<int64_t> decodeSplitK(
    "decode-split-k",
    llvm::cl::desc("cuda: split-K slices of a fused layer's 16-row (decode) tensor-core "
                   "GEMMs (0 = chosen from the shape, 1 = no split; docs/gpu.md)"),
    llvm::cl::init(0), llvm::cl::cat(category));
llvm::cl::opt<int64_t> bigTileRows(
    "big-tile-rows",
    llvm::cl::desc("cuda, sm_90a: layers with at least this many rows per expert on "
                   "average (T*k/E) use 128-row wgmma tiles; 0: never (default 128)"),
    llvm::cl::init(128), llvm::cl::value_desc("N"), llvm::cl::cat(category));
llvm::cl::opt<int64_t> wgmmaGroupsInFlight(
    "wgmma-groups-in-flight",
    llvm::cl::desc("cuda, sm_90a: wgmma commit groups left in flight at the end of a "
                   "pipeline stage, 0 or 1 (default 1; 0: every stage's wgmmas retired "
                   "before the next loads; docs/gpu.md)"),
    llvm::cl::init(1), llvm::cl::value_desc("N"), llvm::cl::cat(category));
llvm::cl::opt<int64_t> mmaStages(
    "mma-stages",
    llvm::cl::desc("cuda: cp.async pipeline stages of the prefill tensor-core GEMMs, 2 to 8 "
                   "(0 = the defaults: 3 for mma.sync, 4 for wgmma; docs/gpu.md)"),
    llvm::cl::init(0), llvm::cl::value_desc("N"), llvm::cl::cat(category));
llvm::cl::opt<int> optLevel(
    "opt-level",
    llvm::cl::desc("LLVM optimization level of the host code, 0 to 3: the IR pipeline "
                   "(O0..O3) and the code generator (default 3, or $MOE_COMPILE_OPT_LEVEL "
                   "when set); lower levels compile faster and run slower, with the same "
                   "results bit for bit (the lowered code has no fast-math flags); code "
                   "with AMX tiles compiles at 1 when 0 is asked for (LLVM cannot compile "
                   "it at 0)"),
    llvm::cl::init(-1), llvm::cl::value_desc("N"), llvm::cl::cat(category));
llvm::cl::opt<bool> keepObject("keep-object",
                               llvm::cl::desc("Also keep the object file (LIB.so.o)"),
                               llvm::cl::init(false), llvm::cl::cat(category));

const char *const overview = R"(moe-compile: ahead-of-time shared libraries of moe modules

  moe-compile FILE.mlir -o LIB.so --target=cpu|cuda [--chip=sm_80|sm_90a] [--entry=NAME]...
              [--vjp]

--vjp adds @f_vjp (--moe-generate-vjp) for every exported @f and exports it
too; --entry=f_vjp where the file has only @f adds and exports that one
(both targets; cuda: the backward's kernels, docs/gpu.md).

For every exported public function @f, LIB.so exports
  int moe_f(void *const *args, void *const *results, const int64_t *dims, void *stream);
  const char *moe_f_signature(void);
  const char *moe_f_result_shapes(void);  /* e.g. "$0x16;8": dims[0] x 16, then 8 */
  const char *moe_last_error(void);
and const char *moe_source_sha256(void) (the SHA-256 of FILE.mlir's bytes)
(docs/aot.md). cpu: host buffers; cuda: device buffers and a CUstream, with
libMoECudaRuntime.so next to LIB.so (RUNPATH $ORIGIN) or on the loader path.
Every error is one line on stderr and exit code 1.
)";

int fail(const llvm::Twine &message) {
  llvm::errs() << "moe-compile: " << message << "\n";
  return 1;
}

bool errorPrinted = false;

/// The first MLIR error as one line "moe-compile: FILE:LINE:COL: message".
void installDiagnosticHandler(MLIRContext &context) {
  context.getDiagEngine().registerHandler([](Diagnostic &diag) {
    if (diag.getSeverity() != DiagnosticSeverity::Error || errorPrinted)
      return success();
    errorPrinted = true;
    llvm::errs() << "moe-compile: " << mlir::moe::tools::oneLineDiagnostic(diag) << "\n";
    return success();
  });
}

/// A size of one buffer dimension in the signature table: >= 0 static, -1
/// the next `dims` value (arguments), <= -2 dims[-2 - v] (results).
struct Buffer {
  RankedTensorType type;
  std::vector<int64_t> sizes;
  int64_t elementBytes = 0;
};

struct Entry {
  LocationAttr loc;
  std::string name;      // @name
  std::string signature; // the MLIR function type
  std::vector<Buffer> args, results;
  int64_t numDims = 0;
};

std::optional<int64_t> elementBytes(Type type) {
  if (auto f = dyn_cast<FloatType>(type))
    return f.getWidth() % 8 == 0 ? std::optional<int64_t>(f.getWidth() / 8) : std::nullopt;
  if (auto i = dyn_cast<IntegerType>(type)) {
    // i1 and i4 (int4 codes, docs/spec.md §2.1) occupy a byte each, as LLVM
    // lays out their memrefs.
    if (i.getWidth() == 1 || i.getWidth() == 4)
      return 1;
    return i.getWidth() % 8 == 0 ? std::optional<int64_t>(i.getWidth() / 8) : std::nullopt;
  }
  return std::nullopt;
}

/// Where dimension `d` of `value` (a tensor of `func`) comes from: an
/// argument's dimension (argument index, dimension), a static size, or
/// nothing known.
struct DimSource {
  int64_t staticSize = -1;
  int64_t arg = -1, dim = -1;
};

std::optional<DimSource> tieDim(func::FuncOp func, Value value, int64_t d, int depth = 0) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || depth > 64)
    return std::nullopt;
  if (!type.isDynamicDim(d))
    return DimSource{type.getDimSize(d), -1, -1};
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    if (arg.getOwner() != &func.getBody().front())
      return std::nullopt;
    return DimSource{-1, arg.getArgNumber(), d};
  }
  Operation *def = value.getDefiningOp();
  auto same = [&](Value from, int64_t dim) { return tieDim(func, from, dim, depth + 1); };
  if (auto cast = dyn_cast<tensor::CastOp>(def))
    return same(cast.getSource(), d);
  // moe ops: the token dimensions of a result are those of an operand.
  if (auto op = dyn_cast<moe::LayerOp>(def))
    return value == op.getOutput() ? same(op.getInput(), d) : std::nullopt;
  if (auto op = dyn_cast<moe::SoftLayerOp>(def))
    return same(op.getInput(), d);
  if (auto op = dyn_cast<moe::FusedExpertsOp>(def))
    return same(op.getInput(), d);
  if (auto op = dyn_cast<moe::FusedSoftExpertsOp>(def))
    return same(op.getInput(), d);
  if (auto op = dyn_cast<moe::SharedExpertOp>(def))
    return same(op.getInput(), d);
  if (auto op = dyn_cast<moe::CombineOp>(def))
    return d == 0 ? same(op.getWeights(), 0) : same(op.getExpertOutput(), 1);
  if (auto op = dyn_cast<moe::RouteOp>(def))
    return d == 0 ? same(op.getInput(), 0) : same(op.getRouterWeight(), 1);
  if (auto op = dyn_cast<moe::GateOp>(def))
    return d == 0 ? same(op.getLogits(), 0) : std::nullopt;
  if (auto op = dyn_cast<moe::SoftCombineOp>(def))
    return d < 2 ? same(op.getCombineWeights(), d) : same(op.getExpertOutput(), 1);
  if (auto op = dyn_cast<moe::DispatchOp>(def))
    return value == op.getPositions() ? same(op.getIndices(), d) : std::nullopt;
  if (auto op = dyn_cast<moe::SoftDispatchOp>(def)) // combine_weights: [G, M, E, S]
    return value == op.getCombineWeights() && d == 0 ? same(op.getInput(), 0) : std::nullopt;
  // The backward ops (--vjp): a gradient has its primal's shape.
  if (auto op = dyn_cast<moe::RouteGradOp>(def))
    return value == op.getInputGrad() ? same(op.getInput(), d) : std::nullopt;
  if (auto op = dyn_cast<moe::GateGradOp>(def))
    return same(op.getLogits(), d);
  if (auto op = dyn_cast<moe::DispatchGradOp>(def))
    return d == 0 ? same(op.getPositions(), 0) : same(op.getRowsGrad(), 1);
  if (auto op = dyn_cast<moe::ExpertFFNGradOp>(def))
    return value == op.getRowsGrad() ? same(op.getRows(), d) : std::nullopt;
  if (auto op = dyn_cast<moe::SharedExpertGradOp>(def))
    return value == op.getInputGrad() ? same(op.getInput(), d) : std::nullopt;
  if (auto op = dyn_cast<moe::CombineGradOp>(def))
    return value == op.getExpertOutputGrad() ? same(op.getExpertOutput(), d)
                                             : same(op.getWeights(), d);
  if (auto op = dyn_cast<moe::SoftDispatchGradOp>(def))
    return value == op.getInputGrad() ? same(op.getInput(), d) : std::nullopt;
  if (auto op = dyn_cast<moe::SoftCombineGradOp>(def))
    return value == op.getExpertOutputGrad() ? same(op.getExpertOutput(), d)
                                             : same(op.getCombineWeights(), d);
  // Element-wise ops on tensors (the casts and sums the gradient adds):
  // a result has the shape of its first operand.
  if (def->hasTrait<OpTrait::Elementwise>() && def->getNumOperands() > 0)
    return same(def->getOperand(0), d);
  return std::nullopt;
}

/// Records the C ABI of `func`; on failure prints the error.
bool recordEntry(func::FuncOp func, Entry &entry) {
  entry.loc = func.getLoc();
  entry.name = "@" + func.getName().str();
  entry.signature = debugString(func.getFunctionType());
  FunctionType ft = func.getFunctionType();
  auto bufferOf = [&](Type t, const char *what, unsigned i, Buffer &buffer) {
    auto tt = dyn_cast<RankedTensorType>(t);
    std::optional<int64_t> bytes = tt ? elementBytes(tt.getElementType()) : std::nullopt;
    if (!tt || !bytes) {
      fail(entry.name + " " + what + " #" + llvm::Twine(i) + " has type " + debugString(t) +
           "; the C ABI takes ranked tensors of integer or floating-point elements only");
      return false;
    }
    buffer.type = tt;
    buffer.elementBytes = *bytes;
    return true;
  };
  // Arguments: dynamic dimensions numbered in order of appearance.
  std::vector<std::vector<int64_t>> dimIndex;
  for (unsigned i = 0; i < ft.getNumInputs(); ++i) {
    Buffer b;
    if (!bufferOf(ft.getInput(i), "argument", i, b))
      return false;
    dimIndex.emplace_back();
    for (int64_t d = 0; d < b.type.getRank(); ++d) {
      if (b.type.isDynamicDim(d)) {
        b.sizes.push_back(-1);
        dimIndex.back().push_back(entry.numDims++);
      } else {
        b.sizes.push_back(b.type.getDimSize(d));
        dimIndex.back().push_back(-1);
      }
    }
    entry.args.push_back(std::move(b));
  }
  SmallVector<func::ReturnOp> returns;
  func.walk([&](func::ReturnOp ret) { returns.push_back(ret); });
  for (unsigned i = 0; i < ft.getNumResults(); ++i) {
    Buffer b;
    if (!bufferOf(ft.getResult(i), "result", i, b))
      return false;
    for (int64_t d = 0; d < b.type.getRank(); ++d) {
      if (!b.type.isDynamicDim(d)) {
        b.sizes.push_back(b.type.getDimSize(d));
        continue;
      }
      // Every return must agree on where the size comes from.
      std::optional<DimSource> src;
      for (auto [n, ret] : llvm::enumerate(returns)) {
        std::optional<DimSource> here = tieDim(func, ret.getOperand(i), d);
        if (n == 0)
          src = here;
        else if (!here || !src || here->staticSize != src->staticSize ||
                 here->arg != src->arg || here->dim != src->dim)
          src.reset();
      }
      if (src && src->staticSize >= 0) {
        b.sizes.push_back(src->staticSize);
      } else if (src && dimIndex[src->arg][src->dim] >= 0) {
        b.sizes.push_back(-2 - dimIndex[src->arg][src->dim]);
      } else {
        fail(entry.name + " result #" + llvm::Twine(i) + " (" + debugString(b.type) +
             "): cannot tie its dimension " + llvm::Twine(d) +
             " to a dimension of an argument, so the caller could not size it; "
             "return a tensor whose dynamic sizes are the arguments' (or make them static)");
        return false;
      }
    }
    entry.results.push_back(std::move(b));
  }
  return true;
}

/// Appends `const char *name(void)` returning `text` (a NUL-terminated
/// internal global `global`) at the insertion point of `b`.
void buildStringGetter(OpBuilder &b, Location loc, StringRef name, StringRef global,
                       std::string text) {
  OpBuilder::InsertionGuard guard(b);
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());
  auto fn = LLVM::LLVMFuncOp::create(b, loc, name, LLVM::LLVMFunctionType::get(ptr, {}));
  b.setInsertionPointToStart(fn.addEntryBlock(b));
  text.push_back('\0');
  Value s = LLVM::createGlobalString(loc, b, global, text, LLVM::Linkage::Internal);
  LLVM::ReturnOp::create(b, loc, s);
}

/// Builds the exported entry points of `entry` in the lowered (LLVM
/// dialect) module.
LogicalResult buildWrapper(ModuleOp module, const Entry &entry, bool cuda) {
  MLIRContext *ctx = module.getContext();
  Location loc = entry.loc;
  std::string fname = entry.name.substr(1);
  auto impl = module.lookupSymbol<LLVM::LLVMFuncOp>(fname);
  if (!impl)
    return module.emitError() << "moe-compile: lowered function " << entry.name
                              << " not found";
  std::string exported = "moe_" + fname;
  std::string signatureName = exported + "_signature";
  std::string shapesName = exported + "_result_shapes";
  for (StringRef taken : {StringRef(exported), StringRef(signatureName), StringRef(shapesName)})
    if (module.lookupSymbol(taken))
      return module.emitError() << "moe-compile: " << entry.name << " would be exported as "
                                << taken << ", but the module already has a symbol of that name";

  OpBuilder b(ctx);
  b.setInsertionPointToEnd(module.getBody());
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  auto i64 = b.getI64Type();
  auto i32 = b.getI32Type();

  auto declare = [&](StringRef name, Type result, ArrayRef<Type> args) {
    if (auto f = module.lookupSymbol<LLVM::LLVMFuncOp>(name))
      return f;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    return LLVM::LLVMFuncOp::create(b, loc, name, LLVM::LLVMFunctionType::get(result, args));
  };
  auto check = declare("moeAotCheckCall", i32, {ptr, ptr, ptr, ptr, ptr});
  LLVM::LLVMFuncOp begin, end;
  if (cuda) {
    begin = declare("moeAotCudaBegin", i32, {ptr, ptr, ptr});
    end = declare("moeAotCudaEnd", i32, {ptr, ptr});
  }

  // const char *moe_f_signature(void)
  buildStringGetter(b, loc, signatureName, "__moe_aot_signature_" + fname, entry.signature);

  // const char *moe_f_result_shapes(void): every result's sizes, results
  // separated by ';', sizes by 'x', each a decimal static size or `$i` for
  // dims[i] (docs/aot.md, "The C ABI").
  {
    std::string text;
    for (auto [i, buf] : llvm::enumerate(entry.results)) {
      if (i > 0)
        text += ";";
      for (auto [d, size] : llvm::enumerate(buf.sizes)) {
        if (d > 0)
          text += "x";
        text += size >= 0 ? std::to_string(size) : "$" + std::to_string(-2 - size);
      }
    }
    buildStringGetter(b, loc, shapesName, "__moe_aot_result_shapes_" + fname, text);
  }

  // int moe_f(void *const *args, void *const *results, const int64_t *dims, void *stream)
  auto fn = LLVM::LLVMFuncOp::create(b, loc, exported,
                                     LLVM::LLVMFunctionType::get(i32, {ptr, ptr, ptr, ptr}));
  Block *body = fn.addEntryBlock(b);
  Value args = body->getArgument(0), results = body->getArgument(1);
  Value dims = body->getArgument(2), stream = body->getArgument(3);
  Block *failBlock = b.createBlock(&fn.getBody());
  Block *runBlock = b.createBlock(&fn.getBody());

  b.setInsertionPointToStart(failBlock);
  LLVM::ReturnOp::create(b, loc, LLVM::ConstantOp::create(b, loc, i32, 1).getResult());

  b.setInsertionPointToStart(body);
  std::string nameText = exported;
  nameText.push_back('\0');
  Value name = LLVM::createGlobalString(loc, b, "__moe_aot_name_" + fname, nameText,
                                        LLVM::Linkage::Internal);
  std::vector<int64_t> table{static_cast<int64_t>(entry.args.size()),
                             static_cast<int64_t>(entry.results.size()), entry.numDims};
  for (const std::vector<Buffer> *list : {&entry.args, &entry.results})
    for (const Buffer &buf : *list) {
      table.push_back(buf.type.getRank());
      table.push_back(buf.elementBytes);
      table.insert(table.end(), buf.sizes.begin(), buf.sizes.end());
    }
  Value tableAddr;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto arrayType = LLVM::LLVMArrayType::get(i64, table.size());
    auto global = LLVM::GlobalOp::create(
        b, loc, arrayType, /*isConstant=*/true, LLVM::Linkage::Internal,
        "__moe_aot_table_" + fname,
        DenseElementsAttr::get(RankedTensorType::get({(int64_t)table.size()}, i64),
                               ArrayRef<int64_t>(table)));
    (void)global;
  }
  tableAddr = LLVM::AddressOfOp::create(b, loc, ptr, "__moe_aot_table_" + fname);
  Value ok = LLVM::CallOp::create(b, loc, check, ValueRange{name, tableAddr, args, results, dims})
                 .getResult();
  Value zero32 = LLVM::ConstantOp::create(b, loc, i32, 0);
  Value bad = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, ok, zero32);
  Value previousSlot;
  if (cuda) {
    Value one = LLVM::ConstantOp::create(b, loc, i64, 1);
    previousSlot = LLVM::AllocaOp::create(b, loc, ptr, ptr, one);
  }
  LLVM::CondBrOp::create(b, loc, bad, failBlock, runBlock);

  b.setInsertionPointToStart(runBlock);
  if (cuda) {
    Value began =
        LLVM::CallOp::create(b, loc, begin, ValueRange{name, stream, previousSlot}).getResult();
    Value beginBad = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, began, zero32);
    Block *callBlock = b.createBlock(&fn.getBody());
    b.setInsertionPointToEnd(runBlock);
    LLVM::CondBrOp::create(b, loc, beginBad, failBlock, callBlock);
    b.setInsertionPointToStart(callBlock);
  }

  // The dynamic sizes, then one memref descriptor (allocated, aligned,
  // offset, sizes, row-major strides) per argument and out-parameter.
  std::vector<Value> dimValues;
  for (int64_t k = 0; k < entry.numDims; ++k) {
    Value p = LLVM::GEPOp::create(b, loc, ptr, i64, dims, ArrayRef<LLVM::GEPArg>{(int32_t)k});
    dimValues.push_back(LLVM::LoadOp::create(b, loc, i64, p));
  }
  SmallVector<Value> operands;
  int64_t nextDim = 0;
  auto addBuffer = [&](Value array, int64_t index, const Buffer &buf) {
    Value p = LLVM::GEPOp::create(b, loc, ptr, ptr, array, ArrayRef<LLVM::GEPArg>{(int32_t)index});
    Value data = LLVM::LoadOp::create(b, loc, ptr, p);
    operands.push_back(data);
    operands.push_back(data);
    operands.push_back(LLVM::ConstantOp::create(b, loc, i64, 0));
    SmallVector<Value> sizes;
    for (int64_t s : buf.sizes) {
      if (s >= 0)
        sizes.push_back(LLVM::ConstantOp::create(b, loc, i64, s));
      else if (s == -1)
        sizes.push_back(dimValues[nextDim++]);
      else
        sizes.push_back(dimValues[-2 - s]);
    }
    SmallVector<Value> strides(sizes.size());
    Value stride = LLVM::ConstantOp::create(b, loc, i64, 1);
    for (int64_t d = (int64_t)sizes.size() - 1; d >= 0; --d) {
      strides[d] = stride;
      stride = LLVM::MulOp::create(b, loc, stride, sizes[d]);
    }
    operands.append(sizes.begin(), sizes.end());
    operands.append(strides.begin(), strides.end());
  };
  for (size_t i = 0; i < entry.args.size(); ++i)
    addBuffer(args, i, entry.args[i]);
  for (size_t i = 0; i < entry.results.size(); ++i)
    addBuffer(results, i, entry.results[i]);
  LLVM::LLVMFunctionType implType = impl.getFunctionType();
  if (implType.getNumParams() != operands.size() ||
      !isa<LLVM::LLVMVoidType>(implType.getReturnType()))
    return module.emitError() << "moe-compile: lowered " << entry.name << " has type "
                              << implType << ", expected " << operands.size()
                              << " descriptor operands and no result";
  for (unsigned i = 0; i < operands.size(); ++i)
    if (implType.getParamType(i) != operands[i].getType())
      return module.emitError() << "moe-compile: lowered " << entry.name << " parameter " << i
                                << " has type " << implType.getParamType(i);
  LLVM::CallOp::create(b, loc, impl, operands);
  if (cuda) {
    Value previous = LLVM::LoadOp::create(b, loc, ptr, previousSlot);
    Value ended = LLVM::CallOp::create(b, loc, end, ValueRange{name, previous}).getResult();
    LLVM::ReturnOp::create(b, loc, ended);
  } else {
    LLVM::ReturnOp::create(b, loc, zero32);
  }
  return success();
}

/// ld.lld: $MOE_LLD, LLVM's tools directory, then ld.lld-22 / ld.lld on
/// PATH.
std::optional<std::string> findLld() {
  if (const char *env = std::getenv("MOE_LLD"); env && *env)
    return llvm::sys::fs::can_execute(env) ? std::optional<std::string>(env) : std::nullopt;
  llvm::SmallString<256> candidate(MOE_LLVM_TOOLS_DIR);
  llvm::sys::path::append(candidate, "ld.lld");
  if (llvm::sys::fs::can_execute(candidate))
    return candidate.str().str();
  for (const char *name : {"ld.lld-22", "ld.lld"})
    if (llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName(name))
      return *found;
  return std::nullopt;
}

/// A file moe-compile links into LIB.so: in an installed tree beside the
/// tool (`<prefix>/bin/moe-compile` finds `<prefix>/lib/<installRel>`), else
/// at its build-tree path (compiled in).
std::string supportFile(const char *buildPath, llvm::StringRef installRel) {
  static int anchor;
  std::string exe = llvm::sys::fs::getMainExecutable("moe-compile", &anchor);
  if (!exe.empty()) {
    llvm::SmallString<256> installed(llvm::sys::path::parent_path(llvm::sys::path::parent_path(exe)));
    llvm::sys::path::append(installed, "lib", installRel);
    if (llvm::sys::fs::exists(installed))
      return installed.str().str();
  }
  return buildPath;
}

/// The directories of the host's libc/libm for ld.lld.
std::vector<std::string> systemLibraryDirs(const llvm::Triple &triple) {
  std::vector<std::string> dirs;
  std::string multiarch = (triple.getArchName() + "-linux-gnu").str();
  if (triple.getArch() == llvm::Triple::x86_64)
    multiarch = "x86_64-linux-gnu";
  for (const std::string &dir : {"/lib/" + multiarch, "/usr/lib/" + multiarch,
                                 std::string("/lib64"), std::string("/usr/lib64"),
                                 std::string("/lib"), std::string("/usr/lib")})
    if (llvm::sys::fs::is_directory(dir))
      dirs.push_back(dir);
  return dirs;
}

int runMain(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  llvm::cl::HideUnrelatedOptions(category);
  llvm::cl::ParseCommandLineOptions(argc, argv, overview);

  if (inputFile.empty())
    return fail("no input file (usage: moe-compile FILE.mlir -o LIB.so --target=cpu|cuda)");
  if (outputFile.empty())
    return fail("no output file: pass -o LIB.so");
  if (target.empty())
    return fail("no target: pass --target=cpu or --target=cuda");
  if (target != "cpu" && target != "cuda")
    return fail("--target=" + target + " is not one of cpu, cuda");
  bool cuda = target == "cuda";
  // The flags of the cuda target only.
  if (!cuda)
    for (const llvm::cl::Option *option :
         std::initializer_list<const llvm::cl::Option *>{&chip, &cudaPath, &decodeSplitK,
                                                          &bigTileRows, &wgmmaGroupsInFlight,
                                                          &mmaStages})
      if (option->getNumOccurrences())
        return fail("--" + option->ArgStr + " applies to --target=cuda only");
  if (bigTileRows < 0)
    return fail("--big-tile-rows=" + llvm::Twine(int64_t(bigTileRows)) + " must be >= 0");
  llvm::Expected<unsigned> resolvedLevel = mlir::moe::tools::resolveOptLevel(
      optLevel, optLevel.getNumOccurrences() != 0, "MOE_COMPILE_OPT_LEVEL");
  if (!resolvedLevel)
    return fail(llvm::toString(resolvedLevel.takeError()));
  unsigned level = *resolvedLevel;
  if (wgmmaGroupsInFlight < 0 || wgmmaGroupsInFlight > 1)
    return fail("--wgmma-groups-in-flight=" + llvm::Twine(int64_t(wgmmaGroupsInFlight)) +
                " must be 0 or 1");

  moe::NVPTXPipelineOptions nvptx;
  if (cuda) {
    nvptx.chip = chip;
    nvptx.format = "fatbin";
    nvptx.deviceAbi = true;
    nvptx.resultsToOutParams = true;
    nvptx.cudaPath = cudaPath;
    nvptx.decodeSplitK = decodeSplitK;
    nvptx.bigTileRows = bigTileRows;
    nvptx.wgmmaGroupsInFlight = wgmmaGroupsInFlight;
    nvptx.mmaStages = mmaStages;
    std::string error;
    if (failed(moe::validateNVPTXPipelineOptions(nvptx, [&](const llvm::Twine &message) {
          error = message.str();
          return failure();
        }))) {
      // "moe-nvptx-pipeline: chip='sm_x' ..." -> "--chip=sm_x ..."
      if (StringRef(error).contains("chip="))
        return fail("--chip=" + chip +
                    " is not an NVIDIA architecture; expected sm_NN or sm_NNN, optionally "
                    "with an 'a' or 'f' suffix (sm_80, sm_90a)");
      return fail(error);
    }
    std::string toolkit = moe::findCudaToolkit(nvptx.cudaPath);
    if (toolkit.empty())
      return fail("--target=cuda needs the CUDA toolkit (ptxas, fatbinary): none "
                  "found; pass --cuda-path=DIR or set CUDA_HOME");
    for (const char *tool : {"ptxas", "fatbinary"}) {
      llvm::SmallString<256> path(toolkit);
      llvm::sys::path::append(path, "bin", tool);
      if (!llvm::sys::fs::can_execute(path))
        return fail(llvm::Twine("--target=cuda needs ") + tool + ", which is not in " +
                    toolkit + "/bin (pass --cuda-path=DIR or set CUDA_HOME)");
    }
    // gpu-module-to-binary runs bin/ptxas and bin/fatbinary of this toolkit.
    nvptx.cudaPath = toolkit;
  }
  // The host target machine (checks --mcpu before any work).
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string targetError;
  const llvm::Target *llvmTarget = llvm::TargetRegistry::lookupTarget(triple, targetError);
  if (!llvmTarget)
    return fail("no LLVM target for " + triple.str() + ": " + targetError);
  std::string cpuName = mcpu == "native" ? llvm::sys::getHostCPUName().str() : mcpu.getValue();
  std::string features;
  if (mcpu == "native") {
    llvm::SubtargetFeatures subtarget;
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      subtarget.AddFeature(feature.first(), feature.second);
    features = subtarget.getString();
  }
  if (mcpu != "native") {
    std::unique_ptr<llvm::MCSubtargetInfo> generic(
        llvmTarget->createMCSubtargetInfo(triple, "", ""));
    if (!generic || !generic->isCPUStringValid(cpuName))
      return fail("--mcpu=" + mcpu + " is not a CPU of " + triple.str());
  }
  llvm::TargetOptions targetOptions;
  // Constructors (the cuda kernels' module load) in .init_array, which the
  // dynamic loader runs; .ctors would need crtbegin.o.
  targetOptions.UseInitArray = true;
  // x86-64: the medium code model, so that data over 64 KiB (the CPU
  // kernels' packed-weight caches: 5.6 GiB for a Mixtral layer in f32) goes
  // to .lbss, addressed with 64-bit offsets; the small model's 32-bit
  // PC-relative references cannot reach past 2 GiB and the link fails.
  std::optional<llvm::CodeModel::Model> codeModel;
  if (triple.getArch() == llvm::Triple::x86_64)
    codeModel = llvm::CodeModel::Medium;
  std::unique_ptr<llvm::TargetMachine> machine(llvmTarget->createTargetMachine(
      triple, cpuName, features, targetOptions, llvm::Reloc::PIC_, codeModel,
      *llvm::CodeGenOpt::getLevel(level)));
  if (!machine)
    return fail("cannot create a target machine for " + triple.str() + " (--mcpu=" + mcpu + ")");
  std::optional<std::string> lld = findLld();
  if (!lld)
    return fail("ld.lld not found (install lld-22, or set MOE_LLD=/path/to/ld.lld)");
  const std::string aotSupport =
      supportFile(MOE_AOT_SUPPORT_LIB, "moe-mlir/libMoEAotSupport.a");
  const std::string aotCudaSupport =
      supportFile(MOE_AOT_CUDA_SUPPORT_LIB, "moe-mlir/libMoEAotCudaSupport.a");
  const std::string cudaRuntime = supportFile(MOE_CUDA_RUNTIME_LIB, "libMoECudaRuntime.so");
  for (const std::string &lib : {aotSupport, aotCudaSupport})
    if (!llvm::sys::fs::exists(lib))
      return fail("support library " + lib + " not found (build moe-mlir first)");
  if (cuda && !llvm::sys::fs::exists(cudaRuntime))
    return fail("runtime library " + cudaRuntime + " not found");

  DialectRegistry registry;
  moe::registerAllMoE(registry);
  registerAllToLLVMIRTranslations(registry);
  registerAllGPUToLLVMIRTranslations(registry);
  MLIRContext context(registry);
  installDiagnosticHandler(context);

  std::string openError;
  auto file = openInputFile(inputFile, &openError);
  if (!file)
    return fail(openError.empty() ? "cannot open " + inputFile : openError);
  // moe_source_sha256(): the input's bytes, so that a caller holding the
  // source (moe_mlir.torch.MoELayer with a prepared library) can check that
  // the library is the one compiled from it.
  const std::string sourceDigest = llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(
                                                   file->getBuffer())),
                                               /*LowerCase=*/true);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return errorPrinted ? 1 : fail("cannot parse " + inputFile);

  // The gradients asked for: --vjp (of every exported function) and
  // --entry=f_vjp where the file has @f only.
  {
    std::vector<std::string> bases;
    for (const std::string &name : entries) {
      std::string base = moe::requestedVjpBase(*module, name);
      if (!base.empty())
        bases.push_back(base);
    }
    if (vjp) {
      if (entries.empty()) {
        for (auto f : module->getOps<func::FuncOp>())
          if (f.isPublic() && !f.isExternal())
            bases.push_back(f.getName().str());
      } else {
        for (const std::string &name : entries)
          if (module->lookupSymbol<func::FuncOp>(name) && !llvm::is_contained(bases, name))
            bases.push_back(name);
      }
    }
    if (!bases.empty()) {
      PassManager vjpPm(&context);
      moe::MoEGenerateVJPOptions options;
      options.entries.assign(bases.begin(), bases.end());
      vjpPm.addPass(moe::createMoEGenerateVJP(options));
      if (failed(vjpPm.run(*module)))
        return errorPrinted ? 1 : fail("cannot differentiate " + inputFile);
      if (vjp && !entries.empty())
        for (const std::string &base : bases)
          entries.push_back(base + "_vjp");
    }
  }

  // The exported functions.
  std::vector<func::FuncOp> publicFuncs;
  for (auto f : module->getOps<func::FuncOp>())
    if (f.isPublic() && !f.isExternal())
      publicFuncs.push_back(f);
  std::vector<func::FuncOp> selected;
  if (entries.empty()) {
    selected = publicFuncs;
    if (selected.empty())
      return fail(inputFile + " has no public function to export");
  } else {
    for (const std::string &name : entries) {
      auto it = llvm::find_if(publicFuncs, [&](func::FuncOp f) { return f.getName() == name; });
      if (it == publicFuncs.end()) {
        std::string names;
        for (func::FuncOp f : publicFuncs)
          names += (names.empty() ? "@" : ", @") + f.getName().str();
        return fail("--entry=" + name + ": " + inputFile + " has no public function @" + name +
                    " (public functions: " + (names.empty() ? "none" : names) + ")");
      }
      if (!llvm::is_contained(selected, *it))
        selected.push_back(*it);
    }
  }
  std::vector<Entry> exported;
  for (func::FuncOp f : selected) {
    Entry entry;
    if (!recordEntry(f, entry))
      return 1;
    exported.push_back(std::move(entry));
  }
  // Public functions not exported become private (the host convention, no
  // entry point); moe.param has served its purpose; arguments are read-only.
  for (func::FuncOp f : publicFuncs)
    if (!llvm::is_contained(selected, f))
      f.setPrivate();
  for (func::FuncOp f : selected)
    for (unsigned i = 0, e = f.getNumArguments(); i < e; ++i) {
      f.removeArgAttr(i, StringAttr::get(&context, "moe.param"));
      f.setArgAttr(i, bufferization::BufferizationDialect::kWritableAttrName,
                   BoolAttr::get(&context, false));
    }

  // Lowering.
  PassManager pm(&context, module->getOperationName());
  if (failed(applyPassManagerCLOptions(pm)))
    return fail("invalid pass manager options");
  // What no exported function uses is not lowered (e.g. @f next to an
  // exported @f_vjp).
  pm.addPass(createSymbolDCEPass());
  if (cuda) {
    if (failed(moe::buildNVPTXPipeline(pm, nvptx, [&](const llvm::Twine &message) {
          fail(message);
          return failure();
        })))
      return 1;
  } else {
    moe::CpuPipelineOptions cpu;
    cpu.resultsToOutParams = true;
    // MLIR's async runtime (libmlir_async_runtime.so) is not a dependency
    // LIB.so may have: the CPU code runs on the calling thread.
    cpu.parallel = false;
    // The strategy (#moe.cpu_config) for the CPU the library is built for.
    cpu.cpu = mcpu.getValue();
    moe::buildCpuPipeline(pm, cpu);
  }
  if (failed(pm.run(*module)))
    return errorPrinted ? 1 : fail("lowering " + inputFile + " failed");

  for (const Entry &e : exported)
    if (failed(buildWrapper(*module, e, cuda)))
      return 1;
  if (module->lookupSymbol("moe_source_sha256"))
    return fail("the module already has a symbol moe_source_sha256, which LIB.so exports");
  {
    OpBuilder b(&context);
    b.setInsertionPointToEnd(module->getBody());
    buildStringGetter(b, module->getLoc(), "moe_source_sha256", "__moe_aot_source_sha256",
                      sourceDigest);
  }

  // AMX tile code is compiled at O1 at least (OptLevel.h, compileLevelFor).
  level = mlir::moe::tools::compileLevelFor(*module, level);
  machine->setOptLevel(*llvm::CodeGenOpt::getLevel(level));

  // LLVM IR, optimized for the host.
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule = translateModuleToLLVMIR(*module, llvmContext);
  if (!llvmModule)
    return errorPrinted ? 1 : fail("translation to LLVM IR failed");
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(machine->createDataLayout());
  // Only the C ABI is exported.
  for (llvm::GlobalValue &gv : llvmModule->global_values()) {
    if (gv.isDeclaration() || gv.hasLocalLinkage())
      continue;
    StringRef n = gv.getName();
    bool isExported = n == "moe_source_sha256" || llvm::any_of(exported, [&](const Entry &e) {
      std::string base = "moe_" + e.name.substr(1);
      return n == base || n == base + "_signature" || n == base + "_result_shapes";
    });
    if (!isExported)
      gv.setVisibility(llvm::GlobalValue::HiddenVisibility);
  }
  auto optimize = makeOptimizingTransformer(level, 0, machine.get());
  if (llvm::Error err = optimize(llvmModule.get()))
    return fail("LLVM optimization failed: " + llvm::toString(std::move(err)));

  // The object file, then the shared library.
  std::string objectPath = outputFile + ".o";
  std::error_code ec;
  {
    llvm::ToolOutputFile object(objectPath, ec, llvm::sys::fs::OF_None);
    if (ec)
      return fail("cannot write " + objectPath + ": " + ec.message());
    llvm::legacy::PassManager codegen;
    if (machine->addPassesToEmitFile(codegen, object.os(), nullptr,
                                     llvm::CodeGenFileType::ObjectFile))
      return fail("the target machine cannot emit object files");
    codegen.run(*llvmModule);
    object.os().flush();
    if (object.os().has_error())
      return fail("cannot write " + objectPath);
    object.keep();
  }
  std::vector<std::string> linkArgs{*lld, "-shared", "-o", outputFile, "--no-undefined",
                                    "-z", "now", "-z", "relro", "--as-needed",
                                    "--build-id", "--eh-frame-hdr",
                                    "-soname", llvm::sys::path::filename(outputFile).str(),
                                    objectPath};
  if (cuda) {
    linkArgs.push_back(aotCudaSupport);
    linkArgs.push_back(aotSupport);
    linkArgs.push_back(cudaRuntime);
    linkArgs.push_back("-rpath");
    linkArgs.push_back("$ORIGIN");
  } else {
    linkArgs.push_back(aotSupport);
  }
  for (const std::string &dir : systemLibraryDirs(triple))
    linkArgs.push_back("-L" + dir);
  linkArgs.push_back("-lm");
  // f16 conversions on a CPU without F16C are calls of libgcc's
  // __truncsfhf2 / __extendhfsf2 (--as-needed: a dependency only then).
  linkArgs.push_back("-l:libgcc_s.so.1");
  linkArgs.push_back("-lc");
  std::vector<StringRef> argRefs(linkArgs.begin(), linkArgs.end());
  // ld.lld's messages go to a file: a failure is one line (the first error,
  // and how many more lines ld.lld printed).
  llvm::SmallString<128> lldLog;
  if (std::error_code logEc = llvm::sys::fs::createTemporaryFile("moe-compile-lld", "log", lldLog))
    return fail("cannot create a temporary file for ld.lld's messages: " + logEc.message());
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(lldLog), StringRef(lldLog)};
  std::string linkError;
  int rc = llvm::sys::ExecuteAndWait(*lld, argRefs, std::nullopt, redirects, 0, 0, &linkError);
  if (!keepObject)
    llvm::sys::fs::remove(objectPath);
  if (rc != 0) {
    std::string firstError;
    size_t moreLines = 0;
    if (llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> log =
            llvm::MemoryBuffer::getFile(lldLog)) {
      llvm::SmallVector<StringRef> lines;
      (*log)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
      for (StringRef line : lines) {
        if (firstError.empty() && line.contains("error:"))
          firstError = line.trim().str();
        else
          ++moreLines;
      }
    }
    llvm::sys::fs::remove(lldLog);
    std::string detail = !firstError.empty() ? firstError : linkError;
    if (!firstError.empty() && moreLines)
      detail += " (and " + std::to_string(moreLines) + " more lines from ld.lld)";
    return fail("linking " + outputFile + " with " + *lld + " failed" +
                (detail.empty() ? "" : ": " + detail));
  }
  llvm::sys::fs::remove(lldLog);
  return 0;
}

} // namespace

int main(int argc, char **argv) { return runMain(argc, argv); }
