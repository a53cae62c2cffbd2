# `cmake --install` puts the tools in bin/, headers under include/plan-compiler/
# and a package config so that `find_package(PlanCompiler)` gives a C++
# program the compiler as a library (PlanCompiler::PlanFrontend, ...).
include(CMakePackageConfigHelpers)

if(PLAN_ENABLE_COMPILER)
  foreach(dir frontend dialects/plan passes)
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/
      DESTINATION ${PLAN_INSTALL_INCLUDEDIR}/${dir}
      FILES_MATCHING PATTERN "*.h" PATTERN "*.td")
    install(DIRECTORY ${PROJECT_BINARY_DIR}/${dir}/
      DESTINATION ${PLAN_INSTALL_INCLUDEDIR}/${dir}
      FILES_MATCHING PATTERN "*.inc"
      PATTERN "CMakeFiles" EXCLUDE)
  endforeach()
  install(EXPORT PlanCompilerTargets NAMESPACE PlanCompiler::
    DESTINATION ${PLAN_INSTALL_CMAKEDIR})
endif()

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/PlanCompilerConfig.cmake.in
  ${PROJECT_BINARY_DIR}/PlanCompilerConfig.cmake
  INSTALL_DESTINATION ${PLAN_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/PlanCompilerConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/PlanCompilerConfig.cmake
  ${PROJECT_BINARY_DIR}/PlanCompilerConfigVersion.cmake
  DESTINATION ${PLAN_INSTALL_CMAKEDIR})
