//===- EmulateGPU.cpp - run the MoE kernels on the host (testing) ---------===//
//
// `--moe-test-emulate-gpu` makes the output of convert-moe-to-gpu (after
// bufferization and moe-gpu-materialize-launches) executable on a machine
// without a GPU, so the kernels' numerics can be compared with the CPU path:
//
// * gpu.alloc / gpu.dealloc / gpu.memcpy / gpu.memset -> memref ops;
// * gpu.launch_func -> a call of the kernel's emulation, one private
//   function per kernel (so a kernel launched several times is emulated and
//   compiled once) of the grid and block sizes, the dynamic shared memory
//   size, the shuffle key and the kernel operands: a loop over the blocks
//   (option block-order: in
//   ascending linear block id x + gx (y + gy z), `forward`, the default;
//   descending, `reverse`; or `shuffle`, a permutation of the linear ids
//   that is a pure function of option `seed` and the launch's position in
//   the module, so that kernels whose blocks coordinate through global
//   memory are tested in orders a GPU may run them in); each block allocates its
//   workgroup buffers and runs the kernel body in an `omp.parallel` region
//   with one OpenMP thread per GPU thread (gpu.thread_id x =
//   omp_get_thread_num(), gpu.barrier = omp.barrier), so barriers have their
//   real semantics;
// * the gpu.module is dropped (its memref.global constants move to the
//   host module);
// * calls of the CUDA runtime's moeRuntimeIndexError (the index checks'
//   report) call the CPU runtime's moeCpuExpertIndexError instead (same
//   arguments and line; it exits with code 1);
// * the warp-level ops of the tensor-core GEMMs (MmaGemm.cpp) run with their
//   documented semantics (WarpLayouts.h): nvgpu.ldmatrix (every lane
//   publishes its row address in a per-block scratch buffer, a barrier, every
//   lane reads its elements from the rows the owning lanes gave, a barrier),
//   nvvm.mma.sync m16n8k16 (a call of one helper function per operand kind:
//   every lane scatters its A and B fragment elements
//   into per-warp 16x16 and 16x8 matrices, a barrier, every lane computes its
//   own C/D elements as C + sum over k in ascending order in f32, a barrier),
//   and cp.async: nvgpu.device_async_copy is queued per thread, commit groups
//   are counted, and the data is copied only when a wait retires the group
//   (nvvm.cp.async.wait.group N: all but the N most recent groups), so a
//   kernel that reads a stage before waiting for it reads stale data, and one
//   that reads another thread's copy without a barrier may too;
// * gpu.dynamic_shared_memory: a per-block byte buffer of the launch's
//   dynamic_shared_memory_size; the kernel's memref.view of it (constant
//   offsets, static shapes) become host views of that buffer, placed in the
//   shared window after the workgroup attributions (as on the GPU), and a
//   view past the launch's size ends the run with a one-line error;
// * the sm_90a warpgroup MMA (MmaGemm.cpp's _wgmma variants): the workgroup
//   buffers of a block get addresses in an emulated shared window (what
//   memref.extract_aligned_pointer_as_index of a workgroup buffer yields, as
//   on the GPU), so the kernel's matrix descriptors are decoded as the PTX
//   ISA defines them (WarpLayouts.h, Wgmma); nvvm.wgmma.mma_async computes
//   each thread's accumulator registers from the shared memory the
//   descriptors address (no swizzle), in ascending k. Its asynchrony is
//   modelled (PTX ISA 9.7.15; see "wgmma: asynchrony" below and docs/gpu.md):
//   pending until a wgmma.wait_group retires its commit group, its operands
//   read again at retirement, no generic write to them and no access to the
//   accumulators while pending, a wgmma.fence after accumulator accesses,
//   fence.proxy.async between generic writes and the wgmma reading them;
//   a violation ends the run with a one-line error (stderr, exit status 1).
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
#include "mlir/Dialect/LLVMIR/FunctionCallUtils.h"
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

/// The function that ends an emulated run, created once per module:
///   llvm.func internal @__moe_emulation_fail(%msg: !llvm.ptr, %len: i64)
/// writes the message (one line) to stderr and exits with status 1; when
/// several threads fail, the first one reports and exits, the others wait
/// for the exit (cf.assert's message goes through buffered stdout and is
/// lost when it aborts). Out of line and noinline, so that each check costs
/// the kernels one conditional call rather than the reporting code.
LLVM::LLVMFuncOp emulationFail(ModuleOp module, Location loc) {
  constexpr llvm::StringLiteral name = "__moe_emulation_fail";
  if (auto f = module.lookupSymbol<LLVM::LLVMFuncOp>(name))
    return f;
  MLIRContext *ctx = module.getContext();
  Type i32 = IntegerType::get(ctx, 32), i64 = IntegerType::get(ctx, 64);
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  Type voidTy = LLVM::LLVMVoidType::get(ctx);
  OpBuilder mb(ctx);
  mb.setInsertionPointToStart(module.getBody());
  FailureOr<LLVM::LLVMFuncOp> write = LLVM::lookupOrCreateFn(mb, module, "write", {i32, ptr, i64}, i64);
  FailureOr<LLVM::LLVMFuncOp> exit = LLVM::lookupOrCreateFn(mb, module, "_exit", {i32}, voidTy);
  FailureOr<LLVM::LLVMFuncOp> pause = LLVM::lookupOrCreateFn(mb, module, "pause", {}, i32);
  assert(succeeded(write) && succeeded(exit) && succeeded(pause) && "libc's signatures");
  constexpr llvm::StringLiteral flagName = "__moe_emulation_failed";
  auto flag = LLVM::GlobalOp::create(mb, loc, i32, /*isConstant=*/false, LLVM::Linkage::Internal,
                                     flagName, mb.getI32IntegerAttr(0));
  auto fn = LLVM::LLVMFuncOp::create(mb, loc, name, LLVM::LLVMFunctionType::get(voidTy, {ptr, i64}),
                                     LLVM::Linkage::Internal);
  fn.setNoInline(true);
  Block *entry = fn.addEntryBlock(mb);
  Block *report = new Block(), *wait = new Block();
  fn.getBody().push_back(report);
  fn.getBody().push_back(wait);
  OpBuilder b = OpBuilder::atBlockEnd(entry);
  auto c32 = [&](int32_t v) { return LLVM::ConstantOp::create(b, loc, i32, v); };
  Value old = LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::xchg,
                                        LLVM::AddressOfOp::create(b, loc, flag), c32(1),
                                        LLVM::AtomicOrdering::seq_cst);
  Value first = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, old, c32(0));
  LLVM::CondBrOp::create(b, loc, first, report, wait);
  b.setInsertionPointToEnd(report);
  LLVM::CallOp::create(b, loc, *write, ValueRange{c32(2), entry->getArgument(0), entry->getArgument(1)});
  LLVM::CallOp::create(b, loc, *exit, ValueRange{c32(1)});
  LLVM::UnreachableOp::create(b, loc);
  // The others wait for the first one's exit (pause returns on a signal).
  b.setInsertionPointToEnd(wait);
  LLVM::CallOp::create(b, loc, *pause, ValueRange{});
  LLVM::BrOp::create(b, loc, wait);
  return fn;
}

