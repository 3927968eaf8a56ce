// python/src/module.cc: the `atp._atp` extension module (pybind11): libatp's
// public API for Python. The pure-Python package `atp` (python/atp/) wraps it.
#include "pybind11/pybind11.h"
#include "python/src/bindings.h"

PYBIND11_MODULE(_atp, m) {
  m.doc() = "libatp: ATP in-network aggregation (workers, parameter servers, options).";
  atp::python::RegisterOptions(m);
  atp::python::RegisterCapture(m);
  atp::python::RegisterTransports(m);
  atp::python::RegisterMetrics(m);
  atp::python::RegisterSkip(m);
  atp::python::RegisterWorker(m);
  atp::python::RegisterParameterServer(m);
  atp::python::RegisterCollectives(m);
}
