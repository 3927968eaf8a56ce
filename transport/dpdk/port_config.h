// transport/dpdk/port_config.h: the choices made when configuring a port
// that depend only on what it reports (pure functions). Private to
// transport/dpdk.
#ifndef ATP_TRANSPORT_DPDK_PORT_CONFIG_H_
#define ATP_TRANSPORT_DPDK_PORT_CONFIG_H_

#include <cstdint>
#include <string_view>

namespace atp::transport::internal {

// SelectTxOffloads: the RTE_ETH_TX_OFFLOAD_* bits to enable, given the port's
// tx_offload_capa. ATP frames are single-segment and carry their IPv4
// checksum (the encoder writes it, UDP has none), so the one offload worth
// having is MBUF_FAST_FREE (the driver frees sent mbufs straight into their
// one mempool); MULTI_SEGS is never asked for, which lets drivers pick their
// simple (vector) transmit path.
uint64_t SelectTxOffloads(uint64_t tx_offload_capa);

// RxFrameRoom: bytes of data room the RX mbufs of driver `driver_name` need
// after the headroom. Drivers of kernel interfaces (af_packet, af_xdp) and
// NICs receive whatever the link carries (up to the MTU), so they get a
// standard 2 KiB buffer; the virtual links between libatp processes (ring,
// memif) carry ATP frames, so a 512-byte room is enough and a frame larger
// than that (chained by memif) is dropped as not ATP.
uint32_t RxFrameRoom(std::string_view driver_name);

// RxDriverReserve: mbufs an RX queue's mempool needs beyond what the
// application may hold, because the driver keeps them posted for arrivals:
// none for drivers that allocate at receive time (ring passes the sender's
// mbufs; memif and af_packet copy into fresh ones); af_xdp's fill ring (2048,
// topped up a burst at a time) and the copies its TX makes into the same
// pool; a NIC's descriptors plus the refill slack.
uint32_t RxDriverReserve(std::string_view driver_name, uint32_t rx_descriptors,
                         uint32_t tx_descriptors);

// DriverAbandonsRxBuffers: whether driver `driver_name` loses, at close, the
// RX mbufs it had posted instead of freeing them (af_xdp: they sit in the
// UMEM fill ring, which is deleted). Such a pool is freed when its port
// closes rather than when every mbuf is back, which would be never.
bool DriverAbandonsRxBuffers(std::string_view driver_name);

// DriverLacksRxInterrupts: whether driver `driver_name` is one of the
// virtual devices known to have no Rx interrupts in DPDK 22.11 (net_memif,
// net_ring, net_af_packet, net_af_xdp, net_null, net_pcap: no
// rx_queue_intr_enable and no per-queue event fd). Other drivers are asked
// for them and may still turn out to have none.
bool DriverLacksRxInterrupts(std::string_view driver_name);

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_DPDK_PORT_CONFIG_H_
