#!/usr/bin/env python3
"""The DDP hook's overhead over a bare push_pull of the same bucket sizes.

Two Workers in this process (threads of one job) over a local switch + PS
(atp.local). Per bucket size, alternating rounds of:
  bare: Worker.push_pull(array) on both workers, then Handle.wait() (the
        thinnest path to atp::Worker::PushPull: the GIL released, no copy);
  hook: atp.hook.atp_allreduce_hook(state, bucket) on both workers with a
        GradBucket stand-in (buffer(), index()), then Future.wait(): the
        tensor-to-array view, the torch Future, Handle.on_done completing it
        from libatp's I/O thread.
Prints the median time of each and the ratio (the floor: hook <= 1.10 x bare).

  PYTHONPATH=build/python flock /work/.busy.lock python3 examples/pytorch/bench_hook.py
"""
import argparse
import statistics
import time

import numpy as np
import torch

import atp
from atp import hook, local, rendezvous


class Bucket:
    """What the hook reads of a dist.GradBucket."""

    def __init__(self, tensor):
        self._tensor = tensor

    def buffer(self):
        return self._tensor

    def index(self):
        return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="16384,65536,262144", help="bucket sizes, floats")
    p.add_argument("--rounds", type=int, default=30)
    args = p.parse_args()
    with local.local_cluster(2) as cluster:
        workers = [atp.Worker(*rendezvous.local_worker(cluster.job, r)) for r in range(2)]
        states = [hook.AtpHookState(w, atp.AtpOptions()) for w in workers]
        print("%10s %12s %12s %8s" % ("floats", "bare (ms)", "hook (ms)", "ratio"))
        for n in [int(s) for s in args.sizes.split(",")]:
            arrays = [np.random.default_rng(r).uniform(-1, 1, n).astype(np.float32)
                      for r in range(2)]
            tensors = [torch.from_numpy(a.copy()) for a in arrays]
            bare, hooked = [], []
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                handles = [w.push_pull(a) for w, a in zip(workers, arrays)]
                for h in handles:
                    h.wait(60)
                bare.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                futures = [hook.atp_allreduce_hook(s, Bucket(t)) for s, t in zip(states, tensors)]
                for f in futures:
                    f.wait()
                hooked.append(time.perf_counter() - t0)
                for a in arrays:  # keep the values bounded: sums of sums overflow
                    a /= 2
                for t in tensors:
                    t /= 2
            b, h = statistics.median(bare), statistics.median(hooked)
            print("%10d %12.3f %12.3f %8.3f" % (n, b * 1e3, h * 1e3, h / b), flush=True)
        for w in workers:
            w.close()


if __name__ == "__main__":
    main()
