//===- RoutingBuilder.h - one token's routing, for every target -*- C++ -*-===//
//
// The one definition, in IR, of what the gate computes for one token
// (docs/spec.md section 3.1 and 3.1.1 for the routers, 3.3 for MOESART):
// softmax statistics, top-k with its tie rule, the production routers'
// scores, group limits and weights, MOESART's draws and adjustments, and the
// trimmed-lasso term. The CPU lowering (ConvertMoEToCPU.cpp, one token per
// iteration of an scf.forall) and the GPU gate kernel (gpu/Kernels.cpp, one
// token per thread) both call buildTokenRouting, each with its own storage:
// docs/spec.md section 7 asks for one implementation of each piece of
// numerics, so the two paths choose the same experts with the same f32 bits.
//
// The builder emits scalar arith/math/scf code only; every load and store of
// the token's data goes through the TokenRoutingStorage callbacks, so the
// caller decides the layout (2-D memrefs on the CPU, flat buffers on the GPU).
//
//===----------------------------------------------------------------------===//
#ifndef MOE_LOWERING_ROUTINGBUILDER_H
#define MOE_LOWERING_ROUTINGBUILDER_H

#include "dialect/MoEAttrs.h"

#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir {
namespace moe {

/// The compile-time part of one token's routing.
struct TokenRoutingKind {
  enum class Mode {
    Dense,            ///< every expert, weight = softmax (K == E)
    TopK,             ///< #moe.top_k (classic, or production below)
    MoesartInference, ///< #moe.moesart without sampling: top-k, adjusted softmax
    MoesartTraining,  ///< #moe.moesart sampling: K draws without replacement
  };
  Mode mode = Mode::TopK;
  /// MoesartTraining: the weight adjustment.
  MoesartAdjust adjust = MoesartAdjust::zero;
  /// TopK: the production router of docs/spec.md 3.1.1 (parameters that are
  /// not classic, or a selection bias): choose on c = s + b among the experts
  /// of the kept groups, weight with s.
  bool production = false;
  RouterScore score = RouterScore::softmax;
  bool normalize = true;
  bool grouped = false;       ///< groups > 1
  bool selectionBias = false; ///< the selection bias b
  /// Compute the token's trimmed-lasso term 1 - (sum of the K largest g).
  bool loss = false;

  /// Whether the token needs f32 scratch (TokenRoutingStorage::loadScratch):
  /// E values for MOESART's draws, 2 * G for the grouped production router.
  bool needsScratch() const { return mode == Mode::MoesartTraining || (production && grouped); }

