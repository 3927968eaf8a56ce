"""AtpOptions: the settings of the DDP hook and the c10d backend, in one object.

Every field has a default that works in the local mode; on a real cluster the
job's PS address and each host's transport come from here or from the
environment (ATP_* variables, read by from_env). Add new settings here (and,
for the backend, to ProcessGroupAtpOptions in python/torch/process_group_atp.h).
"""
import dataclasses
import os
from typing import List, Optional


@dataclasses.dataclass
class AtpOptions:
    # The job. job_id 1..255; racks: workers per rack in rack-major rank
    # order (None: one rack of all ranks).
    job_id: int = 1
    racks: Optional[List[int]] = None
    io_threads: int = 1
    scale: float = 1e8  # quantization factor (atp::kDefaultScale)
    # Where the job's parameter server(s) and this host's endpoint are.
    # local=True (the default when ps_addresses is empty): rank 0 starts
    # atp-switchd and atp-ps on this machine (atp.local) and publishes their
    # addresses in torch's store.
    local: Optional[bool] = None
    ps_addresses: List[str] = dataclasses.field(default_factory=list)
    address: str = ""        # this worker's ATP IPv4 (real cluster)
    udp_bind: str = ""       # kernel UDP: IP:PORT of this worker's queue 0
    udp_gateway: str = ""    # kernel UDP overlay: IP:PORT of the ToR switch's socket
    # Timing. rto_floor_s: the retransmission floor (50 ms, as the testbed
    # uses on a loaded machine; docs/testbed.md). timeout_s: how long a Work
    # or a hook future waits before failing.
    rto_floor_s: float = 0.05
    timeout_s: float = 300.0
    # Polling of the worker's I/O threads: spin this many idle rounds before
    # sleeping (0 on machines with fewer cores than busy threads).
    spin_iterations: int = 0
    yield_iterations: int = 0

    def is_local(self) -> bool:
        return self.local if self.local is not None else not self.ps_addresses

    @staticmethod
    def from_env(**overrides) -> "AtpOptions":
        """Defaults, then ATP_JOB_ID, ATP_PS (comma list), ATP_ADDRESS,
        ATP_UDP_BIND, ATP_UDP_GATEWAY, ATP_IO_THREADS, then `overrides`."""
        o = AtpOptions()
        env = os.environ
        if "ATP_JOB_ID" in env:
            o.job_id = int(env["ATP_JOB_ID"])
        if "ATP_PS" in env:
            o.ps_addresses = [a for a in env["ATP_PS"].split(",") if a]
        if "ATP_IO_THREADS" in env:
            o.io_threads = int(env["ATP_IO_THREADS"])
        o.address = env.get("ATP_ADDRESS", o.address)
        o.udp_bind = env.get("ATP_UDP_BIND", o.udp_bind)
        o.udp_gateway = env.get("ATP_UDP_GATEWAY", o.udp_gateway)
        return dataclasses.replace(o, **overrides)
