// python/src/worker_bindings.cc: atp.Worker and atp.Handle.
//
// Memory: a Worker reads `input` and writes `output` in place (zero copy)
// until the operation finishes, so the Python objects are kept alive by the
// Handle and by the Worker's list of running operations (pruned on each
// call), whether or not the caller keeps the Handle.
//
// GIL: released while libatp works (each call into the Worker, opening the
// transport, waiting, closing). Handle.on_done callbacks run on libatp's I/O
// thread that finished the operation, with the GIL taken for the call.
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "atp/transport_factory.h"
#include "atp/worker.h"
#include "pybind11/functional.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "python/src/bindings.h"
#include "python/src/float_buffer.h"
#include "python/src/metrics_server.h"
#include "python/src/status.h"
#include "python/src/worker_stats_dict.h"

namespace atp::python {
namespace py = pybind11;

namespace {

// PyHandle: a Handle and the Python memory its operation uses.
struct PyHandle {
  Handle handle;
  py::object input;
  py::object output;
};

// A Python callable released with the GIL held, whatever thread drops it.
std::shared_ptr<py::object> GilSafe(py::object callable) {
  return std::shared_ptr<py::object>(new py::object(std::move(callable)), [](py::object* o) {
    py::gil_scoped_acquire gil;
    delete o;
  });
}

void Wait(const PyHandle& h, std::optional<double> timeout_s) {
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = h.handle.Wait(timeout_s.has_value() ? SecondsToDuration(*timeout_s)
                                                 : absl::InfiniteDuration());
  }
  ThrowIfError(status);
}

// in_on_done_callback: this thread runs an on_done callback (where closing
// a Worker would wait for the thread itself: PyWorker::Close refuses).
thread_local int in_on_done_callback = 0;

// OnDone: `callback(None)` on success, `callback("CODE: message")` on failure.
void OnDone(const PyHandle& h, py::object callback) {
  std::shared_ptr<py::object> fn = GilSafe(std::move(callback));
  h.handle.OnDone([fn](const absl::Status& status) {
    py::gil_scoped_acquire gil;
    ++in_on_done_callback;
    struct Leave {
      ~Leave() { --in_on_done_callback; }
    } leave;
    try {
      if (status.ok()) {
        (*fn)(py::none());
      } else {
        (*fn)(py::str(std::string(absl::StatusCodeToString(status.code())) + ": " +
                      std::string(status.message())));
      }
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("atp.Handle.on_done callback");
    }
  });
}

OpOptions MakeOpOptions(Reduction reduction, const std::optional<SkipOptions>& skip) {
  OpOptions options{.reduction = reduction};
  if (skip.has_value()) options.skip = *skip;
  return options;
}

class PyWorker {
 public:
  PyWorker(WorkerOptions options, const TransportOptions& transport) {
    ThrowIfError(options.Validate());
    absl::StatusOr<std::unique_ptr<Worker>> worker;
    {
      py::gil_scoped_release release;
      absl::StatusOr<std::unique_ptr<transport::Device>> device = OpenTransport(transport);
      if (!device.ok()) {
        worker = device.status();
      } else {
        worker = Worker::Create(std::move(options), *std::move(device));
      }
    }
    worker_ = ValueOrThrow(std::move(worker));
  }

  ~PyWorker() { Close(); }

  PyHandle PushPull(py::handle input, py::handle output, Reduction reduction,
                    std::optional<SkipOptions> skip) {
    Worker& w = Live();
    FloatBuffer in = GetFloatBuffer(input, "input", /*writable=*/output.is_none());
    FloatBuffer out = output.is_none() ? in : GetFloatBuffer(output, "output", /*writable=*/true);
    absl::StatusOr<Handle> h;
    {
      py::gil_scoped_release release;
      h = w.PushPull(in.values, out.values, MakeOpOptions(reduction, skip));
    }
    return Track({ValueOrThrow(std::move(h)), in.owner, out.owner});
  }

  PyHandle Push(TensorKey key, py::handle input, Reduction reduction,
                std::optional<SkipOptions> skip) {
    Worker& w = Live();
    FloatBuffer in = GetFloatBuffer(input, "input", /*writable=*/false);
    absl::StatusOr<Handle> h;
    {
      py::gil_scoped_release release;
      h = w.Push(key, in.values, MakeOpOptions(reduction, skip));
    }
    return Track({ValueOrThrow(std::move(h)), in.owner, py::none()});
  }

  PyHandle Pull(TensorKey key, py::handle output) {
    Worker& w = Live();
    FloatBuffer out = GetFloatBuffer(output, "output", /*writable=*/true);
    absl::StatusOr<Handle> h;
    {
      py::gil_scoped_release release;
      h = w.Pull(key, out.values);
    }
    return Track({ValueOrThrow(std::move(h)), py::none(), out.owner});
  }

