//===- MoEAttrs.cpp - moe dialect attributes ------------------------------===//
//
// Routing attributes and their RoutingAttrInterface implementations.
//
//===----------------------------------------------------------------------===//

#include "dialect/MoEAttrs.h"
#include "dialect/MoEDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::moe;

#include "dialect/MoEEnums.cpp.inc"

#include "dialect/MoEInterfaces.cpp.inc"

// The custom directive of #moe.checkpoint (defined at the end of the file).
static ParseResult
parseCheckpointParams(AsmParser &parser, SmallVector<StringAttr> &names,
                      bool &transpose, SmallVector<StringAttr> &fp8Scales,
                      SmallVector<int64_t> &block, Int4Packing &int4,
                      SmallVector<StringAttr> &int4Scales,
                      SmallVector<StringAttr> &int4Zeros, int64_t &group);
static void printCheckpointParams(AsmPrinter &printer,
                                  ArrayRef<StringAttr> names, bool transpose,
                                  ArrayRef<StringAttr> fp8Scales,
                                  ArrayRef<int64_t> block, Int4Packing int4,
                                  ArrayRef<StringAttr> int4Scales,
                                  ArrayRef<StringAttr> int4Zeros, int64_t group);
static ParseResult parseQuantParams(AsmParser &parser, QuantKind &kind,
                                    SmallVector<int64_t> &block, int64_t &group,
                                    bool &zeroPoint, bool &int8Activations);
static void printQuantParams(AsmPrinter &printer, QuantKind kind,
                             ArrayRef<int64_t> block, int64_t group, bool zeroPoint,
                             bool int8Activations);

#define GET_ATTRDEF_CLASSES
#include "dialect/MoEAttrs.cpp.inc"

void MoEDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialect/MoEAttrs.cpp.inc"
      >();
}

/// Shared check of `1 <= k <= E` against a layer (E may be dynamic).
static LogicalResult verifyKAgainstExperts(StringRef routing, int64_t k,
                                           int64_t numExperts,
                                           function_ref<InFlightDiagnostic()> emitError) {
  if (!ShapedType::isDynamic(numExperts) && k > numExperts)
    return emitError() << "routing " << routing << " selects k = " << k
                       << " experts per token, but the layer has only E = "
                       << numExperts << " experts";
  return success();
}

//===----------------------------------------------------------------------===//
// DenseRoutingAttr
//===----------------------------------------------------------------------===//

int64_t DenseRoutingAttr::getExpertsPerToken(int64_t numExperts) const {
  return numExperts;
}
std::optional<int64_t> DenseRoutingAttr::getFixedK() const { return std::nullopt; }
bool DenseRoutingAttr::isSampling(bool) const { return false; }
Regularizer DenseRoutingAttr::getRegularizer() const { return Regularizer::none; }
double DenseRoutingAttr::getRegularizerCoefficient() const { return 0.0; }
LogicalResult
DenseRoutingAttr::verifyForLayer(int64_t, bool,
                                 function_ref<InFlightDiagnostic()>) const {
  return success();
}

//===----------------------------------------------------------------------===//
// TopKRoutingAttr
//===----------------------------------------------------------------------===//

LogicalResult TopKRoutingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                      int64_t k, RouterScore, bool, llvm::APFloat scale,
                                      int64_t groups, int64_t groupK) {
  // Expert ids are i32: k, the number of experts and of groups fit in it.
  constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();
  if (k < 1)
    return emitError() << "#moe.top_k needs k >= 1, got k = " << k;
  if (k > kMaxIndex)
    return emitError() << "#moe.top_k needs k <= 2^31 - 1 (expert ids are i32), "
                          "got k = "
                       << k;
  double s = scale.convertToDouble();
  if (!std::isfinite(s) || s <= 0.0)
    return emitError() << "#moe.top_k needs a finite scale > 0, got " << s;
  if (groups < 1)
    return emitError() << "#moe.top_k needs groups >= 1, got groups = " << groups;
  if (groups > kMaxIndex)
    return emitError() << "#moe.top_k needs groups <= 2^31 - 1 (expert ids are "
                          "i32), got groups = "
                       << groups;
  if (groupK < 0 || groupK > groups)
    return emitError() << "#moe.top_k needs 1 <= group_k <= groups (" << groups
                       << "), got group_k = " << groupK;
  return success();
}

