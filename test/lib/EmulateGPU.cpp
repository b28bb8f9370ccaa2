//===- EmulateGPU.cpp - run the MoE kernels on the host (testing) ---------===//
//
// `--moe-test-emulate-gpu` makes the output of convert-moe-to-gpu (after
// bufferization and moe-gpu-materialize-launches) executable on a machine
// without a GPU, so the kernels' numerics can be compared with the CPU path:
//
// * gpu.alloc / gpu.dealloc / gpu.memcpy / gpu.memset -> memref ops;
// * gpu.launch_func -> a loop over the blocks; each block allocates its
//   workgroup buffers and runs the kernel body in an `omp.parallel` region
//   with one OpenMP thread per GPU thread (gpu.thread_id x =
//   omp_get_thread_num(), gpu.barrier = omp.barrier), so barriers have their
//   real semantics;
// * the gpu.module is dropped (its memref.global constants move to the
//   host module);
// * the warp-level ops of the tensor-core GEMMs (MmaGemm.cpp) run with their
//   documented semantics (WarpLayouts.h): nvgpu.ldmatrix (every lane
//   publishes its row address in a per-block scratch buffer, a barrier, every
//   lane reads its elements from the rows the owning lanes gave, a barrier),
//   nvvm.mma.sync m16n8k16 (every lane scatters its A and B fragment elements
//   into per-warp 16x16 and 16x8 matrices, a barrier, every lane computes its
//   own C/D elements as C + sum over k in ascending order in f32, a barrier),
//   and cp.async: nvgpu.device_async_copy is queued per thread, commit groups
//   are counted, and the data is copied only when a wait retires the group
//   (nvvm.cp.async.wait.group N: all but the N most recent groups), so a
//   kernel that reads a stage before waiting for it reads stale data, and one
//   that reads another thread's copy without a barrier may too;
// * the sm_90a warpgroup MMA (MmaGemm.cpp's _wgmma variants): the workgroup
//   buffers of a block get addresses in an emulated shared window (what
//   memref.extract_aligned_pointer_as_index of a workgroup buffer yields, as
//   on the GPU), so the kernel's matrix descriptors are decoded as the PTX
//   ISA defines them (WarpLayouts.h, Wgmma); nvvm.wgmma.mma_async computes
//   each thread's accumulator registers from the shared memory the
//   descriptors address (no swizzle), in ascending k, when it is issued
//   (wgmma fences, commit/wait groups and fence.proxy are no-ops).
//
// Testing only: it is slow (a team of blockDim threads per block) and needs
// an OpenMP runtime (libomp) at run time.
//
//===----------------------------------------------------------------------===//

#include "test/lib/TestPasses.h"

#include "lowering/gpu/IRBuilder.h"
#include "lowering/gpu/Kernels.h"
#include "lowering/gpu/WarpLayouts.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir {
namespace moe {
#define GEN_PASS_DEF_MOETESTEMULATEGPU
#include "test/lib/TestPasses.h.inc"
} // namespace moe
} // namespace mlir

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "moe-test-emulate-gpu"

using namespace mlir;

namespace {

func::FuncOp ompThreadNum(ModuleOp module) {
  constexpr llvm::StringLiteral name = "omp_get_thread_num";
  if (auto f = module.lookupSymbol<func::FuncOp>(name))
    return f;
  OpBuilder b(module.getContext());
  b.setInsertionPointToStart(module.getBody());
  auto f = func::FuncOp::create(b, module.getLoc(), name,
                                b.getFunctionType({}, {b.getI32Type()}));
  f.setPrivate();
  return f;
}

//===----------------------------------------------------------------------===//
// Warp-level ops
//===----------------------------------------------------------------------===//

using moe::gpu_lowering::IRB;
namespace wl = moe::gpu_lowering::warp_layout;

/// Copies one thread may have queued and not yet retired.
constexpr int64_t kQueueCap = 64;
/// A queue entry: site, source index, destination index, elements, source
/// elements (the rest is zero-filled), group.
constexpr int64_t kQueueFields = 6;

/// The host buffers of one emulated block (allocated per block, outside the
/// OpenMP region; null when the kernel has no such op).
struct WarpScratch {
  Value rowAddr;    // memref<?xindex> [blockDim]: ldmatrix row addresses
  Value mmaA, mmaB; // memref<?xf32> [warps * 16 * 16], [warps * 16 * 8]
  Value queue;      // memref<?xindex> [blockDim * kQueueCap * kQueueFields]
  Value state;      // memref<?xindex> [blockDim * 3]: head, tail, committed
};

/// The emulated shared-memory window of a block: workgroup buffer i starts
/// at byte address base[i] (in attribution order, aligned as the kernel asks
/// or to 16 bytes), the address that memref.extract_aligned_pointer_as_index
/// of the buffer yields in the emulation, as in a kernel on the GPU (the
/// shared state space is a window of its own). wgmma's matrix descriptors
/// carry such addresses.
struct SharedWindow {
  SmallVector<Value> buffers; // the host buffers
  SmallVector<int64_t> base, bytes;
  SmallVector<Type> elt;
};

class WarpOpEmulator {
public:
  WarpOpEmulator(omp::ParallelOp parallel, Value tid, const WarpScratch &s,
                 ArrayRef<nvgpu::DeviceAsyncCopyOp> sites, const SharedWindow &window)
      : parallel(parallel), tid(tid), s(s), sites(sites.begin(), sites.end()),
        window(window) {}

