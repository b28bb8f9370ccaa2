//===- RaiseLinalg.cpp - dense MoE in upstream ops -> moe.layer -----------===//
//
// --moe-raise-linalg recognises a dense (softmax-gated, every-expert) MoE
// layer written in upstream linalg/arith/math ops, the way frontends emit it,
// and rebuilds `moe.layer {routing = #moe.dense}` (docs/spec.md §3, §3.1).
// The raised forms are listed in the pass description (Passes.td).
//
// How it matches. Every tensor value is looked at with one index letter per
// dimension: t (tokens), d (model width), e (experts), h (expert hidden),
// '1' (a size-1 dimension read at index 0, as torch-mlir's keepdim
// broadcasts do). Through a linalg op the letters follow its indexing maps,
// so a linalg.broadcast, a linalg.transpose, a copy-like linalg.generic or a
// tensor.expand_shape of unit dims only renames letters (lookThrough), and a
// contraction "td,edh->eth" reads as the letters of its two operands. The
// payload of elementwise linalg ops (linalg.generic or named ops such as
// linalg.add/exp/negf/div/max, whose regions hold the same scalar ops) is
// read as a tree of its scalar ops (Expr) whose leaves are tensors with
// letters, so an activation written in one generic or in six named ops gives
// the same tree. Activations and the softmax are recognised by matching these
// trees against their op patterns (e.g. silu = x / (1 + exp(-x))); chains of
// mulf/divf by constants and addf/subf are flattened (a product of factors
// times a coefficient, a sum of terms) so that the association order of a
// frontend does not matter.
//
// Nothing is built until the whole layer has matched; a candidate left alone
// (a linalg reduction that sums gate[t,e] * y[e,t,d]-like products) gets one
// remark naming the first mismatch.
//
//===----------------------------------------------------------------------===//

#include "dialect/MoEOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#include <cmath>
#include <deque>
#include <optional>
#include <string>

#define DEBUG_TYPE "moe-raise-linalg"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOERAISELINALG
#include "passes/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

//===----------------------------------------------------------------------===//
// Index letters
//===----------------------------------------------------------------------===//

/// A tensor value read with one letter per dimension.
struct View {
  Value value;
  std::string letters;
  bool operator==(const View &o) const { return value == o.value && letters == o.letters; }
};

/// The letters without the size-1 dims.
static std::string named(StringRef letters) {
  std::string out;
  for (char c : letters)
    if (c != '1')
      out.push_back(c);
  return out;
}

/// The letters of an operand read through `map` from loops named `loops`.
/// A constant-0 result is allowed on a static size-1 dimension only.
static std::optional<std::string> operandLetters(AffineMap map, StringRef loops, Type type) {
  auto shaped = dyn_cast<RankedTensorType>(type);
  std::string out;
  for (auto [i, e] : llvm::enumerate(map.getResults())) {
    if (auto d = dyn_cast<AffineDimExpr>(e)) {
      out.push_back(loops[d.getPosition()]);
      continue;
    }
    auto c = dyn_cast<AffineConstantExpr>(e);
    if (!c || c.getValue() != 0 || !shaped || shaped.getDimSize(i) != 1)
      return std::nullopt;
    out.push_back('1');
  }
  return out;
}

/// Names the loops of `op` from the letters of its result `res`; the loops
/// that the result does not index get the letters of `rest`, in order.
static std::optional<std::string> loopLetters(linalg::LinalgOp op, OpResult res,
                                              StringRef outLetters, StringRef rest) {
  AffineMap map = op.getIndexingMapMatchingResult(res);
  if (map.getNumResults() != outLetters.size())
    return std::nullopt;
  std::string loops(op.getNumLoops(), '?');
  for (auto [e, l] : llvm::zip(map.getResults(), outLetters)) {
    auto d = dyn_cast<AffineDimExpr>(e);
    auto c = dyn_cast<AffineConstantExpr>(e);
    if (c && c.getValue() == 0 && l == '1') // a keepdim reduction's size-1 dim
      continue;
    if (!d || (loops[d.getPosition()] != '?' && loops[d.getPosition()] != l))
      return std::nullopt;
    loops[d.getPosition()] = l;
  }
  size_t next = 0;
  for (char &c : loops)
    if (c == '?') {
      if (next == rest.size())
        return std::nullopt;
      c = rest[next++];
    }
  if (next != rest.size())
    return std::nullopt;
  return loops;
}

/// linalg::isElementwise, relaxed to size-1 broadcast maps (`(t, e) -> (t,
/// 0)`) on the inputs; one init, no linalg.index.
static bool isElementwiseLike(linalg::LinalgOp op) {
  if (op->getNumResults() != 1 || op.getNumDpsInits() != 1 || op.hasIndexSemantics())
    return false;
  if (linalg::isElementwise(op))
    return true;
  if (op.getNumLoops() != op.getNumParallelLoops() ||
      !op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isPermutation())
    return false;
  return llvm::all_of(op.getIndexingMapsArray(), [](AffineMap m) {
    return llvm::all_of(m.getResults(), [](AffineExpr e) {
      auto c = dyn_cast<AffineConstantExpr>(e);
      return isa<AffineDimExpr>(e) || (c && c.getValue() == 0);
    });
  });
}

