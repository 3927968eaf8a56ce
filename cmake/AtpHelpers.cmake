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
    set_property(GLOBAL APPEND PROPERTY ATP_PCH_library_TARGETS ${target})
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

# _atp_test_target_setup: what every gtest executable is compiled with.
function(_atp_test_target_setup target)
  _atp_common_target_setup(${target})
  if(LIBATP_FAST_TEST_COMPILE)
    # After the build type's flags on the command line, so these win. Debug
    # builds keep -O0 -g: whoever builds them means to step through tests.
    target_compile_options(${target} PRIVATE $<$<CONFIG:RelWithDebInfo,Release>:-Og>
                                             $<$<CONFIG:RelWithDebInfo>:-g1>)
  endif()
  target_link_libraries(${target} PRIVATE GTest::gmock GTest::gtest_main)
endfunction()

# Shared precompiled headers. Parsing Abseil's status and string headers,
# gtest and gmock and the standard headers was 1.3-2 s of a library file's
# 2.8-5 s at -O2 -g1 and about 2 s of a test file's 4-7 s at -Og on this 2-core
# machine (2026-12-02, bench/RESULTS.md "CI build time"). Two PCHs per build
# tree, each built once by an owner target and reused (REUSE_FROM) by every
# target compiled with the same flags:
#   atp_library_pch  atp_cc_library targets (static, -fPIC, build type flags)
#   atp_test_pch     atp_cc_test targets (executables, -fPIE, -Og -g1)
# Only third-party and standard headers: a file still includes what it uses
# from libatp, and a change to a libatp header rebuilds only its users.
# GCC refuses a PCH compiled with other -m options (and -Winvalid-pch, which
# CMake adds, is an error under -Werror), or used after another -include:
# targets with options of their own (-msse4.2), DPDK's flags (-include
# rte_config.h) or a PCH of their own compile without one (_atp_pch_compatible).
# LIBATP_SHARED_PCH=OFF (the default under ccache, below) turns both off.
set(ATP_PCH_STD_HEADERS
    <algorithm> <array> <atomic> <chrono> <cmath> <cstdint> <cstring> <functional> <limits>
    <map> <memory> <optional> <span> <string> <string_view> <utility> <vector>
    <absl/status/status.h> <absl/status/statusor.h> <absl/strings/str_cat.h>)

# _atp_pch_owner(TARGET KIND): the owner target of a shared PCH, made from a
# generated empty source with the flags of KIND (library | test).
function(_atp_pch_owner target kind)
  set(source "${PROJECT_BINARY_DIR}/${target}.cc")
  file(CONFIGURE OUTPUT "${source}"
       CONTENT "// Generated (cmake/AtpHelpers.cmake): owns the ${kind}s' precompiled header.\n")
  if(kind STREQUAL "library")
    add_library(${target} STATIC "${source}")
    _atp_common_target_setup(${target})
    target_compile_features(${target} PUBLIC cxx_std_20)
    target_link_libraries(${target} PRIVATE absl::status absl::statusor absl::strings)
    target_precompile_headers(${target} PRIVATE ${ATP_PCH_STD_HEADERS})
  else()
    file(APPEND "${source}" "int main() { return 0; }\n")
    add_executable(${target} "${source}")
    _atp_test_target_setup(${target})
    target_link_libraries(${target} PRIVATE absl::status absl::statusor absl::strings)
    target_precompile_headers(${target} PRIVATE ${ATP_PCH_STD_HEADERS}
                              <random> <set> <thread> <unordered_map>
                              <gmock/gmock.h> <gtest/gtest.h>)
  endif()
endfunction()

# _atp_pch_compatible(TARGET OWNER OUT): whether TARGET compiles with the
# flags of OWNER, its shared PCH's owner: the same options (the fuzz tree's
# instrumented libraries have more), no DPDK flags from what it links, no PCH
# of its own.
function(_atp_pch_compatible target owner out)
  set(${out} FALSE PARENT_SCOPE)
  get_target_property(own ${target} PRECOMPILE_HEADERS)
  get_target_property(reuse ${target} PRECOMPILE_HEADERS_REUSE_FROM)
  if(own OR reuse)
    return()
  endif()
  get_target_property(options ${target} COMPILE_OPTIONS)
  get_target_property(owner_options ${owner} COMPILE_OPTIONS)
  if(NOT "${options}" STREQUAL "${owner_options}")
    return()
  endif()
  get_target_property(links ${target} LINK_LIBRARIES)
  if(links AND "${links}" MATCHES "atp_transport_dpdk_internal|ATP_HAVE_DPDK")
    return()
  endif()
  set(${out} TRUE PARENT_SCOPE)
endfunction()

# Off by default under a compiler launcher (ccache, /work/ccache-env.sh):
# ccache cannot cache a compile that uses a PCH without sloppiness settings,
# and it already spares rebuilds the parsing. CI builds without one.
if(CMAKE_CXX_COMPILER_LAUNCHER)
  set(_atp_shared_pch_default OFF)
else()
  set(_atp_shared_pch_default ON)
endif()
option(LIBATP_SHARED_PCH "Shared precompiled headers for libraries and tests (default: ON without a compiler launcher)"
       ${_atp_shared_pch_default})

# _atp_share_pchs: run once after the whole tree is configured (DEFER below),
# when every target has its final flags and links.
function(_atp_share_pchs)
  if(NOT LIBATP_SHARED_PCH)
    return()
  endif()
  foreach(kind library test)
    get_property(targets GLOBAL PROPERTY ATP_PCH_${kind}_TARGETS)
    if(NOT targets)
      continue()
    endif()
    _atp_pch_owner(atp_${kind}_pch ${kind})
    foreach(target IN LISTS targets)
      _atp_pch_compatible(${target} atp_${kind}_pch ok)
      if(ok)
        target_precompile_headers(${target} REUSE_FROM atp_${kind}_pch)
      endif()
    endforeach()
  endforeach()
endfunction()
# At the end of the directory that includes this file: the top-level CMakeLists.txt.
cmake_language(DEFER CALL _atp_share_pchs)

function(atp_cc_test)
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS;PROPERTIES" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  _atp_test_target_setup(${ARG_NAME})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS})
  set_property(GLOBAL APPEND PROPERTY ATP_PCH_test_TARGETS ${ARG_NAME})
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
