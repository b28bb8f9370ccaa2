# -*- Python -*-
# lit configuration of the moe-mlir test suites.

import os
import shutil

import lit.formats
import lit.util

config.name = "moe-mlir"
config.test_format = lit.formats.ShTest(not lit.util.which("bash") is None)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.moe_obj_root, "test")
# Inputs and C++ test sources are not lit tests.
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in",
                   "examples", "Inputs", "unit", "reference", "lib", "README.md"]

# A test that hangs fails after this many seconds (lit prints which one and
# its output) instead of holding the whole suite until CI's own limit; the
# slowest test takes about 2 minutes on 2 cores. lit needs psutil for it
# (python3-psutil, installed by scripts/setup-deps.sh).
try:
    import psutil  # noqa: F401
    lit_config.maxIndividualTestTime = int(lit_config.params.get("moe_test_timeout", "600"))
except ImportError:
    lit_config.note("python3-psutil is missing: no per-test timeout")

# Our tools first, then LLVM's FileCheck/not/count/split-file.
path = os.pathsep.join([config.moe_tools_dir, config.llvm_tools_dir,
                        config.environment.get("PATH", os.environ["PATH"])])
config.environment["PATH"] = path
# moe-run and moe-test-runner compile at LLVM -O0 in the tests (--opt-level's
# default comes from MOE_RUN_OPT_LEVEL): the results are the same bits at
# every level (no fast-math flags; test/tools/moe-run/opt-level.test checks
# it), and a small gradient compiles in about a fifth of the time. Run the
# suite with MOE_RUN_OPT_LEVEL=3 to test the default level everywhere.
config.environment["MOE_RUN_OPT_LEVEL"] = os.environ.get("MOE_RUN_OPT_LEVEL", "0")
# The same for moe-compile's host code (MOE_COMPILE_OPT_LEVEL, --opt-level;
# test/tools/moe-compile/opt-level.test): a gradient library compiles about 3x
# faster at 0.
config.environment["MOE_COMPILE_OPT_LEVEL"] = os.environ.get("MOE_COMPILE_OPT_LEVEL", "0")
# moe-run keeps its compiled objects in one folder of the build for the whole
# suite (--cache-dir's MOE_RUN_CACHE_DIR; test/tools/moe-run/cache-dir.test):
# the tests that run one module several times (clean and poisoned inputs,
# the ranks of an MPI job) compile it once. The key includes moe-run's
# build, so a rebuilt moe-run never reuses an object; delete the folder to
# reclaim its space.
config.environment["MOE_RUN_CACHE_DIR"] = os.environ.get(
    "MOE_RUN_CACHE_DIR", os.path.join(config.moe_obj_root, "test", "moe-run-cache"))

# Sanitizer builds: fail on the first report, and keep leak checks on.
for var in ["ASAN_OPTIONS", "UBSAN_OPTIONS"]:
    if var in os.environ:
        config.environment[var] = os.environ[var]

# Where the integration tests run moe-run: `lit -Dmoe_device=cuda` reruns
# them on a GPU (test/gpu/exec-integration.test does; the GPU check kit, tools/gpu-kit, runs the AOT libraries where lit cannot run).
config.substitutions.append(("%lit", os.path.join(config.llvm_tools_dir, "lit")))
config.substitutions.append(("%moe_device", lit_config.params.get("moe_device", "cpu")))
config.substitutions.append(("%examples", os.path.join(config.moe_src_root, "test", "examples")))
config.substitutions.append(("%shared_examples", config.spec_examples_dir))
config.substitutions.append(("%moe_plugin", config.moe_plugin_path))
config.substitutions.append(("%stock_mlir_opt", os.path.join(config.llvm_tools_dir, "mlir-opt")))
config.substitutions.append(("%moe_src", config.moe_src_root))
# %expect_error CMD...: CMD must exit with 1 and print exactly one line
# "<tool>: ..." on stderr (and nothing on stdout); the line is echoed to stdout.
config.substitutions.append(
    ("%expect_error",
     "bash " + os.path.join(config.moe_src_root, "test", "tools", "moe-run", "Inputs",
                            "expect-error.sh")))
config.substitutions.append(("%moe_obj", config.moe_obj_root))

if os.path.isdir(config.spec_examples_dir):
    config.available_features.add("shared-spec")
if os.path.exists(os.path.join(config.llvm_tools_dir, "mlir-opt")):
    config.available_features.add("stock-mlir-opt")