/// The ops on the data path of a match: the layer's internals.
using OpSet = llvm::SetVector<Operation *>;

/// Looks through ops that only move elements (broadcast, transpose, a
/// generic that yields its one input, expand_shape adding unit dims).
static View lookThrough(View v, OpSet *seen) {
  while (Operation *def = v.value.getDefiningOp()) {
    if (auto op = dyn_cast<linalg::LinalgOp>(def)) {
      if (!isElementwiseLike(op) || op.getNumDpsInputs() != 1)
        break;
      OpOperand *in = op.getDpsInputOperand(0);
      auto yield = cast<linalg::YieldOp>(op.getBlock()->getTerminator());
      if (yield.getOperand(0) != op.getMatchingBlockArgument(in) ||
          !isa<RankedTensorType>(in->get().getType()))
        break;
      auto loops = loopLetters(op, cast<OpResult>(v.value), v.letters, "");
      if (!loops)
        break;
      auto l = operandLetters(op.getMatchingIndexingMap(in), *loops, in->get().getType());
      if (!l)
        break;
      if (seen)
        seen->insert(def);
      v = {in->get(), *l};
      continue;
    }
    if (auto ex = dyn_cast<tensor::ExpandShapeOp>(def)) {
      std::string src;
      for (const ReassociationIndices &group : ex.getReassociationIndices()) {
        char c = '1';
        int named = 0;
        for (int64_t i : group)
          if (v.letters[i] != '1') {
            c = v.letters[i];
            ++named;
          }
        if (named > 1)
          return v;
        src.push_back(c);
      }
      if (seen)
        seen->insert(def);
      v = {ex.getSrc(), src};
      continue;
    }
    break;
  }
  return v;
}

//===----------------------------------------------------------------------===//
// Payload trees
//===----------------------------------------------------------------------===//

struct Expr {
  enum Kind { Leaf, Const, Op } kind;
  View leaf;            // Leaf: a tensor (or, with no letters, a scalar)
  double value = 0;     // Const
  StringRef name;       // Op: the scalar op, e.g. "arith.addf"
  DictionaryAttr attrs; // Op: its attributes (predicates, fastmath, ...)
  SmallVector<Expr *, 2> args;
  bool isConst(double c) const {
    return kind == Const && std::abs(value - c) <= 1e-5 * std::max(1.0, std::abs(c));
  }
  bool is(StringRef n) const { return kind == Op && name == n; }
};

static bool isCommutative(StringRef n) {
  return n == "arith.addf" || n == "arith.mulf" || n == "arith.maximumf" || n == "arith.maxnumf";
}

static bool equal(const Expr *a, const Expr *b) {
  if (a == b)
    return true;
  if (a->kind != b->kind)
    return false;
  if (a->kind == Expr::Leaf)
    return a->leaf == b->leaf;
  if (a->kind == Expr::Const)
    return a->isConst(b->value);
  if (a->name != b->name || a->attrs != b->attrs || a->args.size() != b->args.size())
    return false;
  if (a->args.size() == 2 && isCommutative(a->name) && equal(a->args[0], b->args[1]) &&
      equal(a->args[1], b->args[0]))
    return true;
  for (auto [x, y] : llvm::zip(a->args, b->args))
    if (!equal(x, y))
      return false;
  return true;
}

/// Builds payload trees; owns their nodes and records the ops they read.
class TreeBuilder {
public:
  explicit TreeBuilder(OpSet &seen) : seen(seen) {}

  Expr *constant(double c) {
    Expr *e = make(Expr::Const);
    e->value = c;
    return e;
  }

  /// The tree of tensor `v`, expanding at most `depth` elementwise ops on
  /// each path (all with -1); past that, tensors are leaves.
  Expr *tensor(View v, int depth = -1) {
    v = lookThrough(v, &seen);
    DenseElementsAttr dense;
    if (matchPattern(v.value, m_Constant(&dense)) && dense.isSplat() &&
        isa<FloatType>(dense.getElementType()))
      return constant(dense.getSplatValue<APFloat>().convertToDouble());
    auto op = v.value.getDefiningOp<linalg::LinalgOp>();
    std::optional<std::string> loops;
    if (op && depth != 0 && isElementwiseLike(op))
      loops = loopLetters(op, cast<OpResult>(v.value), v.letters, "");
    if (!loops)
      return leaf(v);
    auto yield = cast<linalg::YieldOp>(op.getBlock()->getTerminator());
    Expr *e = scalar(yield.getOperand(0), op, *loops, depth < 0 ? -1 : depth - 1);
    if (e->kind != Expr::Const)
      seen.insert(op);
    return e;
  }

