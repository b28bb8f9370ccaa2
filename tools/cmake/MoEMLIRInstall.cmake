# Install rules and the CMake package `MoEMLIR` (included from
# tools/CMakeLists.txt once every installed target exists).
#
# Layout under CMAKE_INSTALL_PREFIX:
#   bin/moe-opt, bin/moe-run
#   lib/libMoEMLIR.so          C++ API (MoEMLIR::MoEMLIR)
#   lib/libMoEMLIRCAPI.so      C API   (MoEMLIR::MoECAPI)
#   lib/libMoEPlugin.so        mlir-opt dialect + pass plugin (MoEMLIR::MoEPlugin)
#   lib/libMoECudaRuntime.so   the mgpu* runtime of GPU code (MoEMLIR::MoECudaRuntime)
#   include/moe-mlir/MoEMLIR.h, InitAllMoE.h   the umbrella header and the
#                                             one registration ("moe-mlir/...")
#   include/moe-mlir/{dialect,passes,lowering}/*.h, *.h.inc, *.td
#   include/moe-mlir/dialect/capi/MoE.h, MoEPasses.h
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
set_target_properties(moe-opt moe-run moe-import PROPERTIES
  INSTALL_RPATH "\$ORIGIN/../lib;${LLVM_LIBRARY_DIR}")

install(TARGETS ${MOE_INSTALLED_LIBS} moe-opt moe-run moe-import
  EXPORT MoEMLIRTargets
  RUNTIME DESTINATION bin
  LIBRARY DESTINATION lib
  ARCHIVE DESTINATION lib)

# Public headers, their generated .h.inc, and the ODS sources (for projects
# that use the moe attributes in their own ODS): the files directly in
# dialect/, passes/ and lowering/ (subfolders such as lowering/gpu/ are
# implementation), plus the C API header dialect/capi/MoE.h.
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
install(FILES ${PROJECT_SOURCE_DIR}/dialect/capi/MoE.h
  ${PROJECT_SOURCE_DIR}/dialect/capi/MoEPasses.h
  DESTINATION ${MOE_INSTALL_INCLUDEDIR}/dialect/capi)
# The umbrella header and the one registration of libMoEMLIR.so, included as
# "moe-mlir/MoEMLIR.h" (the include directory <prefix>/include).
install(FILES
  ${PROJECT_SOURCE_DIR}/tools/moe-shlib/include/moe-mlir/MoEMLIR.h
  ${PROJECT_SOURCE_DIR}/tools/moe-shlib/include/moe-mlir/InitAllMoE.h
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
