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
#include "tools/diagnostics/OneLineDiagnostic.h"

#include "dialect/MoEAttrs.h"
#include "dialect/MoEDialect.h"
#include "lowering/Passes.h"
#include "moe-mlir/InitAllMoE.h"
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
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <csignal>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#ifndef MOE_RUN_C_RUNNER_UTILS
#define MOE_RUN_C_RUNNER_UTILS "/usr/lib/llvm-22/lib/libmlir_c_runner_utils.so"
#endif
#include "runtime/cuda/CudaRuntime.h"
#include "Spmd.h"
#include "tools/version/Version.h"
#include "llvm/Support/Parallel.h"

#ifndef MOE_RUN_ASYNC_RUNTIME
#define MOE_RUN_ASYNC_RUNTIME "/usr/lib/llvm-22/lib/libmlir_async_runtime.so"
#endif

using namespace mlir;
using ::moe::run::HostTensor;
using ::moe::run::Signature;
using ::moe::run::ValueInfo;
using ::moe::run::argName;
using ::moe::run::checkAllocatable;
using ::moe::run::concreteTypeString;
using ::moe::run::describeArgument;
using ::moe::run::fileTensorDesc;
using ::moe::run::shapeFits;
namespace io = ::moe::io;

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
                             "func.func with a body)"),
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

enum class ProgressMode { Auto, Always, Never };
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
i32 or i64. Arguments with {moe.param = "NAME"} are parameters, bound by name
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
the argument's position, same dtypes as --output), so a --fill-random run
can be repeated elsewhere from files.

The CPU path lowers with moe's cpu pipeline (results as out-parameters, or
returned when a result is dynamically shaped) and JIT-compiles at -O3; the
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
  return std::nullopt;
}

