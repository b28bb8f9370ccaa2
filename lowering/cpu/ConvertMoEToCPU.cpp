//===- ConvertMoEToCPU.cpp - moe ops -> upstream dialects --------------===//
//
// Lowers the moe chain ops (docs/spec.md §3.3) to linalg, tensor, scf,
// arith and math; layers are first decomposed into the chain. Numerics are
// exactly those of docs/spec.md §2-§3, computed in f32:
//
// * softmaxes subtract the maximum first;
// * top-k is "rank < k" with rank(e) = #{j : o_j > o_e or (o_j == o_e and
//   j < e)}, i.e. ties go to the lower index, and entries are ordered by rank;
// * MOESART training samples with Philox4x32-10 keyed by the seed (low word,
//   high word), counter (t, r, 0, 0), u = (out[0] >> 8) * 2^-24, cumulative
//   sums accumulated left to right in f32, renormalization p / (sum + 1e-10).
//
//===----------------------------------------------------------------------===//

#include "lowering/cpu/Passes.h"
#include "lowering/Activations.h"
#include "runtime/IndexErrors.h"
#include "lowering/Philox.h"
#include "lowering/RoutingBuilder.h"
#include "lowering/ScalarBuilder.h"
#include "lowering/cpu/ExpertKernels.h"

#include "dialect/MoEOps.h"
#include "passes/Passes.h"

#include "mlir/IR/TypeUtilities.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/xxhash.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>
#include <optional>

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "convert-moe-to-cpu"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_CONVERTMOETOCPU
#include "lowering/cpu/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

using IT = utils::IteratorType;

//===----------------------------------------------------------------------===//
// A small IR-emission helper around ImplicitLocOpBuilder.
//===----------------------------------------------------------------------===//

class Emitter : public ScalarBuilder {
public:
  explicit Emitter(ImplicitLocOpBuilder &b) : ScalarBuilder(b) {}

  // Tensors.
  Value dim(Value t, int64_t i) {
    auto type = cast<RankedTensorType>(t.getType());
    if (!type.isDynamicDim(i))
      return idx(type.getDimSize(i));
    return tensor::DimOp::create(b, t, i);
  }
  OpFoldResult dimOfr(Value t, int64_t i) {
    auto type = cast<RankedTensorType>(t.getType());
    if (!type.isDynamicDim(i))
      return b.getIndexAttr(type.getDimSize(i));
    return tensor::DimOp::create(b, t, i).getResult();
  }
  Value extract(Value t, ValueRange indices) {
    return tensor::ExtractOp::create(b, t, indices);
  }
  Value insert(Value v, Value t, ValueRange indices) {
    return tensor::InsertOp::create(b, v, t, indices);
  }
  Value empty(ArrayRef<OpFoldResult> sizes, Type elt) {
    return tensor::EmptyOp::create(b, sizes, elt);
  }
  Value filled(ArrayRef<OpFoldResult> sizes, Value scalar) {
    Value e = empty(sizes, scalar.getType());
    return linalg::FillOp::create(b, scalar, e).getResult(0);
  }

  /// scf.for lb..ub with iter_args; body returns the values to yield.
  ValueRange forLoop(Value lb, Value ub, ValueRange init,
                     function_ref<SmallVector<Value>(Emitter &, Value, ValueRange)> body) {
    auto loop = scf::ForOp::create(
        b, lb, ub, idx(1), init,
        [&](OpBuilder &nested, Location loc, Value iv, ValueRange args) {
          ImplicitLocOpBuilder nb(loc, nested);
          Emitter ne(nb);
          SmallVector<Value> yields = body(ne, iv, args);
          scf::YieldOp::create(nb, yields);
        });
    return loop.getResults();
  }

  /// scf.if with results of the given types.
  ValueRange ifElse(Value cond, TypeRange types,
                    function_ref<SmallVector<Value>(Emitter &)> thenBody,
                    function_ref<SmallVector<Value>(Emitter &)> elseBody) {
    auto ifOp = scf::IfOp::create(
        b, cond,
        [&](OpBuilder &nested, Location loc) {
          ImplicitLocOpBuilder nb(loc, nested);
          Emitter ne(nb);
          scf::YieldOp::create(nb, thenBody(ne));
        },
        [&](OpBuilder &nested, Location loc) {
          ImplicitLocOpBuilder nb(loc, nested);
          Emitter ne(nb);
          scf::YieldOp::create(nb, elseBody(ne));
        });
    assert(ifOp.getResultTypes() == types && "scf.if result types");
    (void)types;
    return ifOp.getResults();
  }

  /// A linalg.generic over `numDims` loops.
  Value generic(Type resultType, ValueRange inputs, Value init,
                ArrayRef<AffineMap> maps, ArrayRef<IT> iterators,
                function_ref<Value(Emitter &, ValueRange)> body) {
    auto op = linalg::GenericOp::create(
        b, TypeRange{resultType}, inputs, ValueRange{init}, maps, iterators,
        [&](OpBuilder &nested, Location loc, ValueRange args) {
          ImplicitLocOpBuilder nb(loc, nested);
          Emitter ne(nb);
          linalg::YieldOp::create(nb, body(ne, args));
        });
    return op.getResult(0);
  }

  AffineMap map(unsigned numDims, ArrayRef<unsigned> dims) {
    SmallVector<AffineExpr> exprs;
    for (unsigned d : dims)
      exprs.push_back(b.getAffineDimExpr(d));
    return AffineMap::get(numDims, 0, exprs, b.getContext());
  }

  /// C[m, n] = sum_k A[m, k] B[k, n]; loops ordered (m, k, n) so that the
  /// innermost loop walks B and C contiguously.
  Value matmul(Value a, Value bm) {
    Value init = filled({dimOfr(a, 0), dimOfr(bm, 1)}, cf32(0.0));
    return generic(init.getType(), {a, bm}, init,
                   {map(3, {0, 1}), map(3, {1, 2}), map(3, {0, 2})},
                   {IT::parallel, IT::reduction, IT::parallel},
                   [](Emitter &e, ValueRange args) {
                     return e.addf(args[2], e.mulf(args[0], args[1]));
                   });
  }

  /// rows[r, c] + bias[c].
  Value addRowBias(Value rows, Value bias) {
    Value init = empty({dimOfr(rows, 0), dimOfr(rows, 1)}, f32());
    return generic(init.getType(), {rows, bias}, init,
                   {map(2, {0, 1}), map(2, {1}), map(2, {0, 1})},
                   {IT::parallel, IT::parallel},
                   [](Emitter &e, ValueRange args) { return e.addf(args[0], args[1]); });
  }

  /// 2-D slice [offsets][sizes] of a tensor, with unit strides.
  Value slice2d(Value t, OpFoldResult r0, OpFoldResult c0, OpFoldResult rows,
                OpFoldResult cols) {
    OpFoldResult one = b.getIndexAttr(1);
    return tensor::ExtractSliceOp::create(b, t, ArrayRef<OpFoldResult>{r0, c0},
                                          ArrayRef<OpFoldResult>{rows, cols},
                                          ArrayRef<OpFoldResult>{one, one});
  }

  /// Expert e's matrix of a rank-3 weight [E, A, B] as a rank-2 [A, B] tensor.
  Value expertMatrix(Value w, Value e) {
    auto type = cast<RankedTensorType>(w.getType());
    OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
    SmallVector<OpFoldResult> offsets{e, zero, zero};
    SmallVector<OpFoldResult> sizes{one, dimOfr(w, 1), dimOfr(w, 2)};
    SmallVector<OpFoldResult> strides(3, one);
    auto resultType = RankedTensorType::get(
        {type.getDimSize(1), type.getDimSize(2)}, type.getElementType());
    return tensor::ExtractSliceOp::create(b, resultType, w, offsets, sizes, strides);
  }

  /// Expert e's vector of a rank-2 bias [E, A] as a rank-1 [A] tensor.
  Value expertVector(Value bias, Value e) {
    auto type = cast<RankedTensorType>(bias.getType());
    OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
    auto resultType = RankedTensorType::get({type.getDimSize(1)}, type.getElementType());
    return tensor::ExtractSliceOp::create(
        b, resultType, bias, ArrayRef<OpFoldResult>{e, zero},
        ArrayRef<OpFoldResult>{one, dimOfr(bias, 1)}, ArrayRef<OpFoldResult>{one, one});
  }

  /// Philox4x32-10 with key (k0, k1) and counter (c0, c1, 0, 0); returns the
  /// uniform u = (out[0] >> 8) * 2^-24 as f32.
  Value philoxUniform(Value k0, Value k1, Value c0, Value c1) {
    std::array<Value, 4> out =
        buildPhilox4x32x10(b, b.getLoc(), {k0, k1}, {c0, c1, ci32(0), ci32(0)});
    return buildPhiloxUniform(b, b.getLoc(), out[0]);
  }
};



//===----------------------------------------------------------------------===//
// Memref-level views for the CPU kernels (lowering/cpu/ExpertKernels.h)
//===----------------------------------------------------------------------===//

/// A read-only memref view of a tensor: any offset and outer strides, unit
/// innermost stride (every tensor the lowering produces or receives has
/// contiguous rows), so that the view never forces a copy.
static Value asBuffer(ImplicitLocOpBuilder &b, Value tensor) {
  auto type = cast<RankedTensorType>(tensor.getType());
  SmallVector<int64_t> strides(type.getRank(), ShapedType::kDynamic);
  if (!strides.empty())
    strides.back() = 1;
  auto layout = StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, strides);
  auto memrefType = MemRefType::get(type.getShape(), type.getElementType(), layout);
  return bufferization::ToBufferOp::create(b, memrefType, tensor, /*read_only=*/true);
}

/// A new 64-byte aligned buffer of `sizes` (static where known).
static Value allocBuffer(ImplicitLocOpBuilder &b, ArrayRef<OpFoldResult> sizes, Type elt) {
  SmallVector<int64_t> shape;
  SmallVector<Value> dynamic;
  for (OpFoldResult s : sizes) {
    if (auto attr = dyn_cast<Attribute>(s)) {
      shape.push_back(cast<IntegerAttr>(attr).getInt());
    } else {
      shape.push_back(ShapedType::kDynamic);
      dynamic.push_back(cast<Value>(s));
    }
  }
  return memref::AllocOp::create(b, MemRefType::get(shape, elt), dynamic,
                                 b.getI64IntegerAttr(64));
}

/// The tensor of a buffer the kernels wrote, cast to `type`.
static Value asTensor(ImplicitLocOpBuilder &b, Value buffer, Type type) {
  auto memrefType = cast<MemRefType>(buffer.getType());
  auto tensorType = RankedTensorType::get(memrefType.getShape(), memrefType.getElementType());
  Value t = bufferization::ToTensorOp::create(b, tensorType, buffer, b.getUnitAttr(),
                                              b.getUnitAttr());
  return tensor::CastOp::create(b, type, t);
}

/// Where the CPU kernels go: outlined into private functions of `module`
/// (one per kernel variant, shared by every layer), or inline when the pass
/// does not own the module (a nested function pass). Expert weights are
/// packed (module globals) only when `packWeights` and the module is ours.
struct KernelSite {
  Operation *module = nullptr;
  bool packWeights = false;
  /// Validate index data (offsets, positions) of the chain ops at run time.
  bool checkIndices = true;
  /// How the op being lowered emits its GEMMs (vector width, blocking, the
  /// AVX512_BF16 dot product): its moe.cpu_config (cpu::cpuConfigOf).
  CpuConfigAttr config;

  KernelSite configuredFor(Operation *op) const {
    KernelSite site = *this;
    site.config = cpu::cpuConfigOf(op);
    return site;
  }
  /// `name` for a kernel whose body depends on the configuration.
  std::string kernelName(const Twine &name) const {
    return (name + "_" + config.getTag()).str();
  }
};

/// The arguments of an outlined kernel: each one, optional ones included,
/// remembers its position as it is added, so that the body finds it there
/// (`at`) instead of counting which optional arguments came before.
class KernelArgs {
public:
  KernelArgs(std::initializer_list<Value> required) : values(required) {}
  /// Adds `v` when it is not null; its position, or none.
  std::optional<unsigned> addOptional(Value v) {
    if (!v)
      return std::nullopt;
    values.push_back(v);
    return values.size() - 1;
  }
  void append(ValueRange vs) { llvm::append_range(values, vs); }
  /// The kernel's argument at `position` (null for an absent one).
  static Value at(ValueRange args, std::optional<unsigned> position) {
    return position ? args[*position] : Value();
  }
  operator ValueRange() const { return values; }

private:
  SmallVector<Value> values;
};

static void kernel(ImplicitLocOpBuilder &b, const KernelSite &site, StringRef name,
                   ValueRange args, function_ref<void(ImplicitLocOpBuilder &, ValueRange)> body) {
  if (site.module)
    cpu::callKernel(b, site.module, name, args, body);
  else
    body(b, args);
}

/// A run-time check: when `ok` is false, call the CPU runtime's
/// moeCpuIndexError(kind) (runtime/cpu/CpuRuntime.h: one line on stderr,
/// exit code 1).
static ModuleOp enclosingModule(ImplicitLocOpBuilder &b) {
  return b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
}

/// Declares the CPU runtime's function `name` (runtime/cpu/CpuRuntime.h)
/// in `module` unless it is there. `module` is null inside a kernel body
/// under construction (call enclosingModule before building nested ops:
/// their blocks are not attached yet); the caller outside declared it.
static void declareRuntimeFunction(ImplicitLocOpBuilder &b, ModuleOp module, StringRef name,
                                   TypeRange inputs) {
  if (module)
    cpu::declareFunction(b, b.getLoc(), module, name, b.getFunctionType(inputs, {}));
}

/// `module` receives the runtime function's declaration (declareRuntimeFunction).
static void emitIndexCheck(ImplicitLocOpBuilder &b, ModuleOp module, Value ok, int32_t kind) {
  StringRef name = "moeCpuIndexError";
  declareRuntimeFunction(b, module, name, {b.getI32Type()});
  Value bad = arith::XOrIOp::create(b, ok, arith::ConstantOp::create(b, b.getBoolAttr(true)));
  scf::IfOp::create(b, bad, [&](OpBuilder &nested, Location loc) {
    Value code = arith::ConstantOp::create(nested, loc, nested.getI32IntegerAttr(kind));
    func::CallOp::create(nested, loc, name, TypeRange{}, ValueRange{code});
    scf::YieldOp::create(nested, loc);
  });
}

/// AMX needs the kernel's permission for the tile state, once per process:
/// moeCpuRequestAmx() (runtime/cpu/CpuRuntime.h) asks for it the first
/// time (one error line and exit code 1 if it is refused).
static void emitRequestAmx(ImplicitLocOpBuilder &b, ModuleOp module) {
  StringRef name = "moeCpuRequestAmx";
  declareRuntimeFunction(b, module, name, {});
  func::CallOp::create(b, name, TypeRange{}, ValueRange{});
}

/// A run-time check of an expert index: when `ok` is false, call
/// moeCpuExpertIndexError(kind, token, slot, expert, numExperts) (one line
/// naming the op and the value, exit code 1).
static void emitExpertIndexCheck(ImplicitLocOpBuilder &b, ModuleOp module, Value ok,
                                 int32_t kind, Value token, Value slot, Value expert,
                                 int64_t numExperts) {
  StringRef name = "moeCpuExpertIndexError";
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  declareRuntimeFunction(b, module, name, {i32, i64, i64, i64, i64});
  Value bad = arith::XOrIOp::create(b, ok, arith::ConstantOp::create(b, b.getBoolAttr(true)));
  scf::IfOp::create(b, bad, [&](OpBuilder &nested, Location loc) {
    auto toI64 = [&](Value v) -> Value {
      if (v.getType().isIndex())
        return arith::IndexCastOp::create(nested, loc, i64, v);
      return arith::ExtSIOp::create(nested, loc, i64, v);
    };
    SmallVector<Value> args{
        arith::ConstantOp::create(nested, loc, nested.getI32IntegerAttr(kind)), toI64(token),
        toI64(slot), toI64(expert),
        arith::ConstantOp::create(nested, loc, nested.getI64IntegerAttr(numExperts))};
    func::CallOp::create(nested, loc, name, TypeRange{}, args);
    scf::YieldOp::create(nested, loc);
  });
}

static Value memDim(ImplicitLocOpBuilder &b, Value memref, int64_t i) {
  return memref::DimOp::create(b, memref, i);
}

/// A grouped GEMM over kernel arguments laid out (A, B, offsets, C, ...):
/// groups from the offsets, K from A, the columns from C.
static cpu::GroupedGemm groupedGemmOf(ImplicitLocOpBuilder &b, const GroupedGemmDesc &desc,
                                      ValueRange v, bool packed, bool dot,
                                      CpuConfigAttr config) {
  cpu::GroupedGemm gemm;
  gemm.desc = desc;
  gemm.config = config;
  gemm.a = v[0];
  gemm.b = v[1];
  gemm.bPacked = packed;
  gemm.bf16Dot = dot;
  gemm.groupOffsets = v[2];
  gemm.numGroups =
      arith::SubIOp::create(b, memDim(b, v[2], 0), arith::ConstantIndexOp::create(b, 1));
  gemm.reduction = memDim(b, v[0], 1);
  gemm.columns = memDim(b, v[3], 1);
  gemm.c = v[3];
  return gemm;
}

