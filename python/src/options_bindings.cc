// python/src/options_bindings.cc: atp/options.h as Python classes (the
// transports: transport_bindings.cc). Fields keep their C++ names; durations are
// float seconds; addresses are "a.b.c.d" strings. validate() raises
// ValueError with the field's path ("WorkerOptions.job.slots: ...").
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "atp/options.h"
#include "atp/transport_factory.h"
#include "atp/wire.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "python/src/bindings.h"
#include "python/src/status.h"

namespace atp::python {
namespace py = pybind11;

namespace {

[[noreturn]] void ThrowFieldError(std::string_view field, const std::string& why) {
  throw py::value_error(std::string(field) + ": " + why);
}

}  // namespace

wire::Ipv4Address ParseIpv4(std::string_view field, const std::string& text) {
  absl::StatusOr<wire::Ipv4Address> ip = wire::Ipv4Address::Parse(text);
  if (!ip.ok()) ThrowFieldError(field, std::string(ip.status().message()));
  return *ip;
}

transport::SocketAddress ParseSocketAddress(std::string_view field, const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) ThrowFieldError(field, "\"" + text + "\" is not IP:PORT");
  const std::string port = text.substr(colon + 1);
  char* end = nullptr;
  const unsigned long value = std::strtoul(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || value > 65535) {
    ThrowFieldError(field, "\"" + text + "\": the port is not 0..65535");
  }
  return {ParseIpv4(field, text.substr(0, colon)), static_cast<uint16_t>(value)};
}

transport::DeviceAddress DeviceAddressOf(std::string_view field, const std::string& ipv4) {
  transport::DeviceAddress address;
  address.ipv4 = ParseIpv4(field, ipv4);
  address.mac = transport::DefaultMacFor(address.ipv4);
  return address;
}

std::string FieldRepr(py::handle self, const std::vector<const char*>& fields) {
  std::string text = py::str(py::type::of(self).attr("__name__"));
  text += "(";
  bool first = true;
  for (const char* name : fields) {
    const py::object value = self.attr(name);
    // py::enum_'s repr is "<Kind.VALUE: 0>"; its str is the readable part.
    const bool is_enum = py::hasattr(py::type::of(value), "__members__");
    text += first ? "" : ", ";
    text += name;
    text += "=";
    text += py::str(is_enum ? py::str(value) : py::repr(value)).cast<std::string>();
    first = false;
  }
  return text + ")";
}

namespace {

// DefRepr: __repr__ over `fields` (FieldRepr).
template <typename T>
void DefRepr(py::class_<T>& cls, std::vector<const char*> fields) {
  cls.def("__repr__",
          [fields = std::move(fields)](py::handle self) { return FieldRepr(self, fields); });
}

template <typename T>
void DefValidate(py::class_<T>& cls) {
  cls.def(
      "validate", [](const T& self) { ThrowIfError(self.Validate()); },
      "Raises ValueError naming the offending field; returns None when valid.");
}

// DefListOfCopies: a list field of bound classes (std::vector<DeviceAddress>,
// std::vector<ParameterServerJobOptions>) as a property that reads and writes
// copies. def_readwrite would hand out references into the vector's storage,
// which the next assignment of the field frees: `j = o.jobs[0]; o.jobs = [...]`
// left `j` reading freed memory. Copies also behave like the other list fields
// (lists of numbers convert by value): to change an element, read the list,
// change it, assign it back.
template <typename Class, typename Element>
void DefListOfCopies(py::class_<Class>& cls, const char* name,
                     std::vector<Element> Class::*field) {
  cls.def_property(
      name, [field](const Class& self) { return self.*field; },
      [field](Class& self, std::vector<Element> value) { self.*field = std::move(value); },
      "a list of copies: changing an element changes nothing here; assign the list back");
}

// A duration field as float seconds.
#define ATP_DURATION_PROPERTY(cls, Type, field)                                       \
  cls.def_property(                                                                  \
      #field, [](const Type& self) { return DurationToSeconds(self.field); },         \
      [](Type& self, double seconds) { self.field = SecondsToDuration(seconds); },    \
      "seconds")

}  // namespace

