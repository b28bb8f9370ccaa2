//===- RaiseLinalg.cpp - dense MoE in upstream ops -> moe.layer -----------===//
//
// --moe-raise-linalg recognises dense (softmax-gated, every-expert) MoE layers
// written in upstream ops and rebuilds `moe.layer {routing = #moe.dense}`.
// Two forms are recognised (see Passes.td for the exact list):
//
// (a) what --convert-moe-to-linalg emits for a dense layer. Anchored on the
//     combine `linalg.generic`, the pass navigates to the candidate operands
//     (x, Wr, br, W1, W2, b1, b2), lowers a scratch `moe.layer` with those
//     operand types through the registered `convert-moe-to-linalg` pass and
//     requires the scratch IR and the function's IR to be identical, op for
//     op, backwards from the combine (same ops, attributes, properties,
//     types, regions, and the same use-def structure down to the operands).
//     Every piece (gate = softmax with identity indices, no capacity factor,
//     dispatch, expert loop, activation, combine) is thereby verified exactly.
//
// (b) the einsum form of a frontend. Elementwise linalg ops (linalg.generic,
//     named elementwise ops, broadcasts, transposes, fills) are evaluated
//     symbolically into a canonical polynomial over "leaves" (values viewed
//     through affine maps) and a few functions (exp, erf, tanh, 1/x, max,
//     min, sqrt); reductions (linalg.generic, named matmuls, linalg.reduce)
//     become "sum over the reduction dims of a polynomial". The weighted sum,
//     the two expert GEMMs, the activation, the biases and the router are
//     then compared with the exact expected polynomials.
//
//===----------------------------------------------------------------------===//

#include "dialect/MoEOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "llvm/Support/Debug.h"

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
// Why a candidate was not raised (reported once per op after the rewrite).
//===----------------------------------------------------------------------===//

struct Reasons {
  std::mutex mutex;
  llvm::MapVector<Operation *, std::string> byOp;
  void note(Operation *op, const std::string &why) {
    std::lock_guard<std::mutex> lock(mutex);
    byOp[op] = why;
  }
  void forget(Operation *op) {
    std::lock_guard<std::mutex> lock(mutex);
    byOp.erase(op);
  }
};

static Value stripCasts(Value v) {
  while (auto cast = v.getDefiningOp<tensor::CastOp>())
    v = cast.getSource();
  return v;
}

//===----------------------------------------------------------------------===//
// Canonical polynomials over leaves and functions
//===----------------------------------------------------------------------===//

struct Atom;
using AtomP = std::shared_ptr<const Atom>;
struct Mono {
  double coef = 1.0;
  SmallVector<AtomP, 4> atoms; // a multiset
};
using Poly = SmallVector<Mono, 4>; // a sum of monomials, like terms merged

/// A leaf (`src` viewed through `map`: element i is src[map(i)]) or a
/// function of polynomials.
struct Atom {
  enum Kind { Leaf, Fn } kind;
  Value src;
  AffineMap map;
  std::string fn;
  SmallVector<Poly, 2> args;
};

constexpr size_t kMaxMonomials = 256;

static bool coefEq(double a, double b) {
  return std::fabs(a - b) <= 1e-5 * std::max(std::fabs(a), std::fabs(b)) + 1e-12;
}

static bool polyEq(const Poly &a, const Poly &b);

static bool atomEq(const Atom &a, const Atom &b) {
  if (a.kind != b.kind)
    return false;
  if (a.kind == Atom::Leaf)
    return a.src == b.src && a.map == b.map;
  if (a.fn != b.fn || a.args.size() != b.args.size())
    return false;
  if ((a.fn == "max" || a.fn == "min") && a.args.size() == 2)
    return (polyEq(a.args[0], b.args[0]) && polyEq(a.args[1], b.args[1])) ||
           (polyEq(a.args[0], b.args[1]) && polyEq(a.args[1], b.args[0]));
  for (auto [x, y] : llvm::zip(a.args, b.args))
    if (!polyEq(x, y))
      return false;
  return true;
}

template <typename T, typename Eq>
static bool multisetEq(ArrayRef<T> a, ArrayRef<T> b, Eq eq) {
  if (a.size() != b.size())
    return false;
  SmallVector<bool> used(b.size(), false);
  for (const T &x : a) {
    bool found = false;
    for (size_t j = 0; j < b.size() && !found; ++j)
      if (!used[j] && eq(x, b[j]))
        used[j] = found = true;
    if (!found)
      return false;
  }
  return true;
}

static bool sameAtoms(const Mono &a, const Mono &b) {
  return multisetEq<AtomP>(a.atoms, b.atoms,
                           [](const AtomP &x, const AtomP &y) { return atomEq(*x, *y); });
}

static bool polyEq(const Poly &a, const Poly &b) {
  return multisetEq<Mono>(a, b, [](const Mono &x, const Mono &y) {
    return coefEq(x.coef, y.coef) && sameAtoms(x, y);
  });
}

static void addMono(Poly &p, const Mono &m) {
  if (m.coef == 0.0)
    return;
  for (auto *it = p.begin(); it != p.end(); ++it) {
    if (!sameAtoms(*it, m))
      continue;
    it->coef += m.coef;
    if (std::fabs(it->coef) < 1e-12)
      p.erase(it);
    return;
  }
  p.push_back(m);
}

static Poly constant(double c) {
  Poly p;
  if (c != 0.0)
    p.push_back(Mono{c, {}});
  return p;
}

static std::optional<double> asConstant(const Poly &p) {
  if (p.empty())
    return 0.0;
  if (p.size() == 1 && p[0].atoms.empty())
    return p[0].coef;
  return std::nullopt;
}

static Poly leaf(Value src, AffineMap map) {
  auto atom = std::make_shared<Atom>();
  atom->kind = Atom::Leaf;
  atom->src = src;
  atom->map = map;
  return Poly{Mono{1.0, {atom}}};
}

static Poly add(const Poly &a, const Poly &b) {
  Poly r = a;
  for (const Mono &m : b)
    addMono(r, m);
  return r;
}

