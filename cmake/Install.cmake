# `cmake --install` puts the tools in bin/, headers under include/plan-compiler/
# (in the source tree's layout) and a package config, so that a C++ program
# gets the compiler and the runtime as libraries:
#   find_package(PlanCompiler REQUIRED)                     the compiler
#   find_package(PlanCompiler REQUIRED COMPONENTS Runtime)  and the runtime
# test/install builds and runs such a program against an installed tree.
include(CMakePackageConfigHelpers)

# The headers a library's public headers include, with the .inc files
# TableGen generates next to them in the build tree.
set(_plan_header_dirs runtime/support runtime/format)
if(PLAN_ENABLE_COMPILER)
  list(APPEND _plan_header_dirs frontend dialects/plan dialects/sched analysis
    passes report export)
endif()
if(PLAN_ENABLE_RUNTIME)
  list(APPEND _plan_header_dirs runtime/core runtime/models runtime/data
    runtime/checkpoint runtime/train)
endif()
foreach(dir ${_plan_header_dirs})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/
    DESTINATION ${PLAN_INSTALL_INCLUDEDIR}/${dir}
    FILES_MATCHING PATTERN "*.h" PATTERN "*.td"
    # The checkpoint library's own parts, not its interface.
    PATTERN "CheckpointFormat.h" EXCLUDE)
  if(EXISTS ${PROJECT_BINARY_DIR}/${dir})
    install(DIRECTORY ${PROJECT_BINARY_DIR}/${dir}/
      DESTINATION ${PLAN_INSTALL_INCLUDEDIR}/${dir}
      FILES_MATCHING PATTERN "*.inc"
      PATTERN "CMakeFiles" EXCLUDE)
  endif()
endforeach()

# PlanCompilerTargets: the schedule format and support libraries always, the
# compiler's libraries when it is built. PlanRuntimeTargets: the runtime's
# LibTorch libraries, loaded only for the Runtime component.
install(EXPORT PlanCompilerTargets NAMESPACE PlanCompiler::
  DESTINATION ${PLAN_INSTALL_CMAKEDIR})
set(PLAN_INSTALLED_RUNTIME OFF)
if(PLAN_ENABLE_RUNTIME)
  set(PLAN_INSTALLED_RUNTIME ON)
  install(EXPORT PlanRuntimeTargets NAMESPACE PlanCompiler::
    DESTINATION ${PLAN_INSTALL_CMAKEDIR})
  if(PLAN_HAVE_CUDA)
    install(FILES ${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake
      DESTINATION ${PLAN_INSTALL_CMAKEDIR})
  endif()
endif()

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/PlanCompilerConfig.cmake.in
  ${PROJECT_BINARY_DIR}/PlanCompilerConfig.cmake
  INSTALL_DESTINATION ${PLAN_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/PlanCompilerConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/PlanCompilerConfig.cmake
  ${PROJECT_BINARY_DIR}/PlanCompilerConfigVersion.cmake
  DESTINATION ${PLAN_INSTALL_CMAKEDIR})