  LogicalResult emulate(Operation *op) {
    ImplicitLocOpBuilder b(op->getLoc(), op);
    IRB e(b);
    if (auto ld = dyn_cast<nvgpu::LdMatrixOp>(op))
      return ldmatrix(e, ld);
    if (auto mma = dyn_cast<NVVM::MmaOp>(op))
      return mmaSync(e, mma);
    if (auto copy = dyn_cast<nvgpu::DeviceAsyncCopyOp>(op))
      return asyncCopy(e, copy);
    if (isa<NVVM::CpAsyncCommitGroupOp, nvgpu::DeviceAsyncCreateGroupOp>(op)) {
      commit(e);
      return success();
    }
    if (auto wait = dyn_cast<NVVM::CpAsyncWaitGroupOp>(op))
      return waitGroups(e, wait.getN());
    if (auto wait = dyn_cast<nvgpu::DeviceAsyncWaitOp>(op))
      return waitGroups(e, wait.getNumGroups().value_or(0));
    if (auto mma = dyn_cast<NVVM::WgmmaMmaAsyncOp>(op))
      return wgmma(e, mma);
    // The warpgroup fences and groups order register and async-proxy
    // accesses on the GPU; the emulated wgmma completes when it is issued.
    if (isa<NVVM::WgmmaFenceAlignedOp, NVVM::WgmmaGroupSyncAlignedOp,
            NVVM::WgmmaWaitGroupSyncOp, NVVM::FenceProxyOp>(op)) {
      op->erase();
      return success();
    }
    return op->emitError("no host emulation for this op");
  }

  /// Per-thread queue state starts empty.
  void initThread(IRB &e) {
    if (!s.state)
      return;
    for (int64_t i = 0; i < 3; ++i)
      e.store(e.idx(0), s.state, e.addi(e.muli(tid, e.idx(3)), e.idx(i)));
  }

private:
  omp::ParallelOp parallel;
  Value tid;
  WarpScratch s;
  SmallVector<nvgpu::DeviceAsyncCopyOp> sites;
  SharedWindow window;

  Value lane(IRB &e) { return e.remui(tid, e.idx(wl::kWarpSize)); }
  Value groupID(IRB &e) { return e.divui(lane(e), e.idx(4)); }
  Value tig(IRB &e) { return e.remui(lane(e), e.idx(4)); }
  void barrier(IRB &e) { omp::BarrierOp::create(e.b); }

  /// PTX ISA 9.7.14.5.15: lanes 8j..8j+7 address the rows of matrix j; the
  /// lane receives (groupID, 2 tig + h), or (2 tig + h, groupID) with .trans.
  LogicalResult ldmatrix(IRB &e, nvgpu::LdMatrixOp op) {
    Value mem = op.getSrcMemref();
    auto resType = cast<VectorType>(op.getRes().getType());
    int64_t numTiles = op.getNumTiles();
    if (cast<MemRefType>(mem.getType()).getRank() != 1 || resType.getRank() != 2 ||
        resType.getDimSize(0) != numTiles || resType.getDimSize(1) != 2)
      return op.emitError("host emulation of nvgpu.ldmatrix needs a 1-D memref and a "
                          "vector<numTiles x 2> result");
    e.store(op.getIndices()[0], s.rowAddr, tid);
    barrier(e);
    Value warpBase = e.subi(tid, lane(e)), g = groupID(e), t2 = e.muli(tig(e), e.idx(2));
    SmallVector<Value> elems;
    for (int64_t j = 0; j < numTiles; ++j)
      for (int64_t h = 0; h < 2; ++h) {
        Value across = e.addi(t2, e.idx(h));
        Value row = op.getTranspose() ? across : g, col = op.getTranspose() ? g : across;
        Value owner = e.addi(warpBase, e.addi(e.idx(wl::LdMatrix::addressLane(j, 0)), row));
        elems.push_back(e.load(mem, e.addi(e.load(s.rowAddr, owner), col)));
      }
    Value result = vector::FromElementsOp::create(e.b, resType, elems);
    barrier(e);
    op.getRes().replaceAllUsesWith(result);
    op.erase();
    return success();
  }

