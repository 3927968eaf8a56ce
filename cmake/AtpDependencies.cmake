# Finds libatp's dependencies, all from Debian packages (scripts/install-deps).
# Optional backends are auto-detected: LIBATP_WITH_DPDK / LIBATP_WITH_MLX5 are
# AUTO (use when found), ON (fail when missing) or OFF.
include_guard(GLOBAL)
include(GoogleTest)
find_package(PkgConfig REQUIRED)

find_package(absl CONFIG REQUIRED)
find_package(fmt CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(Threads REQUIRED)
# nlohmann_json: reads the golden frame vectors in tests (and JSON in tools).
find_package(nlohmann_json CONFIG REQUIRED)
# yaml-cpp: atp-switchd's config file. Chosen over JSON/TOML parsers because
# every node keeps its line (YAML::Mark), so a bad config is refused with the
# line that is wrong.
find_package(yaml-cpp CONFIG REQUIRED)
if(LIBATP_BUILD_TESTS OR NOT DEFINED LIBATP_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
endif()
if(LIBATP_BUILD_BENCHMARKS OR NOT DEFINED LIBATP_BUILD_BENCHMARKS)
  find_package(benchmark CONFIG REQUIRED)
endif()

set(LIBATP_WITH_DPDK AUTO CACHE STRING "DPDK transport: AUTO, ON or OFF")
set(LIBATP_WITH_MLX5 AUTO CACHE STRING "mlx5 RAW Ethernet transport: AUTO, ON or OFF")

function(_atp_optional_backend option result module)
  set(${result} 0 PARENT_SCOPE)
  if(${option} STREQUAL "OFF")
    return()
  endif()
  pkg_check_modules(${result}_PC QUIET IMPORTED_TARGET GLOBAL ${module})
  if(${result}_PC_FOUND)
    set(${result} 1 PARENT_SCOPE)
  elseif(${option} STREQUAL "ON")
    message(FATAL_ERROR "${option}=ON but pkg-config cannot find ${module} (run scripts/install-deps)")
  endif()
endfunction()

_atp_optional_backend(LIBATP_WITH_DPDK ATP_HAVE_DPDK libdpdk)
_atp_optional_backend(LIBATP_WITH_MLX5 ATP_HAVE_MLX5 "libibverbs;libmlx5")

if(ATP_HAVE_DPDK)
  # DPDK's pkg-config flags carry -march=corei7, which would override
  # -march=native on every target that links DPDK and silently turn AVX2 off.
  get_target_property(_dpdk_opts PkgConfig::ATP_HAVE_DPDK_PC INTERFACE_COMPILE_OPTIONS)
  if(_dpdk_opts)
    list(FILTER _dpdk_opts EXCLUDE REGEX "^-march=")
    set_target_properties(PkgConfig::ATP_HAVE_DPDK_PC PROPERTIES INTERFACE_COMPILE_OPTIONS "${_dpdk_opts}")
  endif()
endif()
message(STATUS "libatp: DPDK transport ${ATP_HAVE_DPDK}, mlx5 transport ${ATP_HAVE_MLX5}")

# gloo (Debian libgloo-dev): the transport under the ring allreduce and
# SkipReduce (lib/collectives, issue 11), and gloo's own ring allreduce as its
# baseline. LIBATP_WITH_GLOO is AUTO (use when found), ON (fail when missing)
# or OFF; atp/config.h says ATP_HAVE_GLOO.
set(LIBATP_WITH_GLOO AUTO CACHE STRING "gloo collectives: AUTO, ON or OFF")
set(ATP_HAVE_GLOO 0)
if(NOT LIBATP_WITH_GLOO STREQUAL "OFF")
  find_package(Gloo CONFIG QUIET)
  if(TARGET gloo)
    set(ATP_HAVE_GLOO 1)
  elseif(LIBATP_WITH_GLOO STREQUAL "ON")
    message(FATAL_ERROR "LIBATP_WITH_GLOO=ON but gloo was not found (run scripts/install-deps)")
  endif()
endif()
message(STATUS "libatp: gloo collectives ${ATP_HAVE_GLOO}")
# Visibility (docs/observability.md), optional the same way:
#   LIBATP_WITH_PCAP        packet capture (atp/capture.h) with libpcap (libpcap-dev)
#   LIBATP_WITH_PROMETHEUS  Prometheus metrics endpoints with prometheus-cpp core + pull
#                           (prometheus-cpp-dev)
set(LIBATP_WITH_PCAP AUTO CACHE STRING "packet capture with libpcap: AUTO, ON or OFF")
set(LIBATP_WITH_PROMETHEUS AUTO CACHE STRING "Prometheus metrics with prometheus-cpp: AUTO, ON or OFF")
_atp_optional_backend(LIBATP_WITH_PCAP ATP_HAVE_PCAP libpcap)
set(ATP_HAVE_PROMETHEUS 0)
if(NOT LIBATP_WITH_PROMETHEUS STREQUAL "OFF")
  find_package(prometheus-cpp CONFIG QUIET COMPONENTS core pull)
  if(prometheus-cpp_FOUND AND TARGET prometheus-cpp::pull)
    set(ATP_HAVE_PROMETHEUS 1)
  elseif(LIBATP_WITH_PROMETHEUS STREQUAL "ON")
    message(FATAL_ERROR "LIBATP_WITH_PROMETHEUS=ON but prometheus-cpp (core, pull) is missing "
                        "(run scripts/install-deps)")
  endif()
endif()
message(STATUS "libatp: packet capture ${ATP_HAVE_PCAP}, Prometheus metrics ${ATP_HAVE_PROMETHEUS}")