  void Discard(TensorKey key) { ThrowIfError(Live().Discard(key)); }

  py::dict Stats() { return WorkerStatsDict(Live().stats()); }

  std::shared_ptr<PyMetricsServer> ServeMetrics(int port, const std::string& address) {
    std::shared_ptr<PyMetricsServer> server = PyMetricsServer::ServeWorker(Live(), port, address);
    metrics_.push_back(server);
    return server;
  }

  // Close: stops the I/O threads (running operations finish with
  // CancelledError), then lets go of their memory. Idempotent. Called with
  // the GIL held (from Python, or pybind11's deallocation), which it
  // releases while the threads stop: their on_done callbacks take it. Its
  // metrics servers stop first: a scrape reads the Worker.
  void Close() {
    if (worker_ == nullptr) return;
    if (in_on_done_callback > 0) {
      throw std::runtime_error(
          "atp.Worker.close() inside an on_done callback: the callback runs on an I/O thread "
          "that closing would wait for; close it from another thread");
    }
    for (const std::shared_ptr<PyMetricsServer>& server : metrics_) server->Close();
    metrics_.clear();
    std::unique_ptr<Worker> worker = std::move(worker_);
    {
      py::gil_scoped_release release;
      worker.reset();
    }
    running_.clear();
  }

  bool closed() const { return worker_ == nullptr; }

 private:
  Worker& Live() {
    if (worker_ == nullptr) throw std::runtime_error("atp.Worker is closed");
    while (!running_.empty() && running_.front().handle.Poll()) running_.pop_front();
    return *worker_;
  }

  PyHandle Track(PyHandle h) {
    if (!h.handle.Poll()) running_.push_back(h);
    return h;
  }

  std::unique_ptr<Worker> worker_;
  std::deque<PyHandle> running_;  // under the GIL
  std::vector<std::shared_ptr<PyMetricsServer>> metrics_;  // closed before worker_ goes
};

}  // namespace

void RegisterWorker(py::module_& m) {
  py::enum_<Reduction>(m, "Reduction")
      .value("SUM", Reduction::kSum)
      .value("AVERAGE", Reduction::kAverage);

  py::class_<PyHandle>(m, "Handle", "One running operation of a Worker.")
      .def("wait", &Wait, py::arg("timeout") = py::none(),
           "Blocks (GIL released) until the operation finishes or `timeout` seconds pass: "
           "TimeoutError then (the operation goes on); RuntimeError if it failed.")
      .def("done", [](const PyHandle& h) { return h.handle.Poll(); })
      .def("on_done", &OnDone, py::arg("callback"),
           "callback(None) on success or callback('CODE: message') on failure, once, on the "
           "I/O thread that finishes it (at once if it has finished). Keep it short; "
           "Worker.close() inside it raises RuntimeError.")
      .def_property_readonly("id", [](const PyHandle& h) { return h.handle.id(); })
      .def_property_readonly("output", [](const PyHandle& h) { return h.output; });

  py::class_<PyWorker>(m, "Worker", "A worker of an ATP job (atp/worker.h).")
      .def(py::init<WorkerOptions, const TransportOptions&>(), py::arg("options"),
           py::arg("transport"))
      .def("push_pull", &PyWorker::PushPull, py::arg("input"), py::arg("output") = py::none(),
           py::arg("reduction") = Reduction::kSum, py::arg("skip") = py::none(),
           "Aggregates `input` over the job into `output` (None: in place). float32, contiguous, "
           "CPU; NumPy arrays or torch tensors, no copy. Returns a Handle at once. `skip`: an "
           "atp.SkipOptions (SkipReduce: the same on every worker; its dropped fragments are "
           "not sent and come back zero) or None.")
      .def("push", &PyWorker::Push, py::arg("key"), py::arg("input"),
           py::arg("reduction") = Reduction::kSum, py::arg("skip") = py::none())
      .def("pull", &PyWorker::Pull, py::arg("key"), py::arg("output"))
      .def("discard", &PyWorker::Discard, py::arg("key"))
      .def("stats", &PyWorker::Stats, "A snapshot of the counters (atp::WorkerStats) as a dict.")
      .def("serve_metrics", &PyWorker::ServeMetrics, py::arg("port") = 0,
           py::arg("address") = "127.0.0.1",
           "Serves the counters as Prometheus metrics on http://address:port/metrics (port 0: "
           "any free one, see .port) until the returned atp.MetricsServer or this Worker is "
           "closed. RuntimeError when metrics_available() is False.")
      .def("close", &PyWorker::Close)
      .def_property_readonly("closed", &PyWorker::closed)
      .def("__enter__", [](PyWorker& w) -> PyWorker& { return w; }, py::return_value_policy::reference)
      .def("__exit__", [](PyWorker& w, py::args) { w.Close(); });
}

}  // namespace atp::python
