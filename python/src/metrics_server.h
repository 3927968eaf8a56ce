// python/src/metrics_server.h: atp.MetricsServer, a Prometheus endpoint over
// one Worker's stats (atp/metrics.h), as Worker.serve_metrics returns it.
//
// Ownership: the Python object and the Worker share it; the Worker closes
// every server it started before its I/O threads stop (a scrape reads the
// Worker's stats), so a server left open never outlives its Worker.
#ifndef ATP_PYTHON_SRC_METRICS_SERVER_H_
#define ATP_PYTHON_SRC_METRICS_SERVER_H_

#include <memory>
#include <string>

#include "atp/metrics.h"
#include "atp/worker.h"

namespace atp::python {

class PyMetricsServer {
 public:
  // ServeWorker: listens on address:port (0: any free port) and answers
  // GET /metrics with `worker`'s counters, labelled job=<id>. Raises
  // RuntimeError without prometheus-cpp or when the port cannot be bound.
  static std::shared_ptr<PyMetricsServer> ServeWorker(const Worker& worker, int port,
                                                      const std::string& address);

  int port() const { return port_; }
  const std::string& address() const { return address_; }
  bool closed() const { return server_ == nullptr; }
  // Close: stops answering (waits for a scrape in progress). Idempotent.
  void Close();

 private:
  std::unique_ptr<MetricsServer> server_;
  int port_ = 0;
  std::string address_;
};

}  // namespace atp::python

#endif  // ATP_PYTHON_SRC_METRICS_SERVER_H_