/// out = x Wr (+ br) for every row of x: the router kernel (one group),
/// f32 accumulation, stored in out's element type.
static void emitRouter(ImplicitLocOpBuilder &b, const KernelSite &site, Value x, Value wr,
                       Value br, Value out) {
  KernelArgs args{x, wr, out};
  std::optional<unsigned> biasAt = args.addOptional(br);
  kernel(b, site, site.kernelName(br ? "__moe_cpu_router_bias" : "__moe_cpu_router"), args,
         [&](ImplicitLocOpBuilder &b, ValueRange v) {
           Value res = v[2], bias = KernelArgs::at(v, biasAt);
           cpu::GroupedGemm gemm;
           gemm.desc.weights = GemmWeights::shared;
           gemm.desc.aType = getElementTypeOrSelf(v[0].getType());
           gemm.desc.bType = getElementTypeOrSelf(v[1].getType());
           gemm.desc.cType = getElementTypeOrSelf(res.getType());
           if (bias)
             gemm.desc.epilogue.then(EpilogueStep::bias);
           gemm.config = site.config;
           gemm.a = v[0];
           gemm.b = v[1];
           gemm.numRows = memDim(b, v[0], 0);
           gemm.reduction = memDim(b, v[0], 1);
           gemm.columns = memDim(b, v[1], 1);
           gemm.bias = bias;
           gemm.c = res;
           cpu::emitGroupedGemm(b, gemm);
         });
}

/// The weights a grouped GEMM reads: packed once (module globals) when
/// possible, else as they are.
static bool canPack(const KernelSite &site, Value w) {
  return site.module && site.packWeights && cast<MemRefType>(w.getType()).hasStaticShape();
}

/// `transposed`: `w` [G, N, K] is packed as its transpose (the backward's
/// dX = dZ W^T reads the forward's weights so).
/// With `scales` (FP8 block-scaled weights of `quant`), their panel scales
/// are packed too (cpu::declarePackedScales) and returned in `packedScales`.
/// int4 weights (#moe.quant<int4>) pack their scales and, with `zeroPoints`,
/// their zero points (returned in `packedZeroPoints`) per group of K.
static Value prepareWeights(ImplicitLocOpBuilder &b, const KernelSite &site, Value w,
                            bool gated, bool vnni, bool transposed = false,
                            Value scales = Value(), QuantAttr quant = QuantAttr(),
                            Value *packedScales = nullptr, Value zeroPoints = Value(),
                            Value *packedZeroPoints = nullptr) {
  cpu::PackedWeights pw =
      cpu::declarePackedWeights(b, site.module, w, site.config, gated, vnni, transposed);
  // The format's block sizes and kernel-name part (scales come with every
  // quantized format, zero points with int4's zero_point).
  GroupedGemmDesc format;
  format.setQuant(quant);
  const int64_t blockK = format.blockK, blockN = format.blockN;
  assert(!scales == !quant && !zeroPoints == !format.zeroPoint &&
         "the scales and zero points of the quantization");
  SmallVector<Value> args{w, pw.packed, pw.key};
  if (scales) {
    Value ps = cpu::declarePackedScales(b, site.module, w, site.config, gated, blockK);
    *packedScales = ps;
    args.append({scales, ps});
  }
  if (zeroPoints) {
    Value pz = cpu::declarePackedScales(b, site.module, w, site.config, gated, blockK,
                                        /*zeroPoints=*/true);
    *packedZeroPoints = pz;
    args.append({zeroPoints, pz});
  }
  std::string name = site.kernelName(Twine("__moe_cpu_pack") + (gated ? "_gated" : "") +
                                     (vnni ? "_vnni" : "") + (transposed ? "_transposed" : "") +
                                     format.formatSuffix());
  kernel(b, site, name, args, [&](ImplicitLocOpBuilder &b, ValueRange v) {
    cpu::emitPackWeights(b, v[0], v[1], v[2], site.config, gated, vnni, transposed,
                         v.size() > 3 ? v[3] : Value(), v.size() > 3 ? v[4] : Value(), blockK,
                         blockN, v.size() > 5 ? v[5] : Value(), v.size() > 5 ? v[6] : Value());
  });
  return pw.packed;
}

/// With the configuration's amx: the pair count of weights packed pairwise
/// (prepareWeights with vnni; static), which the AMX tile shapes need; 0
/// without amx or without packed weights.
static int64_t amxPairs(const KernelSite &site, Value vnniPacked) {
  if (!site.config.getAmx() || !vnniPacked)
    return 0;
  return cast<MemRefType>(vnniPacked.getType()).getDimSize(2);
}

/// `a` ([rows, K], bf16 or f16) widened to f32 in a new buffer (exact), so
/// that a GEMM reading it broadcasts f32 left-operand elements: one load
/// per row and k in the micro-kernel instead of a load, an extension and a
/// broadcast (the extension would otherwise be repeated for every column
/// tile, and at decode it competes with the FMAs for the same ports).
static Value widenToF32(ImplicitLocOpBuilder &b, const KernelSite &site, Value a) {
  Value wide = allocBuffer(b, {memref::getMixedSize(b, b.getLoc(), a, 0),
                               memref::getMixedSize(b, b.getLoc(), a, 1)},
                           b.getF32Type());
  int64_t lanes = site.config.getLanes();
  kernel(b, site, (Twine("__moe_cpu_widen_v") + Twine(site.config.getVectorBits())).str(),
         {a, wide}, [&](ImplicitLocOpBuilder &b, ValueRange v) {
           Value c0 = arith::ConstantIndexOp::create(b, 0), c1 = arith::ConstantIndexOp::create(b, 1);
           Value rows = memDim(b, v[0], 0), cols = memDim(b, v[0], 1);
           scf::ParallelOp::create(
               b, ValueRange{c0}, ValueRange{rows}, ValueRange{c1},
               [&](OpBuilder &nested, Location loc, ValueRange ivs) {
                 ImplicitLocOpBuilder nb(loc, nested);
                 scf::ForOp::create(
                     nb, c0, cols, arith::ConstantIndexOp::create(nb, lanes), ValueRange{},
                     [&](OpBuilder &colBuilder, Location loc, Value col, ValueRange) {
                       ImplicitLocOpBuilder cb(loc, colBuilder);
                       Value mask = cpu::columnMask(cb, col, cols, lanes);
                       cpu::storeVector(cb, cpu::loadF32Vector(cb, v[0], {ivs[0], col}, mask),
                                        v[1], {ivs[0], col}, mask);
                       scf::YieldOp::create(cb);
                     });
               });
         });
  return wide;
}

/// The int8-activation mode's quantization of the left operand `a` ([rows,
/// K], any float type) per row and group of `group` consecutive k
/// (docs/spec.md §2.1): s = max|a| / 127 in f32 (NaN propagates), q = a / s
/// rounded to nearest even, 0 where s is not a finite positive number (a
/// zero group; a non-finite s makes the group's products NaN through s).
/// With `codes` set: the codes as i8 in a new memref<rows x K8 x i8> (K8 = K
/// rounded up to 8, zero-padded) and their scales and sums per row and
/// group (f32, exact) for the int8 dot product; else the values q * s as
/// f32 in a new [rows, K] buffer for the FMA path. Every row on its own
/// core; two passes over each group (its maximum, then its codes).
struct QuantizedActivations {
  Value codes, scales, sums; // or `values` alone
  Value values;
};
static QuantizedActivations quantizeActivations(ImplicitLocOpBuilder &b, const KernelSite &site,
                                                Value a, int64_t group, bool codes) {
  Value rows = memDim(b, a, 0), red = memDim(b, a, 1);
  auto ceilTo = [&](ImplicitLocOpBuilder &ib, Value x, int64_t m) -> Value {
    return arith::MulIOp::create(
        ib, arith::CeilDivSIOp::create(ib, x, arith::ConstantIndexOp::create(ib, m)),
        arith::ConstantIndexOp::create(ib, m));
  };
  Value numGroups = arith::CeilDivSIOp::create(b, red, arith::ConstantIndexOp::create(b, group));
  QuantizedActivations q;
  SmallVector<Value> args{a};
  if (codes) {
    q.codes = allocBuffer(b, {OpFoldResult(rows), OpFoldResult(ceilTo(b, red, 8))}, b.getI8Type());
    q.scales = allocBuffer(b, {OpFoldResult(rows), OpFoldResult(numGroups)}, b.getF32Type());
    q.sums = allocBuffer(b, {OpFoldResult(rows), OpFoldResult(numGroups)}, b.getF32Type());
    args.append({q.codes, q.scales, q.sums});
  } else {
    q.values = allocBuffer(b, {OpFoldResult(rows), OpFoldResult(red)}, b.getF32Type());
    args.push_back(q.values);
  }
  const int64_t lanes = site.config.getLanes();
  std::string name = (Twine("__moe_cpu_quantize_a8_") + (codes ? "codes" : "values") + "_g" +
                      Twine(group) + "_v" + Twine(site.config.getVectorBits()))
                         .str();
  kernel(b, site, name, args, [&](ImplicitLocOpBuilder &b, ValueRange v) {
    Value c0 = arith::ConstantIndexOp::create(b, 0), c1 = arith::ConstantIndexOp::create(b, 1);
    Value step = arith::ConstantIndexOp::create(b, lanes);
    Value rows = memDim(b, v[0], 0), red = memDim(b, v[0], 1);
    Value numGroups = arith::CeilDivSIOp::create(b, red, arith::ConstantIndexOp::create(b, group));
    VectorType vt = VectorType::get({lanes}, b.getF32Type());
    auto i32v = VectorType::get({lanes}, b.getI32Type());
    auto i8v = VectorType::get({lanes}, b.getI8Type());
    scf::ParallelOp::create(
        b, ValueRange{c0}, ValueRange{rows}, ValueRange{c1},
        [&](OpBuilder &nested, Location loc, ValueRange ivs) {
          ImplicitLocOpBuilder rb(loc, nested);
          Value row = ivs[0];
          scf::ForOp::create(
              rb, c0, numGroups, c1, ValueRange{},
              [&](OpBuilder &gBuilder, Location loc, Value kb, ValueRange) {
                ImplicitLocOpBuilder gb(loc, gBuilder);
                Value k0 = arith::MulIOp::create(gb, kb, arith::ConstantIndexOp::create(gb, group));
                Value k1 = arith::MinSIOp::create(
                    gb, red,
                    arith::AddIOp::create(gb, k0, arith::ConstantIndexOp::create(gb, group)));
                auto load = [&](ImplicitLocOpBuilder &cb, Value col) {
                  return cpu::loadF32Vector(cb, v[0], {row, col},
                                            cpu::columnMask(cb, col, k1, lanes));
                };
                // max |a| over the group (maximumf: a NaN propagates).
                Value zero = arith::ConstantOp::create(gb, vt, DenseElementsAttr::get(vt, 0.0f));
                auto maxLoop = scf::ForOp::create(
                    gb, k0, k1, step, ValueRange{zero},
                    [&](OpBuilder &cBuilder, Location loc, Value col, ValueRange acc) {
                      ImplicitLocOpBuilder cb(loc, cBuilder);
                      Value x = math::AbsFOp::create(cb, load(cb, col));
                      scf::YieldOp::create(cb,
                                           ValueRange{arith::MaximumFOp::create(cb, acc[0], x)});
                    });
                Value amax = vector::ReductionOp::create(gb, vector::CombiningKind::MAXIMUMF,
                                                         maxLoop.getResult(0));
                Value s = arith::DivFOp::create(
                    gb, amax, arith::ConstantOp::create(gb, gb.getF32FloatAttr(127.0f)));
                Value finitePositive = arith::AndIOp::create(
                    gb,
                    arith::CmpFOp::create(gb, arith::CmpFPredicate::OGT, s,
                                          arith::ConstantOp::create(gb, gb.getF32FloatAttr(0.0f))),
                    arith::CmpFOp::create(
                        gb, arith::CmpFPredicate::OLT, s,
                        arith::ConstantOp::create(
                            gb, gb.getF32FloatAttr(std::numeric_limits<float>::infinity()))));
                Value sVec = vector::BroadcastOp::create(gb, vt, s);
                Value zeroI = arith::ConstantOp::create(
                    gb, i32v, DenseElementsAttr::get(i32v, gb.getI32IntegerAttr(0)));
                // The codes' store limit: the group rounded up to 8 (the
                // padding of the last group's word, zeros).
                Value storeEnd = codes ? ceilTo(gb, k1, 8) : k1;
                auto codeLoop = scf::ForOp::create(
                    gb, k0, k1, step, ValueRange{zeroI},
                    [&](OpBuilder &cBuilder, Location loc, Value col, ValueRange acc) {
                      ImplicitLocOpBuilder cb(loc, cBuilder);
                      Value x = math::RoundEvenOp::create(
                          cb, arith::DivFOp::create(cb, load(cb, col), sVec));
                      x = arith::SelectOp::create(cb, finitePositive, x, zero);
                      Value mask = cpu::columnMask(cb, col, storeEnd, lanes);
                      if (!codes) {
                        vector::MaskedStoreOp::create(cb, v[1], ValueRange{row, col}, mask,
                                                      arith::MulFOp::create(cb, x, sVec));
                        scf::YieldOp::create(cb, acc);
                        return;
                      }
                      Value qi = arith::FPToSIOp::create(cb, i32v, x);
                      vector::MaskedStoreOp::create(cb, v[1], ValueRange{row, col}, mask,
                                                    arith::TruncIOp::create(cb, i8v, qi));
                      scf::YieldOp::create(cb, ValueRange{arith::AddIOp::create(cb, acc[0], qi)});
                    });
                if (codes) {
                  memref::StoreOp::create(gb, s, v[2], ValueRange{row, kb});
                  Value sum = vector::ReductionOp::create(gb, vector::CombiningKind::ADD,
                                                          codeLoop.getResult(0));
                  memref::StoreOp::create(gb, arith::SIToFPOp::create(gb, gb.getF32Type(), sum),
                                          v[3], ValueRange{row, kb});
                }
                scf::YieldOp::create(gb);
              });
        });
  });
  return q;
}

