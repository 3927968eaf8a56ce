// python/torch/torch_module.cc: the `atp._atp_torch` extension: the c10d
// backend as a torch ProcessGroup Python class. python/atp/backend.py builds
// its Worker's options from torch's store and registers it as "atp".
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "atp/errno_status.h"
#include "atp/skip_reduce.h"
#include "atp/transport_factory.h"
#include "atp/worker.h"
#include "pybind11/stl.h"
#include "python/src/worker_stats_dict.h"
#include "python/torch/process_group_atp.h"

namespace py = pybind11;

namespace atp::torch_backend {
namespace {

c10::intrusive_ptr<ProcessGroupAtp> Create(const c10::intrusive_ptr<::c10d::Store>& store, int rank,
                                           int size, WorkerOptions options,
                                           const TransportOptions& transport, double timeout_s,
                                           const SkipPolicy& skip_policy, uint64_t protect_size,
                                           uint64_t call_cycle,
                                           std::vector<uint64_t> protected_calls) {
  ProcessGroupAtpOptions pg_options;
  pg_options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  pg_options.skip = CallSkipOptions{.policy = skip_policy,
                                    .protect_size = protect_size,
                                    .call_cycle = call_cycle,
                                    .protected_calls = std::move(protected_calls)};
  // Refused before a Worker starts (the group's constructor checks again).
  if (absl::Status status = pg_options.skip.Validate("AtpOptions.skip"); !status.ok()) {
    throw py::value_error(std::string(status.message()));
  }
  absl::StatusOr<std::unique_ptr<Worker>> worker;
  {
    py::gil_scoped_release release;
    absl::StatusOr<std::unique_ptr<transport::Device>> device = OpenTransport(transport);
    worker = device.ok() ? Worker::Create(std::move(options), *std::move(device))
                         : absl::StatusOr<std::unique_ptr<Worker>>(device.status());
  }
  if (!worker.ok()) {
    if (absl::IsInvalidArgument(worker.status())) {
      throw py::value_error(std::string(worker.status().message()));
    }
    const std::string why = "atp: cannot start the backend's Worker: ";
    if (const std::optional<int> error = ErrnoOf(worker.status())) {
      // A failed system call (a bind to an address this host lacks): OSError,
      // as python/src/status.cc raises for the package's own endpoints.
      const std::string message = why + std::string(worker.status().message());
      PyErr_SetObject(PyExc_OSError, py::make_tuple(*error, message).ptr());
      throw py::error_already_set();
    }
    throw std::runtime_error(why + worker.status().ToString());
  }
  return c10::make_intrusive<ProcessGroupAtp>(store, rank, size, *std::move(worker), pg_options);
}

}  // namespace
}  // namespace atp::torch_backend

PYBIND11_MODULE(_atp_torch, m) {
  using atp::torch_backend::ProcessGroupAtp;
  m.doc() = "libatp's c10d backend (torch 1.13 ProcessGroup); use atp.backend.register().";
  py::module_::import("torch.distributed");  // c10d's Python types (Store, ProcessGroup)
  py::module_::import("atp._atp");           // WorkerOptions, TransportOptions
  py::class_<ProcessGroupAtp, ::c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupAtp>>(
      m, "ProcessGroupATP")
      .def(py::init(&atp::torch_backend::Create), py::arg("store"), py::arg("rank"),
           py::arg("size"), py::arg("options"), py::arg("transport"), py::arg("timeout_s"),
           py::arg("skip_policy") = atp::SkipPolicy{}, py::arg("protect_size") = 0,
           py::arg("call_cycle") = 0, py::arg("protected_calls") = std::vector<uint64_t>{},
           "skip_policy (atp.SkipPolicy; warmup_iterations counts allreduce calls), "
           "protect_size, call_cycle, protected_calls: SkipReduce per allreduce call "
           "(docs/skipreduce.md)")
      .def_property_readonly("allreduce_calls", &ProcessGroupAtp::allreduce_calls,
                             "allreduce calls started by this group (SkipReduce's iteration "
                             "of the next one)")
      .def("worker_stats", [](const ProcessGroupAtp& pg) {
        return atp::python::WorkerStatsDict(pg.stats());
      });
}
