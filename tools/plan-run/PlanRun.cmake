# plan-run. The launch pieces (command line, launcher variables, local rank
# spawning, metrics, progress, planc invocation) need no LibTorch: they form
# PlanRunLaunch, which the launch gtests link without the runtime. The rank
# itself (Rank.cpp) links the runtime libraries, and is only built once they
# exist. plan-run never links MLIR: a .plan is compiled by running planc.
find_package(CLI11 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)

add_library(PlanRunLaunch STATIC
  FaultInjection.cpp
  Launch.cpp
  Metrics.cpp
  Options.cpp
  Progress.cpp
  ScheduleInput.cpp)
target_include_directories(PlanRunLaunch PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(PlanRunLaunch PUBLIC CLI11::CLI11 nlohmann_json::nlohmann_json
  PlanRuntimeSupport)

set(_plan_run_libs PlanRuntimeTrain PlanRuntimeCore PlanRuntimeModels
  PlanRuntimeData PlanRuntimeCheckpoint)
set(_plan_run_missing)
foreach(lib ${_plan_run_libs})
  if(NOT TARGET ${lib})
    list(APPEND _plan_run_missing ${lib})
  endif()
endforeach()

if(_plan_run_missing)
  message(STATUS "plan-run: not built yet (missing ${_plan_run_missing})")
  return()
endif()

add_executable(plan-run main.cpp Calibrate.cpp Rank.cpp Verify.cpp)
# Calibrate.cpp reads the time model's efficiencies from
# analysis/Efficiencies.h, a plain header (no MLIR).
target_include_directories(plan-run PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(plan-run PRIVATE PlanRunLaunch ${_plan_run_libs}
  PlanScheduleFormat PlanTorch)
# Next to planc, which plan-run looks for beside itself; and where lit finds
# the tools.
set_target_properties(plan-run PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
install(TARGETS plan-run RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# `plan-run --version` names the version and the backends of this build (the
# lit suite's "cuda" feature reads it).
target_compile_definitions(plan-run PRIVATE
  PLAN_RUN_VERSION="${PROJECT_VERSION}")