/// The expert FFNs over plan rows grouped by expert (docs/spec.md §2-§3,
/// numerics for T = bf16/f16 included):
///   h[r]   = act(A[row(r)] W1[g] + b1[g]) (gated: act(u[:H]) * u[H:]),
///            rounded to the element type of A;
///   out[r] = (h[r] W2[g] + b2[g]) * rowScale[r].
/// `rowMap` (optional) is GEMM1's gather; `rowScale` (optional, f32 per plan
/// row) is the routed weight; `out` receives the result in its own element
/// type.
/// With `quant` (#moe.quant, docs/spec.md §2.1), w1 and w2 hold E4M3 or
/// int4 codes, s1, s2 their scales and z1, z2 (int4 with zero_point) their
/// zero points: the GEMMs dequantize B exactly as they load it
/// (cpu::GroupedGemm::bScales) and compute in f32, the tokens widened to
/// f32 as for bf16/f16 data without the dot product.
static void emitExpertFFN(ImplicitLocOpBuilder &b, const KernelSite &site, Value a,
                          Value rowMap, Value offsets, Value w1, Value w2, Value b1, Value b2,
                          ActivationAttr activation, Value numRows, Value rowScale,
                          Value out, Value s1 = Value(), Value s2 = Value(),
                          QuantAttr quant = QuantAttr(), Value z1 = Value(),
                          Value z2 = Value()) {
  assert((!quant || (s1 && s2)) && "quantized weights come with their scales");
  const bool int4 = quant && quant.getKind() == QuantKind::int4;
  assert((int4 && quant.getZeroPoint()) == (z1 && z2) && "zero points of int4 weights");
  Type elt = cast<MemRefType>(a.getType()).getElementType();
  Activation act = activation.getValue();
  bool gated = activation.isGated();
  // Packed weights where possible; bf16 with the dot product packs pairwise;
  // int4 two rows to a byte, which needs an even group (a byte in one group).
  bool packable4 = !int4 || quant.getGroup() % 2 == 0;
  bool packed1 = packable4 && canPack(site, w1), packed2 = packable4 && canPack(site, w2);
  // int4 from packed panels (bf16 tokens) through the dot product too:
  // its bytes become bf16 pairs in registers (cpu::GroupedGemm::bf16Dot);
  // FP8 with the configuration's fp8_dot and an even block of K (a pair of
  // rows in one block): its codes become their exact bf16s by byte lookups.
  const bool fp8 = quant && !int4;
  // The int8-activation mode: the GEMMs read the activations' int8
  // quantization, its codes on the configuration's integer dot product
  // (packed weights, groups of whole 8-k words), else its values on the
  // FMA path.
  const bool int8Act = int4 && quant.getInt8Activations();
  const bool int8Dot =
      int8Act && site.config.getInt8Dot() != Int8Dot::none && quant.getGroup() % 8 == 0;
  // The kernel names say which dot product (two 256-bit configurations
  // differ only in it).
  const std::string int8DotName =
      "_" + stringifyInt8Dot(site.config.getInt8Dot()).str();
  const bool int8Dot1 = int8Dot && packed1, int8Dot2 = int8Dot && packed2;
  bool dot = !int8Act && site.config.getBf16Dot() && elt.isBF16() &&
             (cast<MemRefType>(w1.getType()).getElementType().isBF16() || int4 ||
              (fp8 && site.config.getFp8Dot() && quant.getBlock()[0] % 2 == 0));
  bool dot1 = dot && packed1, dot2 = dot && packed2;
  // FP8 packed: the panels hold the codes and the scales become panel
  // scales (applied per block of K); unpacked: each weight is dequantized
  // exactly as it is loaded.
  Value s1k = s1, s2k = s2, z1k = z1, z2k = z2;
  Value w1k = packed1 ? prepareWeights(b, site, w1, gated, (dot1 && !int4) || int8Dot1, false,
                                       s1, quant, &s1k, z1, &z1k)
                      : w1;
  Value w2k = packed2 ? prepareWeights(b, site, w2, /*gated=*/false, (dot2 && !int4) || int8Dot2,
                                       false, s2, quant, &s2k, z2, &z2k)
                      : w2;
  // Left operands of a narrow type reach the FMA micro-kernels as f32: the
  // tokens widened once, and h kept in f32 after its rounding to the
  // element type (the same values; the dot product reads them narrow).
  // (The int8-activation mode reads the quantization of the tokens and of
  // h as stored, rounded to the element type.)
  bool widen1 = !int8Act && !elt.isF32() && !dot1, widen2 = !int8Act && !elt.isF32() && !dot2;
  // AMX: the dot-product GEMMs on the tile unit; their tile shapes need the
  // (static) pair count of the packed weights, which the kernel names carry.
  int64_t pairs1 = dot1 && !quant ? amxPairs(site, w1k) : 0,
          pairs2 = dot2 && !quant ? amxPairs(site, w2k) : 0;
  if (pairs1 || pairs2)
    emitRequestAmx(b, enclosingModule(b));
  if (widen1)
    a = widenToF32(b, site, a);
  QuantizedActivations qa1;
  if (int8Act) {
    qa1 = quantizeActivations(b, site, a, quant.getGroup(), int8Dot1);
    a = int8Dot1 ? qa1.codes : qa1.values;
  }
  Value h = allocBuffer(b, {OpFoldResult(numRows), memref::getMixedSize(b, b.getLoc(), w2, 1)},
                        widen2 ? b.getF32Type() : elt);

  // What the two GEMMs compute (lowering/GroupedGemm.h): h is rounded to
  // the element type even when it is kept in f32 for the FMA kernels.
  Type wElt = cast<MemRefType>(w1.getType()).getElementType();
  GroupedGemmDesc desc1 = expertGemm1(rowMap != nullptr, act, b1 != nullptr,
                                      getElementTypeOrSelf(a.getType()), wElt, elt);
  GroupedGemmDesc desc2 = expertGemm2(b2 != nullptr, rowScale != nullptr, /*combine=*/false,
                                      elt, wElt, getElementTypeOrSelf(out.getType()));
  // FP8: the block sizes, and whether every vector the micro-kernels load
  // lies in one block (then one scale per vector; GEMM1's up columns start
  // at H, so gated GEMMs need H to be a multiple of the vector too).
  bool vectorScale1 = false, vectorScale2 = false;
  std::string quantSuffix1, quantSuffix2;
  if (int4) {
    // One scale (and zero point) per group of K and column: nothing to
    // choose per vector.
    for (GroupedGemmDesc *d : {&desc1, &desc2})
      d->setQuant(quant);
    quantSuffix1 = quantSuffix2 = desc1.formatSuffix();
  } else if (quant) {
    for (GroupedGemmDesc *d : {&desc1, &desc2})
      d->setQuant(quant);
    int64_t lanes = site.config.getLanes();
    int64_t hidden = cast<MemRefType>(w2.getType()).getDimSize(1);
    bool aligned = desc1.blockN % lanes == 0;
    vectorScale1 = aligned && (!gated || (!ShapedType::isDynamic(hidden) && hidden % lanes == 0));
    vectorScale2 = aligned;
    std::string blocks = desc1.formatSuffix();
    // Packed panels carry a scale per column and block: no per-vector choice.
    quantSuffix1 = blocks + (vectorScale1 && !packed1 ? "_vs" : "");
    quantSuffix2 = blocks + (vectorScale2 && !packed2 ? "_vs" : "");
  }
  KernelArgs args1{a, w1k, offsets, h};
  std::optional<unsigned> mapAt = args1.addOptional(rowMap), bias1At = args1.addOptional(b1),
                          scales1At = args1.addOptional(s1k), zeros1At = args1.addOptional(z1k),
                          aScales1At = args1.addOptional(qa1.scales),
                          aSums1At = args1.addOptional(qa1.sums);
  std::string name1 = site.kernelName("__moe_cpu_gemm1_" + stringifyActivation(act) +
                                      (rowMap ? "_gather" : "") + (b1 ? "_bias" : "") +
                                      (packed1 ? "_packed" : "") + (dot1 ? "_bf16dot" : "") +
                                      (int8Dot1 ? int8DotName : "") +
                                      (pairs1 ? "_amx" + std::to_string(pairs1) : "") +
                                      (widen2 ? "_hround" : "") + quantSuffix1);
  kernel(b, site, name1, args1, [&](ImplicitLocOpBuilder &b, ValueRange v) {
    cpu::GroupedGemm gemm = groupedGemmOf(b, desc1, v, packed1, dot1, site.config);
    gemm.amx = pairs1 > 0;
    gemm.amxPairs = pairs1;
    gemm.aRowMap = KernelArgs::at(v, mapAt);
    gemm.bias = KernelArgs::at(v, bias1At);
    gemm.bScales = KernelArgs::at(v, scales1At);
    gemm.bZeroPoints = KernelArgs::at(v, zeros1At);
    gemm.fp8VectorScale = vectorScale1;
    gemm.int8Dot = int8Dot1;
    gemm.aScales = KernelArgs::at(v, aScales1At);
    gemm.aCodeSums = KernelArgs::at(v, aSums1At);
    cpu::emitGroupedGemm(b, gemm);
  });

  Value a2 = h;
  QuantizedActivations qa2;
  if (int8Act) {
    qa2 = quantizeActivations(b, site, h, quant.getGroup(), int8Dot2);
    a2 = int8Dot2 ? qa2.codes : qa2.values;
    desc2.aType = getElementTypeOrSelf(a2.getType());
  }
  KernelArgs args2{a2, w2k, offsets, out};
  std::optional<unsigned> scaleAt = args2.addOptional(rowScale),
                          bias2At = args2.addOptional(b2), scales2At = args2.addOptional(s2k),
                          zeros2At = args2.addOptional(z2k),
                          aScales2At = args2.addOptional(qa2.scales),
                          aSums2At = args2.addOptional(qa2.sums);
  std::string name2 =
      site.kernelName(Twine("__moe_cpu_gemm2") + (rowScale ? "_scaled" : "") +
                      (b2 ? "_bias" : "") + (packed2 ? "_packed" : "") + (dot2 ? "_bf16dot" : "") +
                      (int8Dot2 ? int8DotName : "") +
                      (pairs2 ? "_amx" + std::to_string(pairs2) : "") + quantSuffix2);
  kernel(b, site, name2, args2, [&](ImplicitLocOpBuilder &b, ValueRange v) {
    cpu::GroupedGemm gemm = groupedGemmOf(b, desc2, v, packed2, dot2, site.config);
    gemm.amx = pairs2 > 0;
    gemm.amxPairs = pairs2;
    gemm.rowWeights = KernelArgs::at(v, scaleAt);
    gemm.bias = KernelArgs::at(v, bias2At);
    gemm.bScales = KernelArgs::at(v, scales2At);
    gemm.bZeroPoints = KernelArgs::at(v, zeros2At);
    gemm.fp8VectorScale = vectorScale2;
    gemm.int8Dot = int8Dot2;
    gemm.aScales = KernelArgs::at(v, aScales2At);
    gemm.aCodeSums = KernelArgs::at(v, aSums2At);
    cpu::emitGroupedGemm(b, gemm);
  });
}

//===----------------------------------------------------------------------===//
// moe.route
//===----------------------------------------------------------------------===//

struct LowerRoute : public OpRewritePattern<RouteOp> {
  LowerRoute(MLIRContext *ctx, KernelSite site) : OpRewritePattern(ctx), baseSite(site) {}
  KernelSite baseSite;
  LogicalResult matchAndRewrite(RouteOp op, PatternRewriter &rewriter) const override {
    KernelSite site = baseSite.configuredFor(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter e(b);
    // o = x Wr + br: one group of T rows through the CPU GEMM kernel, f32
    // accumulation, stored in the logits' element type.
    Value tokens = e.dim(op.getInput(), 0);
    auto logitsType = cast<RankedTensorType>(op.getLogits().getType());
    Value logits = allocBuffer(b, {OpFoldResult(tokens), e.dimOfr(op.getRouterWeight(), 1)},
                               logitsType.getElementType());
    emitRouter(b, site, asBuffer(b, op.getInput()), asBuffer(b, op.getRouterWeight()),
               op.getRouterBias() ? asBuffer(b, op.getRouterBias()) : Value(), logits);
    rewriter.replaceOp(op, asTensor(b, logits, logitsType));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// moe.gate
//===----------------------------------------------------------------------===//

/// moe.gate's computation, in the outlined gate function: `logits` [T, E]
/// (and `selectionBias` [E], `seed` [] when present) -> `weights` [T, K],
/// `indices` [T, K] (K = `k`) and, with `loss`, the aux loss [] (memrefs). Each token
/// is routed by buildTokenRouting (lowering/RoutingBuilder.h, the code the
/// GPU gate kernel runs too), one token per iteration of an scf.forall; the
/// trimmed-lasso terms are summed afterwards in token order, so the result
/// does not depend on the number of threads.
static void emitGate(ImplicitLocOpBuilder &b, Value logits, Value selectionBias, Value seed,
                     RoutingAttrInterface routing, bool training, int64_t k,
                     Value weights, Value indices, Value loss) {
  Emitter e(b);
  Value tokens = memref::DimOp::create(b, logits, 0);
  Value experts = memref::DimOp::create(b, logits, 1);
  auto topk = dyn_cast<TopKRoutingAttr>(routing);

  using Mode = TokenRoutingKind::Mode;
  TokenRoutingKind kind =
      TokenRoutingKind::get(routing, training, static_cast<bool>(selectionBias));
  TokenRoutingValues values;
  values.experts = experts;
  values.k = e.idx(k);
  if (kind.production) {
    values.groups = e.idx(topk.getGroups());
    values.keptGroups = e.idx(topk.getKeptGroups());
    values.scale = e.cf32(topk.getScale().convertToDouble());
  }
  kind.loss = kind.loss && loss;
  if (kind.mode == Mode::MoesartTraining)
    std::tie(values.key0, values.key1) =
        buildPhiloxKey(b, memref::LoadOp::create(b, seed, ValueRange{}));

  // Per-token scratch rows and loss terms.
  Value scratch, terms;
  if (kind.needsScratch()) {
    Value perToken = kind.mode == Mode::MoesartTraining
                         ? experts
                         : e.idx(2 * topk.getGroups());
    scratch = memref::AllocOp::create(
        b, MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic}, e.f32()),
        ValueRange{tokens, perToken});
  }
  if (kind.loss)
    terms = memref::AllocOp::create(b, MemRefType::get({ShapedType::kDynamic}, e.f32()),
                                    ValueRange{tokens});

  auto forall = scf::ForallOp::create(b, ArrayRef<OpFoldResult>{OpFoldResult(tokens)},
                                      ValueRange{}, std::nullopt);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forall.getBody());
    Value t = forall.getInductionVar(0);
    auto load = [&](ImplicitLocOpBuilder &b, Value m, ValueRange at) -> Value {
      return memref::LoadOp::create(b, m, at);
    };
    auto store = [&](ImplicitLocOpBuilder &b, Value v, Value m, ValueRange at) {
      memref::StoreOp::create(b, v, m, at);
    };
    TokenRoutingStorage io;
    auto logit = [&](ImplicitLocOpBuilder &b, Value ex) { return load(b, logits, {t, ex}); };
    auto bias = [&](ImplicitLocOpBuilder &b, Value ex) {
      return cpu::toF32(b, load(b, selectionBias, {ex}));
    };
    auto loadIndex = [&](ImplicitLocOpBuilder &b, Value r) { return load(b, indices, {t, r}); };
    auto storeIndex = [&](ImplicitLocOpBuilder &b, Value r, Value ex) {
      store(b, ex, indices, {t, r});
    };
    auto storeWeight = [&](ImplicitLocOpBuilder &b, Value i, Value w) {
      store(b, w, weights, {t, i});
    };
    auto loadScratch = [&](ImplicitLocOpBuilder &b, Value i) { return load(b, scratch, {t, i}); };
    auto storeScratch = [&](ImplicitLocOpBuilder &b, Value i, Value v) {
      store(b, v, scratch, {t, i});
    };
    io.logit = logit;
    io.selectionBias = bias;
    io.loadIndex = loadIndex;
    io.storeIndex = storeIndex;
    io.storeWeight = storeWeight;
    io.loadScratch = loadScratch;
    io.storeScratch = storeScratch;
    if (kind.mode == Mode::MoesartTraining)
      values.token = e.toI32(t);
    Value term = buildTokenRouting(b, kind, values, io);
    if (term)
      store(b, term, terms, {t});
  }

  if (loss) {
    Value value = e.cf32(0.0);
    if (kind.loss) {
      Value sum = e.forLoop(e.idx(0), tokens, {e.cf32(0.0)},
                            [&](Emitter &e, Value t, ValueRange a) {
                              Value x = memref::LoadOp::create(e.b, terms, ValueRange{t});
                              return SmallVector<Value>{e.addf(a[0], x)};
                            })[0];
      value = e.mulf(e.cf32(routing.getRegularizerCoefficient()),
                     e.divf(sum, e.toF32(tokens)));
    }
    memref::StoreOp::create(b, value, loss, ValueRange{});
  }
  // The scratch buffers are freed by the pipeline's buffer deallocation.
}

/// The gate is outlined per (routing, training, E, K) into a function that
/// every layer with that routing calls, the token count being dynamic.
struct LowerGate : public OpRewritePattern<GateOp> {
  LowerGate(MLIRContext *ctx, KernelSite site) : OpRewritePattern(ctx), site(site) {}
  KernelSite site;

  LogicalResult matchAndRewrite(GateOp op, PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter e(b);
    int64_t k = op.getWeights().getType().getDimSize(1);
    if (ShapedType::isDynamic(k))
      return rewriter.notifyMatchFailure(op, "the number of experts per token is dynamic");
    OpFoldResult tokens = e.dimOfr(op.getLogits(), 0);
    SmallVector<Value> outs{allocBuffer(b, {tokens, b.getIndexAttr(k)}, e.f32()),
                            allocBuffer(b, {tokens, b.getIndexAttr(k)}, e.i32())};
    if (op.getAuxLoss())
      outs.push_back(allocBuffer(b, {}, e.f32()));
    KernelArgs args{asBuffer(b, op.getLogits())};
    bool hasBias = static_cast<bool>(op.getSelectionBias());
    std::optional<unsigned> biasAt =
        args.addOptional(hasBias ? asBuffer(b, op.getSelectionBias()) : Value());
    std::optional<unsigned> seedAt =
        args.addOptional(op.getSeed() ? asBuffer(b, op.getSeed()) : Value());
    args.append(outs);
    std::string routingText;
    llvm::raw_string_ostream ros(routingText);
    ros << (op.getTraining() ? "train " : "infer ") << op.getRouting() << " k=" << k
        << (hasBias ? " biased" : "");
    std::string name = "__moe_cpu_gate_" + llvm::utohexstr(llvm::xxh3_64bits(routingText));
    RoutingAttrInterface routing = op.getRouting();
    bool training = op.getTraining();
    size_t numResults = outs.size();
    // Destination style (no tensor results across the kernel boundary): the
    // gate writes the caller's buffers.
    kernel(b, site, name, args, [&](ImplicitLocOpBuilder &b, ValueRange v) {
      Value bias = KernelArgs::at(v, biasAt);
      Value seed = KernelArgs::at(v, seedAt);
      ValueRange dests = v.take_back(numResults);
      emitGate(b, v[0], bias, seed, routing, training, k, dests[0], dests[1],
               numResults > 2 ? dests[2] : Value());
    });
    SmallVector<Value> results;
    for (auto [m, t] : llvm::zip(outs, op->getResultTypes()))
      results.push_back(asTensor(b, m, t));
    rewriter.replaceOp(op, results);
    return success();
  }
};
//===----------------------------------------------------------------------===//
// moe.dispatch
//===----------------------------------------------------------------------===//

/// The routing plan shared by moe.dispatch and moe.fused_experts: per-expert
/// capacity C = ceil(cf * T * K / E) (or T*K without a capacity factor) and
/// offsets = exclusive prefix sum over experts of min(count, C).
struct RoutingPlan {
  Value capacity; // i32
  Value offsets;  // tensor<E+1 x i32>
};

static Value isValidExpert(Emitter &e, Value ex, int64_t numExperts) {
  return e.andi(e.cmpi(arith::CmpIPredicate::sge, ex, e.ci32(0)),
                e.cmpi(arith::CmpIPredicate::slt, ex, e.ci32(numExperts)));
}