  /// PTX ISA 9.7.14.5.8: m16n8k16 with bf16/f16 multiplicands and f32
  /// accumulators, fragments as in wl::M16N8K16.
  LogicalResult mmaSync(IRB &e, NVVM::MmaOp op) {
    using L = wl::M16N8K16;
    NVVM::MMAShapeAttr shape = op.getShapeAttr();
    std::optional<NVVM::MMATypes> ptx = op.getMultiplicandAPtxType();
    Type f32 = e.f32();
    if (shape.getM() != L::M || shape.getN() != L::N || shape.getK() != L::K ||
        op.getLayoutA() != NVVM::MMALayout::row || op.getLayoutB() != NVVM::MMALayout::col ||
        op.getOperandA().size() != L::kARegs || op.getOperandB().size() != L::kBRegs ||
        op.getOperandC().size() != L::kCRegs ||
        !llvm::all_of(op.getOperandC().getTypes(), [&](Type t) { return t == f32; }))
      return op.emitError("host emulation of nvvm.mma.sync supports m16n8k16 row.col "
                          "with f32 accumulators only");
    Type T;
    if (ptx == NVVM::MMATypes::bf16)
      T = e.b.getBF16Type();
    else if (ptx == NVVM::MMATypes::f16 || (!ptx && isa<VectorType>(op.getOperandA()[0].getType())))
      T = e.b.getF16Type();
    else
      return op.emitError("host emulation of nvvm.mma.sync supports bf16 and f16 only");
    auto element = [&](Value reg, int64_t h) -> Value {
      Value v = reg;
      if (isa<IntegerType>(v.getType())) // two 16-bit elements, the first in the low half
        v = LLVM::BitcastOp::create(e.b, VectorType::get({2}, T), v);
      Value x = vector::ExtractOp::create(e.b, v, ArrayRef<int64_t>{h});
      return arith::ExtFOp::create(e.b, f32, x);
    };
    Value warp = e.divui(tid, e.idx(wl::kWarpSize));
    Value aBase = e.muli(warp, e.idx(L::M * L::K)), bBase = e.muli(warp, e.idx(L::K * L::N));
    Value g = groupID(e), t2 = e.muli(tig(e), e.idx(2));
    for (int64_t i = 0; i < 2 * L::kARegs; ++i) {
      Value row = e.addi(g, e.idx(L::aRowOffset(i))), col = e.addi(t2, e.idx(L::aColOffset(i)));
      e.store(element(op.getOperandA()[i / 2], i % 2), s.mmaA,
              e.addi(aBase, e.addi(e.muli(row, e.idx(L::K)), col)));
    }
    for (int64_t i = 0; i < 2 * L::kBRegs; ++i) {
      Value k = e.addi(t2, e.idx(L::bKOffset(i)));
      e.store(element(op.getOperandB()[i / 2], i % 2), s.mmaB,
              e.addi(bBase, e.addi(e.muli(k, e.idx(L::N)), g)));
    }
    barrier(e);
    Value result = LLVM::PoisonOp::create(e.b, op.getRes().getType());
    for (int64_t i = 0; i < L::kCRegs; ++i) {
      Value row = e.addi(g, e.idx(L::cRowOffset(i))), col = e.addi(t2, e.idx(L::cColOffset(i)));
      Value d = e.forLoop(e.idx(0), e.idx(L::K), {op.getOperandC()[i]},
                          [&](IRB &e, Value k, ValueRange acc) {
                            Value a = e.load(s.mmaA, e.addi(aBase, e.addi(e.muli(row, e.idx(L::K)), k)));
                            Value bv = e.load(s.mmaB, e.addi(bBase, e.addi(e.muli(k, e.idx(L::N)), col)));
                            return SmallVector<Value>{e.addf(acc[0], e.mulf(a, bv))};
                          })[0];
      result = LLVM::InsertValueOp::create(e.b, result, d, ArrayRef<int64_t>{i});
    }
    barrier(e);
    op.getRes().replaceAllUsesWith(result);
    op.erase();
    return success();
  }

