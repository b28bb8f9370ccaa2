# Install rules and the CMake package `MoEMLIR` (included from
# tools/CMakeLists.txt once every installed target exists).
#
# Layout under CMAKE_INSTALL_PREFIX:
#   bin/moe-opt, bin/moe-run, bin/moe-import, bin/moe-compile
#   lib/moe-mlir/libMoEAot*Support.a  what moe-compile links into the
#                              libraries it writes (docs/aot.md)
#   lib/python3.X/site-packages/moe_mlir  the Python package (tools/python)
#   lib/libMoEMLIR.so          C++ API (MoEMLIR::MoEMLIR)
#   lib/libMoEMLIRCAPI.so      C API   (MoEMLIR::MoECAPI)
#   lib/libMoEPlugin.so        mlir-opt dialect + pass plugin (MoEMLIR::MoEPlugin)
#   lib/libMoECudaRuntime.so   the mgpu* runtime of GPU code (MoEMLIR::MoECudaRuntime)
#   include/moe-mlir/MoEMLIR.h   the umbrella header ("moe-mlir/MoEMLIR.h")
#   include/moe-mlir/{dialect,passes,lowering}/*.h, *.h.inc, *.td (with
#     lowering/InitAllMoE.h, the one registration, and
#     lowering/{cpu,gpu,mpi}/Passes.h)
#   include/moe-mlir-c/MoE.h, MoEPasses.h
#   lib/cmake/MoEMLIR/MoEMLIRConfig.cmake, MoEMLIRConfigVersion.cmake,
#                     MoEMLIRTargets*.cmake
include(CMakePackageConfigHelpers)

set(MOE_INSTALL_INCLUDEDIR include/moe-mlir)
set(MOE_INSTALL_CMAKEDIR lib/cmake/MoEMLIR)
if(NOT DEFINED MOE_MLIR_VERSION)
  set(MOE_MLIR_VERSION 0.1.0)
endif()

# Installed binaries find our libraries beside them and MLIR/LLVM where
# they were found at build time.
set(MOE_INSTALLED_LIBS MoEMLIR MoECAPI MoEPlugin)
set_target_properties(${MOE_INSTALLED_LIBS} PROPERTIES
  INSTALL_RPATH "\$ORIGIN;${LLVM_LIBRARY_DIR}")
# The CUDA runtime (mgpu* ABI) that GPU code and moe-run load, where built
# (it needs neither MLIR nor LLVM: no RUNPATH).
if(TARGET MoECudaRuntime)
  list(APPEND MOE_INSTALLED_LIBS MoECudaRuntime)
endif()
set_target_properties(moe-opt moe-run moe-import moe-compile PROPERTIES
  INSTALL_RPATH "\$ORIGIN/../lib;${LLVM_LIBRARY_DIR}")

install(TARGETS ${MOE_INSTALLED_LIBS} moe-opt moe-run moe-import moe-compile
  EXPORT MoEMLIRTargets
  RUNTIME DESTINATION bin
  LIBRARY DESTINATION lib
  ARCHIVE DESTINATION lib)
# moe-compile's support archives: private to it (not a CMake target of the
# package); the installed moe-compile looks for them here first.
install(FILES $<TARGET_FILE:MoEAotSupport> $<TARGET_FILE:MoEAotCudaSupport>
  DESTINATION lib/moe-mlir)

# Public headers, their generated .h.inc, and the ODS sources (for projects
# that use the moe attributes in their own ODS): the files directly in
# dialect/, passes/ and lowering/ (lowering/InitAllMoE.h, the one
# registration, among them), and the pass declarations of each lowering
# library (lowering/{cpu,gpu,mpi}/Passes.h, .td, .h.inc; the rest of those
# subfolders is implementation).
foreach(dir dialect passes lowering)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/
    DESTINATION ${MOE_INSTALL_INCLUDEDIR}/${dir}
    FILES_MATCHING PATTERN "*.h" PATTERN "*.td"
    REGEX "/${dir}/[^/.]+$" EXCLUDE)
  install(DIRECTORY ${PROJECT_BINARY_DIR}/${dir}/
    DESTINATION ${MOE_INSTALL_INCLUDEDIR}/${dir}
    FILES_MATCHING PATTERN "*.h.inc"
    REGEX "/${dir}/[^/.]+$" EXCLUDE)
endforeach()
foreach(lib cpu gpu mpi)
  install(FILES ${PROJECT_SOURCE_DIR}/lowering/${lib}/Passes.h
    ${PROJECT_SOURCE_DIR}/lowering/${lib}/Passes.td
    DESTINATION ${MOE_INSTALL_INCLUDEDIR}/lowering/${lib})
  set(generated ${PROJECT_BINARY_DIR}/lowering/${lib}/Passes.h.inc)
  if(NOT lib STREQUAL "mpi")
    list(APPEND generated ${PROJECT_BINARY_DIR}/lowering/${lib}/Passes.capi.h.inc)
  endif()
  install(FILES ${generated} DESTINATION ${MOE_INSTALL_INCLUDEDIR}/lowering/${lib})
endforeach()
# The C API headers, included as "moe-mlir-c/MoE.h" (the include directory
# <prefix>/include), as upstream's "mlir-c/...".
install(DIRECTORY ${PROJECT_SOURCE_DIR}/tools/moe-capi/include/moe-mlir-c
  DESTINATION include)
# The umbrella header of libMoEMLIR.so, included as "moe-mlir/MoEMLIR.h".
install(FILES
  ${PROJECT_SOURCE_DIR}/tools/moe-shlib/include/moe-mlir/MoEMLIR.h
  DESTINATION ${MOE_INSTALL_INCLUDEDIR})

install(EXPORT MoEMLIRTargets
  NAMESPACE MoEMLIR::
  DESTINATION ${MOE_INSTALL_CMAKEDIR})

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/MoEMLIRConfig.cmake.in
  ${PROJECT_BINARY_DIR}/lib/cmake/MoEMLIR/MoEMLIRConfig.cmake
  INSTALL_DESTINATION ${MOE_INSTALL_CMAKEDIR}
  PATH_VARS MOE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/lib/cmake/MoEMLIR/MoEMLIRConfigVersion.cmake
  VERSION ${MOE_MLIR_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/lib/cmake/MoEMLIR/MoEMLIRConfig.cmake
  ${PROJECT_BINARY_DIR}/lib/cmake/MoEMLIR/MoEMLIRConfigVersion.cmake
  DESTINATION ${MOE_INSTALL_CMAKEDIR})