/// Ends the emulated run unless `ok` (emulationFail): the message as one
/// line on stderr and exit status 1. For the checks of the emulation.
void failUnless(IRB &e, ModuleOp module, Value ok, StringRef msg) {
  e.ifThen(e.noti(ok), [&](IRB &e) {
    MLIRContext *ctx = e.b.getContext();
    Type i8 = IntegerType::get(ctx, 8), i64 = IntegerType::get(ctx, 64);
    std::string line = (msg + "\n").str();
    // The message: a private constant global at the top of the module
    // (built detached, then inserted by the symbol table).
    OpBuilder mb(ctx);
    StringAttr value = mb.getStringAttr(line);
    LLVM::GlobalOp global;
    for (auto g : module.getOps<LLVM::GlobalOp>())
      if (g.getSymName().starts_with("__moe_emulation_error") && g.getValueAttr() == value)
        global = g;
    if (!global) {
      global = LLVM::GlobalOp::create(mb, e.b.getLoc(), LLVM::LLVMArrayType::get(i8, line.size()),
                                      /*isConstant=*/true, LLVM::Linkage::Internal,
                                      "__moe_emulation_error", value);
      SymbolTable(module).insert(global, module.getBody()->begin()); // renamed if taken
    }
    LLVM::CallOp::create(e.b, emulationFail(module, e.b.getLoc()),
                         ValueRange{LLVM::AddressOfOp::create(e.b, global),
                                    arith::ConstantIntOp::create(e.b, i64, line.size())});
  });
}

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

/// Fields of a thread's wgmma state: issued, retired, committed groups,
/// accumulators touched since the last wgmma.fence, proxy fences.
enum WgField : int64_t { kIssued, kRetired, kCommitted, kTouched, kProxyFences, kWgFields };
/// Fields of a pending wgmma: site, group, descriptor A, descriptor B.
constexpr int64_t kSlotFields = 4;
/// wgmmas one thread may have pending (issued, not retired).
constexpr int64_t kWgCap = 16;
/// The widest emulated wgmma: N = 256, N / 2 accumulators per thread.
constexpr int64_t maxHalfN = 128;
/// A shadow word: writer thread * kStampShift + the writer's proxy fences + 1.
constexpr int64_t kStampShift = int64_t(1) << 32;

/// The host buffers of the wgmma model (null without wgmma): per thread
/// state and pending-wgmma records, and a shadow word per element of each
/// 16-bit workgroup buffer (the last generic-proxy write).
struct WgmmaScratch {
  Value state;  // memref<?xindex> [blockDim * kWgFields]
  Value slots;  // memref<?xindex> [blockDim * kWgCap * kSlotFields]
  Value acc;    // memref<?xf32> [blockDim * kWgCap * 2 * maxHalfN]: input, issue-time D
  SmallVector<Value> shadow; // per window buffer: memref<Nxindex> or null
  /// Per window buffer (or null): per element, how many (thread, pending
  /// wgmma) pairs (i32) have it in their slice of the wgmma's operands.
  SmallVector<Value> readers;
};

/// What the retirement of a wgmma needs of its op (erased at issue).
struct WgSite {
  Operation *op; // only compared, never dereferenced after the issue
  int64_t n;
  Type T;
  // MN-major (transposed) operands: A with layout col, B with layout row.
  bool aMnMajor, bMnMajor, accumulate;
};

class WarpOpEmulator {
public:
  WarpOpEmulator(omp::ParallelOp parallel, Value tid, const WarpScratch &s,
                 ArrayRef<nvgpu::DeviceAsyncCopyOp> sites, const SharedWindow &window,
                 const WgmmaScratch &wg, ArrayRef<NVVM::WgmmaMmaAsyncOp> wgSites,
                 StringRef kernelName)
      : parallel(parallel), tid(tid), s(s), sites(sites.begin(), sites.end()),
        window(window), wg(wg), kernelName(kernelName.str()) {
    for (NVVM::WgmmaMmaAsyncOp op : wgSites)
      this->wgSites.push_back({op, op.getShape().getN(),
                               operandType(op.getContext(), op.getTypeA()),
                               op.getLayoutA() == NVVM::MMALayout::col,
                               op.getLayoutB() == NVVM::MMALayout::row,
                               op.getScaleD() == NVVM::WGMMAScaleOut::one});
  }

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
    if (isa<NVVM::WgmmaFenceAlignedOp>(op)) {
      wgStore(e, kTouched, e.idx(0));
      op->erase();
      return success();
    }
    if (isa<NVVM::WgmmaGroupSyncAlignedOp>(op)) {
      wgStore(e, kCommitted, e.addi(wgLoad(e, kCommitted), e.idx(1)));
      op->erase();
      return success();
    }
    if (auto wait = dyn_cast<NVVM::WgmmaWaitGroupSyncOp>(op))
      return wgmmaWait(e, op, wait.getGroup());
    if (auto fence = dyn_cast<NVVM::FenceProxyOp>(op)) {
      // fence.proxy.async (all state spaces) and .async.shared::{cta,
      // cluster} order this thread's generic-proxy writes of shared memory
      // before later async-proxy accesses.
      NVVM::ProxyKind kind = fence.getKind();
      if (wg.state && (kind == NVVM::ProxyKind::async || kind == NVVM::ProxyKind::async_shared))
        wgStore(e, kProxyFences, e.addi(wgLoad(e, kProxyFences), e.idx(1)));
      op->erase();
      return success();
    }
    return op->emitError("no host emulation for this op");
  }

  /// Per-thread queue state starts empty; no wgmma pending, the
  /// accumulator registers "touched" (a wgmma.fence precedes the first
  /// wgmma), no proxy fence yet.
  void initThread(IRB &e) {
    if (s.state)
      for (int64_t i = 0; i < 3; ++i)
        e.store(e.idx(0), s.state, e.addi(e.muli(tid, e.idx(3)), e.idx(i)));
    if (wg.state)
      for (int64_t f = 0; f < kWgFields; ++f)
        wgStore(e, f, e.idx(f == kTouched ? 1 : 0));
  }

  /// A generic-proxy write of element `i` of window buffer `buffer` by this
  /// thread (rule (c)): stamp (thread, proxy fences + 1).
  void genericWrite(IRB &e, unsigned buffer, Value i) {
    if (buffer >= wg.shadow.size() || !wg.shadow[buffer])
      return;
    Value stamp = e.addi(e.muli(tid, e.idx(kStampShift)),
                         e.addi(wgLoad(e, kProxyFences), e.idx(1)));
    e.store(stamp, wg.shadow[buffer], i);
    checkNoReader(e, buffer, i);
  }
  /// Rule (a) at a write: no pending wgmma reads the element.
  void checkNoReader(IRB &e, unsigned buffer, Value i) {
    if (buffer >= wg.readers.size() || !wg.readers[buffer])
      return;
    failUnless(e, module(), e.eq(e.load(wg.readers[buffer], i), e.ci32(0)),
        ("emulated wgmma: kernel " + kernelName +
         ": a generic-proxy write (st.shared, cp.async) to shared memory that an "
         "nvvm.wgmma.mma_async in flight reads (a stage overwritten before wgmma.wait_group "
         "retired its reader)"));
  }
  void genericWrite(IRB &e, Value buf, Value i) {
    auto it = llvm::find(window.buffers, buf);
    if (it != window.buffers.end())
      genericWrite(e, it - window.buffers.begin(), i);
  }

