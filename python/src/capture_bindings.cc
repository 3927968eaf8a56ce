// python/src/capture_bindings.cc: atp.CaptureOptions (atp/capture.h), set on
// TransportOptions.capture to record what a Worker's or ParameterServer's
// device receives and sends as pcap files ("<name>-rx-NNNNN.pcap",
// "<name>-tx-NNNNN.pcap" in `directory`), and capture_available().
#include <cstdint>
#include <string>
#include <utility>

#include "atp/capture.h"
#include "pybind11/pybind11.h"
#include "python/src/bindings.h"
#include "python/src/status.h"

namespace atp::python {
namespace py = pybind11;

void RegisterCapture(py::module_& m) {
  m.def("capture_available", &CaptureAvailable,
        "Whether this libatp was built with libpcap (LIBATP_WITH_PCAP).");

  py::class_<CaptureOptions>(m, "CaptureOptions",
                             "Packet capture of one device, off unless `directory` is set.")
      .def(py::init<>())
      .def(py::init([](std::string directory, std::string name, uint64_t max_file_bytes,
                       uint32_t max_files) {
             CaptureOptions o;
             o.directory = std::move(directory);
             o.name = std::move(name);
             o.max_file_bytes = max_file_bytes;
             o.max_files = max_files;
             return o;
           }),
           py::arg("directory"), py::arg("name") = CaptureOptions{}.name,
           py::arg("max_file_bytes") = CaptureOptions{}.max_file_bytes,
           py::arg("max_files") = CaptureOptions{}.max_files)
      .def_readwrite("directory", &CaptureOptions::directory,
                     "An existing directory; empty: no capture.")
      .def_readwrite("name", &CaptureOptions::name,
                     "The start of every file name: letters, digits, '_', '-', '.'.")
      .def_readwrite("max_file_bytes", &CaptureOptions::max_file_bytes,
                     "Bytes per file before the next one starts (>= 4096).")
      .def_readwrite("max_files", &CaptureOptions::max_files,
                     "Files kept per direction (a ring; the oldest is deleted).")
      .def_property_readonly("enabled", &CaptureOptions::enabled)
      .def("validate", [](const CaptureOptions& o) { ThrowIfError(o.Validate()); })
      .def("__repr__", [](py::handle self) {
        return FieldRepr(self, {"directory", "name", "max_file_bytes", "max_files"});
      });
}

}  // namespace atp::python