# GPU path (test/gpu): ptxas validates emitted PTX; host-supports-nvptx: the
# LLVM build has the NVPTX backend; cuda-device: a GPU and driver are present.
_ptxas = None
for _dir in [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"]:
    if _dir and os.path.exists(os.path.join(_dir, "bin", "ptxas")):
        _ptxas = os.path.join(_dir, "bin", "ptxas")
        break
if _ptxas is None:
    _ptxas = shutil.which("ptxas")
if _ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", _ptxas))


def _llc_has_nvptx():
    import subprocess
    for llc in [os.path.join(config.llvm_tools_dir, "llc"), shutil.which("llc-22") or ""]:
        if llc and os.path.exists(llc):
            try:
                out = subprocess.run([llc, "--version"], capture_output=True, text=True,
                                     timeout=30).stdout
            except (OSError, subprocess.SubprocessError):
                continue
            return "nvptx64" in out
    return False


if _llc_has_nvptx():
    config.available_features.add("host-supports-nvptx")


def _has_cuda_device():
    import subprocess
    if os.path.exists("/dev/nvidia0"):
        return True
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        return subprocess.run([smi, "-L"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


if _has_cuda_device():
    config.available_features.add("cuda-device")

import sys as _sys
config.substitutions.append(("%python", _sys.executable))
# python-numpy: %python imports numpy (python3-numpy, installed by
# scripts/setup-deps.sh), for the tests whose scripts read .npy files.
try:
    import subprocess as _sp
    _sp.run([_sys.executable, "-c", "import numpy"], check=True, capture_output=True,
            timeout=120)
    config.available_features.add("python-numpy")
except Exception:
    lit_config.note("%python cannot import numpy: the python-numpy tests are unsupported")
# cpu-amx: the host has the AMX tile unit with bf16 (Sapphire Rapids and
# later), so the tests that run #moe.cpu_config's amx path can run; the
# lowering tests of that path run everywhere.
try:
    with open("/proc/cpuinfo") as _f:
        _flags = next((l for l in _f if l.startswith("flags")), "").split()
    if "amx_bf16" in _flags and "amx_tile" in _flags:
        config.available_features.add("cpu-amx")
except OSError:
    pass
# cuda-toolkit: a CUDA toolkit with ptxas and fatbinary, which
# `moe-compile --target=cuda` runs to build its fatbin (it looks at
# $CUDA_HOME, then /usr/local/cuda). Nothing else needs one: the kernels link
# no libdevice, so PTX (and, with this LLVM's nvptxcompiler, a cubin) is
# built on any machine, and the GPU lit tests run everywhere.
for _dir in [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]:
    if _dir and all(os.path.exists(os.path.join(_dir, "bin", _tool))
                    for _tool in ("ptxas", "fatbinary")):
        config.available_features.add("cuda-toolkit")
        break
# moe-compile finds the toolkit of that ptxas.
if _ptxas and "CUDA_HOME" not in config.environment:
    config.environment["CUDA_HOME"] = os.path.dirname(os.path.dirname(os.path.realpath(_ptxas)))

# Host emulation of the GPU kernels (test/gpu/emulated-vs-cpu.mlir): the
# kernels run as OpenMP teams under moe-test-runner (test/lib: mlir-runner's
# `-e main -entry-point-result=void -shared-libs=` with the code generator at
# $MOE_RUN_OPT_LEVEL, which mlir-runner leaves at its default level: the
# lowered drivers of the emulated tests compile about twice as fast at 0),
# with the MLIR runner utilities.
_mlir_lib_dir = os.path.join(os.path.dirname(config.llvm_tools_dir), "lib")
# The moe CPU runtime (the lowered code's run-time checks) goes with them.
config.substitutions.append(("%mlir_runner_libs", ",".join(
    [os.path.join(_mlir_lib_dir, lib) for lib in
     ["libmlir_c_runner_utils.so", "libmlir_runner_utils.so"]] +
    [os.path.join(config.moe_obj_root, "lib", lib) for lib in
     # The moe CPU runtime; the binary memref dumps of make-driver.py
     # --dump=binary (test/lib/MemrefDump.cpp).
     ["libMoECpuRuntime.so", "libMoETestMemrefDump.so"]])))
# An emulated block is an `omp.parallel` of blockDim threads (128 or 256)
# whose barriers are `omp.barrier`: the tests run it on the fibers of
# libMoEEmulationOpenMP.so (test/lib/EmulationOpenMP.cpp) instead of libomp,
# so a barrier is one user-level switch per thread rather than a round of
# futex wake-ups, and the tests spawn no threads. Measured on 2 cores (AMD
# EPYC, test/gpu/emulated-splitk-layer.mlir, one decode-split-k=3 run): 9.4 s
# of which 9.6 s system time, with libomp; 4.2 s (0.1 s system) on fibers.
config.substitutions.append(("%emulation_omp",
    os.path.join(config.moe_obj_root, "lib", "libMoEEmulationOpenMP.so")))
# The emulation pipelines below pass the shell variable MOE_EMULATE_OPTIONS
# (empty when unset: the defaults) to moe-test-emulate-gpu as its options,
# e.g. `MOE_EMULATE_OPTIONS="block-order=shuffle seed=3"; moe-opt ...
# --pass-pipeline="%moe_emulate_gpu_pipeline"` runs each launch's blocks in a
# shuffled order (the pipelines must be in double quotes). The tests of the
# inter-block protocols (split-K, the combine's arrival counters) run under
# several orders this way.
# The pipelines are the real ones, built in C++: --moe-gpu-launch-pipeline
# (the first half of --moe-nvptx-pipeline: target, #moe.gpu_config, kernels,
# host bufferization, launches; chip=sm_90 by default: mma.sync), the
# emulator, and the host tail --moe-test-emulated-to-llvm (test/lib).
# %moe_emulate_tail is the part after the launch pipeline, for tests that give
# its options: --pass-pipeline="builtin.module(moe-gpu-launch-pipeline{
# chip=sm_90a mma-stages=5},%moe_emulate_tail)".
_tail = "moe-test-emulate-gpu{${MOE_EMULATE_OPTIONS:-}},moe-test-emulated-to-llvm"
config.substitutions.append(("%moe_emulate_tail", _tail))
_emulate = _tail + ")"
config.substitutions.append(("%moe_emulate_gpu_device_abi_pipeline",
    "builtin.module(moe-gpu-launch-pipeline{device-abi=true}," + _emulate))
# Kernel-level tests of the tensor-core GEMMs (test/gpu/mma-gemm-emulated.mlir):
# memref host code launching kernels built by --moe-test-build-mma-kernels.
config.substitutions.append(("%moe_emulate_mma_pipeline", "builtin.module("
    "moe-test-build-mma-kernels,moe-gpu-materialize-launches," + _emulate))
config.substitutions.append(("%moe_emulate_gpu_pipeline",
    "builtin.module(moe-gpu-launch-pipeline," + _emulate))
# The target as --moe-nvptx-pipeline attaches it, for tests that run
# --moe-gpu-configure (whose options they give) and --convert-moe-to-gpu
# themselves: `moe-opt %s %moe_gpu_target_sm90a --moe-gpu-configure=...`.
# (sm_90a before sm_90: a substitution must not be the prefix of a later one.)
for _chip in ["sm_90a", "sm_90", "sm_80", "sm_75"]:
    config.substitutions.append(("%moe_gpu_target_" + _chip.replace("_", ""),
        "--moe-gpu-kernel-module --nvvm-attach-target='module=moe_kernels chip="
        + _chip + " features=+ptx80'"))
# The same with the sm_90a target: the wgmma kernels for the 64-row tiles.
config.substitutions.append(("%moe_emulate_gpu_wgmma_pipeline",
    "builtin.module(moe-gpu-launch-pipeline{chip=sm_90a}," + _emulate))

# Expert parallelism (--moe-shard-experts): moe-run under the system MPI's
# mpirun. One substitution for every test: as root (CI runs as root),
# oversubscribed (more ranks than cores), no core binding (ranks share the
# cores), shared memory only (self + vader, without the single-copy
# mechanism that containers often forbid), and a time limit so that a stuck
# job fails instead of hanging.
_mpirun = shutil.which("mpirun")
if _mpirun and getattr(config, "moe_have_mpi", "") in ("TRUE", "ON", "1", "YES"):
    config.available_features.add("mpi")
    config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    config.environment["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
    config.substitutions.append(("%mpirun", " ".join([
        "timeout -k 10 120", _mpirun, "--allow-run-as-root", "--oversubscribe",
        "--bind-to none", "--mca btl self,vader",
        "--mca btl_vader_single_copy_mechanism none"])))

# The GPU check kit's run step (tools/gpu-kit/kit.py) and the moe_mlir.torch
# tests (test/python) need torch; where the lit Python has it, they run (the
# kit dry-run on the cpu target). The training comparison's picture needs
# matplotlib (python3-matplotlib).
import subprocess as _subprocess
for _module, _feature in (("torch", "python-torch"), ("matplotlib", "python-matplotlib")):
    try:
        _subprocess.run([_sys.executable, "-c", "import " + _module], check=True,
                        capture_output=True, timeout=120)
        config.available_features.add(_feature)
    except Exception:
        pass