  /// The tree of the scalar `s` of the payload of `op`, loops named `loops`;
  /// the tensors it reads are expanded `depth` deep.
  Expr *scalar(Value s, linalg::LinalgOp op, StringRef loops, int depth) {
    FloatAttr f;
    if (matchPattern(s, m_Constant(&f)))
      return constant(f.getValueAsDouble());
    if (auto arg = dyn_cast<BlockArgument>(s); arg && arg.getOwner() == op.getBlock()) {
      OpOperand *operand = op.getMatchingOpOperand(arg);
      Value src = operand->get();
      if (!isa<RankedTensorType>(src.getType()))
        return scalarOutside(src);
      auto l = operandLetters(op.getMatchingIndexingMap(operand), loops, src.getType());
      return l ? tensor({src, *l}, depth) : leaf({src, ""});
    }
    Operation *def = s.getDefiningOp();
    if (!def || def->getBlock() != op.getBlock())
      return scalarOutside(s);
    if (def->getNumResults() != 1 || def->getNumRegions() != 0 || !isPure(def))
      return leaf({s, ""});
    Expr *e = make(Expr::Op);
    e->name = def->getName().getStringRef();
    e->attrs = def->getAttrDictionary();
    for (Value operand : def->getOperands())
      e->args.push_back(scalar(operand, op, loops, depth));
    return e;
  }

private:
  Expr *make(Expr::Kind k) {
    nodes.emplace_back();
    nodes.back().kind = k;
    return &nodes.back();
  }
  Expr *leaf(View v) {
    Expr *e = make(Expr::Leaf);
    e->leaf = v;
    return e;
  }
  Expr *scalarOutside(Value s) {
    FloatAttr f;
    if (matchPattern(s, m_Constant(&f)))
      return constant(f.getValueAsDouble());
    return leaf({s, ""});
  }

  std::deque<Expr> nodes;
  OpSet &seen;
};

/// A product `coeff * factors[0] * factors[1] ...`: mulf chains, divf by a
/// constant, negf and integer math.powf flattened.
struct Product {
  double coeff = 1;
  SmallVector<Expr *, 4> factors;
};

static void flattenProduct(Expr *e, Product &p) {
  if (e->kind == Expr::Const) {
    p.coeff *= e->value;
  } else if (e->is("arith.mulf")) {
    flattenProduct(e->args[0], p);
    flattenProduct(e->args[1], p);
  } else if (e->is("arith.divf") && e->args[1]->kind == Expr::Const && e->args[1]->value != 0) {
    flattenProduct(e->args[0], p);
    p.coeff /= e->args[1]->value;
  } else if ((e->is("arith.subf") || e->is("arith.addf")) && e->args[1]->isConst(0)) {
    flattenProduct(e->args[0], p); // x - 0 (torch-mlir's gelu subtracts its mean 0)
  } else if (e->is("arith.negf")) {
    flattenProduct(e->args[0], p);
    p.coeff = -p.coeff;
  } else if (e->is("math.powf") && e->args[1]->kind == Expr::Const && e->args[1]->value >= 1 &&
             e->args[1]->value <= 4 && e->args[1]->value == std::floor(e->args[1]->value)) {
    for (int i = 0; i < static_cast<int>(e->args[1]->value); ++i)
      flattenProduct(e->args[0], p);
  } else {
    p.factors.push_back(e);
  }
}

static Product product(Expr *e) {
  Product p;
  flattenProduct(e, p);
  return p;
}

/// A sum of products: addf/subf flattened, constant factors distributed over
/// a sum (`k * (x + c x^3)` is `k x + k c x^3`); `atom` (x, which may be
/// a sum itself: the pre-activation with its bias) is not flattened.
static void flattenSum(Expr *e, double scale, SmallVectorImpl<Product> &terms, Expr *atom) {
  if (equal(e, atom)) {
    terms.push_back(Product{scale, {e}});
    return;
  }
  if (e->is("arith.addf") || e->is("arith.subf")) {
    flattenSum(e->args[0], scale, terms, atom);
    flattenSum(e->args[1], e->is("arith.subf") ? -scale : scale, terms, atom);
    return;
  }
  Product p = product(e);
  if (p.factors.size() == 1 && (p.factors[0]->is("arith.addf") || p.factors[0]->is("arith.subf")))
    return flattenSum(p.factors[0], scale * p.coeff, terms, atom);
  p.coeff *= scale;
  terms.push_back(p);
}

static bool isProductOf(const Product &p, double coeff, ArrayRef<Expr *> factors) {
  if (std::abs(p.coeff - coeff) > 1e-5 * std::max(1.0, std::abs(coeff)) ||
      p.factors.size() != factors.size())
    return false;
  SmallVector<bool> used(factors.size(), false);
  for (Expr *f : p.factors) {
    bool found = false;
    for (auto [i, g] : llvm::enumerate(factors))
      if (!used[i] && equal(f, g)) {
        used[i] = found = true;
        break;
      }
    if (!found)
      return false;
  }
  return true;
}

/// `1 + e` (either order): returns e.
static Expr *onePlus(Expr *e) {
  if (!e->is("arith.addf"))
    return nullptr;
  if (e->args[0]->isConst(1))
    return e->args[1];
  if (e->args[1]->isConst(1))
    return e->args[0];
  return nullptr;
}

/// `-x`: negf, 0 - x or -1 * x.
static bool isNegOf(Expr *e, Expr *x) {
  if (e->is("arith.subf"))
    return e->args[0]->isConst(0) && equal(e->args[1], x);
  return isProductOf(product(e), -1, {x});
}

