# Installs the build into a fresh prefix, then configures and builds programs
# outside the project that find it with find_package(PlanCompiler), and runs
# them: `compile` writes a schedule with the compiler's libraries and, when
# the runtime was built, `train` trains two steps of it with the runtime's.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -P run.cmake
file(REMOVE_RECURSE ${WORK_DIR})
set(sched ${WORK_DIR}/embedded.sched)
function(run_step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
    ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed: ${ARGN}\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

run_step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
run_step(${CMAKE_COMMAND} -G Ninja -S ${SOURCE_DIR}/consumer
  -B ${WORK_DIR}/consumer -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
  -DCMAKE_BUILD_TYPE=Release
  -DPLAN_TRAIN_EXAMPLE=${SOURCE_DIR}/../../examples/runtime/train_embedded.cpp)
run_step(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
run_step(${WORK_DIR}/consumer/compile ${sched})
if(NOT out MATCHES "wrote ${sched}")
  message(FATAL_ERROR "compile wrote no schedule:\n${out}")
endif()
message(STATUS "compiled with the installed compiler:\n${out}")
if(EXISTS ${WORK_DIR}/consumer/train)
  run_step(${WORK_DIR}/consumer/train ${sched} 2)
  if(NOT out MATCHES "step 1 loss [0-9.]+\nstep 2 loss [0-9.]+\n$")
    message(FATAL_ERROR "train did not train two steps:\n${out}")
  endif()
  message(STATUS "trained with the installed runtime:\n${out}")
endif()