  /// The routing kernel variant of a gate with `routing` (in training mode
  /// when `training`; `hasSelectionBias`: it has a selection_bias operand):
  /// the one mapping from routing attributes to kernels, for every target.
  /// A #moe.top_k that is not classic, or that has a selection bias, is the
  /// production router; `loss` is set for MOESART in training mode (its
  /// trimmed-lasso term).
  static TokenRoutingKind get(RoutingAttrInterface routing, bool training,
                              bool hasSelectionBias);
};

/// The Philox4x32-10 key of a MOESART seed (docs/spec.md §3.1): the low and
/// the high 32-bit word of the i64 `seed`, as i32 values.
std::pair<Value, Value> buildPhiloxKey(ImplicitLocOpBuilder &b, Value seed);

/// Run-time values of the routing (index type unless stated).
struct TokenRoutingValues {
  Value experts;    ///< E
  Value k;          ///< K (experts per token; E for Dense)
  Value groups;     ///< production && grouped: G
  Value keptGroups; ///< production && grouped: the kept groups
  Value scale;      ///< production: f32 routed scaling factor
  Value key0, key1; ///< MoesartTraining: i32 Philox key (the seed's halves)
  Value token;      ///< MoesartTraining: i32 Philox counter of this token
  /// buildTokenRoutingGrad with kind.loss: the f32 cotangent of this token's
  /// trimmed-lasso term, lambda / T times the aux loss's cotangent.
  Value lossGrad;
};

/// Where the token's data lives. Every callback builds at the builder's
/// insertion point; indices are `index` values.
struct TokenRoutingStorage {
  /// The f32 logit of expert `ex`.
  function_ref<Value(ImplicitLocOpBuilder &, Value ex)> logit;
  /// The selection bias of expert `ex`, as f32 (production with a bias).
  function_ref<Value(ImplicitLocOpBuilder &, Value ex)> selectionBias;
  /// The i32 expert index of entry `r` of the token's row (as stored).
  function_ref<Value(ImplicitLocOpBuilder &, Value r)> loadIndex;
  function_ref<void(ImplicitLocOpBuilder &, Value r, Value expert)> storeIndex;
  /// Stores the f32 weight of entry `i` of the token's row.
  function_ref<void(ImplicitLocOpBuilder &, Value i, Value weight)> storeWeight;
  /// The token's f32 scratch (TokenRoutingKind::needsScratch): E values for
  /// MOESART training, 2 * G for the grouped production router.
  function_ref<Value(ImplicitLocOpBuilder &, Value i)> loadScratch;
  function_ref<void(ImplicitLocOpBuilder &, Value i, Value v)> storeScratch;
};

/// Emits the routing of one token: its K expert indices and weights through
/// `storage`. Returns the token's trimmed-lasso term (f32) when `kind.loss`,
/// a null Value otherwise.
Value buildTokenRouting(ImplicitLocOpBuilder &b, const TokenRoutingKind &kind,
                        const TokenRoutingValues &values, const TokenRoutingStorage &storage);

/// Where the backward of one token's routing reads and writes.
struct TokenRoutingGradStorage {
  /// The f32 logit of expert `ex` (the forward's).
  function_ref<Value(ImplicitLocOpBuilder &, Value ex)> logit;
  /// The i32 expert of entry `r`, as the forward chose it (-1: none).
  function_ref<Value(ImplicitLocOpBuilder &, Value r)> loadIndex;
  /// The f32 cotangent of the weight of entry `r`.
  function_ref<Value(ImplicitLocOpBuilder &, Value r)> weightGrad;
  /// The f32 cotangent of logit `ex` being built (read and written).
  function_ref<Value(ImplicitLocOpBuilder &, Value ex)> loadGrad;
  function_ref<void(ImplicitLocOpBuilder &, Value ex, Value v)> storeGrad;
};

/// Emits the backward of one token's routing (docs/spec.md §9): the
/// cotangent of its E logits from the cotangents of its K weights (and,
/// with kind.loss, of its trimmed-lasso term, values.lossGrad), the
/// forward's choices held fixed: S_t as `loadIndex` returns it, MOESART's j
/// recomputed from the same Philox draw (values.key0/key1/token), the
/// trimmed lasso's K largest g with the forward's tie rule. The weights are
/// recomputed with the forward's f32 operations.
void buildTokenRoutingGrad(ImplicitLocOpBuilder &b, const TokenRoutingKind &kind,
                           const TokenRoutingValues &values,
                           const TokenRoutingGradStorage &storage);

/// How a target addresses the token's row of a row-major [T, width] buffer:
/// `load(b, buf, width, col)` reads buf[token, col], `store(b, v, buf, width,
/// col)` writes it (width is E or K, index).
struct TokenRowAccess {
  function_ref<Value(ImplicitLocOpBuilder &, Value buf, Value width, Value col)> load;
  function_ref<void(ImplicitLocOpBuilder &, Value v, Value buf, Value width, Value col)> store;
};

/// buildTokenRoutingGrad over the gate_grad op's buffers, each indexed by
/// (token, column) through `rows`: `logits` [T, E] (any float type, read as
/// f32), `indices` [T, K] i32, `weightsGrad` [T, K] f32 and `logitsGrad`
/// [T, E] f32 (read and written).
void buildTokenRoutingGrad(ImplicitLocOpBuilder &b, const TokenRoutingKind &kind,
                           const TokenRoutingValues &values, const TokenRowAccess &rows,
                           Value logits, Value indices, Value weightsGrad, Value logitsGrad);

} // namespace moe
} // namespace mlir

#endif // MOE_LOWERING_ROUTINGBUILDER_H
