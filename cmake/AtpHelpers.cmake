# Helper functions that every libatp target is made with, so that all targets get
# the same warnings, include paths, `atp::` alias and install/export treatment.
#
#   atp_cc_library(NAME wire SRCS a.cc HDRS ... DEPS atp::time PUBLIC_DEPS absl::status
#                  [INTERFACE] [INSTALL])
#     -> target atp_wire, alias atp::wire. INSTALL exports it in the package.
#   atp_cc_test(NAME wire_test SRCS t.cc DEPS atp::wire [LABELS unit] [PROPERTIES ...])
#   atp_cc_benchmark(NAME wire_bench SRCS b.cc DEPS atp::wire)
#   atp_cc_fuzzer(NAME wire_fuzzer SRCS f.cc DEPS atp::wire)   (clang + LIBATP_BUILD_FUZZERS only)
include_guard(GLOBAL)

set(ATP_WARNING_FLAGS
    -Wall -Wextra -Wpedantic -Werror -Wshadow -Wnon-virtual-dtor
    -Wcast-align -Wimplicit-fallthrough -Wno-missing-field-initializers)

set(ATP_INSTALLED_TARGETS "" CACHE INTERNAL "targets exported by the package")

function(atp_apply_sanitizers sanitizers)
  if(sanitizers STREQUAL "")
    return()
  endif()
  string(REPLACE "," ";" list "${sanitizers}")
  foreach(s IN LISTS list)
    if(NOT s MATCHES "^(address|undefined|thread)$")
      message(FATAL_ERROR "LIBATP_SANITIZE: unknown sanitizer '${s}' (address, undefined, thread)")
    endif()
  endforeach()
  if("thread" IN_LIST list AND "address" IN_LIST list)
    message(FATAL_ERROR "LIBATP_SANITIZE: thread cannot be combined with address")
  endif()
  add_compile_options(-fsanitize=${sanitizers} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${sanitizers})
endfunction()

function(_atp_common_target_setup target)
  target_compile_options(${target} PRIVATE ${ATP_WARNING_FLAGS})
  if(LIBATP_NATIVE)
    target_compile_options(${target} PRIVATE -march=native)
  endif()
  # Private headers are included by their path from the repository root
  # ("lib/protocol/worker_engine.h"); public ones as <atp/...>.
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR})
endfunction()

function(atp_cc_library)
  cmake_parse_arguments(ARG "INTERFACE;INSTALL" "NAME" "SRCS;HDRS;DEPS;PUBLIC_DEPS" ${ARGN})
  set(target atp_${ARG_NAME})
  if(ARG_INTERFACE)
    add_library(${target} INTERFACE)
    target_link_libraries(${target} INTERFACE ${ARG_DEPS} ${ARG_PUBLIC_DEPS})
    target_include_directories(${target} INTERFACE
        $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
        $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
        $<INSTALL_INTERFACE:include>)
  else()
    add_library(${target} STATIC ${ARG_SRCS} ${ARG_HDRS})
    _atp_common_target_setup(${target})
    target_include_directories(${target} PUBLIC
        $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
        $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
        $<INSTALL_INTERFACE:include>)
    target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_DEPS})
    target_compile_features(${target} PUBLIC cxx_std_20)
  endif()
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${ARG_NAME})
  add_library(atp::${ARG_NAME} ALIAS ${target})
  if(ARG_INSTALL)
    set(ATP_INSTALLED_TARGETS ${ATP_INSTALLED_TARGETS} ${target} CACHE INTERNAL "")
  endif()
endfunction()

# atp_note_test_target: remembers a test executable whose tests carry the
# labels of the fast tiers (unit, sim), so that `atp_fast_tests` builds just
# what `ctest -L "unit|sim"` runs (the sanitizer tiers of CI build only that).
function(atp_note_test_target target labels)
  if("unit" IN_LIST labels OR "sim" IN_LIST labels)
    set_property(GLOBAL APPEND PROPERTY ATP_FAST_TEST_TARGETS ${target})
  endif()
endfunction()

function(atp_cc_test)
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS;PROPERTIES" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  _atp_common_target_setup(${ARG_NAME})
  if(LIBATP_FAST_TEST_COMPILE)
    # After the build type's flags on the command line, so these win. Debug
    # builds keep -O0 -g: whoever builds them means to step through tests.
    target_compile_options(${ARG_NAME} PRIVATE $<$<CONFIG:RelWithDebInfo,Release>:-Og>
                                               $<$<CONFIG:RelWithDebInfo>:-g1>)
  endif()
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  atp_note_test_target(${ARG_NAME} "${ARG_LABELS}")
  # PRE_TEST: tests are listed when ctest runs, so sanitizer builds do not run
  # every test binary at build time.
  # A list inside PROPERTIES must be escaped, or each test keeps only its first label.
  string(REPLACE ";" "\\;" labels "${ARG_LABELS}")
  gtest_discover_tests(${ARG_NAME}
      DISCOVERY_MODE PRE_TEST
      PROPERTIES LABELS "${labels}" TIMEOUT ${ARG_TIMEOUT} ${ARG_PROPERTIES})
endfunction()

function(atp_cc_benchmark)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  _atp_common_target_setup(${ARG_NAME})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} benchmark::benchmark)
endfunction()

function(atp_cc_fuzzer)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS" ${ARGN})
  if(NOT LIBATP_BUILD_FUZZERS)
    return()
  endif()
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "LIBATP_BUILD_FUZZERS needs clang (CXX=clang++)")
  endif()
  add_executable(${ARG_NAME} ${ARG_SRCS})
  _atp_common_target_setup(${ARG_NAME})
  target_compile_options(${ARG_NAME} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(${ARG_NAME} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS})
endfunction()