  /// PTX ISA 9.7.15: wgmma.mma_async m64nNk16, bf16/f16 multiplicands, f32
  /// accumulators, A and B in shared memory through matrix descriptors
  /// (WarpLayouts.h, Wgmma). Every thread decodes the (warpgroup-uniform)
  /// descriptors and computes its own D registers: d_i at row
  /// 16 w + groupID + dRowOffset(i), column 2 tig + dColOffset(i) (w: the
  /// warp in the warpgroup), d_i + sum over k ascending of A[row, k] B[k, col]
  /// in f32, each element read at the address the descriptor's layout gives.
  /// Only the canonical layouts without swizzle (mode 0, base offset 0).
  LogicalResult wgmma(IRB &e, NVVM::WgmmaMmaAsyncOp op) {
    using W = wl::Wgmma;
    NVVM::MMAShapeAttr shape = op.getShape();
    auto typeOf = [&](NVVM::WGMMATypes t) -> Type {
      if (t == NVVM::WGMMATypes::bf16)
        return e.b.getBF16Type();
      if (t == NVVM::WGMMATypes::f16)
        return e.b.getF16Type();
      return Type();
    };
    Type T = typeOf(op.getTypeA());
    int64_t n = shape.getN();
    if (shape.getM() != W::M || shape.getK() != W::K || n % 8 != 0 || !T ||
        op.getTypeB() != op.getTypeA() || op.getTypeD() != NVVM::WGMMATypes::f32 ||
        op.getScaleA() != NVVM::WGMMAScaleIn::one || op.getScaleB() != NVVM::WGMMAScaleIn::one ||
        op.getLayoutA() != NVVM::MMALayout::row)
      return op.emitError("host emulation of nvvm.wgmma.mma_async supports m64nNk16 with "
                          "bf16/f16 operands, f32 accumulators, unscaled, A row-major");
    bool bMnMajor = op.getLayoutB() == NVVM::MMALayout::row; // transposed B
    Type i64 = e.b.getI64Type(), f32 = e.f32();
    auto c64 = [&](int64_t v) { return arith::ConstantIntOp::create(e.b, i64, v).getResult(); };
    auto field = [&](Value desc, int64_t shift) {
      Value f = arith::AndIOp::create(
          e.b, arith::ShRUIOp::create(e.b, desc, c64(shift)), c64(W::kFieldMask));
      return arith::IndexCastUIOp::create(e.b, e.index(), f).getResult();
    };
    struct Operand {
      Value buf, start, lbo, sbo; // start: element index in buf; lbo, sbo: bytes
    };
    auto decode = [&](Value desc, StringRef which) -> Operand {
      Value mode = arith::ShRUIOp::create(e.b, desc, c64(W::kSwizzleShift));
      Value baseOffset = arith::AndIOp::create(
          e.b, arith::ShRUIOp::create(e.b, desc, c64(49)), c64(7));
      cf::AssertOp::create(
          e.b, e.andi(e.eq(mode, c64(0)), e.eq(baseOffset, c64(0))),
          ("emulated wgmma: matrix descriptor of " + which + " has a swizzle mode or base "
           "offset (only the no-swizzle canonical layout is emulated)").str());
      Value addr = e.muli(field(desc, W::kStartShift), e.idx(16));
      Operand o;
      o.lbo = e.muli(field(desc, W::kLboShift), e.idx(16));
      o.sbo = e.muli(field(desc, W::kSboShift), e.idx(16));
      // The workgroup buffer of element type T holding `addr`.
      Value found = e.ci1(false);
      for (auto [i, buf] : llvm::enumerate(window.buffers)) {
        if (window.elt[i] != T)
          continue;
        Value dyn = memref::CastOp::create(
            e.b, MemRefType::get({ShapedType::kDynamic}, T), buf);
        Value in = e.andi(e.ule(e.idx(window.base[i]), addr),
                          e.ult(addr, e.idx(window.base[i] + window.bytes[i])));
        o.buf = o.buf ? arith::SelectOp::create(e.b, in, dyn, o.buf).getResult() : dyn;
        o.start = o.start ? e.select(in, e.subi(addr, e.idx(window.base[i])), o.start)
                          : e.subi(addr, e.idx(window.base[i]));
        found = e.ori(found, in);
      }
      if (o.buf)
        cf::AssertOp::create(e.b, found,
                             ("emulated wgmma: the descriptor of " + which +
                              " does not address a workgroup buffer of its element type")
                                 .str());
      return o;
    };
    Operand a = decode(op.getDescriptorA(), "A"), bm = decode(op.getDescriptorB(), "B");
    if (!a.buf || !bm.buf)
      return op.emitError("host emulation of nvvm.wgmma.mma_async: no workgroup buffer of "
                          "the operand type");
    // Byte offset of (mn, k) from the operand's start: Wgmma::byteOffset.
    auto offset = [&](IRB &e, const Operand &o, bool mnMajor, Value mn, Value k) {
      Value c8 = e.idx(8), rowBytes = e.idx(W::kCoreRowBytes), eltBytes = e.idx(2);
      Value inCore = mnMajor ? e.addi(e.muli(e.remui(k, c8), rowBytes),
                                      e.muli(e.remui(mn, c8), eltBytes))
                             : e.addi(e.muli(e.remui(mn, c8), rowBytes),
                                      e.muli(e.remui(k, c8), eltBytes));
      return e.addi(e.addi(e.muli(e.divui(mn, c8), o.sbo), e.muli(e.divui(k, c8), o.lbo)),
                    inCore);
    };
    auto element = [&](IRB &e, const Operand &o, Value byteOff) {
      Value at = e.divui(e.addi(o.start, byteOff), e.idx(2));
      return arith::ExtFOp::create(e.b, f32, e.load(o.buf, at)).getResult();
    };
    Value w = e.divui(e.remui(tid, e.idx(W::kWarpgroupSize)), e.idx(wl::kWarpSize));
    Value g = groupID(e), t2 = e.muli(tig(e), e.idx(2));
    Value result = LLVM::PoisonOp::create(e.b, op.getResults().getType());
    bool accumulate = op.getScaleD() == NVVM::WGMMAScaleOut::one;
    for (int64_t i = 0; i < n / 2; ++i) {
      Value row = e.addi(e.addi(e.muli(w, e.idx(16)), g), e.idx(W::dRowOffset(i)));
      Value col = e.addi(t2, e.idx(W::dColOffset(i)));
      Value init = accumulate ? LLVM::ExtractValueOp::create(e.b, op.getInouts(),
                                                             ArrayRef<int64_t>{i})
                                    .getResult()
                              : e.cf32(0.0);
      Value d = e.forLoop(e.idx(0), e.idx(W::K), {init}, [&](IRB &e, Value k, ValueRange acc) {
        Value av = element(e, a, offset(e, a, /*mnMajor=*/false, row, k));
        Value bv = element(e, bm, offset(e, bm, bMnMajor, col, k));
        return SmallVector<Value>{e.addf(acc[0], e.mulf(av, bv))};
      })[0];
      result = LLVM::InsertValueOp::create(e.b, result, d, ArrayRef<int64_t>{i});
    }
    op.getResults().replaceAllUsesWith(result);
    op.erase();
    return success();
  }

