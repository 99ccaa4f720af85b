# FindCUDNN — locate cuDNN (headers + libcudnn) and define CUDNN::cudnn.
#
# Searched, in order: CUDNN_ROOT (variable or environment), the CUDA toolkit, and a Python
# `site-packages/nvidia/cudnn` folder (the pip wheel, whose lib/ has only libcudnn.so.9).
# Sets CUDNN_FOUND, CUDNN_INCLUDE_DIR, CUDNN_LIBRARY, CUDNN_VERSION.
# Only libcudnn is linked: it loads libcudnn_graph/_cnn/_engines_* at run time, so those must
# be findable (LD_LIBRARY_PATH) where the program runs.
set(_cudnn_hints)
foreach(_root IN ITEMS "${CUDNN_ROOT}" "$ENV{CUDNN_ROOT}" "${CUDAToolkit_LIBRARY_ROOT}" "$ENV{CUDA_PATH}" /usr/local/cuda)
  if(_root)
    list(APPEND _cudnn_hints "${_root}")
  endif()
endforeach()
find_package(Python3 QUIET COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))"
    OUTPUT_VARIABLE _cudnn_py OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _cudnn_py_rc)
  if(_cudnn_py_rc EQUAL 0 AND _cudnn_py)
    list(APPEND _cudnn_hints "${_cudnn_py}")
  endif()
endif()

find_path(CUDNN_INCLUDE_DIR cudnn_version.h HINTS ${_cudnn_hints} PATH_SUFFIXES include)
find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ${_cudnn_hints} PATH_SUFFIXES lib64 lib)

if(CUDNN_INCLUDE_DIR AND EXISTS "${CUDNN_INCLUDE_DIR}/cudnn_version.h")
  file(READ "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _cudnn_ver_h)
  string(REGEX MATCH "define CUDNN_MAJOR ([0-9]+)" _ "${_cudnn_ver_h}")
  set(_maj "${CMAKE_MATCH_1}")
  string(REGEX MATCH "define CUDNN_MINOR ([0-9]+)" _ "${_cudnn_ver_h}")
  set(_min "${CMAKE_MATCH_1}")
  string(REGEX MATCH "define CUDNN_PATCHLEVEL ([0-9]+)" _ "${_cudnn_ver_h}")
  set(CUDNN_VERSION "${_maj}.${_min}.${CMAKE_MATCH_1}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR VERSION_VAR CUDNN_VERSION)

if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  add_library(CUDNN::cudnn UNKNOWN IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES IMPORTED_LOCATION "${CUDNN_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
