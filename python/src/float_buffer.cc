#include "python/src/float_buffer.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace atp::python {
namespace py = pybind11;

namespace {

// IsTorchTensor: a torch.Tensor, subclasses included. torch is loaded if one
// exists: read from sys.modules (borrowed, no import on this per-call path).
bool IsTorchTensor(py::handle object) {
  PyObject* torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");
  if (torch == nullptr) return false;
  const py::object tensor_type = py::reinterpret_borrow<py::object>(torch).attr("Tensor");
  return PyObject_IsInstance(object.ptr(), tensor_type.ptr()) == 1;
}

py::object TensorAsArray(py::handle tensor, const char* argument) {
  const std::string dtype = py::str(tensor.attr("dtype"));
  if (dtype != "torch.float32") {
    throw py::type_error(absl::StrCat(argument, ": a ", dtype, " tensor; ATP aggregates float32"));
  }
  const std::string device = py::str(tensor.attr("device").attr("type"));
  if (device != "cpu") {
    throw py::value_error(absl::StrCat(argument, ": a tensor on '", device,
                                       "'; ATP reads CPU memory (move it with .cpu())"));
  }
  if (!tensor.attr("is_contiguous")().cast<bool>()) {
    throw py::value_error(absl::StrCat(argument, ": a non-contiguous tensor (use .contiguous())"));
  }
  if (tensor.attr("is_neg")().cast<bool>()) {
    throw py::value_error(absl::StrCat(
        argument, ": a tensor with its negative bit set, whose memory holds the values negated "
                  "(use .resolve_neg())"));
  }
  return tensor.attr("detach")().attr("numpy")();  // shares the tensor's memory
}

}  // namespace

FloatBuffer GetFloatBuffer(py::handle object, const char* argument, bool writable) {
  py::object array;
  if (IsTorchTensor(object)) {
    array = TensorAsArray(object, argument);
  } else if (PyObject_CheckBuffer(object.ptr())) {
    array = py::reinterpret_borrow<py::object>(object);
  } else {
    throw py::type_error(absl::StrCat(argument, ": expected a float32 NumPy array or torch tensor, got ",
                                      std::string(py::str(py::type::of(object).attr("__name__")))));
  }
  py::buffer_info info;
  try {
    info = py::reinterpret_borrow<py::buffer>(array).request(writable);
  } catch (const py::error_already_set&) {
    throw py::value_error(absl::StrCat(argument, writable ? ": a read-only buffer; the result is written into it"
                                                          : ": the buffer cannot be read"));
  }
  if (info.itemsize != sizeof(float) || (info.format != "f" && info.format != "<f" && info.format != "=f")) {
    throw py::type_error(absl::StrCat(argument, ": dtype format '", info.format,
                                      "'; ATP aggregates float32 ('f')"));
  }
  // C-contiguous: strides are the products of the later dimensions.
  py::ssize_t expected = info.itemsize;
  for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
    const size_t i = static_cast<size_t>(d);
    if (info.shape[i] > 1 && info.strides[i] != expected) {
      throw py::value_error(absl::StrCat(argument, ": a non-contiguous array (use numpy.ascontiguousarray)"));
    }
    expected *= info.shape[i];
  }
  FloatBuffer buffer;
  buffer.owner = std::move(array);
  buffer.values = std::span<float>(static_cast<float*>(info.ptr), static_cast<size_t>(info.size));
  return buffer;
}

}  // namespace atp::python