/// `checkKind` (a MoeCpuIndexErrorKind, 0 for none): an expert index outside
/// [0, numExperts) is a run-time error; without the check it is dropped.
static RoutingPlan buildRoutingPlan(Emitter &e, Value indices, Value tokens, Value k,
                                    int64_t numExperts,
                                    std::optional<llvm::APFloat> capacityFactor,
                                    int32_t checkKind = 0) {
  ImplicitLocOpBuilder &b = e.b;
  Value assignments = e.muli(tokens, k);
  Value c0 = e.idx(0), c1 = e.idx(1), experts = e.idx(numExperts);
  Value zeroI = e.ci32(0);
  Value capacity;
  if (capacityFactor) {
    Type f64 = b.getF64Type();
    auto toF64 = [&](Value v) {
      return arith::SIToFPOp::create(b, f64,
                                     arith::IndexCastOp::create(b, b.getI64Type(), v));
    };
    Value cfv =
        arith::ConstantOp::create(b, b.getF64FloatAttr(capacityFactor->convertToDouble()));
    Value c = arith::DivFOp::create(
        b, arith::MulFOp::create(b, arith::MulFOp::create(b, cfv, toF64(tokens)), toF64(k)),
        toF64(experts));
    c = math::CeilOp::create(b, c);
    // C never needs to exceed T*K (every assignment fits): clamping first
    // keeps the conversion to i32 defined for any factor (huge, inf or NaN).
    c = arith::MinNumFOp::create(b, c, toF64(assignments));
    c = arith::MaxNumFOp::create(
        b, c, arith::ConstantOp::create(b, b.getF64FloatAttr(0.0)));
    capacity = arith::FPToSIOp::create(b, e.i32(), c);
  } else {
    capacity = e.toI32(assignments);
  }

  // Pass 1: assignments per expert.
  ModuleOp module = checkKind ? enclosingModule(b) : ModuleOp();
  Value counts0 = e.filled({b.getIndexAttr(numExperts)}, zeroI);
  Value counts = e.forLoop(c0, tokens, {counts0}, [&](Emitter &e, Value t, ValueRange a) {
    return SmallVector<Value>{e.forLoop(c0, k, {a[0]}, [&](Emitter &e, Value i, ValueRange q) {
      Value ex = e.extract(indices, {t, i});
      Value valid = isValidExpert(e, ex, numExperts);
      if (checkKind)
        emitExpertIndexCheck(e.b, module, valid, checkKind, t, i, ex, numExperts);
      return SmallVector<Value>{llvm::to_vector(e.ifElse(
          valid, {q[0].getType()},
          [&](Emitter &e) {
            Value exIdx = e.toIndex(ex);
            Value n = e.addi(e.extract(q[0], {exIdx}), e.ci32(1));
            return SmallVector<Value>{e.insert(n, q[0], {exIdx})};
          },
          [&](Emitter &) { return SmallVector<Value>{q[0]}; }))[0]};
    })[0]};
  })[0];
  // Offsets: exclusive prefix sum of min(count, C).
  Value offsets0 = e.filled({b.getIndexAttr(numExperts + 1)}, zeroI);
  Value offsets = e.forLoop(c0, experts, {offsets0}, [&](Emitter &e, Value ex, ValueRange a) {
    Value kept = arith::MinSIOp::create(e.b, e.extract(counts, {ex}), capacity);
    Value next = e.addi(e.extract(a[0], {ex}), kept);
    return SmallVector<Value>{e.insert(next, a[0], {e.addi(ex, c1)})};
  })[0];
  return {capacity, offsets};
}

/// Walks the assignments (t, i) in token order and gives each one its row in
/// the plan: an assignment is kept when its expert is valid and has room left
/// (fewer than plan.capacity earlier assignments); `onKept(e, t, i, pos, s)`
/// updates the caller's loop state `s` for a kept assignment at plan row
/// `pos` (i32). Returns the final state.
static SmallVector<Value>
placeAssignments(Emitter &e, Value indices, Value tokens, Value k, int64_t numExperts,
                 const RoutingPlan &plan, ValueRange state,
                 function_ref<SmallVector<Value>(Emitter &, Value, Value, Value, ValueRange)>
                     onKept) {
  ImplicitLocOpBuilder &b = e.b;
  Value c0 = e.idx(0);
  // Per-expert cursor: rows already placed, carried after the caller's state.
  SmallVector<Value> init(state.begin(), state.end());
  init.push_back(e.filled({b.getIndexAttr(numExperts)}, e.ci32(0)));
  ValueRange placed = e.forLoop(c0, tokens, init, [&](Emitter &e, Value t, ValueRange a) {
    ValueRange inner = e.forLoop(c0, k, a, [&](Emitter &e, Value i, ValueRange q) {
      Value cursor = q.back();
      Value ex = e.extract(indices, {t, i});
      Value valid = isValidExpert(e, ex, numExperts);
      Value exIdx = e.toIndex(e.select(valid, ex, e.ci32(0)));
      Value used = e.extract(cursor, {exIdx});
      Value keep = e.andi(valid, e.cmpi(arith::CmpIPredicate::slt, used, plan.capacity));
      ValueRange r = e.ifElse(
          keep, TypeRange(q),
          [&](Emitter &e) {
            Value posI = e.addi(e.extract(plan.offsets, {exIdx}), used);
            SmallVector<Value> next = onKept(e, t, i, posI, q.drop_back());
            next.push_back(e.insert(e.addi(used, e.ci32(1)), cursor, {exIdx}));
            return next;
          },
          [&](Emitter &) { return SmallVector<Value>(q.begin(), q.end()); });
      return SmallVector<Value>(r.begin(), r.end());
    });
    return SmallVector<Value>(inner.begin(), inner.end());
  });
  return SmallVector<Value>(placed.begin(), std::prev(placed.end()));
}

struct LowerDispatch : public OpRewritePattern<DispatchOp> {
  LowerDispatch(MLIRContext *ctx, KernelSite site) : OpRewritePattern(ctx), site(site) {}
  KernelSite site;

  LogicalResult matchAndRewrite(DispatchOp op, PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter e(b);
    Value x = op.getInput(), indices = op.getIndices();
    int64_t numExperts = op.getNumExperts();
    Value tokens = e.dim(x, 0), k = e.dim(indices, 1);
    Value minus1 = e.ci32(-1);
    RoutingPlan plan =
        buildRoutingPlan(e, indices, tokens, k, numExperts, op.getCapacityFactor(),
                         site.checkIndices ? MOE_INDEX_BAD_EXPERT_DISPATCH : 0);

    // Pass 2: place the rows, in token order.
    // Sizes come from the operands (the results are being replaced): T*K rows.
    Value assignments = e.muli(tokens, k);
    Type elt = cast<RankedTensorType>(x.getType()).getElementType();
    Value rows0 = e.filled({OpFoldResult(assignments), e.dimOfr(x, 1)},
                           arith::ConstantOp::create(b, b.getZeroAttr(elt)));
    rows0 = tensor::CastOp::create(
        b, RankedTensorType::get({ShapedType::kDynamic, ShapedType::kDynamic}, elt), rows0);
    Value src0 = e.filled({OpFoldResult(assignments)}, minus1);
    Value pos0 = e.filled({e.dimOfr(indices, 0), e.dimOfr(indices, 1)}, minus1);
    OpFoldResult modelDim = e.dimOfr(x, 1);
    SmallVector<Value> placed = placeAssignments(
        e, indices, tokens, k, numExperts, plan, {rows0, src0, pos0},
        [&](Emitter &e, Value t, Value i, Value posI, ValueRange q) {
          Value pos = e.toIndex(posI);
          Value row = e.slice2d(x, t, e.b.getIndexAttr(0), e.b.getIndexAttr(1), modelDim);
          Value rows = tensor::InsertSliceOp::create(
              e.b, row, q[0], ArrayRef<OpFoldResult>{pos, e.b.getIndexAttr(0)},
              ArrayRef<OpFoldResult>{e.b.getIndexAttr(1), modelDim},
              ArrayRef<OpFoldResult>{e.b.getIndexAttr(1), e.b.getIndexAttr(1)});
          return SmallVector<Value>{rows, e.insert(e.toI32(t), q[1], {pos}),
                                    e.insert(posI, q[2], {t, i})};
        });
    rewriter.replaceOp(op, {tensor::CastOp::create(b, op.getRows().getType(), placed[0]),
                            tensor::CastOp::create(b, op.getOffsets().getType(), plan.offsets),
                            tensor::CastOp::create(b, op.getSourceRows().getType(), placed[1]),
                            tensor::CastOp::create(b, op.getPositions().getType(), placed[2])});
    return success();
  }
};

//===----------------------------------------------------------------------===//
// moe.expert_ffn
//===----------------------------------------------------------------------===//

struct LowerExpertFFN : public OpRewritePattern<ExpertFFNOp> {
  LowerExpertFFN(MLIRContext *ctx, KernelSite site) : OpRewritePattern(ctx), baseSite(site) {}
  KernelSite baseSite;

  LogicalResult matchAndRewrite(ExpertFFNOp op, PatternRewriter &rewriter) const override {
    KernelSite site = baseSite.configuredFor(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter e(b);
    Value rows = op.getRows();
    int64_t numExperts = cast<RankedTensorType>(op.getW1().getType()).getDimSize(0);
    if (ShapedType::isDynamic(numExperts))
      return rewriter.notifyMatchFailure(op, "the number of experts is dynamic");
    Value numRows = e.dim(rows, 0);
    auto outType = cast<RankedTensorType>(op.getOutput().getType());
    // Rows outside every group keep 0.
    Value out = allocBuffer(b, {OpFoldResult(numRows), e.dimOfr(rows, 1)},
                            outType.getElementType());
    linalg::FillOp::create(b, ValueRange{arith::ConstantOp::create(
                                  b, b.getZeroAttr(outType.getElementType()))},
                           ValueRange{out});
    Value offsets = asBuffer(b, op.getOffsets());
    if (site.checkIndices) {
      ModuleOp module = enclosingModule(b);
      // Offsets must be a non-decreasing sequence in [0, N]: the kernels
      // trust them (an error here, never a read or write out of bounds).
      Value n = e.toI32(numRows);
      scf::ForOp::create(
          b, e.idx(0), e.idx(numExperts + 1), e.idx(1), ValueRange{e.ci32(0)},
          [&](OpBuilder &nested, Location loc, Value g, ValueRange prev) {
            ImplicitLocOpBuilder nb(loc, nested);
            Emitter ne(nb);
            Value o = memref::LoadOp::create(nb, offsets, ValueRange{g});
            Value ok = ne.andi(ne.cmpi(arith::CmpIPredicate::sge, o, prev[0]),
                               ne.cmpi(arith::CmpIPredicate::sle, o, n));
            emitIndexCheck(nb, module, ok, MOE_INDEX_BAD_OFFSETS);
            scf::YieldOp::create(nb, ValueRange{o});
          });
    }
    emitExpertFFN(b, site, asBuffer(b, rows), Value(), offsets,
                  asBuffer(b, op.getW1()), asBuffer(b, op.getW2()),
                  op.getB1() ? asBuffer(b, op.getB1()) : Value(),
                  op.getB2() ? asBuffer(b, op.getB2()) : Value(), op.getActivationAttr(),
                  numRows, Value(), out,
                  op.getW1Scale() ? asBuffer(b, op.getW1Scale()) : Value(),
                  op.getW2Scale() ? asBuffer(b, op.getW2Scale()) : Value(), op.getQuantAttr(),
                  op.getW1ZeroPoint() ? asBuffer(b, op.getW1ZeroPoint()) : Value(),
                  op.getW2ZeroPoint() ? asBuffer(b, op.getW2ZeroPoint()) : Value());
    rewriter.replaceOp(op, asTensor(b, out, outType));
    return success();
  }
};

/// y[t, :] = sum_i rows[positions[t, i], :] (* weights[t, i] when given),
/// in increasing i, skipping positions < 0; f32 sum, rounded once to y's
/// element type. Parallel over tokens, vectorized over the model dimension.
static void emitCombineBody(ImplicitLocOpBuilder &b, Value rows, Value positions,
                            Value weights, Value shared, Value y, bool checkPositions,
                            int64_t lanes) {
  ModuleOp module = checkPositions ? enclosingModule(b) : ModuleOp();
  Value c0 = arith::ConstantIndexOp::create(b, 0), c1 = arith::ConstantIndexOp::create(b, 1);
  Value tokens = memref::DimOp::create(b, positions, c0);
  Value k = memref::DimOp::create(b, positions, c1);
  Value modelDim = memref::DimOp::create(b, y, c1);
  Value numRows = memref::DimOp::create(b, rows, c0);
  auto vt = VectorType::get({lanes}, b.getF32Type());
  auto mt = VectorType::get({lanes}, b.getI1Type());
  scf::ParallelOp::create(
      b, ValueRange{c0}, ValueRange{tokens}, ValueRange{c1},
      [&](OpBuilder &nested, Location loc, ValueRange ivs) {
        ImplicitLocOpBuilder nb(loc, nested);
        Value t = ivs[0];
        scf::ForOp::create(
            nb, c0, modelDim, arith::ConstantIndexOp::create(nb, lanes), ValueRange{},
            [&](OpBuilder &colBuilder, Location loc, Value col, ValueRange) {
              ImplicitLocOpBuilder cb(loc, colBuilder);
              Value mask = cpu::columnMask(cb, col, modelDim, lanes);
              Value none = arith::ConstantOp::create(cb, mt, DenseElementsAttr::get(mt, false));
              Value zero = arith::ConstantOp::create(cb, vt, DenseElementsAttr::get(vt, 0.0f));
              // The shared expert's output (f32) starts the sum.
              Value init = shared ? cpu::loadF32Vector(cb, shared, {t, col}, mask) : zero;
              auto sum = scf::ForOp::create(
                  cb, c0, k, c1, ValueRange{init},
                  [&](OpBuilder &kb, Location loc, Value i, ValueRange acc) {
                    ImplicitLocOpBuilder ib(loc, kb);
                    Value pos = arith::IndexCastOp::create(
                        ib, ib.getIndexType(), memref::LoadOp::create(ib, positions, {t, i}));
                    Value kept = arith::AndIOp::create(
                        ib,
                        arith::CmpIOp::create(ib, arith::CmpIPredicate::sge, pos,
                                              arith::ConstantIndexOp::create(ib, 0)),
                        arith::CmpIOp::create(ib, arith::CmpIPredicate::slt, pos, numRows));
                    if (checkPositions) {
                      // -1 (dropped) or a row of the expert output.
                      Value dropped = arith::CmpIOp::create(
                          ib, arith::CmpIPredicate::eq, pos,
                          arith::ConstantIndexOp::create(ib, -1));
                      emitIndexCheck(ib, module, arith::OrIOp::create(ib, kept, dropped),
                                     MOE_INDEX_BAD_POSITION);
                    }
                    Value row = arith::SelectOp::create(ib, kept, pos,
                                                        arith::ConstantIndexOp::create(ib, 0));
                    Value m = arith::SelectOp::create(ib, kept, mask, none);
                    Value v = cpu::loadF32Vector(ib, rows, {row, col}, m);
                    if (weights) {
                      Value w = cpu::toF32(ib, memref::LoadOp::create(ib, weights, {t, i}));
                      v = arith::MulFOp::create(ib, v, vector::BroadcastOp::create(ib, vt, w));
                    }
                    scf::YieldOp::create(ib, ValueRange{arith::AddFOp::create(ib, acc[0], v)});
                  });
              cpu::storeVector(cb, sum.getResult(0), y, {t, col}, mask);
              scf::YieldOp::create(cb);
            });
      });
}

static void emitCombine(ImplicitLocOpBuilder &b, const KernelSite &site, Value rows,
                        Value positions, Value weights, Value shared, Value y,
                        bool checkPositions) {
  KernelArgs args{rows, positions, y};
  std::optional<unsigned> weightsAt = args.addOptional(weights),
                          sharedAt = args.addOptional(shared);
  bool weighted = static_cast<bool>(weights), withShared = static_cast<bool>(shared);
  // Positions the lowering computed itself need no check; a user's do.
  bool check = checkPositions && site.checkIndices;
  std::string name = (Twine("__moe_cpu_combine") + (weighted ? "_weighted" : "") +
                      (withShared ? "_shared" : "") + (check ? "_checked" : "") + "_v" +
                      Twine(site.config.getVectorBits()))
                         .str();
  kernel(b, site, name, args, [&](ImplicitLocOpBuilder &b, ValueRange v) {
    Value w = KernelArgs::at(v, weightsAt);
    Value sh = KernelArgs::at(v, sharedAt);
    emitCombineBody(b, v[0], v[1], w, sh, v[2], check, site.config.getLanes());
  });
}

/// moe.shared_expert: the expert FFN kernels with one group of all T rows
/// (weights viewed as [1, D, Hs] and [1, Hs, D], packed like routed ones),
/// the per-token gate sigmoid(x sg) as GEMM2's row scale.
struct LowerSharedExpert : public OpRewritePattern<SharedExpertOp> {
  LowerSharedExpert(MLIRContext *ctx, KernelSite site) : OpRewritePattern(ctx), baseSite(site) {}
  KernelSite baseSite;

