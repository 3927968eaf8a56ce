"""atp: libatp (ATP in-network gradient aggregation) for Python and PyTorch.

The core (atp._atp, pybind11) is libatp's public API: options with validate(),
Worker (push_pull / push / pull / discard on float32 NumPy arrays and torch
tensors, zero copy; serve_metrics: Prometheus), Handle (wait, done, on_done),
ParameterServer, EmbeddedParameterServer, the transports of this build
(TransportOptions.kernel_udp / .loopback on a LoopbackWire / .dpdk_memif) and
their packet capture (CaptureOptions), SkipReduce's plan (SkipOptions,
SkipPlan, SkipPolicy: atp/skip_reduce.h) and, with gloo, libatp's ring
allreduce (RingContext: atp/collectives.h). On top, in pure Python:

  atp.hook      DDP communication hooks (register_comm_hook): ATP, or the ring;
                both with SkipReduce (AtpOptions.skip, atp.skip)
  atp.backend   the c10d backend "atp" (dist.init_process_group("atp"))
  atp.local     the local mode: atp-switchd + atp-ps on this machine
  atp.options   AtpOptions: the one options object of the hook and backend
  python -m atp local ...   the local mode's command line

`import atp` does not load torch: atp.hook, atp.backend, atp.local,
atp.rendezvous, atp.skip and atp.stats load on first use (atp.hook.AtpHookState
after a bare `import atp` works, and only then is torch imported), as
`import atp.hook` would load them.

docs/pytorch.md describes all of it.
"""
import importlib

from atp._atp import (  # noqa: F401
    CaptureOptions,
    CongestionControl,
    DeviceAddress,
    EmbeddedParameterServer,
    Handle,
    JobOptions,
    LoopbackWire,
    MetricsServer,
    ParameterDelivery,
    ParameterServer,
    ParameterServerJobOptions,
    ParameterServerOptions,
    PollingOptions,
    RackLayout,
    Reduction,
    SchedulerOptions,
    SkipDivisor,
    SkipMode,
    SkipOptions,
    SkipPlan,
    SkipPolicy,
    SkipVariant,
    TransportOptions,
    Worker,
    WorkerOptions,
    capture_available,
    collectives_available,
    metrics_available,
    random_shift,
    skip_steps_for_rate,
    slice_range,
    transport_available,
)
from atp.options import AtpOptions, SkipReduceOptions  # noqa: F401

if collectives_available():
    from atp._atp import RingContext  # noqa: F401


# The pure-Python modules loaded by __getattr__ on first use; hook and
# backend import torch, which a user of the core alone need not have loaded.
_LAZY_MODULES = frozenset({"backend", "hook", "local", "rendezvous", "skip", "stats"})


def __getattr__(name):
    """atp.<module> for the modules above, imported on first use (PEP 562:
    called only for names the package does not have yet)."""
    if name in _LAZY_MODULES:
        return importlib.import_module("atp." + name)
    raise AttributeError("module 'atp' has no attribute %r" % name)