/// sigmoid(x) = 1 / (1 + exp(-x)).
static bool isSigmoidOf(Expr *e, Expr *x) {
  if (!e->is("arith.divf") || !e->args[0]->isConst(1))
    return false;
  Expr *ex = onePlus(e->args[1]);
  return ex && ex->is("math.exp") && isNegOf(ex->args[0], x);
}

/// silu as the product x * sigmoid(x); binds x.
static bool matchSiluProduct(const Product &p, Expr *&x) {
  if (p.factors.size() != 2 || std::abs(p.coeff - 1) > 1e-6)
    return false;
  for (int i = 0; i < 2; ++i)
    if (isSigmoidOf(p.factors[1 - i], p.factors[i])) {
      x = p.factors[i];
      return true;
    }
  return false;
}

/// silu(x) = x / (1 + exp(-x)) = x * sigmoid(x); binds x.
static bool matchSilu(Expr *e, Expr *&x) {
  if (e->is("arith.divf")) {
    Expr *ex = onePlus(e->args[1]);
    if (ex && ex->is("math.exp") && isNegOf(ex->args[0], e->args[0])) {
      x = e->args[0];
      return true;
    }
  }
  return matchSiluProduct(product(e), x);
}

/// gelu(x) = 0.5 x (1 + erf(x / sqrt 2)); gelu_tanh(x) = 0.5 x (1 +
/// tanh(sqrt(2/pi) (x + 0.044715 x^3))); binds x.
static bool matchGeluProduct(const Product &p, bool tanhForm, Expr *&x) {
  if (p.factors.size() != 2 || std::abs(p.coeff - 0.5) > 1e-6)
    return false;
  for (int i = 0; i < 2; ++i) {
    Expr *cand = p.factors[i];
    Expr *inner = onePlus(p.factors[1 - i]);
    if (!inner || !inner->is(tanhForm ? "math.tanh" : "math.erf"))
      continue;
    if (!tanhForm) {
      if (isProductOf(product(inner->args[0]), M_SQRT1_2, {cand})) {
        x = cand;
        return true;
      }
      continue;
    }
    SmallVector<Product> terms;
    flattenSum(inner->args[0], 1, terms, cand);
    const double k = std::sqrt(2 / M_PI);
    if (terms.size() != 2)
      continue;
    for (int j = 0; j < 2; ++j)
      if (isProductOf(terms[j], k, {cand}) &&
          isProductOf(terms[1 - j], k * 0.044715, {cand, cand, cand})) {
        x = cand;
        return true;
      }
  }
  return false;
}

static bool matchGelu(Expr *e, bool tanhForm, Expr *&x) {
  return matchGeluProduct(product(e), tanhForm, x);
}

/// relu(x) = max(x, 0), or select(x > 0, x, 0) as torch-mlir writes it;
/// binds x.
static bool matchRelu(Expr *e, Expr *&x) {
  if (e->is("arith.select") && e->args[2]->isConst(0) && e->args[0]->is("arith.cmpf")) {
    auto pred = e->args[0]->attrs.getAs<arith::CmpFPredicateAttr>("predicate");
    Expr *cmp = e->args[0];
    if (pred &&
        llvm::is_contained({arith::CmpFPredicate::OGT, arith::CmpFPredicate::UGT},
                           pred.getValue()) &&
        cmp->args[1]->isConst(0) && equal(cmp->args[0], e->args[1])) {
      x = e->args[1];
      return true;
    }
  }
  if (!e->is("arith.maximumf") && !e->is("arith.maxnumf"))
    return false;
  for (int i = 0; i < 2; ++i)
    if (e->args[1 - i]->isConst(0)) {
      x = e->args[i];
      return true;
    }
  return false;
}