  Value stateAt(IRB &e, int64_t field) {
    return e.addi(e.muli(tid, e.idx(3)), e.idx(field));
  }
  Value slotOf(IRB &e, Value n) {
    return e.muli(e.addi(e.muli(tid, e.idx(kQueueCap)), e.remui(n, e.idx(kQueueCap))),
                  e.idx(kQueueFields));
  }

  /// Queues the copy; the data moves when a wait retires its group.
  LogicalResult asyncCopy(IRB &e, nvgpu::DeviceAsyncCopyOp op) {
    if (op.getSrcIndices().size() != 1 || op.getDstIndices().size() != 1)
      return op.emitError("host emulation of nvgpu.device_async_copy needs 1-D memrefs");
    int64_t site = llvm::find(sites, op) - sites.begin();
    Value head = e.load(s.state, stateAt(e, 0)), tail = e.load(s.state, stateAt(e, 1));
    Value committed = e.load(s.state, stateAt(e, 2));
    cf::AssertOp::create(e.b, e.ult(e.subi(tail, head), e.idx(kQueueCap)),
                         "emulated cp.async: too many copies in flight in one thread");
    Value slot = slotOf(e, tail);
    Value n = e.idx(op.getDstElements().getZExtValue());
    Value srcN = op.getSrcElements() ? op.getSrcElements() : n;
    Value fields[kQueueFields] = {e.idx(site),  op.getSrcIndices()[0], op.getDstIndices()[0], n,
                                  srcN,         committed};
    for (int64_t f = 0; f < kQueueFields; ++f)
      e.store(fields[f], s.queue, e.addi(slot, e.idx(f)));
    e.store(e.addi(tail, e.idx(1)), s.state, stateAt(e, 1));
    return success();
  }

  void commit(IRB &e) {
    Value at = stateAt(e, 2);
    e.store(e.addi(e.load(s.state, at), e.idx(1)), s.state, at);
  }

