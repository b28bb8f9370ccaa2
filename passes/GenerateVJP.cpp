//===- GenerateVJP.cpp - --moe-generate-vjp -------------------------------===//
//
// Reverse-mode differentiation at the level of ops (docs/spec.md §9): f_vjp
// is f's forward (layers decomposed, fused chains unfused) followed by the
// adjoint of every active op in reverse order, each built by the op's
// AdjointOpInterface. Nothing is differentiated at the scalar level: the
// adjoint of a grouped GEMM is grouped GEMMs (moe.expert_ffn_grad).
//
//===----------------------------------------------------------------------===//

#include "dialect/MoEAdjointInterface.h"
#include "dialect/MoEOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "moe-generate-vjp"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEGENERATEVJP
#include "passes/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

/// moe.fused_experts -> its chain (the op's definition): the backward needs
/// the plan and the expert outputs, which the fused op keeps to itself.
struct UnfuseExperts : public OpRewritePattern<FusedExpertsOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(FusedExpertsOp op, PatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto dispatch = DispatchOp::create(rewriter, loc, op.getInput(), op.getIndices(),
                                       op.getNumExpertsAttr(), op.getCapacityFactorAttr());
    auto ffn = ExpertFFNOp::create(rewriter, loc, dispatch.getRows().getType(),
                                   dispatch.getRows(), dispatch.getOffsets(), op.getW1(),
                                   op.getW2(), op.getW1Scale(), op.getW2Scale(),
                                   op.getW1ZeroPoint(), op.getW2ZeroPoint(), op.getB1(),
                                   op.getB2(), op.getActivationAttr(), op.getQuantAttr());
    copyLoweringConfig(op, ffn);
    rewriter.replaceOpWithNewOp<CombineOp>(op, op.getOutput().getType(), ffn.getOutput(),
                                           op.getWeights(), dispatch.getPositions(),
                                           op.getSharedOutput());
    return success();
  }
};

/// moe.fused_soft_experts -> moe.soft_layer (its definition), which the
/// decomposition patterns turn into the soft chain.
struct UnfuseSoftExperts : public OpRewritePattern<FusedSoftExpertsOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(FusedSoftExpertsOp op, PatternRewriter &rewriter) const override {
    auto layer = rewriter.replaceOpWithNewOp<SoftLayerOp>(
        op, op.getOutput().getType(), op.getInput(), op.getSlots(), op.getScale(), op.getW1(),
        op.getW2(), op.getB1(), op.getB2(), op.getActivationAttr(), op.getNormalizeAttr());
    copyLoweringConfig(op, layer);
    return success();
  }
};

bool isFloatTensor(Type t) {
  auto tensor = dyn_cast<RankedTensorType>(t);
  return tensor && isa<FloatType>(tensor.getElementType());
}

/// `v` (an f32 cotangent) in the element type of `like`, rounded once.
Value castLike(OpBuilder &b, Location loc, Value v, Type like) {
  if (v.getType() == like)
    return v;
  return arith::TruncFOp::create(b, loc, like, v);
}

/// The reverse sweep over one function body.
class ReverseSweep {
public:
  explicit ReverseSweep(func::FuncOp fn) : fn(fn) {}

  /// The ops that need an adjoint: those with a floating-point result that
  /// depends on a floating-point argument and that a result depends on.
  /// Fails with an error naming the first such op that has no adjoint.
  LogicalResult findActiveOps();
  /// Appends the backward to the body and returns the new terminator's
  /// operands: f's results, then the gradients.
  FailureOr<SmallVector<Value>> build(ValueRange cotangentArgs, unsigned numForwardArgs);

private:
  void accumulate(OpBuilder &b, Value v, Value cotangent);

  func::FuncOp fn;
  /// Floating-point values that depend on a floating-point argument.
  llvm::DenseSet<Value> varied;
  SmallVector<Operation *> active;
  DenseMap<Value, Value> cotangents;
};