static Poly scale(const Poly &a, double c) {
  Poly r;
  for (const Mono &m : a)
    addMono(r, Mono{m.coef * c, m.atoms});
  return r;
}

static FailureOr<Poly> mul(const Poly &a, const Poly &b) {
  Poly r;
  for (const Mono &x : a)
    for (const Mono &y : b) {
      Mono m{x.coef * y.coef, x.atoms};
      m.atoms.append(y.atoms.begin(), y.atoms.end());
      addMono(r, m);
      if (r.size() > kMaxMonomials)
        return failure();
    }
  return r;
}

static Poly fn(StringRef name, SmallVector<Poly, 2> args) {
  SmallVector<double> c;
  for (const Poly &a : args)
    if (auto v = asConstant(a))
      c.push_back(*v);
  if (c.size() == args.size()) {
    if (name == "exp") return constant(std::exp(c[0]));
    if (name == "erf") return constant(std::erf(c[0]));
    if (name == "tanh") return constant(std::tanh(c[0]));
    if (name == "sqrt" && c[0] >= 0) return constant(std::sqrt(c[0]));
    if (name == "recip" && c[0] != 0) return constant(1.0 / c[0]);
    if (name == "max") return constant(std::max(c[0], c[1]));
    if (name == "min") return constant(std::min(c[0], c[1]));
  }
  auto atom = std::make_shared<Atom>();
  atom->kind = Atom::Fn;
  atom->fn = name.str();
  atom->args = std::move(args);
  return Poly{Mono{1.0, {atom}}};
}

static FailureOr<Poly> div(const Poly &a, const Poly &b) {
  if (auto c = asConstant(b)) {
    if (*c == 0.0)
      return failure();
    return scale(a, 1.0 / *c);
  }
  return mul(a, fn("recip", {b}));
}

/// Every leaf (src, map) of a polynomial, also inside function arguments.
static void collectLeaves(const Poly &p, SmallVectorImpl<const Atom *> &out) {
  for (const Mono &m : p)
    for (const AtomP &a : m.atoms) {
      if (a->kind == Atom::Leaf) {
        if (llvm::none_of(out, [&](const Atom *o) { return atomEq(*o, *a); }))
          out.push_back(a.get());
      } else {
        for (const Poly &arg : a->args)
          collectLeaves(arg, out);
      }
    }
}

//===----------------------------------------------------------------------===//
// Symbolic evaluation of linalg on tensors
//===----------------------------------------------------------------------===//

/// All-parallel, one init with an identity map whose value is not read, no
/// linalg.index: result[i] = f(inputs[map_k(i)]).
static bool isElementwise(linalg::LinalgOp op) {
  if (op->getNumResults() != 1 || op.getNumDpsInits() != 1 ||
      !op.hasPureTensorSemantics() || op.hasIndexSemantics() ||
      op.getNumReductionLoops() != 0 || op->getNumRegions() != 1)
    return false;
  OpOperand *init = op.getDpsInitOperand(0);
  if (!op.getMatchingIndexingMap(init).isIdentity())
    return false;
  Block *body = op.getBlock();
  if (!body)
    return false;
  for (BlockArgument arg : body->getArguments())
    if (arg.getArgNumber() >= op.getNumDpsInputs() && !arg.use_empty())
      return false;
  return true;
}

/// The result of a reduction: sum over the reduction loops of `poly`, which
/// is expressed in the loop space; the result element is at outMap(loops).
struct Reduction {
  linalg::LinalgOp op;
  unsigned numLoops;
  SmallVector<unsigned> reductionDims;
  AffineMap outMap;
  Poly poly;
};

class Evaluator {
public:
  /// Ops evaluated through (elementwise producers, reductions, softmax).
  llvm::SetVector<Operation *> ops;

  /// The polynomial of `v[map(i)]` over the index space of `map`'s domain.
  FailureOr<Poly> tensorPoly(Value v, AffineMap map) {
    auto key = std::make_pair(v, map);
    if (auto it = memo.find(key); it != memo.end())
      return it->second;
    FailureOr<Poly> p = computeTensorPoly(v, map);
    if (succeeded(p))
      memo[key] = *p;
    return p;
  }

  /// A reduction op whose result is `zero + sum_reductionLoops f(inputs)`.
  FailureOr<Reduction> reduction(Operation *o) {
    auto op = dyn_cast_or_null<linalg::LinalgOp>(o);
    if (!op || op->getNumResults() != 1 || op.getNumDpsInits() != 1 ||
        !op.hasPureTensorSemantics() || op.hasIndexSemantics() ||
        op.getNumReductionLoops() == 0 || op->getNumRegions() != 1 || !op.getBlock())
      return failure();
    OpOperand *init = op.getDpsInitOperand(0);
    auto initType = cast<RankedTensorType>(init->get().getType());
    FailureOr<Poly> initPoly = tensorPoly(
        init->get(), AffineMap::getMultiDimIdentityMap(initType.getRank(), op.getContext()));
    if (failed(initPoly) || !initPoly->empty())
      return failure(); // the accumulator must start at zero
    Block *body = op.getBlock();
    auto yield = dyn_cast<linalg::YieldOp>(body->getTerminator());
    if (!yield || yield->getNumOperands() != 1)
      return failure();
    auto addOp = yield->getOperand(0).getDefiningOp<arith::AddFOp>();
    if (!addOp || addOp->getBlock() != body)
      return failure();
    BlockArgument outArg = body->getArgument(op.getNumDpsInputs());
    Value summand;
    if (addOp.getLhs() == outArg)
      summand = addOp.getRhs();
    else if (addOp.getRhs() == outArg)
      summand = addOp.getLhs();
    else
      return failure();
    if (!outArg.hasOneUse())
      return failure();
    FailureOr<Poly> p = bodyPoly(op, summand, /*outerMap=*/AffineMap());
    if (failed(p))
      return failure();
    Reduction r;
    r.op = op;
    r.numLoops = op.getNumLoops();
    for (auto [i, it] : llvm::enumerate(op.getIteratorTypesArray()))
      if (it == utils::IteratorType::reduction)
        r.reductionDims.push_back(i);
    r.outMap = op.getMatchingIndexingMap(init);
    r.poly = std::move(*p);
    ops.insert(op);
    return r;
  }

private:
  DenseMap<std::pair<Value, AffineMap>, Poly> memo;

