# Run by ctest (a TEST_INCLUDE_FILES script of megatron_add_gtest): registers one test per
# GoogleTest suite of a binary, `<Suite>` running `<binary> --gtest_filter=<Suite>.*` (a
# parameterised suite keeps its instantiation prefix, `Layouts/RingAttention`). The suites come from
# `<binary> --gtest_list_tests`, kept beside the binary and listed again only when the binary is
# newer. A binary that is missing or cannot list its tests becomes one failing test naming it.

function(megatron_add_gtest_suites binary label fixtures)
  get_filename_component(name "${binary}" NAME)
  if(NOT EXISTS "${binary}")
    add_test("${name}_NOT_BUILT" "${binary}")
    return()
  endif()
  set(listing_file "${binary}.suites")
  if(NOT EXISTS "${listing_file}" OR "${binary}" IS_NEWER_THAN "${listing_file}")
    # A LibTorch binary just relinked on a busy 2-core machine has taken over 5 s to start.
    execute_process(COMMAND "${binary}" --gtest_list_tests OUTPUT_VARIABLE listing ERROR_VARIABLE errors
                    RESULT_VARIABLE rc TIMEOUT 60)
    if(NOT rc EQUAL 0)
      add_test("${name}_LIST_FAILED" "${binary}" --gtest_list_tests)
      return()
    endif()
    set(suites "")
    string(REPLACE "\n" ";" lines "${listing}")
    foreach(line IN LISTS lines)
      # "Suite." or "Prefix/Suite." (typed suites add "  # TypeParam = ..."); tests are indented.
      if(line MATCHES "^([A-Za-z_][A-Za-z0-9_/]*)\\.( |$)")
        list(APPEND suites "${CMAKE_MATCH_1}")
      endif()
    endforeach()
    file(WRITE "${listing_file}" "${suites}")
  endif()
  file(READ "${listing_file}" suites)
  foreach(suite IN LISTS suites)
    add_test("${suite}" "${binary}" "--gtest_filter=${suite}.*" --gtest_color=no)
    set_tests_properties("${suite}" PROPERTIES LABELS "${label}")
    if(fixtures)
      set_tests_properties("${suite}" PROPERTIES FIXTURES_REQUIRED "${fixtures}")
    endif()
  endforeach()
endfunction()
