// Every --moe-nvptx-pipeline option value is checked before use: a bad one
// is one error and exit 1 (format=bogus used to exit 0, opt-level=-1 to
// abort, chip= to segfault, chip=garbage to emit PTX for "garbage"). The
// pipeline is built from typed pass constructors (nothing parsed at run
// time), so no value can end in a fatal error.
// RUN: not moe-opt %s --moe-nvptx-pipeline="format=bogus" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: not moe-opt %s --moe-nvptx-pipeline="opt-level=-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: not moe-opt %s --moe-nvptx-pipeline="opt-level=4" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OPT4
// RUN: not moe-opt %s --moe-nvptx-pipeline="chip=" -o /dev/null 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not moe-opt %s --moe-nvptx-pipeline="chip=garbage" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: not moe-opt %s --moe-nvptx-pipeline="features=ptx80" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FEATURES
// RUN: not moe-opt %s --moe-nvptx-pipeline="triple=x86_64-unknown-linux-gnu" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TRIPLE
// RUN: not moe-opt %s --moe-nvptx-pipeline="big-tile-rows=-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BIGTILE
// RUN: not moe-opt %s --moe-nvptx-pipeline="wgmma-groups-in-flight=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=INFLIGHT
// RUN: not moe-opt %s --moe-nvptx-pipeline="chip=sm_90a wgmma-groups-in-flight=-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=INFLIGHTNEG
// RUN: not moe-opt %s --moe-nvptx-pipeline="mma-stages=9" -o /dev/null 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not moe-opt %s --moe-nvptx-pipeline="mma-stages=-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=STAGESNEG
// Values the option parser itself rejects: one line, exit 1.
// RUN: not moe-opt %s --moe-nvptx-pipeline="opt-level=abc" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OPTABC
// RUN: not moe-opt %s --moe-nvptx-pipeline="device-abi=maybe" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BOOL
// RUN: not moe-opt %s --moe-nvptx-pipeline="bogus=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// The toolkit from the environment (no cuda-path), for a cubin or fatbin
// (PTX needs none, test/gpu/nvptx-pipeline-no-toolkit.mlir): the first of
// $CUDA_ROOT, $CUDA_HOME, $CUDA_PATH that is set must be a directory; it is
// not skipped silently in favour of another toolkit. cuda-path overrides it.
// RUN: env CUDA_ROOT= CUDA_HOME="%t.no such dir" not moe-opt %s --moe-nvptx-pipeline="format=bin" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ENV
// RUN: env CUDA_ROOT="%t.no such dir" not moe-opt %s --moe-nvptx-pipeline="format=fatbin" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ENVROOT
// RUN: env CUDA_ROOT= CUDA_HOME="%t.no such dir" moe-opt %s --moe-nvptx-pipeline="format=isa cuda-path=%t" -o /dev/null

// FORMAT: error: moe-nvptx-pipeline: format='bogus' is not one of isa, bin, fatbin
// OPT: error: moe-nvptx-pipeline: opt-level=-1 is out of range; expected 0, 1, 2 or 3
// OPT4: error: moe-nvptx-pipeline: opt-level=4 is out of range; expected 0, 1, 2 or 3
// EMPTY: error: moe-nvptx-pipeline: chip='' is not an NVIDIA architecture
// CHIP: error: moe-nvptx-pipeline: chip='garbage' is not an NVIDIA architecture; expected sm_NN or sm_NNN, optionally with an 'a' or 'f' suffix (sm_80, sm_90, sm_90a)
// FEATURES: error: moe-nvptx-pipeline: features='ptx80' is not a comma-separated list of +feature/-feature (e.g. +ptx80)
// TRIPLE: error: moe-nvptx-pipeline: triple='x86_64-unknown-linux-gnu' is not an NVPTX triple
// BIGTILE: error: moe-nvptx-pipeline: big-tile-rows=-1 is out of range; expected >= 0
// INFLIGHT: error: moe-nvptx-pipeline: wgmma-groups-in-flight=2 is out of range; expected 0 or 1
// INFLIGHTNEG: error: moe-nvptx-pipeline: wgmma-groups-in-flight=-1 is out of range; expected 0 or 1
// STAGES: error: moe-nvptx-pipeline: mma-stages=9 is out of range; expected 0 (the defaults) or 2 to 8
// STAGESNEG: error: moe-nvptx-pipeline: mma-stages=-1 is out of range; expected 0 (the defaults) or 2 to 8
// OPTABC: for the --opt-level option: 'abc' value invalid for integer argument!
// OPTABC-NOT: LLVM ERROR
// BOOL: for the --device-abi option: 'maybe' is invalid value for boolean argument!
// UNKNOWN: no such option bogus
// ENV: error: moe-nvptx-pipeline: $CUDA_HOME='{{.*}}.no such dir' is not a directory; the CUDA toolkit is looked up there (fix or unset it, or pass cuda-path=DIR)
// ENV-NOT: error
// ENVROOT: error: moe-nvptx-pipeline: $CUDA_ROOT='{{.*}}.no such dir' is not a directory

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
