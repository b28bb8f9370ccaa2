//===- ConvertSpmdToMPI.cpp - expert-parallel exchanges -> mpi ------------===//
//
// --convert-moe-spmd-to-mpi, a pass pipeline of three stages (see
// buildSpmdToMPIPipeline below and Passes.td):
//   1. --moe-lower-spmd-exchanges: moe.exchange_dispatch /
//      moe.exchange_combine (ragged all-to-all, which no upstream conversion
//      covers) become blocking mpi.send / mpi.recv of row ranges;
//   2. upstream's --convert-shard-to-mpi: the shard dialect ops;
//   3. --moe-finish-spmd-to-mpi: the leftover check, the grids erased,
//      comm_split replaced by the world, the MPI ABI as a DLTI entry.
// Also --moe-fix-openmpi-symbols (after --convert-to-llvm).
//
//===----------------------------------------------------------------------===//

#include "lowering/mpi/Passes.h"

#include "dialect/MoESpmdOps.h"

#include "mlir/Conversion/ShardToMPI/ShardToMPI.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOELOWERSPMDEXCHANGES
#define GEN_PASS_DEF_MOEFINISHSPMDTOMPI
#define GEN_PASS_DEF_MOEFIXOPENMPISYMBOLS
#include "lowering/mpi/Passes.h.inc"

// The generated registration of every pass of Passes.td, out of the way of
// registerMoEMPIPasses() below (which adds the pipeline).
namespace generated {
#define GEN_PASS_REGISTRATION
#include "lowering/mpi/Passes.h.inc"
} // namespace generated
} // namespace mlir::moe

#include "llvm/Support/Debug.h"

// The passes of this file log under one debug type, each naming itself.
#define DEBUG_TYPE "convert-moe-spmd-to-mpi"

using namespace mlir;
using namespace mlir::moe;

namespace {

/// Upstream's mpi ops declare no memory effects; the buffer deallocation
/// pipeline (which runs after this lowering in --moe-cpu-pipeline) refuses
/// ops with memref operands and unknown effects. These external models say
/// what the MPI calls do: send reads its buffer, recv writes its buffer,
/// allreduce reads one and writes the other.
/// The communication itself: every MPI call writes it, so none is dead
/// (a send writes no memory of this process) and none moves past another.
struct CommunicationResource
    : public SideEffects::Resource::Base<CommunicationResource> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CommunicationResource)
  StringRef getName() override { return "moe.mpi-communication"; }
};

template <typename Op, bool writes>
struct BufferEffects
    : public MemoryEffectOpInterface::ExternalModel<BufferEffects<Op, writes>, Op> {
  void getEffects(Operation *op,
                  SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
                      &effects) const {
    effects.emplace_back(MemoryEffects::Write::get(),
                         CommunicationResource::get());
    OpOperand &ref = op->getOpOperand(0);
    if (writes)
      effects.emplace_back(MemoryEffects::Write::get(), &ref,
                           SideEffects::DefaultResource::get());
    else
      effects.emplace_back(MemoryEffects::Read::get(), &ref,
                           SideEffects::DefaultResource::get());
  }
};

struct AllReduceEffects
    : public MemoryEffectOpInterface::ExternalModel<AllReduceEffects, mpi::AllReduceOp> {
  void getEffects(Operation *op,
                  SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
                      &effects) const {
    effects.emplace_back(MemoryEffects::Write::get(),
                         CommunicationResource::get());
    effects.emplace_back(MemoryEffects::Read::get(), &op->getOpOperand(0),
                         SideEffects::DefaultResource::get());
    effects.emplace_back(MemoryEffects::Write::get(), &op->getOpOperand(1),
                         SideEffects::DefaultResource::get());
  }
};

