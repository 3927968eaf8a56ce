// python/src/collectives_bindings.cc: libatp's ring allreduce with
// SkipReduce (atp/collectives.h) as atp.RingContext: a gloo context over TCP
// whose ranks meet through any store with set/get/wait (torch.distributed's
// stores: TCPStore, FileStore, HashStore, the default group's store).
//
//   ring = atp.RingContext.connect(store, rank, ranks, prefix="atp/ring/1/")
//   ring.allreduce(tensor, average=True, skip=policy.for_tensor(bucket, step, ranks))
//
// Built only with gloo (atp/config.h: ATP_HAVE_GLOO); without it
// collectives_available() is False and RingContext does not exist.
//
// GIL: released for connecting and for each allreduce (they block their
// thread until every rank has taken part); the store adapter takes it back
// for each call into the Python store, from whichever thread gloo calls it.
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "atp/config.h"
#include "pybind11/chrono.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "python/src/bindings.h"

#if ATP_HAVE_GLOO
#include "atp/collectives.h"
#include "gloo/context.h"
#include "gloo/rendezvous/store.h"
#include "python/src/float_buffer.h"
#include "python/src/status.h"
#endif

namespace atp::python {
namespace py = pybind11;

#if ATP_HAVE_GLOO
namespace {

// PythonStore: gloo's rendezvous store over a Python store object (set(key,
// bytes), get(key) -> bytes, wait([keys], timedelta)); every key gets
// `prefix`. Python errors become std::runtime_error here, with the GIL held,
// so nothing Python-owned outlives the GIL.
class PythonStore : public gloo::rendezvous::Store {
 public:
  PythonStore(py::object store, std::string prefix)
      : store_(std::move(store)), prefix_(std::move(prefix)) {}
  ~PythonStore() override {
    py::gil_scoped_acquire gil;
    store_ = py::object();
  }

  void set(const std::string& key, const std::vector<char>& data) override {
    Call([&] { store_.attr("set")(prefix_ + key, py::bytes(data.data(), data.size())); });
  }

  std::vector<char> get(const std::string& key) override {
    std::vector<char> out;
    Call([&] {
      const std::string value = py::bytes(store_.attr("get")(prefix_ + key));
      out.assign(value.begin(), value.end());
    });
    return out;
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }

  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    Call([&] {
      std::vector<std::string> prefixed;
      for (const std::string& key : keys) prefixed.push_back(prefix_ + key);
      store_.attr("wait")(prefixed, timeout);
    });
  }

 private:
  template <typename Fn>
  void Call(Fn&& fn) {
    py::gil_scoped_acquire gil;
    try {
      fn();
    } catch (py::error_already_set& e) {
      throw std::runtime_error(std::string("store: ") + e.what());
    }
  }

  py::object store_;
  std::string prefix_;
};

// PyRingContext: a connected gloo context and its size.
struct PyRingContext {
  std::shared_ptr<gloo::Context> context;
  int rank = 0;
  int ranks = 1;
};

PyRingContext ConnectRing(py::object store, int rank, int ranks, const std::string& hostname,
                          double timeout_s, const std::string& prefix) {
  collectives::ConnectOptions options;
  options.rank = rank;
  options.ranks = ranks;
  options.hostname = hostname;
  options.timeout = SecondsToDuration(timeout_s);
  ThrowIfError(options.Validate("RingContext.connect"));
  PythonStore adapter(std::move(store), prefix);
  absl::StatusOr<std::shared_ptr<gloo::Context>> context;
  {
    py::gil_scoped_release release;
    context = collectives::Connect(adapter, options);
  }
  return PyRingContext{ValueOrThrow(std::move(context)), rank, ranks};
}

void RingAllreduce(const PyRingContext& self, py::handle data, bool average,
                   const SkipOptions& skip, size_t chunk_bytes, int window_chunks, uint32_t tag,
                   double timeout_s) {
  collectives::RingAllreduceOptions options;
  options.op = average ? collectives::ReduceOp::kAverage : collectives::ReduceOp::kSum;
  options.skip = skip;
  options.chunk_bytes = chunk_bytes;
  options.window_chunks = window_chunks;
  options.tag = tag;
  options.timeout = SecondsToDuration(timeout_s);
  ThrowIfError(options.Validate(self.ranks, "RingContext.allreduce"));
  FloatBuffer buffer = GetFloatBuffer(data, "data", /*writable=*/true);
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = collectives::RingAllreduce(*self.context, buffer.values, options);
  }
  ThrowIfError(status);
}

void GlooAllreduce(const PyRingContext& self, py::handle data, double timeout_s) {
  FloatBuffer buffer = GetFloatBuffer(data, "data", /*writable=*/true);
  const absl::Duration timeout = SecondsToDuration(timeout_s);
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = collectives::GlooAllreduce(self.context, buffer.values, timeout);
  }
  ThrowIfError(status);
}

}  // namespace
#endif  // ATP_HAVE_GLOO

void RegisterCollectives(py::module_& m) {
  m.def("collectives_available", [] { return ATP_HAVE_GLOO != 0; },
        "Whether this build has the ring allreduce over gloo (RingContext).");
#if ATP_HAVE_GLOO
  py::class_<PyRingContext>(m, "RingContext",
                            "A gloo TCP context for libatp's ring allreduce with SkipReduce.")
      .def_static("connect", &ConnectRing, py::arg("store"), py::arg("rank"), py::arg("ranks"),
                  py::arg("hostname") = "127.0.0.1", py::arg("timeout") = 30.0,
                  py::arg("prefix") = "",
                  "Connects every rank to every other (blocks until all have called it). "
                  "store: set/get/wait like torch.distributed's stores; prefix: put before "
                  "every key; timeout: seconds, also the context's default.")
      .def_readonly("rank", &PyRingContext::rank)
      .def_readonly("ranks", &PyRingContext::ranks)
      .def("allreduce", &RingAllreduce, py::arg("data"), py::arg("average") = false,
           py::arg("skip") = SkipOptions(), py::arg("chunk_bytes") = size_t{1} << 20,
           py::arg("window_chunks") = 4, py::arg("tag") = 0, py::arg("timeout") = 30.0,
           "Reduces float32 `data` (the same length on every rank) in place: the sum, or "
           "the average (divided as skip.divisor says), skipping what `skip` says.")
      .def("gloo_allreduce", &GlooAllreduce, py::arg("data"), py::arg("timeout") = 30.0,
           "gloo's own ring allreduce (sum) on the same context: the baseline.");
#endif
}

}  // namespace atp::python