/// The activation of A: its kind and the pre-activations (one, or gate and
/// up for a gated activation: a(gate) * up).
static std::optional<Activation> matchActivation(Expr *a, SmallVectorImpl<Expr *> &pre) {
  Expr *x = nullptr;
  std::optional<Activation> kind;
  if (matchRelu(a, x))
    kind = Activation::relu;
  else if (matchGelu(a, /*tanhForm=*/false, x))
    kind = Activation::gelu;
  else if (matchGelu(a, /*tanhForm=*/true, x))
    kind = Activation::gelu_tanh;
  else if (matchSilu(a, x))
    kind = Activation::silu;
  if (kind) {
    pre.push_back(x);
    return kind;
  }
  // Gated: a(gate) * up, the product in any association order (so the
  // factors of the activation itself may be mixed in with up's).
  Product p = product(a);
  for (auto [i, up] : llvm::enumerate(p.factors)) {
    Product gate = p;
    gate.factors.erase(gate.factors.begin() + i);
    Expr *single =
        gate.factors.size() == 1 && std::abs(gate.coeff - 1) <= 1e-6 ? gate.factors[0] : nullptr;
    if ((single && matchSilu(single, x)) || matchSiluProduct(gate, x))
      kind = Activation::swiglu;
    else if ((single && matchGelu(single, /*tanhForm=*/false, x)) ||
             matchGeluProduct(gate, /*tanhForm=*/false, x))
      kind = Activation::geglu;
    if (kind) {
      pre.append({x, up});
      return kind;
    }
  }
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Reductions and contractions
//===----------------------------------------------------------------------===//

/// `value[out] = combine(init, term[loops])` over one reduced loop.
struct Reduction {
  StringRef combiner; // "arith.addf", "arith.maximumf", ...
  Expr *term;
  Value init;
};

/// Reads `v` (letters v.letters) as a reduction whose one reduced loop gets
/// letter `reduced`; its term's tensors are expanded `depth` deep.
static std::optional<Reduction> reduction(View v, char reduced, int depth, TreeBuilder &trees,
                                          OpSet &seen) {
  v = lookThrough(v, &seen);
  auto op = v.value.getDefiningOp<linalg::LinalgOp>();
  if (!op || op->getNumResults() != 1 || op.getNumDpsInits() != 1 ||
      op.getNumReductionLoops() != 1 || op.hasIndexSemantics())
    return std::nullopt;
  auto loops = loopLetters(op, cast<OpResult>(v.value), v.letters, StringRef(&reduced, 1));
  if (!loops)
    return std::nullopt;
  auto yield = cast<linalg::YieldOp>(op.getBlock()->getTerminator());
  Operation *comb = yield.getOperand(0).getDefiningOp();
  BlockArgument acc = op.getMatchingBlockArgument(op.getDpsInitOperand(0));
  if (!comb || comb->getBlock() != op.getBlock() || comb->getNumOperands() != 2 ||
      comb->getNumResults() != 1)
    return std::nullopt;
  Value term;
  if (comb->getOperand(0) == acc)
    term = comb->getOperand(1);
  else if (comb->getOperand(1) == acc)
    term = comb->getOperand(0);
  else
    return std::nullopt;
  seen.insert(op);
  return Reduction{comb->getName().getStringRef(), trees.scalar(term, op, *loops, depth),
                   op.getDpsInitOperand(0)->get()};
}

/// Whether `v` is all zeros (a linalg.fill of 0, a zero splat, ...).
static bool isZeroTensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type)
    return false;
  std::string letters(type.getRank(), 'z');
  for (int64_t i = 0; i < type.getRank(); ++i)
    letters[i] = static_cast<char>('A' + i);
  OpSet ignored;
  TreeBuilder local(ignored);
  return local.tensor({v, letters})->isConst(0);
}

/// A contraction `lhs[..] * rhs[..]` summed over `reduced` into zeros.
struct Contraction {
  View lhs, rhs; // the leaves, in the body's order
};

/// Matches `v` as a zero-initialised sum over `reduced` of a product of two
/// tensors (linalg.matmul, batch_matmul, contract, or a generic), using the
/// upstream contraction interface. On failure `why` says what is wrong.
static std::optional<Contraction> contraction(View v, char reduced, StringRef what,
                                              TreeBuilder &trees, OpSet &seen, std::string &why) {
  View base = lookThrough(v, nullptr);
  auto op = base.value.getDefiningOp<linalg::LinalgOp>();
  if (!op || !linalg::isaContractionOpInterface(op)) {
    why = (what + " is not a contraction (a linalg op summing a mulf of two tensors)").str();
    return std::nullopt;
  }
  FailureOr<linalg::ContractionDimensions> dims = linalg::inferContractionDims(op);
  if (failed(dims) || dims->k.size() != 1) {
    why = (what + " does not contract exactly one dimension").str();
    return std::nullopt;
  }
  std::optional<Reduction> r = reduction(v, reduced, /*depth=*/0, trees, seen);
  if (!r || r->combiner != "arith.addf" || !r->term->is("arith.mulf") ||
      r->term->args[0]->kind != Expr::Leaf || r->term->args[1]->kind != Expr::Leaf) {
    why = (what + " is not a sum of products of two tensors").str();
    return std::nullopt;
  }
  if (!isZeroTensor(r->init)) {
    why = (what + " does not accumulate into zeros").str();
    return std::nullopt;
  }
  return Contraction{r->term->args[0]->leaf, r->term->args[1]->leaf};
}

/// `e` if it is a leaf, or the leaf of `1 * leaf` (torch-mlir's add/sub
/// scale their second operand by alpha = 1).
static Expr *leafOf(Expr *e) {
  if (e->kind == Expr::Leaf)
    return e;
  Product p = product(e);
  if (p.factors.size() == 1 && p.factors[0]->kind == Expr::Leaf && std::abs(p.coeff - 1) <= 1e-6)
    return p.factors[0];
  return nullptr;
}

/// `lead[..] + bias[..]` or `lead` alone: returns lead and sets `bias`.
static Expr *splitBias(Expr *e, StringRef leadLetters, StringRef biasLetters,
                       std::optional<View> &bias) {
  bias.reset();
  if (e->kind == Expr::Leaf)
    return e->leaf.letters == leadLetters ? e : nullptr;
  if (!e->is("arith.addf"))
    return nullptr;
  for (int i = 0; i < 2; ++i) {
    Expr *lead = leafOf(e->args[i]), *b = leafOf(e->args[1 - i]);
    if (lead && lead->leaf.letters == leadLetters && b && b->leaf.letters == biasLetters) {
      bias = b->leaf;
      return lead;
    }
  }
  return nullptr;
}

//===----------------------------------------------------------------------===//
// The layer
//===----------------------------------------------------------------------===//