  LogicalResult matchAndRewrite(SharedExpertOp op, PatternRewriter &rewriter) const override {
    KernelSite site = baseSite.configuredFor(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter e(b);
    Value x = op.getInput();
    Value tokens = e.dim(x, 0);
    // One expert: [D, W] -> [1, D, W].
    auto asExperts = [&](Value w) -> Value {
      auto type = cast<RankedTensorType>(w.getType());
      auto expanded =
          RankedTensorType::get({1, type.getDimSize(0), type.getDimSize(1)}, type.getElementType());
      return tensor::ExpandShapeOp::create(
          b, expanded, w, SmallVector<ReassociationIndices>{{0, 1}, {2}},
          SmallVector<OpFoldResult>{b.getIndexAttr(1), e.dimOfr(w, 0), e.dimOfr(w, 1)});
    };
    // Group offsets [0, T].
    Value offsets = allocBuffer(b, {b.getIndexAttr(2)}, e.i32());
    memref::StoreOp::create(b, e.ci32(0), offsets, ValueRange{e.idx(0)});
    memref::StoreOp::create(b, e.toI32(tokens), offsets, ValueRange{e.idx(1)});
    Value gate;
    if (op.getSharedGate()) {
      // gate_t = sigmoid(x_t sg): the router kernel, then the sigmoid.
      Value logits = allocBuffer(b, {OpFoldResult(tokens), b.getIndexAttr(1)}, e.f32());
      emitRouter(b, site, asBuffer(b, x), asBuffer(b, op.getSharedGate()), Value(), logits);
      gate = allocBuffer(b, {OpFoldResult(tokens)}, e.f32());
      scf::ForOp::create(b, e.idx(0), tokens, e.idx(1), ValueRange{},
                         [&](OpBuilder &nested, Location loc, Value t, ValueRange) {
                           ImplicitLocOpBuilder nb(loc, nested);
                           Emitter ne(nb);
                           Value o = memref::LoadOp::create(nb, logits, ValueRange{t, ne.idx(0)});
                           Value sig = ne.divf(
                               ne.cf32(1.0),
                               ne.addf(ne.cf32(1.0), ne.routingExp(arith::NegFOp::create(nb, o))));
                           memref::StoreOp::create(nb, sig, gate, ValueRange{t});
                           scf::YieldOp::create(nb);
                         });
    }
    auto outType = cast<RankedTensorType>(op.getOutput().getType());
    Value out = allocBuffer(b, {OpFoldResult(tokens), e.dimOfr(x, 1)}, e.f32());
    emitExpertFFN(b, site, asBuffer(b, x), Value(), offsets,
                  asBuffer(b, asExperts(op.getSharedW1())),
                  asBuffer(b, asExperts(op.getSharedW2())), Value(), Value(),
                  op.getActivationAttr(), tokens, gate, out);
    rewriter.replaceOp(op, asTensor(b, out, outType));
    return success();
  }
};

struct LowerCombine : public OpRewritePattern<CombineOp> {
  LowerCombine(MLIRContext *ctx, KernelSite site) : OpRewritePattern(ctx), baseSite(site) {}
  KernelSite baseSite;

