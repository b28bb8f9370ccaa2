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
                   "examples", "Inputs", "unit", "reference", "README.md"]

# Our tools first, then LLVM's FileCheck/not/count/split-file.
path = os.pathsep.join([config.moe_tools_dir, config.llvm_tools_dir,
                        config.environment.get("PATH", os.environ["PATH"])])
config.environment["PATH"] = path
# Sanitizer builds: fail on the first report, and keep leak checks on.
for var in ["ASAN_OPTIONS", "UBSAN_OPTIONS"]:
    if var in os.environ:
        config.environment[var] = os.environ[var]

config.substitutions.append(("%examples", os.path.join(config.moe_src_root, "test", "examples")))
config.substitutions.append(("%shared_examples", config.spec_examples_dir))
config.substitutions.append(("%moe_plugin", config.moe_plugin_path))
config.substitutions.append(("%stock_mlir_opt", os.path.join(config.llvm_tools_dir, "mlir-opt")))
config.substitutions.append(("%moe_src", config.moe_src_root))
config.substitutions.append(("%moe_obj", config.moe_obj_root))

if os.path.isdir(config.spec_examples_dir):
    config.available_features.add("shared-spec")
if os.path.exists(os.path.join(config.llvm_tools_dir, "mlir-opt")):
    config.available_features.add("stock-mlir-opt")