/// One expert weight product, `in[..] * W[..]` with W in either orientation.
struct Weight {
  View w;
  std::optional<View> bias;
};

struct Layer {
  Value x;
  View wr;
  std::optional<View> br;
  SmallVector<Weight, 2> w1; // one, or gate and up
  Weight w2;
  Activation act;
  // The ops read: between the gate, the expert outputs and the weighted
  // sum; of the router (softmax included); of the experts.
  OpSet combineOps, routerOps, expertOps;
};

class Matcher {
public:
  Matcher() : trees(seen) {}

  /// Whether `op` looks like the weighted sum of a dense layer: a sum over
  /// one loop of the product of a rank-2 and a rank-3 tensor into [T, D].
  std::optional<std::pair<View, View>> candidate(linalg::LinalgOp op) {
    if (op->getNumResults() != 1 || cast<ShapedType>(op->getResult(0).getType()).getRank() != 2)
      return std::nullopt;
    std::optional<Reduction> r = reduction({op->getResult(0), "td"}, 'e', /*depth=*/0, trees, seen);
    // A contraction's term is the product; linalg.reduce's, its input, which
    // must be the elementwise product.
    if (r && r->term->kind == Expr::Leaf)
      r->term = trees.tensor(r->term->leaf, /*depth=*/1);
    if (!r || r->combiner != "arith.addf" || !r->term->is("arith.mulf"))
      return std::nullopt;
    Expr *a = r->term->args[0], *b = r->term->args[1];
    if (a->kind != Expr::Leaf || b->kind != Expr::Leaf)
      return std::nullopt;
    if (a->leaf.letters.size() == 3)
      std::swap(a, b);
    if (a->leaf.letters.size() != 2 || b->leaf.letters.size() != 3)
      return std::nullopt;
    combineInit = r->init;
    return std::make_pair(a->leaf, b->leaf);
  }

  /// Matches the whole layer below the weighted sum `gate x experts`.
  FailureOr<Layer> match(View gate, View experts) {
    Layer l;
    if (gate.letters != "te" || experts.letters != "etd")
      return fail("the weighted sum is not gate[t, e] * expert_out[e, t, d] summed over "
                  "the experts e");
    if (!isZeroTensor(combineInit))
      return fail("the weighted sum does not accumulate into zeros");

    // Router: softmax(x Wr (+ br)) over the experts.
    l.combineOps.insert(seen.begin(), seen.end());
    size_t mark = seen.size();
    FailureOr<Expr *> logits = matchSoftmax(gate);
    if (failed(logits))
      return failure();
    std::optional<View> br;
    Expr *mm = splitBias(*logits, "te", "e", br);
    if (!mm)
      return fail("the router logits are not x Wr or x Wr + br[e]");
    std::string why;
    auto router = contraction(mm->leaf, 'd', "the router matmul", trees, seen, why);
    if (!router)
      return fail(why);
    View x;
    if (!assign(*router, "td", "de", "ed", x, l.wr))
      return fail("the router matmul is not x[t, d] * Wr[d, e] (or Wr[e, d]) summed "
                  "over d");
    l.x = x.value;
    l.br = br;
    l.routerOps.insert(seen.begin() + mark, seen.end());

    // Experts: act(x W1 (+ b1)) W2 (+ b2).
    mark = seen.size();
    std::optional<View> b2;
    Expr *y0 = splitBias(trees.tensor(experts), "etd", "ed", b2);
    if (!y0)
      return fail("the expert outputs are not A W2 or A W2 + b2[e, d]");
    auto second = contraction(y0->leaf, 'h', "the second expert GEMM", trees, seen, why);
    if (!second)
      return fail(why);
    View act;
    if (!assign(*second, "eth", "ehd", "edh", act, l.w2.w))
      return fail("the second expert GEMM is not A[e, t, h] * W2[e, h, d] (or W2[e, d, "
                  "h]) summed over h");
    l.w2.bias = b2;
    SmallVector<Expr *, 2> pre;
    std::optional<Activation> kind = matchActivation(trees.tensor(act), pre);
    if (!kind)
      return fail("the activation is not one of relu, gelu, gelu_tanh, silu, "
                  "swiglu (silu(g) * u), geglu (gelu(g) * u)");
    l.act = *kind;
    for (auto [i, p] : llvm::enumerate(pre)) {
      StringRef what = pre.size() == 1 ? "the first expert GEMM"
                       : i == 0        ? "the gate projection"
                                       : "the up projection";
      Weight w;
      Expr *h0 = splitBias(p, "eth", "eh", w.bias);
      if (!h0)
        return fail((what + " (before the activation) is not x W1 or x W1 + b1[e, h]").str());
      auto first = contraction(h0->leaf, 'd', what, trees, seen, why);
      if (!first)
        return fail(why);
      View xe;
      if (!assign(*first, "td", "edh", "ehd", xe, w.w))
        return fail((what + " is not x[t, d] * W1[e, d, h] (or W1[e, h, d]) summed over d "
                            "(a weight shared by all experts, without the expert dimension?)")
                        .str());
      if (xe.value != l.x)
        return fail((what + " does not read the router's input x").str());
      l.w1.push_back(w);
    }
    l.expertOps.insert(seen.begin() + mark, seen.end());
    return l;
  }

