// python/torch/torch_compat.h: everything in the backend that depends on the
// torch version, in one place (docs/pytorch.md, "Torch versions").
//
// torch 1.13 (Debian 12): a process-group backend subclasses
// c10d::ProcessGroup and Python registers it with
// torch.distributed.Backend.register_backend(name, creator(store, rank, size,
// timeout)); collectives return c10d::Work (torch/csrc/distributed/c10d/Work.hpp).
//
// torch 2.x: collectives moved to c10d::Backend (Backend.hpp); ProcessGroup
// became a dispatcher over backends, and register_backend's creator gets
// (store, rank, size, timeout) and returns a c10d::Backend (2.1+: optional
// `devices=["cpu"]`). Porting: AtpBackendBase = c10d::Backend, its
// constructor takes (rank, size), getBackendName stays, and the pybind class
// derives from c10d::Backend; process_group_atp.cc keeps compiling.
#ifndef ATP_PYTHON_TORCH_TORCH_COMPAT_H_
#define ATP_PYTHON_TORCH_TORCH_COMPAT_H_

#include <torch/version.h>  // TORCH_VERSION_MAJOR
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace atp::torch_backend {

#if TORCH_VERSION_MAJOR >= 2
#error "torch 2.x: derive from c10d::Backend here (see the comment above)"
#endif
using AtpBackendBase = ::c10d::ProcessGroup;

}  // namespace atp::torch_backend

#endif  // ATP_PYTHON_TORCH_TORCH_COMPAT_H_
