# test_install: `cmake --install` this build into a temporary prefix, check what landed there,
# then configure, build and run tests/consumer against it (find_package(convtune)) and, when the
# Python module is built, import the installed package and run a convolution through it.
#   cmake -DBUILD_DIR=... -DWORK_DIR=... -DCONSUMER_DIR=... -DGENERATOR=... -DCXX_COMPILER=...
#         [-DCXX_FLAGS=... -DEXE_LINKER_FLAGS=...] [-DPYTHON=interpreter -DPYTHON_DIR=relative/site/dir]
#         -P install_test.cmake
cmake_minimum_required(VERSION 3.25)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix "${WORK_DIR}/prefix")
file(REMOVE_RECURSE "${WORK_DIR}")
run("cmake --install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")

foreach(f bin/convtune include/convtune/convtune.hpp include/convtune/problem.hpp include/convtune/sim/simulator.hpp)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
file(GLOB_RECURSE configs "${prefix}/*/convtuneConfig.cmake")
file(GLOB_RECURSE targets "${prefix}/*/convtuneTargets.cmake")
file(GLOB_RECURSE libs "${prefix}/*/libconvtune.a")
if(NOT configs OR NOT targets OR NOT libs)
  message(FATAL_ERROR "CMake package or library missing under ${prefix}: config '${configs}', targets '${targets}', library '${libs}'")
endif()
message(STATUS "installed: ${configs}")

run("installed CLI" "${prefix}/bin/convtune" list)
if(NOT run_output MATCHES "cpu\\.direct")
  message(FATAL_ERROR "installed `convtune list` does not list cpu.direct:\n${run_output}")
endif()
# The recording library (`--replay NAME`): the installed CLI reads its own copy, not the source tree's.
run("installed recording library" ${CMAKE_COMMAND} -E env --unset=CONVTUNE_RECORDINGS_DIR "${prefix}/bin/convtune" list recordings)
string(FIND "${run_output}" "recording library: ${prefix}/share/convtune/recordings " own)
if(own EQUAL -1 OR NOT run_output MATCHES "h200  \\(--replay h200\\)")
  message(FATAL_ERROR "the installed CLI does not list its own recording library:\n${run_output}")
endif()

run("configuring the consumer" ${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${WORK_DIR}/consumer" -G "${GENERATOR}"
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${prefix}"
    "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${EXE_LINKER_FLAGS}")
run("building the consumer" ${CMAKE_COMMAND} --build "${WORK_DIR}/consumer")
run("running the consumer" "${WORK_DIR}/consumer/consumer")
message(STATUS "${run_output}")
if(NOT run_output MATCHES "consumer: ok")
  message(FATAL_ERROR "the consumer did not report ok:\n${run_output}")
endif()

if(PYTHON)
  set(site "${prefix}/${PYTHON_DIR}")
  if(NOT EXISTS "${site}/convtune/__init__.py")
    message(FATAL_ERROR "Python package not installed in ${site}")
  endif()
  # Only the installed package is on the path: the build tree's copy must not be the one found.
  # (No semicolon in the code below: CMake would split the argument there.)
  run("importing the installed Python module" ${CMAKE_COMMAND} -E env "PYTHONPATH=${site}" PYTHONDONTWRITEBYTECODE=1
      "${PYTHON}" -c [=[
import numpy as np, convtune
x = np.arange(2 * 3 * 5 * 5, dtype=np.float32).reshape(2, 3, 5, 5) / 50
w = np.ones((4, 3, 3, 3), dtype=np.float32)
y = convtune.conv(x, w, padding=1)
ref = sum(np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))[:, :, i:i + 5, j:j + 5].sum(axis=1)
          for i in range(3) for j in range(3))[:, None]
assert y.shape == (2, 4, 5, 5), y.shape
# Every term is >= 0, so ref is also sum |x*w|, and 2e-3 covers a TF32 algorithm's bound (2 * 2^-11).
assert np.all(np.abs(y - ref) <= 2e-3 * ref + 1e-6), np.abs(y - ref).max()
print(convtune.__file__)
]=])
  string(STRIP "${run_output}" file)
  cmake_path(IS_PREFIX site "${file}" NORMALIZE under)
  if(NOT under)
    message(FATAL_ERROR "imported convtune from ${file}, not from the install prefix ${site}")
  endif()
  message(STATUS "python: imported ${file}")
  # The shipped data is in the package, and importing it points CONVTUNE_SHAPES_DIR there.
  if(NOT EXISTS "${site}/convtune/data/shapes/benchdnn/LICENSE")
    message(FATAL_ERROR "the shipped data (data/shapes) is not in the installed package ${site}/convtune/data")
  endif()
  run("the installed package's shapes folder" ${CMAKE_COMMAND} -E env --unset=CONVTUNE_SHAPES_DIR "PYTHONPATH=${site}"
      PYTHONDONTWRITEBYTECODE=1 "${PYTHON}" -c "import os, convtune\nprint(os.environ['CONVTUNE_SHAPES_DIR'])")
  string(STRIP "${run_output}" shapes)
  run("the installed package's recording library" ${CMAKE_COMMAND} -E env --unset=CONVTUNE_RECORDINGS_DIR "PYTHONPATH=${site}"
      PYTHONDONTWRITEBYTECODE=1 "${PYTHON}" -c "import os, convtune\nprint(os.environ['CONVTUNE_RECORDINGS_DIR'])")
  string(STRIP "${run_output}" recordings)
  if(NOT recordings STREQUAL "${site}/convtune/data/recordings")
    message(FATAL_ERROR "importing the installed package set CONVTUNE_RECORDINGS_DIR to '${recordings}', not to its own data")
  endif()
  if(NOT shapes STREQUAL "${site}/convtune/data/shapes/benchdnn")
    message(FATAL_ERROR "importing the installed package set CONVTUNE_SHAPES_DIR to '${shapes}', not to its own data")
  endif()
endif()
message(STATUS "test_install: ok")
