# Transport throughput (bench/transport_bench.cc): loopback, kernel UDP
# (plain, GSO/GRO) and the raw socket-pair ceiling they are compared with.
atp_cc_benchmark(NAME transport_bench SRCS ${CMAKE_CURRENT_LIST_DIR}/transport_bench.cc
  DEPS atp::transport_loopback atp::transport_kernel Threads::Threads)
