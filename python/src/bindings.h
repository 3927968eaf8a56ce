// python/src/bindings.h: the registration functions of the `atp._atp`
// module, one per binding file, and the helpers they share.
#ifndef ATP_PYTHON_SRC_BINDINGS_H_
#define ATP_PYTHON_SRC_BINDINGS_H_

#include <string>
#include <string_view>
#include <vector>

#include "atp/transport.h"
#include "atp/transport/kernel_udp.h"
#include "pybind11/pybind11.h"

namespace atp::python {

void RegisterOptions(pybind11::module_& m);      // options_bindings.cc
void RegisterWorker(pybind11::module_& m);       // worker_bindings.cc
void RegisterParameterServer(pybind11::module_& m);  // ps_bindings.cc
void RegisterTransports(pybind11::module_& m);   // transport_bindings.cc
void RegisterCapture(pybind11::module_& m);      // capture_bindings.cc
void RegisterMetrics(pybind11::module_& m);      // metrics_bindings.cc
void RegisterSkip(pybind11::module_& m);         // skip_bindings.cc
void RegisterCollectives(pybind11::module_& m);  // collectives_bindings.cc (needs RegisterSkip first)

// Text -> address for option fields. A bad value raises ValueError whose
// message starts with `field`, the path of the option it was given for
// ("TransportOptions.kernel_udp.bind: \"x\" is not IP:PORT"), as Validate()'s
// messages do: a caller that sets several addresses learns which one.
wire::Ipv4Address ParseIpv4(std::string_view field, const std::string& text);
transport::SocketAddress ParseSocketAddress(std::string_view field,
                                            const std::string& text);  // "IP:PORT"
// DeviceAddressOf: `ipv4` with its default MAC (transport::DefaultMacFor).
transport::DeviceAddress DeviceAddressOf(std::string_view field, const std::string& ipv4);

// FieldRepr: an options object's __repr__, "JobOptions(job_id=1, layout=...)":
// each of `fields` as Python reads it (durations in seconds, nested options
// by their own repr, enum values as Enum.VALUE), in the C++ header's order.
std::string FieldRepr(pybind11::handle self, const std::vector<const char*>& fields);

}  // namespace atp::python

#endif  // ATP_PYTHON_SRC_BINDINGS_H_
