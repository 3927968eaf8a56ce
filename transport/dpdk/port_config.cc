// transport/dpdk/port_config.cc
#include "transport/dpdk/port_config.h"

#include "transport/dpdk/dpdk_headers.h"

namespace atp::transport::internal {

uint64_t SelectTxOffloads(uint64_t tx_offload_capa) {
  return tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
}

uint32_t RxFrameRoom(std::string_view driver_name) {
  if (driver_name == "net_ring" || driver_name == "net_memif") return 512;
  return RTE_MBUF_DEFAULT_DATAROOM;
}

uint32_t RxDriverReserve(std::string_view driver_name, uint32_t rx_descriptors,
                         uint32_t tx_descriptors) {
  constexpr uint32_t kRefillSlack = 128;  // two bursts of 64
  if (driver_name == "net_ring" || driver_name == "net_memif" || driver_name == "net_af_packet") {
    return 0;
  }
  if (driver_name == "net_af_xdp") {
    constexpr uint32_t kAfXdpFillRing = 2048;  // XSK_RING_CONS__DEFAULT_NUM_DESCS
    return kAfXdpFillRing + kRefillSlack + tx_descriptors;
  }
  return rx_descriptors + kRefillSlack;
}

bool DriverAbandonsRxBuffers(std::string_view driver_name) { return driver_name == "net_af_xdp"; }

bool DriverLacksRxInterrupts(std::string_view driver_name) {
  for (std::string_view none :
       {"net_memif", "net_ring", "net_af_packet", "net_af_xdp", "net_null", "net_pcap"}) {
    if (driver_name == none) return true;
  }
  return false;
}

}  // namespace atp::transport::internal