  /// Retires every queued copy of a group older than the `pending` most
  /// recent committed groups, in issue order.
  LogicalResult waitGroups(IRB &e, int64_t pending) {
    Value tail = e.load(s.state, stateAt(e, 1)), committed = e.load(s.state, stateAt(e, 2));
    Type ix = e.index();
    auto loop = scf::WhileOp::create(
        e.b, TypeRange{ix}, ValueRange{e.load(s.state, stateAt(e, 0))},
        [&](OpBuilder &nb, Location loc, ValueRange args) {
          ImplicitLocOpBuilder ib(loc, nb);
          IRB ne(ib);
          Value head = args[0];
          Value group = ne.load(s.queue, ne.addi(slotOf(ne, head), ne.idx(kQueueFields - 1)));
          Value retire = ne.andi(ne.ult(head, tail),
                                 ne.ult(ne.addi(group, ne.idx(pending)), committed));
          scf::ConditionOp::create(ib, retire, ValueRange{head});
        },
        [&](OpBuilder &nb, Location loc, ValueRange args) {
          ImplicitLocOpBuilder ib(loc, nb);
          IRB ne(ib);
          perform(ne, slotOf(ne, args[0]));
          scf::YieldOp::create(ib, ValueRange{ne.addi(args[0], ne.idx(1))});
        });
    e.store(loop.getResult(0), s.state, stateAt(e, 0));
    return success();
  }