private:
  omp::ParallelOp parallel;
  Value tid;
  WarpScratch s;
  SmallVector<nvgpu::DeviceAsyncCopyOp> sites;
  SharedWindow window;
  WgmmaScratch wg;
  SmallVector<WgSite> wgSites;
  std::string kernelName;

  ModuleOp module() { return parallel->getParentOfType<ModuleOp>(); }
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
    // Row by row (vector.insert of a vector<2xT>): a 2-D vector.from_elements
    // has no lowering to LLVM unless every use folds it away.
    Value result = arith::ConstantOp::create(
        e.b, resType, DenseElementsAttr::get(resType, e.b.getZeroAttr(resType.getElementType())));
    auto rowType = VectorType::get({2}, resType.getElementType());
    for (int64_t j = 0; j < numTiles; ++j) {
      SmallVector<Value> elems;
      for (int64_t h = 0; h < 2; ++h) {
        Value across = e.addi(t2, e.idx(h));
        Value row = op.getTranspose() ? across : g, col = op.getTranspose() ? g : across;
        Value owner = e.addi(warpBase, e.addi(e.idx(wl::LdMatrix::addressLane(j, 0)), row));
        elems.push_back(e.load(mem, e.addi(e.load(s.rowAddr, owner), col)));
      }
      result = vector::InsertOp::create(e.b, vector::FromElementsOp::create(e.b, rowType, elems),
                                        result, ArrayRef<int64_t>{j});
    }
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
    // One helper function per operand kind, called at every site: inlined,
    // the ~100 ops of each of a kernel's many mma sites made the emulated
    // module several times larger and its LLVM compilation as much slower.
    SmallVector<Value> args{tid, s.mmaA, s.mmaB};
    llvm::append_range(args, op.getOperandA());
    llvm::append_range(args, op.getOperandB());
    llvm::append_range(args, op.getOperandC());
    auto call = func::CallOp::create(e.b, mmaHelper(op, T, args), args);
    Value result = LLVM::PoisonOp::create(e.b, op.getRes().getType());
    for (int64_t i = 0; i < L::kCRegs; ++i)
      result = LLVM::InsertValueOp::create(e.b, result, call.getResult(i), ArrayRef<int64_t>{i});
    op.getRes().replaceAllUsesWith(result);
    op.erase();
    return success();
  }

  /// The warp's m16n8k16 (`T` multiplicands, f32 accumulators) as a private
  /// function of (tid, scratch A, scratch B, A regs, B regs, C regs) -> D
  /// regs: each thread writes its fragments of A and B into the warp's
  /// scratch, the warp meets at a barrier, each thread computes its D
  /// elements, and the warp meets again before the scratch is reused.
  func::FuncOp mmaHelper(NVVM::MmaOp op, Type T, ValueRange args) {
    using L = wl::M16N8K16;
    auto module = parallel->getParentOfType<ModuleOp>();
    auto kind = [](Value v) { return isa<IntegerType>(v.getType()) ? "i" : "v"; };
    std::string name = (llvm::Twine("__moe_emulated_mma_m16n8k16_") +
                        (T.isBF16() ? "bf16_" : "f16_") + kind(op.getOperandA()[0]) +
                        kind(op.getOperandB()[0]))
                           .str();
    if (auto f = module.lookupSymbol<func::FuncOp>(name))
      return f;
    MLIRContext *ctx = module.getContext();
    Type f32 = Float32Type::get(ctx);
    OpBuilder mb(ctx);
    mb.setInsertionPointToEnd(module.getBody());
    auto f = func::FuncOp::create(
        mb, op.getLoc(), name,
        mb.getFunctionType(ValueRange(args).getTypes(), SmallVector<Type>(L::kCRegs, f32)));
    f.setPrivate();
    Block *body = f.addEntryBlock();
    mb.setInsertionPointToStart(body);
    ImplicitLocOpBuilder ib(op.getLoc(), mb);
    IRB e(ib);
    Value t = body->getArgument(0), mmaA = body->getArgument(1), mmaB = body->getArgument(2);
    auto regs = body->getArguments().drop_front(3);
    auto aRegs = regs.take_front(L::kARegs), bRegs = regs.drop_front(L::kARegs).take_front(L::kBRegs),
         cRegs = regs.drop_front(L::kARegs + L::kBRegs);
    auto element = [&](Value reg, int64_t h) -> Value {
      Value v = reg;
      if (isa<IntegerType>(v.getType())) // two 16-bit elements, the first in the low half
        v = LLVM::BitcastOp::create(e.b, VectorType::get({2}, T), v);
      Value x = vector::ExtractOp::create(e.b, v, ArrayRef<int64_t>{h});
      return arith::ExtFOp::create(e.b, f32, x);
    };
    Value laneId = e.remui(t, e.idx(wl::kWarpSize));
    Value warp = e.divui(t, e.idx(wl::kWarpSize));
    Value aBase = e.muli(warp, e.idx(L::M * L::K)), bBase = e.muli(warp, e.idx(L::K * L::N));
    Value g = e.divui(laneId, e.idx(4)), t2 = e.muli(e.remui(laneId, e.idx(4)), e.idx(2));
    for (int64_t i = 0; i < 2 * L::kARegs; ++i) {
      Value row = e.addi(g, e.idx(L::aRowOffset(i))), col = e.addi(t2, e.idx(L::aColOffset(i)));
      e.store(element(aRegs[i / 2], i % 2), mmaA,
              e.addi(aBase, e.addi(e.muli(row, e.idx(L::K)), col)));
    }
    for (int64_t i = 0; i < 2 * L::kBRegs; ++i) {
      Value k = e.addi(t2, e.idx(L::bKOffset(i)));
      e.store(element(bRegs[i / 2], i % 2), mmaB, e.addi(bBase, e.addi(e.muli(k, e.idx(L::N)), g)));
    }
    barrier(e);
    SmallVector<Value> d;
    for (int64_t i = 0; i < L::kCRegs; ++i) {
      Value row = e.addi(g, e.idx(L::cRowOffset(i))), col = e.addi(t2, e.idx(L::cColOffset(i)));
      d.push_back(e.forLoop(e.idx(0), e.idx(L::K), {cRegs[i]},
                            [&](IRB &e, Value k, ValueRange acc) {
                              Value a = e.load(mmaA, e.addi(aBase, e.addi(e.muli(row, e.idx(L::K)), k)));
                              Value bv = e.load(mmaB, e.addi(bBase, e.addi(e.muli(k, e.idx(L::N)), col)));
                              return SmallVector<Value>{e.addf(acc[0], e.mulf(a, bv))};
                            })[0]);
    }
    barrier(e);
    func::ReturnOp::create(e.b, d);
    return f;
  }

  //===--------------------------------------------------------------------===//
  // wgmma (PTX ISA 9.7.15): asynchrony, fences and proxies
  //===--------------------------------------------------------------------===//
  //
  // Per thread (the state is per thread; the warpgroup executes the
  // .sync.aligned ops together, so every thread of a warpgroup sees the same
  // history): a wgmma.mma_async is pending from its issue until a
  // wgmma.wait_group retires its commit group (groups retire in order;
  // `wait_group N` leaves at most the N most recent committed groups
  // pending; wgmmas not yet committed stay pending). The emulated wgmma
  // computes its D registers at issue from the shared memory then, records
  // its descriptors, input accumulators and result, and at retirement
  // computes them again from the shared memory at retirement: the hardware
  // reads the operands at some time in between, so a difference means a
  // shared operand was overwritten while the wgmma was in flight. Besides:
  // * the accumulator registers (any value of a wgmma's accumulator struct
  //   type, read or written by an op other than a wgmma or control-flow
  //   plumbing) are not touched while a wgmma is pending;
  // * a wgmma.mma_async follows a wgmma.fence with no accumulator access in
  //   between (chained wgmmas need none: ordered by default), and a thread
  //   starts with its registers "touched", so the first wgmma needs a fence;
  // * every operand element the wgmma reads (each thread of the warpgroup
  //   checks a 1/128 slice) was, if written through the generic proxy
  //   (memref.store, a cp.async completing at its wait), followed by a
  //   fence.proxy.async of the writing thread: a shadow word per element
  //   holds (writer, writer's fence count + 1) of its last generic write.


  Value wgAt(IRB &e, Value thread, int64_t field) {
    return e.addi(e.muli(thread, e.idx(kWgFields)), e.idx(field));
  }
  Value wgLoad(IRB &e, int64_t field) { return e.load(wg.state, wgAt(e, tid, field)); }
  void wgStore(IRB &e, int64_t field, Value v) { e.store(v, wg.state, wgAt(e, tid, field)); }

  std::string wgError(Operation *op, StringRef what) {
    return ("emulated wgmma: kernel " + kernelName + ": " + op->getName().getStringRef() + " " +
            what)
        .str();
  }

  /// The operand of a matrix descriptor: its workgroup buffer (and that
  /// buffer's shadow), the start element and the byte strides.
  struct Operand {
    Value buf, shadow, readers, start, lbo, sbo; // start: byte offset in buf; lbo, sbo: bytes
  };

  Operand decode(IRB &e, Type T, Value desc, StringRef which) {
    using W = wl::Wgmma;
    Type i64 = e.b.getI64Type();
    auto c64 = [&](int64_t v) { return arith::ConstantIntOp::create(e.b, i64, v).getResult(); };
    auto field = [&](int64_t shift) {
      Value f = arith::AndIOp::create(e.b, arith::ShRUIOp::create(e.b, desc, c64(shift)),
                                      c64(W::kFieldMask));
      return arith::IndexCastUIOp::create(e.b, e.index(), f).getResult();
    };
    Value mode = arith::ShRUIOp::create(e.b, desc, c64(W::kSwizzleShift));
    Value baseOffset =
        arith::AndIOp::create(e.b, arith::ShRUIOp::create(e.b, desc, c64(49)), c64(7));
    failUnless(e, module(), e.andi(e.eq(mode, c64(0)), e.eq(baseOffset, c64(0))),
                         ("emulated wgmma: matrix descriptor of " + which +
                          " has a swizzle mode or base offset (only the no-swizzle "
                          "canonical layout is emulated)")
                             .str());
    Value addr = e.muli(field(W::kStartShift), e.idx(16));
    Operand o;
    o.lbo = e.muli(field(W::kLboShift), e.idx(16));
    o.sbo = e.muli(field(W::kSboShift), e.idx(16));
    // The workgroup buffer of element type T holding `addr`.
    Value found = e.ci1(false);
    auto dynIndex = MemRefType::get({ShapedType::kDynamic}, e.index());
    for (auto [i, buf] : llvm::enumerate(window.buffers)) {
      if (window.elt[i] != T)
        continue;
      Value dyn = memref::CastOp::create(e.b, MemRefType::get({ShapedType::kDynamic}, T), buf);
      Value in = e.andi(e.ule(e.idx(window.base[i]), addr),
                        e.ult(addr, e.idx(window.base[i] + window.bytes[i])));
      o.buf = o.buf ? e.select(in, dyn, o.buf) : dyn;
      o.start = o.start ? e.select(in, e.subi(addr, e.idx(window.base[i])), o.start)
                        : e.subi(addr, e.idx(window.base[i]));
      if (wg.shadow[i]) {
        Value sh = memref::CastOp::create(e.b, dynIndex, wg.shadow[i]);
        o.shadow = o.shadow ? e.select(in, sh, o.shadow) : sh;
        Value rd = memref::CastOp::create(
            e.b, MemRefType::get({ShapedType::kDynamic}, e.i32()), wg.readers[i]);
        o.readers = o.readers ? e.select(in, rd, o.readers) : rd;
      }
      found = e.ori(found, in);
    }
    if (o.buf)
      failUnless(e, module(), found,
                           ("emulated wgmma: the descriptor of " + which +
                            " does not address a workgroup buffer of its element type")
                               .str());
    return o;
  }

  /// Byte offset of (mn, k) from the operand's start: Wgmma::byteOffset.
  Value offset(IRB &e, const Operand &o, bool mnMajor, Value mn, Value k) {
    Value c8 = e.idx(8), rowBytes = e.idx(wl::Wgmma::kCoreRowBytes), eltBytes = e.idx(2);
    Value inCore = mnMajor
                       ? e.addi(e.muli(e.remui(k, c8), rowBytes), e.muli(e.remui(mn, c8), eltBytes))
                       : e.addi(e.muli(e.remui(mn, c8), rowBytes), e.muli(e.remui(k, c8), eltBytes));
    return e.addi(e.addi(e.muli(e.divui(mn, c8), o.sbo), e.muli(e.divui(k, c8), o.lbo)), inCore);
  }
  Value elementIndex(IRB &e, const Operand &o, bool mnMajor, Value mn, Value k) {
    return e.divui(e.addi(o.start, offset(e, o, mnMajor, mn, k)), e.idx(2));
  }

  static Type operandType(MLIRContext *ctx, NVVM::WGMMATypes t) {
    if (t == NVVM::WGMMATypes::bf16)
      return BFloat16Type::get(ctx);
    if (t == NVVM::WGMMATypes::f16)
      return Float16Type::get(ctx);
    return Type();
  }

  /// The thread's D registers of `op` from the shared memory now, d_i at
  /// row 16 w + groupID + dRowOffset(i), column 2 tig + dColOffset(i) (w:
  /// the warp in the warpgroup): input_i + sum over k ascending of
  /// A[row, k] B[k, col] in f32 (0 instead of input_i without scale-d), with
  /// input_i at record[i] and D at record[maxHalfN + i] of the wgmma's
  /// record in wg.acc. Stores D there (issue), or (`compare`) returns
  /// whether every d_i has the recorded bits (retirement). A loop over i,
  /// not N/2 copies: the emulated module stays small.
  Value computeD(IRB &e, const WgSite &op, const Operand &a, const Operand &bm, Value record,
                 bool compare) {
    using W = wl::Wgmma;
    Type f32 = e.f32(), i32 = e.i32();
    auto element = [&](IRB &e, const Operand &o, Value at) {
      return arith::ExtFOp::create(e.b, f32, e.load(o.buf, at)).getResult();
    };
    Value w = e.divui(e.remui(tid, e.idx(W::kWarpgroupSize)), e.idx(wl::kWarpSize));
    Value rowBase = e.addi(e.muli(w, e.idx(16)), groupID(e)), t2 = e.muli(tig(e), e.idx(2));
    return e.forLoop(
        e.idx(0), e.idx(op.n / 2), {e.ci1(true)}, [&](IRB &e, Value i, ValueRange same) {
          // Wgmma::dRowOffset(i), dColOffset(i).
          Value c2 = e.idx(2), c4 = e.idx(4), c8 = e.idx(8);
          Value row = e.addi(rowBase, e.muli(c8, e.divui(e.remui(i, c4), c2)));
          Value col = e.addi(t2, e.addi(e.muli(c8, e.divui(i, c4)), e.remui(i, c2)));
          Value start = op.accumulate ? e.load(wg.acc, e.addi(record, i)) : e.cf32(0.0);
          Value d = e.forLoop(e.idx(0), e.idx(W::K), {start}, [&](IRB &e, Value k, ValueRange acc) {
            Value av = element(e, a, elementIndex(e, a, op.aMnMajor, row, k));
            Value bv = element(e, bm, elementIndex(e, bm, op.bMnMajor, col, k));
            return SmallVector<Value>{e.addf(acc[0], e.mulf(av, bv))};
          })[0];
          Value at = e.addi(record, e.addi(e.idx(maxHalfN), i));
          if (!compare) {
            e.store(d, wg.acc, at);
            return SmallVector<Value>{same[0]};
          }
          Value bits = arith::BitcastOp::create(e.b, i32, d);
          Value recorded = arith::BitcastOp::create(e.b, i32, e.load(wg.acc, at));
          return SmallVector<Value>{e.andi(same[0], e.eq(bits, recorded))};
        })[0];
  }

  /// Folds `body` over this thread's slice of an operand's elements (rows x
  /// 16 k; element j = tid % 128 + 128 q), given their element index.
  Value overSlice(IRB &e, const Operand &o, bool mnMajor, int64_t rows, Value init,
                  function_ref<Value(IRB &, Value, Value)> body) {
    using W = wl::Wgmma;
    Value first = e.remui(tid, e.idx(W::kWarpgroupSize));
    return e.forLoop(first, e.idx(rows * W::K), e.idx(W::kWarpgroupSize), {init},
                     [&](IRB &e, Value j, ValueRange acc) {
                       Value at = elementIndex(e, o, mnMajor, e.divui(j, e.idx(W::K)),
                                               e.remui(j, e.idx(W::K)));
                       return SmallVector<Value>{body(e, at, acc[0])};
                     })[0];
  }

  /// Marks (+1) or unmarks (-1) this thread's slice of an operand as read
  /// by a pending wgmma (atomically: warpgroups may share an operand).
  void markReaders(IRB &e, const Operand &o, bool mnMajor, int64_t rows, int64_t delta) {
    if (!o.readers)
      return;
    overSlice(e, o, mnMajor, rows, e.ci1(false), [&](IRB &e, Value at, Value acc) {
      memref::AtomicRMWOp::create(e.b, arith::AtomicRMWKind::addi, e.ci32(delta), o.readers,
                                  ValueRange{at});
      return acc;
    });
  }

  /// Rule (c) for this thread's slice of an operand.
  Value unfencedIn(IRB &e, const Operand &o, bool mnMajor, int64_t rows) {
    if (!o.shadow)
      return e.ci1(false);
    return overSlice(e, o, mnMajor, rows, e.ci1(false), [&](IRB &e, Value at, Value bad) {
          Value stamp = e.load(o.shadow, at);
          Value writer = e.divui(stamp, e.idx(kStampShift));
          Value epoch = e.remui(stamp, e.idx(kStampShift));
          Value fences = e.guardedLoad(e.ult(e.idx(0), stamp), e.index(), [&](IRB &e) {
            return e.load(wg.state, wgAt(e, writer, kProxyFences));
          });
          Value unfenced = e.andi(e.ult(e.idx(0), stamp), e.ult(fences, epoch));
          return e.ori(bad, unfenced);
        });
  }

  /// PTX ISA 9.7.15: wgmma.mma_async m64nNk16, bf16/f16 multiplicands, f32
  /// accumulators, A and B in shared memory through matrix descriptors
  /// (WarpLayouts.h, Wgmma), the canonical layouts without swizzle. Issue:
  /// the fence and proxy checks, D from the shared memory now (the SSA
  /// result), and the record that retirement checks.
  LogicalResult wgmma(IRB &e, NVVM::WgmmaMmaAsyncOp op) {
    using W = wl::Wgmma;
    NVVM::MMAShapeAttr shape = op.getShape();
    Type T = operandType(op.getContext(), op.getTypeA());
    int64_t n = shape.getN();
    if (shape.getM() != W::M || shape.getK() != W::K || n % 8 != 0 || n / 2 > maxHalfN || !T ||
        op.getTypeB() != op.getTypeA() || op.getTypeD() != NVVM::WGMMATypes::f32 ||
        op.getScaleA() != NVVM::WGMMAScaleIn::one || op.getScaleB() != NVVM::WGMMAScaleIn::one)
      return op.emitError("host emulation of nvvm.wgmma.mma_async supports m64nNk16 with "
                          "bf16/f16 operands, f32 accumulators, unscaled");
    int64_t site = llvm::find_if(wgSites, [&](const WgSite &w) { return w.op == op; }) -
                   wgSites.begin();
    std::string name = "#" + std::to_string(site);
    // (d) A wgmma.fence since the last access to the accumulators.
    failUnless(e, module(), e.eq(wgLoad(e, kTouched), e.idx(0)),
                         wgError(op, name + ": the accumulator registers were accessed after "
                                            "the last wgmma.fence (or no wgmma.fence before "
                                            "the first wgmma)"));
    Operand a = decode(e, T, op.getDescriptorA(), "A"),
            bm = decode(e, T, op.getDescriptorB(), "B");
    if (!a.buf || !bm.buf)
      return op.emitError("host emulation of nvvm.wgmma.mma_async: no workgroup buffer of "
                          "the operand type");
    bool aMnMajor = op.getLayoutA() == NVVM::MMALayout::col;
    bool bMnMajor = op.getLayoutB() == NVVM::MMALayout::row;
    // (c) The operands' generic-proxy writes were fenced by their writers.
    Value unfenced = e.ori(unfencedIn(e, a, aMnMajor, W::M),
                           unfencedIn(e, bm, bMnMajor, n));
    failUnless(e, module(), e.noti(unfenced),
                         wgError(op, name + " reads shared memory written through the generic "
                                            "proxy (st.shared, cp.async) with no later "
                                            "fence.proxy.async by the writing thread"));
    // The operands are read from now until retirement.
    markReaders(e, a, aMnMajor, W::M, 1);
    markReaders(e, bm, bMnMajor, n, 1);
    // The record: site, group, descriptors, input and D at issue.
    Value issued = wgLoad(e, kIssued);
    failUnless(e, module(), e.ult(e.subi(issued, wgLoad(e, kRetired)), e.idx(kWgCap)),
               wgError(op, name + ": too many wgmmas in flight in one thread"));
    Value slot = wgSlot(e, issued);
    Type ix = e.index();
    Value fields[kSlotFields] = {
        e.idx(site), wgLoad(e, kCommitted),
        arith::IndexCastUIOp::create(e.b, ix, op.getDescriptorA()),
        arith::IndexCastUIOp::create(e.b, ix, op.getDescriptorB())};
    for (int64_t f = 0; f < kSlotFields; ++f)
      e.store(fields[f], wg.slots, e.addi(e.muli(slot, e.idx(kSlotFields)), e.idx(f)));
    Value record = e.muli(slot, e.idx(2 * maxHalfN));
    for (int64_t i = 0; i < n / 2; ++i)
      e.store(LLVM::ExtractValueOp::create(e.b, op.getInouts(), ArrayRef<int64_t>{i}), wg.acc,
              e.addi(record, e.idx(i)));
    computeD(e, wgSites[site], a, bm, record, /*compare=*/false);
    wgStore(e, kIssued, e.addi(issued, e.idx(1)));
    Value result = LLVM::PoisonOp::create(e.b, op.getResults().getType());
    for (int64_t i = 0; i < n / 2; ++i)
      result = LLVM::InsertValueOp::create(
          e.b, result, e.load(wg.acc, e.addi(record, e.idx(maxHalfN + i))), ArrayRef<int64_t>{i});
    op.getResults().replaceAllUsesWith(result);
    op.erase();
    return success();
  }

  /// The thread's record slot of its `n`th wgmma.
  Value wgSlot(IRB &e, Value n) {
    return e.addi(e.muli(tid, e.idx(kWgCap)), e.remui(n, e.idx(kWgCap)));
  }

  /// wgmma.wait_group N: retires, in issue order, every pending wgmma of a
  /// group older than the N most recent committed ones, each checked (a):
  /// D computed again from the shared memory now equals D at issue.
  LogicalResult wgmmaWait(IRB &e, Operation *op, int64_t pending) {
    Value issued = wgLoad(e, kIssued), committed = wgLoad(e, kCommitted);
    Type ix = e.index();
    auto loop = scf::WhileOp::create(
        e.b, TypeRange{ix}, ValueRange{wgLoad(e, kRetired)},
        [&](OpBuilder &nb, Location loc, ValueRange args) {
          ImplicitLocOpBuilder ib(loc, nb);
          IRB ne(ib);
          Value head = args[0];
          Value more = ne.ult(head, issued);
          // The slot of a retired wgmma may be stale: read it only if pending.
          Value group = ne.guardedLoad(more, ix, [&](IRB &ne) {
            return ne.load(wg.slots, ne.addi(ne.muli(wgSlot(ne, head), ne.idx(kSlotFields)),
                                             ne.idx(1)));
          });
          Value retire = ne.andi(more, ne.ult(ne.addi(group, ne.idx(pending)), committed));
          scf::ConditionOp::create(ib, retire, ValueRange{head});
        },
        [&](OpBuilder &nb, Location loc, ValueRange args) {
          ImplicitLocOpBuilder ib(loc, nb);
          IRB ne(ib);
          retireOne(ne, op, wgSlot(ne, args[0]));
          scf::YieldOp::create(ib, ValueRange{ne.addi(args[0], ne.idx(1))});
        });
    wgStore(e, kRetired, loop.getResult(0));
    op->erase();
    return success();
  }

  void retireOne(IRB &e, Operation *waitOp, Value slot) {
    auto field = [&](int64_t f) {
      return e.load(wg.slots, e.addi(e.muli(slot, e.idx(kSlotFields)), e.idx(f)));
    };
    Value site = field(0);
    Type i64 = e.b.getI64Type();
    Value descA = arith::IndexCastUIOp::create(e.b, i64, field(2));
    Value descB = arith::IndexCastUIOp::create(e.b, i64, field(3));
    Value accBase = e.muli(slot, e.idx(2 * maxHalfN));
    for (size_t i = 0; i < wgSites.size(); ++i) {
      const WgSite &op = wgSites[i];
      e.ifThen(e.eq(site, e.idx(i)), [&](IRB &e) {
        Type T = op.T;
        Operand a = decode(e, T, descA, "A"), bm = decode(e, T, descB, "B");
        markReaders(e, a, op.aMnMajor, wl::Wgmma::M, -1);
        markReaders(e, bm, op.bMnMajor, op.n, -1);
        Value same = computeD(e, op, a, bm, accBase, /*compare=*/true);
        failUnless(e, module(), same,
            wgError(waitOp, "retiring nvvm.wgmma.mma_async #" + std::to_string(i) +
                            ": its shared operands changed between issue and the "
                            "wgmma.wait_group that retired it (a stage overwritten while "
                            "the wgmma was in flight)"));
      });
    }
  }