TopKRoutingAttr
TopKRoutingAttr::getClassicChecked(function_ref<InFlightDiagnostic()> emitError,
                                   MLIRContext *context, int64_t k) {
  return getChecked(emitError, context, k, RouterScore::softmax, /*normalize=*/true,
                    llvm::APFloat(1.0), /*groups=*/1, /*group_k=*/0);
}

int64_t TopKRoutingAttr::getExpertsPerToken(int64_t) const { return getK(); }
std::optional<int64_t> TopKRoutingAttr::getFixedK() const { return getK(); }
bool TopKRoutingAttr::isSampling(bool) const { return false; }
Regularizer TopKRoutingAttr::getRegularizer() const { return Regularizer::none; }
double TopKRoutingAttr::getRegularizerCoefficient() const { return 0.0; }
LogicalResult
TopKRoutingAttr::verifyForLayer(int64_t numExperts, bool,
                                function_ref<InFlightDiagnostic()> emitError) const {
  if (failed(verifyKAgainstExperts("#moe.top_k", getK(), numExperts, emitError)))
    return failure();
  int64_t groups = getGroups();
  if (groups == 1 || ShapedType::isDynamic(numExperts))
    return success();
  if (numExperts % groups != 0)
    return emitError() << "#moe.top_k with groups = " << groups
                       << " needs the number of experts to be a multiple of it, got E = "
                       << numExperts;
  int64_t choosable = getKeptGroups() * (numExperts / groups);
  if (getK() > choosable)
    return emitError() << "#moe.top_k needs k <= group_k * E / groups = " << choosable
                       << ", got k = " << getK();
  return success();
}

//===----------------------------------------------------------------------===//
// MoesartRoutingAttr
//===----------------------------------------------------------------------===//

LogicalResult
MoesartRoutingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           int64_t k, MoesartAdjust adjust,
                           llvm::APFloat trimmedLassoValue) {
  double trimmedLasso = trimmedLassoValue.convertToDouble();
  if (k < 1)
    return emitError() << "#moe.moesart needs k >= 1, got k = " << k;
  if (k > std::numeric_limits<int32_t>::max())
    return emitError() << "#moe.moesart needs k <= 2^31 - 1 (expert ids are i32), "
                          "got k = "
                       << k;
  if (!std::isfinite(trimmedLasso) || trimmedLasso < 0.0)
    return emitError() << "#moe.moesart needs a finite trimmed_lasso >= 0, got "
                       << trimmedLasso;
  return success();
}

int64_t MoesartRoutingAttr::getExpertsPerToken(int64_t) const {
  return getK();
}
std::optional<int64_t> MoesartRoutingAttr::getFixedK() const { return getK(); }
bool MoesartRoutingAttr::isSampling(bool training) const { return training; }
Regularizer MoesartRoutingAttr::getRegularizer() const {
  return Regularizer::trimmed_lasso;
}
double MoesartRoutingAttr::getRegularizerCoefficient() const {
  return getTrimmedLasso().convertToDouble();
}
LogicalResult MoesartRoutingAttr::verifyForLayer(
    int64_t numExperts, bool training,
    function_ref<InFlightDiagnostic()> emitError) const {
  int64_t k = getK();
  if (failed(verifyKAgainstExperts("#moe.moesart", k, numExperts, emitError)))
    return failure();
  if (training && getAdjust() == MoesartAdjust::small_random && k < 2)
    return emitError() << "#moe.moesart with adjust = small_random needs k >= 2 "
                          "in training mode (one sampled expert keeps its logit, "
                          "the other k-1 are adjusted), got k = "
                       << k;
  return success();
}