  std::string why;

private:
  LogicalResult fail(const Twine &reason) {
    why = reason.str();
    return failure();
  }

  /// Assigns the two leaves of `c` to (input with `inLetters`, weight with
  /// `wLetters` or `wLettersT`), in either body order.
  static bool assign(const Contraction &c, StringRef inLetters, StringRef wLetters,
                     StringRef wLettersT, View &in, View &w) {
    for (auto [a, b] : {std::make_pair(c.lhs, c.rhs), std::make_pair(c.rhs, c.lhs)})
      if (a.letters == inLetters && (b.letters == wLetters || b.letters == wLettersT)) {
        in = a;
        w = b;
        return true;
      }
    return false;
  }

  /// The logits of a softmax over the experts: linalg.softmax, or the
  /// max/sub/exp/sum/div decomposition (torch-mlir's), or exp/sum/div.
  FailureOr<Expr *> matchSoftmax(View gate) {
    gate = lookThrough(gate, &seen);
    if (auto sm = gate.value.getDefiningOp<linalg::SoftmaxOp>()) {
      seen.insert(sm);
      if (gate.letters[sm.getDimension()] != 'e')
        return fail("the softmax is over dimension " + Twine(sm.getDimension()) +
                    " (tokens), not over the experts");
      return trees.tensor({sm.getInput(), gate.letters});
    }
    Expr *g = trees.tensor(gate);
    if (g->kind == Expr::Leaf)
      return fail("the gate is not a softmax over the experts (linalg.softmax or "
                  "exp(l - max l) / sum exp(l - max l))");
    if (!g->is("arith.divf") || g->args[1]->kind != Expr::Leaf)
      return fail("the gate is computed elementwise (e.g. a sigmoid), not a softmax over "
                  "the experts");
    Expr *num = g->args[0];
    View den = g->args[1]->leaf;
    if (!num->is("math.exp"))
      return fail("the softmax numerator is not an exp");
    if (named(den.letters) != "t")
      return fail("the softmax sum is not over the experts (dimension 1)");
    std::optional<Reduction> sum = reduction(den, 'e', /*depth=*/-1, trees, seen);
    if (!sum || sum->combiner != "arith.addf" || !equal(sum->term, num) || !isZeroTensor(sum->init))
      return fail("the softmax denominator is not the sum over the experts of its "
                  "numerator");
    // exp(l - max l), or exp(l) (no max: the same in exact arithmetic).
    Expr *arg = num->args[0];
    Expr *m = arg->is("arith.subf") ? leafOf(arg->args[1]) : nullptr;
    if (!m || named(m->leaf.letters) != "t")
      return arg;
    Expr *l = arg->args[0];
    std::optional<Reduction> max = reduction(m->leaf, 'e', /*depth=*/-1, trees, seen);
    if (!max || (max->combiner != "arith.maximumf" && max->combiner != "arith.maxnumf") ||
        !equal(max->term, l))
      return fail("the softmax subtracts something else than the max of the logits "
                  "over the experts");
    return l;
  }

  OpSet seen;
  TreeBuilder trees;
  Value combineInit;
};

//===----------------------------------------------------------------------===//
// Building the layer
//===----------------------------------------------------------------------===//

/// `v` permuted from its letters to `want` (a linalg.transpose when they
/// differ).
static Value permuted(OpBuilder &b, Location loc, const View &v, StringRef want) {
  if (v.letters == want)
    return v.value;
  SmallVector<int64_t> perm;
  for (char c : want)
    perm.push_back(v.letters.find(c));
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, v.value);
  SmallVector<OpFoldResult> out;
  for (int64_t p : perm)
    out.push_back(sizes[p]);
  auto type = cast<RankedTensorType>(v.value.getType());
  Value init = tensor::EmptyOp::create(b, loc, out, type.getElementType());
  return linalg::TransposeOp::create(b, loc, v.value, init, perm)->getResult(0);
}

static Value zeros(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes, Type elt) {
  Value zero = arith::ConstantOp::create(b, loc, b.getFloatAttr(elt, 0.0));
  Value empty = tensor::EmptyOp::create(b, loc, sizes, elt);
  return linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{empty}).getResult(0);
}