public:
  /// (b) and (d) at an op that reads or writes accumulator registers.
  void accumulatorAccess(IRB &e, Operation *op) {
    failUnless(e, module(), e.eq(wgLoad(e, kIssued), wgLoad(e, kRetired)),
        wgError(op, "accesses accumulator registers while a wgmma.mma_async is in flight "
                    "(no wgmma.wait_group retired it)"));
    wgStore(e, kTouched, e.idx(1));
  }

private:

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
    failUnless(e, module(), e.ult(e.subi(tail, head), e.idx(kQueueCap)),
                         "emulated cp.async: too many copies in flight in one thread");
    Value slot = slotOf(e, tail);
    Value n = e.idx(op.getDstElements().getZExtValue());
    // The copy may land any time until its wait: its destination must not be
    // read by a pending wgmma from now on.
    if (auto it = llvm::find(window.buffers, op.getDst()); it != window.buffers.end()) {
      unsigned buffer = it - window.buffers.begin();
      if (buffer < wg.readers.size() && wg.readers[buffer])
        e.forEach(e.idx(0), n, e.idx(1), [&](IRB &e, Value j) {
          checkNoReader(e, buffer, e.addi(op.getDstIndices()[0], j));
        });
    }
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
          genericWrite(e, dst, e.addi(di, j)); // the copy completes now
        });
      });
    }
  }
};