/// Fills `info` from `type`; returns an error (without the subject) if the
/// type is not supported.
std::optional<std::string> describeType(Type type, ValueInfo &info) {
  info.typeString = debugString(type);
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return "has type " + info.typeString +
           "; moe-run supports ranked tensors of f32, f16, bf16, i32 and i64";
  auto dtype = toDType(tensor.getElementType());
  if (!dtype)
    return "has element type " + debugString(tensor.getElementType()) + " (" +
           info.typeString + "); moe-run supports f32, f16, bf16, i32 and i64";
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
// Files
//===----------------------------------------------------------------------===//

namespace fs = llvm::sys::fs;

/// "a directory", "a character device", ... for a file that is not regular.
const char *describeFileType(fs::file_type type) {
  switch (type) {
  case fs::file_type::directory_file:
    return "a directory";
  case fs::file_type::character_file:
    return "a character device";
  case fs::file_type::block_file:
    return "a block device";
  case fs::file_type::fifo_file:
    return "a FIFO";
  case fs::file_type::socket_file:
    return "a socket";
  default:
    return "not a regular file";
  }
}

/// An error when `path` (given to `flag`) exists but is not a regular file
/// (or, with `directoryOk`, a directory). Missing files are left to the
/// reader, which names them. Checked before anything is opened, so that a
/// device or a FIFO is never read (/dev/zero never ends, a FIFO blocks).
std::optional<std::string> checkReadable(llvm::StringRef flag,
                                         const std::string &path,
                                         bool directoryOk) {
  fs::file_status status;
  if (fs::status(path, status))
    return std::nullopt;
  fs::file_type type = status.type();
  if (type == fs::file_type::regular_file ||
      (directoryOk && type == fs::file_type::directory_file))
    return std::nullopt;
  return (flag + " " + path + " is " + describeFileType(type) + "; " +
          (directoryOk ? "expected a regular file or a checkpoint directory"
                       : "expected a regular file"))
      .str();
}

/// The absolute, symlink-free spelling of `path`, which need not exist (its
/// folder must, else the path itself, made absolute).
std::string canonicalPath(const std::string &path) {
  llvm::SmallString<256> real;
  if (!fs::real_path(path, real))
    return std::string(real);
  llvm::SmallString<256> parent(llvm::sys::path::parent_path(path));
  if (parent.empty())
    parent = ".";
  if (!fs::real_path(parent, real)) {
    llvm::sys::path::append(real, llvm::sys::path::filename(path));
    return std::string(real);
  }
  llvm::SmallString<256> absolute(path);
  fs::make_absolute(absolute);
  llvm::sys::path::remove_dots(absolute, /*remove_dot_dot=*/true);
  return std::string(absolute);
}

/// Whether `a` and `b` name the same file: the same inode when both exist,
/// else the same canonical path.
bool sameFile(const std::string &a, const std::string &b) {
  fs::UniqueID idA, idB;
  if (!fs::getUniqueID(a, idA) && !fs::getUniqueID(b, idB))
    return idA == idB;
  return canonicalPath(a) == canonicalPath(b);
}

/// Whether `path` lies inside the directory `dir` (canonical spellings).
bool isInside(const std::string &path, const std::string &dir) {
  std::string p = canonicalPath(path), d = canonicalPath(dir);
  if (!llvm::StringRef(d).ends_with("/"))
    d += "/";
  return llvm::StringRef(p).starts_with(d);
}

/// Checks the files of the command line before anything is read or written:
/// inputs must be regular files (--params: or a checkpoint directory);
/// every --output must be a regular file or not exist yet, and must not be
/// an input (the .mlir, an --input, a --params file or a file inside a
/// --params checkpoint directory) or another --output.
std::optional<std::string> checkPaths() {
  if (inputFile != "-")
    if (auto error = checkReadable("the input", inputFile, false))
      return error;
  for (const std::string &path : inputPaths)
    if (auto error = checkReadable("--input", path, false))
      return error;
  for (const std::string &path : paramsPaths)
    if (auto error = checkReadable("--params", path, true))
      return error;

  for (auto [i, path] : llvm::enumerate(outputPaths)) {
    fs::file_status status;
    if (!fs::status(path, status) &&
        status.type() != fs::file_type::regular_file)
      return "--output " + path + " is " + describeFileType(status.type()) +
             "; --output writes a regular file";
    if (inputFile != "-" && sameFile(path, inputFile))
      return "--output " + path + " is the input " + inputFile +
             "; it would be overwritten";
    for (const std::string &input : inputPaths)
      if (sameFile(path, input))
        return "--output " + path + " is the --input " + input +
               "; it would be overwritten";
    for (const std::string &params : paramsPaths) {
      if (fs::is_directory(params)) {
        if (isInside(path, params))
          return "--output " + path + " is inside the --params directory " +
                 params + "; write results elsewhere";
      } else if (sameFile(path, params) ||
                 (llvm::StringRef(params).ends_with(".json") &&
                  isInside(path, std::string(llvm::sys::path::parent_path(
                                     canonicalPath(params)))))) {
        return "--output " + path + " is or may be a file of the --params " +
               params + "; write results elsewhere";
      }
    }
    for (size_t j = 0; j < i; ++j)
      if (sameFile(path, outputPaths[j]))
        return "--output " + path + " is also --output #" +
               std::to_string(j) + " (" + outputPaths[j] +
               "); give each result its own file";
  }
  if (!saveArgs.empty() && !fs::is_directory(saveArgs))
    return "--save-args " + saveArgs + " is not an existing directory";
  return std::nullopt;
}

/// The file --save-args writes for argument `index`, or an error when that
/// file is an input or an --output.
llvm::Expected<std::string> saveArgPath(size_t index) {
  llvm::SmallString<256> path(saveArgs);
  llvm::sys::path::append(path, "arg" + std::to_string(index) + ".npy");
  std::string result(path);
  auto clash = [&](const std::string &other, llvm::StringRef what) {
    return llvm::createStringError("--save-args would overwrite " + what.str() +
                                   " " + other + " (argument #" +
                                   std::to_string(index) + ")");
  };
  if (inputFile != "-" && sameFile(result, inputFile))
    return clash(inputFile, "the input");
  for (const std::string &other : inputPaths)
    if (sameFile(result, other))
      return clash(other, "the --input");
  for (const std::string &other : paramsPaths)
    if (sameFile(result, other))
      return clash(other, "the --params");
  for (const std::string &other : outputPaths)
    if (sameFile(result, other))
      return clash(other, "the --output");
  return result;
}

/// Writes `bytes` to `path` through a temporary file in the same folder,
/// renamed over `path` once complete: a failed write leaves an existing
/// `path` untouched.
std::optional<std::string> writeFileAtomically(const std::string &path,
                                               const std::vector<uint8_t> &bytes,
                                               llvm::StringRef flag = "--output") {
  llvm::SmallString<256> model(llvm::sys::path::parent_path(path));
  llvm::sys::path::append(model, "." + llvm::sys::path::filename(path) +
                                     ".tmp-%%%%%%%%");
  int fd;
  llvm::SmallString<256> tempPath;
  if (std::error_code ec = fs::createUniqueFile(model, fd, tempPath))
    return flag.str() + " " + path + ": cannot create a temporary file: " +
           ec.message();
  std::error_code writeError;
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os.write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
    os.close();
    writeError = os.error();
    os.clear_error();
  }
  if (!writeError)
    writeError = fs::rename(tempPath, path);
  if (writeError) {
    fs::remove(tempPath);
    return flag.str() + " " + path + ": cannot write: " + writeError.message();
  }
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Progress
//===----------------------------------------------------------------------===//

/// Reports a step that runs longer than --progress-after-ms on stderr:
/// "moe-run: <step>..." once the time has passed, then "moe-run: <step>:
/// done in X s" when it ends. Quick steps print nothing.
class ProgressStep {
public:
  explicit ProgressStep(std::string step) : step(std::move(step)) {
    bool enabled = progress == ProgressMode::Always ||
                   (progress == ProgressMode::Auto &&
                    llvm::sys::Process::StandardErrIsDisplayed());
    if (!enabled)
      return;
    start = std::chrono::steady_clock::now();
    if (progressAfterMs == 0) { // report every step (tests)
      llvm::errs() << "moe-run: " << this->step << "...\n";
      reported = true;
      return;
    }
    watcher = std::thread([this] {
      std::unique_lock<std::mutex> lock(mutex);
      if (!done.wait_for(lock, std::chrono::milliseconds(progressAfterMs),
                         [this] { return finished; })) {
        llvm::errs() << "moe-run: " << this->step << "...\n";
        reported = true;
      }
    });
  }
  ~ProgressStep() {
    if (watcher.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        finished = true;
      }
      done.notify_one();
      watcher.join();
    }
    if (reported)
      llvm::errs() << "moe-run: " << step << ": done in "
                   << llvm::format("%.1f", std::chrono::duration<double>(
                                               std::chrono::steady_clock::now() -
                                               start)
                                               .count())
                   << " s\n";
  }

private:
  std::string step;
  std::chrono::steady_clock::time_point start;
  std::thread watcher;
  std::mutex mutex;
  std::condition_variable done;
  bool finished = false;
  bool reported = false;
};

