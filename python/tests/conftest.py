"""Shared fixtures: a local job (atp-switchd + atp-ps) and its workers."""
import numpy as np
import pytest

import atp
from atp import local, rendezvous


def exact_sum(inputs, scale=1e8):
    """ATP's aggregate, computed independently: the exact sum of
    round_half_even(double(x) * scale) as integers, divided by scale in
    double, rounded to float32."""
    q = sum(np.rint(x.astype(np.float64) * scale).astype(np.int64) for x in inputs)
    return (q.astype(np.float64) / scale).astype(np.float32)


def worker_options(job, rank, rto_floor_s=0.05):
    return rendezvous.local_worker(job, rank, atp.AtpOptions(rto_floor_s=rto_floor_s))


@pytest.fixture(scope="module")
def two_workers():
    with local.local_cluster(2) as handle:
        workers = [atp.Worker(*worker_options(handle.job, r)) for r in range(2)]
        yield workers
        for w in workers:
            w.close()