  void perform(IRB &e, Value slot) {
    auto field = [&](int64_t f) { return e.load(s.queue, e.addi(slot, e.idx(f))); };
    Value site = field(0), si = field(1), di = field(2), n = field(3), srcN = field(4);
    for (auto [i, op] : llvm::enumerate(sites)) {
      Value src = op.getSrc(), dst = op.getDst();
      Type elt = cast<MemRefType>(src.getType()).getElementType();
      e.ifThen(e.eq(site, e.idx(i)), [&](IRB &e) {
        e.forEach(e.idx(0), n, e.idx(1), [&](IRB &e, Value j) {
          Value v = e.guardedLoad(e.ult(j, srcN), elt,
                                  [&](IRB &e) { return e.load(src, e.addi(si, j)); });
          e.store(v, dst, e.addi(di, j));
        });
      });
    }
  }
};

LogicalResult emulateLaunch(gpu::LaunchFuncOp launch, gpu::GPUFuncOp kernel,
                            func::FuncOp threadNum) {
  OpBuilder b(launch);
  Location loc = launch.getLoc();
  if (kernel.getBody().getBlocks().size() != 1)
    return launch.emitError("emulation needs single-block kernels");
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
  gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
  SmallVector<Value> ivs;
  for (Value ub : {grid.z, grid.y, grid.x}) {
    auto loop = scf::ForOp::create(b, loc, c0, ub, c1);
    b.setInsertionPointToStart(loop.getBody());
    ivs.push_back(loop.getInductionVar());
  }
  Value bz = ivs[0], by = ivs[1], bx = ivs[2];
  // Workgroup memory: one buffer per block.
  SmallVector<Value> workgroup;
  for (BlockArgument arg : kernel.getWorkgroupAttributions()) {
    auto type = cast<MemRefType>(arg.getType());
    workgroup.push_back(memref::AllocOp::create(
        b, loc, MemRefType::get(type.getShape(), type.getElementType())));
  }
  // Host buffers of the warp-level ops.
  bool hasLdmatrix = false, hasMma = false, hasAsync = false;
  kernel.walk([&](Operation *op) {
    hasLdmatrix |= isa<nvgpu::LdMatrixOp>(op);
    hasMma |= isa<NVVM::MmaOp>(op);
    hasAsync |= isa<nvgpu::DeviceAsyncCopyOp>(op);
  });
  WarpScratch scratch;
  auto hostBuffer = [&](Type elt, Value n) -> Value {
    Value buf = memref::AllocOp::create(
        b, loc, MemRefType::get({ShapedType::kDynamic}, elt), ValueRange{n});
    workgroup.push_back(buf); // freed with the workgroup buffers
    return buf;
  };
  {
    ImplicitLocOpBuilder ib(loc, b);
    IRB e(ib);
    Value warps = e.ceildiv(block.x, e.idx(wl::kWarpSize));
    if (hasLdmatrix)
      scratch.rowAddr = hostBuffer(ib.getIndexType(), block.x);
    if (hasMma) {
      using L = wl::M16N8K16;
      scratch.mmaA = hostBuffer(ib.getF32Type(), e.muli(warps, e.idx(L::M * L::K)));
      scratch.mmaB = hostBuffer(ib.getF32Type(), e.muli(warps, e.idx(L::K * L::N)));
    }
    if (hasAsync) {
      scratch.queue =
          hostBuffer(ib.getIndexType(), e.muli(block.x, e.idx(kQueueCap * kQueueFields)));
      scratch.state = hostBuffer(ib.getIndexType(), e.muli(block.x, e.idx(3)));
    }
  }
  unsigned numWorkgroup = kernel.getWorkgroupAttributions().size();

  Value numThreads = arith::IndexCastOp::create(b, loc, b.getI32Type(), block.x);
  auto parallel = omp::ParallelOp::create(
      b, loc, ValueRange{}, ValueRange{}, Value(), numThreads, ValueRange{}, nullptr, nullptr,
      nullptr, nullptr, ValueRange{}, nullptr, nullptr);
  for (Value buf : workgroup)
    memref::DeallocOp::create(b, loc, buf);

  Block *body = b.createBlock(&parallel.getRegion());
  b.setInsertionPointToStart(body);
  Value tid = arith::IndexCastOp::create(
      b, loc, b.getIndexType(), func::CallOp::create(b, loc, threadNum).getResult(0));
  IRMapping map;
  Block &entry = kernel.getBody().front();
  unsigned numArgs = kernel.getNumArguments();
  for (unsigned i = 0; i < numArgs; ++i)
    map.map(entry.getArgument(i), launch.getKernelOperands()[i]);
  for (auto [arg, buf] :
       llvm::zip(kernel.getWorkgroupAttributions(), ArrayRef(workgroup).take_front(numWorkgroup)))
    map.map(arg, buf);
  for (Operation &op : entry.without_terminator())
    b.clone(op, map);
  omp::TerminatorOp::create(b, loc);

  // The warp-level ops, in program order, and the cp.async copy sites (whose
  // buffers must be visible where a wait performs the copies).
  SmallVector<Operation *> warpOps;
  SmallVector<nvgpu::DeviceAsyncCopyOp> sites;
  parallel.walk([&](Operation *op) {
    if (op->getDialect() && isa<nvgpu::NVGPUDialect, NVVM::NVVMDialect>(op->getDialect()))
      warpOps.push_back(op);
    if (auto copy = dyn_cast<nvgpu::DeviceAsyncCopyOp>(op))
      sites.push_back(copy);
  });
  for (nvgpu::DeviceAsyncCopyOp copy : sites)
    for (Value buf : {copy.getSrc(), copy.getDst()})
      if (parallel.getRegion().isAncestor(buf.getParentRegion()))
        return copy.emitError("host emulation of nvgpu.device_async_copy needs buffers "
                              "defined outside the kernel body (arguments, workgroup memory)");
  // The shared window: workgroup buffer addresses as on the GPU.
  SharedWindow window;
  {
    int64_t at = 0;
    for (auto [i, arg] : llvm::enumerate(kernel.getWorkgroupAttributions())) {
      auto type = cast<MemRefType>(arg.getType());
      int64_t align = 16;
      if (auto a = dyn_cast_or_null<IntegerAttr>(kernel.getWorkgroupAttributionAttr(
              i, LLVM::LLVMDialect::getAlignAttrName())))
        align = std::max<int64_t>(align, a.getInt());
      at = llvm::alignTo(at, align);
      int64_t bytes = type.getNumElements() * llvm::divideCeil(type.getElementTypeBitWidth(), 8);
      window.buffers.push_back(workgroup[i]);
      window.base.push_back(at);
      window.bytes.push_back(bytes);
      window.elt.push_back(type.getElementType());
      at += bytes;
    }
    SmallVector<memref::ExtractAlignedPointerAsIndexOp> ptrs;
    parallel.walk([&](memref::ExtractAlignedPointerAsIndexOp op) { ptrs.push_back(op); });
    for (auto op : ptrs) {
      auto it = llvm::find(window.buffers, op.getSource());
      if (it == window.buffers.end())
        continue;
      OpBuilder pb(op);
      op.replaceAllUsesWith(
          arith::ConstantIndexOp::create(pb, op.getLoc(), window.base[it - window.buffers.begin()])
              .getResult());
      op.erase();
    }
  }
  WarpOpEmulator warpEmulator(parallel, tid, scratch, sites, window);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(tid.getDefiningOp());
    ImplicitLocOpBuilder ib(loc, b);
    IRB e(ib);
    warpEmulator.initThread(e);
  }