//===----------------------------------------------------------------------===//
// CheckpointAttr
//===----------------------------------------------------------------------===//

bool CheckpointAttr::isPerExpert() const {
  return llvm::any_of(getNames(), [](StringAttr name) {
    return name.getValue().contains("{e}");
  });
}

LogicalResult
CheckpointAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       ArrayRef<StringAttr> names, bool transpose,
                       ArrayRef<StringAttr> fp8Scales, ArrayRef<int64_t> block,
                       Int4Packing int4, ArrayRef<StringAttr> int4Scales,
                       ArrayRef<StringAttr> int4Zeros, int64_t group) {
  // The names (or the scales' names, `what`): none empty, `{e}` in all or
  // none; returns whether they have it.
  auto checkNames = [&](ArrayRef<StringAttr> list, StringRef what,
                        StringRef whatMany, bool &perExpert) -> LogicalResult {
    for (auto [i, name] : llvm::enumerate(list))
      if (!name || name.getValue().empty())
        return emitError() << "#moe.checkpoint " << what << " #" << i
                           << " is empty";
    StringAttr withE, withoutE;
    for (StringAttr name : list)
      (name.getValue().contains("{e}") ? withE : withoutE) = name;
    if (withE && withoutE)
      return emitError() << "#moe.checkpoint " << whatMany
                         << " must all contain the expert placeholder {e} or "
                            "none: "
                         << withE << " has it, " << withoutE << " does not";
    perExpert = static_cast<bool>(withE);
    return success();
  };
  if (names.empty())
    return emitError() << "#moe.checkpoint must name at least one tensor";
  bool namesPerExpert = false, scalesPerExpert = false;
  if (failed(checkNames(names, "tensor name", "names", namesPerExpert)))
    return failure();
  if (fp8Scales.empty() != block.empty())
    return emitError() << "#moe.checkpoint fp8_scales and block go together";
  if (!fp8Scales.empty() && int4 != Int4Packing::none)
    return emitError() << "#moe.checkpoint takes fp8_scales or int4, not both";
  // A list of per-weight tensors (`what`: the scales or zero points) beside
  // the names: one per name, `{e}` exactly when the names have it.
  auto checkCompanions = [&](ArrayRef<StringAttr> list, StringRef what) -> LogicalResult {
    if (list.size() != names.size())
      return emitError() << "#moe.checkpoint has " << names.size() << " tensor name(s) but "
                         << list.size() << " " << what << ": one per weight";
    std::string one = (what + " name").str(), many = (what + " names").str();
    if (failed(checkNames(list, one, many, scalesPerExpert)))
      return failure();
    if (scalesPerExpert != namesPerExpert)
      return emitError() << "#moe.checkpoint " << what
                         << " must contain the expert placeholder {e} exactly when the "
                            "tensor names do";
    return success();
  };
  if (int4Scales.empty()) {
    if (!int4Zeros.empty())
      return emitError() << "#moe.checkpoint int4_zeros need int4_scales";
    if (group != 0)
      return emitError() << "#moe.checkpoint group needs int4_scales";
  } else {
    if (int4 != Int4Packing::gptq && int4 != Int4Packing::awq &&
        int4 != Int4Packing::pack_quantized)
      return emitError() << "#moe.checkpoint int4_scales dequantize weights packed as "
                            "int4 = gptq, awq or pack_quantized, got "
                         << (int4 == Int4Packing::none ? StringRef("no int4")
                                                       : stringifyInt4Packing(int4));
    if (group < 1)
      return emitError() << "#moe.checkpoint int4_scales need group >= 1, got " << group;
    if (transpose)
      return emitError() << "#moe.checkpoint int4_scales dequantize to [in, out]; "
                            "transpose does not apply";
    if (failed(checkCompanions(int4Scales, "int4_scales")))
      return failure();
    if (int4Zeros.empty() && int4 != Int4Packing::pack_quantized)
      return emitError() << "#moe.checkpoint int4 = " << stringifyInt4Packing(int4)
                         << " stores zero points: int4_zeros are required";
    if (!int4Zeros.empty() && failed(checkCompanions(int4Zeros, "int4_zeros")))
      return failure();
  }
  if (fp8Scales.empty())
    return success();
  if (fp8Scales.size() != names.size())
    return emitError() << "#moe.checkpoint has " << names.size()
                       << " tensor name(s) but " << fp8Scales.size()
                       << " fp8_scales: one scale tensor per weight";
  if (failed(checkNames(fp8Scales, "fp8_scales name", "fp8_scales names",
                        scalesPerExpert)))
    return failure();
  if (scalesPerExpert != namesPerExpert)
    return emitError() << "#moe.checkpoint fp8_scales must contain the expert "
                          "placeholder {e} exactly when the tensor names do";
  if (block.size() != 2 || block[0] < 1 || block[1] < 1)
    return emitError() << "#moe.checkpoint block must be [bN, bK], two sizes "
                          ">= 1, got ["
                       << block << "]";
  return success();
}