/// Emits the exchange of one op at tensor level. Notation: N ranks, E
/// experts, L = E/N per rank, `me` the calling rank; counts[q, e] rows of
/// rank q for expert e; offsets[e] the first dispatched row of expert e.
struct ExchangeEmitter {
  ImplicitLocOpBuilder &b;
  int64_t ranks, experts, local;
  Value me, counts, offsets, comm, tag;

  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, v); }
  Value toIndex(Value i32) {
    return arith::IndexCastOp::create(b, b.getIndexType(), i32);
  }
  Value count(Value q, Value e) {
    return toIndex(tensor::ExtractOp::create(b, counts, ValueRange{q, e}));
  }
  Value offset(Value e) {
    return toIndex(tensor::ExtractOp::create(b, offsets, ValueRange{e}));
  }
  /// sum_{q in [0, qEnd)} count(q, e).
  Value sumCounts(Value qEnd, Value e) {
    auto loop = scf::ForOp::create(b, idx(0), qEnd, idx(1), ValueRange{idx(0)},
                                   [&](OpBuilder &ob, Location loc, Value q,
                                       ValueRange acc) {
                                     ImplicitLocOpBuilder lb(loc, ob);
                                     ExchangeEmitter inner{lb, ranks, experts, local,
                                                           me, counts, offsets, comm, tag};
                                     Value s = arith::AddIOp::create(
                                         lb, acc[0], inner.count(q, e));
                                     scf::YieldOp::create(lb, s);
                                   });
    return loop.getResult(0);
  }
  /// First row of chunk (source q, local expert l) in the received layout
  /// of rank `me`: experts of `me` in order, inside each the source ranks.
  Value receivedRow(Value l, Value q) {
    Value first = arith::MulIOp::create(b, me, idx(local));
    auto loop = scf::ForOp::create(b, idx(0), l, idx(1), ValueRange{idx(0)},
                                   [&](OpBuilder &ob, Location loc, Value lp,
                                       ValueRange acc) {
                                     ImplicitLocOpBuilder lb(loc, ob);
                                     ExchangeEmitter inner{lb, ranks, experts, local,
                                                           me, counts, offsets, comm, tag};
                                     Value e = arith::AddIOp::create(lb, first, lp);
                                     Value s = inner.sumCounts(inner.idx(ranks), e);
                                     scf::YieldOp::create(lb, ValueRange{arith::AddIOp::create(lb, acc[0], s)});
                                   });
    Value e = arith::AddIOp::create(b, first, l);
    return arith::AddIOp::create(b, loop.getResult(0), sumCounts(q, e));
  }

  /// Rows [start, start+n) of the 2-D buffer as a 1-D contiguous memref.
  Value rowRange(Value buffer, Value start, Value n) {
    auto type = cast<MemRefType>(buffer.getType());
    int64_t width = type.getDimSize(1);
    auto sub = memref::SubViewOp::create(
        b, buffer, ArrayRef<OpFoldResult>{start, b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{n, b.getIndexAttr(width)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
    return memref::CollapseShapeOp::create(b, sub,
                                           ArrayRef<ReassociationIndices>{{0, 1}});
  }
  Value rows2D(Value buffer, Value start, Value n) {
    int64_t width = cast<MemRefType>(buffer.getType()).getDimSize(1);
    return memref::SubViewOp::create(
        b, buffer, ArrayRef<OpFoldResult>{start, b.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{n, b.getIndexAttr(width)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1)});
  }
  Value toI32(Value index) {
    return arith::IndexCastOp::create(b, b.getI32Type(), index);
  }

  /// Where the chunks of the exchange are, for both directions. Dispatch:
  /// rank me sends to `peer` its rows offsets[e] .. + counts[me, e] for
  /// every expert e of peer, and receives from `peer` counts[peer, e] rows
  /// for each of its own experts, at receivedRow(l, peer). Combine: the
  /// same chunks travel the other way.
  struct Chunk {
    Value start, n;
  };
  // Chunk of the dispatched layout: expert e, `n` rows of rank me.
  Chunk dispatchedChunk(Value e) { return {offset(e), count(me, e)}; }
  // Chunk of the received layout: local expert l from source q.
  Chunk receivedChunk(Value l, Value q) {
    Value e = arith::AddIOp::create(b, arith::MulIOp::create(b, me, idx(local)), l);
    return {receivedRow(l, q), count(q, e)};
  }

  /// For each l in [0, L): body(l).
  void forLocal(function_ref<void(ExchangeEmitter &, Value)> body) {
    scf::ForOp::create(b, idx(0), idx(local), idx(1), ValueRange{},
                       [&](OpBuilder &ob, Location loc, Value l, ValueRange) {
                         ImplicitLocOpBuilder lb(loc, ob);
                         ExchangeEmitter inner{lb, ranks, experts, local,
                                               me, counts, offsets, comm, tag};
                         body(inner, l);
                         scf::YieldOp::create(lb);
                       });
  }

  /// Sends (or receives) the chunks between me and `peer`.
  void transfer(Value in, Value out, Value peer, bool reverse, bool send) {
    Value peerI32 = toI32(peer);
    forLocal([&](ExchangeEmitter &x, Value l) {
      // Chunks of peer's experts in the dispatched layout, or of my
      // experts from/to peer in the received layout.
      Value peerExpert = arith::AddIOp::create(
          x.b, arith::MulIOp::create(x.b, peer, x.idx(local)), l);
      bool dispatchedSide = (send != reverse); // dispatch-send or combine-recv
      Chunk c = dispatchedSide ? x.dispatchedChunk(peerExpert)
                               : x.receivedChunk(l, peer);
      if (send)
        mpi::SendOp::create(x.b, Type(), x.rowRange(in, c.start, c.n), x.tag,
                            peerI32, x.comm);
      else
        mpi::RecvOp::create(x.b, Type(), x.rowRange(out, c.start, c.n), x.tag,
                            peerI32, x.comm);
    });
  }

  /// The whole exchange from `in` to `out` (memrefs).
  void exchange(Value in, Value out, bool reverse) {
    // My own chunks: a copy.
    forLocal([&](ExchangeEmitter &x, Value l) {
      Value e = arith::AddIOp::create(x.b, arith::MulIOp::create(x.b, x.me, x.idx(local)), l);
      Chunk d = x.dispatchedChunk(e), r = x.receivedChunk(l, x.me);
      Chunk from = reverse ? r : d, to = reverse ? d : r;
      memref::CopyOp::create(x.b, x.rows2D(in, from.start, from.n),
                             x.rows2D(out, to.start, to.n));
    });
    // Pairs (i < j) in one global order: i sends then receives, j receives
    // then sends. Every rank walks the same order, so the first pending
    // pair always has both of its ranks at it.
    Value n = idx(ranks);
    scf::ForOp::create(b, idx(0), n, idx(1), ValueRange{},
        [&](OpBuilder &ob, Location loc, Value i, ValueRange) {
          ImplicitLocOpBuilder ib(loc, ob);
          Value i1 = arith::AddIOp::create(ib, i, arith::ConstantIndexOp::create(ib, 1));
          scf::ForOp::create(ib, i1, arith::ConstantIndexOp::create(ib, ranks),
              arith::ConstantIndexOp::create(ib, 1), ValueRange{},
              [&](OpBuilder &jb0, Location jl, Value j, ValueRange) {
                ImplicitLocOpBuilder jb(jl, jb0);
                ExchangeEmitter x{jb, ranks, experts, local, me, counts, offsets, comm, tag};
                Value isI = arith::CmpIOp::create(jb, arith::CmpIPredicate::eq, me, i);
                Value isJ = arith::CmpIOp::create(jb, arith::CmpIPredicate::eq, me, j);
                scf::IfOp::create(jb, isI, [&](OpBuilder &tb, Location tl) {
                  ImplicitLocOpBuilder t(tl, tb);
                  ExchangeEmitter y{t, ranks, experts, local, me, counts, offsets, comm, tag};
                  y.transfer(in, out, j, reverse, /*send=*/true);
                  y.transfer(in, out, j, reverse, /*send=*/false);
                  scf::YieldOp::create(t);
                });
                scf::IfOp::create(jb, isJ, [&](OpBuilder &tb, Location tl) {
                  ImplicitLocOpBuilder t(tl, tb);
                  ExchangeEmitter y{t, ranks, experts, local, me, counts, offsets, comm, tag};
                  y.transfer(in, out, i, reverse, /*send=*/false);
                  y.transfer(in, out, i, reverse, /*send=*/true);
                  scf::YieldOp::create(t);
                });
                (void)x;
                scf::YieldOp::create(jb);
              });
          scf::YieldOp::create(ib);
        });
  }
};

/// The element type MPI moves: f32/f64/integers as they are, 16-bit
/// floats as i16 (bit for bit).
Type transportType(Type elt) {
  if (isa<BFloat16Type, Float16Type>(elt))
    return IntegerType::get(elt.getContext(), 16);
  return elt;
}

Value bitcastTensor(ImplicitLocOpBuilder &b, Value t, Type elt) {
  auto type = cast<RankedTensorType>(t.getType());
  if (type.getElementType() == elt)
    return t;
  return arith::BitcastOp::create(b, type.clone(elt), t);
}

LogicalResult lowerExchange(Operation *op, Value rows, Value offsets, Value counts,
                            Value dest, FlatSymbolRefAttr grid, bool reverse) {
  ImplicitLocOpBuilder b(op->getLoc(), op);
  FailureOr<int64_t> ranks = lookupGridSize(op, grid);
  if (failed(ranks))
    return failure();
  auto rowsType = cast<RankedTensorType>(rows.getType());
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  if (rowsType.isDynamicDim(1))
    return op->emitOpError("needs a static row width D to lower to MPI");
  int64_t experts = cast<RankedTensorType>(counts.getType()).getDimSize(1);
  Type elt = rowsType.getElementType();
  Type wire = transportType(elt);
  auto memType = MemRefType::get({ShapedType::kDynamic, rowsType.getDimSize(1)}, wire);

  ExchangeEmitter x{b, *ranks, experts, experts / *ranks, Value(), counts, offsets,
                    Value(), Value()};
  x.me = shard::ProcessLinearIndexOp::create(b, grid).getResult();
  x.comm = mpi::CommWorldOp::create(b, mpi::CommType::get(b.getContext()));
  x.tag = arith::ConstantIntOp::create(b, b.getI32Type(), 0);

  Value in = bufferization::ToBufferOp::create(
      b, memType, bitcastTensor(b, rows, wire), /*read_only=*/true);
  Value out;
  if (!reverse) {
    Value total = x.receivedRow(x.idx(x.local), x.idx(0));
    out = memref::AllocOp::create(b, memType, ValueRange{total});
  } else {
    Value init = bufferization::ToBufferOp::create(
        b, memType, bitcastTensor(b, dest, wire), /*read_only=*/true);
    Value size = memref::DimOp::create(b, init, 0);
    out = memref::AllocOp::create(b, memType, ValueRange{size});
    memref::CopyOp::create(b, init, out);
  }
  x.exchange(in, out, reverse);
  Value result = bufferization::ToTensorOp::create(
      b, RankedTensorType::get(memType.getShape(), wire), out, /*restrict=*/true,
      /*writable=*/true);
  result = bitcastTensor(b, result, elt);
  if (result.getType() != resultType)
    result = tensor::CastOp::create(b, resultType, result);
  op->getResult(0).replaceAllUsesWith(result);
  op->erase();
  return success();
}

/// What the MPI calls do to memory (the external models above), attached to
/// the mpi ops whenever the mpi dialect is loaded. Both of our stages add
/// it, so that whichever of them runs, the buffer deallocation after it
/// sees the effects. One function, so the registry keeps one extension.
void attachMPIEffects(MLIRContext *ctx, mpi::MPIDialect *) {
  mpi::SendOp::attachInterface<BufferEffects<mpi::SendOp, false>>(*ctx);
  mpi::RecvOp::attachInterface<BufferEffects<mpi::RecvOp, true>>(*ctx);
  mpi::AllReduceOp::attachInterface<AllReduceEffects>(*ctx);
}

/// Stage 1 of --convert-moe-spmd-to-mpi: the exchanges.
struct MoELowerSpmdExchangesPass
    : public moe::impl::MoELowerSpmdExchangesBase<MoELowerSpmdExchangesPass> {
  using Base::Base;

  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    registry.addExtension(&attachMPIEffects);
  }

  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << getArgument() << " on "
                            << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    ModuleOp module = getOperation();
    SmallVector<Operation *> exchanges;
    module.walk([&](Operation *op) {
      if (isa<ExchangeDispatchOp, ExchangeCombineOp>(op))
        exchanges.push_back(op);
    });
    for (Operation *op : exchanges) {
      LogicalResult lowered =
          TypeSwitch<Operation *, LogicalResult>(op)
              .Case([](ExchangeDispatchOp d) {
                return lowerExchange(d, d.getRows(), d.getOffsets(), d.getCounts(),
                                     Value(), d.getGridAttr(), /*reverse=*/false);
              })
              .Case([](ExchangeCombineOp c) {
                return lowerExchange(c, c.getRows(), c.getOffsets(), c.getCounts(),
                                     c.getDest(), c.getGridAttr(), /*reverse=*/true);
              });
      if (failed(lowered))
        return signalPassFailure();
    }
  }
};