  // GPU builtins inside the cloned body.
  WalkResult result = parallel.walk([&](Operation *op) -> WalkResult {
    OpBuilder rb(op);
    if (auto id = dyn_cast<gpu::ThreadIdOp>(op)) {
      id.replaceAllUsesWith(id.getDimension() == gpu::Dimension::x ? tid : c0);
      id.erase();
    } else if (auto id = dyn_cast<gpu::BlockIdOp>(op)) {
      Value v = id.getDimension() == gpu::Dimension::x   ? bx
                : id.getDimension() == gpu::Dimension::y ? by
                                                         : bz;
      id.replaceAllUsesWith(v);
      id.erase();
    } else if (auto dim = dyn_cast<gpu::BlockDimOp>(op)) {
      Value v = dim.getDimension() == gpu::Dimension::x   ? block.x
                : dim.getDimension() == gpu::Dimension::y ? block.y
                                                          : block.z;
      dim.replaceAllUsesWith(v);
      dim.erase();
    } else if (auto dim = dyn_cast<gpu::GridDimOp>(op)) {
      Value v = dim.getDimension() == gpu::Dimension::x   ? grid.x
                : dim.getDimension() == gpu::Dimension::y ? grid.y
                                                          : grid.z;
      dim.replaceAllUsesWith(v);
      dim.erase();
    } else if (isa<gpu::BarrierOp>(op)) {
      omp::BarrierOp::create(rb, op->getLoc());
      op->erase();
    } else if (op->getDialect() && isa<gpu::GPUDialect>(op->getDialect())) {
      op->emitError("no host emulation for this GPU op");
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (result.wasInterrupted())
    return failure();
  // Async tokens have no host meaning: the queue orders the copies.
  SmallVector<Operation *> asyncOps;
  for (Operation *op : warpOps) {
    bool async = isa<nvgpu::DeviceAsyncCopyOp, nvgpu::DeviceAsyncCreateGroupOp,
                     nvgpu::DeviceAsyncWaitOp, NVVM::CpAsyncCommitGroupOp,
                     NVVM::CpAsyncWaitGroupOp>(op);
    if (failed(warpEmulator.emulate(op)))
      return failure();
    if (async)
      asyncOps.push_back(op);
  }
  for (Operation *op : llvm::reverse(asyncOps)) {
    op->dropAllUses();
    op->erase();
  }
  launch.erase();
  return success();
}

struct EmulateGPUPass : public moe::impl::MoETestEmulateGPUBase<EmulateGPUPass> {
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << getArgument() << " on "
                            << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    ModuleOp module = getOperation();
    func::FuncOp threadNum;
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<gpu::AllocOp, gpu::DeallocOp, gpu::MemcpyOp, gpu::MemsetOp, gpu::LaunchFuncOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      if (auto alloc = dyn_cast<gpu::AllocOp>(op)) {
        if (alloc.getAsyncToken())
          return (void)(op->emitError("emulation expects synchronous GPU ops"), signalPassFailure());
        Value m = memref::AllocOp::create(b, loc, alloc.getMemref().getType(),
                                          alloc.getDynamicSizes(), alloc.getSymbolOperands());
        alloc.getMemref().replaceAllUsesWith(m);
        op->erase();
      } else if (auto dealloc = dyn_cast<gpu::DeallocOp>(op)) {
        memref::DeallocOp::create(b, loc, dealloc.getMemref());
        op->erase();
      } else if (auto copy = dyn_cast<gpu::MemcpyOp>(op)) {
        memref::CopyOp::create(b, loc, copy.getSrc(), copy.getDst());
        op->erase();
      } else if (auto set = dyn_cast<gpu::MemsetOp>(op)) {
        Value dst = set.getDst();
        Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
        Value n = memref::DimOp::create(b, loc, dst, 0);
        auto loop = scf::ForOp::create(b, loc, c0, n, arith::ConstantIndexOp::create(b, loc, 1));
        b.setInsertionPointToStart(loop.getBody());
        memref::StoreOp::create(b, loc, set.getValue(), dst, loop.getInductionVar());
        op->erase();
      } else if (auto launch = dyn_cast<gpu::LaunchFuncOp>(op)) {
        auto kernel = SymbolTable::lookupNearestSymbolFrom<gpu::GPUFuncOp>(
            module, launch.getKernel());
        if (!kernel)
          return (void)(launch.emitError("kernel not found"), signalPassFailure());
        if (!threadNum)
          threadNum = ompThreadNum(module);
        if (failed(emulateLaunch(launch, kernel, threadNum)))
          return signalPassFailure();
      }
    }
    // The kernels' constant globals (ConvertMoEToGPU.cpp: the dense
    // constants of element-wise kernels) move to the host module, where the
    // kernel bodies now run; a name already there is the same constant.
    for (auto gpuModule : llvm::make_early_inc_range(module.getOps<gpu::GPUModuleOp>())) {
      for (auto global : llvm::make_early_inc_range(gpuModule.getOps<memref::GlobalOp>())) {
        if (module.lookupSymbol(global.getSymNameAttr()))
          continue;
        global->moveBefore(module.getBody(), module.getBody()->begin());
      }
      gpuModule.erase();
    }
    module->removeAttr(gpu::GPUDialect::getContainerModuleAttrName());
  }
};

} // namespace