/// `["a", "b"]`, an optional `, transpose`, then optionally
/// `, fp8_scales = ["as", "bs"], block = [bN, bK]`, `, int4 = KIND` and
/// `, int4_scales = [...], int4_zeros = [...], group = G`.
static ParseResult
parseCheckpointParams(AsmParser &parser, SmallVector<StringAttr> &names,
                      bool &transpose, SmallVector<StringAttr> &fp8Scales,
                      SmallVector<int64_t> &block, Int4Packing &int4,
                      SmallVector<StringAttr> &int4Scales,
                      SmallVector<StringAttr> &int4Zeros, int64_t &group) {
  auto parseNames = [&](SmallVector<StringAttr> &out) {
    SmallVector<StringAttr> list;
    if (parser.parseCommaSeparatedList(
            AsmParser::Delimiter::Square, [&]() -> ParseResult {
              std::string name;
              if (parser.parseString(&name))
                return failure();
              list.push_back(parser.getBuilder().getStringAttr(name));
              return success();
            }))
      return failure();
    out = std::move(list);
    return success();
  };
  if (failed(parseNames(names)))
    return failure();
  transpose = false;
  fp8Scales.clear();
  block.clear();
  int4 = Int4Packing::none;
  int4Scales.clear();
  int4Zeros.clear();
  group = 0;
  // `transpose`, `fp8_scales = [...]`, `block = [...]`, `int4 = KIND`,
  // `int4_scales = [...]`, `int4_zeros = [...]` and `group = G`, each at
  // most once.
  bool haveScales = false, haveBlock = false, haveInt4 = false;
  bool haveInt4Scales = false, haveInt4Zeros = false, haveGroup = false;
  // `KEYWORD = [names]` unless seen: true when parsed.
  auto parseList = [&](StringRef keyword, bool &have,
                       SmallVector<StringAttr> &out) -> FailureOr<bool> {
    if (have || failed(parser.parseOptionalKeyword(keyword)))
      return false;
    have = true;
    if (parser.parseEqual() || failed(parseNames(out)))
      return failure();
    return true;
  };
  while (succeeded(parser.parseOptionalComma())) {
    FailureOr<bool> list = parseList("fp8_scales", haveScales, fp8Scales);
    if (succeeded(list) && !*list)
      list = parseList("int4_scales", haveInt4Scales, int4Scales);
    if (succeeded(list) && !*list)
      list = parseList("int4_zeros", haveInt4Zeros, int4Zeros);
    if (failed(list))
      return failure();
    if (*list)
      continue;
    if (!haveGroup && succeeded(parser.parseOptionalKeyword("group"))) {
      haveGroup = true;
      if (parser.parseEqual() || parser.parseInteger(group))
        return failure();
      continue;
    }
    if (!haveInt4 && succeeded(parser.parseOptionalKeyword("int4"))) {
      haveInt4 = true;
      std::string keyword;
      SMLoc at = parser.getCurrentLocation();
      if (parser.parseEqual() || parser.parseKeywordOrString(&keyword))
        return failure();
      std::optional<Int4Packing> kind = symbolizeInt4Packing(keyword);
      if (!kind || *kind == Int4Packing::none)
        return parser.emitError(at) << "expected an int4 packing (gptq, gptq_zeros, awq or "
                                       "pack_quantized), got '"
                                    << keyword << "'";
      int4 = *kind;
      continue;
    }
    if (!transpose && succeeded(parser.parseOptionalKeyword("transpose"))) {
      transpose = true;
      continue;
    }
    if (!haveBlock && succeeded(parser.parseOptionalKeyword("block"))) {
      haveBlock = true;
      if (parser.parseEqual() ||
          parser.parseCommaSeparatedList(
              AsmParser::Delimiter::Square, [&]() -> ParseResult {
                return parser.parseInteger(block.emplace_back());
              }))
        return failure();
      continue;
    }
    return parser.emitError(parser.getCurrentLocation(),
                            "expected 'transpose', 'fp8_scales', 'block', 'int4', "
                            "'int4_scales', 'int4_zeros' or 'group' (each at most once)");
  }
  return success();
}