//===----------------------------------------------------------------------===//
// Block order
//===----------------------------------------------------------------------===//

/// splitmix64's finalizer (Steele, Lea, Flood 2014): a bijection of 64-bit
/// words whose outputs look independent for consecutive inputs.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

/// The same function emitted on i64 values (wrapping arithmetic).
Value emitMix64(ImplicitLocOpBuilder &b, Value z) {
  auto c = [&](uint64_t v) -> Value {
    return arith::ConstantOp::create(b, b.getI64IntegerAttr(static_cast<int64_t>(v)));
  };
  auto xorShift = [&](Value v, uint64_t s) -> Value {
    return arith::XOrIOp::create(b, v, arith::ShRUIOp::create(b, v, c(s)));
  };
  z = arith::MulIOp::create(b, xorShift(z, 30), c(0xBF58476D1CE4E5B9ull));
  z = arith::MulIOp::create(b, xorShift(z, 27), c(0x94D049BB133111EBull));
  return xorShift(z, 31);
}

/// The loop over a launch's blocks: one scf.for over the linear block ids
/// L = x + gx (y + gy z) in the order `order` asks for, with the body's
/// insertion point set in `b`. Returns the block ids (x, y, z) of the
/// iteration. `shuffle` runs them in the permutation that a Fisher-Yates
/// shuffle (swaps i <-> j for i = n-1 .. 1, j = mix64(key + i golden) mod
/// (i + 1), key = mix64(seed + (launchNo + 1) golden), `shuffleKey`, an
/// i64 value) makes of 0..n-1, built in a host buffer before the loop and
/// freed after it: a pure function of seed, launch number and grid, the same
/// on every run.
gpu::KernelDim3 emitBlockLoop(OpBuilder &b, Location loc, gpu::KernelDim3 grid,
                              moe::EmulatedBlockOrder order, Value shuffleKey) {
  ImplicitLocOpBuilder ib(loc, b);
  IRB e(ib);
  Value gxy = e.muli(grid.x, grid.y);
  Value n = e.muli(gxy, grid.z);
  Value perm;
  if (order == moe::EmulatedBlockOrder::shuffle) {
    Type i64 = ib.getI64Type();
    perm = memref::AllocOp::create(ib, MemRefType::get({ShapedType::kDynamic}, ib.getIndexType()),
                                   ValueRange{n});
    e.forEach(e.idx(0), n, e.idx(1), [&](IRB &e, Value i) { e.store(i, perm, i); });
    // k = 1 .. n, i = n - k: n-1 down to 0 (i = 0 swaps with itself).
    e.forEach(e.idx(1), e.addi(n, e.idx(1)), e.idx(1), [&](IRB &e, Value k) {
      Value i = e.subi(n, k);
      Value i64i = arith::IndexCastUIOp::create(e.b, i64, i);
      Value h = emitMix64(
          e.b, arith::AddIOp::create(
                   e.b, shuffleKey,
                   arith::MulIOp::create(
                       e.b, i64i,
                       arith::ConstantOp::create(e.b, e.b.getI64IntegerAttr(int64_t(kGolden))))));
      Value bound = arith::AddIOp::create(
          e.b, i64i, arith::ConstantOp::create(e.b, e.b.getI64IntegerAttr(1)));
      Value j = arith::IndexCastUIOp::create(e.b, e.index(), arith::RemUIOp::create(e.b, h, bound));
      Value pi = e.load(perm, i), pj = e.load(perm, j);
      e.store(pj, perm, i);
      e.store(pi, perm, j);
    });
  }
  auto loop = scf::ForOp::create(ib, e.idx(0), n, e.idx(1));
  if (perm) {
    OpBuilder after(loop);
    after.setInsertionPointAfter(loop);
    memref::DeallocOp::create(after, loc, perm);
  }
  b.setInsertionPointToStart(loop.getBody());
  ImplicitLocOpBuilder lb(loc, b);
  IRB le(lb);
  Value iv = loop.getInductionVar(), linear = iv;
  if (order == moe::EmulatedBlockOrder::reverse)
    linear = le.subi(le.subi(n, le.idx(1)), iv);
  else if (order == moe::EmulatedBlockOrder::shuffle)
    linear = le.load(perm, iv);
  return {le.remui(linear, grid.x), le.remui(le.divui(linear, grid.x), grid.y),
          le.divui(linear, gxy)};
}

