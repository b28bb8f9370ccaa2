//===- PrintCost.cpp - --moe-print-cost: per-layer cost table -------------===//
//
// --moe-print-cost prints, on stdout (llvm::outs()), one table per run of the
// pass: one row per MoE layer, then a "total" row when there is more than one.
// It is an analysis: the IR is not changed and nothing goes to stderr, so
// `moe-opt FILE --moe-print-cost -o /dev/null` shows only the table.
//
// Rows, in program order (pre-order walk of the pass's operation):
//   * `moe.layer`, `moe.soft_layer`;
//   * `moe.fused_experts`, `moe.fused_soft_experts`;
//   * the decomposed chain: one row per `moe.expert_ffn`. Its `rows` operand
//     is traced to `moe.dispatch` (T and D from its input, k from the indices'
//     second dimension, E from `num_experts`, the capacity factor), the
//     indices to `moe.gate` (routing, training) and the gate's logits to
//     `moe.route` (router weight and bias); for Soft MoE to
//     `moe.soft_dispatch` (G, M, D, Phi, normalize). The combine is a user
//     `moe.combine` / `moe.soft_combine` of the FFN's output. A fused op is
//     traced the same way (indices -> moe.gate -> moe.route). Parts of the
//     layer that cannot be found contribute nothing: their column shows "-"
//     (router), or the column counts only the parts that were found.
//
// Columns:
//   layer    op name and location "file:line" (file name without directory;
//            "?" without a file location)
//   form     dense | top_k k=K | moesart k=K, with " train" in training mode
//            and " cf=X" with a capacity factor; soft S=S M=M for Soft MoE;
//            prefixed with "chain " for the decomposed chain and "fused " for
//            fused ops ("chain k=K" / "fused k=K" when no moe.gate is found)
//   act      expert activation
//   T        tokens (Soft MoE: G*M)
//   D, H     model width, expert hidden width (H, also for gated activations,
//            whose W1 has 2H columns)
//   E        experts
//   k|S      experts per token k (E for dense) or, for Soft MoE, slots per
//            expert S
//   router FLOPs, expert FLOPs, disp+comb FLOPs, experts touched,
//   weight bytes (expected bytes of expert weights touched), params/token
//            (active parameters per token); see below.
//
// Cost model (a multiply-add is 2 FLOPs; every other elementwise operation,
// including exp, erf, tanh, rsqrt and a division, is 1 FLOP). With
// H1 = 2H for gated activations (swiglu, geglu) and H1 = H otherwise:
//   per-row expert FLOPs  F = 2*D*H1 + 2*H*D      (the two GEMMs)
//                            + H1                  (activation: H for act(u),
//                                                   or H for act(gate) plus H
//                                                   for the gating multiply)
//                            + H1 [b1] + D [b2]    (bias adds, if present)
//   per-expert params     P = D*H1 + H*D + H1 [b1] + D [b2]
// Token-choice (moe.layer, chain, fused_experts):
//   router       2*T*D*E + T*E [router bias]                 (moe.route)
//   rows         T*k (k = E for dense); with a capacity factor cf the kept
//                rows are capped at E*ceil(cf*T*k/E)
//   experts      rows * F
//   disp+comb    5*T*E (softmax of the logits: max, sub, exp, sum, div; in
//                moe.gate) + 2*T*k*D (weighted combine). Top-k selection,
//                MOESART sampling/weight adjustment, the aux loss and the
//                dispatch gather are O(T*E) comparisons or data movement
//                and are not counted.
//   touched      E*(1-(1-k/E)^T): the expected number of distinct experts hit
//                when each token picks k experts uniformly (dense: E). With T
//                dynamic this is "?" unless k = E.
//   weight bytes touched * P * element size of W1 (f32 4, f16/bf16 2),
//                rounded to an integer
//   params/token D*E + E [router bias] + k*P
// Soft MoE (moe.soft_layer, chain, fused_soft_experts), x: [G,M,D],
// Phi: [D,E,S]:
//   router       2*G*M*D*E*S (logits) + 3*G*M*D + 3*D*E*S when `normalize`
//                (square, sum, scale per element of x and of Phi; the rsqrt
//                per row and the scalar `scale` are not counted)
//   rows         E*G*S slots
//   experts      rows * F
//   disp+comb    2*E*S*G*M*D (slot averages) + 2*G*M*E*S*D (combine)
//                + 10*G*M*E*S (the two softmaxes, over m and over (e,s))
//   touched      E: every slot averages all tokens of its group
//   weight bytes E * P * element size
//   params/token D*E*S + E*P: every token's output mixes all E*S slots, so
//                all experts' parameters (and Phi) are active for every token
//                (the scalar `scale` is not counted)
//
// Backward (option backward=true: a second table, one row per row above),
// the work of @f_vjp (--moe-generate-vjp, docs/spec.md §9) as the CPU
// lowering does it (GEMM1 recomputed from the saved rows, no pre-activation
// kept):
//   per-row backward expert FLOPs  Fb = 2*D*H1 (GEMM1 recomputed)
//                            + 2*H*D (dA = dY W2^T) + 2*H*D (dW2 = A^T dY)
//                            + 2*D*H1 (dW1 = X^T dZ) + 2*D*H1 (dX = dZ W1^T)
//                            + 2*H1 (activation backward) + the bias
//                            gradients' sums (H1 [b1] + D [b2])
//   bwd router   4*T*D*E (dx += dlogits Wr^T, dWr = x^T dlogits)
//                + T*E [router bias]
//   bwd experts  rows * Fb; a shared expert adds
//                T*(6*D*Ws + 4*Hs*D + 2*Ws) (+ 6*D + 4 with its gate)
//   bwd disp+comb 5*T*E (the gate's backward through the softmax) +
//                4*T*k*D (combine backward: dy scaled per slot and the
//                routing weight's dot product; dispatch backward: the sum
//                of a token's slots)
//   bwd bytes    the expert weights read again (the forward's weight bytes)
//                plus the weight gradients written, E * P * element size
//                (every expert's, zero for experts that got no token)
//   saved        what @f_vjp keeps from its forward for its backward:
//                2 * rows * D * element size (dispatched rows and expert
//                outputs) + 4*T*E (f32 logits) + 16*T*k (weights, indices,
//                positions, source rows) + 4*(E+1) (offsets)
// Soft MoE (N = G*M*E*S logits, E*G*S rows):
//   bwd router   6*N*D (the logits recomputed, dxn = dL Phin^T, dPhin =
//                xn^T dL) + 8*G*M*D + 8*D*E*S when `normalize` (the
//                normalizations recomputed, 3 per element, and their
//                backward r (dt - t <dt, t>), 5 per element)
//   bwd experts  rows * Fb
//   bwd disp+comb 4*N*D (dispatch backward: dDw = dRows . x and dx =
//                Dw dRows) + 10*N (the two softmaxes recomputed) + 4*N (the
//                dispatch softmax's backward); with the combine + 4*N*D
//                (dOut = Cw^T dy, dCw = dy . out) + 5*N (the combine
//                softmax's backward and the sum of the two)
//   bwd bytes    as above
//   saved        2 * rows * D * element size (slots and expert outputs) +
//                N * element size (combine weights) + 4*(E+1) (offsets)
//
// Number format: integers are printed exactly with thousands separators
// ("1,234,567") below 1e12 and in scientific notation with four significant
// digits ("1.235e+12") from 1e12 on; "experts touched" is printed with two
// decimals. "?" marks a value that needs a dynamic size; "-" a part the row
// does not contain. The total row sums each column ("?" if any row has "?").
//
//===----------------------------------------------------------------------===//

#include "dialect/MoEOps.h"
#include "dialect/MoESpmdOps.h"
#include "passes/Passes.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <cmath>
#include <cstring>
#include <vector>
#include <string>

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "moe-print-cost"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOEPRINTCOST
#include "passes/Passes.h.inc"
} // namespace moe
} // namespace mlir

using namespace mlir;
using namespace mlir::moe;

namespace {

//===----------------------------------------------------------------------===//
// A quantity: known (a double; integers are exact below 2^53), unknown ("?",
// needs a dynamic size) or not applicable ("-").
//===----------------------------------------------------------------------===//

struct Q {
  enum Kind { NA, Unknown, Known } kind = NA;
  double v = 0.0;

  static Q na() { return Q{NA, 0.0}; }
  static Q unknown() { return Q{Unknown, 0.0}; }
  static Q of(double v) { return Q{Known, v}; }
  bool known() const { return kind == Known; }
};

// Arithmetic on sizes: unknown is absorbing. (Not-applicable only appears in
// whole columns; sums treat it as "nothing to add".)
static Q operator*(Q a, Q b) {
  if (a.kind == Q::Unknown || b.kind == Q::Unknown)
    return Q::unknown();
  if (a.kind == Q::NA || b.kind == Q::NA)
    return Q::na();
  return Q::of(a.v * b.v);
}
static Q operator+(Q a, Q b) {
  if (a.kind == Q::Unknown || b.kind == Q::Unknown)
    return Q::unknown();
  if (a.kind == Q::NA)
    return b;
  if (b.kind == Q::NA)
    return a;
  return Q::of(a.v + b.v);
}
static Q operator*(double a, Q b) { return Q::of(a) * b; }

static Q dimOf(Value v, unsigned i) {
  if (!v)
    return Q::unknown();
  auto type = dyn_cast<ShapedType>(v.getType());
  if (!type || !type.hasRank() || i >= type.getRank() || type.isDynamicDim(i))
    return Q::unknown();
  return Q::of(static_cast<double>(type.getDimSize(i)));
}

static Q fromDim(int64_t d) {
  return ShapedType::isDynamic(d) ? Q::unknown() : Q::of(static_cast<double>(d));
}

/// The first known of the candidates (they agree when known: the verifiers
/// check it).
static Q firstKnown(std::initializer_list<Q> qs) {
  for (Q q : qs)
    if (q.known())
      return q;
  return Q::unknown();
}

//===----------------------------------------------------------------------===//
// Formatting
//===----------------------------------------------------------------------===//

static std::string withSeparators(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

static std::string fmtInt(Q q) {
  if (q.kind == Q::NA)
    return "-";
  if (q.kind == Q::Unknown)
    return "?";
  if (q.v >= 1e12) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << llvm::format("%.3e", q.v);
    return s;
  }
  return withSeparators(static_cast<uint64_t>(std::llround(q.v)));
}

static std::string fmtFixed2(Q q) {
  if (q.kind == Q::NA)
    return "-";
  if (q.kind == Q::Unknown)
    return "?";
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.2f", q.v);
  return s;
}

static std::string fmtDimForm(Q q) {
  return q.known() ? std::to_string(static_cast<int64_t>(q.v)) : "?";
}

static std::string locationText(Location loc) {
  if (auto fl = loc->findInstanceOf<FileLineColLoc>())
    return (llvm::sys::path::filename(fl.getFilename().getValue()) + ":" +
            llvm::Twine(fl.getLine()))
        .str();
  return "?";
}

//===----------------------------------------------------------------------===//
// Rows
//===----------------------------------------------------------------------===//

struct Row {
  std::string layer, form, act;
  Q T, D, H, E, kOrSlots;
  Q router, experts, dispatch, touched, bytes, params;
  // The backward (--moe-print-cost=backward=true): the same parts of f_vjp's
  // gradient work, the bytes of expert weights it reads and the gradients it
  // writes, and what f_vjp keeps between its forward and its backward.
  // `differentiable` is false for a row whose backward is not counted
  // (expert_ffn rows of unknown origin): "-".
  bool differentiable = false;
  Q bwdRouter, bwdExperts, bwdDispatch, bwdBytes, saved;
};

/// Sizes of the expert FFNs: from W1 [E,D,H1], W2 [E,H,D], b1, b2.
struct Experts {
  Q E, D, H, H1;
  Q rowFlops;    // F of the header comment
  Q bwdRowFlops; // Fb of the header comment
  Q params;      // P of the header comment
  Q eltBytes;
  std::string act;
};

static Experts expertsOf(Value w1, Value w2, Value b1, Value b2,
                         ActivationAttr activation) {
  Experts x;
  bool gated = activation.isGated();
  x.act = stringifyActivation(activation.getValue()).str();
  x.E = firstKnown({dimOf(w1, 0), dimOf(w2, 0)});
  x.D = firstKnown({dimOf(w1, 1), dimOf(w2, 2)});
  Q w1Cols = dimOf(w1, 2);
  Q hFromW1 = w1Cols.known() && gated ? Q::of(w1Cols.v / 2) : w1Cols;
  x.H = firstKnown({dimOf(w2, 1), hFromW1});
  x.H1 = gated ? 2.0 * x.H : x.H;
  Q biases = Q::of(0);
  if (b1)
    biases = biases + x.H1;
  if (b2)
    biases = biases + x.D;
  x.rowFlops = 2.0 * x.D * x.H1 + 2.0 * x.H * x.D + x.H1 + biases;
  x.bwdRowFlops = 6.0 * x.D * x.H1 + 4.0 * x.H * x.D + 2.0 * x.H1 + biases;
  x.params = x.D * x.H1 + x.H * x.D + biases;
  x.eltBytes = Q::unknown();
  auto type = cast<ShapedType>(w1.getType());
  if (type.getElementType().isIntOrFloat())
    x.eltBytes = Q::of((type.getElementType().getIntOrFloatBitWidth() + 7) / 8);
  return x;
}

static std::string routingForm(RoutingAttrInterface routing, bool training) {
  std::string s;
  if (isa<DenseRoutingAttr>(routing))
    s = "dense";
  else if (auto topk = dyn_cast<TopKRoutingAttr>(routing)) {
    s = "top_k k=" + std::to_string(topk.getK());
    if (topk.getScore() == RouterScore::sigmoid)
      s += " sigmoid";
    if (topk.getGroups() > 1)
      s += " groups=" + std::to_string(topk.getKeptGroups()) + "/" +
           std::to_string(topk.getGroups());
  }
  else if (auto ms = dyn_cast<MoesartRoutingAttr>(routing))
    s = "moesart k=" + std::to_string(ms.getK());
  else if (std::optional<int64_t> k = routing.getFixedK())
    s = "routing k=" + std::to_string(*k);
  else
    s = "routing";
  if (training)
    s += " train";
  return s;
}

static std::string capacityForm(std::optional<llvm::APFloat> cf) {
  if (!cf)
    return "";
  std::string s;
  llvm::raw_string_ostream os(s);
  os << " cf=" << llvm::format("%g", cf->convertToDouble());
  return s;
}

/// What a token-choice row contains besides the experts.
struct TokenChoiceParts {
  bool router = false, routerBias = false; // a moe.route (or the layer's router)
  bool softmax = false;                    // a moe.gate (or the layer's gate)
  bool combine = false;                    // a moe.combine (or fused/layer)
  std::optional<double> capacityFactor;
};

static void fillTokenChoice(Row &r, Q T, Q D, Q E, Q k, const Experts &x,
                            const TokenChoiceParts &parts) {
  r.T = T;
  r.D = D;
  r.H = x.H;
  r.E = E;
  r.kOrSlots = k;
  r.act = x.act;
  r.router = parts.router ? 2.0 * T * D * E + (parts.routerBias ? T * E : Q::of(0))
                          : Q::na();
  Q rows = T * k;
  if (parts.capacityFactor && rows.known() && E.known() && E.v > 0) {
    double cap = std::ceil(*parts.capacityFactor * rows.v / E.v);
    rows = Q::of(std::min(rows.v, E.v * cap));
  }
  r.experts = rows * x.rowFlops;
  r.dispatch = Q::na();
  if (parts.softmax)
    r.dispatch = r.dispatch + 5.0 * T * E;
  if (parts.combine)
    r.dispatch = r.dispatch + 2.0 * T * k * D;
  if (E.known() && k.known() && k.v == E.v && !T.known())
    r.touched = E; // dense: every expert, for any T >= 1
  else if (E.known() && k.known() && T.known() && E.v > 0)
    r.touched = Q::of(E.v * (1.0 - std::pow(1.0 - k.v / E.v, T.v)));
  else
    r.touched = Q::unknown();
  r.bytes = r.touched * x.params * x.eltBytes;
  if (r.bytes.known())
    r.bytes = Q::of(std::round(r.bytes.v));
  r.params = k * x.params;
  if (parts.router)
    r.params = D * E + (parts.routerBias ? E : Q::of(0)) + r.params;

  r.differentiable = true;
  r.bwdRouter = parts.router ? 4.0 * T * D * E + (parts.routerBias ? T * E : Q::of(0))
                             : Q::na();
  r.bwdExperts = rows * x.bwdRowFlops;
  r.bwdDispatch = Q::na();
  if (parts.softmax)
    r.bwdDispatch = r.bwdDispatch + 5.0 * T * E;
  if (parts.combine)
    r.bwdDispatch = r.bwdDispatch + 4.0 * T * k * D;
  r.bwdBytes = r.bytes + E * x.params * x.eltBytes;
  if (r.bwdBytes.known())
    r.bwdBytes = Q::of(std::round(r.bwdBytes.v));
  // Saved: the dispatched rows and the expert outputs (element type), the
  // logits (f32), the routing weights, indices, positions and source rows
  // (4 bytes each per slot), the offsets.
  r.saved = 2.0 * rows * D * x.eltBytes + 4.0 * T * E + 16.0 * T * k + 4.0 * (E + Q::of(1));
}

static void fillSoft(Row &r, Q G, Q M, Q D, Q E, Q S, bool normalize,
                     bool combine, const Experts &x) {
  r.T = G * M;
  r.D = D;
  r.H = x.H;
  r.E = E;
  r.kOrSlots = S;
  r.act = x.act;
  r.router = 2.0 * G * M * D * E * S;
  if (normalize)
    r.router = r.router + 3.0 * G * M * D + 3.0 * D * E * S;
  r.experts = E * G * S * x.rowFlops;
  r.dispatch = 2.0 * E * S * G * M * D + 10.0 * G * M * E * S;
  if (combine)
    r.dispatch = r.dispatch + 2.0 * G * M * E * S * D;
  r.touched = E;
  r.bytes = E * x.params * x.eltBytes;
  r.params = D * E * S + E * x.params;
  // The backward (header comment): N logits, E*G*S rows.
  Q N = G * M * E * S, rows = E * G * S;
  r.differentiable = true;
  r.bwdRouter = 6.0 * N * D;
  if (normalize)
    r.bwdRouter = r.bwdRouter + 8.0 * G * M * D + 8.0 * D * E * S;
  r.bwdExperts = rows * x.bwdRowFlops;
  r.bwdDispatch = 4.0 * N * D + 14.0 * N;
  if (combine)
    r.bwdDispatch = r.bwdDispatch + 4.0 * N * D + 5.0 * N;
  r.bwdBytes = r.bytes + E * x.params * x.eltBytes;
  if (r.bwdBytes.known())
    r.bwdBytes = Q::of(std::round(r.bwdBytes.v));
  r.saved = 2.0 * rows * D * x.eltBytes + N * x.eltBytes + 4.0 * (E + Q::of(1));
}

static std::string softForm(Q S, Q M) {
  return "soft S=" + fmtDimForm(S) + " M=" + fmtDimForm(M);
}

static std::string label(Operation *op) {
  return op->getName().getStringRef().str() + " " + locationText(op->getLoc());
}

/// Router, gate and combine around a chain or fused op, found through the
/// indices operand (indices -> moe.gate -> moe.route).
static void traceGate(Value indices, TokenChoiceParts &parts, std::string &form,
                      Q k) {
  auto gate = indices.getDefiningOp<GateOp>();
  if (!gate || gate.getIndices() != indices) {
    form += "k=" + fmtDimForm(k);
    return;
  }
  form += routingForm(gate.getRouting(), gate.getTraining());
  parts.softmax = true;
  if (auto route = gate.getLogits().getDefiningOp<RouteOp>()) {
    parts.router = true;
    parts.routerBias = static_cast<bool>(route.getRouterBias());
  }
}

/// Adds a shared expert (docs/spec.md §3.1.1: every token runs it) to a row: its
/// FLOPs to the experts' column, its weights to the bytes and the active
/// parameters, "+shared" to the form.
static void addShared(Row &r, Q T, Value s1, Value s2, Value sg) {
  Q D = dimOf(s1, 0), width = dimOf(s1, 1), hidden = dimOf(s2, 0);
  Q flops = 2.0 * D * width + 2.0 * hidden * D + width;
  Q bwdFlops = 6.0 * D * width + 4.0 * hidden * D + 2.0 * width;
  Q params = D * width + hidden * D;
  if (sg) {
    flops = flops + 2.0 * D + Q::of(4);
    bwdFlops = bwdFlops + 6.0 * D + Q::of(4);
    params = params + D;
  }
  Q eltBytes = Q::unknown();
  auto type = cast<ShapedType>(s1.getType());
  if (type.getElementType().isIntOrFloat())
    eltBytes = Q::of((type.getElementType().getIntOrFloatBitWidth() + 7) / 8);
  r.experts = r.experts + T * flops;
  r.bwdExperts = r.bwdExperts + T * bwdFlops;
  r.bwdBytes = r.bwdBytes + 2.0 * params * eltBytes;
  r.bytes = r.bytes + params * eltBytes;
  r.params = r.params + params;
  r.form += sg ? " +shared(gated)" : " +shared";
}

static Row layerRow(LayerOp op) {
  Row r;
  r.layer = label(op);
  Experts x = expertsOf(op.getW1(), op.getW2(), op.getB1(), op.getB2(),
                        op.getActivationAttr());
  Q T = dimOf(op.getInput(), 0);
  Q D = firstKnown({dimOf(op.getInput(), 1), dimOf(op.getRouterWeight(), 0), x.D});
  Q E = firstKnown({dimOf(op.getRouterWeight(), 1), x.E});
  Q k = E.known() ? fromDim(op.getRouting().getExpertsPerToken(
                        static_cast<int64_t>(E.v)))
                  : (op.getRouting().getFixedK()
                         ? Q::of(static_cast<double>(*op.getRouting().getFixedK()))
                         : Q::unknown());
  TokenChoiceParts parts;
  parts.router = parts.softmax = parts.combine = true;
  parts.routerBias = static_cast<bool>(op.getRouterBias());
  if (auto cf = op.getCapacityFactor())
    parts.capacityFactor = cf->convertToDouble();
  r.form = routingForm(op.getRouting(), op.getTraining()) +
           capacityForm(op.getCapacityFactor());
  fillTokenChoice(r, T, D, E, k, x, parts);
  if (op.getSharedW1())
    addShared(r, T, op.getSharedW1(), op.getSharedW2(), op.getSharedGate());
  return r;
}

/// moe.soft_layer and moe.fused_soft_experts have the same operands; the
/// fused form only changes the label.
template <typename SoftOp>
static Row softRow(SoftOp op, StringRef formPrefix) {
  Row r;
  r.layer = label(op);
  Experts x = expertsOf(op.getW1(), op.getW2(), op.getB1(), op.getB2(),
                        op.getActivationAttr());
  Q M = dimOf(op.getInput(), 1), S = dimOf(op.getSlots(), 2);
  Q D = firstKnown({dimOf(op.getInput(), 2), dimOf(op.getSlots(), 0), x.D});
  Q E = firstKnown({dimOf(op.getSlots(), 1), x.E});
  r.form = formPrefix.str() + softForm(S, M);
  fillSoft(r, dimOf(op.getInput(), 0), M, D, E, S, op.getNormalize(),
           /*combine=*/true, x);
  return r;
}

static Row fusedRow(FusedExpertsOp op) {
  Row r;
  r.layer = label(op);
  Experts x = expertsOf(op.getW1(), op.getW2(), op.getB1(), op.getB2(),
                        op.getActivationAttr());
  Q T = firstKnown({dimOf(op.getInput(), 0), dimOf(op.getIndices(), 0)});
  Q D = firstKnown({dimOf(op.getInput(), 1), x.D});
  Q E = Q::of(static_cast<double>(op.getNumExperts()));
  Q k = firstKnown({dimOf(op.getIndices(), 1), dimOf(op.getWeights(), 1)});
  TokenChoiceParts parts;
  parts.combine = true;
  if (auto cf = op.getCapacityFactor())
    parts.capacityFactor = cf->convertToDouble();
  r.form = "fused ";
  traceGate(op.getIndices(), parts, r.form, k);
  r.form += capacityForm(op.getCapacityFactor());
  fillTokenChoice(r, T, D, E, k, x, parts);
  if (Value shared = op.getSharedOutput())
    if (auto expert = shared.getDefiningOp<SharedExpertOp>())
      addShared(r, T, expert.getSharedW1(), expert.getSharedW2(), expert.getSharedGate());
  return r;
}

static Row expertFFNRow(ExpertFFNOp op) {
  Row r;
  r.layer = label(op);
  Experts x = expertsOf(op.getW1(), op.getW2(), op.getB1(), op.getB2(),
                        op.getActivationAttr());
  Value out = op.getOutput();

  if (auto dispatch = op.getRows().getDefiningOp<DispatchOp>()) {
    Q T = firstKnown({dimOf(dispatch.getInput(), 0), dimOf(dispatch.getIndices(), 0)});
    Q D = firstKnown({dimOf(dispatch.getInput(), 1), x.D});
    Q E = Q::of(static_cast<double>(dispatch.getNumExperts()));
    Q k = dimOf(dispatch.getIndices(), 1);
    TokenChoiceParts parts;
    if (auto cf = dispatch.getCapacityFactor())
      parts.capacityFactor = cf->convertToDouble();
    for (Operation *user : out.getUsers())
      if (auto combine = dyn_cast<CombineOp>(user))
        if (combine.getExpertOutput() == out)
          parts.combine = true;
    r.form = "chain ";
    traceGate(dispatch.getIndices(), parts, r.form, k);
    r.form += capacityForm(dispatch.getCapacityFactor());
    fillTokenChoice(r, T, D, E, k, x, parts);
    return r;
  }

  if (auto dispatch = op.getRows().getDefiningOp<SoftDispatchOp>()) {
    Q M = dimOf(dispatch.getInput(), 1), S = dimOf(dispatch.getSlots(), 2);
    Q D = firstKnown({dimOf(dispatch.getInput(), 2), dimOf(dispatch.getSlots(), 0), x.D});
    Q E = firstKnown({dimOf(dispatch.getSlots(), 1), x.E});
    bool combine = false;
    for (Operation *user : out.getUsers())
      if (auto sc = dyn_cast<SoftCombineOp>(user))
        if (sc.getExpertOutput() == out)
          combine = true;
    r.form = "chain " + softForm(S, M);
    fillSoft(r, dimOf(dispatch.getInput(), 0), M, D, E, S,
             dispatch.getNormalize(), combine, x);
    return r;
  }

  // Rows of unknown origin: only the expert FLOPs of the rows it is given.
  r.form = "expert_ffn";
  r.act = x.act;
  r.T = r.kOrSlots = Q::unknown();
  r.D = x.D;
  r.H = x.H;
  r.E = x.E;
  r.router = r.dispatch = Q::na();
  r.experts = dimOf(op.getRows(), 0) * x.rowFlops;
  r.touched = r.bytes = r.params = Q::unknown();
  return r;
}

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

/// Prints `cells` under `headers`, columns padded to their widest cell; the
/// first `numTextCols` columns left-aligned, the others right-aligned.
template <size_t N>
static void printCells(const std::array<const char *, N> &headers, size_t numTextCols,
                       const std::vector<std::array<std::string, N>> &cells,
                       llvm::raw_ostream &os) {
  std::array<size_t, N> width;
  for (size_t c = 0; c < N; ++c) {
    width[c] = std::strlen(headers[c]);
    for (const auto &line : cells)
      width[c] = std::max(width[c], line[c].size());
  }
  auto printLine = [&](auto cellAt) {
    std::string line;
    for (size_t c = 0; c < N; ++c) {
      std::string cell = cellAt(c);
      if (c != 0)
        line += "  ";
      std::string pad(width[c] - cell.size(), ' ');
      line += c < numTextCols ? cell + pad : pad + cell;
    }
    // No trailing blanks (the empty text cells of the total row, "(no MoE
    // layers)" tables).
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    os << line << "\n";
  };
  printLine([&](size_t c) { return std::string(headers[c]); });
  for (const auto &line : cells)
    printLine([&](size_t c) { return line[c]; });
}

static void printTable(ArrayRef<Row> rows, llvm::raw_ostream &os) {
  static const std::array<const char *, 14> headers = {
      "layer",        "form",         "act",
      "T",            "D",            "H",
      "E",            "k|S",          "router FLOPs",
      "expert FLOPs", "disp+comb FLOPs", "experts touched",
      "weight bytes", "params/token"};
  std::vector<std::array<std::string, 14>> cells;
  auto addRow = [&](const Row &r, bool total) {
    auto dim = [&](Q q) { return total ? std::string() : fmtInt(q); };
    cells.push_back({r.layer, r.form, r.act, dim(r.T), dim(r.D), dim(r.H),
                     dim(r.E), dim(r.kOrSlots), fmtInt(r.router),
                     fmtInt(r.experts), fmtInt(r.dispatch),
                     fmtFixed2(r.touched), fmtInt(r.bytes), fmtInt(r.params)});
  };
  for (const Row &r : rows)
    addRow(r, /*total=*/false);
  if (rows.size() > 1) {
    Row total;
    total.layer = "total";
    for (const Row &r : rows) {
      total.router = total.router + r.router;
      total.experts = total.experts + r.experts;
      total.dispatch = total.dispatch + r.dispatch;
      total.touched = total.touched + r.touched;
      total.bytes = total.bytes + r.bytes;
      total.params = total.params + r.params;
    }
    addRow(total, /*total=*/true);
  }
  printCells(headers, 3, cells, os);
  if (rows.empty())
    os << "(no MoE layers)\n";
}

/// The backward of every row (what @f_vjp of --moe-generate-vjp adds for
/// it); a row whose backward is not counted shows "-".
static void printBackwardTable(ArrayRef<Row> rows, llvm::raw_ostream &os) {
  static const std::array<const char *, 7> headers = {
      "layer", "form", "bwd router FLOPs", "bwd expert FLOPs", "bwd disp+comb FLOPs",
      "bwd weight bytes", "saved bytes"};
  std::vector<std::array<std::string, 7>> cells;
  Row total;
  total.layer = "total";
  for (const Row &r : rows) {
    if (!r.differentiable) {
      cells.push_back({r.layer, r.form + " (not counted)", "-", "-", "-", "-", "-"});
      continue;
    }
    cells.push_back({r.layer, r.form, fmtInt(r.bwdRouter), fmtInt(r.bwdExperts),
                     fmtInt(r.bwdDispatch), fmtInt(r.bwdBytes), fmtInt(r.saved)});
    total.bwdRouter = total.bwdRouter + r.bwdRouter;
    total.bwdExperts = total.bwdExperts + r.bwdExperts;
    total.bwdDispatch = total.bwdDispatch + r.bwdDispatch;
    total.bwdBytes = total.bwdBytes + r.bwdBytes;
    total.saved = total.saved + r.saved;
  }
  if (rows.size() > 1)
    cells.push_back({total.layer, "", fmtInt(total.bwdRouter), fmtInt(total.bwdExperts),
                     fmtInt(total.bwdDispatch), fmtInt(total.bwdBytes), fmtInt(total.saved)});
  os << "backward (@f_vjp, docs/spec.md §9):\n";
  printCells(headers, 2, cells, os);
  if (rows.empty())
    os << "(no MoE layers)\n";
}

/// Expert parallelism (--moe-shard-experts): the all-to-all volume of every
/// layer per rank. A rank with T_r rows routes T_r * k rows; under uniform
/// routing (N-1)/N of them go to other ranks: the dispatch sends them
/// (D * sizeof(T) bytes each) and the combine receives their results
/// (D * sizeof of the expert output: f32 for bf16/f16 layers). A rank
/// receives and sends back as much for its own experts. T_r is dynamic in
/// the SPMD IR, so the figures are per token row of the rank.
static void printAllToAll(Operation *root, llvm::raw_ostream &os) {
  bool header = false;
  root->walk([&](ExchangeDispatchOp exchange) {
    FailureOr<int64_t> ranks = lookupGridSize(exchange, exchange.getGridAttr());
    auto dispatch = exchange.getRows().getDefiningOp<DispatchOp>();
    if (failed(ranks) || !dispatch)
      return;
    ExchangeCombineOp combine;
    for (Operation *user : exchange.getCounts().getUsers())
      if (auto c = dyn_cast<ExchangeCombineOp>(user))
        combine = c;
    auto rowsType = exchange.getRows().getType();
    int64_t d = rowsType.getDimSize(1);
    int64_t k = dispatch.getIndices().getType().getDimSize(1);
    int64_t experts = exchange.getCounts().getType().getDimSize(1);
    if (ShapedType::isDynamic(d) || ShapedType::isDynamic(k))
      return;
    int64_t eltIn = rowsType.getElementTypeBitWidth() / 8;
    int64_t eltOut = combine ? combine.getRows().getType().getElementTypeBitWidth() / 8
                             : eltIn;
    double remote = double(k) * double(*ranks - 1) / double(*ranks);
    if (!header) {
      os << "all-to-all per rank and layer (uniform routing; per token row of "
            "the rank; the same again received for the rank's experts):\n";
      header = true;
    }
    std::string loc;
    llvm::raw_string_ostream locOs(loc);
    if (auto file = dyn_cast<FileLineColLoc>(exchange.getLoc()))
      locOs << llvm::sys::path::filename(file.getFilename().getValue()) << ":"
            << file.getLine();
    os << "  " << (loc.empty() ? "layer" : loc) << ": ranks " << *ranks
       << ", experts/rank " << experts / *ranks << ", k " << k << ", D " << d
       << ": dispatch sends " << llvm::format("%.1f", remote * d * eltIn)
       << " B, combine receives " << llvm::format("%.1f", remote * d * eltOut)
       << " B\n";
  });
}

struct MoEPrintCostPass : public moe::impl::MoEPrintCostBase<MoEPrintCostPass> {
  using MoEPrintCostBase::MoEPrintCostBase;
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] on " << getOperation()->getName()
                            << " at " << getOperation()->getLoc() << "\n");
    if (failed(rejectQuantizedLayers(getOperation(), "--moe-print-cost")))
      return signalPassFailure();
    std::vector<Row> rows;
    getOperation()->walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (auto layer = dyn_cast<LayerOp>(op))
        rows.push_back(layerRow(layer));
      else if (auto soft = dyn_cast<SoftLayerOp>(op))
        rows.push_back(softRow(soft, ""));
      else if (auto fused = dyn_cast<FusedExpertsOp>(op))
        rows.push_back(fusedRow(fused));
      else if (auto fusedSoft = dyn_cast<FusedSoftExpertsOp>(op))
        rows.push_back(softRow(fusedSoft, "fused "));
      else if (auto ffn = dyn_cast<ExpertFFNOp>(op))
        rows.push_back(expertFFNRow(ffn));
    });
    printTable(rows, llvm::outs());
    if (backward)
      printBackwardTable(rows, llvm::outs());
    printAllToAll(getOperation(), llvm::outs());
    llvm::outs().flush();
    markAllAnalysesPreserved();
  }
};

} // namespace