static void printCheckpointParams(AsmPrinter &printer,
                                  ArrayRef<StringAttr> names, bool transpose,
                                  ArrayRef<StringAttr> fp8Scales,
                                  ArrayRef<int64_t> block, Int4Packing int4,
                                  ArrayRef<StringAttr> int4Scales,
                                  ArrayRef<StringAttr> int4Zeros, int64_t group) {
  auto printNames = [&](ArrayRef<StringAttr> list) {
    printer << '[';
    llvm::interleaveComma(list, printer, [&](StringAttr name) {
      printer.printString(name.getValue());
    });
    printer << ']';
  };
  printNames(names);
  if (transpose)
    printer << ", transpose";
  if (!fp8Scales.empty()) {
    printer << ", fp8_scales = ";
    printNames(fp8Scales);
    printer << ", block = [" << block << ']';
  }
  if (int4 != Int4Packing::none)
    printer << ", int4 = " << stringifyInt4Packing(int4);
  if (!int4Scales.empty()) {
    printer << ", int4_scales = ";
    printNames(int4Scales);
  }
  if (!int4Zeros.empty()) {
    printer << ", int4_zeros = ";
    printNames(int4Zeros);
  }
  if (group != 0)
    printer << ", group = " << group;
}

//===----------------------------------------------------------------------===//
// CpuConfigAttr
//===----------------------------------------------------------------------===//

