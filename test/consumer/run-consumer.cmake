# ctest `install-consumer`: installs moe-mlir into a fresh prefix, builds the
# consumer project of this folder against that prefix only, and runs it.
#
#   cmake -DMOE_SOURCE_DIR=... -DMOE_BINARY_DIR=... -DWORK_DIR=...
#         -DGENERATOR=... -DC_COMPILER=... -DCXX_COMPILER=...
#         -DLLVM_TOOLS_DIR=... -P run-consumer.cmake
foreach(var MOE_SOURCE_DIR MOE_BINARY_DIR WORK_DIR GENERATOR C_COMPILER
            CXX_COMPILER LLVM_TOOLS_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run-consumer.cmake: -D${var}=... missing")
  endif()
endforeach()

set(prefix "${WORK_DIR}/prefix")
set(build "${WORK_DIR}/build")
set(example "${MOE_SOURCE_DIR}/test/examples/dense.mlir")

function(run what)
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${ARGN}\n${out}\n${err}")
  endif()
  set(out "${out}${err}" PARENT_SCOPE)
endfunction()

function(expect what text)
  foreach(pattern ${ARGN})
    string(FIND "${text}" "${pattern}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${what}: expected \"${pattern}\" in:\n${text}")
    endif()
  endforeach()
endfunction()

function(expect_not what text)
  foreach(pattern ${ARGN})
    string(FIND "${text}" "${pattern}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${what}: did not expect \"${pattern}\" in:\n${text}")
    endif()
  endforeach()
endfunction()

# 1. Install.
file(REMOVE_RECURSE "${WORK_DIR}")
run("cmake --install" ${CMAKE_COMMAND} --install "${MOE_BINARY_DIR}" --prefix "${prefix}")
foreach(f
    bin/moe-opt bin/moe-run bin/moe-import bin/moe-compile
    lib/moe-mlir/libMoEAotSupport.a lib/moe-mlir/libMoEAotCudaSupport.a
    lib/libMoEMLIR.so lib/libMoEMLIRCAPI.so lib/libMoEPlugin.so lib/libMoECudaRuntime.so
    lib/cmake/MoEMLIR/MoEMLIRConfig.cmake
    lib/cmake/MoEMLIR/MoEMLIRConfigVersion.cmake
    lib/cmake/MoEMLIR/MoEMLIRTargets.cmake
    include/moe-mlir/MoEMLIR.h include/moe-mlir/lowering/InitAllMoE.h
    include/moe-mlir/dialect/MoEOps.h include/moe-mlir/dialect/MoEOps.h.inc
    include/moe-mlir/dialect/MoEAttrs.h.inc include/moe-mlir/dialect/MoEDialect.h.inc
    include/moe-mlir/dialect/MoEEnums.h.inc include/moe-mlir/dialect/MoEInterfaces.h.inc
    include/moe-mlir/dialect/MoEOps.td
    include/moe-mlir-c/MoE.h include/moe-mlir-c/MoEPasses.h
    include/moe-mlir/passes/Passes.h include/moe-mlir/passes/Passes.h.inc
    include/moe-mlir/passes/Passes.capi.h.inc
    include/moe-mlir/lowering/cpu/Passes.h include/moe-mlir/lowering/cpu/Passes.h.inc
    include/moe-mlir/lowering/cpu/Passes.capi.h.inc
    include/moe-mlir/lowering/gpu/Passes.h include/moe-mlir/lowering/gpu/Passes.h.inc
    include/moe-mlir/lowering/gpu/Passes.capi.h.inc
    include/moe-mlir/lowering/Pipelines.h)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "cmake --install did not install ${f}")
  endif()
endforeach()
# Shared libraries only (but moe-compile's own support archives), and no
# build-tree leftovers.
file(GLOB_RECURSE static_libs "${prefix}/*.a")
list(FILTER static_libs EXCLUDE REGEX "/lib/moe-mlir/libMoEAot(Cuda)?Support\\.a$")
file(GLOB_RECURSE cpp_sources "${prefix}/*.cpp")
file(GLOB_RECURSE cmake_junk LIST_DIRECTORIES true "${prefix}/*")
list(FILTER cmake_junk INCLUDE REGEX "/CMakeFiles(/|$)")
if(static_libs OR cpp_sources OR cmake_junk)
  message(FATAL_ERROR "unexpected files installed: ${static_libs} ${cpp_sources} ${cmake_junk}")
