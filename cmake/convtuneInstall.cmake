# Install rules: `cmake --install BUILD [--prefix P]` installs
#   bin/convtune                              the CLI
#   include/convtune/...                      the public headers (core, src, verify, sim and app)
#   lib/libconvtune*.a                        the static libraries
#   lib/cmake/convtune/                       convtuneConfig.cmake, its version file and the targets
#   share/convtune/recordings/<name>/         the recording library (`--replay NAME`)
#   <CONVTUNE_PYTHON_INSTALL_DIR>/convtune/   the Python package (when CONVTUNE_BUILD_PYTHON=ON;
#                                             its rules live in python/CMakeLists.txt)
#
# A consumer writes find_package(convtune) and links convtune::convtune (plus convtune::sim for
# the simulator, convtune::app for the application operations the CLI runs, convtune::dist for
# the distributed tune and dist::agree over MPI). The libraries are static, so the package finds their dependencies again
# (OpenMP, fmt, nlohmann_json, Eigen3, OpenBLAS, oneDNN, cuDNN) through find_dependency.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(CONVTUNE_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/convtune" CACHE STRING
    "Where convtuneConfig.cmake is installed (relative to the prefix)")

# The export names are the ones users see: convtune::convtune, convtune::sim, convtune::core...
set_target_properties(convtune_core PROPERTIES EXPORT_NAME core)
set_target_properties(convtune_cpu PROPERTIES EXPORT_NAME cpu)
set_target_properties(convtune PROPERTIES EXPORT_NAME convtune)
set_target_properties(convtune_sim PROPERTIES EXPORT_NAME sim)
set_target_properties(convtune_app PROPERTIES EXPORT_NAME app)
set_target_properties(convtune_verify PROPERTIES EXPORT_NAME verify)
set_target_properties(convtune_options PROPERTIES EXPORT_NAME options)
set(_convtune_targets convtune_core convtune_cpu convtune convtune_sim convtune_verify convtune_app convtune_options)
if(CONVTUNE_WITH_ONEDNN)
  set_target_properties(convtune_onednn PROPERTIES EXPORT_NAME onednn)
  list(APPEND _convtune_targets convtune_onednn)
endif()
if(CONVTUNE_WITH_CUDNN)
  set_target_properties(convtune_cudnn PROPERTIES EXPORT_NAME cudnn)
  list(APPEND _convtune_targets convtune_cudnn)
endif()
set_target_properties(convtune_dist PROPERTIES EXPORT_NAME dist)
list(APPEND _convtune_targets convtune_dist)

install(TARGETS ${_convtune_targets} EXPORT convtuneTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS convtune_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/data/recordings/ DESTINATION ${CMAKE_INSTALL_DATADIR}/convtune/recordings COMPONENT cli
  FILES_MATCHING PATTERN "*.json" PATTERN "*.md")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/core/include/ ${PROJECT_SOURCE_DIR}/src/include/ ${PROJECT_SOURCE_DIR}/verify/include/
  ${PROJECT_SOURCE_DIR}/sim/include/ ${PROJECT_SOURCE_DIR}/app/include/ ${PROJECT_SOURCE_DIR}/distributed/include/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT devel FILES_MATCHING PATTERN "*.hpp")

install(EXPORT convtuneTargets NAMESPACE convtune:: DESTINATION ${CONVTUNE_INSTALL_CMAKEDIR} COMPONENT devel)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/convtuneConfig.cmake.in
  ${PROJECT_BINARY_DIR}/convtuneConfig.cmake INSTALL_DESTINATION ${CONVTUNE_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/convtuneConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/convtuneConfig.cmake ${PROJECT_BINARY_DIR}/convtuneConfigVersion.cmake
  DESTINATION ${CONVTUNE_INSTALL_CMAKEDIR} COMPONENT devel)
if(CONVTUNE_WITH_CUDNN)
  install(FILES ${PROJECT_SOURCE_DIR}/cmake/FindCUDNN.cmake DESTINATION ${CONVTUNE_INSTALL_CMAKEDIR} COMPONENT devel)
endif()

# test_install (label install): installs this build into a temporary prefix, then configures,
# builds and runs tests/consumer against it with find_package(convtune). The consumer gets this
# build's compiler and flags (the asan preset's libraries need -fsanitize at its link too).
if(CONVTUNE_BUILD_TESTS AND BUILD_TESTING)
  add_test(NAME test_install COMMAND ${CMAKE_COMMAND}
    -DBUILD_DIR=${PROJECT_BINARY_DIR}
    -DWORK_DIR=${PROJECT_BINARY_DIR}/install-test
    -DCONSUMER_DIR=${PROJECT_SOURCE_DIR}/tests/consumer
    -DGENERATOR=${CMAKE_GENERATOR}
    -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
    "-DCXX_FLAGS=${CMAKE_CXX_FLAGS}"
    "-DEXE_LINKER_FLAGS=${CMAKE_EXE_LINKER_FLAGS}"
    -DPYTHON=$<IF:$<BOOL:${CONVTUNE_BUILD_PYTHON}>,${CONVTUNE_PYTHON_EXECUTABLE},>
    -DPYTHON_DIR=${CONVTUNE_PYTHON_INSTALL_DIR}
    -P ${PROJECT_SOURCE_DIR}/tests/consumer/install_test.cmake)
  set_tests_properties(test_install PROPERTIES LABELS "install" TIMEOUT 600 ENVIRONMENT "OMP_NUM_THREADS=2")
endif()