LogicalResult CpuConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                    int64_t vectorBits, int64_t registers, int64_t microRows,
                                    int64_t microVectors, int64_t rowBlock, int64_t colBlock,
                                    int64_t prefetchRows, bool bf16Dot, bool amx,
                                    bool fp8Dot, Int8Dot int8Dot) {
  if (vectorBits != 128 && vectorBits != 256 && vectorBits != 512)
    return emitError() << "#moe.cpu_config needs vector_bits = 128, 256 or 512, got "
                       << vectorBits;
  if (registers != 16 && registers != 32)
    return emitError() << "#moe.cpu_config needs registers = 16 or 32, got " << registers;
  if (microRows < 1 || microVectors < 2 || microVectors % 2 != 0)
    return emitError() << "#moe.cpu_config needs micro_rows >= 1 and an even micro_vectors >= 2, "
                          "got micro_rows = "
                       << microRows << ", micro_vectors = " << microVectors;
  // Accumulators, one register per right-operand vector, one broadcast.
  int64_t needed = microRows * microVectors + microVectors + 1;
  if (needed > registers)
    return emitError() << "#moe.cpu_config: a " << microRows << " x " << microVectors
                       << " micro-tile needs " << needed << " vector registers ("
                       << microRows * microVectors << " accumulators, " << microVectors
                       << " right-operand vectors, 1 broadcast), but registers = " << registers;
  if (rowBlock < microRows || rowBlock % microRows != 0)
    return emitError() << "#moe.cpu_config needs row_block to be a positive multiple of "
                          "micro_rows ("
                       << microRows << "), got " << rowBlock;
  int64_t tile = microVectors * (vectorBits / 32);
  if (colBlock < tile || colBlock % tile != 0)
    return emitError() << "#moe.cpu_config needs col_block to be a positive multiple of "
                          "micro_vectors * vector_bits / 32 ("
                       << tile << "), got " << colBlock;
  if (prefetchRows < 0)
    return emitError() << "#moe.cpu_config needs prefetch_rows >= 0, got " << prefetchRows;
  if (bf16Dot && vectorBits != 512)
    return emitError() << "#moe.cpu_config: bf16_dot (AVX512_BF16) needs vector_bits = 512, got "
                       << vectorBits;
  // AMX: tiles of 16 rows; the panel's vectors are its tiles of 16 columns.
  if (amx && !bf16Dot)
    return emitError() << "#moe.cpu_config: amx needs bf16_dot (the pairwise packed weights)";
  if (fp8Dot && !bf16Dot)
    return emitError() << "#moe.cpu_config: fp8_dot needs bf16_dot (the FP8 codes become bf16 "
                          "pairs for the dot product)";
  if (int8Dot == Int8Dot::vpdpbusd && vectorBits == 128)
    return emitError() << "#moe.cpu_config: int8_dot = vpdpbusd needs vector_bits = 512 "
                          "(AVX512_VNNI) or 256 (AVX-VNNI), got 128";
  if (int8Dot == Int8Dot::vpmaddubsw && vectorBits != 256)
    return emitError() << "#moe.cpu_config: int8_dot = vpmaddubsw needs vector_bits = 256 "
                          "(AVX2), got "
                       << vectorBits;
  if (amx && rowBlock % 16 != 0)
    return emitError() << "#moe.cpu_config: amx needs row_block to be a multiple of 16 (the "
                          "rows of a tile), got "
                       << rowBlock;
  return success();
}

std::string CpuConfigAttr::getTag() const {
  return "v" + std::to_string(getVectorBits()) + "_" + std::to_string(getMicroRows()) + "x" +
         std::to_string(getMicroVectors()) + "_b" + std::to_string(getRowBlock()) + "x" +
         std::to_string(getColBlock()) + "_p" + std::to_string(getPrefetchRows());
}

LogicalResult GpuConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                    GpuEngine engine, int64_t bigTileRows, int64_t splitK,
                                    int64_t stages, int64_t groupsInFlight) {
  if (bigTileRows < 0)
    return emitError() << "#moe.gpu_config needs big_tile_rows >= 0, got " << bigTileRows;
  if (bigTileRows > 0 && engine != GpuEngine::wgmma)
    return emitError() << "#moe.gpu_config: big_tile_rows = " << bigTileRows
                       << " needs engine = wgmma (128-row tiles are two wgmma warpgroups), got "
                          "engine = "
                       << stringifyGpuEngine(engine);
  if (splitK < 0 || splitK > 1024)
    return emitError() << "#moe.gpu_config needs split_k in 0..1024 (0 = chosen from the "
                          "shape), got "
                       << splitK;
  if (stages != 0 && (stages < kMinGpuStages || stages > kMaxGpuStages))
    return emitError() << "#moe.gpu_config needs stages = 0 (the defaults) or in "
                       << kMinGpuStages << ".." << kMaxGpuStages << ", got " << stages;
  if (groupsInFlight != 0 && groupsInFlight != 1)
    return emitError() << "#moe.gpu_config needs groups_in_flight = 0 or 1, got "
                       << groupsInFlight;
  return success();
}

GpuConfigAttr GpuConfigAttr::getDefault(MLIRContext *context) {
  return GpuConfigAttr::get(context, GpuEngine::mma_sync, /*bigTileRows=*/0, /*splitK=*/0,
                            /*stages=*/0, /*groupsInFlight=*/1);
}

//===----------------------------------------------------------------------===//
// QuantAttr
//===----------------------------------------------------------------------===//

