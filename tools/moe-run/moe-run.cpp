//===- moe-run.cpp - compile and run one function of a moe module ---------===//
//
// moe-run FILE.mlir [--entry=NAME] [--input=X.npy]... [--params=P.safetensors]
//         [--fill-random [--seed=N] [--dynamic-size=N]] [--output=Y.npy]...
//         [--repeat=N] [--timing] [--device=auto|cpu|cuda]
//
// Parses FILE (moe + every upstream dialect), records the entry function's
// signature, binds its arguments from .npy / .safetensors files or seeded
// random values, lowers and JIT-compiles it through a backend (Backend.h)
// and prints a checksum line per result. Every error is one line on stderr,
// "moe-run: ...", and exit code 1 (MLIR diagnostics about the input IR are
// printed as usual before exiting with 1).
//
//===----------------------------------------------------------------------===//

#include "tools/moe-run/Backend.h"
#include "tools/moe-run/Binding.h"
#include "tools/moe-run/Files.h"
#include "tools/moe-run/Progress.h"
#include "tools/moe-run/RandomFill.h"
#include "tools/diagnostics/OneLineDiagnostic.h"
#include "tools/diagnostics/OptLevel.h"

#include "dialect/MoEAttrs.h"
#include "dialect/MoEDialect.h"
#include "passes/Passes.h"
#include "lowering/cpu/Passes.h"
#include "lowering/gpu/Passes.h"
#include "lowering/InitAllMoE.h"
#include "runtime/io/Checkpoint.h"
#include "runtime/io/TensorIO.h"

#include "mlir/Support/DebugStringHelper.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <limits>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#ifndef MOE_RUN_C_RUNNER_UTILS
#define MOE_RUN_C_RUNNER_UTILS "/usr/lib/llvm-22/lib/libmlir_c_runner_utils.so"
#endif
#include "runtime/cpu/AsyncRuntime.h"
#include "runtime/cuda/CudaRuntime.h"
#include "Spmd.h"
#include "tools/version/Version.h"

#ifndef MOE_RUN_ASYNC_RUNTIME
#define MOE_RUN_ASYNC_RUNTIME "libMoEAsyncRuntime.so"
#endif

using namespace mlir;
using ::moe::run::HostTensor;
using ::moe::run::ProgressMode;
using ::moe::run::ProgressOptions;
using ::moe::run::ProgressStep;
using ::moe::run::Signature;
using ::moe::run::SplitMix64;
using ::moe::run::ValueInfo;
using ::moe::run::argName;
using ::moe::run::checkAllocatable;
using ::moe::run::checkPaths;
using ::moe::run::concreteTypeString;
using ::moe::run::describeArgument;
using ::moe::run::fileTensorDesc;
using ::moe::run::fillRandomValues;
using ::moe::run::saveArgPath;
using ::moe::run::shapeFits;
using ::moe::run::writeFileAtomically;
namespace io = ::moe::io;
namespace fs = llvm::sys::fs;
namespace spmd = ::moe::run::spmd;

//===----------------------------------------------------------------------===//
// Command line
//===----------------------------------------------------------------------===//

