// transport/dpdk/dpdk_headers.h: the DPDK headers the backend uses, in one
// place. Private to transport/dpdk.
//
// They come through the imported target PkgConfig::ATP_HAVE_DPDK_PC, whose
// include directories CMake passes as system directories, so the C-isms in
// them (volatile arithmetic, zero-length arrays) do not trip -Werror.
#ifndef ATP_TRANSPORT_DPDK_DPDK_HEADERS_H_
#define ATP_TRANSPORT_DPDK_DPDK_HEADERS_H_

#include <rte_bus_vdev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_prefetch.h>
#include <rte_ring.h>

#endif  // ATP_TRANSPORT_DPDK_DPDK_HEADERS_H_