/// Stage 3 of --convert-moe-spmd-to-mpi, after upstream's
/// --convert-shard-to-mpi.
struct MoEFinishSpmdToMPIPass
    : public moe::impl::MoEFinishSpmdToMPIBase<MoEFinishSpmdToMPIPass> {
  using Base::Base;

  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    registry.addExtension(&attachMPIEffects);
  }

  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << getArgument() << " on "
                            << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    ModuleOp module = getOperation();
    // The pipeline's option, checked here (its builder cannot fail): the
    // message names the pipeline, the flag users write.
    if (implementation != "OpenMPI" && implementation != "MPICH") {
      module.emitError() << "--convert-moe-spmd-to-mpi: option 'implementation' "
                            "must be OpenMPI or MPICH, got '"
                         << implementation << "'";
      return signalPassFailure();
    }
    // Run alone, without the first stage: an exchange left is an error (it
    // would reach the LLVM conversion otherwise).
    WalkResult unlowered = module.walk([](Operation *op) {
      if (isa<ExchangeDispatchOp, ExchangeCombineOp>(op)) {
        op->emitOpError("is not lowered: run --moe-lower-spmd-exchanges "
                        "before --moe-finish-spmd-to-mpi");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (unlowered.wasInterrupted())
      return signalPassFailure();
    // A module without a grid has no SPMD IR: nothing to do (no MPI
    // attribute either).
    if (module.getOps<shard::GridOp>().empty())
      return;
    WalkResult left = module.walk([](Operation *op) {
      if (isa<shard::ShardDialect>(op->getDialect()) && !isa<shard::GridOp>(op)) {
        op->emitError() << "'" << op->getName()
                        << "' has no lowering to MPI (upstream "
                           "--convert-shard-to-mpi left it)";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (left.wasInterrupted())
      return signalPassFailure();
    for (auto gridOp : llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      gridOp.erase();
    // Upstream splits MPI_COMM_WORLD for every collective over grid axes.
    // On a 1-D grid every rank passes the same constant color and its rank
    // as key: the new communicator has the world's group in the world's
    // order, so the world itself serves. (This also avoids MLIR 22's
    // mpi-to-LLVM lowering of comm_split, which reads the new communicator
    // as an i32: right for MPICH's int handles, a truncated pointer for
    // OpenMPI's.)
    SmallVector<mpi::CommSplitOp> splits;
    module.walk([&](mpi::CommSplitOp split) { splits.push_back(split); });
    for (mpi::CommSplitOp split : splits) {
      if (!matchPattern(split.getColor(), m_Constant()) ||
          !split.getComm().getDefiningOp<mpi::CommWorldOp>() ||
          split.getRetval()) {
        split.emitError("a communicator split with a rank-dependent color "
                        "(a grid of more than one dimension) is not supported");
        return signalPassFailure();
      }
      OpBuilder builder(split);
      Value world = mpi::CommWorldOp::create(builder, split.getLoc(),
                                             mpi::CommType::get(&getContext()));
      split.getNewcomm().replaceAllUsesWith(world);
      split.erase();
    }
    // The MPI ABI for upstream's mpi-to-LLVM conversion.
    MLIRContext *ctx = &getContext();
    SmallVector<DataLayoutEntryInterface> entries;
    if (auto existing = module->getAttrOfType<MapAttr>("dlti.map"))
      for (DataLayoutEntryInterface entry : existing.getEntries())
        if (entry.getKey() != DataLayoutEntryKey(StringAttr::get(ctx, "MPI:Implementation")))
          entries.push_back(entry);
    entries.push_back(DataLayoutEntryAttr::get(StringAttr::get(ctx, "MPI:Implementation"),
                                               StringAttr::get(ctx, implementation)));
    module->setAttr("dlti.map", MapAttr::get(ctx, entries));
    // moe.split served moe-run (binding); it must not reach LLVM.
    for (auto func : module.getOps<func::FuncOp>()) {
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        func.removeArgAttr(i, StringAttr::get(ctx, "moe.split"));
      for (unsigned i = 0; i < func.getNumResults(); ++i)
        func.removeResultAttr(i, StringAttr::get(ctx, "moe.split"));
    }
  }
};

struct MoEFixOpenMPISymbolsPass
    : public moe::impl::MoEFixOpenMPISymbolsBase<MoEFixOpenMPISymbolsPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << getArgument() << " on "
                            << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    ModuleOp module = getOperation();
    static const char *const kOps[] = {"sum",  "max",  "min",  "prod",
                                       "land", "band", "lor",  "bor",
                                       "lxor", "bxor", "minloc", "maxloc",
                                       "replace"};
    for (const char *op : kOps) {
      std::string wrong = std::string("ompi_mpi_") + op;
      std::string right = std::string("ompi_mpi_op_") + op;
      Operation *global = SymbolTable::lookupSymbolIn(module, wrong);
      if (!global)
        continue;
      if (SymbolTable::lookupSymbolIn(module, right)) {
        if (failed(SymbolTable::replaceAllSymbolUses(
                StringAttr::get(&getContext(), wrong),
                StringAttr::get(&getContext(), right), module)))
          return signalPassFailure();
        global->erase();
        continue;
      }
      if (failed(SymbolTable::replaceAllSymbolUses(
              global, StringAttr::get(&getContext(), right), module)))
        return signalPassFailure();
      SymbolTable::setSymbolName(global, right);
    }
  }
};

} // namespace

void mlir::moe::buildSpmdToMPIPipeline(OpPassManager &pm,
                                       StringRef implementation) {
  // Every pass from its typed constructor: nothing is parsed.
  pm.addPass(createMoELowerSpmdExchanges());
  pm.addPass(createConvertShardToMPIPass());
  MoEFinishSpmdToMPIOptions finish;
  finish.implementation = implementation.str();
  pm.addPass(createMoEFinishSpmdToMPI(finish));
}

void mlir::moe::registerSpmdToMPIPipeline() {
  // Registering a pipeline name twice is fatal: once per process.
  static const bool registered = [] {
    PassPipelineRegistration<SpmdToMPIPipelineOptions>(
        "convert-moe-spmd-to-mpi",
        "Lower the SPMD IR of --moe-shard-experts to the mpi dialect: "
        "moe-lower-spmd-exchanges, convert-shard-to-mpi, "
        "moe-finish-spmd-to-mpi",
        [](OpPassManager &pm, const SpmdToMPIPipelineOptions &options) {
          buildSpmdToMPIPipeline(pm, options.implementation);
        });
    return true;
  }();
  (void)registered;
}

void mlir::moe::registerMoEMPIPasses() {
  generated::registerMoEMPIPasses();
  registerSpmdToMPIPipeline();
}