  FailureOr<Poly> computeTensorPoly(Value v, AffineMap map) {
    if (auto cst = v.getDefiningOp<arith::ConstantOp>()) {
      auto dense = dyn_cast<DenseFPElementsAttr>(cst.getValue());
      if (dense && dense.isSplat())
        return constant(dense.getSplatValue<APFloat>().convertToDouble());
      return leaf(v, map);
    }
    if (auto cast = v.getDefiningOp<tensor::CastOp>()) {
      ops.insert(cast);
      return tensorPoly(cast.getSource(), map);
    }
    auto op = v.getDefiningOp<linalg::LinalgOp>();
    if (!op || !isElementwise(op))
      return leaf(v, map);
    ops.insert(op);
    return bodyPoly(op, op.getBlock()->getTerminator()->getOperand(0), map);
  }

  /// The polynomial of scalar `s` in `op`'s body; input k is read at
  /// indexing_map_k(loops), and the loops are `outerMap(i)` (or the loop
  /// space itself when outerMap is null).
  FailureOr<Poly> bodyPoly(linalg::LinalgOp op, Value s, AffineMap outerMap) {
    DenseMap<Value, Poly> local;
    return scalarPoly(op, s, outerMap, local);
  }

  FailureOr<Poly> inputPoly(linalg::LinalgOp op, unsigned k, AffineMap outerMap) {
    OpOperand *operand = op.getDpsInputOperand(k);
    Value in = operand->get();
    if (!isa<ShapedType>(in.getType())) { // a scalar input (linalg.fill)
      if (auto cst = in.getDefiningOp<arith::ConstantOp>())
        if (auto f = dyn_cast<FloatAttr>(cst.getValue()))
          return constant(f.getValueAsDouble());
      return failure();
    }
    AffineMap m = op.getMatchingIndexingMap(operand);
    if (!m.isProjectedPermutation(/*allowZeroInResults=*/false))
      return failure();
    if (outerMap)
      m = m.compose(outerMap);
    return tensorPoly(in, m);
  }

  FailureOr<Poly> scalarPoly(linalg::LinalgOp op, Value s, AffineMap outerMap,
                             DenseMap<Value, Poly> &local) {
    if (auto it = local.find(s); it != local.end())
      return it->second;
    FailureOr<Poly> p = computeScalarPoly(op, s, outerMap, local);
    if (succeeded(p))
      local[s] = *p;
    return p;
  }

  FailureOr<Poly> computeScalarPoly(linalg::LinalgOp op, Value s, AffineMap outerMap,
                                    DenseMap<Value, Poly> &local) {
    Block *body = op.getBlock();
    if (auto arg = dyn_cast<BlockArgument>(s)) {
      if (arg.getOwner() != body || arg.getArgNumber() >= op.getNumDpsInputs())
        return failure();
      return inputPoly(op, arg.getArgNumber(), outerMap);
    }
    Operation *d = s.getDefiningOp();
    if (auto cst = dyn_cast<arith::ConstantOp>(d)) {
      if (auto f = dyn_cast<FloatAttr>(cst.getValue()))
        return constant(f.getValueAsDouble());
      return failure();
    }
    if (d->getBlock() != body)
      return failure();
    auto arg = [&](unsigned i) { return scalarPoly(op, d->getOperand(i), outerMap, local); };
    if (isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
            arith::MaximumFOp, arith::MaxNumFOp, arith::MinimumFOp,
            arith::MinNumFOp>(d)) {
      FailureOr<Poly> a = arg(0), b = arg(1);
      if (failed(a) || failed(b))
        return failure();
      if (isa<arith::AddFOp>(d)) return add(*a, *b);
      if (isa<arith::SubFOp>(d)) return add(*a, scale(*b, -1.0));
      if (isa<arith::MulFOp>(d)) return mul(*a, *b);
      if (isa<arith::DivFOp>(d)) return div(*a, *b);
      if (isa<arith::MaximumFOp, arith::MaxNumFOp>(d)) return fn("max", {*a, *b});
      return fn("min", {*a, *b});
    }
    if (isa<arith::NegFOp, math::ExpOp, math::ErfOp, math::TanhOp, math::SqrtOp>(d)) {
      FailureOr<Poly> a = arg(0);
      if (failed(a))
        return failure();
      if (isa<arith::NegFOp>(d)) return scale(*a, -1.0);
      if (isa<math::ExpOp>(d)) return fn("exp", {*a});
      if (isa<math::ErfOp>(d)) return fn("erf", {*a});
      if (isa<math::TanhOp>(d)) return fn("tanh", {*a});
      return fn("sqrt", {*a});
    }
    if (auto pw = dyn_cast<math::PowFOp>(d)) {
      FailureOr<Poly> a = arg(0), e = arg(1);
      if (failed(a) || failed(e))
        return failure();
      std::optional<double> n = asConstant(*e);
      if (!n || *n < 1 || *n > 4 || *n != std::floor(*n))
        return failure();
      Poly r = *a;
      for (int i = 1; i < static_cast<int>(*n); ++i) {
        FailureOr<Poly> next = mul(r, *a);
        if (failed(next))
          return failure();
        r = *next;
      }
      return r;
    }
    return failure();
  }
};

//===----------------------------------------------------------------------===//
// (b) the einsum form
//===----------------------------------------------------------------------===//

struct RaisedLayer {
  Value x, wr, br, w1, w2, b1, b2;
  Activation activation;
};

static AffineMap dimsMap(unsigned numLoops, ArrayRef<unsigned> dims, MLIRContext *ctx) {
  SmallVector<AffineExpr> exprs;
  for (unsigned d : dims)
    exprs.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(numLoops, 0, exprs, ctx);
}