void RegisterOptions(py::module_& m) {
  py::class_<transport::DeviceAddress>(m, "DeviceAddress",
                                       "An endpoint's IPv4 and MAC (default: DefaultMacFor(ipv4)).")
      .def(py::init([](const std::string& ipv4, const std::string& mac) {
             transport::DeviceAddress address = DeviceAddressOf("DeviceAddress.ipv4", ipv4);
             if (!mac.empty()) {
               absl::StatusOr<wire::MacAddress> parsed = wire::MacAddress::Parse(mac);
               if (!parsed.ok()) {
                 ThrowFieldError("DeviceAddress.mac", std::string(parsed.status().message()));
               }
               address.mac = *parsed;
             }
             return address;
           }),
           py::arg("ipv4"), py::arg("mac") = "")
      .def_property_readonly("ipv4", [](const transport::DeviceAddress& a) { return a.ipv4.ToString(); })
      .def_property_readonly("mac", [](const transport::DeviceAddress& a) { return a.mac.ToString(); })
      .def("__repr__", [](const transport::DeviceAddress& a) {
        return "DeviceAddress('" + a.ipv4.ToString() + "', '" + a.mac.ToString() + "')";
      });

  py::class_<RackLayout> layout(m, "RackLayout",
                                "How a job's workers sit in racks (the job's shape): "
                                "workers_per_rack, one entry per rack, 1..32 racks of 1..32 "
                                "workers; ranks count rack-major.");
  layout.def(py::init<>())
      .def(py::init([](std::vector<uint8_t> workers_per_rack) {
             RackLayout l;
             l.workers_per_rack = std::move(workers_per_rack);
             return l;
           }),
           py::arg("workers_per_rack"))
      .def_static(
          "uniform",
          [](int racks, int workers_per_rack) {
            if (racks < 1 || racks > static_cast<int>(wire::kMaxFanIn)) {
              throw py::value_error(absl::StrCat("RackLayout.uniform: racks = ", racks,
                                                 " is not in 1..", wire::kMaxFanIn));
            }
            if (workers_per_rack < 1 || workers_per_rack > static_cast<int>(wire::kMaxFanIn)) {
              throw py::value_error(absl::StrCat("RackLayout.uniform: workers_per_rack = ",
                                                 workers_per_rack, " is not in 1..",
                                                 wire::kMaxFanIn));
            }
            return RackLayout::Uniform(racks, workers_per_rack);
          },
          py::arg("racks"), py::arg("workers_per_rack"))
      .def_readwrite("workers_per_rack", &RackLayout::workers_per_rack)
      .def("racks", &RackLayout::racks)
      .def("total_workers", &RackLayout::total_workers)
      .def(
          "rank_of",
          [](const RackLayout& self, int rack, int worker_in_rack) {
            const int rank = self.RankOf(rack, worker_in_rack);
            if (rank < 0) {
              throw py::index_error(absl::StrCat("RackLayout.rank_of: the layout has no worker ",
                                                 worker_in_rack, " in rack ", rack));
            }
            return rank;
          },
          py::arg("rack"), py::arg("worker_in_rack"));
  layout.def("validate", [](const RackLayout& l) { ThrowIfError(l.Validate()); });
  DefRepr(layout, {"workers_per_rack"});

  py::enum_<CongestionControl>(m, "CongestionControl",
                               "How a worker queue sizes its window: AIMD (ECN- and loss-driven, "
                               "from initial_window) or FIXED_WINDOW (initial_window forever).")
      .value("AIMD", CongestionControl::kAimd)
      .value("FIXED_WINDOW", CongestionControl::kFixedWindow);

  py::class_<SchedulerOptions> scheduler(
      m, "SchedulerOptions",
      "How a worker cuts an operation into pieces for its I/O threads (job-wide): F fragments "
      "become max(ceil(F / max_piece_fragments), min(io_threads, F / min_piece_fragments)) "
      "pieces.");
  scheduler.def(py::init<>())
      .def_readwrite("min_piece_fragments", &SchedulerOptions::min_piece_fragments)
      .def_readwrite("max_piece_fragments", &SchedulerOptions::max_piece_fragments);
  DefValidate(scheduler);
  DefRepr(scheduler, {"min_piece_fragments", "max_piece_fragments"});

  py::class_<JobOptions> job(m, "JobOptions",
                             "What every worker of a job shares: every worker (and its parameter "
                             "servers, for the fields they share) must use the same values. "
                             "Durations in seconds (inf: never).");
  job.def(py::init<>())
      .def_readwrite("job_id", &JobOptions::job_id)
      .def_readwrite("layout", &JobOptions::layout)
      .def_readwrite("io_threads", &JobOptions::io_threads)
      .def_readwrite("scale", &JobOptions::scale)
      .def_readwrite("slots", &JobOptions::slots)
      .def_readwrite("initial_window", &JobOptions::initial_window)
      .def_readwrite("congestion_control", &JobOptions::congestion_control)
      .def_readwrite("base_port", &JobOptions::base_port)
      .def_readwrite("scheduler", &JobOptions::scheduler);
  ATP_DURATION_PROPERTY(job, JobOptions, retransmission_floor);
  ATP_DURATION_PROPERTY(job, JobOptions, initial_retransmission_timeout);
  ATP_DURATION_PROPERTY(job, JobOptions, max_retransmission_timeout);
  ATP_DURATION_PROPERTY(job, JobOptions, stall_timeout);
  DefValidate(job);
  DefRepr(job, {"job_id", "layout", "io_threads", "scale", "slots", "initial_window",
                "congestion_control", "retransmission_floor", "initial_retransmission_timeout",
                "max_retransmission_timeout", "base_port", "scheduler", "stall_timeout"});

  py::class_<PollingOptions> polling(
      m, "PollingOptions",
      "How an idle I/O thread backs off: spin_iterations idle loops spinning, yield_iterations "
      "yielding, then sleeps from min_sleep doubling up to max_sleep (seconds), woken early by "
      "work or a frame. cpus: thread i runs on cpus[i % len] ([]: unpinned).");
  polling.def(py::init<>())
      .def_static("busy_polling", &PollingOptions::BusyPolling)
      .def_readwrite("spin_iterations", &PollingOptions::spin_iterations)
      .def_readwrite("yield_iterations", &PollingOptions::yield_iterations)
      .def_readwrite("cpus", &PollingOptions::cpus,
                     "CPU ids the threads run on, thread i on cpus[i % len]; [] unpinned");
  ATP_DURATION_PROPERTY(polling, PollingOptions, min_sleep);
  ATP_DURATION_PROPERTY(polling, PollingOptions, max_sleep);
  DefValidate(polling);
  DefRepr(polling, {"spin_iterations", "yield_iterations", "min_sleep", "max_sleep", "cpus"});

  py::class_<WorkerOptions> worker(
      m, "WorkerOptions",
      "One worker of a job: the job's options, its place in job.layout (rack, worker_in_rack), "
      "the job's parameter servers (queue q's go to parameter_servers[q % len], 1..16), how its "
      "I/O threads poll, and max_burst (frames per transport burst, 1..256).");
  worker.def(py::init<>())
      .def_readwrite("job", &WorkerOptions::job)
      .def_readwrite("rack", &WorkerOptions::rack)
      .def_readwrite("worker_in_rack", &WorkerOptions::worker_in_rack)
      .def_readwrite("polling", &WorkerOptions::polling)
      .def_readwrite("max_burst", &WorkerOptions::max_burst);
  DefListOfCopies(worker, "parameter_servers", &WorkerOptions::parameter_servers);
  DefValidate(worker);
  DefRepr(worker, {"job", "rack", "worker_in_rack", "parameter_servers", "polling", "max_burst"});

  py::enum_<ParameterDelivery>(m, "ParameterDelivery",
                                "How a PS sends parameter packets: MULTICAST (one frame to the "
                                "job's group, the network replicates it) or UNICAST (one frame "
                                "per worker: no switch on the path).")
      .value("MULTICAST", ParameterDelivery::kMulticast)
      .value("UNICAST", ParameterDelivery::kUnicast);

  py::class_<ParameterServerJobOptions> ps_job(
      m, "ParameterServerJobOptions",
      "One job a parameter server serves: job_id (distinct among its jobs), layout, delivery; "
      "multicast_group (MULTICAST) or workers (UNICAST: every worker, rack-major); "
      "contribution_skipping: accept SkipReduce's contributions variant.");
  ps_job.def(py::init<>())
      .def_readwrite("job_id", &ParameterServerJobOptions::job_id)
      .def_readwrite("layout", &ParameterServerJobOptions::layout)
      .def_readwrite("delivery", &ParameterServerJobOptions::delivery)
      .def_readwrite("multicast_group", &ParameterServerJobOptions::multicast_group)
      .def_readwrite("contribution_skipping", &ParameterServerJobOptions::contribution_skipping);
  DefListOfCopies(ps_job, "workers", &ParameterServerJobOptions::workers);
  DefValidate(ps_job);
  DefRepr(ps_job, {"job_id", "layout", "delivery", "multicast_group", "workers",
                   "contribution_skipping"});

  py::class_<ParameterServerOptions> ps(
      m, "ParameterServerOptions",
      "One parameter server: the jobs it serves (at least one), slots (equal to their "
      "JobOptions.slots), its place among the jobs' PS hosts (server_index of server_count), "
      "io_threads, polling, max_burst; orphan_timeout and waiting_report_interval in seconds.");
  ps.def(py::init<>())
      .def_readwrite("slots", &ParameterServerOptions::slots)
      .def_readwrite("server_index", &ParameterServerOptions::server_index)
      .def_readwrite("server_count", &ParameterServerOptions::server_count)
      .def_readwrite("io_threads", &ParameterServerOptions::io_threads)
      .def_readwrite("base_port", &ParameterServerOptions::base_port)
      .def_readwrite("polling", &ParameterServerOptions::polling)
      .def_readwrite("max_burst", &ParameterServerOptions::max_burst);
  DefListOfCopies(ps, "jobs", &ParameterServerOptions::jobs);
  ATP_DURATION_PROPERTY(ps, ParameterServerOptions, orphan_timeout);
  ATP_DURATION_PROPERTY(ps, ParameterServerOptions, waiting_report_interval);
  DefValidate(ps);
  DefRepr(ps, {"jobs", "slots", "server_index", "server_count", "io_threads", "base_port",
               "polling", "max_burst", "orphan_timeout", "waiting_report_interval"});
}

}  // namespace atp::python