LogicalResult ReverseSweep::findActiveOps() {
  Block &body = fn.getBody().front();
  for (BlockArgument arg : body.getArguments())
    if (isFloatTensor(arg.getType()))
      varied.insert(arg);
  // Forward: what the arguments reach.
  for (Operation &op : body.without_terminator()) {
    bool fromArgument = llvm::any_of(op.getOperands(), [&](Value v) { return varied.count(v); });
    // Values used inside nested regions count as operands too.
    op.walk([&](Operation *nested) {
      for (Value v : nested->getOperands())
        fromArgument |= static_cast<bool>(varied.count(v));
    });
    if (!fromArgument)
      continue;
    for (Value r : op.getResults())
      if (isFloatTensor(r.getType()))
        varied.insert(r);
  }
  // Backward: what the results need.
  llvm::DenseSet<Value> needed;
  for (Value v : body.getTerminator()->getOperands())
    needed.insert(v);
  SmallVector<Operation *> reversed;
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    bool useful = llvm::any_of(op.getResults(), [&](Value r) {
      return varied.count(r) && needed.count(r);
    });
    if (!useful)
      continue;
    auto adjoint = dyn_cast<AdjointOpInterface>(op);
    // An op with regions is control flow (scf.for, scf.if, ...) unless it
    // states its adjoint: linalg.matmul's region is its scalar body.
    if (op.getNumRegions() != 0 && !adjoint)
      return op.emitError() << "cannot differentiate '" << op.getName()
                            << "': control flow is not supported by --moe-generate-vjp";
    if (!adjoint)
      return op.emitError() << "cannot differentiate '" << op.getName()
                            << "': it has no adjoint (AdjointOpInterface)";
    std::string why = adjoint.whyNotDifferentiable();
    if (!why.empty())
      return op.emitError() << "cannot differentiate '" << op.getName() << "': " << why;
    reversed.push_back(&op);
    for (Value v : op.getOperands())
      if (varied.count(v))
        needed.insert(v);
  }
  active = std::move(reversed);
  return success();
}

void ReverseSweep::accumulate(OpBuilder &b, Value v, Value cotangent) {
  if (!cotangent || !varied.count(v))
    return;
  Value &slot = cotangents[v];
  slot = slot ? arith::AddFOp::create(b, v.getLoc(), slot, cotangent).getResult() : cotangent;
}

FailureOr<SmallVector<Value>> ReverseSweep::build(ValueRange cotangentArgs,
                                                  unsigned numForwardArgs) {
  Block &body = fn.getBody().front();
  Operation *terminator = body.getTerminator();
  OpBuilder b(terminator);
  // The seeds: the cotangent arguments, as f32.
  for (auto [result, dy] : llvm::zip(terminator->getOperands(), cotangentArgs))
    if (isFloatTensor(result.getType()))
      accumulate(b, result, castToF32(b, dy.getLoc(), dy));
  for (Operation *op : active) {
    SmallVector<Value> resultCotangents;
    bool any = false;
    for (Value r : op->getResults()) {
      resultCotangents.push_back(cotangents.lookup(r));
      any |= static_cast<bool>(resultCotangents.back());
    }
    if (!any)
      continue;
    SmallVector<Value> operandCotangents;
    if (failed(cast<AdjointOpInterface>(op).buildAdjoint(b, resultCotangents,
                                                         operandCotangents)))
      return op->emitError() << "the adjoint of '" << op->getName() << "' failed";
    for (auto [operand, cotangent] : llvm::zip(op->getOperands(), operandCotangents))
      accumulate(b, operand, cotangent);
  }
  SmallVector<Value> results(terminator->getOperands());
  for (BlockArgument arg : body.getArguments().take_front(numForwardArgs)) {
    if (!isFloatTensor(arg.getType()))
      continue;
    Value cotangent = cotangents.lookup(arg);
    if (!cotangent)
      cotangent = zerosLike(b, arg.getLoc(), arg);
    results.push_back(castLike(b, arg.getLoc(), cotangent, arg.getType()));
  }
  return results;
}

