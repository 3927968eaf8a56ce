// python/src/skip_plan_bindings.cc: SkipReduce's plan (atp/skip_reduce.h) as
// Python classes: SkipMode, SkipDivisor, SkipOptions, SkipPlan, SkipPolicy
// and the free functions. The same C++ code the ring (atp/collectives.h) and
// ATP's PushPull use, so Python computes exactly the slices, shifts and
// divisors they do (nothing of the hash is re-implemented in Python).
// validate() raises ValueError naming the field ("SkipPolicy.rate: ...").
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "atp/skip_reduce.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "python/src/bindings.h"
#include "python/src/status.h"

namespace atp::python {
namespace py = pybind11;

namespace {

// The option types, which Worker.push_pull(skip=) takes too. Branch s15-skip
// (SkipReduce on ATP) binds the same types in python/src/skip_bindings.cc
// (RegisterSkip, before RegisterWorker); once both are merged, that file is
// their one home and this function goes. Until then the guard in
// RegisterSkipReduce keeps the module importable with either or both.
void RegisterSkipOptionTypes(py::module_& m) {
  py::enum_<SkipMode>(m, "SkipMode", "How SkipReduce chooses the skipped slices.")
      .value("NONE", SkipMode::kNone)
      .value("STATIC", SkipMode::kStatic)
      .value("RANDOM", SkipMode::kRandom);
  py::enum_<SkipDivisor>(m, "SkipDivisor", "What an average divides by when contributions are skipped.")
      .value("ALL_RANKS", SkipDivisor::kAllRanks)         // SkipReduce: skipped counts as zero
      .value("CONTRIBUTORS", SkipDivisor::kContributors);  // DropReduce: divide by N - k

  py::class_<SkipOptions>(m, "SkipOptions", "The skipping of one collective (one tensor, one iteration).")
      .def(py::init<>())
      .def_readwrite("mode", &SkipOptions::mode)
      .def_readwrite("reduce_scatter_steps", &SkipOptions::reduce_scatter_steps)
      .def_readwrite("all_gather_steps", &SkipOptions::all_gather_steps)
      .def_readwrite("divisor", &SkipOptions::divisor)
      .def_readwrite("seed", &SkipOptions::seed)
      .def_readwrite("iteration", &SkipOptions::iteration)
      .def_readwrite("tensor", &SkipOptions::tensor)
      .def(
          "validate",
          [](const SkipOptions& self, int ranks) { ThrowIfError(self.Validate(ranks)); },
          py::arg("ranks"), "Raises ValueError naming the offending field.")
      .def("__repr__", [](const SkipOptions& self) {
        return "SkipOptions(mode=" + std::string(py::str(py::cast(self.mode))) +
               ", reduce_scatter_steps=" + std::to_string(self.reduce_scatter_steps) +
               ", all_gather_steps=" + std::to_string(self.all_gather_steps) +
               ", iteration=" + std::to_string(self.iteration) +
               ", tensor=" + std::to_string(self.tensor) + ")";
      });

  py::class_<SkipPolicy>(m, "SkipPolicy", "A job's SkipReduce setting over all its tensors and iterations.")
      .def(py::init<>())
      .def_readwrite("mode", &SkipPolicy::mode)
      .def_readwrite("rate", &SkipPolicy::rate)
      .def_readwrite("all_gather_rate", &SkipPolicy::all_gather_rate)
      .def_readwrite("divisor", &SkipPolicy::divisor)
      .def_readwrite("seed", &SkipPolicy::seed)
      .def_readwrite("warmup_iterations", &SkipPolicy::warmup_iterations)
      .def_readwrite("protected_tensors", &SkipPolicy::protected_tensors)
      .def_readwrite("tensor_rates", &SkipPolicy::tensor_rates)
      .def(
          "validate", [](const SkipPolicy& self) { ThrowIfError(self.Validate()); },
          "Raises ValueError naming the offending field.")
      .def("for_tensor", &SkipPolicy::ForTensor, py::arg("tensor"), py::arg("iteration"),
           py::arg("ranks"),
           "The SkipOptions of the collective on `tensor` in `iteration` over `ranks` ranks.");
  m.def("skip_steps_for_rate", &SkipStepsForRate, py::arg("rate"), py::arg("ranks"),
        "k for skipping `rate` of the contributions: round(rate * ranks), at most ranks - 1.");
  m.def("random_shift", &RandomShift, py::arg("seed"), py::arg("iteration"), py::arg("tensor"),
        py::arg("ranks"), "Random mode's shift of (seed, iteration, tensor), 0..ranks-1.");
}

}  // namespace

void RegisterSkipReduce(py::module_& m) {
  if (!py::hasattr(m, "SkipOptions")) RegisterSkipOptionTypes(m);

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