/// A reduction over 3 loops with one reduction dim and an output that
/// reads the other two or three loops as plain dims; returns the output
/// dims (in output order) and the reduction dim.
static LogicalResult loopRoles(const Reduction &r, unsigned outRank,
                               SmallVectorImpl<unsigned> &outDims, unsigned &red) {
  if (r.reductionDims.size() != 1 || r.outMap.getNumResults() != outRank ||
      r.numLoops != outRank + 1)
    return failure();
  red = r.reductionDims[0];
  for (AffineExpr e : r.outMap.getResults()) {
    auto d = dyn_cast<AffineDimExpr>(e);
    if (!d)
      return failure();
    outDims.push_back(d.getPosition());
  }
  return success();
}

/// `poly` must be exactly leaf(A, mapA) * leaf(B, mapB); returns A and B.
static LogicalResult matchProduct(const Poly &poly, AffineMap mapA, AffineMap mapB,
                                  Value &a, Value &b) {
  if (poly.size() != 1 || !coefEq(poly[0].coef, 1.0) || poly[0].atoms.size() != 2)
    return failure();
  const Atom &p = *poly[0].atoms[0], &q = *poly[0].atoms[1];
  if (p.kind != Atom::Leaf || q.kind != Atom::Leaf)
    return failure();
  if (p.map == mapA && q.map == mapB) {
    a = p.src;
    b = q.src;
    return success();
  }
  if (q.map == mapA && p.map == mapB) {
    a = q.src;
    b = p.src;
    return success();
  }
  return failure();
}

static FailureOr<Poly> activationPoly(Activation act, const Poly &x) {
  switch (act) {
  case Activation::gelu: {
    FailureOr<Poly> p = mul(scale(x, 0.5), add(constant(1.0), fn("erf", {scale(x, M_SQRT1_2)})));
    return p;
  }
  case Activation::gelu_tanh: {
    FailureOr<Poly> x2 = mul(x, x);
    if (failed(x2))
      return failure();
    FailureOr<Poly> x3 = mul(*x2, x);
    if (failed(x3))
      return failure();
    Poly inner = scale(add(x, scale(*x3, 0.044715)), std::sqrt(2.0 / M_PI));
    return mul(scale(x, 0.5), add(constant(1.0), fn("tanh", {inner})));
  }
  case Activation::relu:
    return fn("max", {x, constant(0.0)});
  case Activation::silu:
    return mul(x, fn("recip", {add(constant(1.0), fn("exp", {scale(x, -1.0)}))}));
  default:
    return failure();
  }
}

