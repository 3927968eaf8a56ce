// python/src/ps_bindings.cc: atp.ParameterServer (own threads on a transport)
// and atp.EmbeddedParameterServer (frames in, frames out through a Python
// callable), with their counters as dicts.
#include <memory>
#include <string>
#include <utility>

#include "atp/parameter_server.h"
#include "atp/transport_factory.h"
#include "atp/wire.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "python/src/bindings.h"
#include "python/src/status.h"

namespace atp::python {
namespace py = pybind11;

namespace {

py::dict PsStatsDict(const ParameterServerStats& s) {
  py::dict d;
  d["frames_received"] = s.frames_received;
  d["decode_errors"] = s.decode_errors;
  d["source_refused"] = s.source_refused;
  d["frames_sent"] = s.frames_sent;
  d["tx_dropped"] = s.tx_dropped;
  d["gradients"] = s.gradients;
  d["contributions"] = s.contributions;
  d["duplicates"] = s.duplicates;
  d["integer_on_float_path"] = s.integer_on_float_path;
  d["param_resent"] = s.param_resent;
  d["stale"] = s.stale;
  d["ahead"] = s.ahead;
  d["unknown_job"] = s.unknown_job;
  d["wrong_shard"] = s.wrong_shard;
  d["shape_mismatch"] = s.shape_mismatch;
  d["malformed"] = s.malformed;
  d["unexpected_ack"] = s.unexpected_ack;
  d["control"] = s.control;
  d["pulls_answered"] = s.pulls_answered;
  d["pulls_ignored"] = s.pulls_ignored;
  d["completed"] = s.completed;
  d["fp_completed"] = s.fp_completed;
  d["switch_completed"] = s.switch_completed;
  d["collisions_rehashed"] = s.collisions_rehashed;
  d["overflow_requests"] = s.overflow_requests;
  d["orphans_released"] = s.orphans_released;
  d["control_received"] = s.control_received;
  d["control_rejected"] = s.control_rejected;
  d["status_sent"] = s.status_sent;
  d["join_requests"] = s.join_requests;
  d["rebuilds"] = s.rebuilds;
  d["stale_joins"] = s.stale_joins;
  d["unsynchronized_gradients"] = s.unsynchronized_gradients;
  d["unsynchronized_declarations"] = s.unsynchronized_declarations;
  d["replay_requests"] = s.replay_requests;
  d["replays"] = s.replays;
  d["mismatches"] = s.mismatches;
  d["operations_confirmed"] = s.operations_confirmed;
  return d;
}

class PyParameterServer {
 public:
  PyParameterServer(ParameterServerOptions options, const TransportOptions& transport) {
    absl::StatusOr<std::unique_ptr<ParameterServer>> ps;
    {
      py::gil_scoped_release release;
      absl::StatusOr<std::unique_ptr<transport::Device>> device = OpenTransport(transport);
      if (!device.ok()) {
        ps = device.status();
      } else {
        ps = ParameterServer::Start(std::move(options), *std::move(device));
      }
    }
    ps_ = ValueOrThrow(std::move(ps));
  }
  ~PyParameterServer() { Close(); }

  py::dict Stats() {
    if (ps_ == nullptr) throw std::runtime_error("atp.ParameterServer is closed");
    return PsStatsDict(ps_->stats());
  }
  void Close() {
    py::gil_scoped_release release;
    ps_.reset();
  }

 private:
  std::unique_ptr<ParameterServer> ps_;
};

// Calls a Python callable with each frame (bytes) the PS sends.
class PySink : public FrameSink {
 public:
  explicit PySink(py::object send) : send_(std::move(send)) {}
  void SendFrame(std::span<const uint8_t, wire::kFrameBytes> frame) override {
    send_(py::bytes(reinterpret_cast<const char*>(frame.data()), frame.size()));
  }

 private:
  py::object send_;
};

std::span<const uint8_t> Bytes(const py::bytes& b) {
  char* data = nullptr;
  py::ssize_t size = 0;
  PyBytes_AsStringAndSize(b.ptr(), &data, &size);
  return {reinterpret_cast<const uint8_t*>(data), static_cast<size_t>(size)};
}

}  // namespace

void RegisterParameterServer(py::module_& m) {
  py::class_<PyParameterServer>(m, "ParameterServer",
                                "A parameter server with its own I/O threads on a transport.")
      .def(py::init<ParameterServerOptions, const TransportOptions&>(), py::arg("options"),
           py::arg("transport"))
      .def("stats", &PyParameterServer::Stats)
      .def("close", &PyParameterServer::Close)
      .def("__enter__", [](PyParameterServer& p) -> PyParameterServer& { return p; },
           py::return_value_policy::reference)
      .def("__exit__", [](PyParameterServer& p, py::args) { p.Close(); });

  py::class_<EmbeddedParameterServer>(
      m, "EmbeddedParameterServer",
      "A parameter server without threads: hand it frames, it calls send(frame_bytes).")
      .def(py::init([](ParameterServerOptions options, const transport::DeviceAddress& self) {
             return ValueOrThrow(EmbeddedParameterServer::Create(std::move(options), self));
           }),
           py::arg("options"), py::arg("self_address"))
      .def(
          "handle_frame",
          [](EmbeddedParameterServer& ps, const py::bytes& frame, py::object send) {
            PySink sink(std::move(send));
            return std::string(wire::DecodeErrorName(ps.HandleFrame(Bytes(frame), sink)));
          },
          py::arg("frame"), py::arg("send"),
          "One received 306-byte frame; returns 'ok' or why it was rejected.")
      .def(
          "handle_message",
          [](EmbeddedParameterServer& ps, const py::bytes& message, py::object send) {
            PySink sink(std::move(send));
            return std::string(wire::DecodeErrorName(ps.HandleMessage(Bytes(message), sink)));
          },
          py::arg("message"), py::arg("send"))
      .def("release_orphans", &EmbeddedParameterServer::ReleaseOrphans)
      .def("stats", [](const EmbeddedParameterServer& ps) { return PsStatsDict(ps.stats()); });
}

}  // namespace atp::python