static LayerOp build(RewriterBase &rw, Location loc, Type resultType, const Layer &l) {
  MLIRContext *ctx = rw.getContext();
  Type elt = getElementTypeOrSelf(resultType);
  Value wr = permuted(rw, loc, l.wr, "de");
  Value br = l.br ? l.br->value : Value();
  SmallVector<Value, 2> w1s, b1s;
  for (const Weight &w : l.w1)
    w1s.push_back(permuted(rw, loc, w.w, "edh"));
  Value w2 = permuted(rw, loc, l.w2.w, "ehd");
  bool biases = l.w2.bias || llvm::any_of(l.w1, [](const Weight &w) { return bool(w.bias); });
  Value b2;
  if (biases) {
    for (auto [w, w1] : llvm::zip(l.w1, w1s)) {
      if (w.bias) {
        b1s.push_back(w.bias->value);
        continue;
      }
      SmallVector<OpFoldResult> s = tensor::getMixedSizes(rw, loc, w1);
      b1s.push_back(zeros(rw, loc, {s[0], s[2]}, elt));
    }
    if (l.w2.bias) {
      b2 = l.w2.bias->value;
    } else {
      SmallVector<OpFoldResult> s = tensor::getMixedSizes(rw, loc, w2);
      b2 = zeros(rw, loc, {s[0], s[2]}, elt);
    }
  }
  Value w1 = w1s.size() == 1 ? w1s[0] : tensor::ConcatOp::create(rw, loc, 2, w1s).getResult();
  Value b1;
  if (biases)
    b1 = b1s.size() == 1 ? b1s[0] : tensor::ConcatOp::create(rw, loc, 1, b1s).getResult();
  return LayerOp::create(rw, loc, resultType, /*aux_loss=*/Type(), l.x, wr, br,
                         /*selection_bias=*/Value(), w1, w2, /*w1_scale=*/Value(),
                         /*w2_scale=*/Value(), /*w1_zero_point=*/Value(),
                         /*w2_zero_point=*/Value(), b1, b2, /*shared_w1=*/Value(),
                         /*shared_w2=*/Value(), /*shared_gate=*/Value(), /*seed=*/Value(),
                         DenseRoutingAttr::get(ctx), ActivationAttr::get(ctx, l.act),
                         /*training=*/UnitAttr(), /*capacity_factor=*/FloatAttr(),
                         /*quant=*/QuantAttr());
}

/// Raises the dense layer ending at a weighted sum over the experts.
struct RaiseDenseLayer : public OpInterfaceRewritePattern<linalg::LinalgOp> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;

  LogicalResult matchAndRewrite(linalg::LinalgOp comb, PatternRewriter &rewriter) const override {
    Matcher m;
    auto operands = m.candidate(comb);
    if (!operands)
      return rewriter.notifyMatchFailure(comb, "not a weighted sum of rank-2 x rank-3");
    FailureOr<Layer> l = m.match(operands->first, operands->second);
    if (succeeded(l))
      m.why = usedOutside(*l, comb);
    if (succeeded(l) && m.why.empty())
      m.why = mixedTypes(*l, comb->getResult(0).getType());
    if (failed(l) || !m.why.empty()) {
      comb->emitRemark() << "not raised to moe.layer: " << m.why;
      return rewriter.notifyMatchFailure(comb, m.why);
    }
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] raising " << comb->getLoc() << " as "
                            << stringifyActivation(l->act) << "\n");
    rewriter.setInsertionPoint(comb);
    LayerOp layer = build(rewriter, comb->getLoc(), comb->getResult(0).getType(), *l);
    SmallVector<Operation *> worklist;
    for (Value v : comb->getOperands())
      if (Operation *def = v.getDefiningOp())
        worklist.push_back(def);
    rewriter.replaceOp(comb, layer.getOutput());
    // The layer's internals that nothing else reads any more (the router
    // stays when its logits or probabilities are used elsewhere).
    worklist.append(l->combineOps.begin(), l->combineOps.end());
    worklist.append(l->expertOps.begin(), l->expertOps.end());
    worklist.append(l->routerOps.begin(), l->routerOps.end());
    DenseSet<Operation *> erased;
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (erased.contains(op) || !isOpTriviallyDead(op))
        continue;
      // Its producers, those of the values its payload captures included.
      SmallVector<Operation *> producers;
      op->walk([&](Operation *nested) {
        for (Value v : nested->getOperands())
          if (Operation *def = v.getDefiningOp(); def && !op->isAncestor(def))
            producers.push_back(def);
      });
      erased.insert(op);
      rewriter.eraseOp(op);
      worklist.append(producers.begin(), producers.end());
    }
    return success();
  }

  /// The expert internals must be read only inside the layer (the router
  /// may be read elsewhere: it stays, and the layer recomputes it).
  static std::string usedOutside(const Layer &l, Operation *comb) {
    auto inside = [&](Operation *user) {
      return user == comb || l.combineOps.contains(user) || l.expertOps.contains(user) ||
             l.routerOps.contains(user);
    };
    for (const OpSet *set : {&l.combineOps, &l.expertOps})
      for (Operation *op : *set)
        for (Operation *user : op->getUsers())
          if (op != comb && !inside(user))
            return "an expert intermediate (" + op->getName().getStringRef().str() +
                   ") is also used outside the layer";
    return "";
  }

  static std::string mixedTypes(const Layer &l, Type resultType) {
    Type elt = getElementTypeOrSelf(resultType);
    SmallVector<Value> values = {l.x, l.wr.value, l.w2.w.value};
    if (l.br)
      values.push_back(l.br->value);
    if (l.w2.bias)
      values.push_back(l.w2.bias->value);
    for (const Weight &w : l.w1) {
      values.push_back(w.w.value);
      if (w.bias)
        values.push_back(w.bias->value);
    }
    for (Value v : values)
      if (getElementTypeOrSelf(v.getType()) != elt)
        return "the layer's operands and result do not share one element type";
    return "";
  }
};

struct MoERaiseLinalgPass : public mlir::moe::impl::MoERaiseLinalgBase<MoERaiseLinalgPass> {
  using MoERaiseLinalgBase::MoERaiseLinalgBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseDenseLayer>(&getContext());
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace
