//===- RoutingBuilder.cpp - one token's routing, for every target ---------===//
//
// See RoutingBuilder.h. The order of every floating-point operation here is
// part of the routing's definition (docs/spec.md section 7): the CPU and GPU
// paths get the same bits because they run this code, and the independent
// reference (test/reference) follows the same order.
//
//===----------------------------------------------------------------------===//

#include "lowering/RoutingBuilder.h"

#include "lowering/Philox.h"
#include "lowering/ScalarBuilder.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

#include <cmath>

using namespace mlir;
using namespace mlir::moe;

namespace {

/// Scalar code plus scf loops (the builder of this file only).
class RB : public ScalarBuilder {
public:
  explicit RB(ImplicitLocOpBuilder &b) : ScalarBuilder(b) {}

  using Body = function_ref<SmallVector<Value>(RB &, Value, ValueRange)>;

  SmallVector<Value> forLoop(Value lb, Value ub, ValueRange init, Body body) {
    auto loop = scf::ForOp::create(
        b, lb, ub, idx(1), init,
        [&](OpBuilder &nested, Location loc, Value iv, ValueRange args) {
          ImplicitLocOpBuilder nb(loc, nested);
          RB ne(nb);
          scf::YieldOp::create(nb, body(ne, iv, args));
        });
    return SmallVector<Value>(loop.getResults().begin(), loop.getResults().end());
  }
  void forEach(Value lb, Value ub, function_ref<void(RB &, Value)> body) {
    forLoop(lb, ub, {}, [&](RB &e, Value iv, ValueRange) {
      body(e, iv);
      return SmallVector<Value>{};
    });
  }
  Value lt(Value x, Value y) { return cmpi(arith::CmpIPredicate::slt, x, y); }
  Value ge(Value x, Value y) { return cmpi(arith::CmpIPredicate::sge, x, y); }
  Value eq(Value x, Value y) { return cmpi(arith::CmpIPredicate::eq, x, y); }
};

using ScoreFn = function_ref<Value(RB &, Value)>;
using PickFn = function_ref<SmallVector<Value>(RB &, Value, Value, ValueRange)>;

/// x < y in the order of the top-k selection: NaN is the lowest score,
/// below -inf (docs/spec.md §3: a token whose scores hold NaN still gets k
/// valid experts, by the tie rule among the NaNs).
Value scoreLess(RB &e, Value x, Value y) {
  Value xNaN = e.cmpf(arith::CmpFPredicate::UNO, x, x);
  Value yNaN = e.cmpf(arith::CmpFPredicate::UNO, y, y);
  return e.ori(e.cmpf(arith::CmpFPredicate::OLT, x, y),
               e.andi(xNaN, e.cmpi(arith::CmpIPredicate::eq, yNaN, e.ci1(false))));
}

/// x and y rank alike in that order (equal, or both NaN).
Value scoreEqual(RB &e, Value x, Value y) {
  return e.ori(e.cmpf(arith::CmpFPredicate::OEQ, x, y),
               e.andi(e.cmpf(arith::CmpFPredicate::UNO, x, x),
                      e.cmpf(arith::CmpFPredicate::UNO, y, y)));
}

/// The best `count` of `candidates` by `score` (ties: lower index), among
/// those `allowed` (null: all), in O(candidates * count): pick r is the best
/// of the candidates that come after pick r-1 in (score descending, index
/// ascending) order, NaN ranking below every number (scoreLess); -1 when
/// none is left. `onPick(e, r, expert, state)` returns the new `state`
/// (loop-carried values, initially `init`).
SmallVector<Value> topKBy(RB &e, ScoreFn score, ScoreFn allowed, Value candidates, Value count,
                          ValueRange init, PickFn onPick) {
  Value c0 = e.idx(0);
  SmallVector<Value> start{e.cf32(INFINITY), e.ci32(-1)};
  llvm::append_range(start, init);
  SmallVector<Value> picks =
      e.forLoop(c0, count, start, [&](RB &e, Value r, ValueRange a) {
        Value prevO = a[0], prevI = a[1];
        SmallVector<Value> best = e.forLoop(
            c0, candidates, {e.cf32(-INFINITY), e.ci32(-1)},
            [&](RB &e, Value ex, ValueRange s) {
              Value o = score(e, ex), exI = e.toI32(ex);
              Value after =
                  e.ori(scoreLess(e, o, prevO),
                        e.andi(scoreEqual(e, o, prevO),
                               e.cmpi(arith::CmpIPredicate::sgt, exI, prevI)));
              Value better = e.ori(e.lt(s[1], e.ci32(0)), scoreLess(e, s[0], o));
              Value take = e.andi(after, better);
              if (allowed)
                take = e.andi(take, allowed(e, ex));
              return SmallVector<Value>{e.select(take, o, s[0]), e.select(take, exI, s[1])};
            });
        SmallVector<Value> next{best[0], best[1]};
        llvm::append_range(next, onPick(e, r, best[1], a.drop_front(2)));
        return next;
      });
  return SmallVector<Value>(picks.begin() + 2, picks.end());
}

} // namespace

TokenRoutingKind TokenRoutingKind::get(RoutingAttrInterface routing, bool training,
                                       bool hasSelectionBias) {
  TokenRoutingKind kind;
  auto moesart = dyn_cast<MoesartRoutingAttr>(routing);
  if (isa<DenseRoutingAttr>(routing))
    kind.mode = Mode::Dense;
  else if (!moesart)
    kind.mode = Mode::TopK;
  else if (routing.isSampling(training))
    kind.mode = Mode::MoesartTraining;
  else
    kind.mode = Mode::MoesartInference;
  if (moesart)
    kind.adjust = moesart.getAdjust();
  kind.loss = training && moesart;
  auto topk = dyn_cast<TopKRoutingAttr>(routing);
  if (topk && (!topk.isClassic() || hasSelectionBias)) {
    kind.production = true;
    kind.score = topk.getScore();
    kind.normalize = topk.getNormalize();
    kind.grouped = topk.getGroups() > 1;
    kind.selectionBias = hasSelectionBias;
  }
  return kind;
}

std::pair<Value, Value> mlir::moe::buildPhiloxKey(ImplicitLocOpBuilder &b, Value seed) {
  Type i32 = b.getI32Type();
  Value low = arith::TruncIOp::create(b, i32, seed);
  Value high = arith::TruncIOp::create(
      b, i32, arith::ShRUIOp::create(b, seed, arith::ConstantOp::create(b, b.getI64IntegerAttr(32))));
  return {low, high};
}

Value mlir::moe::buildTokenRouting(ImplicitLocOpBuilder &b, const TokenRoutingKind &kind,
                                   const TokenRoutingValues &v,
                                   const TokenRoutingStorage &io) {
  using Mode = TokenRoutingKind::Mode;
  RB e(b);
  Value c0 = e.idx(0), c1 = e.idx(1);
  Value E = v.experts, K = v.k;
  Value kF = e.toF32(K);

  auto logit = [&](RB &e, Value ex) { return io.logit(e.b, ex); };
  // Softmax statistics with max-subtraction.
  Value maxLogit = e.forLoop(c0, E, {e.cf32(-INFINITY)}, [&](RB &e, Value ex, ValueRange a) {
    return SmallVector<Value>{e.maxf(a[0], logit(e, ex))};
  })[0];
  Value expSum = e.forLoop(c0, E, {e.cf32(0.0)}, [&](RB &e, Value ex, ValueRange a) {
    return SmallVector<Value>{e.addf(a[0], e.routingExp(e.subf(logit(e, ex), maxLogit)))};
  })[0];
  // g = softmax(o).
  auto prob = [&](RB &e, Value ex) {
    return e.divf(e.routingExp(e.subf(logit(e, ex), maxLogit)), expSum);
  };
  auto selected = [&](RB &e, Value i) { return e.toIndex(io.loadIndex(e.b, i)); };
  auto storeIndex = [&](RB &e, Value r, Value ex) { io.storeIndex(e.b, r, ex); };
  auto storeWeight = [&](RB &e, Value i, Value w) { io.storeWeight(e.b, i, w); };
  // The top-K of the logits, in rank order.
  auto topK = [&](RB &e, ValueRange init, PickFn onPick) {
    return topKBy(e, logit, nullptr, E, K, init, onPick);
  };
  auto storePicks = [&](RB &e, Value r, Value ex, ValueRange) {
    storeIndex(e, r, ex);
    return SmallVector<Value>{};
  };
  // w_i = softmax over the selected entries of adjusted(expert_i).
  auto softmaxSelected = [&](RB &e, ScoreFn adjusted) {
    Value mx = e.forLoop(c0, K, {e.cf32(-INFINITY)}, [&](RB &e, Value i, ValueRange a) {
      return SmallVector<Value>{e.maxf(a[0], adjusted(e, selected(e, i)))};
    })[0];
    Value sum = e.forLoop(c0, K, {e.cf32(0.0)}, [&](RB &e, Value i, ValueRange a) {
      Value x = adjusted(e, selected(e, i));
      return SmallVector<Value>{e.addf(a[0], e.routingExp(e.subf(x, mx)))};
    })[0];
    e.forEach(c0, K, [&](RB &e, Value i) {
      Value x = adjusted(e, selected(e, i));
      storeWeight(e, i, e.divf(e.routingExp(e.subf(x, mx)), sum));
    });
  };
  // MOESART's adjusted logit: o_i - log(max(c * (g_i + 1e-10), 1e-10)).
  auto adjustLogit = [&](RB &e, Value ex, Value c) {
    Value g = e.addf(prob(e, ex), e.cf32(1e-10));
    Value clamped = e.maxf(e.mulf(c, g), e.cf32(1e-10));
    return e.subf(logit(e, ex), e.routingLog(clamped));
  };

  switch (kind.mode) {
  case Mode::Dense:
    e.forEach(c0, E, [&](RB &e, Value ex) {
      storeWeight(e, ex, prob(e, ex));
      storeIndex(e, ex, e.toI32(ex));
    });
    break;

  case Mode::TopK:
    if (kind.production) {
      // docs/spec.md 3.1.1: s = softmax(o) or sigmoid(o); choose on
      // c = s + b among the experts of the kept groups; weight with s.
      auto scoreOf = [&](RB &e, Value ex) -> Value {
        if (kind.score == RouterScore::sigmoid)
          return e.divf(e.cf32(1.0),
                        e.addf(e.cf32(1.0),
                               e.routingExp(arith::NegFOp::create(e.b, logit(e, ex)))));
        return prob(e, ex);
      };
      auto chooseOf = [&](RB &e, Value ex) -> Value {
        Value c = scoreOf(e, ex);
        if (kind.selectionBias)
          c = e.addf(c, io.selectionBias(e.b, ex));
        return c;
      };
      ScoreFn allowed = nullptr;
      Value groupSize;
      // Scratch: the group scores at [0, G), the kept flags (1.0 / 0.0) at
      // [G, 2G).
      auto inKeptGroup = [&](RB &e, Value ex) -> Value {
        Value g = arith::DivUIOp::create(e.b, ex, groupSize);
        return e.cmpf(arith::CmpFPredicate::ONE, io.loadScratch(e.b, e.addi(v.groups, g)),
                      e.cf32(0.0));
      };
      if (kind.grouped) {
        Value G = v.groups;
        groupSize = arith::DivUIOp::create(e.b, E, G);
        // A group's score: the sum of its top-min(2, E/G) values of c.
        Value two = e.ge(groupSize, e.idx(2));
        e.forEach(c0, G, [&](RB &e, Value g) {
          Value base = e.muli(g, groupSize);
          SmallVector<Value> top2 = e.forLoop(
              c0, groupSize, {e.cf32(-INFINITY), e.cf32(-INFINITY)},
              [&](RB &e, Value j, ValueRange t) {
                Value c = chooseOf(e, e.addi(base, j));
                Value above = e.cmpf(arith::CmpFPredicate::OGT, c, t[0]);
                Value second = e.select(above, t[0], e.maxf(t[1], c));
                return SmallVector<Value>{e.select(above, c, t[0]), second};
              });
          Value sum = e.select(two, e.addf(top2[0], top2[1]), top2[0]);
          io.storeScratch(e.b, g, sum);
          io.storeScratch(e.b, e.addi(G, g), e.cf32(0.0));
        });
        // The kept groups: the best ones by score (ties: lower index).
        topKBy(
            e, [&](RB &e, Value g) { return io.loadScratch(e.b, g); }, nullptr, G,
            v.keptGroups, {}, [&](RB &e, Value, Value g, ValueRange) {
              Value at = e.toIndex(e.select(e.lt(g, e.ci32(0)), e.ci32(0), g));
              io.storeScratch(e.b, e.addi(G, at), e.cf32(1.0));
              return SmallVector<Value>{};
            });
        allowed = inKeptGroup;
      }
      // S_t: the top-K of c among the choosable experts (-1 where fewer).
      topKBy(e, chooseOf, allowed, E, K, {}, storePicks);
      // w_i = s_i (/ (sum_S s + 1e-20) with normalize) * scale.
      auto pickedScore = [&](RB &e, Value i) {
        Value ex = io.loadIndex(e.b, i);
        Value valid = e.ge(ex, e.ci32(0));
        Value at = e.toIndex(e.select(valid, ex, e.ci32(0)));
        return e.select(valid, scoreOf(e, at), e.cf32(0.0));
      };
      Value denom = e.cf32(1.0);
      if (kind.normalize) {
        Value sum = e.forLoop(c0, K, {e.cf32(0.0)}, [&](RB &e, Value i, ValueRange a) {
          return SmallVector<Value>{e.addf(a[0], pickedScore(e, i))};
        })[0];
        denom = e.addf(sum, e.cf32(1e-20));
      }
      e.forEach(c0, K, [&](RB &e, Value i) {
        storeWeight(e, i, e.mulf(e.divf(pickedScore(e, i), denom), v.scale));
      });
      break;
    }
    // Top-k in rank order, softmax over the selected logits.
    topK(e, {}, storePicks);
    softmaxSelected(e, logit);
    break;

  case Mode::MoesartInference:
    topK(e, {}, storePicks);
    softmaxSelected(e, [&](RB &e, Value ex) { return adjustLogit(e, ex, kF); });
    break;

  case Mode::MoesartTraining: {
    // K draws without replacement from g (scratch: the renormalized p).
    e.forEach(c0, E, [&](RB &e, Value ex) { io.storeScratch(e.b, ex, prob(e, ex)); });
    Value zeroI = e.ci32(0), minus1 = e.ci32(-1);
    auto uniform = [&](RB &e, Value r) {
      std::array<Value, 4> out =
          buildPhilox4x32x10(e.b, e.b.getLoc(), {v.key0, v.key1}, {v.token, r, zeroI, zeroI});
      return buildPhiloxUniform(e.b, e.b.getLoc(), out[0]);
    };
    e.forEach(c0, K, [&](RB &e, Value r) {
      Value u = uniform(e, e.toI32(r));
      // The first i with u < cumsum(p)_i, and the last i with p_i > 0.
      SmallVector<Value> scan = e.forLoop(
          c0, E, {e.cf32(0.0), minus1, minus1}, [&](RB &e, Value ex, ValueRange s) {
            Value pe = io.loadScratch(e.b, ex);
            Value cum = e.addf(s[0], pe);
            Value exI = e.toI32(ex);
            Value hit = e.andi(e.lt(s[1], zeroI), e.cmpf(arith::CmpFPredicate::OLT, u, cum));
            Value positive = e.cmpf(arith::CmpFPredicate::OGT, pe, e.cf32(0.0));
            return SmallVector<Value>{cum, e.select(hit, exI, s[1]),
                                      e.select(positive, exI, s[2])};
          });
      Value found = scan[1], last = scan[2];
      // If no expert has p > 0 left: the lowest index not drawn yet.
      Value firstFree = e.forLoop(c0, E, {minus1}, [&](RB &e, Value ex, ValueRange s) {
        Value exI = e.toI32(ex);
        Value taken = e.forLoop(c0, r, {e.ci1(false)}, [&](RB &e, Value j, ValueRange q) {
          return SmallVector<Value>{e.ori(q[0], e.eq(io.loadIndex(e.b, j), exI))};
        })[0];
        Value take = e.andi(e.lt(s[0], zeroI), arith::XOrIOp::create(e.b, taken, e.ci1(true)));
        return SmallVector<Value>{e.select(take, exI, s[0])};
      })[0];
      Value pick =
          e.select(e.ge(found, zeroI), found, e.select(e.ge(last, zeroI), last, firstFree));
      storeIndex(e, r, pick);
      io.storeScratch(e.b, e.toIndex(pick), e.cf32(0.0));
      Value sum = e.forLoop(c0, E, {e.cf32(0.0)}, [&](RB &e, Value ex, ValueRange s) {
        return SmallVector<Value>{e.addf(s[0], io.loadScratch(e.b, ex))};
      })[0];
      Value denom = e.addf(sum, e.cf32(1e-10));
      e.forEach(c0, E, [&](RB &e, Value ex) {
        io.storeScratch(e.b, ex, e.divf(io.loadScratch(e.b, ex), denom));
      });
    });
    switch (kind.adjust) {
    case MoesartAdjust::small_random: {
      // j = the floor(u*K)-th member of S_t in ascending expert index.
      Value u = uniform(e, e.toI32(K));
      Value scaled = arith::FPToSIOp::create(e.b, e.b.getI64Type(), e.mulf(u, kF));
      Value jr = arith::MinSIOp::create(e.b, e.toIndex(scaled), e.subi(K, c1));
      Value j = e.forLoop(c0, K, {minus1}, [&](RB &e, Value a, ValueRange s) {
        Value ea = io.loadIndex(e.b, a);
        Value asc = e.forLoop(c0, K, {c0}, [&](RB &e, Value bb, ValueRange q) {
          Value less = e.lt(io.loadIndex(e.b, bb), ea);
          return SmallVector<Value>{e.select(less, e.addi(q[0], c1), q[0])};
        })[0];
        return SmallVector<Value>{e.select(e.eq(asc, jr), ea, s[0])};
      })[0];
      Value km1 = e.subf(kF, e.cf32(1.0));
      softmaxSelected(e, [&](RB &e, Value ex) {
        return e.select(e.eq(e.toI32(ex), j), logit(e, ex), adjustLogit(e, ex, km1));
      });
      break;
    }
    case MoesartAdjust::zero:
      softmaxSelected(e, [&](RB &e, Value ex) { return adjustLogit(e, ex, kF); });
      break;
    case MoesartAdjust::large: {
      Value sum = e.forLoop(c0, K, {e.cf32(0.0)}, [&](RB &e, Value i, ValueRange a) {
        return SmallVector<Value>{e.addf(a[0], prob(e, selected(e, i)))};
      })[0];
      e.forEach(c0, K, [&](RB &e, Value i) {
        storeWeight(e, i, e.divf(prob(e, selected(e, i)), sum));
      });
      break;
    }
    }
    break;
  }
  }

  if (!kind.loss)
    return Value();
  // Trimmed lasso: 1 - (sum of the K largest g_t,i), summed in rank order.
  Value top = topK(e, {e.cf32(0.0)}, [&](RB &e, Value, Value ex, ValueRange a) {
    return SmallVector<Value>{e.addf(a[0], prob(e, e.toIndex(ex)))};
  })[0];
  return e.subf(e.cf32(1.0), top);
}

//===----------------------------------------------------------------------===//
// The backward of one token's routing
//===----------------------------------------------------------------------===//
//
// Every routing's weights are functions of the logits o directly and through
// g = softmax(o) (or s = sigmoid(o)). With the choices fixed, the cotangent
// of o is
//
//   do_j = direct_j + g_j (dg_j - sum_i g_i dg_i)
//
// where direct_j collects the paths that do not go through g and dg_j those
// that do (the softmax's backward, applied once to the sum of them). Per
// entry r of S_t (expert i = S_t[r], weight cotangent dw_r):
//  - softmax over S of a (adjusted) logit õ (classic top-k, MOESART's zero
//    and small_random, MOESART inference): dõ_r = w_r (dw_r - sum_q w_q dw_q);
//    õ_i = o_i - log(max(c (g_i + 1e-10), 1e-10)) adds dõ_r to direct_i and
//    -dõ_r / (g_i + 1e-10) to dg_i (where the max takes the first operand);
//    small_random's j keeps õ_j = o_j;
//  - the production router w_i = s_i / Z * scale (Z = sum_S s + 1e-20 with
//    normalize, else 1): ds_i = scale (dw_i - sum_q w_q dw_q / scale) / Z;
//    softmax scores: dg_i = ds_i; sigmoid scores: direct_i = ds_i s_i (1 - s_i);
//  - dense (w = g): dg_i = dw_i; MOESART large (w_i = g_i / sum_S g):
//    dg_i = (dw_i - sum_q w_q dw_q) / sum_S g;
//  - the trimmed-lasso term 1 - sum of the K largest g: dg_i -= lossGrad
//    for those K experts.

void mlir::moe::buildTokenRoutingGrad(ImplicitLocOpBuilder &b, const TokenRoutingKind &kind,
                                      const TokenRoutingValues &v,
                                      const TokenRoutingGradStorage &io) {
  using Mode = TokenRoutingKind::Mode;
  RB e(b);
  Value c0 = e.idx(0), c1 = e.idx(1);
  Value E = v.experts, K = v.k;
  Value kF = e.toF32(K);

  auto logit = [&](RB &e, Value ex) { return io.logit(e.b, ex); };
  Value maxLogit = e.forLoop(c0, E, {e.cf32(-INFINITY)}, [&](RB &e, Value ex, ValueRange a) {
    return SmallVector<Value>{e.maxf(a[0], logit(e, ex))};
  })[0];
  Value expSum = e.forLoop(c0, E, {e.cf32(0.0)}, [&](RB &e, Value ex, ValueRange a) {
    return SmallVector<Value>{e.addf(a[0], e.routingExp(e.subf(logit(e, ex), maxLogit)))};
  })[0];
  auto prob = [&](RB &e, Value ex) {
    return e.divf(e.routingExp(e.subf(logit(e, ex), maxLogit)), expSum);
  };
  // Entry r's expert as an index (0 for an empty entry) and whether it is one.
  auto validOf = [&](RB &e, Value r) { return e.ge(io.loadIndex(e.b, r), e.ci32(0)); };
  auto expertOf = [&](RB &e, Value r) {
    Value ex = io.loadIndex(e.b, r);
    return e.toIndex(e.select(e.ge(ex, e.ci32(0)), ex, e.ci32(0)));
  };
  auto addGrad = [&](RB &e, Value ex, Value x) {
    io.storeGrad(e.b, ex, e.addf(io.loadGrad(e.b, ex), x));
  };
  e.forEach(c0, E, [&](RB &e, Value ex) { io.storeGrad(e.b, ex, e.cf32(0.0)); });

  // Per entry: (direct, dg), given the entry, its expert, g of it and the
  // sum over S of w dw. Adds both and returns g * dg for the softmax's sum.
  using EntryFn = function_ref<std::pair<Value, Value>(RB &, Value r, Value ex, Value g)>;
  auto accumulateEntries = [&](RB &e, EntryFn entry) {
    return e.forLoop(c0, K, {e.cf32(0.0)}, [&](RB &e, Value r, ValueRange a) {
      Value valid = validOf(e, r);
      Value ex = expertOf(e, r);
      Value g = prob(e, ex);
      auto [direct, dg] = entry(e, r, ex, g);
      Value zero = e.cf32(0.0);
      Value gdg = dg ? e.select(valid, e.mulf(g, dg), zero) : zero;
      Value add = direct ? e.select(valid, direct, zero) : zero;
      addGrad(e, ex, e.addf(add, gdg));
      return SmallVector<Value>{e.addf(a[0], gdg)};
    })[0];
  };
  // w_r = softmax over S of adjusted(r, ex): recomputed, then sum_q w_q dw_q.
  auto selectedSoftmax = [&](RB &e, function_ref<Value(RB &, Value, Value)> adjusted) {
    Value mx = e.forLoop(c0, K, {e.cf32(-INFINITY)}, [&](RB &e, Value r, ValueRange a) {
      return SmallVector<Value>{e.maxf(a[0], adjusted(e, r, expertOf(e, r)))};
    })[0];
    Value sum = e.forLoop(c0, K, {e.cf32(0.0)}, [&](RB &e, Value r, ValueRange a) {
      Value x = adjusted(e, r, expertOf(e, r));
      return SmallVector<Value>{e.addf(a[0], e.routingExp(e.subf(x, mx)))};
    })[0];
    return std::make_pair(mx, sum);
  };
  auto weightOf = [&](RB &e, Value x, Value mx, Value sum) {
    return e.divf(e.routingExp(e.subf(x, mx)), sum);
  };
  auto weightedSum = [&](RB &e, function_ref<Value(RB &, Value r)> weight) {
    return e.forLoop(c0, K, {e.cf32(0.0)}, [&](RB &e, Value r, ValueRange a) {
      Value w = e.select(validOf(e, r), weight(e, r), e.cf32(0.0));
      return SmallVector<Value>{e.addf(a[0], e.mulf(w, io.weightGrad(e.b, r)))};
    })[0];
  };

  // The adjusted-softmax routings: õ = o - log(max(c (g + 1e-10), 1e-10))
  // for the entries `adjustedEntry` says (all but small_random's j).
  auto adjustedSoftmax = [&](RB &e, Value c, function_ref<Value(RB &, Value ex)> adjustedEntry) {
    auto adjusted = [&](RB &e, Value, Value ex) -> Value {
      Value g = e.addf(prob(e, ex), e.cf32(1e-10));
      Value clamped = e.maxf(e.mulf(c, g), e.cf32(1e-10));
      Value adj = e.subf(logit(e, ex), e.routingLog(clamped));
      return adjustedEntry ? e.select(adjustedEntry(e, ex), adj, logit(e, ex)) : adj;
    };
    // Named values, not structured bindings: the lambdas below capture them
    // (capturing a structured binding is C++20).
    std::pair<Value, Value> softmax = selectedSoftmax(e, adjusted);
    Value mx = softmax.first, sum = softmax.second;
    Value ws = weightedSum(e, [&](RB &e, Value r) {
      return weightOf(e, adjusted(e, r, expertOf(e, r)), mx, sum);
    });
    return accumulateEntries(e, [&](RB &e, Value r, Value ex, Value g) {
      Value w = weightOf(e, adjusted(e, r, ex), mx, sum);
      Value dAdj = e.mulf(w, e.subf(io.weightGrad(e.b, r), ws));
      Value gp = e.addf(g, e.cf32(1e-10));
      Value taken = e.cmpf(arith::CmpFPredicate::OGT, e.mulf(c, gp), e.cf32(1e-10));
      if (adjustedEntry)
        taken = e.andi(taken, adjustedEntry(e, ex));
      Value dg = e.select(taken, e.divf(arith::NegFOp::create(e.b, dAdj), gp), e.cf32(0.0));
      return std::make_pair(dAdj, dg);
    });
  };

  Value gdgSum;
  switch (kind.mode) {
  case Mode::Dense:
    gdgSum = accumulateEntries(e, [&](RB &e, Value r, Value, Value) {
      return std::make_pair(Value(), io.weightGrad(e.b, r));
    });
    break;

  case Mode::TopK:
    if (kind.production) {
      bool sigmoid = kind.score == RouterScore::sigmoid;
      auto scoreOf = [&](RB &e, Value ex) -> Value {
        if (sigmoid)
          return e.divf(e.cf32(1.0),
                        e.addf(e.cf32(1.0),
                               e.routingExp(arith::NegFOp::create(e.b, logit(e, ex)))));
        return prob(e, ex);
      };
      Value denom = e.cf32(1.0);
      if (kind.normalize) {
        Value sum = e.forLoop(c0, K, {e.cf32(0.0)}, [&](RB &e, Value r, ValueRange a) {
          Value s = e.select(validOf(e, r), scoreOf(e, expertOf(e, r)), e.cf32(0.0));
          return SmallVector<Value>{e.addf(a[0], s)};
        })[0];
        denom = e.addf(sum, e.cf32(1e-20));
      }
      // sum_q (s_q / Z) dw_q: the normalization's share (0 without it).
      Value ws = kind.normalize ? weightedSum(e, [&](RB &e, Value r) {
        return e.divf(scoreOf(e, expertOf(e, r)), denom);
      })
                                : e.cf32(0.0);
      gdgSum = accumulateEntries(e, [&](RB &e, Value r, Value ex, Value) {
        Value ds = e.divf(e.mulf(v.scale, e.subf(io.weightGrad(e.b, r), ws)), denom);
        if (!sigmoid)
          return std::make_pair(Value(), ds);
        Value s = scoreOf(e, ex);
        return std::make_pair(e.mulf(ds, e.mulf(s, e.subf(e.cf32(1.0), s))), Value());
      });
      break;
    }
    {
      // Classic: softmax over the selected logits.
      auto plain = [&](RB &e, Value, Value ex) { return logit(e, ex); };
      std::pair<Value, Value> softmax = selectedSoftmax(e, plain);
      Value mx = softmax.first, sum = softmax.second;
      Value ws = weightedSum(e, [&](RB &e, Value r) {
        return weightOf(e, logit(e, expertOf(e, r)), mx, sum);
      });
      gdgSum = accumulateEntries(e, [&](RB &e, Value r, Value ex, Value) {
        Value w = weightOf(e, logit(e, ex), mx, sum);
        return std::make_pair(e.mulf(w, e.subf(io.weightGrad(e.b, r), ws)), Value());
      });
    }
    break;

  case Mode::MoesartInference:
    gdgSum = adjustedSoftmax(e, kF, nullptr);
    break;

  case Mode::MoesartTraining:
    switch (kind.adjust) {
    case MoesartAdjust::small_random: {
      // j exactly as the forward drew it (buildTokenRouting).
      Value zeroI = e.ci32(0);
      std::array<Value, 4> out = buildPhilox4x32x10(e.b, e.b.getLoc(), {v.key0, v.key1},
                                                    {v.token, e.toI32(K), zeroI, zeroI});
      Value u = buildPhiloxUniform(e.b, e.b.getLoc(), out[0]);
      Value scaled = arith::FPToSIOp::create(e.b, e.b.getI64Type(), e.mulf(u, kF));
      Value jr = arith::MinSIOp::create(e.b, e.toIndex(scaled), e.subi(K, c1));
      Value j = e.forLoop(c0, K, {e.ci32(-1)}, [&](RB &e, Value a, ValueRange s) {
        Value ea = io.loadIndex(e.b, a);
        Value asc = e.forLoop(c0, K, {c0}, [&](RB &e, Value bb, ValueRange q) {
          Value less = e.lt(io.loadIndex(e.b, bb), ea);
          return SmallVector<Value>{e.select(less, e.addi(q[0], c1), q[0])};
        })[0];
        return SmallVector<Value>{e.select(e.eq(asc, jr), ea, s[0])};
      })[0];
      Value km1 = e.subf(kF, e.cf32(1.0));
      gdgSum = adjustedSoftmax(e, km1, [&](RB &e, Value ex) {
        return arith::XOrIOp::create(e.b, e.eq(e.toI32(ex), j), e.ci1(true));
      });
      break;
    }
    case MoesartAdjust::zero:
      gdgSum = adjustedSoftmax(e, kF, nullptr);
      break;
    case MoesartAdjust::large: {
      Value sumS = e.forLoop(c0, K, {e.cf32(0.0)}, [&](RB &e, Value r, ValueRange a) {
        return SmallVector<Value>{e.addf(a[0], prob(e, expertOf(e, r)))};
      })[0];
      Value ws = weightedSum(e, [&](RB &e, Value r) {
        return e.divf(prob(e, expertOf(e, r)), sumS);
      });
      gdgSum = accumulateEntries(e, [&](RB &e, Value r, Value, Value) {
        return std::make_pair(Value(), e.divf(e.subf(io.weightGrad(e.b, r), ws), sumS));
      });
      break;
    }
    }
    break;
  }

  if (kind.loss) {
    // The K largest g (the forward's top-K of o, same ties) each get
    // -lossGrad in dg.
    Value minus = arith::NegFOp::create(e.b, v.lossGrad);
    gdgSum = topKBy(e, logit, nullptr, E, K, {gdgSum},
                    [&](RB &e, Value, Value ex, ValueRange a) {
                      Value at = e.toIndex(ex);
                      Value gdg = e.mulf(prob(e, at), minus);
                      addGrad(e, at, gdg);
                      return SmallVector<Value>{e.addf(a[0], gdg)};
                    })[0];
  }
  // The softmax's backward: do_j -= g_j * sum_i g_i dg_i.
  if (kind.mode != Mode::TopK || (kind.production && kind.score == RouterScore::softmax) ||
      kind.loss)
    e.forEach(c0, E, [&](RB &e, Value ex) {
      addGrad(e, ex, arith::NegFOp::create(e.b, e.mulf(prob(e, ex), gdgSum)));
    });
}

void mlir::moe::buildTokenRoutingGrad(ImplicitLocOpBuilder &b, const TokenRoutingKind &kind,
                                      const TokenRoutingValues &values,
                                      const TokenRowAccess &rows, Value logits, Value indices,
                                      Value weightsGrad, Value logitsGrad) {
  auto logit = [&](ImplicitLocOpBuilder &b, Value ex) {
    return RB(b).widenF32(rows.load(b, logits, values.experts, ex));
  };
  auto loadIndex = [&](ImplicitLocOpBuilder &b, Value r) { return rows.load(b, indices, values.k, r); };
  auto weightGrad = [&](ImplicitLocOpBuilder &b, Value r) {
    return rows.load(b, weightsGrad, values.k, r);
  };
  auto loadGrad = [&](ImplicitLocOpBuilder &b, Value ex) {
    return rows.load(b, logitsGrad, values.experts, ex);
  };
  auto storeGrad = [&](ImplicitLocOpBuilder &b, Value ex, Value v) {
    rows.store(b, v, logitsGrad, values.experts, ex);
  };
  buildTokenRoutingGrad(b, kind, values,
                        TokenRoutingGradStorage{logit, loadIndex, weightGrad, loadGrad, storeGrad});
}
