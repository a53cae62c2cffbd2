# Fails, saying what to do, when a checked-in generated file differs from
# the one just generated; touches STAMP when they agree.
#   cmake -DFRESH=... -DCHECKED_IN=... -DSTAMP=... -P CompareGenerated.cmake
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${FRESH} ${CHECKED_IN}
  RESULT_VARIABLE differs)
if(differs)
  message(FATAL_ERROR "${CHECKED_IN} is not what the .td files generate "
    "(${FRESH}). If the .td change is meant, run "
    "`cmake --build <build> --target plan-update-generated` and commit the "
    "result.")
endif()
file(TOUCH ${STAMP})
