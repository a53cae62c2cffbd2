# Installs the build into a fresh prefix, then configures, builds and runs a
# program outside the project that finds it with find_package(PlanCompiler).
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -P run.cmake
file(REMOVE_RECURSE ${WORK_DIR})
foreach(step
    "${CMAKE_COMMAND};--install;${BUILD_DIR};--prefix;${WORK_DIR}/prefix"
    "${CMAKE_COMMAND};-G;Ninja;-S;${SOURCE_DIR}/consumer;-B;${WORK_DIR}/consumer;-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix;-DCMAKE_BUILD_TYPE=Release"
    "${CMAKE_COMMAND};--build;${WORK_DIR}/consumer"
    "${WORK_DIR}/consumer/consumer")
  execute_process(COMMAND ${step} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed: ${step}\n${out}\n${err}")
  endif()
endforeach()
if(NOT out MATCHES "plan.plan @embedded on @mesh")
  message(FATAL_ERROR "the consumer printed no plan:\n${out}")
endif()
message(STATUS "installed package found, built against and run:\n${out}")