/// Matches the einsum form ending in `root`; on failure `why` says why
/// (empty when the op is not a weighted-sum candidate at all).
static FailureOr<RaisedLayer> matchEinsumForm(linalg::LinalgOp root, Evaluator &ev,
                                              std::string &why) {
  MLIRContext *ctx = root.getContext();
  // Cheap filter first: 3 loops, one of them a reduction, a rank-2 result.
  if (root.getNumLoops() != 3 || root.getNumReductionLoops() != 1 ||
      root->getNumResults() != 1 ||
      cast<ShapedType>(root->getResult(0).getType()).getRank() != 2)
    return failure();
  FailureOr<Reduction> comb = ev.reduction(root);
  if (failed(comb))
    return failure();
  SmallVector<unsigned> out;
  unsigned e;
  if (failed(loopRoles(*comb, 2, out, e)))
    return failure();
  // Candidate only if some term multiplies a rank-3 leaf (per-expert
  // outputs) with something that is not rank-3 (the gate).
  auto rankOf = [](const AtomP &a) {
    return a->kind == Atom::Leaf ? cast<ShapedType>(a->src.getType()).getRank() : -1;
  };
  bool candidate = llvm::any_of(comb->poly, [&](const Mono &m) {
    return m.atoms.size() >= 2 && llvm::any_of(m.atoms, [&](const AtomP &a) {
             return rankOf(a) == 3;
           }) && llvm::any_of(m.atoms, [&](const AtomP &a) { return rankOf(a) != 3; });
  });
  if (!candidate)
    return failure();
  unsigned t = out[0], d = out[1], n = comb->numLoops;
  AffineMap mTE = dimsMap(n, {t, e}, ctx), mETD = dimsMap(n, {e, t, d}, ctx),
            mED = dimsMap(n, {e, d}, ctx);

  // y[t,d] = sum_e g[t,e] * (Y[e,t,d] (+ b2[e,d])).
  const char *wrongAxis = "the reduction is not a weighted sum over the experts "
                          "sum_e g[t,e] * y[e,t,d] (a sum over another axis, or "
                          "other terms)";
  Value g, y, b2;
  for (const Mono &m : comb->poly) {
    // The per-expert value of this term: y[e,t,d] or b2[e,d].
    const Atom *value = nullptr;
    SmallVector<const Atom *> rest;
    for (const AtomP &a : m.atoms) {
      if (!value && a->kind == Atom::Leaf && (a->map == mETD || a->map == mED))
        value = a.get();
      else
        rest.push_back(a.get());
    }
    if (!value || !coefEq(m.coef, 1.0)) {
      why = wrongAxis;
      return failure();
    }
    if (rest.size() != 1 || rest[0]->kind != Atom::Leaf) {
      why = llvm::any_of(rest, [](const Atom *a) { return a->kind == Atom::Fn; })
                ? "the expert weights are computed elementwise (e.g. a sigmoid "
                  "gate), not by a linalg.softmax over the experts"
                : wrongAxis;
      return failure();
    }
    const Atom *gate = rest[0];
    if (gate->map != mTE || (g && g != gate->src)) {
      why = wrongAxis;
      return failure();
    }
    g = gate->src;
    Value &slot = value->map == mETD ? y : b2;
    if (slot) {
      why = wrongAxis;
      return failure();
    }
    slot = value->src;
  }
  if (!y) {
    why = "no per-expert outputs y[e,t,d] in the weighted sum";
    return failure();
  }

  // g = linalg.softmax over experts (dimension 1) of the router logits.
  auto softmax = g.getDefiningOp<linalg::SoftmaxOp>();
  if (!softmax) {
    why = "the expert weights are not a linalg.softmax (not a dense softmax gate)";
    return failure();
  }
  if (softmax.getDimension() != 1) {
    why = "the softmax is over dimension " + std::to_string(softmax.getDimension()) +
          " (tokens), not over the experts (dimension 1)";
    return failure();
  }
  ev.ops.insert(softmax);
  AffineMap id2 = AffineMap::getMultiDimIdentityMap(2, ctx);
  FailureOr<Poly> logits = ev.tensorPoly(softmax.getInput(), id2);
  Value routerMM, br;
  AffineMap biasE = AffineMap::get(2, 0, {getAffineDimExpr(1, ctx)}, ctx);
  if (failed(logits) || logits->empty() || logits->size() > 2) {
    why = "the router logits are not x Wr (+ br)";
    return failure();
  }
  for (const Mono &m : *logits) {
    if (!coefEq(m.coef, 1.0) || m.atoms.size() != 1 || m.atoms[0]->kind != Atom::Leaf) {
      why = "the router logits are not x Wr (+ br)";
      return failure();
    }
    const Atom &a = *m.atoms[0];
    if (a.map == id2 && !routerMM)
      routerMM = a.src;
    else if (a.map == biasE && !br)
      br = a.src;
    else {
      why = "the router logits are not x Wr (+ br)";
      return failure();
    }
  }
  FailureOr<Reduction> router = ev.reduction(routerMM ? routerMM.getDefiningOp() : nullptr);
  SmallVector<unsigned> rOut;
  unsigned rd;
  Value x, wr;
  if (failed(router) || failed(loopRoles(*router, 2, rOut, rd)) ||
      failed(matchProduct(router->poly, dimsMap(router->numLoops, {rOut[0], rd}, ctx),
                          dimsMap(router->numLoops, {rd, rOut[1]}, ctx), x, wr))) {
    why = "the router logits are not a matmul x[t,d] * Wr[d,e]";
    return failure();
  }

  // Y[e,t,d] = sum_h act(X[e,t,h]) * W2[e,h,d], X = mm1 (+ b1[e,h]).
  FailureOr<Reduction> gemm2 = ev.reduction(y.getDefiningOp());
  SmallVector<unsigned> o2;
  unsigned h;
  if (failed(gemm2) || failed(loopRoles(*gemm2, 3, o2, h))) {
    why = "the expert outputs are not a contraction over the hidden dimension "
          "(\"eth,ehd->etd\")";
    return failure();
  }
  unsigned n2 = gemm2->numLoops;
  AffineMap mEHD = dimsMap(n2, {o2[0], h, o2[2]}, ctx),
            mETH = dimsMap(n2, {o2[0], o2[1], h}, ctx), mEH = dimsMap(n2, {o2[0], h}, ctx);
  SmallVector<const Atom *> l2;
  collectLeaves(gemm2->poly, l2);
  Value w2, mm1, b1;
  for (const Atom *a : l2) {
    if (a->map == mEHD && !w2)
      w2 = a->src;
    else if (a->map == mETH && !mm1)
      mm1 = a->src;
    else if (a->map == mEH && !b1)
      b1 = a->src;
    else {
      why = "the second expert GEMM does not read act(x W1[e] (+ b1[e])) and a "
            "per-expert weight W2[e,h,d] (a weight without the expert dimension?)";
      return failure();
    }
  }
  if (!w2 || !mm1) {
    why = "the second expert GEMM does not read act(x W1[e] (+ b1[e])) and a "
          "per-expert weight W2[e,h,d]";
    return failure();
  }
  Poly xPoly = leaf(mm1, mETH);
  if (b1)
    xPoly = add(xPoly, leaf(b1, mEH));
  std::optional<Activation> act;
  for (Activation cand : {Activation::gelu, Activation::gelu_tanh, Activation::relu,
                          Activation::silu}) {
    FailureOr<Poly> a = activationPoly(cand, xPoly);
    if (failed(a))
      continue;
    FailureOr<Poly> expected = mul(*a, leaf(w2, mEHD));
    if (succeeded(expected) && polyEq(*expected, gemm2->poly)) {
      act = cand;
      break;
    }
  }
  if (!act) {
    why = "the expert activation is not one of gelu (erf), gelu_tanh, relu, silu";
    return failure();
  }

  // mm1[e,t,h] = sum_d x[t,d] * W1[e,d,h].
  FailureOr<Reduction> gemm1 = ev.reduction(mm1.getDefiningOp());
  SmallVector<unsigned> o1;
  unsigned d1;
  Value x1, w1;
  if (failed(gemm1) || failed(loopRoles(*gemm1, 3, o1, d1))) {
    why = "the first expert GEMM is not a contraction \"td,edh->eth\"";
    return failure();
  }
  unsigned n1 = gemm1->numLoops;
  if (failed(matchProduct(gemm1->poly, dimsMap(n1, {o1[1], d1}, ctx),
                          dimsMap(n1, {o1[0], d1, o1[2]}, ctx), x1, w1))) {
    why = "the first expert GEMM is not x[t,d] * W1[e,d,h] summed over d (a "
          "weight shared by all experts, without the expert dimension?)";
    return failure();
  }
  if (x1 != x) {
    why = "the experts do not read the router's input x";
    return failure();
  }

  // One element type; the layer's verifier checks the shapes.
  Type elt = cast<ShapedType>(x.getType()).getElementType();
  for (Value v : {wr, br, w1, w2, b1, b2, Value(root->getResult(0))})
    if (v && cast<ShapedType>(v.getType()).getElementType() != elt) {
      why = "operands of different element types";
      return failure();
    }
  return RaisedLayer{x, wr, br, w1, w2, b1, b2, *act};
}

