# megatron_add_library(<module> SOURCES ... DEPS ...): one library per module, public headers in
# include/megatron/<module>/, target megatron_<module> with alias megatron::<module>.
function(megatron_add_library module)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  set(target megatron_${module})
  add_library(${target} STATIC ${ARG_SOURCES})
  add_library(megatron::${module} ALIAS ${target})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${MEGATRON_WARNINGS}>)
  target_link_libraries(${target} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

# megatron_add_tool(<name> DEPS ...): a thin executable from tools/<name>.cpp.
function(megatron_add_tool name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  add_executable(${name} ${name}.cpp)
  target_compile_options(${name} PRIVATE ${MEGATRON_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
endfunction()

# megatron_add_gtest(<name> SOURCES ... DEPS ... LABELS <label>): a GoogleTest binary registered
# with CTest one test per GoogleTest suite (`<Suite>`, running --gtest_filter=<Suite>.*) under the
# label, listed when ctest runs (cmake/GtestSuites.cmake). Per suite, not per test: a binary that
# links LibTorch takes half a second to start, which one process per test multiplied into minutes
# of the suite. Test sources can include the shared helpers in tests/unit/ (test_support.h); the
# paths they name come from the generated megatron_test_paths library (tests/CMakeLists.txt,
# tests/unit/test_paths.h). FIXTURES_REQUIRED: CTest fixtures every test of the binary needs (a
# reference made once).
function(megatron_add_gtest name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS;FIXTURES_REQUIRED" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/unit)
  target_compile_options(${name} PRIVATE ${MEGATRON_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} megatron_test_paths GTest::gtest GTest::gtest_main)
  add_dependencies(${name} megatron_test_data)
  list(LENGTH ARG_LABELS label_count)
  if(NOT label_count EQUAL 1)
    message(FATAL_ERROR "megatron_add_gtest(${name}): one label, got '${ARG_LABELS}'")
  endif()
  set(script "${CMAKE_CURRENT_BINARY_DIR}/${name}_suites.cmake")
  file(GENERATE OUTPUT "${script}" CONTENT
       "include(\"${PROJECT_SOURCE_DIR}/cmake/GtestSuites.cmake\")
megatron_add_gtest_suites(\"$<TARGET_FILE:${name}>\" \"${ARG_LABELS}\" \"${ARG_FIXTURES_REQUIRED}\")
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${script}")
endfunction()

# megatron_add_mpi_gtest(<name> SOURCES ... DEPS ... NP <n>...): a GoogleTest binary run under
# mpirun once per rank count (CTest tests <name>.np<n>, label mpi), through tests/mpirun.sh (root,
# oversubscription, shared-memory transport). Its main (tests/unit/mpi_test_main.cpp) makes the
# world communicator and fails every rank when one rank fails.
function(megatron_add_mpi_gtest name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;NP" ${ARGN})
  add_executable(${name} ${ARG_SOURCES} ${PROJECT_SOURCE_DIR}/tests/unit/mpi_test_main.cpp)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/unit)
  target_compile_options(${name} PRIVATE ${MEGATRON_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} megatron::parallel_layers megatron_test_paths GTest::gtest)
  add_dependencies(${name} megatron_test_data)
  foreach(np IN LISTS ARG_NP)
    add_test(NAME ${name}.np${np}
             COMMAND ${PROJECT_SOURCE_DIR}/tests/mpirun.sh -np ${np} $<TARGET_FILE:${name}>)
    set_tests_properties(${name}.np${np} PROPERTIES LABELS mpi PROCESSORS ${np} TIMEOUT 600
                         ENVIRONMENT "MEGATRON_MPIEXEC=${MPIEXEC_EXECUTABLE}")
  endforeach()
endfunction()