//===----------------------------------------------------------------------===//
// Random values
//===----------------------------------------------------------------------===//

struct SplitMix64 {
  static constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
  uint64_t state;
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += kGamma);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in (0, 1].
  double uniform() {
    return static_cast<double>((next() >> 11) + 1) * 0x1.0p-53;
  }
  double normal() {
    double u1 = uniform();
    double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
};

void fillRandomRange(uint8_t *out, io::DType dtype, int64_t begin,
                     int64_t end, SplitMix64 &rng, double scale);

void fillRandomValues(HostTensor &tensor, const ValueInfo &info,
                      uint64_t streamSeed, uint64_t userSeed) {
  // The fan-in below is that of the concrete shape (after --dynamic-size).
  const int64_t n = tensor.numElements();
  uint8_t *out = tensor.data();
  switch (info.dtype) {
  case io::DType::I32: {
    int32_t v = static_cast<int32_t>(userSeed);
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(out + 4 * i, &v, 4);
    return;
  }
  case io::DType::I64: {
    int64_t v = static_cast<int64_t>(userSeed);
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(out + 8 * i, &v, 8);
    return;
  }
  default:
    break;
  }
  double scale = 1.0;
  if (info.param) {
    const auto &shape = tensor.shape();
    int64_t fanIn = 1;
    if (shape.size() >= 2)
      fanIn = shape[shape.size() - 2];
    else if (shape.size() == 1)
      fanIn = shape[0];
    scale = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(fanIn, 1)));
  }
  // Element i takes outputs 2i+1 and 2i+2 of the argument's stream, and
  // splitmix64's state after j outputs is seed + j * gamma: every chunk
  // starts its own generator there, so the values do not depend on how the
  // chunks are spread over the threads.
  constexpr int64_t kChunk = 1 << 16;
  llvm::parallelFor(0, (n + kChunk - 1) / kChunk, [&](size_t chunk) {
    const int64_t begin = static_cast<int64_t>(chunk) * kChunk;
    const int64_t end = std::min(n, begin + kChunk);
    SplitMix64 rng(streamSeed +
                   2 * static_cast<uint64_t>(begin) * SplitMix64::kGamma);
    fillRandomRange(out, info.dtype, begin, end, rng, scale);
  });
}

