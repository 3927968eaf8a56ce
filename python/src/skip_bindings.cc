// python/src/skip_bindings.cc: atp/skip_reduce.h as Python classes, so that
// Python and C++ compute the same skipped sets (the hash is bound, never
// re-implemented): SkipMode, SkipDivisor, SkipOptions (one collective: what
// Worker.push_pull(..., skip=) takes), SkipPolicy (a job's setting over
// buckets and iterations; for_tensor gives a SkipOptions), SkipPlan (which
// steps, slices and contributions one collective skips), and the helpers
// skip_steps_for_rate, random_shift and slice_range. Fields keep their C++ names;
// validate() raises ValueError naming the field.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "atp/skip_reduce.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "python/src/bindings.h"
#include "python/src/status.h"

namespace atp::python {
namespace py = pybind11;

void RegisterSkip(py::module_& m) {
  py::enum_<SkipMode>(m, "SkipMode")
      .value("NONE", SkipMode::kNone)
      .value("STATIC", SkipMode::kStatic)
      .value("RANDOM", SkipMode::kRandom);
  py::enum_<SkipDivisor>(m, "SkipDivisor")
      .value("ALL_RANKS", SkipDivisor::kAllRanks)
      .value("CONTRIBUTORS", SkipDivisor::kContributors);
  py::enum_<SkipVariant>(m, "SkipVariant")
      .value("WHOLE_FRAGMENTS", SkipVariant::kWholeFragments)
      .value("CONTRIBUTIONS", SkipVariant::kContributions);

  py::class_<SkipOptions>(m, "SkipOptions",
                          "SkipReduce for one collective (atp/skip_reduce.h). On ATP "
                          "(Worker.push_pull(..., skip=)): reduce_scatter_steps = k of the N "
                          "slices of fragments are left out (variant WHOLE_FRAGMENTS), or k of "
                          "the N contributions to every fragment (CONTRIBUTIONS; the PS must "
                          "accept it); all_gather_steps must be 0.")
      .def(py::init([](SkipMode mode, int reduce_scatter_steps, int all_gather_steps,
                       SkipDivisor divisor, uint64_t seed, uint64_t iteration, uint64_t tensor,
                       SkipVariant variant) {
             return SkipOptions{.mode = mode,
                                .reduce_scatter_steps = reduce_scatter_steps,
                                .all_gather_steps = all_gather_steps,
                                .divisor = divisor,
                                .seed = seed,
                                .iteration = iteration,
                                .tensor = tensor,
                                .variant = variant};
           }),
           py::arg("mode") = SkipMode::kNone, py::arg("reduce_scatter_steps") = 0,
           py::arg("all_gather_steps") = 0, py::arg("divisor") = SkipDivisor::kAllRanks,
           py::arg("seed") = 0, py::arg("iteration") = 0, py::arg("tensor") = 0,
           py::arg("variant") = SkipVariant::kWholeFragments)
      .def_readwrite("mode", &SkipOptions::mode)
      .def_readwrite("reduce_scatter_steps", &SkipOptions::reduce_scatter_steps)
      .def_readwrite("all_gather_steps", &SkipOptions::all_gather_steps)
      .def_readwrite("divisor", &SkipOptions::divisor)
      .def_readwrite("seed", &SkipOptions::seed)
      .def_readwrite("iteration", &SkipOptions::iteration)
      .def_readwrite("tensor", &SkipOptions::tensor)
      .def_readwrite("variant", &SkipOptions::variant)
      .def(
          "validate",
          [](const SkipOptions& self, int ranks) { ThrowIfError(self.Validate(ranks)); },
          py::arg("ranks"), "Raises ValueError naming the field; None when valid.")
      .def("__repr__", [](const SkipOptions& s) {
        return py::str("SkipOptions(mode={}, reduce_scatter_steps={}, all_gather_steps={}, "
                       "divisor={}, seed={}, iteration={}, tensor={}, variant={})")
            .format(s.mode, s.reduce_scatter_steps, s.all_gather_steps, s.divisor, s.seed,
                    s.iteration, s.tensor, s.variant);
      });

  py::class_<SkipPolicy>(m, "SkipPolicy",
                         "A job's SkipReduce over buckets and iterations: rate, protected "
                         "buckets, per-bucket rates, warm-up. for_tensor(bucket, iteration, "
                         "ranks) gives the SkipOptions of one collective.")
      .def(py::init([](SkipMode mode, double rate, double all_gather_rate, SkipDivisor divisor,
                       uint64_t seed, uint64_t warmup_iterations,
                       std::vector<uint64_t> protected_tensors,
                       std::vector<std::pair<uint64_t, double>> tensor_rates,
                       SkipVariant variant) {
             SkipPolicy p{.mode = mode,
                          .rate = rate,
                          .all_gather_rate = all_gather_rate,
                          .divisor = divisor,
                          .seed = seed,
                          .warmup_iterations = warmup_iterations};
             p.protected_tensors = std::move(protected_tensors);
             p.tensor_rates = std::move(tensor_rates);
             p.variant = variant;
             return p;
           }),
           py::arg("mode") = SkipMode::kNone, py::arg("rate") = 0.0,
           py::arg("all_gather_rate") = 0.0, py::arg("divisor") = SkipDivisor::kAllRanks,
           py::arg("seed") = 0, py::arg("warmup_iterations") = 0,
           py::arg("protected_tensors") = std::vector<uint64_t>{},
           py::arg("tensor_rates") = std::vector<std::pair<uint64_t, double>>{},
           py::arg("variant") = SkipVariant::kWholeFragments)
      .def_readwrite("mode", &SkipPolicy::mode)
      .def_readwrite("rate", &SkipPolicy::rate)
      .def_readwrite("all_gather_rate", &SkipPolicy::all_gather_rate)
      .def_readwrite("divisor", &SkipPolicy::divisor)
      .def_readwrite("seed", &SkipPolicy::seed)
      .def_readwrite("warmup_iterations", &SkipPolicy::warmup_iterations)
      .def_readwrite("protected_tensors", &SkipPolicy::protected_tensors)
      .def_readwrite("tensor_rates", &SkipPolicy::tensor_rates)
      .def_readwrite("variant", &SkipPolicy::variant)
      .def(
          "validate", [](const SkipPolicy& self) { ThrowIfError(self.Validate()); },
          "Raises ValueError naming the field; None when valid.")
      .def("for_tensor", &SkipPolicy::ForTensor, py::arg("tensor"), py::arg("iteration"),
           py::arg("ranks"))
      .def("__repr__", [](py::handle self) {
        return FieldRepr(self, {"mode", "rate", "all_gather_rate", "divisor", "seed",
                                "warmup_iterations", "protected_tensors", "tensor_rates",
                                "variant"});
      });

  m.def("skip_steps_for_rate", &SkipStepsForRate, py::arg("rate"), py::arg("ranks"),
        "k for skipping `rate` of the contributions on `ranks` ranks: round(rate * ranks), at "
        "most ranks - 1.");
  m.def(
      "random_shift",
      [](uint64_t seed, uint64_t iteration, uint64_t tensor, int ranks) {
        if (ranks < 1) throw py::value_error(absl::StrCat("ranks = ", ranks, ": at least 1"));
        return RandomShift(seed, iteration, tensor, ranks);
      },
      py::arg("seed"), py::arg("iteration"), py::arg("tensor"), py::arg("ranks"),
      "Random mode's shift, 0..ranks-1 (the same on every rank and host).");

  py::class_<SkipPlan>(m, "SkipPlan", "Which steps, slices and contributions one collective skips.")
      .def_static(
          "create",
          [](const SkipOptions& options, int ranks) {
            return ValueOrThrow(SkipPlan::Create(options, ranks));
          },
          py::arg("options"), py::arg("ranks"))
      .def_property_readonly("ranks", &SkipPlan::ranks)
      .def_property_readonly("shift", &SkipPlan::shift)
      .def_property_readonly("skipped_reduce_scatter_steps", &SkipPlan::skipped_reduce_scatter_steps)
      .def_property_readonly("skipped_all_gather_steps", &SkipPlan::skipped_all_gather_steps)
      .def_property_readonly("divisor", &SkipPlan::divisor)
      .def("owned_slice", &SkipPlan::OwnedSlice, py::arg("rank"))
      .def("contribution_included", &SkipPlan::ContributionIncluded, py::arg("slice"),
           py::arg("contributor"))
      .def("contributors", &SkipPlan::Contributors)
      .def("slice_arrives", &SkipPlan::SliceArrives, py::arg("slice"), py::arg("rank"))
      .def("average_divisor", &SkipPlan::AverageDivisor)
      .def("slice_dropped", &SkipPlan::SliceDropped, py::arg("slice"))
      .def("skipped_fraction", &SkipPlan::SkippedFraction)
      .def("theoretical_speedup", &SkipPlan::TheoreticalSpeedup);

  m.def(
      "slice_range",
      [](size_t count, int slices, int slice) {
        if (slices < 1 || slice < 0 || slice >= slices) {
          throw py::value_error("slice_range: slice " + std::to_string(slice) + " is outside 0.." +
                                std::to_string(slices - 1));
        }
        const ElementRange r = SliceRange(count, slices, slice);
        return std::pair<size_t, size_t>(r.begin, r.size);
      },
      py::arg("count"), py::arg("slices"), py::arg("slice"),
      "(begin, size) of slice `slice` of `count` elements cut in `slices` nearly equal slices.");
}

}  // namespace atp::python