namespace {

enum class Device { Auto, Cpu, Cuda };

llvm::cl::OptionCategory runCategory("moe-run options");

llvm::cl::opt<std::string> inputFile(llvm::cl::Positional,
                                     llvm::cl::desc("FILE.mlir"),
                                     llvm::cl::Required,
                                     llvm::cl::cat(runCategory));

llvm::cl::opt<std::string>
    entryName("entry",
              llvm::cl::desc("Function to run (default: the only public "
                             "func.func with a body); NAME_vjp where the file "
                             "has @NAME only runs the gradient that "
                             "--moe-generate-vjp adds"),
              llvm::cl::value_desc("NAME"), llvm::cl::cat(runCategory));

llvm::cl::list<std::string> inputPaths(
    "input",
    llvm::cl::desc("Binds the next argument without moe.param, in order "
                   "(repeatable; the dtype must match, except that f32 binds "
                   "to bf16/f16 by rounding to nearest even; static "
                   "dimensions must match, dynamic ones take the file's)"),
    llvm::cl::value_desc("PATH.npy"), llvm::cl::cat(runCategory));

llvm::cl::list<std::string> paramsPaths(
    "params",
    llvm::cl::desc("Binds every argument {moe.param = \"NAME\"} to the "
                   "tensor NAME and assembles every {moe.param = "
                   "#moe.checkpoint<...>} argument (shape must match; "
                   "F32/F16/BF16 are converted to the argument's float type). "
                   "A .safetensors file, a Hugging Face checkpoint directory "
                   "or its model.safetensors.index.json; repeatable (a tensor "
                   "defined in two files is an error)"),
    llvm::cl::value_desc("PATH.safetensors"), llvm::cl::cat(runCategory));

llvm::cl::opt<bool> fillRandom(
    "fill-random",
    llvm::cl::desc("Give every argument not bound by a file seeded random "
                   "values (see the overview above)"),
    llvm::cl::cat(runCategory));

llvm::cl::opt<uint64_t>
    seed("seed", llvm::cl::desc("Seed of --fill-random (default 0)"),
         llvm::cl::value_desc("N"), llvm::cl::init(0),
         llvm::cl::cat(runCategory));

llvm::cl::opt<int64_t> dynamicSize(
    "dynamic-size",
    llvm::cl::desc("With --fill-random, the size of every dynamic dimension "
                   "of an argument it fills (default 16, 1 <= N <= 2^31)"),
    llvm::cl::value_desc("N"), llvm::cl::init(16),
    llvm::cl::cat(runCategory));

llvm::cl::list<std::string> outputPaths(
    "output",
    llvm::cl::desc("Writes a result (repeatable; give one per result, or "
                   "none)"),
    llvm::cl::value_desc("PATH.npy"), llvm::cl::cat(runCategory));

/// The largest --repeat: far more runs than any timing needs, and small
/// enough that the run count (N + 1) and the timing vector cannot overflow.
constexpr uint64_t kMaxRepeat = 1000000;
/// The largest --dynamic-size (the size of a dynamic dimension moe-run
/// allocates; the lowered code indexes with i32 in places).
constexpr int64_t kMaxDynamicSize = int64_t(1) << 31;

llvm::cl::opt<uint64_t>
    repeat("repeat",
           llvm::cl::desc("One warm-up run, then N timed runs; prints "
                          "'median-ms: X' (default 0: a single untimed run; "
                          "N <= 1000000)"),
           llvm::cl::value_desc("N"), llvm::cl::init(0),
           llvm::cl::cat(runCategory));

llvm::cl::opt<bool> jitDebugListeners(
    "jit-debug-listeners",
    llvm::cl::desc("Register the JIT's perf and GDB listeners (perf jitdump "
                   "files, ~/.debug/jit or /tmp/.debug/jit directories); off "
                   "by default so that a run leaves no files behind"),
    llvm::cl::init(false), llvm::cl::cat(runCategory));

llvm::cl::opt<bool> spmdVerbose(
    "spmd-verbose",
    llvm::cl::desc("Under mpirun (an SPMD module of --moe-shard-experts): "
                   "every rank prints on stderr the parameter bytes it read "
                   "(its own experts' slices and the replicated tensors)"),
    llvm::cl::init(false), llvm::cl::cat(runCategory));

llvm::cl::opt<int> optLevel(
    "opt-level",
    llvm::cl::desc("LLVM optimization level of the JIT-compiled code, 0 to 3: "
                   "the IR pipeline (O0..O3) and the code generator (None, "
                   "Less, Default, Aggressive). Default 3, or "
                   "$MOE_RUN_OPT_LEVEL when set. Lower levels compile faster "
                   "(a small gradient at 0: under half the time) and run "
                   "slower; the results are the same bits (the lowered code "
                   "carries no fast-math flags, so no level reassociates or "
                   "contracts). Code with AMX tiles compiles at 1 when 0 "
                   "is asked for (LLVM cannot compile it at 0)"),
    llvm::cl::value_desc("N"), llvm::cl::init(-1), llvm::cl::cat(runCategory));

llvm::cl::opt<std::string> cacheDir(
    "cache-dir",
    llvm::cl::desc("cpu: keep the compiled code in DIR and reuse it when the same module is "
                   "run again with the same flags (the key: the module as parsed, the "
                   "lowering pipeline with its options, the opt level, the CPU and its "
                   "features, moe-run's build); processes compiling the same module wait "
                   "for the first (the ranks of an MPI job compile once). Default: "
                   "$MOE_RUN_CACHE_DIR when set, else no cache. Nothing is evicted"),
    llvm::cl::value_desc("DIR"), llvm::cl::cat(runCategory));

llvm::cl::opt<bool> timing(
    "timing",
    llvm::cl::desc("Print 'compile-ms: X', the time of lowering and JIT "
                   "compilation in milliseconds"),
    llvm::cl::cat(runCategory));

llvm::cl::opt<Device> device(
    "device", llvm::cl::desc("Where to run (default auto)"),
    llvm::cl::values(
        clEnumValN(Device::Auto, "auto",
                   "cuda when a CUDA driver and GPU are usable, else cpu "
                   "(says which on stderr)"),
        clEnumValN(Device::Cpu, "cpu", "the host, through the MLIR JIT"),
        clEnumValN(Device::Cuda, "cuda",
                   "an NVIDIA GPU: kernels through the NVPTX pipeline for the "
                   "device's compute capability, launched by libMoECudaRuntime")),
    llvm::cl::init(Device::Auto), llvm::cl::cat(runCategory));

llvm::cl::opt<bool> cpuParallel(
    "cpu-parallel",
    llvm::cl::desc("On the cpu, run the parallel loops (router, gate, expert "
                   "GEMMs, combine) on all cores (default true; false gives "
                   "the single-thread baseline)"),
    llvm::cl::init(true), llvm::cl::cat(runCategory));

llvm::cl::opt<bool> cpuBf16Dot(
    "cpu-bf16-dot",
    llvm::cl::desc("On the cpu, bf16 expert GEMMs use the AVX512_BF16 dot "
                   "product when the host has it (default true; false: bf16 "
                   "extended to f32 and FMAs, the path of CPUs without it)"),
    llvm::cl::init(true), llvm::cl::cat(runCategory));

llvm::cl::opt<bool> cpuFp8Dot(
    "cpu-fp8-dot",
    llvm::cl::desc("On the cpu, FP8 expert GEMMs with bf16 tokens decode the "
                   "codes to bf16 by byte lookups (AVX512_VBMI) and use the "
                   "dot product when the host has both (default true; false: "
                   "the codes widened to f32 and FMAs)"),
    llvm::cl::init(true), llvm::cl::cat(runCategory));

llvm::cl::opt<bool> cpuAmx(
    "cpu-amx",
    llvm::cl::desc("On the cpu, bf16 expert GEMMs with the dot product run on "
                   "the AMX tile unit when the host has it (default true; "
                   "false: vdpbf16ps)"),
    llvm::cl::init(true), llvm::cl::cat(runCategory));

llvm::cl::opt<bool> retainMemory(
    "retain-memory",
    llvm::cl::desc("Keep freed memory in the process for the next allocation "
                   "(glibc: large buffers from the heap, not mmap, and no "
                   "trimming), so that the buffers of a call reuse the pages "
                   "of the previous call's instead of page-faulting fresh "
                   "zeroed ones (default true; MALLOC_MMAP_MAX_ or "
                   "MALLOC_TRIM_THRESHOLD_ in the environment take "
                   "precedence)"),
    llvm::cl::init(true), llvm::cl::cat(runCategory));

llvm::cl::opt<std::string> cpuName(
    "mcpu",
    llvm::cl::desc("On the cpu, the CPU to compile for (an LLVM x86 CPU name "
                   "such as haswell, znver3, skylake-avx512; default native: "
                   "this machine). It sets the JIT's target and chooses each "
                   "op's #moe.cpu_config (--moe-cpu-configure); the CPU must "
                   "be able to run what it names"),
    llvm::cl::init("native"), llvm::cl::cat(runCategory));

llvm::cl::opt<std::string> saveArgs(
    "save-args",
    llvm::cl::desc("Write every argument, as bound (from files or "
                   "--fill-random), to DIR/arg<I>.npy before running (bf16 as "
                   "exact f32, as --output does); DIR must be an existing "
                   "directory"),
    llvm::cl::value_desc("DIR"), llvm::cl::cat(runCategory));

llvm::cl::opt<ProgressMode> progress(
    "progress",
    llvm::cl::desc("Progress lines on stderr for steps (reading parameters, "
                   "--fill-random, compiling, running, writing) that take "
                   "longer than 2 s (default auto: when stderr is a "
                   "terminal)"),
    llvm::cl::values(clEnumValN(ProgressMode::Auto, "auto",
                                "when stderr is a terminal"),
                     clEnumValN(ProgressMode::Always, "always", "always"),
                     clEnumValN(ProgressMode::Never, "never", "never")),
    llvm::cl::init(ProgressMode::Auto), llvm::cl::cat(runCategory));
llvm::cl::opt<unsigned> progressAfterMs(
    "progress-after-ms",
    llvm::cl::desc("With --progress, report a step once it has taken this "
                   "many milliseconds (default 2000)"),
    llvm::cl::init(2000), llvm::cl::Hidden, llvm::cl::cat(runCategory));

llvm::cl::opt<bool> dumpLowered(
    "dump-lowered",
    llvm::cl::desc("Print the lowered (LLVM dialect) module to stdout "
                   "before running"),
    llvm::cl::cat(runCategory));

const char *const overview =
    R"(moe-run: compile and run one function of a moe module

Arguments. The entry's arguments must be ranked tensors of f32, f16, bf16,
i32, i64, f8E4M3FN or i4 (quantized expert weights, docs/spec.md §2.1:
FP8 codes bound from F8_E4M3 tensors, int4 codes from U8 tensors holding
one code 0..15 per byte, as an i4 tensor is laid out in memory; or by
--fill-random). Arguments with {moe.param = "NAME"} are parameters, bound by name
from --params; the others are inputs, bound in order by --input. Arguments
with {moe.param = #moe.checkpoint<["NAME", ...], transpose>} are assembled
once, at load, from the tensors of the --params files (memory-mapped):
per-expert tensors ({e} in the names) stacked, transposed, concatenated
along the last dimension. An f32 .npy
binds to a bf16 or f16 argument by rounding to nearest even; otherwise the
.npy's dtype must be the argument's. Static dimensions must match the file;
a dynamic dimension (tensor<?x64xf32>) takes its size from the file, or,
with --fill-random, the size --dynamic-size=N (default 16). Results are
ranked tensors of the same element types; a dynamically shaped result gets
the size the function returns.

--fill-random. Every argument not bound by a file gets values from a
deterministic generator: a splitmix64 generator seeded with --seed gives one
64-bit output per argument (argument #i takes output #i+1), which seeds that
argument's own splitmix64 stream. Each float element is
  z = sqrt(-2 ln u1) * cos(2 pi u2)   (Box-Muller, first value only)
with u1, u2 uniform in (0, 1] built from the top 53 bits of two successive
64-bit outputs, times a scale, rounded to the element type:
  inputs:                                scale 1
  parameters of rank >= 2, shape [..,K,N]: scale 1/sqrt(K) (K is the fan-in:
                                         D for [D,E] and [E,D,H], H for [E,H,D])
  parameters of rank 1, shape [N]:       scale 1/sqrt(N)
  parameters of rank 0:                  scale 1
  f8E4M3FN arguments (quantized weights): scale 1 (their scales, f32
                                         parameters, carry the magnitude)
  i4 arguments (int4 codes):             the top 4 bits of the element's
                                         first 64-bit output (uniform over
                                         0..15), not z
(the shape after --dynamic-size is applied).
Integer arguments (e.g. a tensor<i64> seed) get the value of --seed in every
element (truncated to 32 bits for i32).

Output. Per result, one line on stdout:
  result #I: TYPE checksum: sum=S abs_sum=A
where TYPE is the result's type with the sizes it came back with (e.g.
tensor<37x4xf32> for a tensor<?x4xf32> result), and S and A are the sum and
the sum of absolute values of the elements (bf16/f16 widened exactly),
accumulated as double, printed with printf's %.6e. With --timing a line
  compile-ms: X
follows (X: lowering plus JIT compilation in milliseconds, %.3f), and with
--repeat=N a line
  median-ms: X
(X: the median wall time of the N timed runs in milliseconds, %.3f).
--output writes results as .npy: bf16 results as f32 (exact; numpy has no
bfloat16), f16 results as f16, the others in their own dtype.
--save-args=DIR writes the arguments as they were bound (DIR/arg<I>.npy, I
the argument's position, same dtypes as --output; f8E4M3FN as exact f32), so a --fill-random run
can be repeated elsewhere from files, and DIR/args.json: per argument its
file, type, dtype, concrete shape and "from" ("file", "seed" for integers,
or "fill-random" with its "stream" seed in hex and its "scale"), enough to
regenerate a filled argument with the generator above instead of copying it.

The CPU path lowers with moe's cpu pipeline (results as out-parameters, or
returned when a result is dynamically shaped) and JIT-compiles at
--opt-level (default -O3), or links the object --cache-dir kept; the
function never writes into its argument buffers.

Errors: one line on stderr starting with "moe-run: ", exit code 1.
)";

/// Whether an error line has been printed: moe-run prints one error line,
/// the first (an MLIR diagnostic, or its own).
bool errorPrinted = false;

/// Prints "moe-run: MESSAGE" (unless an error was printed already) and
/// returns the exit code 1.
int fail(const llvm::Twine &message) {
  llvm::outs().flush();
  if (!errorPrinted)
    // One write per line: the ranks of an mpirun job share stderr.
    llvm::errs() << ("moe-run: " + ::moe::run::spmd::messagePrefix() +
                     message.str() + "\n");
  errorPrinted = true;
  return 1;
}

/// MLIR diagnostics as moe-run prints them: the first error as one line
/// "moe-run: FILE:LINE:COL: message" (its notes and later errors dropped),
/// warnings as one line each; remarks are dropped.
void installDiagnosticHandler(MLIRContext &context) {
  context.getDiagEngine().registerHandler([](Diagnostic &diag) {
    switch (diag.getSeverity()) {
    case DiagnosticSeverity::Error:
      fail(mlir::moe::tools::oneLineDiagnostic(diag));
      break;
    case DiagnosticSeverity::Warning:
      if (!errorPrinted)
        llvm::errs() << "moe-run: warning: " << mlir::moe::tools::oneLineDiagnostic(diag)
                     << "\n";
      break;
    case DiagnosticSeverity::Note:
    case DiagnosticSeverity::Remark:
      break;
    }
    return success();
  });
}

std::optional<io::DType> toDType(Type type) {
  if (type.isF32())
    return io::DType::F32;
  if (type.isF16())
    return io::DType::F16;
  if (type.isBF16())
    return io::DType::BF16;
  if (type.isSignlessInteger(32))
    return io::DType::I32;
  if (type.isSignlessInteger(64))
    return io::DType::I64;
  // The storage type of FP8 quantized expert weights (docs/spec.md §2.1).
  if (isa<Float8E4M3FNType>(type))
    return io::DType::F8E4M3;
  // int4 codes, one per byte as LLVM lays out an i4 memref: U8 tensors.
  if (type.isSignlessInteger(4))
    return io::DType::U8;
  return std::nullopt;
}

/// Fills `info` from `type`; returns an error (without the subject) if the
/// type is not supported.
std::optional<std::string> describeType(Type type, ValueInfo &info) {
  info.typeString = debugString(type);
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return "has type " + info.typeString +
           "; moe-run supports ranked tensors of f32, f16, bf16, i32, i64, f8E4M3FN and i4";
  auto dtype = toDType(tensor.getElementType());
  if (!dtype)
    return "has element type " + debugString(tensor.getElementType()) + " (" +
           info.typeString + "); moe-run supports f32, f16, bf16, i32, i64, f8E4M3FN and i4";
  info.dtype = *dtype;
  for (int64_t d : tensor.getShape())
    info.shape.push_back(ShapedType::isDynamic(d) ? ValueInfo::kDynamic : d);
  if (info.hasDynamicShape())
    return std::nullopt; // Checked once the sizes are known.
  auto count = io::shapeNumElements(info.shape);
  // Refuse sizes that cannot possibly be allocated (> 2^48 bytes).
  if (!count || *count > (int64_t(1) << 48) /
                             static_cast<int64_t>(io::elementSize(*dtype)))
    return "has type " + info.typeString + ", too large to allocate";
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Backends
//===----------------------------------------------------------------------===//

/// The chip moe-run compiles for on the detected GPU: sm_XY of its compute
/// capability, except that 9.0 gets sm_90a. The arch-specific instructions of
/// sm_90a (wgmma.mma_async, docs/gpu.md "wgmma (sm_90a)") run on exactly
/// compute capability 9.0, which is the device found, so the prefill GEMMs
/// take wgmma as `moe-compile --chip=sm_90a` does (before, an H100 ran the
/// sm_90 mma.sync kernels under moe-run). Empty, with `why`, on failure.
std::string deviceChip(std::string *why) {
  std::string chip = moeCudaChip(why);
  return chip == "sm_90" ? "sm_90a" : chip;
}

/// Chooses the backend for --device. Returns nullptr after printing the
/// error. `note` receives a line to print once the run starts (auto's choice).
std::unique_ptr<::moe::run::Backend> selectBackend(Device dev,
                                                   std::string &note) {
  ::moe::run::CpuBackendOptions cpuOptions;
  cpuOptions.dumpLowered = dumpLowered;
  cpuOptions.parallel = cpuParallel;
  cpuOptions.bf16Dot = cpuBf16Dot;
  cpuOptions.amx = cpuAmx;
  cpuOptions.fp8Dot = cpuFp8Dot;
  cpuOptions.cpu = cpuName;
  cpuOptions.jitDebugListeners = jitDebugListeners;
  llvm::Expected<unsigned> level = mlir::moe::tools::resolveOptLevel(
      optLevel, optLevel.getNumOccurrences() != 0, "MOE_RUN_OPT_LEVEL");
  if (!level) {
    fail(llvm::toString(level.takeError()));
    return nullptr;
  }
  cpuOptions.optLevel = *level;
  if (cacheDir.getNumOccurrences())
    cpuOptions.cacheDir = cacheDir;
  else if (const char *env = std::getenv("MOE_RUN_CACHE_DIR"))
    cpuOptions.cacheDir = env;
  cpuOptions.sharedLibs.push_back(MOE_RUN_C_RUNNER_UTILS);
  cpuOptions.sharedLibs.push_back(MOE_RUN_ASYNC_RUNTIME);
  cpuOptions.sharedLibs.push_back(MOE_RUN_CPU_RUNTIME);
  // SPMD modules (--moe-shard-experts) call the system MPI.
  if (std::string mpi = ::moe::run::spmd::mpiLibrary(); !mpi.empty())
    cpuOptions.sharedLibs.push_back(mpi);
  switch (dev) {
  case Device::Cuda: {
    std::string why;
    if (!moeCudaAvailable(&why)) {
      fail("--device=cuda: " + ::moe::run::stripRuntimePrefix(why));
      return nullptr;
    }
    std::string chip = deviceChip(&why);
    if (chip.empty()) {
      fail("--device=cuda: " + ::moe::run::stripRuntimePrefix(why));
      return nullptr;
    }
    cpuOptions.sharedLibs.push_back(MOE_RUN_CUDA_RUNTIME);
    return ::moe::run::createCudaBackend(cpuOptions, chip);
  }
  case Device::Auto: {
    std::string why;
    if (moeCudaAvailable(&why)) {
      std::string chip = deviceChip(&why);
      if (!chip.empty()) {
        note = "moe-run: device auto: using cuda (" + moeCudaDeviceName() + ", " +
               chip + ")";
        cpuOptions.sharedLibs.push_back(MOE_RUN_CUDA_RUNTIME);
        return ::moe::run::createCudaBackend(cpuOptions, chip);
      }
    }
    note = "moe-run: device auto: using cpu (" + ::moe::run::stripRuntimePrefix(why) + ")";
    return ::moe::run::createCpuBackend(cpuOptions);
  }
  case Device::Cpu:
    return ::moe::run::createCpuBackend(cpuOptions);
  }
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

/// --entry=F_vjp where the module has @F but no @F_vjp: adds it with
/// --moe-generate-vjp (docs/spec.md §9), so that the gradient of a model
/// runs from the model's own file. Prints the error and returns false on
/// failure.
bool addRequestedVjp(ModuleOp module) {
  StringRef name = entryName;
  std::string base = mlir::moe::requestedVjpBase(module, name);
  if (base.empty())
    return true; // findEntry reports a missing function
  PassManager pm(module.getContext());
  mlir::moe::MoEGenerateVJPOptions options;
  options.entries = {base};
  pm.addPass(mlir::moe::createMoEGenerateVJP(options));
  if (failed(pm.run(module))) {
    fail("cannot differentiate @" + base + " in " + inputFile +
         " (the error above) to run @" + name.str());
    return false;
  }
  return true;
}

/// Drops what the entry does not use (the other public functions, e.g. @f
/// next to @f_vjp, and whatever only they call), so that only the entry is
/// lowered and compiled. Prints the error and returns false on failure.
bool keepOnlyEntry(ModuleOp module, func::FuncOp entry) {
  PassManager pm(module.getContext());
  pm.addPass(createSymbolPrivatizePass({entry.getName().str()}));
  pm.addPass(createSymbolDCEPass());
  if (failed(pm.run(module))) {
    fail("cannot drop the functions other than @" + entry.getName().str());
    return false;
  }
  return true;
}

/// Finds the entry function. Prints the error and returns null on failure.
func::FuncOp findEntry(ModuleOp module) {
  SmallVector<func::FuncOp> publicFuncs;
  for (auto func : module.getOps<func::FuncOp>())
    if (func.isPublic() && !func.isExternal())
      publicFuncs.push_back(func);
  auto list = [&] {
    std::string s;
    for (auto [i, f] : llvm::enumerate(publicFuncs))
      s += (i ? ", @" : "@") + f.getSymName().str();
    return s;
  };

  if (!entryName.empty()) {
    auto func = module.lookupSymbol<func::FuncOp>(entryName);
    if (!func) {
      fail(inputFile + " has no function @" + entryName +
           (publicFuncs.empty() ? std::string()
                                : " (public functions: " + list() + ")"));
      return nullptr;
    }
    if (func.isExternal()) {
      fail("@" + entryName + " in " + inputFile +
           " is a declaration; it has no body to run");
      return nullptr;
    }
    if (!func.isPublic()) {
      fail("@" + entryName + " in " + inputFile +
           " is not public; only public functions can be run");
      return nullptr;
    }
    return func;
  }
  if (publicFuncs.empty()) {
    fail(inputFile + " has no public function with a body to run");
    return nullptr;
  }
  if (publicFuncs.size() > 1) {
    fail(inputFile + " has " + llvm::Twine(publicFuncs.size()) +
         " public functions (" + list() + "); choose one with --entry");
    return nullptr;
  }
  return publicFuncs.front();
}

/// Records the entry's signature. Prints the error and returns false on
/// failure.
bool recordSignature(func::FuncOp func, Signature &sig) {
  sig.name = func.getSymName().str();
  FunctionType type = func.getFunctionType();
  for (unsigned i = 0; i < type.getNumInputs(); ++i) {
    ValueInfo info;
    info.index = i;
    if (auto error = describeType(type.getInput(i), info)) {
      fail("@" + sig.name + ": " + describeArgument(info) + " " + *error);
      return false;
    }
    if (Attribute attr = func.getArgAttr(i, "moe.param")) {
      if (auto checkpoint = dyn_cast<mlir::moe::CheckpointAttr>(attr)) {
        auto strings = [](ArrayRef<StringAttr> list) {
          std::vector<std::string> out;
          for (StringAttr name : list)
            out.push_back(name.str());
          return out;
        };
        io::CheckpointSpec spec;
        spec.names = strings(checkpoint.getNames());
        spec.transpose = checkpoint.getTranspose();
        spec.fp8Scales = strings(checkpoint.getFp8Scales());
        if (checkpoint.getBlock().size() == 2) {
          spec.blockN = checkpoint.getBlock()[0];
          spec.blockK = checkpoint.getBlock()[1];
        }
        // The attribute's packing by its name (io::int4PackingName spells
        // the attribute's keywords).
        for (io::Int4Packing p : {io::Int4Packing::Gptq, io::Int4Packing::GptqZeros,
                                  io::Int4Packing::Awq, io::Int4Packing::PackQuantized})
          if (mlir::moe::stringifyInt4Packing(checkpoint.getInt4()) == io::int4PackingName(p))
            spec.int4 = p;
        spec.int4Scales = strings(checkpoint.getInt4Scales());
        spec.int4Zeros = strings(checkpoint.getInt4Zeros());
        spec.group = checkpoint.getGroup();
        info.param = spec.describe();
        info.checkpoint = std::move(spec);
      } else if (auto name = dyn_cast<StringAttr>(attr)) {
        info.param = name.str();
      } else {
        fail("@" + sig.name + ": " + describeArgument(info) +
             " has a moe.param attribute that is neither a string nor a "
             "#moe.checkpoint");
        return false;
      }
    }
    sig.arguments.push_back(std::move(info));
  }
  for (unsigned i = 0; i < type.getNumResults(); ++i) {
    ValueInfo info;
    info.index = i;
    if (auto error = describeType(type.getResult(i), info)) {
      fail("@" + sig.name + ": result #" + llvm::Twine(i) + " " + *error);
      return false;
    }
    sig.results.push_back(std::move(info));
  }
  return true;
}

/// Allocates one HostTensor per value. Prints the error and returns false on
/// failure.
bool allocate(const std::vector<ValueInfo> &values, const char *what,
              std::vector<HostTensor> &out) {
  for (const ValueInfo &v : values) {
    out.emplace_back(v.dtype, v.shape);
    if (!out.back().ok()) {
      fail("cannot allocate " + llvm::Twine(out.back().byteSize()) +
           " bytes for " + what + " #" + llvm::Twine(v.index) + " (" +
           v.typeString + ")");
      return false;
    }
  }
  return true;
}

//===----------------------------------------------------------------------===//
// The steps of runMain
//===----------------------------------------------------------------------===//

/// fail() for the steps below, which print the error and return false on
/// failure.
bool failStep(const llvm::Twine &message) {
  fail(message);
  return false;
}

/// The files of the command line, as Files.h takes them.
::moe::run::CommandLineFiles commandLineFiles() {
  ::moe::run::CommandLineFiles files;
  files.inputFile = inputFile;
  files.inputPaths.assign(inputPaths.begin(), inputPaths.end());
  files.paramsPaths.assign(paramsPaths.begin(), paramsPaths.end());
  files.outputPaths.assign(outputPaths.begin(), outputPaths.end());
  files.saveArgs = saveArgs;
  return files;
}

/// --progress and --progress-after-ms, as ProgressStep takes them.
ProgressOptions progressOptions() {
  ProgressOptions options;
  options.mode = progress;
  options.afterMs = progressAfterMs;
  return options;
}

/// --retain-memory: a call's buffers (an f_vjp step allocates its weight
/// gradients and its intermediates, tens of MiB) come back from the heap on
/// the next call instead of from fresh mmap'ed pages, which the kernel
/// zeroes on first touch (measured at T=512 D=512 H=2048: about a fifth of
/// the step). The environment's own malloc settings are left alone.
void retainFreedMemory() {
#if defined(__GLIBC__)
  if (!std::getenv("MALLOC_MMAP_MAX_"))
    mallopt(M_MMAP_MAX, 0);
  if (!std::getenv("MALLOC_TRIM_THRESHOLD_"))
    mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
#endif
}

/// Registers moe-run's flags (and MLIR's, hidden), parses the command line
/// and resolves --input=@PATH.
void parseCommandLine(int argc, char **argv) {
  // Hidden, but available for debugging: --mlir-print-ir-after-all etc.
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  ::moe::installVersionPrinter("moe-run");
  llvm::cl::HideUnrelatedOptions(runCategory);
  llvm::cl::ParseCommandLineOptions(argc, argv, overview);
  if (retainMemory)
    retainFreedMemory();
  // IREE's convention: --input=@x.npy names the file x.npy (a file whose
  // name really starts with '@' is taken as it is).
  for (std::string &path : inputPaths)
    if (path.size() > 1 && path[0] == '@' && !fs::exists(path))
      path.erase(0, 1);
}

/// The checks of the flags that need no file's contents: the flags' values,
/// then the command line's files (checkPaths). Prints the error and returns
/// false on failure.
bool checkFlags() {
  if (seed.getNumOccurrences() && !fillRandom)
    return failStep("--seed has no effect without --fill-random");
  if (dynamicSize.getNumOccurrences() && !fillRandom)
    return failStep("--dynamic-size has no effect without --fill-random");
  if (dynamicSize < 1)
    return failStep("--dynamic-size must be >= 1, got " +
                    llvm::Twine(static_cast<int64_t>(dynamicSize)));
  if (dynamicSize > kMaxDynamicSize)
    return failStep("--dynamic-size must be <= 2^31, got " +
                    llvm::Twine(static_cast<int64_t>(dynamicSize)));
  if (repeat > kMaxRepeat)
    return failStep("--repeat must be <= " + llvm::Twine(kMaxRepeat) +
                    ", got " + llvm::Twine(static_cast<uint64_t>(repeat)));
  // libMoEAsyncRuntime.so reads it when the parallel loops first run; a
  // bad value is an error here rather than a warning there.
  if (const char *env = std::getenv("MOE_CPU_THREADS"); env && !moeParseCpuThreads(env))
    return failStep(moeCpuThreadsError(env));
  if (std::optional<std::string> error = checkPaths(commandLineFiles()))
    return failStep(*error);
  return true;
}

/// Registers every pass (the pipelines, --mlir-print-ir-*) and puts moe's
/// and the upstream dialects and the LLVM IR translations in `registry`.
void registerPassesAndDialects(DialectRegistry &registry) {
  registerAllPasses();
  mlir::moe::registerAllMoEPasses();
  mlir::moe::registerAllMoE(registry);
  registerAllToLLVMIRTranslations(registry);
}

/// Opens and parses the input file (its buffer goes to `sourceMgr`), with
/// moe-run's diagnostic handler installed on `context`; the parser verifies
/// the module. Prints the error and returns null on failure.
OwningOpRef<ModuleOp> parseModule(MLIRContext &context,
                                  llvm::SourceMgr &sourceMgr) {
  std::string openError;
  auto file = openInputFile(inputFile, &openError);
  if (!file) {
    fail(openError.empty() ? "cannot open " + inputFile : openError);
    return nullptr;
  }
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  installDiagnosticHandler(context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    fail("cannot parse " + inputFile); // Usually printed already.
  return module;
}

/// How the arguments and results of an SPMD module are split over the
/// ranks.
struct SpmdSplit {
  /// Which arguments and results carry moe.split (none when not SPMD).
  std::vector<bool> arguments, results;
  /// The declared shapes of the arguments on one rank (empty when not SPMD).
  std::vector<std::vector<int64_t>> localShapes;
};

/// An SPMD module (--moe-shard-experts) runs as one rank of an mpirun job:
/// arguments marked moe.split are bound whole (expert-split ones with
/// their global expert count), then sliced to this rank's part. For such a
/// module: the CPU backend (--device=auto switches to it), MPI started, and
/// `sig` with the whole shapes (`split` keeps this rank's). Prints the error
/// and returns false on failure.
bool setUpSpmd(ModuleOp module, func::FuncOp func, const std::string &fn,
               std::unique_ptr<::moe::run::Backend> &backend,
               std::string &deviceNote, Signature &sig, SpmdSplit &split) {
  auto gridRanks = spmd::gridSize(module);
  if (!gridRanks)
    return failStep(llvm::toString(gridRanks.takeError()));
  split.arguments.assign(sig.arguments.size(), false);
  split.results.assign(sig.results.size(), false);
  if (*gridRanks == 0)
    return true;
  if (llvm::StringRef(backend->name()) != "cpu") {
    if (device != Device::Auto)
      return failStep(fn + " is SPMD (--moe-shard-experts), which moe-run "
                           "runs on the CPU path only: pass --device=cpu");
    // --device=auto: the CPU path (the MPI lowering is the CPU one).
    deviceNote = "moe-run: device auto: using cpu (SPMD module)";
    backend = selectBackend(Device::Cpu, deviceNote);
    if (!backend)
      return false;
  }
  if (llvm::Error err = spmd::start(*gridRanks))
    return failStep(llvm::toString(std::move(err)));
  split.arguments = spmd::splitArguments(func);
  split.results = spmd::splitResults(func);
  for (ValueInfo &arg : sig.arguments) {
    split.localShapes.push_back(arg.shape);
    if (split.arguments[arg.index] && !arg.shape.empty() &&
        arg.shape[0] != ValueInfo::kDynamic)
      arg.shape[0] *= *gridRanks;
  }
  return true;
}

/// Sorts the arguments into inputs (without moe.param, bound by --input)
/// and parameters, and checks the counts of --output and --input and that
/// parameters have a source. Prints the error and returns false on failure.
bool checkCounts(const Signature &sig, const std::string &fn,
                 std::vector<const ValueInfo *> &inputArgs,
                 std::vector<const ValueInfo *> &paramArgs) {
  if (!outputPaths.empty() && outputPaths.size() != sig.results.size())
    return failStep(fn + " has " + llvm::Twine(sig.results.size()) +
                    " result" + (sig.results.size() == 1 ? "" : "s") +
                    ", got " + llvm::Twine(outputPaths.size()) + " --output");
  for (const ValueInfo &arg : sig.arguments)
    (arg.param ? paramArgs : inputArgs).push_back(&arg);
  if (inputPaths.size() > inputArgs.size() ||
      (!fillRandom && inputPaths.size() != inputArgs.size()))
    return failStep(fn + " takes " + llvm::Twine(inputArgs.size()) +
                    " input" + (inputArgs.size() == 1 ? "" : "s") +
                    " (arguments without moe.param), got " +
                    llvm::Twine(inputPaths.size()) + " --input");
  if (!fillRandom && paramsPaths.empty() && !paramArgs.empty()) {
    const ValueInfo &arg = *paramArgs.front();
    return failStep(describeArgument(arg) + " of " + fn + ", parameter '" +
                    *arg.param +
                    "', is not bound: pass --params=FILE.safetensors "
                    "or --fill-random");
  }
  return true;
}

/// The entry's arguments while they are bound. Each is allocated once its
/// shape is known: from its file (dynamic dimensions take the file's sizes)
/// or, for the ones --fill-random fills, from the signature and
/// --dynamic-size.
struct BoundArguments {
  explicit BoundArguments(size_t count)
      : tensors(count), bound(count, false), presliced(count, false) {}
  std::vector<HostTensor> tensors;
  std::vector<bool> bound;
  /// SPMD: split parameters read as this rank's slice.
  std::vector<bool> presliced;
  /// SPMD: parameter bytes read.
  uint64_t paramBytesRead = 0;
  /// How --fill-random made argument i (its stream seed and scale), for
  /// --save-args's args.json; none for bound, integer or SPMD-sliced ones.
  struct Fill {
    uint64_t stream;
    double scale;
  };
  std::vector<std::optional<Fill>> fills = std::vector<std::optional<Fill>>(tensors.size());
};

/// Allocates argument `arg` with the shape of `tensor` and copies `tensor`
/// into it. Prints the error and returns false on failure.
bool bindArgument(BoundArguments &args, const ValueInfo &arg,
                  const io::Tensor &tensor) {
  if (io::Status status = ::moe::run::allocateArgument(
          arg, tensor, args.tensors[arg.index]);
      !status)
    return failStep(status.error());
  args.bound[arg.index] = true;
  return true;
}

/// Binds the --input files to the inputs, in order. Prints the error and
/// returns false on failure.
bool bindInputs(const std::vector<const ValueInfo *> &inputArgs,
                BoundArguments &args) {
  for (auto [path, arg] : llvm::zip(inputPaths, inputArgs)) {
    bool wasF64 = false;
    auto tensor = io::readNpyConverting(path, arg->dtype, wasF64);
    if (!tensor)
      return failStep(tensor.error());
    if (wasF64)
      llvm::errs() << "moe-run: note: --input " << path
                   << " holds float64 data, converted to "
                   << io::dtypeName(arg->dtype)
                   << " (rounded to nearest even) for "
                   << describeArgument(*arg) << "\n";
    auto bindable = ::moe::run::bindInputTensor(tensor.take(), path, *arg);
    if (!bindable)
      return failStep(bindable.error());
    if (!bindArgument(args, *arg, *bindable))
      return false;
  }
  return true;
}

/// SPMD: binds the split parameter `arg` to this rank's experts only: rows
/// [begin, end) of dimension 0 of the tensor `found`, read from the
/// (memory-mapped) file. Prints the error and returns false on failure.
bool bindParamSlice(const io::TensorStore::Entry &found, const ValueInfo &arg,
                    BoundArguments &args) {
  const io::SafeTensorInfo *entry = found.info;
  auto [begin, end] =
      spmd::splitRange(entry->shape[0], spmd::size(), spmd::rank());
  size_t rowBytes = io::elementSize(entry->dtype);
  for (size_t d = 1; d < entry->shape.size(); ++d)
    rowBytes *= static_cast<size_t>(entry->shape[d]);
  const uint8_t *raw = found.file->rawData(*entry) + begin * rowBytes;
  std::vector<int64_t> shape = entry->shape;
  shape[0] = end - begin;
  io::Tensor part(entry->dtype, shape,
                  std::vector<uint8_t>(raw, raw + (end - begin) * rowBytes));
  args.paramBytesRead += part.data.size();
  if (entry->dtype != arg.dtype) {
    auto converted = io::convertTensor(part, arg.dtype);
    if (!converted)
      return failStep(converted.error());
    part = converted.take();
  }
  if (!bindArgument(args, arg, part))
    return false;
  args.presliced[arg.index] = true;
  return true;
}

/// Binds parameter `arg`, named by its moe.param string, to its tensor in
/// `params` (`sources`: their description); one that is not found is left
/// to --fill-random when given. Prints the error and returns false on
/// failure.
bool bindNamedParam(const io::TensorStore &params, const std::string &sources,
                    const ValueInfo &arg, const SpmdSplit &split,
                    BoundArguments &args) {
  const io::TensorStore::Entry *found = params.find(*arg.param);
  if (!found) {
    if (fillRandom)
      return true;
    return failStep("parameter '" + *arg.param + "' (argument #" +
                    llvm::Twine(arg.index) + ") not found in " + sources);
  }
  const io::SafeTensorInfo *entry = found->info;
  if (!shapeFits(arg.shape, entry->shape) ||
      (entry->dtype != arg.dtype &&
       !(io::isFloatType(entry->dtype) && io::isFloatType(arg.dtype))))
    return failStep(
        ::moe::run::bindParamTensor(*found->file, *entry, arg).error());
  if (spmd::active() && split.arguments[arg.index] && !entry->shape.empty())
    return bindParamSlice(*found, arg, args);
  auto tensor = ::moe::run::bindParamTensor(*found->file, *entry, arg);
  args.paramBytesRead += entry->dataEnd - entry->dataBegin;
  if (!tensor)
    return failStep(tensor.error());
  return bindArgument(args, arg, *tensor);
}

/// A #moe.checkpoint argument and the shape it is assembled with.
using AssembledArgument = std::pair<const ValueInfo *, std::vector<int64_t>>;

/// Assembles the #moe.checkpoint arguments (their shapes checked already)
/// from `params` into their buffers. Prints the error and returns false on
/// failure.
bool assembleCheckpointArguments(
    const io::TensorStore &params,
    const std::vector<AssembledArgument> &assembled, BoundArguments &args) {
  for (auto &[arg, shape] : assembled) {
    if (io::Status status = ::moe::run::checkAssembledArgument(*arg, shape);
        !status)
      return failStep(status.error());
    HostTensor &tensor = args.tensors[arg->index];
    tensor = HostTensor(arg->dtype, shape);
    if (!tensor.ok())
      return failStep("cannot allocate " + llvm::Twine(tensor.byteSize()) +
                      " bytes for " + describeArgument(*arg));
    if (io::Status status = io::assembleCheckpointTensor(
            params, *arg->checkpoint, shape, arg->dtype, tensor.data());
        !status)
      return failStep(status.error());
    args.bound[arg->index] = true;
  }
  return true;
}

/// Binds the parameters from the --params files. Prints the error and
/// returns false on failure.
bool bindParams(const std::vector<const ValueInfo *> &paramArgs,
                const SpmdSplit &split, BoundArguments &args) {
  ProgressStep step("reading --params", progressOptions());
  // Every file (and index) is opened and its header validated before any
  // tensor data is used.
  io::TensorStore params;
  for (const std::string &path : paramsPaths)
    if (io::Status status = params.add(path); !status)
      return failStep(status.error());
  const std::string sources = params.describeSources();
  // Checkpoint-assembled arguments: all shapes are checked first, then the
  // data is assembled once into the argument buffers.
  std::vector<AssembledArgument> assembled;
  for (const ValueInfo *arg : paramArgs) {
    if (arg->checkpoint) {
      auto shape = ::moe::run::checkpointArgumentShape(params, *arg);
      if (!shape)
        return failStep(shape.error());
      assembled.emplace_back(arg, shape.take());
      continue;
    }
    if (!bindNamedParam(params, sources, *arg, split, args))
      return false;
  }
  return assembleCheckpointArguments(params, assembled, args);
}

/// Allocates the arguments --fill-random fills (those not bound by a file):
/// dynamic dimensions get --dynamic-size. Prints the error and returns false
/// on failure.
bool allocateRandomArguments(const Signature &sig, BoundArguments &args) {
  for (const ValueInfo &arg : sig.arguments) {
    if (args.bound[arg.index])
      continue;
    std::vector<int64_t> shape = arg.shape;
    for (int64_t &d : shape)
      if (d == ValueInfo::kDynamic)
        d = dynamicSize;
    if (auto error = checkAllocatable(arg.dtype, shape))
      return failStep(describeArgument(arg) + " (" +
                      concreteTypeString(arg.dtype, shape) +
                      ", --dynamic-size=" +
                      llvm::Twine(static_cast<int64_t>(dynamicSize)) +
                      ") is " + *error);
    HostTensor &tensor = args.tensors[arg.index];
    tensor = HostTensor(arg.dtype, shape);
    if (!tensor.ok())
      return failStep("cannot allocate " + llvm::Twine(tensor.byteSize()) +
                      " bytes for " + describeArgument(arg) + " (" +
                      arg.typeString + ")");
  }
  return true;
}

/// Fills the arguments not bound by a file with the values of --fill-random
/// (every argument takes its stream seed, bound or not).
void fillRandomArguments(const Signature &sig, BoundArguments &args) {
  ProgressStep step("--fill-random", progressOptions());
  SplitMix64 master(seed);
  for (const ValueInfo &arg : sig.arguments) {
    uint64_t streamSeed = master.next();
    if (args.bound[arg.index])
      continue;
    fillRandomValues(args.tensors[arg.index], arg, streamSeed, seed);
    if (arg.dtype != io::DType::I32 && arg.dtype != io::DType::I64)
      args.fills[arg.index] = BoundArguments::Fill{
          streamSeed, ::moe::run::fillScale(arg, args.tensors[arg.index].shape())};
  }
}

/// Without --fill-random: every argument must be bound by a file. Prints the
/// error and returns false on failure.
bool checkAllBound(const Signature &sig, const std::string &fn,
                   const BoundArguments &args) {
  for (const ValueInfo &arg : sig.arguments)
    if (!args.bound[arg.index])
      return failStep(describeArgument(arg) + " of " + fn +
                      " is not bound: pass --input/--params or --fill-random");
  return true;
}

/// SPMD: back to this rank's shapes, and this rank's part of every split
/// argument that was bound whole.
void sliceSpmdArguments(Signature &sig, const SpmdSplit &split,
                        BoundArguments &args) {
  for (ValueInfo &arg : sig.arguments) {
    arg.shape = split.localShapes[arg.index];
    if (split.arguments[arg.index] && !args.presliced[arg.index]) {
      args.tensors[arg.index] = spmd::slice(args.tensors[arg.index]);
      args.fills[arg.index].reset();
    }
  }
  if (spmdVerbose)
    llvm::errs() << ("moe-run: " + spmd::messagePrefix() + "read " +
                     std::to_string(args.paramBytesRead) +
                     " parameter bytes\n");
}

/// --save-args's DIR/args.json: for each argument its file, type, concrete
/// shape and, when --fill-random made it, its stream seed (hex: 64 bits)
/// and scale, so another program can regenerate the values (--help has the
/// generator) instead of shipping them.
std::string argumentsJson(const Signature &sig, const BoundArguments &args,
                          const std::vector<std::string> &files) {
  llvm::json::Array list;
  for (const ValueInfo &arg : sig.arguments) {
    llvm::json::Object entry;
    entry["file"] = files[arg.index];
    entry["type"] = arg.typeString;
    entry["dtype"] = io::dtypeName(arg.dtype);
    llvm::json::Array shape;
    for (int64_t d : args.tensors[arg.index].shape())
      shape.push_back(d);
    entry["shape"] = std::move(shape);
    if (const auto &fill = args.fills[arg.index]) {
      entry["from"] = "fill-random";
      entry["stream"] = "0x" + llvm::utohexstr(fill->stream, /*LowerCase=*/true);
      entry["scale"] = fill->scale;
    } else {
      entry["from"] = args.bound[arg.index] ? "file" : "seed";
    }
    list.push_back(std::move(entry));
  }
  llvm::json::Object root;
  root["arguments"] = std::move(list);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
  return text;
}

/// --save-args: writes every argument, as bound, to DIR/arg<I>.npy (bf16 as
/// f32), then DIR/args.json (argumentsJson). Prints the error and returns
/// false on failure.
bool saveArguments(const Signature &sig, const BoundArguments &args) {
  const ::moe::run::CommandLineFiles files = commandLineFiles();
  const std::vector<HostTensor> &arguments = args.tensors;
  std::vector<std::string> names;
  for (auto [i, argument] : llvm::enumerate(arguments)) {
    auto path = saveArgPath(files, i);
    if (!path)
      return failStep(llvm::toString(path.takeError()));
    names.push_back(llvm::sys::path::filename(*path).str());
    io::Tensor tensor = argument.toTensor();
    if (tensor.dtype == io::DType::BF16 || tensor.dtype == io::DType::F8E4M3) {
      auto converted = io::convertTensor(tensor, io::DType::F32);
      if (!converted)
        return failStep(converted.error());
      tensor = converted.take();
    }
    auto bytes = io::encodeNpy(tensor, *path);
    if (!bytes)
      return failStep(bytes.error());
    if (auto error = writeFileAtomically(*path, *bytes, "--save-args"))
      return failStep(*error);
  }
  llvm::SmallString<256> jsonPath(files.saveArgs);
  llvm::sys::path::append(jsonPath, "args.json");
  std::string json = argumentsJson(sig, args, names);
  if (auto error = writeFileAtomically(std::string(jsonPath),
                                       std::vector<uint8_t>(json.begin(), json.end()),
                                       "--save-args"))
    return failStep(*error);
  return true;
}

/// Lowers and JIT-compiles the entry; `compileMs` gets the time it took.
/// Prints the error and returns false on failure.
bool compileEntry(::moe::run::Backend &backend, ModuleOp module,
                  const Signature &sig, double &compileMs) {
  auto compileStart = std::chrono::steady_clock::now();
  ProgressStep step("compiling @" + sig.name, progressOptions());
  if (llvm::Error err = backend.compile(module, sig))
    return failStep(llvm::toString(std::move(err)));
  compileMs = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - compileStart)
                  .count();
  return true;
}

/// Runs the entry once, or once to warm up and --repeat times timed (the
/// times, in milliseconds, go to `times`), then takes the last run's results
/// from the backend. Prints the error and returns false on failure.
bool runEntry(::moe::run::Backend &backend, const Signature &sig,
              std::vector<HostTensor> &arguments,
              std::vector<HostTensor> &results, std::vector<double> &times) {
  const uint64_t runs = repeat ? repeat + 1 : 1;
  ProgressStep step("running @" + sig.name +
                        (runs > 1 ? " (" + std::to_string(runs) + " runs)"
                                  : std::string()),
                    progressOptions());
  for (uint64_t r = 0; r < runs; ++r) {
    auto start = std::chrono::steady_clock::now();
    if (llvm::Error err = backend.run(arguments, results))
      return failStep(llvm::toString(std::move(err)));
    auto end = std::chrono::steady_clock::now();
    if (r > 0)
      times.push_back(
          std::chrono::duration<double, std::milli>(end - start).count());
  }
  if (llvm::Error err = backend.finish(results))
    return failStep(llvm::toString(std::move(err)));

  if (results.size() != sig.results.size())
    return failStep("internal error: " + llvm::Twine(results.size()) +
                    " results came back, expected " +
                    llvm::Twine(sig.results.size()));
  return true;
}

/// SPMD: the split results gathered on rank 0. Prints the error and returns
/// false on failure.
bool gatherResults(const SpmdSplit &split, std::vector<HostTensor> &results) {
  for (auto [i, result] : llvm::enumerate(results)) {
    if (!split.results[i])
      continue;
    auto full = spmd::gatherRows(result);
    if (!full)
      return failStep(llvm::toString(full.takeError()));
    result = std::move(*full);
  }
  return true;
}

/// --output: writes the results as .npy (bf16 as f32). Prints the error and
/// returns false on failure.
bool writeOutputs(const std::vector<HostTensor> &results) {
  if (outputPaths.empty())
    return true;
  ProgressStep step("writing --output", progressOptions());
  for (auto [path, result] : llvm::zip(outputPaths, results)) {
    io::Tensor tensor = result.toTensor();
    if (tensor.dtype == io::DType::BF16 || tensor.dtype == io::DType::F8E4M3) {
      auto converted = io::convertTensor(tensor, io::DType::F32);
      if (!converted)
        return failStep(converted.error());
      tensor = converted.take();
    }
    auto bytes = io::encodeNpy(tensor, path);
    if (!bytes)
      return failStep(bytes.error());
    if (auto error = writeFileAtomically(path, *bytes))
      return failStep(*error);
  }
  return true;
}

/// Prints the checksum line of every result, then compile-ms (--timing)
/// and median-ms (--repeat) on stdout.
void printResults(const Signature &sig, const std::vector<HostTensor> &results,
                  double compileMs, std::vector<double> times) {
  for (auto [i, result] : llvm::enumerate(results)) {
    double sum = 0, absSum = 0;
    for (int64_t k = 0, n = result.numElements(); k < n; ++k) {
      double v = result.elementAsDouble(k);
      sum += v;
      absSum += std::fabs(v);
    }
    const ValueInfo &info = sig.results[i];
    llvm::outs() << "result #" << i << ": "
                 << (info.hasDynamicShape()
                         ? concreteTypeString(info.dtype, result.shape())
                         : info.typeString)
                 << " checksum: sum=" << llvm::format("%.6e", sum)
                 << " abs_sum=" << llvm::format("%.6e", absSum) << "\n";
  }
  if (timing)
    llvm::outs() << "compile-ms: " << llvm::format("%.3f", compileMs) << "\n";
  if (!times.empty()) {
    std::sort(times.begin(), times.end());
    size_t n = times.size();
    double median =
        n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
    llvm::outs() << "median-ms: " << llvm::format("%.3f", median) << "\n";
  }
  llvm::outs().flush();
}

int runMain(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  // A write past the file size limit fails with EFBIG (one error line, the
  // existing --output kept) instead of killing moe-run with a stack dump.
  std::signal(SIGXFSZ, SIG_IGN);
  parseCommandLine(argc, argv);
  // Cheap flag checks first.
  if (!checkFlags())
    return 1;
  std::string deviceNote;
  auto backend = selectBackend(device, deviceNote);
  if (!backend)
    return 1;

  // Parse the module; find the entry and record its signature.
  DialectRegistry registry;
  registerPassesAndDialects(registry);
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  OwningOpRef<ModuleOp> module = parseModule(context, sourceMgr);
  if (!module)
    return 1;
  if (!addRequestedVjp(*module))
    return 1;
  func::FuncOp func = findEntry(*module);
  if (!func)
    return 1;
  if (!keepOnlyEntry(*module, func))
    return 1;
  Signature sig;
  if (!recordSignature(func, sig))
    return 1;
  const std::string fn = "@" + sig.name;
  SpmdSplit split;
  if (!setUpSpmd(*module, func, fn, backend, deviceNote, sig, split))
    return 1;
  std::vector<const ValueInfo *> inputArgs, paramArgs;
  if (!checkCounts(sig, fn, inputArgs, paramArgs))
    return 1;

  // Bind the arguments: --input, --params, then --fill-random.
  BoundArguments args(sig.arguments.size());
  std::vector<HostTensor> results;
  if (!sig.hasDynamicResults() && !allocate(sig.results, "result", results))
    return 1;
  if (!bindInputs(inputArgs, args))
    return 1;
  if (!paramsPaths.empty() && !bindParams(paramArgs, split, args))
    return 1;
  if (fillRandom) {
    if (!allocateRandomArguments(sig, args))
      return 1;
    fillRandomArguments(sig, args);
  } else if (!checkAllBound(sig, fn, args)) {
    return 1;
  }
  if (!split.localShapes.empty())
    sliceSpmdArguments(sig, split, args);
  if (!saveArgs.empty() && !saveArguments(sig, args))
    return 1;

  // Compile and run.
  if (!deviceNote.empty())
    llvm::errs() << deviceNote << "\n";
  double compileMs = 0;
  std::vector<double> times;
  if (!compileEntry(*backend, *module, sig, compileMs))
    return 1;
  if (!runEntry(*backend, sig, args.tensors, results, times))
    return 1;
  if (spmd::active()) {
    if (!gatherResults(split, results))
      return 1;
    if (spmd::rank() != 0)
      return 0; // Rank 0 writes and prints.
  }

  // Outputs first: a failure to write leaves stdout empty.
  if (!writeOutputs(results))
    return 1;
  printResults(sig, results, compileMs, std::move(times));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // Under mpirun, a failing rank ends the whole job (MPI_Abort): no rank
  // waits forever for it.
  return ::moe::run::spmd::finish(runMain(argc, argv));
}