void fillRandomRange(uint8_t *out, io::DType dtype, int64_t begin,
                     int64_t end, SplitMix64 &rng, double scale) {
  for (int64_t i = begin; i < end; ++i) {
    float v = static_cast<float>(rng.normal() * scale);
    switch (dtype) {
    case io::DType::F32:
      std::memcpy(out + 4 * i, &v, 4);
      break;
    case io::DType::F16: {
      uint16_t h = io::floatToHalfBits(v);
      std::memcpy(out + 2 * i, &h, 2);
      break;
    }
    case io::DType::BF16: {
      uint16_t h = io::floatToBFloat16Bits(v);
      std::memcpy(out + 2 * i, &h, 2);
      break;
    }
    default:
      break;
    }
  }
}

//===----------------------------------------------------------------------===//
// Backends
//===----------------------------------------------------------------------===//

/// Chooses the backend for --device. Returns nullptr after printing the
/// error. `note` receives a line to print once the run starts (auto's choice).
std::unique_ptr<::moe::run::Backend> selectBackend(Device dev,
                                                   std::string &note) {
  ::moe::run::CpuBackendOptions cpuOptions;
  cpuOptions.dumpLowered = dumpLowered;
  cpuOptions.parallel = cpuParallel;
  cpuOptions.bf16Dot = cpuBf16Dot;
  cpuOptions.cpu = cpuName;
  cpuOptions.jitDebugListeners = jitDebugListeners;
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
    std::string chip = moeCudaChip(&why);
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
      std::string chip = moeCudaChip(&why);
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
        io::CheckpointSpec spec;
        for (StringAttr name : checkpoint.getNames())
          spec.names.push_back(name.str());
        spec.transpose = checkpoint.getTranspose();
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

int runMain(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  // A write past the file size limit fails with EFBIG (one error line, the
  // existing --output kept) instead of killing moe-run with a stack dump.
  std::signal(SIGXFSZ, SIG_IGN);
  // Hidden, but available for debugging: --mlir-print-ir-after-all etc.
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  ::moe::installVersionPrinter("moe-run");
  llvm::cl::HideUnrelatedOptions(runCategory);
  llvm::cl::ParseCommandLineOptions(argc, argv, overview);
  // IREE's convention: --input=@x.npy names the file x.npy (a file whose
  // name really starts with '@' is taken as it is).
  for (std::string &path : inputPaths)
    if (path.size() > 1 && path[0] == '@' && !fs::exists(path))
      path.erase(0, 1);

  // Cheap flag checks first.
  if (seed.getNumOccurrences() && !fillRandom)
    return fail("--seed has no effect without --fill-random");
  if (dynamicSize.getNumOccurrences() && !fillRandom)
    return fail("--dynamic-size has no effect without --fill-random");
  if (dynamicSize < 1)
    return fail("--dynamic-size must be >= 1, got " +
                llvm::Twine(static_cast<int64_t>(dynamicSize)));
  if (dynamicSize > kMaxDynamicSize)
    return fail("--dynamic-size must be <= 2^31, got " +
                llvm::Twine(static_cast<int64_t>(dynamicSize)));
  if (repeat > kMaxRepeat)
    return fail("--repeat must be <= " + llvm::Twine(kMaxRepeat) + ", got " +
                llvm::Twine(static_cast<uint64_t>(repeat)));
  if (std::optional<std::string> error = checkPaths())
    return fail(*error);
  std::string deviceNote;
  auto backend = selectBackend(device, deviceNote);
  if (!backend)
    return 1;

  registerAllPasses();
  mlir::moe::registerAllMoEPasses();

  DialectRegistry registry;
  mlir::moe::registerAllMoE(registry);
  registerAllToLLVMIRTranslations(registry);
  MLIRContext context(registry);

  std::string openError;
  auto file = openInputFile(inputFile, &openError);
  if (!file)
    return fail(openError.empty() ? "cannot open " + inputFile : openError);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  installDiagnosticHandler(context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return fail("cannot parse " + inputFile); // Usually printed already.

  func::FuncOp func = findEntry(*module);
  if (!func)
    return 1;
  Signature sig;
  if (!recordSignature(func, sig))
    return 1;
  const std::string fn = "@" + sig.name;

  // An SPMD module (--moe-shard-experts) runs as one rank of an mpirun job:
  // arguments marked moe.split are bound whole (expert-split ones with
  // their global expert count), then sliced to this rank's part.
  namespace spmd = ::moe::run::spmd;
  auto gridRanks = spmd::gridSize(*module);
  if (!gridRanks)
    return fail(llvm::toString(gridRanks.takeError()));
  std::vector<bool> splitArgs(sig.arguments.size(), false),
      splitResults(sig.results.size(), false);
  std::vector<std::vector<int64_t>> localShapes;
  if (*gridRanks > 0) {
    if (llvm::StringRef(backend->name()) != "cpu") {
      if (device != Device::Auto)
        return fail(fn + " is SPMD (--moe-shard-experts), which moe-run runs "
                         "on the CPU path only: pass --device=cpu");
      // --device=auto: the CPU path (the MPI lowering is the CPU one).
      deviceNote = "moe-run: device auto: using cpu (SPMD module)";
      backend = selectBackend(Device::Cpu, deviceNote);
      if (!backend)
        return 1;
    }
    if (llvm::Error err = spmd::start(*gridRanks))
      return fail(llvm::toString(std::move(err)));
    splitArgs = spmd::splitArguments(func);
    splitResults = spmd::splitResults(func);
    for (ValueInfo &arg : sig.arguments) {
      localShapes.push_back(arg.shape);
      if (splitArgs[arg.index] && !arg.shape.empty() &&
          arg.shape[0] != ValueInfo::kDynamic)
        arg.shape[0] *= *gridRanks;
    }
  }

  // Counts.
  if (!outputPaths.empty() && outputPaths.size() != sig.results.size())
    return fail(fn + " has " + llvm::Twine(sig.results.size()) + " result" +
                (sig.results.size() == 1 ? "" : "s") + ", got " +
                llvm::Twine(outputPaths.size()) + " --output");
  std::vector<const ValueInfo *> inputArgs, paramArgs;
  for (const ValueInfo &arg : sig.arguments)
    (arg.param ? paramArgs : inputArgs).push_back(&arg);
  if (inputPaths.size() > inputArgs.size() ||
      (!fillRandom && inputPaths.size() != inputArgs.size()))
    return fail(fn + " takes " + llvm::Twine(inputArgs.size()) + " input" +
                (inputArgs.size() == 1 ? "" : "s") +
                " (arguments without moe.param), got " +
                llvm::Twine(inputPaths.size()) + " --input");
  if (!fillRandom && paramsPaths.empty() && !paramArgs.empty()) {
    const ValueInfo &arg = *paramArgs.front();
    return fail(describeArgument(arg) + " of " + fn + ", parameter '" +
                *arg.param +
                "', is not bound: pass --params=FILE.safetensors "
                "or --fill-random");
  }

  // Bind the arguments. Each is allocated once its shape is known: from its
  // file (dynamic dimensions take the file's sizes) or, for the ones
  // --fill-random fills, from the signature and --dynamic-size.
  std::vector<HostTensor> arguments(sig.arguments.size()), results;
  if (!sig.hasDynamicResults() && !allocate(sig.results, "result", results))
    return 1;
  std::vector<bool> bound(sig.arguments.size(), false);
  // SPMD: split parameters read as this rank's slice; bytes read.
  std::vector<bool> presliced(sig.arguments.size(), false);
  uint64_t paramBytesRead = 0;
  // Allocates argument `arg` with `shape` and copies `tensor` into it.
  auto bind = [&](const ValueInfo &arg, const io::Tensor &tensor) -> bool {
    if (io::Status status =
            ::moe::run::allocateArgument(arg, tensor, arguments[arg.index]);
        !status) {
      fail(status.error());
      return false;
    }
    bound[arg.index] = true;
    return true;
  };

  for (auto [path, arg] : llvm::zip(inputPaths, inputArgs)) {
    bool wasF64 = false;
    auto tensor = io::readNpyConverting(path, arg->dtype, wasF64);
    if (!tensor)
      return fail(tensor.error());
    if (wasF64)
      llvm::errs() << "moe-run: note: --input " << path
                   << " holds float64 data, converted to "
                   << io::dtypeName(arg->dtype)
                   << " (rounded to nearest even) for "
                   << describeArgument(*arg) << "\n";
    auto bindable = ::moe::run::bindInputTensor(tensor.take(), path, *arg);
    if (!bindable)
      return fail(bindable.error());
    if (!bind(*arg, *bindable))
      return 1;
  }

  if (!paramsPaths.empty()) {
    ProgressStep step("reading --params");
    // Every file (and index) is opened and its header validated before any
    // tensor data is used.
    io::TensorStore params;
    for (const std::string &path : paramsPaths)
      if (io::Status status = params.add(path); !status)
        return fail(status.error());
    const std::string sources = params.describeSources();
    // Checkpoint-assembled arguments: all shapes are checked first, then the
    // data is assembled once into the argument buffers.
    std::vector<std::pair<const ValueInfo *, std::vector<int64_t>>> assembled;
    for (const ValueInfo *arg : paramArgs) {
      if (arg->checkpoint) {
        auto shape = ::moe::run::checkpointArgumentShape(params, *arg);
        if (!shape)
          return fail(shape.error());
        assembled.emplace_back(arg, shape.take());
        continue;
      }
      const io::TensorStore::Entry *found = params.find(*arg->param);
      if (!found) {
        if (fillRandom)
          continue;
        return fail("parameter '" + *arg->param + "' (argument #" +
                    llvm::Twine(arg->index) + ") not found in " + sources);
      }
      const io::SafeTensorInfo *entry = found->info;
      if (!shapeFits(arg->shape, entry->shape) ||
          (entry->dtype != arg->dtype &&
           !(io::isFloatType(entry->dtype) && io::isFloatType(arg->dtype))))
        return fail(::moe::run::bindParamTensor(*found->file, *entry, *arg)
                        .error());
      if (spmd::active() && splitArgs[arg->index] && !entry->shape.empty()) {
        // Only this rank's experts: rows [begin, end) of dimension 0, read
        // from the (memory-mapped) file.
        auto [begin, end] =
            spmd::splitRange(entry->shape[0], spmd::size(), spmd::rank());
        size_t rowBytes = io::elementSize(entry->dtype);
        for (size_t d = 1; d < entry->shape.size(); ++d)
          rowBytes *= static_cast<size_t>(entry->shape[d]);
        const uint8_t *raw = found->file->rawData(*entry) + begin * rowBytes;
        std::vector<int64_t> shape = entry->shape;
        shape[0] = end - begin;
        io::Tensor part(entry->dtype, shape,
                        std::vector<uint8_t>(raw, raw + (end - begin) * rowBytes));
        paramBytesRead += part.data.size();
        if (entry->dtype != arg->dtype) {
          auto converted = io::convertTensor(part, arg->dtype);
          if (!converted)
            return fail(converted.error());
          part = converted.take();
        }
        if (!bind(*arg, part))
          return 1;
        presliced[arg->index] = true;
        continue;
      }
      auto tensor = ::moe::run::bindParamTensor(*found->file, *entry, *arg);
      paramBytesRead += entry->dataEnd - entry->dataBegin;
      if (!tensor)
        return fail(tensor.error());
      if (!bind(*arg, *tensor))
        return 1;
    }
    for (auto &[arg, shape] : assembled) {
      if (io::Status status = ::moe::run::checkAssembledArgument(*arg, shape);
          !status)
        return fail(status.error());
      HostTensor &tensor = arguments[arg->index];
      tensor = HostTensor(arg->dtype, shape);
      if (!tensor.ok())
        return fail("cannot allocate " + llvm::Twine(tensor.byteSize()) +
                    " bytes for " + describeArgument(*arg));
      if (io::Status status = io::assembleCheckpointTensor(
              params, *arg->checkpoint, shape, arg->dtype, tensor.data());
          !status)
        return fail(status.error());
      bound[arg->index] = true;
    }
  }

  // The arguments --fill-random fills: dynamic dimensions get --dynamic-size.
  for (const ValueInfo &arg : sig.arguments) {
    if (bound[arg.index] || !fillRandom)
      continue;
    std::vector<int64_t> shape = arg.shape;
    for (int64_t &d : shape)
      if (d == ValueInfo::kDynamic)
        d = dynamicSize;
    if (auto error = checkAllocatable(arg.dtype, shape))
      return fail(describeArgument(arg) + " (" +
                  concreteTypeString(arg.dtype, shape) + ", --dynamic-size=" +
                  llvm::Twine(static_cast<int64_t>(dynamicSize)) + ") is " +
                  *error);
    arguments[arg.index] = HostTensor(arg.dtype, shape);
    if (!arguments[arg.index].ok())
      return fail("cannot allocate " +
                  llvm::Twine(arguments[arg.index].byteSize()) +
                  " bytes for " + describeArgument(arg) + " (" +
                  arg.typeString + ")");
  }

  if (fillRandom) {
    ProgressStep step("--fill-random");
    SplitMix64 master(seed);
    for (const ValueInfo &arg : sig.arguments) {
      uint64_t streamSeed = master.next();
      if (!bound[arg.index])
        fillRandomValues(arguments[arg.index], arg, streamSeed, seed);
    }
  } else {
    for (const ValueInfo &arg : sig.arguments)
      if (!bound[arg.index])
        return fail(describeArgument(arg) + " of " + fn +
                    " is not bound: pass --input/--params or --fill-random");
  }

  if (!localShapes.empty()) {
    for (ValueInfo &arg : sig.arguments) {
      arg.shape = localShapes[arg.index];
      if (splitArgs[arg.index] && !presliced[arg.index])
        arguments[arg.index] = spmd::slice(arguments[arg.index]);
    }
    if (spmdVerbose)
      llvm::errs() << ("moe-run: " + spmd::messagePrefix() + "read " +
                       std::to_string(paramBytesRead) + " parameter bytes\n");
  }

  if (!saveArgs.empty()) {
    for (auto [i, argument] : llvm::enumerate(arguments)) {
      auto path = saveArgPath(i);
      if (!path)
        return fail(llvm::toString(path.takeError()));
      io::Tensor tensor = argument.toTensor();
      if (tensor.dtype == io::DType::BF16) {
        auto converted = io::convertTensor(tensor, io::DType::F32);
        if (!converted)
          return fail(converted.error());
        tensor = converted.take();
      }
      auto bytes = io::encodeNpy(tensor, *path);
      if (!bytes)
        return fail(bytes.error());
      if (auto error = writeFileAtomically(*path, *bytes, "--save-args"))
        return fail(*error);
    }
  }

  // Compile and run.
  if (!deviceNote.empty())
    llvm::errs() << deviceNote << "\n";
  auto compileStart = std::chrono::steady_clock::now();
  std::optional<ProgressStep> compileStep(std::in_place, "compiling @" +
                                                             sig.name);
  if (llvm::Error err = backend->compile(*module, sig))
    return fail(llvm::toString(std::move(err)));
  double compileMs = std::chrono::duration<double, std::milli>(
                         std::chrono::steady_clock::now() - compileStart)
                         .count();

  std::vector<double> times;
  compileStep.reset();
  const uint64_t runs = repeat ? repeat + 1 : 1;
  std::optional<ProgressStep> runStep(
      std::in_place, "running @" + sig.name +
                         (runs > 1 ? " (" + std::to_string(runs) + " runs)"
                                   : std::string()));
  for (uint64_t r = 0; r < runs; ++r) {
    auto start = std::chrono::steady_clock::now();
    if (llvm::Error err = backend->run(arguments, results))
      return fail(llvm::toString(std::move(err)));
    auto end = std::chrono::steady_clock::now();
    if (r > 0)
      times.push_back(
          std::chrono::duration<double, std::milli>(end - start).count());
  }
  if (llvm::Error err = backend->finish(results))
    return fail(llvm::toString(std::move(err)));

  if (results.size() != sig.results.size())
    return fail("internal error: " + llvm::Twine(results.size()) +
                " results came back, expected " +
                llvm::Twine(sig.results.size()));

  runStep.reset();
  if (spmd::active()) {
    for (auto [i, result] : llvm::enumerate(results)) {
      if (!splitResults[i])
        continue;
      auto full = spmd::gatherRows(result);
      if (!full)
        return fail(llvm::toString(full.takeError()));
      result = std::move(*full);
    }
    if (spmd::rank() != 0)
      return 0; // Rank 0 writes and prints.
  }

  // Outputs first: a failure to write leaves stdout empty.
  std::optional<ProgressStep> writeStep;
  if (!outputPaths.empty())
    writeStep.emplace("writing --output");
  for (auto [path, result] : llvm::zip(outputPaths, results)) {
    io::Tensor tensor = result.toTensor();
    if (tensor.dtype == io::DType::BF16) {
      auto converted = io::convertTensor(tensor, io::DType::F32);
      if (!converted)
        return fail(converted.error());
      tensor = converted.take();
    }
    auto bytes = io::encodeNpy(tensor, path);
    if (!bytes)
      return fail(bytes.error());
    if (auto error = writeFileAtomically(path, *bytes))
      return fail(*error);
  }
  writeStep.reset();
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

  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // Under mpirun, a failing rank ends the whole job (MPI_Abort): no rank
  // waits forever for it.
  return ::moe::run::spmd::finish(runMain(argc, argv));
}