struct MoEGenerateVJPPass : public moe::impl::MoEGenerateVJPBase<MoEGenerateVJPPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(rejectQuantizedLayers(getOperation(), "--moe-generate-vjp")))
      return signalPassFailure();
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> functions;
    if (entries.empty()) {
      for (auto fn : module.getOps<func::FuncOp>())
        if (fn.isPublic() && !fn.isExternal())
          functions.push_back(fn);
    } else {
      for (const std::string &name : entries) {
        auto fn = symbols.lookup<func::FuncOp>(name);
        if (!fn || fn.isExternal()) {
          module.emitError() << "--moe-generate-vjp: entries names '" << name
                             << "', which is not a function with a body in this module";
          return signalPassFailure();
        }
        functions.push_back(fn);
      }
    }
    // Everything is built detached first: on any error the module is left
    // as it was.
    SmallVector<func::FuncOp> built;
    auto dropBuilt = [&]() {
      for (func::FuncOp fn : built)
        fn.erase();
    };
    for (func::FuncOp fn : functions) {
      FailureOr<func::FuncOp> vjp = buildVjp(fn, symbols);
      if (failed(vjp)) {
        dropBuilt();
        return signalPassFailure();
      }
      built.push_back(*vjp);
    }
    for (func::FuncOp fn : built)
      symbols.insert(fn);
  }

  FailureOr<func::FuncOp> buildVjp(func::FuncOp fn, SymbolTable &symbols) {
    std::string name = (fn.getSymName() + "_vjp").str();
    if (symbols.lookup(name))
      return fn.emitError() << "--moe-generate-vjp: cannot add @" << name
                            << ", a symbol of that name exists";
    if (!fn.getBody().hasOneBlock())
      return fn.emitError() << "--moe-generate-vjp: @" << fn.getSymName()
                            << " has more than one block (control flow is not supported)";
    for (Type t : fn.getResultTypes())
      if (isa<FloatType>(t) || (!isa<RankedTensorType>(t) && !isa<IntegerType>(t) &&
                                !isa<IndexType>(t)))
        return fn.emitError() << "--moe-generate-vjp: @" << fn.getSymName()
                              << " returns " << t << "; only ranked tensors are "
                              << "differentiated";
    func::FuncOp vjp = fn.clone();
    vjp.setName(name);
    vjp.setPublic();
    // The forward in the form the adjoints are stated for.
    RewritePatternSet patterns(&getContext());
    populateDecompositionPatterns(patterns);
    patterns.add<UnfuseExperts, UnfuseSoftExperts>(&getContext());
    GreedyRewriteConfig config;
    config.enableFolding(false);
    if (failed(applyPatternsGreedily(vjp, std::move(patterns), config))) {
      vjp.erase();
      return fn.emitError() << "--moe-generate-vjp: decomposing @" << fn.getSymName()
                            << " did not converge";
    }
    // A layer left whole (its E is dynamic) has no adjoint: reported below.
    unsigned numForwardArgs = fn.getNumArguments();
    SmallVector<Value> cotangentArgs;
    Block &body = vjp.getBody().front();
    for (Type t : fn.getResultTypes())
      cotangentArgs.push_back(body.addArgument(t, fn.getLoc()));
    ReverseSweep sweep(vjp);
    FailureOr<SmallVector<Value>> results = failure();
    if (succeeded(sweep.findActiveOps()))
      results = sweep.build(cotangentArgs, numForwardArgs);
    if (failed(results)) {
      vjp.erase();
      return failure();
    }
    Operation *terminator = body.getTerminator();
    OpBuilder b(terminator);
    func::ReturnOp::create(b, terminator->getLoc(), *results);
    terminator->erase();
    // The signature: arguments (attributes kept, none on the cotangents),
    // results.
    SmallVector<Type> argTypes(body.getArgumentTypes());
    SmallVector<Type> resultTypes;
    for (Value v : *results)
      resultTypes.push_back(v.getType());
    vjp.setType(FunctionType::get(&getContext(), argTypes, resultTypes));
    if (ArrayAttr argAttrs = fn.getArgAttrsAttr()) {
      SmallVector<Attribute> attrs(argAttrs.begin(), argAttrs.end());
      attrs.resize(argTypes.size(), DictionaryAttr::get(&getContext()));
      vjp.setArgAttrsAttr(ArrayAttr::get(&getContext(), attrs));
    }
    if (ArrayAttr resAttrs = fn.getResAttrsAttr()) {
      SmallVector<Attribute> attrs(resAttrs.begin(), resAttrs.end());
      attrs.resize(resultTypes.size(), DictionaryAttr::get(&getContext()));
      vjp.setResAttrsAttr(ArrayAttr::get(&getContext(), attrs));
    }
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] built @" << name << "\n");
    return vjp;
  }
};

} // namespace

std::string mlir::moe::requestedVjpBase(ModuleOp module, StringRef name) {
  if (!name.ends_with("_vjp") || module.lookupSymbol(name))
    return "";
  StringRef base = name.drop_back(4);
  auto forward = module.lookupSymbol<func::FuncOp>(base);
  if (!forward || forward.isExternal())
    return "";
  return base.str();
}
