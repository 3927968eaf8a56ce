// python/src/metrics_bindings.cc: atp.MetricsServer (metrics_server.h) and
// metrics_available(). Worker.serve_metrics (worker_bindings.cc) starts one.
#include <memory>
#include <string>
#include <utility>

#include "atp/metrics.h"
#include "pybind11/pybind11.h"
#include "python/src/bindings.h"
#include "python/src/metrics_server.h"
#include "python/src/status.h"

namespace atp::python {
namespace py = pybind11;

std::shared_ptr<PyMetricsServer> PyMetricsServer::ServeWorker(const Worker& worker, int port,
                                                              const std::string& address) {
  MetricsServerOptions options;
  options.address = address;
  options.port = port;
  absl::StatusOr<std::unique_ptr<MetricsServer>> server;
  {
    py::gil_scoped_release release;
    server = ServeWorkerMetrics(worker, std::move(options));
  }
  auto result = std::make_shared<PyMetricsServer>();
  result->server_ = ValueOrThrow(std::move(server));
  result->port_ = result->server_->port();
  result->address_ = address;
  return result;
}

void PyMetricsServer::Close() {
  py::gil_scoped_release release;
  server_.reset();
}

void RegisterMetrics(py::module_& m) {
  m.def("metrics_available", &MetricsAvailable,
        "Whether this libatp was built with prometheus-cpp (LIBATP_WITH_PROMETHEUS).");

  py::class_<PyMetricsServer, std::shared_ptr<PyMetricsServer>>(
      m, "MetricsServer",
      "Prometheus text exposition of a Worker's counters on http://address:port/metrics "
      "(Worker.serve_metrics); a context manager, closed with its Worker at the latest.")
      .def_property_readonly("port", &PyMetricsServer::port)
      .def_property_readonly("address", &PyMetricsServer::address)
      .def_property_readonly("url",
                             [](const PyMetricsServer& s) {
                               return "http://" + s.address() + ":" + std::to_string(s.port()) +
                                      "/metrics";
                             })
      .def_property_readonly("closed", &PyMetricsServer::closed)
      .def("close", &PyMetricsServer::Close)
      .def("__enter__", [](std::shared_ptr<PyMetricsServer> s) { return s; })
      .def("__exit__", [](PyMetricsServer& s, py::args) { s.Close(); });
}

}  // namespace atp::python
