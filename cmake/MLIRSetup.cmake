# Finds MLIR 22 and sets up TableGen and include paths for the compiler half.
# MLIR's package version file accepts only exact versions, so check the major
# version ourselves.
find_package(MLIR REQUIRED CONFIG HINTS /usr/lib/llvm-22/lib/cmake/mlir)
if(NOT LLVM_VERSION_MAJOR EQUAL 22)
  message(FATAL_ERROR "MLIR 22 is required, found ${LLVM_PACKAGE_VERSION} in ${MLIR_DIR}")
endif()
message(STATUS "Using MLIR ${LLVM_PACKAGE_VERSION} from ${MLIR_DIR}")

list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")
# LLVM's static Support library names zstd::libzstd_shared, which
# LLVMConfig looks for before LLVM's Findzstd.cmake is on the module path.
if(NOT TARGET zstd::libzstd_shared)
  find_package(zstd REQUIRED)
endif()
set(LLVM_RUNTIME_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/bin)
set(LLVM_LIBRARY_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/lib)
set(MLIR_BINARY_DIR ${CMAKE_BINARY_DIR})
include(TableGen)
include(AddLLVM)
include(AddMLIR)
include(HandleLLVMOptions)

# LLVM_DEFINITIONS is one space-separated string.
separate_arguments(PLAN_LLVM_DEFINITIONS NATIVE_COMMAND "${LLVM_DEFINITIONS}")
add_definitions(${PLAN_LLVM_DEFINITIONS})
include_directories(SYSTEM ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
include_directories(${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})

# Every compiler library and tool links the MLIR and LLVM dylibs: ~1.5 s links
# and small binaries, and no static copy of MLIR mixed in by accident.
set(PLAN_MLIR_LIBS MLIR LLVM)

set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