/// A shared buffer of an emulated block: a workgroup attribution
/// (dynamicOffset -1) or a view of the dynamic shared memory at
/// dynamicOffset bytes; its host memref.
struct SharedBuffer {
  MemRefType type; // the kernel's type
  Value host;
  int64_t align;
  int64_t dynamicOffset;
};

/// The memref.view ops of the kernel's gpu.dynamic_shared_memory: in the
/// entry block, constant byte offsets, static shapes (what the emulation
/// places in the shared window); an error for anything else, or when the
/// launch passes no dynamic_shared_memory_size.
LogicalResult dynamicSharedViews(gpu::LaunchFuncOp launch, gpu::GPUFuncOp kernel,
                                 SmallVectorImpl<memref::ViewOp> &views) {
  Block &entry = kernel.getBody().front();
  WalkResult walk = kernel.walk([&](gpu::DynamicSharedMemoryOp op) {
    if (op->getBlock() != &entry) {
      op.emitError("host emulation of gpu.dynamic_shared_memory needs it in the kernel's "
                   "entry block");
      return WalkResult::interrupt();
    }
    for (Operation *user : op->getUsers()) {
      auto view = dyn_cast<memref::ViewOp>(user);
      if (!view || view->getBlock() != &entry || !getConstantIntValue(view.getByteShift()) ||
          !view.getType().hasStaticShape()) {
        user->emitError("host emulation of gpu.dynamic_shared_memory needs memref.view users "
                        "in the entry block with constant offsets and static shapes");
        return WalkResult::interrupt();
      }
      views.push_back(view);
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (!views.empty() && !launch.getDynamicSharedMemorySize())
    return launch.emitError() << "emulated launch of kernel " << kernel.getName()
                              << ": it uses gpu.dynamic_shared_memory but the launch passes no "
                                 "dynamic_shared_memory_size";
  return success();
}

LogicalResult emulateLaunch(gpu::LaunchFuncOp launch, gpu::GPUFuncOp kernel,
                            func::FuncOp threadNum, moe::EmulatedBlockOrder order,
                            Value shuffleKey) {
  OpBuilder b(launch);
  Location loc = launch.getLoc();
  if (kernel.getBody().getBlocks().size() != 1)
    return launch.emitError("emulation needs single-block kernels");
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
  gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
  // The blocks, one after another in the order of the block-order option.
  gpu::KernelDim3 ids = emitBlockLoop(b, loc, grid, order, shuffleKey);
  Value bz = ids.z, by = ids.y, bx = ids.x;
  // Workgroup memory: one buffer per block.
  SmallVector<Value> workgroup;
  for (BlockArgument arg : kernel.getWorkgroupAttributions()) {
    auto type = cast<MemRefType>(arg.getType());
    workgroup.push_back(memref::AllocOp::create(
        b, loc, MemRefType::get(type.getShape(), type.getElementType())));
  }
  // The block's shared buffers: the workgroup attributions, then the views
  // of the dynamic shared memory (one byte buffer of the launch's size).
  SmallVector<SharedBuffer> shared;
  for (auto [i, arg] : llvm::enumerate(kernel.getWorkgroupAttributions())) {
    int64_t align = 16;
    if (auto a = dyn_cast_or_null<IntegerAttr>(
            kernel.getWorkgroupAttributionAttr(i, LLVM::LLVMDialect::getAlignAttrName())))
      align = std::max<int64_t>(align, a.getInt());
    shared.push_back({cast<MemRefType>(arg.getType()), workgroup[i], align, -1});
  }
  SmallVector<memref::ViewOp> dynViews;
  if (failed(dynamicSharedViews(launch, kernel, dynViews)))
    return failure();
  if (!dynViews.empty()) {
    ImplicitLocOpBuilder ib(loc, b);
    IRB e(ib);
    Value bytes = e.toIndex(launch.getDynamicSharedMemorySize());
    Value buf = memref::AllocOp::create(
        b, loc, MemRefType::get({ShapedType::kDynamic}, b.getI8Type()), ValueRange{bytes});
    for (memref::ViewOp view : dynViews) {
      auto type = cast<MemRefType>(view.getType());
      int64_t offset = *getConstantIntValue(view.getByteShift());
      int64_t size = type.getNumElements() * llvm::divideCeil(type.getElementTypeBitWidth(), 8);
      failUnless(e, launch->getParentOfType<ModuleOp>(), e.ule(e.idx(offset + size), bytes),
                 ("emulated launch of kernel " + kernel.getName() + ": memref.view of bytes " +
                  Twine(offset) + ".." + Twine(offset + size) +
                  " of gpu.dynamic_shared_memory is past the launch's "
                  "dynamic_shared_memory_size")
                     .str());
      Value host = memref::ViewOp::create(
          b, loc, MemRefType::get(type.getShape(), type.getElementType()), buf,
          e.idx(offset), ValueRange{});
      shared.push_back({type, host, 16, offset});
    }
    workgroup.push_back(buf); // freed with the workgroup buffers
  }
  // Host buffers of the warp-level ops.
  bool hasLdmatrix = false, hasMma = false, hasAsync = false, hasWgmma = false;
  kernel.walk([&](Operation *op) {
    hasLdmatrix |= isa<nvgpu::LdMatrixOp>(op);
    hasMma |= isa<NVVM::MmaOp>(op);
    hasAsync |= isa<nvgpu::DeviceAsyncCopyOp>(op);
    hasWgmma |= isa<NVVM::WgmmaMmaAsyncOp>(op);
  });
  WarpScratch scratch;
  WgmmaScratch wgScratch;
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
    if (hasWgmma) {
      Type ix = ib.getIndexType();
      wgScratch.state = hostBuffer(ix, e.muli(block.x, e.idx(kWgFields)));
      wgScratch.slots = hostBuffer(ix, e.muli(block.x, e.idx(kWgCap * kSlotFields)));
      wgScratch.acc = hostBuffer(ib.getF32Type(), e.muli(block.x, e.idx(kWgCap * 2 * maxHalfN)));
      // A shadow word per element of the 16-bit buffers (the wgmma
      // operands), zero: never written through the generic proxy.
      for (const SharedBuffer &buffer : shared) {
        MemRefType type = buffer.type;
        if (type.getElementTypeBitWidth() != 16) {
          wgScratch.shadow.push_back(Value());
          wgScratch.readers.push_back(Value());
          continue;
        }
        Value n = e.idx(type.getNumElements());
        Value shadow = hostBuffer(ix, n), readers = hostBuffer(e.i32(), n);
        e.forEach(e.idx(0), n, e.idx(1), [&](IRB &e, Value i) {
          e.store(e.idx(0), shadow, i);
          e.store(e.ci32(0), readers, i);
        });
        wgScratch.shadow.push_back(shadow);
        wgScratch.readers.push_back(readers);
      }
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
  for (auto [i, view] : llvm::enumerate(dynViews))
    map.map(view.getResult(), shared[numWorkgroup + i].host);
  for (Operation &op : entry.without_terminator())
    if (!isa<gpu::DynamicSharedMemoryOp>(op) &&
        !llvm::is_contained(dynViews, dyn_cast<memref::ViewOp>(op)))
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
    // The attributions in order, then the dynamic shared memory (16-byte
    // aligned, as MLIR's NVVM lowering declares it) with its views at their
    // byte offsets.
    int64_t at = 0, dynamicBase = -1;
    for (const SharedBuffer &buffer : shared) {
      MemRefType type = buffer.type;
      int64_t bytes = type.getNumElements() * llvm::divideCeil(type.getElementTypeBitWidth(), 8);
      int64_t base;
      if (buffer.dynamicOffset < 0) {
        base = at = llvm::alignTo(at, buffer.align);
        at += bytes;
      } else {
        if (dynamicBase < 0)
          dynamicBase = llvm::alignTo(at, 16);
        base = dynamicBase + buffer.dynamicOffset;
      }
      window.buffers.push_back(buffer.host);
      window.base.push_back(base);
      window.bytes.push_back(bytes);
      window.elt.push_back(type.getElementType());
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
  SmallVector<NVVM::WgmmaMmaAsyncOp> wgSites;
  parallel.walk([&](NVVM::WgmmaMmaAsyncOp op) { wgSites.push_back(op); });
  WarpOpEmulator warpEmulator(parallel, tid, scratch, sites, window, wgScratch, wgSites,
                              kernel.getName());
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointAfter(tid.getDefiningOp());
    ImplicitLocOpBuilder ib(loc, b);
    IRB e(ib);
    warpEmulator.initThread(e);
  }
  if (!wgSites.empty()) {
    // The kernel's accesses the wgmma model watches, found before the warp
    // ops are emulated (their emulation adds its own): generic-proxy stores
    // into the 16-bit workgroup buffers, and accesses to accumulator
    // registers (values of a wgmma's accumulator struct type, other than
    // wgmma operands and control-flow plumbing).
    DenseSet<Type> accTypes;
    for (NVVM::WgmmaMmaAsyncOp op : wgSites)
      accTypes.insert(op.getResults().getType());
    SmallVector<memref::StoreOp> stores;
    SmallVector<Operation *> accOps;
    DenseSet<Operation *> accSet;
    parallel.walk([&](Operation *op) {
      if (auto st = dyn_cast<memref::StoreOp>(op)) {
        if (llvm::is_contained(window.buffers, st.getMemRef()))
          stores.push_back(st);
        return;
      }
      if (isa<NVVM::WgmmaMmaAsyncOp, LLVM::PoisonOp, LLVM::UndefOp, scf::YieldOp, scf::ForOp,
              scf::IfOp, scf::WhileOp, scf::ConditionOp, cf::BranchOp, cf::CondBranchOp>(op))
        return;
      auto isAcc = [&](Type t) { return accTypes.contains(t); };
      if (llvm::any_of(op->getOperandTypes(), isAcc) || llvm::any_of(op->getResultTypes(), isAcc)) {
        accOps.push_back(op);
        accSet.insert(op);
      }
    });
    for (memref::StoreOp st : stores) {
      OpBuilder sb(st->getContext());
      sb.setInsertionPointAfter(st);
      ImplicitLocOpBuilder ib(st.getLoc(), sb);
      IRB e(ib);
      warpEmulator.genericWrite(e, st.getMemRef(), st.getIndices()[0]);
    }
    for (Operation *op : accOps) {
      // One check per run of accesses: nothing between them changes the state.
      if (Operation *prev = op->getPrevNode(); prev && accSet.contains(prev))
        continue;
      OpBuilder ab(op);
      ImplicitLocOpBuilder ib(op->getLoc(), ab);
      IRB e(ib);
      warpEmulator.accumulatorAccess(e, op);
    }
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

/// The emulation of `kernel`'s launches as one private function of the
/// launch's grid and block sizes (index), its dynamic shared memory size
/// (i32, when the launch passes one), the block order's shuffle key (i64)
/// and the kernel operands: every launch of the kernel calls it, so a kernel
/// launched several times is emulated (and compiled by LLVM) once.
FailureOr<func::FuncOp> emulatedKernel(ModuleOp module, gpu::LaunchFuncOp launch,
                                       gpu::GPUFuncOp kernel, func::FuncOp threadNum,
                                       moe::EmulatedBlockOrder order) {
  bool dynamicShared = static_cast<bool>(launch.getDynamicSharedMemorySize());
  std::string name = (llvm::Twine("__moe_emulated_") + launch.getKernelModuleName().getValue() +
                      "_" + launch.getKernelName().getValue() + (dynamicShared ? "_dsm" : ""))
                         .str();
  if (auto f = module.lookupSymbol<func::FuncOp>(name))
    return f;
  MLIRContext *ctx = module.getContext();
  Location loc = launch.getLoc();
  OpBuilder b(ctx);
  Type index = b.getIndexType();
  SmallVector<Type> types(6, index);
  if (dynamicShared)
    types.push_back(b.getI32Type());
  types.push_back(b.getI64Type());
  llvm::append_range(types, launch.getKernelOperands().getTypes());
  b.setInsertionPointToEnd(module.getBody());
  auto f = func::FuncOp::create(b, loc, name, b.getFunctionType(types, {}));
  f.setPrivate();
  Block *body = f.addEntryBlock();
  b.setInsertionPointToStart(body);
  auto args = body->getArguments();
  gpu::KernelDim3 grid{args[0], args[1], args[2]}, block{args[3], args[4], args[5]};
  unsigned next = 6;
  Value dsm = dynamicShared ? args[next++] : Value();
  Value key = args[next++];
  auto inner =
      gpu::LaunchFuncOp::create(b, loc, kernel, grid, block, dsm, args.drop_front(next));
  func::ReturnOp::create(b, loc);
  if (failed(emulateLaunch(inner, kernel, threadNum, order, key)))
    return failure();
  return f;
}

struct EmulateGPUPass : public moe::impl::MoETestEmulateGPUBase<EmulateGPUPass> {
  using MoETestEmulateGPUBase::MoETestEmulateGPUBase;
  void runOnOperation() override {
    LLVM_DEBUG(llvm::dbgs() << "[" DEBUG_TYPE "] " << getArgument() << " on "
                            << getOperation()->getName() << " at "
                            << getOperation()->getLoc() << "\n");
    ModuleOp module = getOperation();
    func::FuncOp threadNum;
    unsigned launchNo = 0; // the launches in module order (block-order=shuffle)
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
        if (launch.getAsyncToken() || !launch.getAsyncDependencies().empty())
          return (void)(op->emitError("emulation expects synchronous GPU ops"), signalPassFailure());
        FailureOr<func::FuncOp> emulated =
            emulatedKernel(module, launch, kernel, threadNum, blockOrder);
        if (failed(emulated))
          return signalPassFailure();
        SmallVector<Value> args{launch.getGridSizeX(),  launch.getGridSizeY(),
                                launch.getGridSizeZ(),  launch.getBlockSizeX(),
                                launch.getBlockSizeY(), launch.getBlockSizeZ()};
        if (Value dsm = launch.getDynamicSharedMemorySize())
          args.push_back(dsm);
        uint64_t key = mix64(seed + (uint64_t(launchNo++) + 1) * kGolden);
        args.push_back(arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(int64_t(key))));
        llvm::append_range(args, launch.getKernelOperands());
        func::CallOp::create(b, loc, *emulated, args);
        launch.erase();
      }
    }
    // The index checks' report (convert-moe-to-gpu's check-indices): the
    // CUDA runtime's moeRuntimeIndexError records a sticky error; here the
    // CPU runtime's moeCpuExpertIndexError (same arguments, same line, every
    // kind) prints it and exits with code 1, as the CPU path does.
    if (auto decl = module.lookupSymbol<func::FuncOp>("moeRuntimeIndexError")) {
      constexpr llvm::StringLiteral cpuName = "moeCpuExpertIndexError";
      if (!module.lookupSymbol(cpuName)) {
        OpBuilder b(decl);
        auto cpuDecl = func::FuncOp::create(b, decl.getLoc(), cpuName, decl.getFunctionType());
        cpuDecl.setPrivate();
      }
      module.walk([&](func::CallOp call) {
        if (call.getCallee() == decl.getSymName())
          call.setCallee(cpuName);
      });
      decl.erase();
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