/// Whether `op` computes only from constants (no data): sharing it with
/// other code is harmless.
static bool isConstantComputation(Operation *op, unsigned depth = 0) {
  if (op->hasTrait<OpTrait::ConstantLike>() || isa<tensor::EmptyOp>(op))
    return true;
  if (depth > 8 || !(isa<linalg::FillOp>(op) || (op->getNumRegions() == 0 && isPure(op))))
    return false;
  return llvm::all_of(op->getOperands(), [&](Value v) {
    Operation *d = v.getDefiningOp();
    return d && isConstantComputation(d, depth + 1);
  });
}

/// Every op of the matched layer except the root is used only inside it.
static bool usedOnlyInside(const llvm::SetVector<Operation *> &ops, Operation *root) {
  for (Operation *op : ops) {
    if (op == root || isa<linalg::FillOp>(op) || isConstantComputation(op))
      continue;
    for (Operation *user : op->getUsers()) {
      Operation *u = user;
      // A user nested in a matched op (a loop body) counts as inside.
      while (u && !ops.contains(u))
        u = u->getParentOp();
      if (!u)
        return false;
    }
  }
  return true;
}

/// A zero tensor shaped like `like` dims [i0, i1] of the given values.
static Value zeros(OpBuilder &b, Location loc, Value dim0Of, unsigned i0, Value dim1Of,
                   unsigned i1) {
  auto t0 = cast<RankedTensorType>(dim0Of.getType());
  auto t1 = cast<RankedTensorType>(dim1Of.getType());
  SmallVector<int64_t> shape{t0.getDimSize(i0), t1.getDimSize(i1)};
  SmallVector<Value> dyn;
  if (ShapedType::isDynamic(shape[0]))
    dyn.push_back(tensor::DimOp::create(b, loc, dim0Of, i0));
  if (ShapedType::isDynamic(shape[1]))
    dyn.push_back(tensor::DimOp::create(b, loc, dim1Of, i1));
  Type elt = t0.getElementType();
  Value empty = tensor::EmptyOp::create(b, loc, RankedTensorType::get(shape, elt), dyn);
  Value zero = arith::ConstantOp::create(b, loc, b.getFloatAttr(elt, 0.0));
  return linalg::FillOp::create(b, loc, zero, empty).getResult(0);
}

/// Builds the layer detached, verifies it quietly, and inserts it.
static FailureOr<LayerOp> buildLayer(PatternRewriter &rewriter, Operation *root,
                                     const RaisedLayer &l) {
  MLIRContext *ctx = root->getContext();
  Location loc = root->getLoc();
  OpBuilder detached(ctx);
  Value b1 = l.b1, b2 = l.b2;
  SmallVector<Operation *> extra;
  if ((b1 != nullptr) != (b2 != nullptr)) {
    // moe.layer takes both expert biases or neither: the missing one is 0.
    rewriter.setInsertionPoint(root);
    if (!b1)
      b1 = zeros(rewriter, loc, l.w1, 0, l.w1, 2);
    else
      b2 = zeros(rewriter, loc, l.w2, 0, l.w2, 2);
  }
  auto layer = LayerOp::create(
      detached, loc, root->getResult(0).getType(), /*aux_loss=*/Type(), l.x, l.wr, l.br,
      /*selection_bias=*/Value(), l.w1, l.w2, b1, b2, /*shared_w1=*/Value(),
      /*shared_w2=*/Value(), /*shared_gate=*/Value(), /*seed=*/Value(),
      DenseRoutingAttr::get(ctx),
      ActivationAttr::get(ctx, l.activation), /*training=*/UnitAttr(),
      /*capacity_factor=*/FloatAttr());
  {
    ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
    if (failed(verify(layer))) {
      layer->destroy();
      return failure();
    }
  }
  rewriter.setInsertionPoint(root);
  rewriter.insert(layer);
  return layer;
}

struct RaiseEinsumForm : public OpInterfaceRewritePattern<linalg::LinalgOp> {
  RaiseEinsumForm(MLIRContext *ctx, Reasons *reasons)
      : OpInterfaceRewritePattern(ctx), reasons(reasons) {}

  LogicalResult matchAndRewrite(linalg::LinalgOp root,
                                PatternRewriter &rewriter) const override {
    Evaluator ev;
    std::string why;
    FailureOr<RaisedLayer> l = matchEinsumForm(root, ev, why);
    if (failed(l)) {
      if (!why.empty())
        reasons->note(root, why);
      return rewriter.notifyMatchFailure(root, why.empty() ? "not a weighted sum" : why);
    }
    if (!usedOnlyInside(ev.ops, root)) {
      reasons->note(root, "an intermediate of the layer (router, softmax, expert "
                          "GEMMs or activation) is also used outside it");
      return rewriter.notifyMatchFailure(root, "intermediate used outside");
    }
    FailureOr<LayerOp> layer = buildLayer(rewriter, root, *l);
    if (failed(layer)) {
      reasons->note(root, "the recognised operands do not form a valid moe.layer");
      return failure();
    }
    reasons->forget(root);
    rewriter.replaceOp(root, layer->getOutput());
    return success();
  }

  Reasons *reasons;
};

//===----------------------------------------------------------------------===//
// (a) the form --convert-moe-to-linalg emits
//===----------------------------------------------------------------------===//

/// Structural identity of a generated (scratch) DAG and the function's IR.
class GraphMatcher {
public:
  DenseMap<Value, Value> values;
  DenseMap<Operation *, Operation *> opsMap;

  bool value(Value g, Value a) {
    if (g.getType() != a.getType())
      return false;
    if (auto it = values.find(g); it != values.end())
      return it->second == a;
    auto gr = dyn_cast<OpResult>(g);
    auto ar = dyn_cast<OpResult>(a);
    if (!gr || !ar || gr.getResultNumber() != ar.getResultNumber())
      return false;
    if (!op(gr.getOwner(), ar.getOwner()))
      return false;
    return values.lookup(g) == a;
  }

