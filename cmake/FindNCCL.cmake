# FindNCCL: the NCCL headers and library, for the CUDA backend of the runtime.
#
# Looked for, in this order (header and library from the same place):
#   1. NCCL_ROOT (CMake or environment variable): <root>/include, <root>/lib
#   2. the nvidia-nccl pip wheel next to torch (Python module nvidia.nccl:
#      include/nccl.h, lib/libnccl.so.2), the NCCL that libtorch_cuda loads
#   3. the CUDA toolkit (CUDAToolkit_ROOT, /usr/local/cuda: include/nccl.h,
#      lib64/libnccl.so) and the system paths
#
# Defines NCCL_FOUND, NCCL_INCLUDE_DIR, NCCL_LIBRARY, NCCL_VERSION and the
# imported target NCCL::nccl (global).

set(_nccl_hints)
foreach(_root ${NCCL_ROOT} $ENV{NCCL_ROOT})
  list(APPEND _nccl_hints ${_root})
endforeach()

if(NOT Python3_EXECUTABLE)
  find_package(Python3 COMPONENTS Interpreter QUIET)
endif()
if(Python3_EXECUTABLE)
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -W ignore -c
            "import nvidia.nccl as n; print(list(n.__path__)[0])"
    OUTPUT_VARIABLE _nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_QUIET RESULT_VARIABLE _nccl_wheel_rc)
  if(_nccl_wheel_rc EQUAL 0 AND _nccl_wheel)
    list(APPEND _nccl_hints ${_nccl_wheel})
  endif()
endif()

if(CUDAToolkit_LIBRARY_ROOT)
  list(APPEND _nccl_hints ${CUDAToolkit_LIBRARY_ROOT})
endif()
if(CUDAToolkit_ROOT)
  list(APPEND _nccl_hints ${CUDAToolkit_ROOT})
endif()
list(APPEND _nccl_hints $ENV{CUDA_HOME} /usr/local/cuda)

find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS ${_nccl_hints}
  PATH_SUFFIXES include)
if(NCCL_INCLUDE_DIR)
  get_filename_component(_nccl_prefix ${NCCL_INCLUDE_DIR} DIRECTORY)
  # The wheel ships only the versioned name (libnccl.so.2).
  find_library(NCCL_LIBRARY
    NAMES nccl libnccl.so.2
    NAMES_PER_DIR
    HINTS ${_nccl_prefix} ${_nccl_hints}
    PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu)
  file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h _nccl_version_lines
       REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define NCCL_${_part} +([0-9]+).*" "\\1"
           _nccl_${_part} "${_nccl_version_lines}")
  endforeach()
  set(NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL
  REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
  VERSION_VAR NCCL_VERSION)

if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED GLOBAL)
  set_target_properties(NCCL::nccl PROPERTIES
    IMPORTED_LOCATION ${NCCL_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