static ParseResult parseQuantParams(AsmParser &parser, QuantKind &kind,
                                    SmallVector<int64_t> &block, int64_t &group,
                                    bool &zeroPoint, bool &int8Activations) {
  StringRef keyword;
  SMLoc at = parser.getCurrentLocation();
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<QuantKind> parsed = symbolizeQuantKind(keyword);
  if (!parsed)
    return parser.emitError(at) << "expected a quantization format (fp8_e4m3 or int4), got '"
                                << keyword << "'";
  kind = *parsed;
  group = 0;
  zeroPoint = false;
  int8Activations = false;
  while (succeeded(parser.parseOptionalComma())) {
    SMLoc fieldAt = parser.getCurrentLocation();
    if (parser.parseKeyword(&keyword))
      return failure();
    if (keyword == "block") {
      if (parser.parseEqual() ||
          parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
            int64_t v;
            if (parser.parseInteger(v))
              return failure();
            block.push_back(v);
            return success();
          }))
        return failure();
    } else if (keyword == "group") {
      if (parser.parseEqual() || parser.parseInteger(group))
        return failure();
    } else if (keyword == "zero_point") {
      zeroPoint = true;
    } else if (keyword == "int8_activations") {
      int8Activations = true;
    } else {
      return parser.emitError(fieldAt) << "expected 'block', 'group', 'zero_point' or "
                                          "'int8_activations', got '"
                                       << keyword << "'";
    }
  }
  return success();
}

static void printQuantParams(AsmPrinter &printer, QuantKind kind,
                             ArrayRef<int64_t> block, int64_t group, bool zeroPoint,
                             bool int8Activations) {
  printer << stringifyQuantKind(kind);
  if (!block.empty()) {
    printer << ", block = [";
    llvm::interleaveComma(block, printer);
    printer << "]";
  }
  if (group)
    printer << ", group = " << group;
  if (zeroPoint)
    printer << ", zero_point";
  if (int8Activations)
    printer << ", int8_activations";
}

LogicalResult QuantAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                QuantKind kind, ArrayRef<int64_t> block, int64_t group,
                                bool zeroPoint, bool int8Activations) {
  if (kind == QuantKind::fp8_e4m3) {
    if (block.size() != 2)
      return emitError() << "#moe.quant<fp8_e4m3> needs block = [BK, BN] (two sizes), got "
                         << block.size() << " size(s)";
    if (block[0] < 1 || block[1] < 1)
      return emitError() << "#moe.quant<fp8_e4m3> block sizes must be >= 1, got ["
                         << block[0] << ", " << block[1] << "]";
    if (group || zeroPoint)
      return emitError() << "#moe.quant<fp8_e4m3> takes no group or zero_point (one scale "
                            "per block)";
    if (int8Activations)
      return emitError() << "#moe.quant<fp8_e4m3> takes no int8_activations (a mode of int4 "
                            "weights)";
    return success();
  }
  if (!block.empty())
    return emitError() << "#moe.quant<int4> takes no block (one scale per group of k)";
  if (group < 1)
    return emitError() << "#moe.quant<int4> needs group = G >= 1, got " << group;
  return success();
}

Type QuantAttr::getStorageType() const {
  if (getKind() == QuantKind::fp8_e4m3)
    return Float8E4M3FNType::get(getContext());
  return IntegerType::get(getContext(), 4);
}

SmallVector<int64_t> QuantAttr::getScaleShape(ArrayRef<int64_t> weightShape) const {
  auto ceilDiv = [](int64_t a, int64_t b) {
    return ShapedType::isDynamic(a) ? ShapedType::kDynamic : (a + b - 1) / b;
  };
  SmallVector<int64_t> shape(weightShape);
  if (shape.size() != 3)
    return shape;
  if (getKind() == QuantKind::fp8_e4m3) {
    shape[1] = ceilDiv(shape[1], getBlock()[0]);
    shape[2] = ceilDiv(shape[2], getBlock()[1]);
  } else {
    shape[1] = ceilDiv(shape[1], getGroup());
  }
  return shape;
}