  LogicalResult matchAndRewrite(CombineOp op, PatternRewriter &rewriter) const override {
    KernelSite site = baseSite.configuredFor(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter e(b);
    auto outType = cast<RankedTensorType>(op.getOutput().getType());
    Value y = allocBuffer(b, {e.dimOfr(op.getWeights(), 0), e.dimOfr(op.getExpertOutput(), 1)},
                          outType.getElementType());
    emitCombine(b, site, asBuffer(b, op.getExpertOutput()), asBuffer(b, op.getPositions()),
                asBuffer(b, op.getWeights()),
                op.getSharedOutput() ? asBuffer(b, op.getSharedOutput()) : Value(), y,
                /*checkPositions=*/true);
    rewriter.replaceOp(op, asTensor(b, y, outType));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// moe.fused_experts: gather inside GEMM1, weight in GEMM2's epilogue
//===----------------------------------------------------------------------===//

struct LowerFusedExperts : public OpRewritePattern<FusedExpertsOp> {
  LowerFusedExperts(MLIRContext *ctx, KernelSite site) : OpRewritePattern(ctx), baseSite(site) {}
  KernelSite baseSite;

  LogicalResult matchAndRewrite(FusedExpertsOp op, PatternRewriter &rewriter) const override {
    KernelSite site = baseSite.configuredFor(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter e(b);
    Value x = op.getInput(), indices = op.getIndices(), weights = op.getWeights();
    int64_t numExperts = op.getNumExperts();
    Value tokens = e.dim(x, 0), k = e.dim(indices, 1);
    RoutingPlan plan =
        buildRoutingPlan(e, indices, tokens, k, numExperts, op.getCapacityFactor(),
                         site.checkIndices ? MOE_INDEX_BAD_EXPERT_FUSED : 0);

    // Source token, routed weight of every kept plan row, and the plan row of
    // every assignment (-1: dropped).
    Value assignments = e.muli(tokens, k);
    Value src0 = e.filled({OpFoldResult(assignments)}, e.ci32(0));
    Value rw0 = e.filled({OpFoldResult(assignments)}, e.cf32(0.0));
    Value pos0 = e.filled({e.dimOfr(indices, 0), e.dimOfr(indices, 1)}, e.ci32(-1));
    SmallVector<Value> placed = placeAssignments(
        e, indices, tokens, k, numExperts, plan, {src0, rw0, pos0},
        [&](Emitter &e, Value t, Value i, Value posI, ValueRange q) {
          Value pos = e.toIndex(posI);
          Value w = cpu::toF32(e.b, e.extract(weights, {t, i}));
          return SmallVector<Value>{e.insert(e.toI32(t), q[0], {pos}),
                                    e.insert(w, q[1], {pos}), e.insert(posI, q[2], {t, i})};
        });
    Value keptRows = e.toIndex(e.extract(plan.offsets, {e.idx(numExperts)}));

    // Per plan row: the expert's output times the routed weight (f32).
    Value out = allocBuffer(b, {OpFoldResult(keptRows), e.dimOfr(x, 1)}, e.f32());
    emitExpertFFN(b, site, asBuffer(b, x), asBuffer(b, placed[0]), asBuffer(b, plan.offsets),
                  asBuffer(b, op.getW1()), asBuffer(b, op.getW2()),
                  op.getB1() ? asBuffer(b, op.getB1()) : Value(),
                  op.getB2() ? asBuffer(b, op.getB2()) : Value(), op.getActivationAttr(),
                  keptRows, asBuffer(b, placed[1]), out,
                  op.getW1Scale() ? asBuffer(b, op.getW1Scale()) : Value(),
                  op.getW2Scale() ? asBuffer(b, op.getW2Scale()) : Value(), op.getQuantAttr(),
                  op.getW1ZeroPoint() ? asBuffer(b, op.getW1ZeroPoint()) : Value(),
                  op.getW2ZeroPoint() ? asBuffer(b, op.getW2ZeroPoint()) : Value());
    // Per token: the sum of its rows in routing order, rounded once.
    auto outType = cast<RankedTensorType>(op.getOutput().getType());
    Value y = allocBuffer(b, {OpFoldResult(tokens), e.dimOfr(x, 1)}, outType.getElementType());
    emitCombine(b, site, out, asBuffer(b, placed[2]), Value(),
                op.getSharedOutput() ? asBuffer(b, op.getSharedOutput()) : Value(), y,
                /*checkPositions=*/false);
    rewriter.replaceOp(op, asTensor(b, y, outType));
    return success();
  }
};

/// On the CPU the fused Soft MoE computes exactly the soft chain.
struct LowerFusedSoftExperts : public OpRewritePattern<FusedSoftExpertsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(FusedSoftExpertsOp op, PatternRewriter &rewriter) const override {
    rewriter.replaceOpWithNewOp<SoftLayerOp>(
        op, op.getOutput().getType(), op.getInput(), op.getSlots(), op.getScale(),
        op.getW1(), op.getW2(), op.getB1(), op.getB2(), op.getActivationAttr(),
        op.getNormalizeAttr());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Soft MoE
//===----------------------------------------------------------------------===//

/// Softmax of a rank-4 tensor over the dims flagged in `reduced` (max-subtracted).
static Value softmax4(Emitter &e, Value logits, ArrayRef<bool> reduced) {
  SmallVector<unsigned> all{0, 1, 2, 3}, kept;
  SmallVector<IT> iters;
  SmallVector<OpFoldResult> keptSizes;
  for (unsigned d = 0; d < 4; ++d) {
    iters.push_back(reduced[d] ? IT::reduction : IT::parallel);
    if (!reduced[d]) {
      kept.push_back(d);
      keptSizes.push_back(e.dimOfr(logits, d));
    }
  }
  Value maxInit = e.filled(keptSizes, e.softmaxMaxInit());
  Value mx = e.generic(maxInit.getType(), {logits}, maxInit,
                       {e.map(4, all), e.map(4, kept)}, iters,
                       [](Emitter &e, ValueRange v) { return e.softmaxMax(v[1], v[0]); });
  Value sumInit = e.filled(keptSizes, e.cf32(0.0));
  Value sum = e.generic(sumInit.getType(), {logits, mx}, sumInit,
                        {e.map(4, all), e.map(4, kept), e.map(4, kept)}, iters,
                        [](Emitter &e, ValueRange v) {
                          return e.addf(v[2], e.softmaxTerm(v[0], v[1]));
                        });
  SmallVector<OpFoldResult> sizes;
  for (unsigned d = 0; d < 4; ++d)
    sizes.push_back(e.dimOfr(logits, d));
  Value init = e.empty(sizes, e.f32());
  SmallVector<IT> par(4, IT::parallel);
  return e.generic(init.getType(), {logits, mx, sum}, init,
                   {e.map(4, all), e.map(4, kept), e.map(4, kept), e.map(4, all)}, par,
                   [](Emitter &e, ValueRange v) {
                     return e.softmaxWeight(v[0], v[1], v[2]);
                   });
}

/// rsqrt(sum over `normDim` of t^2 + 1e-6) for a rank-3 tensor (the kept
/// two dims): Soft MoE's normalization factor.
static Value inverseNorm3(Emitter &e, Value t, unsigned normDim) {
  SmallVector<unsigned> all{0, 1, 2}, kept;
  SmallVector<IT> iters;
  SmallVector<OpFoldResult> keptSizes;
  for (unsigned d = 0; d < 3; ++d) {
    iters.push_back(d == normDim ? IT::reduction : IT::parallel);
    if (d != normDim) {
      kept.push_back(d);
      keptSizes.push_back(e.dimOfr(t, d));
    }
  }
  Value sqInit = e.filled(keptSizes, e.cf32(0.0));
  Value sq = e.generic(sqInit.getType(), {t}, sqInit, {e.map(3, all), e.map(3, kept)}, iters,
                       [](Emitter &e, ValueRange v) {
                         return e.addf(v[1], e.mulf(v[0], v[0]));
                       });
  Value init = e.empty(keptSizes, e.f32());
  return e.generic(init.getType(), {sq}, init, {e.map(2, {0, 1}), e.map(2, {0, 1})},
                   {IT::parallel, IT::parallel}, [](Emitter &e, ValueRange v) {
                     return math::RsqrtOp::create(e.b, e.addf(v[0], e.cf32(1e-6))).getResult();
                   });
}

/// The maps of a rank-3 tensor and of its factor from inverseNorm3.
static std::pair<AffineMap, AffineMap> normMaps(Emitter &e, unsigned normDim) {
  SmallVector<unsigned> kept;
  for (unsigned d = 0; d < 3; ++d)
    if (d != normDim)
      kept.push_back(d);
  return {e.map(3, {0, 1, 2}), e.map(3, kept)};
}

/// t * inverseNorm3(t) for a rank-3 tensor.
static Value normalize3(Emitter &e, Value t, Value inverseNorm, unsigned normDim) {
  auto [all, kept] = normMaps(e, normDim);
  Value init = e.empty({e.dimOfr(t, 0), e.dimOfr(t, 1), e.dimOfr(t, 2)}, e.f32());
  return e.generic(init.getType(), {t, inverseNorm}, init, {all, kept, all},
                   SmallVector<IT>(3, IT::parallel),
                   [](Emitter &e, ValueRange v) { return e.mulf(v[0], v[1]); });
}

/// Soft MoE's logits (moe.soft_dispatch), the one computation the forward
/// and the backward (which recomputes them) share: L0 = xn . Phin and
/// L = scale * L0, with xn, Phin and their factors (null without normalize).
struct SoftLogits {
  Value xn, phin, xInverseNorm, phiInverseNorm, l0, logits;
};

static SoftLogits buildSoftLogits(Emitter &e, Value x, Value phi, Value scale,
                                  bool normalize) {
  SoftLogits r;
  r.xn = x;
  r.phin = phi;
  if (normalize) {
    r.xInverseNorm = inverseNorm3(e, x, 2);
    r.phiInverseNorm = inverseNorm3(e, phi, 0);
    r.xn = normalize3(e, x, r.xInverseNorm, 2);
    r.phin = normalize3(e, phi, r.phiInverseNorm, 0);
  }
  OpFoldResult g = e.dimOfr(x, 0), m = e.dimOfr(x, 1);
  OpFoldResult ne = e.dimOfr(phi, 1), s = e.dimOfr(phi, 2);
  // L0[g, m, e, s] = sum_d xn[g, m, d] * phin[d, e, s]; loops (g, m, e, s, d).
  Value lInit = e.filled({g, m, ne, s}, e.cf32(0.0));
  r.l0 = e.generic(lInit.getType(), {r.xn, r.phin}, lInit,
                   {e.map(5, {0, 1, 4}), e.map(5, {4, 2, 3}), e.map(5, {0, 1, 2, 3})},
                   {IT::parallel, IT::parallel, IT::parallel, IT::parallel, IT::reduction},
                   [](Emitter &e, ValueRange v) { return e.addf(v[2], e.mulf(v[0], v[1])); });
  r.logits = r.l0;
  if (scale) {
    Value sc = e.extract(scale, {});
    Value init = e.empty({g, m, ne, s}, e.f32());
    r.logits = e.generic(init.getType(), {r.l0}, init,
                         {e.map(4, {0, 1, 2, 3}), e.map(4, {0, 1, 2, 3})},
                         SmallVector<IT>(4, IT::parallel),
                         [&](Emitter &e, ValueRange v) { return e.mulf(v[0], sc); });
  }
  return r;
}

struct LowerSoftDispatch : public OpRewritePattern<SoftDispatchOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SoftDispatchOp op, PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter e(b);
    Value x = op.getInput(), phi = op.getSlots();
    OpFoldResult g = e.dimOfr(x, 0), d = e.dimOfr(x, 2);
    OpFoldResult ne = e.dimOfr(phi, 1), s = e.dimOfr(phi, 2);
    SoftLogits logits = buildSoftLogits(e, x, phi, op.getScale(), op.getNormalize());
    Value dispatchW = softmax4(e, logits.logits, {false, true, false, false});
    Value combineW = softmax4(e, logits.logits, {false, false, true, true});
    // X~[e, g, s, d] = sum_m Dw[g, m, e, s] x[g, m, d]; loops (e, g, s, d, m).
    Value xInit = e.filled({ne, g, s, d}, e.cf32(0.0));
    Value slotsOut = e.generic(
        xInit.getType(), {dispatchW, x}, xInit,
        {e.map(5, {1, 4, 0, 2}), e.map(5, {1, 4, 3}), e.map(5, {0, 1, 2, 3})},
        {IT::parallel, IT::parallel, IT::parallel, IT::parallel, IT::reduction},
        [](Emitter &e, ValueRange v) { return e.addf(v[2], e.mulf(v[0], v[1])); });
    SmallVector<ReassociationIndices> reassoc{{0, 1, 2}, {3}};
    Value rows = tensor::CollapseShapeOp::create(b, slotsOut, reassoc);
    // offsets[e] = e * G * S.
    Value perExpert = e.toI32(e.muli(e.dim(x, 0), e.dim(phi, 2)));
    Value offInit = e.empty({op.getOffsets().getType().getDimSize(0) >= 0
                                 ? OpFoldResult(b.getIndexAttr(
                                       op.getOffsets().getType().getDimSize(0)))
                                 : OpFoldResult(e.addi(e.dim(phi, 1), e.idx(1)))},
                            e.i32());
    Value offsets = e.generic(offInit.getType(), {}, offInit, {e.map(1, {0})},
                              {IT::parallel}, [&](Emitter &e, ValueRange) {
                                Value i = e.toI32(linalg::IndexOp::create(e.b, 0));
                                return e.muli(i, perExpert);
                              });
    rewriter.replaceOp(op, {tensor::CastOp::create(b, op.getRows().getType(), rows),
                            tensor::CastOp::create(b, op.getOffsets().getType(), offsets),
                            tensor::CastOp::create(b, op.getCombineWeights().getType(),
                                                   combineW)});
    return success();
  }
};

/// Soft rows [E*G*S, D] viewed as [E, G, S, D] (G and S from `like`, a
/// [G, M, E, S] tensor).
static Value expandSoftRows(Emitter &e, Value rows, Value like) {
  auto likeType = cast<RankedTensorType>(like.getType());
  auto rowsType = cast<RankedTensorType>(rows.getType());
  auto type = RankedTensorType::get({likeType.getDimSize(2), likeType.getDimSize(0),
                                     likeType.getDimSize(3), rowsType.getDimSize(1)},
                                    rowsType.getElementType());
  return tensor::ExpandShapeOp::create(
      e.b, type, rows, SmallVector<ReassociationIndices>{{0, 1, 2}, {3}},
      ArrayRef<OpFoldResult>{e.dimOfr(like, 2), e.dimOfr(like, 0), e.dimOfr(like, 3),
                             e.dimOfr(rows, 1)});
}

struct LowerSoftCombine : public OpRewritePattern<SoftCombineOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SoftCombineOp op, PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter e(b);
    Value out = op.getExpertOutput(), cw = op.getCombineWeights();
    OpFoldResult g = e.dimOfr(cw, 0), m = e.dimOfr(cw, 1), d = e.dimOfr(out, 1);
    Value out4 = expandSoftRows(e, out, cw);
    // y[g, m, d] = sum_{e, s} Cw[g, m, e, s] * out4[e, g, s, d]; loops (g, m, d, e, s).
    Value init = e.filled({g, m, d}, e.cf32(0.0));
    Value y = e.generic(
        init.getType(), {cw, out4}, init,
        {e.map(5, {0, 1, 3, 4}), e.map(5, {3, 0, 4, 2}), e.map(5, {0, 1, 2})},
        {IT::parallel, IT::parallel, IT::parallel, IT::reduction, IT::reduction},
        [](Emitter &e, ValueRange v) { return e.addf(v[2], e.mulf(v[0], v[1])); });
    rewriter.replaceOp(op, tensor::CastOp::create(b, op.getOutput().getType(), y).getResult());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// The adjoints of the soft chain
//===----------------------------------------------------------------------===//

/// `t` with f32 elements (extended, exact), or `t` itself.
static Value extendToF32(Emitter &e, Value t) {
  auto type = cast<RankedTensorType>(t.getType());
  if (type.getElementType().isF32())
    return t;
  SmallVector<OpFoldResult> sizes;
  for (int64_t i = 0; i < type.getRank(); ++i)
    sizes.push_back(e.dimOfr(t, i));
  Value init = e.empty(sizes, e.f32());
  unsigned rank = type.getRank();
  SmallVector<unsigned> all;
  for (unsigned i = 0; i < rank; ++i)
    all.push_back(i);
  return e.generic(init.getType(), {t}, init, {e.map(rank, all), e.map(rank, all)},
                   SmallVector<IT>(rank, IT::parallel), [](Emitter &e, ValueRange v) {
                     return arith::ExtFOp::create(e.b, e.f32(), v[0]).getResult();
                   });
}

/// a + c, element by element (f32 tensors of one shape).
static Value addTensors(Emitter &e, Value a, Value c) {
  auto type = cast<RankedTensorType>(a.getType());
  unsigned rank = type.getRank();
  SmallVector<OpFoldResult> sizes;
  SmallVector<unsigned> all;
  for (unsigned i = 0; i < rank; ++i) {
    sizes.push_back(e.dimOfr(a, i));
    all.push_back(i);
  }
  Value init = e.empty(sizes, e.f32());
  AffineMap id = e.map(rank, all);
  return e.generic(init.getType(), {a, c}, init, {id, id, id},
                   SmallVector<IT>(rank, IT::parallel),
                   [](Emitter &e, ValueRange v) { return e.addf(v[0], v[1]); });
}

/// The backward of a softmax over the flagged dims of a rank-4 tensor:
/// p * (dp - sum over the flagged dims of p * dp).
static Value softmaxBackward4(Emitter &e, Value p, Value dp, ArrayRef<bool> reduced) {
  SmallVector<unsigned> all{0, 1, 2, 3}, kept;
  SmallVector<IT> iters;
  SmallVector<OpFoldResult> keptSizes, sizes;
  for (unsigned d = 0; d < 4; ++d) {
    sizes.push_back(e.dimOfr(p, d));
    iters.push_back(reduced[d] ? IT::reduction : IT::parallel);
    if (!reduced[d]) {
      kept.push_back(d);
      keptSizes.push_back(e.dimOfr(p, d));
    }
  }
  Value dotInit = e.filled(keptSizes, e.cf32(0.0));
  Value dot = e.generic(dotInit.getType(), {p, dp}, dotInit,
                        {e.map(4, all), e.map(4, all), e.map(4, kept)}, iters,
                        [](Emitter &e, ValueRange v) { return e.addf(v[2], e.mulf(v[0], v[1])); });
  Value init = e.empty(sizes, e.f32());
  return e.generic(init.getType(), {p, dp, dot}, init,
                   {e.map(4, all), e.map(4, all), e.map(4, kept), e.map(4, all)},
                   SmallVector<IT>(4, IT::parallel), [](Emitter &e, ValueRange v) {
                     return e.mulf(v[0], e.subf(v[1], v[2]));
                   });
}

/// The backward of t * inverseNorm3(t) (rank 3, normalized over normDim):
/// dt = r (dtn - tn <dtn, tn>), with r the factor and tn the normalized t.
static Value normalizeBackward3(Emitter &e, Value tn, Value r, Value dtn, unsigned normDim) {
  auto [all, kept] = normMaps(e, normDim);
  SmallVector<IT> iters;
  SmallVector<OpFoldResult> keptSizes;
  for (unsigned d = 0; d < 3; ++d) {
    iters.push_back(d == normDim ? IT::reduction : IT::parallel);
    if (d != normDim)
      keptSizes.push_back(e.dimOfr(tn, d));
  }
  Value dotInit = e.filled(keptSizes, e.cf32(0.0));
  Value dot = e.generic(dotInit.getType(), {tn, dtn}, dotInit, {all, all, kept}, iters,
                        [](Emitter &e, ValueRange v) { return e.addf(v[2], e.mulf(v[0], v[1])); });
  Value init = e.empty({e.dimOfr(tn, 0), e.dimOfr(tn, 1), e.dimOfr(tn, 2)}, e.f32());
  return e.generic(init.getType(), {tn, dtn, r, dot}, init, {all, all, kept, kept, all},
                   SmallVector<IT>(3, IT::parallel), [](Emitter &e, ValueRange v) {
                     return e.mulf(v[2], e.subf(v[1], e.mulf(v[0], v[3])));
                   });
}

/// moe.soft_dispatch_grad: the logits and both softmaxes recomputed by
/// buildSoftLogits (the forward's code), then the backward of the slot
/// averages, of the two softmaxes, of the logits' product and of the
/// normalizations (see the op). f32 throughout; every sum in a fixed order.
struct LowerSoftDispatchGrad : public OpRewritePattern<SoftDispatchGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SoftDispatchGradOp op, PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter e(b);
    Value x = extendToF32(e, op.getInput()), phi = extendToF32(e, op.getSlots());
    OpFoldResult g = e.dimOfr(x, 0), m = e.dimOfr(x, 1), d = e.dimOfr(x, 2);
    OpFoldResult ne = e.dimOfr(phi, 1), s = e.dimOfr(phi, 2);
    SoftLogits logits = buildSoftLogits(e, x, phi, op.getScale(), op.getNormalize());
    Value dispatchW = softmax4(e, logits.logits, {false, true, false, false});
    Value combineW = softmax4(e, logits.logits, {false, false, true, true});
    SmallVector<IT> par4(4, IT::parallel);
    // The logits' cotangent from each softmax.
    Value dLogits, dxDirect;
    if (Value dRows = op.getRowsGrad()) {
      Value dRows4 = expandSoftRows(e, dRows, logits.logits);
      // dDw[g, m, e, s] = sum_d dRows4[e, g, s, d] x[g, m, d]; loops (g, m, e, s, d).
      Value dwInit = e.filled({g, m, ne, s}, e.cf32(0.0));
      Value dDispatch = e.generic(
          dwInit.getType(), {dRows4, x}, dwInit,
          {e.map(5, {2, 0, 3, 4}), e.map(5, {0, 1, 4}), e.map(5, {0, 1, 2, 3})},
          {IT::parallel, IT::parallel, IT::parallel, IT::parallel, IT::reduction},
          [](Emitter &e, ValueRange v) { return e.addf(v[2], e.mulf(v[0], v[1])); });
      dLogits = softmaxBackward4(e, dispatchW, dDispatch, {false, true, false, false});
      // dx[g, m, d] = sum_{e, s} Dw[g, m, e, s] dRows4[e, g, s, d]; loops (g, m, d, e, s).
      Value dxInit = e.filled({g, m, d}, e.cf32(0.0));
      dxDirect = e.generic(
          dxInit.getType(), {dispatchW, dRows4}, dxInit,
          {e.map(5, {0, 1, 3, 4}), e.map(5, {3, 0, 4, 2}), e.map(5, {0, 1, 2})},
          {IT::parallel, IT::parallel, IT::parallel, IT::reduction, IT::reduction},
          [](Emitter &e, ValueRange v) { return e.addf(v[2], e.mulf(v[0], v[1])); });
    }
    if (Value dCombine = op.getCombineWeightsGrad()) {
      Value fromCombine = softmaxBackward4(e, combineW, dCombine, {false, false, true, true});
      dLogits = dLogits ? addTensors(e, dLogits, fromCombine) : fromCombine;
    }
    if (!dLogits)
      dLogits = e.filled({g, m, ne, s}, e.cf32(0.0));
    // L = scale * L0: dscale = sum dL * L0, dL0 = scale * dL.
    Value dScale, dL0 = dLogits;
    if (Value scale = op.getScale()) {
      Value scInit = e.filled({}, e.cf32(0.0));
      dScale = e.generic(scInit.getType(), {dLogits, logits.l0}, scInit,
                         {e.map(4, {0, 1, 2, 3}), e.map(4, {0, 1, 2, 3}), e.map(4, {})},
                         SmallVector<IT>(4, IT::reduction), [](Emitter &e, ValueRange v) {
                           return e.addf(v[2], e.mulf(v[0], v[1]));
                         });
      Value sc = e.extract(scale, {});
      Value init = e.empty({g, m, ne, s}, e.f32());
      dL0 = e.generic(init.getType(), {dLogits}, init,
                      {e.map(4, {0, 1, 2, 3}), e.map(4, {0, 1, 2, 3})}, par4,
                      [&](Emitter &e, ValueRange v) { return e.mulf(v[0], sc); });
    }
    // dxn[g, m, d] = sum_{e, s} dL0[g, m, e, s] phin[d, e, s]; loops (g, m, d, e, s).
    Value dxnInit = e.filled({g, m, d}, e.cf32(0.0));
    Value dx = e.generic(
        dxnInit.getType(), {dL0, logits.phin}, dxnInit,
        {e.map(5, {0, 1, 3, 4}), e.map(5, {2, 3, 4}), e.map(5, {0, 1, 2})},
        {IT::parallel, IT::parallel, IT::parallel, IT::reduction, IT::reduction},
        [](Emitter &e, ValueRange v) { return e.addf(v[2], e.mulf(v[0], v[1])); });
    // dphin[d, e, s] = sum_{g, m} xn[g, m, d] dL0[g, m, e, s]; loops (d, e, s, g, m).
    Value dphiInit = e.filled({d, ne, s}, e.cf32(0.0));
    Value dphi = e.generic(
        dphiInit.getType(), {logits.xn, dL0}, dphiInit,
        {e.map(5, {3, 4, 0}), e.map(5, {3, 4, 1, 2}), e.map(5, {0, 1, 2})},
        {IT::parallel, IT::parallel, IT::parallel, IT::reduction, IT::reduction},
        [](Emitter &e, ValueRange v) { return e.addf(v[2], e.mulf(v[0], v[1])); });
    if (op.getNormalize()) {
      dx = normalizeBackward3(e, logits.xn, logits.xInverseNorm, dx, 2);
      dphi = normalizeBackward3(e, logits.phin, logits.phiInverseNorm, dphi, 0);
    }
    if (dxDirect)
      dx = addTensors(e, dxDirect, dx);
    SmallVector<Value> results{tensor::CastOp::create(b, op.getInputGrad().getType(), dx),
                               tensor::CastOp::create(b, op.getSlotsGrad().getType(), dphi)};
    if (dScale)
      results.push_back(dScale);
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// moe.soft_combine_grad: dOut[(e*G + g)*S + s] = sum_m Cw[g, m, e, s] dy[g, m]
/// and dCw[g, m, e, s] = <dy[g, m], out[(e*G + g)*S + s]>, f32.
struct LowerSoftCombineGrad : public OpRewritePattern<SoftCombineGradOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(SoftCombineGradOp op, PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter e(b);
    Value dy = op.getOutputGrad();
    Value cw = extendToF32(e, op.getCombineWeights());
    Value out4 = expandSoftRows(e, extendToF32(e, op.getExpertOutput()), cw);
    OpFoldResult g = e.dimOfr(cw, 0), m = e.dimOfr(cw, 1), ne = e.dimOfr(cw, 2),
                 s = e.dimOfr(cw, 3), d = e.dimOfr(dy, 2);
    // dOut4[e, g, s, d] = sum_m Cw[g, m, e, s] dy[g, m, d]; loops (e, g, s, d, m).
    Value outInit = e.filled({ne, g, s, d}, e.cf32(0.0));
    Value dOut4 = e.generic(
        outInit.getType(), {cw, dy}, outInit,
        {e.map(5, {1, 4, 0, 2}), e.map(5, {1, 4, 3}), e.map(5, {0, 1, 2, 3})},
        {IT::parallel, IT::parallel, IT::parallel, IT::parallel, IT::reduction},
        [](Emitter &e, ValueRange v) { return e.addf(v[2], e.mulf(v[0], v[1])); });
    Value dOut = tensor::CollapseShapeOp::create(
        b, dOut4, SmallVector<ReassociationIndices>{{0, 1, 2}, {3}});
    // dCw[g, m, e, s] = sum_d dy[g, m, d] out4[e, g, s, d]; loops (g, m, e, s, d).
    Value cwInit = e.filled({g, m, ne, s}, e.cf32(0.0));
    Value dCw = e.generic(
        cwInit.getType(), {dy, out4}, cwInit,
        {e.map(5, {0, 1, 4}), e.map(5, {2, 0, 3, 4}), e.map(5, {0, 1, 2, 3})},
        {IT::parallel, IT::parallel, IT::parallel, IT::parallel, IT::reduction},
        [](Emitter &e, ValueRange v) { return e.addf(v[2], e.mulf(v[0], v[1])); });
    rewriter.replaceOp(op,
                       {tensor::CastOp::create(b, op.getExpertOutputGrad().getType(), dOut),
                        tensor::CastOp::create(b, op.getCombineWeightsGrad().getType(), dCw)});
    return success();
  }
};

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// The adjoint ops (MoEGradOps.td, docs/spec.md §9)
//===----------------------------------------------------------------------===//
//
// The backward of the chain on the same kernels as the forward: the grouped
// GEMMs of lowering/GroupedGemm.h in their transposed-B form (dX = dZ W^T)
// and their weight-gradient form (dW[e] = A[rows of e]^T dZ[rows of e], K
// the expert's row count, summed in increasing row order: deterministic,
// exact zeros for an expert without rows), f32 throughout. Every reduction
// runs in a fixed order, whatever the thread count.

/// A grouped GEMM of the backward over kernel arguments: A, B, C and the
/// group offsets (null: one group of A's rows).
/// `bPacked`: `bm` is in the panel layout of prepareWeights (a transposed
/// B packed as its transpose), read as contiguous vectors. `biasGradient`
/// (weight gradients only, [G, N] f32): also the groups' column sums of B,
/// the bias gradient, as one more row of the GEMM (a column of ones in A).
/// `activationOut`: with EpilogueStep::activationGrad, H (C holds z, 2N
/// columns when gated, and receives dZ).
static void emitBackwardGemm(ImplicitLocOpBuilder &b, const KernelSite &site,
                             const GroupedGemmDesc &desc, Value a, Value bm, Value offsets,
                             Value c, Value bias = Value(), bool bPacked = false,
                             Value biasGradient = Value(), int64_t amxPairs = 0,
                             Value activationOut = Value()) {
  Emitter e(b);
  cpu::GroupedGemm gemm;
  gemm.desc = desc;
  gemm.config = site.config;
  gemm.a = a;
  gemm.b = bm;
  gemm.bPacked = bPacked;
  // amxPairs: B packed pairwise, the products on the AMX tile unit.
  gemm.bf16Dot = gemm.amx = amxPairs > 0;
  gemm.amxPairs = amxPairs;
  gemm.bias = bias;
  gemm.c = c;
  gemm.activationOut = activationOut;
  if (offsets) {
    gemm.groupOffsets = offsets;
    gemm.numGroups = e.subi(memDim(b, offsets, 0), e.idx(1));
  }
  if (desc.weightGradient()) {
    // C[g] is M x N with M = A's columns; the sum runs over the group's rows.
    gemm.numRows = memDim(b, a, 1);
    gemm.reduction = memDim(b, a, 0);
    gemm.columns = memDim(b, c, 2);
    // B (the plan rows' cotangents) copied into panels of the tile's width:
    // a tile streams its panel's rows instead of striding whole rows.
    int64_t width = site.config.getTileColumns(/*gated=*/false);
    Value panels = arith::CeilDivSIOp::create(b, memDim(b, bm, 1), e.idx(width));
    Value packed = allocBuffer(b, {OpFoldResult(panels), OpFoldResult(memDim(b, bm, 0)),
                                   b.getIndexAttr(width)},
                               b.getF32Type());
    cpu::emitPackRows(b, bm, packed, site.config);
    gemm.b = packed;
    gemm.bPackedRows = true;
    // A likewise, the micro-tile's columns side by side (and a column of
    // ones for a fused bias gradient: one more row of the result, summed in
    // the same increasing row order as the weights' rows).
    if (biasGradient) {
      gemm.numRows = e.addi(gemm.numRows, e.idx(1));
      gemm.biasGradient = biasGradient;
    }
    int64_t microRows = site.config.getMicroRows();
    Value aPanels = arith::CeilDivSIOp::create(b, gemm.numRows, e.idx(microRows));
    Value aPacked = allocBuffer(b, {OpFoldResult(aPanels), OpFoldResult(memDim(b, a, 0)),
                                    b.getIndexAttr(microRows)},
                                b.getF32Type());
    cpu::emitPackColumns(b, a, aPacked, site.config, /*appendOnes=*/biasGradient != nullptr);
    gemm.a = aPacked;
    gemm.aPackedColumns = true;
  } else {
    gemm.numRows = memDim(b, a, 0);
    gemm.reduction = memDim(b, a, 1);
    // A gated activation gradient's C holds both halves of z.
    gemm.columns = activationOut ? memDim(b, activationOut, 1) : memDim(b, c, 1);
  }
  cpu::emitGroupedGemm(b, gemm);
}

/// A one-group plan [0, rows) (memref<2xi32>).
static Value singleGroup(ImplicitLocOpBuilder &b, Value rows) {
  Emitter e(b);
  Value offsets = allocBuffer(b, {b.getIndexAttr(2)}, e.i32());
  memref::StoreOp::create(b, e.ci32(0), offsets, ValueRange{e.idx(0)});
  memref::StoreOp::create(b, e.toI32(rows), offsets, ValueRange{e.idx(1)});
  return offsets;
}

static void fillZero(ImplicitLocOpBuilder &b, Value buffer) {
  Type elt = cast<MemRefType>(buffer.getType()).getElementType();
  linalg::FillOp::create(b, ValueRange{arith::ConstantOp::create(b, b.getZeroAttr(elt))},
                         ValueRange{buffer});
}

/// The packed weights the expert FFN's backward reads, once per weight
/// buffer as the forward packs them (null where a weight cannot be packed:
/// then read as it is): W1 as it is for the recomputed z = rows W1 (all
/// 2H columns of a gated W1, unpaired), W1 and W2 as their transposes for
/// the dX GEMMs (drows = dz W1^T, dh = dout W2^T).
/// With the configuration's amx and bf16 rows and W1, W1 is packed pairwise
/// (VNNI) instead, and z is recomputed on the AMX tile unit as the forward
/// computed it; w1AmxPairs is then its (static) pair count, else 0.
/// The transposes are then packed pairwise too, and the dX GEMMs (whose
/// left operands are f32 cotangents) run on the tile unit with those split
/// into three bf16 parts (cpu::GroupedGemm::amx): their pair counts in
/// w1TAmxPairs, w2TAmxPairs.
struct BackwardWeights {
  Value w1, w1Transposed, w2Transposed;
  int64_t w1AmxPairs = 0, w1TAmxPairs = 0, w2TAmxPairs = 0;
};

static BackwardWeights packBackwardWeights(ImplicitLocOpBuilder &b, const KernelSite &site,
                                           Value w1, Value w2, Type rowsElt) {
  auto pack = [&](Value w, bool transposed, bool vnni) -> Value {
    return canPack(site, w) ? prepareWeights(b, site, w, /*gated=*/false, vnni, transposed)
                            : Value();
  };
  bool amx = site.config.getAmx() && rowsElt.isBF16() &&
             cast<MemRefType>(w1.getType()).getElementType().isBF16();
  BackwardWeights out{pack(w1, false, amx), pack(w1, true, amx), pack(w2, true, amx)};
  if (amx) {
    out.w1AmxPairs = amxPairs(site, out.w1);
    out.w1TAmxPairs = amxPairs(site, out.w1Transposed);
    out.w2TAmxPairs = amxPairs(site, out.w2Transposed);
  }
  if (out.w1AmxPairs || out.w1TAmxPairs || out.w2TAmxPairs)
    emitRequestAmx(b, enclosingModule(b));
  return out;
}

/// The expert FFN's backward over plan rows grouped by `offsets` (see
/// moe.expert_ffn_grad): z = rows W1 + b1 recomputed, h = round(act(z)),
/// dh = dout W2^T, dz = dh * act'(z), dW2 = h^T dout, dW1 = rows^T dz,
/// drows = dz W1^T, db1/db2 the groups' column sums of dz/dout. `drows`
/// must be zero where no group has rows (the caller fills it).
static void emitExpertFFNBackward(ImplicitLocOpBuilder &b, const KernelSite &site, Value rows,
                                  Value offsets, Value dout, Value w1, Value w2, Value b1,
                                  Value b2, ActivationAttr activation, Value drows, Value dw1,
                                  Value dw2, Value db1, Value db2,
                                  const BackwardWeights &packed) {
  Value w1Packed = packed.w1, w1Transposed = packed.w1Transposed,
        w2Transposed = packed.w2Transposed;
  Emitter e(b);
  Type f32 = e.f32();
  Type elt = cast<MemRefType>(rows.getType()).getElementType();
  Type wElt = cast<MemRefType>(w1.getType()).getElementType();
  Activation act = activation.getValue();
  Value numRows = memDim(b, rows, 0);
  Value width = memDim(b, w1, 2), hidden = memDim(b, w2, 1);

  // A GEMM over the expert weights: their packed copy (packBackwardWeights)
  // where there is one, else the weights as they are.
  auto emitWeightsGemm = [&](const GroupedGemmDesc &desc, Value a, Value packedW, Value w,
                             Value c, Value bias, int64_t amxPairs = 0,
                             Value activationOut = Value()) {
    emitBackwardGemm(b, site, desc, a, packedW ? packedW : w, offsets, c, bias,
                     /*bPacked=*/static_cast<bool>(packedW), Value(), amxPairs, activationOut);
  };

  // z = rows W1 (+ b1), f32 (the pre-activation the forward rounded away).
  Value z = allocBuffer(b, {OpFoldResult(numRows), OpFoldResult(width)}, f32);
  GroupedGemmDesc zDesc;
  zDesc.aType = elt;
  zDesc.bType = wElt;
  zDesc.cType = f32;
  if (b1)
    zDesc.epilogue.then(EpilogueStep::bias);
  emitWeightsGemm(zDesc, rows, w1Packed, w1, z, b1, packed.w1AmxPairs);
  // dh = dout W2^T, never stored: its epilogue (EpilogueStep::activationGrad)
  // turns z into dz in place and writes h (rounded to the element type, as
  // GEMM2 read it), with the activation and its derivative in the vector
  // math of the forward's epilogue.
  Value h = allocBuffer(b, {OpFoldResult(numRows), OpFoldResult(hidden)}, f32);
  GroupedGemmDesc dhDesc;
  dhDesc.bTransposed = true;
  dhDesc.aType = f32;
  dhDesc.bType = wElt;
  dhDesc.cType = f32;
  dhDesc.epilogue.then(EpilogueStep::activationGrad);
  dhDesc.epilogue.activation = act;
  dhDesc.epilogue.roundTo = elt;
  emitWeightsGemm(dhDesc, dout, w2Transposed, w2, z, Value(), packed.w2TAmxPairs, h);
  // The weight gradients: variable-K grouped GEMMs over each group's rows,
  // the bias gradients (the groups' column sums of dout and dz) fused.
  emitBackwardGemm(b, site, expertWeightGradient(false, f32, f32, f32), h, dout, offsets, dw2,
                   Value(), false, db2);
  emitBackwardGemm(b, site, expertWeightGradient(false, elt, f32, f32), rows, z, offsets, dw1,
                   Value(), false, db1);
  // drows = dz W1^T.
  GroupedGemmDesc dxDesc;
  dxDesc.bTransposed = true;
  dxDesc.aType = f32;
  dxDesc.bType = wElt;
  dxDesc.cType = f32;
  emitWeightsGemm(dxDesc, z, w1Transposed, w1, drows, Value(), packed.w1TAmxPairs);
}

struct LowerRouteGrad : public OpRewritePattern<RouteGradOp> {
  LowerRouteGrad(MLIRContext *ctx, KernelSite site) : OpRewritePattern(ctx), baseSite(site) {}
  KernelSite baseSite;

  LogicalResult matchAndRewrite(RouteGradOp op, PatternRewriter &rewriter) const override {
    KernelSite site = baseSite.configuredFor(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter e(b);
    Type f32 = e.f32();
    OpFoldResult tokens = e.dimOfr(op.getInput(), 0), modelDim = e.dimOfr(op.getInput(), 1),
                 experts = e.dimOfr(op.getRouterWeight(), 1);
    Value dx = allocBuffer(b, {tokens, modelDim}, f32);
    Value dwr = allocBuffer(b, {b.getIndexAttr(1), modelDim, experts}, f32);
    Value dbr = allocBuffer(b, {b.getIndexAttr(1), experts}, f32);
    Type xElt = op.getInput().getType().getElementType();
    Type wElt = op.getRouterWeight().getType().getElementType();
    kernel(b, site, site.kernelName("__moe_cpu_route_grad"),
           {asBuffer(b, op.getInput()), asBuffer(b, op.getRouterWeight()),
            asBuffer(b, op.getLogitsGrad()), dx, dwr, dbr},
           [&](ImplicitLocOpBuilder &b, ValueRange v) {
             // dx = do Wr^T: one group of T rows, Wr read transposed.
             GroupedGemmDesc dxDesc;
             dxDesc.weights = GemmWeights::shared;
             dxDesc.bTransposed = true;
             dxDesc.aType = b.getF32Type();
             dxDesc.bType = wElt;
             dxDesc.cType = b.getF32Type();
             emitBackwardGemm(b, site, dxDesc, v[2], v[1], Value(), v[3]);
             // dWr = x^T do, dbr = the column sums of do.
             Value plan = singleGroup(b, memDim(b, v[0], 0));
             emitBackwardGemm(b, site,
                              expertWeightGradient(false, xElt, b.getF32Type(), b.getF32Type()),
                              v[0], v[2], plan, v[4], Value(), false, v[5]);
           });
    Value dwr2 =
        memref::CollapseShapeOp::create(b, dwr, SmallVector<ReassociationIndices>{{0, 1}, {2}});
    Value dbr2 = memref::CollapseShapeOp::create(b, dbr, SmallVector<ReassociationIndices>{{0, 1}});
    rewriter.replaceOp(op, {asTensor(b, dx, op.getInputGrad().getType()),
                            asTensor(b, dwr2, op.getRouterWeightGrad().getType()),
                            asTensor(b, dbr2, op.getRouterBiasGrad().getType())});
    return success();
  }
};

struct LowerGateGrad : public OpRewritePattern<GateGradOp> {
  LowerGateGrad(MLIRContext *ctx, KernelSite site) : OpRewritePattern(ctx), site(site) {}
  KernelSite site;

  LogicalResult matchAndRewrite(GateGradOp op, PatternRewriter &rewriter) const override {
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter e(b);
    int64_t k = op.getIndices().getType().getDimSize(1);
    if (ShapedType::isDynamic(k))
      return rewriter.notifyMatchFailure(op, "the number of experts per token is dynamic");
    Value dlogits =
        allocBuffer(b, {e.dimOfr(op.getLogits(), 0), e.dimOfr(op.getLogits(), 1)}, e.f32());
    KernelArgs args{asBuffer(b, op.getLogits()), asBuffer(b, op.getIndices()),
                    asBuffer(b, op.getWeightsGrad()), dlogits};
    std::optional<unsigned> seedAt =
        args.addOptional(op.getSeed() ? asBuffer(b, op.getSeed()) : Value());
    std::optional<unsigned> auxAt =
        args.addOptional(op.getAuxLossGrad() ? asBuffer(b, op.getAuxLossGrad()) : Value());
    RoutingAttrInterface routing = op.getRouting();
    bool training = op.getTraining();
    std::string routingText;
    llvm::raw_string_ostream ros(routingText);
    ros << (training ? "train " : "infer ") << routing << " k=" << k;
    std::string name = "__moe_cpu_gate_grad_" + llvm::utohexstr(llvm::xxh3_64bits(routingText));
    kernel(b, site, name, args, [&](ImplicitLocOpBuilder &b, ValueRange v) {
      Emitter e(b);
      Value logits = v[0], indices = v[1], dw = v[2], out = v[3];
      Value seed = KernelArgs::at(v, seedAt), aux = KernelArgs::at(v, auxAt);
      Value tokens = memref::DimOp::create(b, logits, 0);
      using Mode = TokenRoutingKind::Mode;
      TokenRoutingKind kind = TokenRoutingKind::get(routing, training, false);
      kind.loss = kind.loss && aux;
      auto topk = dyn_cast<TopKRoutingAttr>(routing);
      TokenRoutingValues values;
      values.experts = memref::DimOp::create(b, logits, 1);
      values.k = e.idx(k);
      if (kind.production)
        values.scale = e.cf32(topk.getScale().convertToDouble());
      if (kind.mode == Mode::MoesartTraining && seed)
        std::tie(values.key0, values.key1) =
            buildPhiloxKey(b, memref::LoadOp::create(b, seed, ValueRange{}));
      if (kind.loss)
        values.lossGrad = e.divf(
            e.mulf(memref::LoadOp::create(b, aux, ValueRange{}),
                   e.cf32(routing.getRegularizerCoefficient())),
            e.toF32(tokens));
      auto forall = scf::ForallOp::create(b, ArrayRef<OpFoldResult>{OpFoldResult(tokens)},
                                          ValueRange{}, std::nullopt);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(forall.getBody());
      Value t = forall.getInductionVar(0);
      auto load = [&](ImplicitLocOpBuilder &b, Value buf, Value, Value col) -> Value {
        return memref::LoadOp::create(b, buf, ValueRange{t, col});
      };
      auto store = [&](ImplicitLocOpBuilder &b, Value v, Value buf, Value, Value col) {
        memref::StoreOp::create(b, v, buf, ValueRange{t, col});
      };
      values.token = e.toI32(t);
      buildTokenRoutingGrad(b, kind, values, TokenRowAccess{load, store}, logits, indices, dw,
                            out);
    });
    rewriter.replaceOp(op, asTensor(b, dlogits, op.getLogitsGrad().getType()));
    return success();
  }
};

struct LowerDispatchGrad : public OpRewritePattern<DispatchGradOp> {
  LowerDispatchGrad(MLIRContext *ctx, KernelSite site) : OpRewritePattern(ctx), baseSite(site) {}
  KernelSite baseSite;

  LogicalResult matchAndRewrite(DispatchGradOp op, PatternRewriter &rewriter) const override {
    KernelSite site = baseSite.configuredFor(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter e(b);
    // dx[t] = the sum of the token's rows in slot order: the combine's
    // kernel without weights.
    Value dx = allocBuffer(b, {e.dimOfr(op.getPositions(), 0), e.dimOfr(op.getRowsGrad(), 1)},
                           e.f32());
    emitCombine(b, site, asBuffer(b, op.getRowsGrad()), asBuffer(b, op.getPositions()), Value(),
                Value(), dx, /*checkPositions=*/true);
    rewriter.replaceOp(op, asTensor(b, dx, op.getInputGrad().getType()));
    return success();
  }
};

struct LowerCombineGrad : public OpRewritePattern<CombineGradOp> {
  LowerCombineGrad(MLIRContext *ctx, KernelSite site) : OpRewritePattern(ctx), baseSite(site) {}
  KernelSite baseSite;

  LogicalResult matchAndRewrite(CombineGradOp op, PatternRewriter &rewriter) const override {
    KernelSite site = baseSite.configuredFor(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter e(b);
    Value dout = allocBuffer(
        b, {e.dimOfr(op.getExpertOutput(), 0), e.dimOfr(op.getExpertOutput(), 1)}, e.f32());
    Value dw = allocBuffer(b, {e.dimOfr(op.getWeights(), 0), e.dimOfr(op.getWeights(), 1)},
                           e.f32());
    fillZero(b, dout);
    bool check = site.checkIndices;
    int64_t lanes = site.config.getLanes();
    std::string name = (Twine("__moe_cpu_combine_grad") + (check ? "_checked" : "") + "_v" +
                        Twine(site.config.getVectorBits()))
                           .str();
    kernel(b, site, name,
           {asBuffer(b, op.getOutputGrad()), asBuffer(b, op.getExpertOutput()),
            asBuffer(b, op.getWeights()), asBuffer(b, op.getPositions()), dout, dw},
           [&](ImplicitLocOpBuilder &b, ValueRange v) {
             ModuleOp module = check ? enclosingModule(b) : ModuleOp();
             Emitter e(b);
             Value dy = v[0], out = v[1], weights = v[2], positions = v[3], dOut = v[4],
                   dW = v[5];
             Value tokens = memDim(b, positions, 0), k = memDim(b, positions, 1);
             Value modelDim = memDim(b, dy, 1), numRows = memDim(b, out, 0);
             auto vt = VectorType::get({lanes}, e.f32());
             scf::ParallelOp::create(
                 b, ValueRange{e.idx(0)}, ValueRange{tokens}, ValueRange{e.idx(1)},
                 [&](OpBuilder &nested, Location loc, ValueRange ivs) {
                   ImplicitLocOpBuilder nb(loc, nested);
                   Emitter ne(nb);
                   Value t = ivs[0];
                   ne.forLoop(ne.idx(0), k, {}, [&](Emitter &ie, Value i, ValueRange) {
                     ImplicitLocOpBuilder &ib = ie.b;
                     Value pos = ie.toIndex(memref::LoadOp::create(ib, positions, {t, i}));
                     Value kept = ie.andi(ie.cmpi(arith::CmpIPredicate::sge, pos, ie.idx(0)),
                                          ie.cmpi(arith::CmpIPredicate::slt, pos, numRows));
                     if (check)
                       emitIndexCheck(ib, module,
                                      ie.ori(kept, ie.cmpi(arith::CmpIPredicate::eq, pos,
                                                           ie.idx(-1))),
                                      MOE_INDEX_BAD_POSITION);
                     Value w = cpu::toF32(ib, memref::LoadOp::create(ib, weights, {t, i}));
                     Value dot = ie.ifElse(
                         kept, {ie.f32()},
                         [&](Emitter &te) {
                           ImplicitLocOpBuilder &tb = te.b;
                           Value wv = vector::BroadcastOp::create(tb, vt, w);
                           Value zero = arith::ConstantOp::create(
                               tb, vt, DenseElementsAttr::get(vt, 0.0f));
                           Value acc = te.forLoop(
                               te.idx(0), arith::CeilDivSIOp::create(tb, modelDim,
                                                                     te.idx(lanes)),
                               {zero}, [&](Emitter &ce, Value blk, ValueRange a) {
                                 ImplicitLocOpBuilder &cb = ce.b;
                                 Value col = ce.muli(blk, ce.idx(lanes));
                                 Value mask = cpu::columnMask(cb, col, modelDim, lanes);
                                 Value g = cpu::loadF32Vector(cb, dy, {t, col}, mask);
                                 Value o = cpu::loadF32Vector(cb, out, {pos, col}, mask);
                                 cpu::storeVector(cb, ce.mulf(wv, g), dOut, {pos, col}, mask);
                                 return SmallVector<Value>{ce.addf(a[0], ce.mulf(g, o))};
                               })[0];
                           return SmallVector<Value>{vector::ReductionOp::create(
                               tb, vector::CombiningKind::ADD, acc)};
                         },
                         [&](Emitter &fe) { return SmallVector<Value>{fe.cf32(0.0)}; })[0];
                     memref::StoreOp::create(ib, dot, dW, ValueRange{t, i});
                     return SmallVector<Value>{};
                   });
                 });
           });
    rewriter.replaceOp(op, {asTensor(b, dout, op.getExpertOutputGrad().getType()),
                            asTensor(b, dw, op.getWeightsGrad().getType())});
    return success();
  }
};

struct LowerExpertFFNGrad : public OpRewritePattern<ExpertFFNGradOp> {
  LowerExpertFFNGrad(MLIRContext *ctx, KernelSite site) : OpRewritePattern(ctx), baseSite(site) {}
  KernelSite baseSite;

  LogicalResult matchAndRewrite(ExpertFFNGradOp op, PatternRewriter &rewriter) const override {
    KernelSite site = baseSite.configuredFor(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter e(b);
    Type f32 = e.f32();
    auto sizesOf = [&](Value t) {
      SmallVector<OpFoldResult> sizes;
      for (int64_t i = 0, n = cast<RankedTensorType>(t.getType()).getRank(); i < n; ++i)
        sizes.push_back(e.dimOfr(t, i));
      return sizes;
    };
    Value drows = allocBuffer(b, sizesOf(op.getRows()), f32);
    Value dw1 = allocBuffer(b, sizesOf(op.getW1()), f32);
    Value dw2 = allocBuffer(b, sizesOf(op.getW2()), f32);
    Value db1 = op.getB1() ? allocBuffer(b, sizesOf(op.getB1()), f32) : Value();
    Value db2 = op.getB2() ? allocBuffer(b, sizesOf(op.getB2()), f32) : Value();
    fillZero(b, drows);
    Value w1 = asBuffer(b, op.getW1()), w2 = asBuffer(b, op.getW2());
    KernelArgs args{asBuffer(b, op.getRows()), asBuffer(b, op.getOffsets()),
                    asBuffer(b, op.getOutputGrad()), w1, w2, drows, dw1, dw2};
    std::optional<unsigned> b1At = args.addOptional(op.getB1() ? asBuffer(b, op.getB1()) : Value());
    std::optional<unsigned> b2At = args.addOptional(op.getB2() ? asBuffer(b, op.getB2()) : Value());
    std::optional<unsigned> db1At = args.addOptional(db1), db2At = args.addOptional(db2);
    BackwardWeights packed =
        packBackwardWeights(b, site, w1, w2, getElementTypeOrSelf(op.getRows().getType()));
    std::optional<unsigned> w1pAt = args.addOptional(packed.w1),
                            w1tAt = args.addOptional(packed.w1Transposed),
                            w2tAt = args.addOptional(packed.w2Transposed);
    ActivationAttr activation = op.getActivationAttr();
    std::string name = site.kernelName(
        "__moe_cpu_expert_ffn_grad_" + stringifyActivation(activation.getValue()) +
        (db1 ? "_bias" : "") + (packed.w1 ? "_packed1" : "") +
        (packed.w1AmxPairs ? "_amx" + std::to_string(packed.w1AmxPairs) + "_" +
                                 std::to_string(packed.w1TAmxPairs) + "_" +
                                 std::to_string(packed.w2TAmxPairs)
                           : "") +
        (packed.w2Transposed ? "_packed2" : ""));
    kernel(b, site, name, args, [&](ImplicitLocOpBuilder &b, ValueRange v) {
      emitExpertFFNBackward(b, site, v[0], v[1], v[2], v[3], v[4], KernelArgs::at(v, b1At),
                            KernelArgs::at(v, b2At), activation, v[5], v[6], v[7],
                            KernelArgs::at(v, db1At), KernelArgs::at(v, db2At),
                            // The kernel's arguments, with the static pair counts.
                            BackwardWeights{KernelArgs::at(v, w1pAt), KernelArgs::at(v, w1tAt),
                                            KernelArgs::at(v, w2tAt), packed.w1AmxPairs,
                                            packed.w1TAmxPairs, packed.w2TAmxPairs});
    });
    SmallVector<Value> results{asTensor(b, drows, op.getRowsGrad().getType()),
                               asTensor(b, dw1, op.getW1Grad().getType()),
                               asTensor(b, dw2, op.getW2Grad().getType())};
    if (db1) {
      results.push_back(asTensor(b, db1, op.getB1Grad().getType()));
      results.push_back(asTensor(b, db2, op.getB2Grad().getType()));
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// moe.shared_expert_grad: the expert FFN's backward with one group of all
/// T rows on dout * gate, and the gate's own backward: dgate_t =
/// <dout_t, f(x_t)> (f recomputed), d(x sg)_t = dgate_t g_t (1 - g_t).
struct LowerSharedExpertGrad : public OpRewritePattern<SharedExpertGradOp> {
  LowerSharedExpertGrad(MLIRContext *ctx, KernelSite site)
      : OpRewritePattern(ctx), baseSite(site) {}
  KernelSite baseSite;

  LogicalResult matchAndRewrite(SharedExpertGradOp op, PatternRewriter &rewriter) const override {
    KernelSite site = baseSite.configuredFor(op);
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    Emitter e(b);
    Type f32 = e.f32();
    Value x = op.getInput();
    Value tokens = e.dim(x, 0);
    OpFoldResult modelDim = e.dimOfr(x, 1);
    // One expert: [D, W] -> [1, D, W] (as the forward's lowering views it).
    auto asExperts = [&](Value w) -> Value {
      auto type = cast<RankedTensorType>(w.getType());
      auto expanded =
          RankedTensorType::get({1, type.getDimSize(0), type.getDimSize(1)}, type.getElementType());
      return asBuffer(b, tensor::ExpandShapeOp::create(
                             b, expanded, w, SmallVector<ReassociationIndices>{{0, 1}, {2}},
                             SmallVector<OpFoldResult>{b.getIndexAttr(1), e.dimOfr(w, 0),
                                                       e.dimOfr(w, 1)}));
    };
    Value xb = asBuffer(b, x);
    Value s1 = op.getSharedW1(), s2 = op.getSharedW2();
    Value s1b = asExperts(s1), s2b = asExperts(s2);
    Value offsets = singleGroup(b, tokens);
    Value dout = asBuffer(b, op.getOutputGrad());
    // The gate and the cotangent of the ungated FFN.
    Value dgateLogit, scaledOut = dout;
    if (op.getSharedGate()) {
      Value logits = allocBuffer(b, {OpFoldResult(tokens), b.getIndexAttr(1)}, f32);
      emitRouter(b, site, xb, asBuffer(b, op.getSharedGate()), Value(), logits);
      // f(x): the shared FFN without the gate.
      Value fx = allocBuffer(b, {OpFoldResult(tokens), modelDim}, f32);
      emitExpertFFN(b, site, xb, Value(), offsets, s1b, s2b, Value(),
                    Value(), op.getActivationAttr(), tokens, Value(), fx);
      scaledOut = allocBuffer(b, {OpFoldResult(tokens), modelDim}, f32);
      dgateLogit = allocBuffer(b, {OpFoldResult(tokens), b.getIndexAttr(1)}, f32);
      Value d = e.dim(x, 1);
      scf::ParallelOp::create(
          b, ValueRange{e.idx(0)}, ValueRange{tokens}, ValueRange{e.idx(1)},
          [&](OpBuilder &nested, Location loc, ValueRange ivs) {
            ImplicitLocOpBuilder nb(loc, nested);
            Emitter ne(nb);
            Value t = ivs[0];
            Value o = memref::LoadOp::create(nb, logits, ValueRange{t, ne.idx(0)});
            Value g = ne.divf(ne.cf32(1.0),
                              ne.addf(ne.cf32(1.0), ne.routingExp(arith::NegFOp::create(nb, o))));
            Value dot = ne.forLoop(ne.idx(0), d, {ne.cf32(0.0)},
                                   [&](Emitter &ce, Value c, ValueRange a) {
                                     Value dy = memref::LoadOp::create(ce.b, dout, ValueRange{t, c});
                                     Value f = memref::LoadOp::create(ce.b, fx, ValueRange{t, c});
                                     memref::StoreOp::create(ce.b, ce.mulf(dy, g), scaledOut,
                                                             ValueRange{t, c});
                                     return SmallVector<Value>{ce.addf(a[0], ce.mulf(dy, f))};
                                   })[0];
            Value dl = ne.mulf(dot, ne.mulf(g, ne.subf(ne.cf32(1.0), g)));
            memref::StoreOp::create(nb, dl, dgateLogit, ValueRange{t, ne.idx(0)});
          });
    }
    Value dx = allocBuffer(b, {OpFoldResult(tokens), modelDim}, f32);
    fillZero(b, dx);
    Value ds1 = allocBuffer(b, {b.getIndexAttr(1), e.dimOfr(s1, 0), e.dimOfr(s1, 1)}, f32);
    Value ds2 = allocBuffer(b, {b.getIndexAttr(1), e.dimOfr(s2, 0), e.dimOfr(s2, 1)}, f32);
    BackwardWeights packed =
        packBackwardWeights(b, site, s1b, s2b, getElementTypeOrSelf(xb.getType()));
    emitExpertFFNBackward(b, site, xb, offsets, scaledOut, s1b, s2b,
                          Value(), Value(), op.getActivationAttr(), dx, ds1, ds2, Value(),
                          Value(), packed);
    SmallVector<ReassociationIndices> drop{{0, 1}, {2}};
    SmallVector<Value> results{
        asTensor(b, dx, op.getInputGrad().getType()),
        asTensor(b, memref::CollapseShapeOp::create(b, ds1, drop), op.getSharedW1Grad().getType()),
        asTensor(b, memref::CollapseShapeOp::create(b, ds2, drop), op.getSharedW2Grad().getType())};
    if (op.getSharedGate()) {
      // dsg = x^T dl (one group), dx += dl sg^T.
      Value dsg = allocBuffer(b, {b.getIndexAttr(1), modelDim, b.getIndexAttr(1)}, f32);
      emitBackwardGemm(b, site,
                       expertWeightGradient(false, getElementTypeOrSelf(x.getType()), f32, f32), xb,
                       dgateLogit, offsets, dsg);
      Value sg = asBuffer(b, op.getSharedGate());
      Value d = e.dim(x, 1);
      scf::ParallelOp::create(
          b, ValueRange{e.idx(0)}, ValueRange{tokens}, ValueRange{e.idx(1)},
          [&](OpBuilder &nested, Location loc, ValueRange ivs) {
            ImplicitLocOpBuilder nb(loc, nested);
            Emitter ne(nb);
            Value t = ivs[0];
            Value dl = memref::LoadOp::create(nb, dgateLogit, ValueRange{t, ne.idx(0)});
            ne.forLoop(ne.idx(0), d, {}, [&](Emitter &ce, Value c, ValueRange) {
              Value w = cpu::toF32(ce.b, memref::LoadOp::create(ce.b, sg, ValueRange{c, ce.idx(0)}));
              Value old = memref::LoadOp::create(ce.b, dx, ValueRange{t, c});
              memref::StoreOp::create(ce.b, ce.addf(old, ce.mulf(dl, w)), dx, ValueRange{t, c});
              return SmallVector<Value>{};
            });
          });
      results.push_back(asTensor(b, memref::CollapseShapeOp::create(b, dsg, drop),
                                 op.getSharedGateGrad().getType()));
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct ConvertMoEToCPUPass
    : public moe::impl::ConvertMoEToCPUBase<ConvertMoEToCPUPass> {
  using ConvertMoEToCPUBase::ConvertMoEToCPUBase;
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName()
                            << " at " << getOperation()->getLoc() << "\n");
    Operation *root = getOperation();
    // Soft MoE and hand-written gates still compute in f32 only: say so.
    WalkResult unsupported = root->walk([](Operation *op) {
      bool f32Only = isa<SoftLayerOp, SoftDispatchOp, SoftCombineOp, FusedSoftExpertsOp,
                         GateOp>(op);
      if (!f32Only)
        return WalkResult::advance();
      for (Type t : llvm::concat<const Type>(op->getOperandTypes(), op->getResultTypes())) {
        auto tt = dyn_cast<RankedTensorType>(t);
        if (tt && isa<FloatType>(tt.getElementType()) && !tt.getElementType().isF32()) {
          op->emitError() << "cannot lower '" << op->getName() << "' with element type "
                          << tt.getElementType()
                          << ": the CPU lowering computes this op in f32 only";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (unsupported.wasInterrupted())
      return signalPassFailure();
    // The CPU kernels need a static number of experts (the plan's size; the
    // gate alone does not).
    WalkResult dynamicExperts = root->walk([](Operation *op) {
      int64_t numExperts = 0;
      if (auto layer = dyn_cast<LayerOp>(op))
        numExperts = layer.getNumExperts();
      else if (auto soft = dyn_cast<SoftLayerOp>(op))
        numExperts = soft.getNumExperts();
      else if (auto ffn = dyn_cast<ExpertFFNOp>(op))
        numExperts = cast<RankedTensorType>(ffn.getW1().getType()).getDimSize(0);
      if (!ShapedType::isDynamic(numExperts))
        return WalkResult::advance();
      op->emitError() << "cannot lower '" << op->getName()
                      << "' to the CPU: the number of experts is dynamic";
      return WalkResult::interrupt();
    });
    if (dynamicExperts.wasInterrupted())
      return signalPassFailure();
    // Outlined kernels and packed weights are symbols of the pass's module: a
    // moe op of a nested module could not call them.
    if (auto module = dyn_cast<ModuleOp>(root)) {
      WalkResult nested = module.walk([&](Operation *op) {
        if (!isa_and_nonnull<MoEDialect>(op->getDialect()) ||
            op->getParentOfType<ModuleOp>() == module)
          return WalkResult::advance();
        op->emitError() << "cannot lower '" << op->getName()
                        << "' inside a nested builtin.module: run convert-moe-to-cpu on "
                           "that module (--pass-pipeline='builtin.module(builtin.module("
                           "convert-moe-to-cpu))')";
        return WalkResult::interrupt();
      });
      if (nested.wasInterrupted())
        return signalPassFailure();
    }

    // Layers become route -> gate -> fused_experts (the CPU's kernel family);
    // chains the user wrote stay as written unless they fuse.
    {
      RewritePatternSet prepare(&getContext());
      populateDecompositionPatterns(prepare);
      populateFusionPatterns(prepare);
      if (failed(applyPatternsGreedily(root, std::move(prepare))))
        return signalPassFailure();
    }

    ConversionTarget target(getContext());
    target.addIllegalDialect<MoEDialect>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(&getContext());
    populateDecompositionPatterns(patterns);
    // Outlined kernels and packed weights are module symbols: only when this
    // pass owns the module.
    populateMoEToLinalgPatterns(patterns, dyn_cast<ModuleOp>(root), packWeights, checkIndices);
    if (failed(applyPartialConversion(root, target, std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void moe::populateMoEToLinalgPatterns(RewritePatternSet &patterns, ModuleOp kernelModule,
                                      bool packWeights, bool checkIndices) {
  KernelSite site{kernelModule ? kernelModule.getOperation() : nullptr, packWeights,
                  checkIndices, CpuConfigAttr()};
  patterns.add<LowerSoftDispatch, LowerSoftCombine, LowerFusedSoftExperts, LowerSoftDispatchGrad,
               LowerSoftCombineGrad>(patterns.getContext());
  patterns.add<LowerDispatch, LowerRoute, LowerGate, LowerExpertFFN, LowerSharedExpert, LowerCombine,
               LowerFusedExperts>(
      patterns.getContext(), site);
  patterns.add<LowerRouteGrad, LowerGateGrad, LowerDispatchGrad, LowerExpertFFNGrad,
               LowerSharedExpertGrad, LowerCombineGrad>(patterns.getContext(), site);
}