  bool op(Operation *g, Operation *a) {
    if (auto it = opsMap.find(g); it != opsMap.end())
      return it->second == a;
    if (g->getName() != a->getName() || g->getNumOperands() != a->getNumOperands() ||
        g->getNumResults() != a->getNumResults() ||
        g->getNumRegions() != a->getNumRegions() || g->getNumSuccessors() != 0 ||
        a->getNumSuccessors() != 0)
      return false;
    if (g->getRawDictionaryAttrs() != a->getRawDictionaryAttrs() ||
        g->getPropertiesAsAttribute() != a->getPropertiesAsAttribute())
      return false;
    if (g->getResultTypes() != a->getResultTypes())
      return false;
    for (auto [x, y] : llvm::zip(g->getOperands(), a->getOperands()))
      if (!value(x, y))
        return false;
    for (auto [rg, ra] : llvm::zip(g->getRegions(), a->getRegions())) {
      if (rg.getBlocks().size() != ra.getBlocks().size())
        return false;
      for (auto [bg, ba] : llvm::zip(rg.getBlocks(), ra.getBlocks())) {
        if (bg.getNumArguments() != ba.getNumArguments() ||
            bg.getOperations().size() != ba.getOperations().size())
          return false;
        for (auto [x, y] : llvm::zip(bg.getArguments(), ba.getArguments())) {
          if (x.getType() != y.getType())
            return false;
          values[x] = y;
        }
        for (auto [og, oa] : llvm::zip(bg.getOperations(), ba.getOperations()))
          if (!op(&og, &oa))
            return false;
      }
    }
    opsMap[g] = a;
    for (auto [x, y] : llvm::zip(g->getResults(), a->getResults()))
      values[x] = y;
    return true;
  }
};

struct LoweredOperands {
  Value x, wr, br, w1, w2, b1, b2;
};

static bool definedOutside(Value v, Operation *op) {
  return !op->getRegion(0).isAncestor(v.getParentRegion());
}

/// Finds the would-be layer operands around a lowered combine.
static FailureOr<LoweredOperands> navigateLowered(linalg::GenericOp comb) {
  if (comb.getNumDpsInputs() != 2 || comb.getNumDpsInits() != 1 ||
      comb->getNumResults() != 1)
    return failure();
  auto wType = dyn_cast<RankedTensorType>(comb.getDpsInputs()[0].getType());
  auto iType = dyn_cast<RankedTensorType>(comb.getDpsInputs()[1].getType());
  auto yType = dyn_cast<RankedTensorType>(comb->getResult(0).getType());
  if (!wType || !iType || !yType || wType.getRank() != 2 || iType.getRank() != 2 ||
      yType.getRank() != 2 || !iType.getElementType().isInteger(32))
    return failure();
  // The gate loop and the logits it reads.
  Operation *gate = stripCasts(comb.getDpsInputs()[0]).getDefiningOp();
  if (!gate || gate->getNumRegions() != 1 || !isa<LoopLikeOpInterface>(gate))
    return failure();
  Value logits;
  gate->walk([&](tensor::ExtractOp ex) {
    if (!logits && definedOutside(ex.getTensor(), gate))
      logits = ex.getTensor();
  });
  if (!logits)
    return failure();
  LoweredOperands r;
  auto lg = stripCasts(logits).getDefiningOp<linalg::GenericOp>();
  if (!lg || lg.getNumDpsInputs() != 2)
    return failure();
  linalg::GenericOp mm = lg;
  if (cast<ShapedType>(lg.getDpsInputs()[1].getType()).getRank() == 1) {
    r.br = lg.getDpsInputs()[1];
    mm = stripCasts(lg.getDpsInputs()[0]).getDefiningOp<linalg::GenericOp>();
    if (!mm || mm.getNumDpsInputs() != 2)
      return failure();
  }
  r.x = mm.getDpsInputs()[0];
  r.wr = mm.getDpsInputs()[1];
  // The expert loop the combine gathers from.
  Value expertOut;
  comb.walk([&](tensor::ExtractOp ex) {
    if (!expertOut && definedOutside(ex.getTensor(), comb))
      expertOut = ex.getTensor();
  });
  if (!expertOut)
    return failure();
  auto experts = stripCasts(expertOut).getDefiningOp<LoopLikeOpInterface>();
  if (!experts || experts->getNumRegions() != 1 || experts->getRegion(0).empty())
    return failure();
  std::optional<Value> iv = experts.getSingleInductionVar();
  if (!iv)
    return failure();
  SmallVector<Value> weights, biases;
  for (Operation &o : experts->getRegion(0).front().getOperations()) {
    auto slice = dyn_cast<tensor::ExtractSliceOp>(o);
    if (!slice || !definedOutside(slice.getSource(), experts))
      continue;
    int64_t rank = slice.getSourceType().getRank();
    // (the expert loop may be scf.for or scf.forall)
    if (rank == 3) {
      weights.push_back(slice.getSource());
    } else if (rank == 2 && slice.getType().getRank() == 1) {
      auto off = dyn_cast<Value>(slice.getMixedOffsets()[0]);
      if (off && off == *iv)
        biases.push_back(slice.getSource());
    }
  }
  if (weights.size() != 2 || (biases.size() != 0 && biases.size() != 2))
    return failure();
  r.w1 = weights[0];
  r.w2 = weights[1];
  if (!biases.empty()) {
    r.b1 = biases[0];
    r.b2 = biases[1];
  }
  return r;
}

struct RaiseLoweredForm : public OpRewritePattern<linalg::GenericOp> {
  RaiseLoweredForm(MLIRContext *ctx, Reasons *reasons, bool *lowererMissing)
      : OpRewritePattern(ctx), reasons(reasons), lowererMissing(lowererMissing) {}