endif()
message(STATUS "installed into ${prefix}")

# 2. The installed tools run from the prefix (their RUNPATH finds the libs).
run("installed moe-opt" "${prefix}/bin/moe-opt" "${example}" --moe-dense-to-moesart=k=2)
expect("installed moe-opt" "${out}" "routing = #moe.moesart<k = 2")
run("installed moe-run" "${prefix}/bin/moe-run" "${example}" --device=cpu --fill-random --seed=1)
expect("installed moe-run" "${out}" "tensor<64x128xf32>")
run("installed plugin in the stock mlir-opt" "${LLVM_TOOLS_DIR}/mlir-opt"
    "--load-dialect-plugin=${prefix}/lib/libMoEPlugin.so"
    "--load-pass-plugin=${prefix}/lib/libMoEPlugin.so" "${example}"
    "--pass-pipeline=builtin.module(moe-dense-to-moesart{k=2},moe-decompose)")
expect("installed plugin" "${out}" "moe.gate" "#moe.moesart<k = 2")

# The installed moe-compile (its support archives from the prefix) and the
# Python package: moe_mlir.compile from <prefix>/lib/python3.X/site-packages
# writes and loads a library (no torch needed to compile).
file(GLOB site "${prefix}/lib/python3*/site-packages")
if(NOT site OR NOT EXISTS "${site}/moe_mlir/__init__.py")
  message(FATAL_ERROR "cmake --install did not install the Python package moe_mlir")
endif()
run("installed moe-compile" "${prefix}/bin/moe-compile" "${example}" -o "${WORK_DIR}/dense.so" --target=cpu)
run("installed moe_mlir" ${CMAKE_COMMAND} -E env "PYTHONPATH=${site}" "MOE_MLIR_CACHE=${WORK_DIR}/cache"
    python3 "${MOE_SOURCE_DIR}/test/consumer/python-package.py" "${example}")
expect("installed moe_mlir" "${out}" "moe_mlir: ${prefix}/bin/moe-compile ['forward']")

# 3. Configure and build the consumer against the prefix alone (no MLIR_DIR:
#    the package finds MLIR itself).
run("configure the consumer" ${CMAKE_COMMAND} -G "${GENERATOR}"
    -S "${MOE_SOURCE_DIR}/test/consumer" -B "${build}"
    -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_C_COMPILER=${C_COMPILER}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
    "-DCMAKE_PREFIX_PATH=${prefix}")
expect("configure the consumer" "${out}" "MoEMLIR found in ${prefix}/lib/cmake/MoEMLIR")
run("build the consumer" ${CMAKE_COMMAND} --build "${build}")

# 4. It links the shared libraries, not a static MLIR.
foreach(exe my-compiler my-c-tool)
  run("readelf ${exe}" "${LLVM_TOOLS_DIR}/llvm-readelf" -d "${build}/${exe}")
  expect("${exe} NEEDED" "${out}" "libMLIR.so" "libMoEMLIR")
  run("nm ${exe}" "${LLVM_TOOLS_DIR}/llvm-nm" --defined-only -C "${build}/${exe}")
  expect_not("${exe} symbols" "${out}" "mlir::MLIRContext::MLIRContext" "mlir::moe::MoEDialect::MoEDialect")
endforeach()

# 5. Run them.
run("my-compiler" "${build}/my-compiler" "${example}")
expect("moe-consumer" "${out}"
  "parsed: 1 dense layer(s)"
  "routing: #moe.moesart<k = 2, adjust = zero, trimmed_lasso = 1.000000e-02> (k 2, adjust zero, lambda 1.000000e-02)"
  " llvm.func, 0 moe op(s), 0 non-LLVM op(s)"
  "chip sm_90"
  "moe-consumer: OK")
expect("moe-consumer" "${out}" "lowered: ")
expect_not("moe-consumer" "${out}" "lowered: 0 llvm.func")
message(STATUS "moe-consumer:\n${out}")
run("my-c-tool" "${build}/my-c-tool" "${example}")
expect("moe-capi-consumer" "${out}"
  "layer routing: #moe.moesart<k = 2, adjust = zero, trimmed_lasso = 1.000000e-02>"
  "moe-capi-test: OK")
message(STATUS "install-consumer: OK")
