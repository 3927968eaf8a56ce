"""Shared fixtures: a local job (atp-switchd + atp-ps) and its workers."""
import numpy as np
import pytest

import atp
from atp import local


def exact_sum(inputs, scale=1e8):
    """ATP's aggregate, computed independently: the exact sum of
    round_half_even(double(x) * scale) as integers, divided by scale in
    double, rounded to float32."""
    q = sum(np.rint(x.astype(np.float64) * scale).astype(np.int64) for x in inputs)
    return (q.astype(np.float64) / scale).astype(np.float32)


def worker_options(job, rank, rto_floor_s=0.05):
    w = atp.WorkerOptions()
    w.job.job_id = job["job_id"]
    w.job.layout = atp.RackLayout.uniform(1, job["world_size"])
    w.job.io_threads = job["io_threads"]
    w.job.retransmission_floor = rto_floor_s
    w.job.initial_retransmission_timeout = max(0.02, rto_floor_s)
    w.rack, w.worker_in_rack = 0, rank
    w.parameter_servers = [atp.DeviceAddress(a) for a in job["ps"]]
    w.polling.spin_iterations = 0
    w.polling.yield_iterations = 0
    me = job["workers"][rank]
    t = atp.TransportOptions.kernel_udp(address=me["address"], bind=me["udp_bind"],
                                        queues=job["io_threads"], gateway=me["udp_gateway"],
                                        whole_frame=True)
    return w, t


@pytest.fixture(scope="module")
def two_workers():
    with local.local_cluster(2) as handle:
        workers = [atp.Worker(*worker_options(handle.job, r)) for r in range(2)]
        yield workers
        for w in workers:
            w.close()