  LogicalResult matchAndRewrite(linalg::GenericOp comb,
                                PatternRewriter &rewriter) const override {
    FailureOr<LoweredOperands> ops = navigateLowered(comb);
    if (failed(ops))
      return rewriter.notifyMatchFailure(comb, "not a lowered combine");
    MLIRContext *ctx = comb.getContext();
    Location loc = comb.getLoc();
    auto resultType = comb->getResult(0).getType();
    bool gated = false;
    auto w1Type = cast<RankedTensorType>(ops->w1.getType());
    auto w2Type = cast<RankedTensorType>(ops->w2.getType());
    if (!w1Type.isDynamicDim(2) && !w2Type.isDynamicDim(1) &&
        w1Type.getDimSize(2) == 2 * w2Type.getDimSize(1))
      gated = true;
    SmallVector<Activation> candidates{Activation::gelu, Activation::gelu_tanh,
                                       Activation::relu, Activation::silu};
    if (gated)
      candidates = {Activation::swiglu, Activation::geglu};

    // The IR as emitted, or after the usual clean-ups (the scratch gets the
    // same clean-up as the function is assumed to have had).
    static const char *const kPipelines[] = {
        "convert-moe-to-linalg", "convert-moe-to-linalg,cse",
        "convert-moe-to-linalg,canonicalize", "convert-moe-to-linalg,canonicalize,cse"};
    SmallVector<std::pair<const char *, Activation>> attempts;
    for (const char *pipeline : kPipelines)
      for (Activation act : candidates)
        attempts.push_back({pipeline, act});
    for (auto [pipeline, act] : attempts) {
      ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
      OwningOpRef<ModuleOp> scratch = ModuleOp::create(loc);
      OpBuilder b(ctx);
      b.setInsertionPointToEnd(scratch->getBody());
      SmallVector<Value> actual{ops->x, ops->wr};
      if (ops->br) actual.push_back(ops->br);
      actual.append({ops->w1, ops->w2});
      if (ops->b1) actual.append({ops->b1, ops->b2});
      SmallVector<Type> argTypes;
      for (Value v : actual)
        argTypes.push_back(v.getType());
      auto func = func::FuncOp::create(b, loc, "moe_raise_scratch",
                                       b.getFunctionType(argTypes, {resultType}));
      Block *entry = func.addEntryBlock();
      b.setInsertionPointToStart(entry);
      unsigned i = 0;
      Value x = entry->getArgument(i++), wr = entry->getArgument(i++);
      Value br = ops->br ? entry->getArgument(i++) : Value();
      Value w1 = entry->getArgument(i++), w2 = entry->getArgument(i++);
      Value b1 = ops->b1 ? entry->getArgument(i++) : Value();
      Value b2 = ops->b1 ? entry->getArgument(i++) : Value();
      auto layer = LayerOp::create(b, loc, resultType, Type(), x, wr, br,
                                   /*selection_bias=*/Value(), w1, w2, b1, b2,
                                   /*shared_w1=*/Value(), /*shared_w2=*/Value(),
                                   /*shared_gate=*/Value(), /*seed=*/Value(),
                                   DenseRoutingAttr::get(ctx),
                                   ActivationAttr::get(ctx, act), UnitAttr(), FloatAttr());
      func::ReturnOp::create(b, loc, layer.getOutput());
      if (failed(verify(*scratch)))
        continue;
      PassManager pm(ctx, ModuleOp::getOperationName());
      std::string err;
      llvm::raw_string_ostream errs(err);
      if (failed(parsePassPipeline(pipeline, pm, errs))) {
        *lowererMissing = true;
        return rewriter.notifyMatchFailure(comb, "convert-moe-to-linalg not registered");
      }
      if (failed(pm.run(*scratch)))
        continue;
      auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
      Operation *genRoot = stripCasts(ret.getOperand(0)).getDefiningOp();
      if (!genRoot)
        continue;
      GraphMatcher m;
      for (auto [g, a] : llvm::zip(func.getArguments(), actual))
        m.values[g] = a;
      if (!m.op(genRoot, comb))
        continue;
      llvm::SetVector<Operation *> image;
      for (auto &kv : m.opsMap)
        image.insert(kv.second);
      if (!usedOnlyInside(image, comb)) {
        reasons->note(comb, "the lowered dense layer's intermediates are also "
                            "used outside it");
        return rewriter.notifyMatchFailure(comb, "intermediate used outside");
      }
      RaisedLayer l{ops->x, ops->wr, ops->br, ops->w1, ops->w2, ops->b1, ops->b2, act};
      FailureOr<LayerOp> raised = buildLayer(rewriter, comb, l);
      if (failed(raised))
        return failure();
      reasons->forget(comb);
      rewriter.replaceOp(comb, raised->getOutput());
      return success();
    }
    reasons->note(comb, "looks like a lowered moe combine, but not of a dense "
                        "layer exactly as --convert-moe-to-linalg emits it "
                        "(another routing, a capacity factor, or edited IR)");
    return rewriter.notifyMatchFailure(comb, "no dense layer lowers to this");
  }

  Reasons *reasons;
  bool *lowererMissing;
};

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct MoERaiseLinalgPass
    : public mlir::moe::impl::MoERaiseLinalgBase<MoERaiseLinalgPass> {
  using MoERaiseLinalgBase::MoERaiseLinalgBase;

  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName()
                            << " at " << getOperation()->getLoc() << "\n");
    MLIRContext *ctx = &getContext();
    Reasons reasons;
    bool lowererMissing = false;
    RewritePatternSet patterns(ctx);
    patterns.add<RaiseLoweredForm>(ctx, &reasons, &lowererMissing);
    patterns.add<RaiseEinsumForm>(ctx, &reasons);
    GreedyRewriteConfig config;
    config.enableFolding(false);
    config.enableConstantCSE(false);
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
    // Ops that still exist and looked like a layer: say why they were left.
    DenseSet<Operation *> alive;
    getOperation()->walk([&](Operation *op) { alive.insert(op); });
    for (auto &[op, why] : reasons.byOp)
      if (alive.contains(op))
        op->emitRemark() << "not raised to moe.layer: " << why;
    if (lowererMissing)
      getOperation()->emitRemark()
          << "--moe-raise-linalg: the lowered form cannot be recognised because "
             "the convert-moe-to-linalg pass is not registered in this tool";
  }
};

} // namespace
