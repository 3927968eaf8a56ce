// python/src/float_buffer.h: a float32 contiguous CPU array from Python,
// without a copy: anything with the buffer protocol (NumPy arrays,
// memoryview, array('f')) or a torch.Tensor (through tensor.detach().numpy(),
// which shares the tensor's memory; torch is never imported here).
//
// Anything else raises: TypeError for the wrong kind of object or dtype,
// ValueError for a non-contiguous array, a tensor not on the CPU, or a
// read-only buffer where the result is written.
#ifndef ATP_PYTHON_SRC_FLOAT_BUFFER_H_
#define ATP_PYTHON_SRC_FLOAT_BUFFER_H_

#include <cstddef>
#include <span>

#include "pybind11/pybind11.h"

namespace atp::python {

struct FloatBuffer {
  pybind11::object owner;  // keeps the memory alive (the array, or the tensor's NumPy view)
  std::span<float> values;
};

// `argument` names the parameter in error messages; `writable`: the result
// is written into it.
FloatBuffer GetFloatBuffer(pybind11::handle object, const char* argument, bool writable);

}  // namespace atp::python

#endif  // ATP_PYTHON_SRC_FLOAT_BUFFER_H_
