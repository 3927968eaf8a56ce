"""A DDP communication hook that aggregates each gradient bucket through ATP.

    state = atp.hook.AtpHookState.create(atp.AtpOptions())   # after init_process_group
    ddp.register_comm_hook(state, atp.hook.atp_allreduce_hook)

Each bucket is one Worker.push_pull, in place, with Reduction.AVERAGE (the
job's sum, divided by the world size: what DDP's default allreduce computes).
The hook returns a torch.futures.Future at once; libatp's I/O thread that
finishes the push_pull completes it (Handle.on_done), so buckets overlap with
the rest of the backward pass and no thread waits per bucket.

The process group DDP was given (gloo, say) is not used by the hook; ATP's
job comes from torch's default store (atp.rendezvous).
"""
import torch
import torch.distributed as dist

import atp._atp as core
from atp import rendezvous
from atp.stats import StepCounters


class AtpHookState:
    """The hook's Worker and options (AtpOptions), and its local cluster if
    this rank started one. close() stops both."""

    def __init__(self, worker, options, owner=None, store=None, world_size=1):
        self.worker = worker
        self._store, self._world_size = store, world_size
        self.final_stats = {}
        self.options = options
        self._owner = owner
        self.counters = StepCounters(worker.stats)

    @staticmethod
    def create(options, store=None, rank=None, world_size=None):
        if store is None:
            store = dist.distributed_c10d._get_default_store()
        rank = dist.get_rank() if rank is None else rank
        world_size = dist.get_world_size() if world_size is None else world_size
        worker_options, transport, owner = rendezvous.resolve(store, rank, world_size, options)
        try:
            worker = core.Worker(worker_options, transport)
        except BaseException:
            if owner is not None:
                owner.close()
            raise
        return AtpHookState(worker, options, owner, store, world_size)

    def _owner_job(self):
        """The local job this rank started (None if it started none)."""
        return self._owner.job if self._owner is not None else None

    def close(self):
        """Stops the Worker; the rank that started the local cluster stops it
        once every rank has closed (a store barrier). Call it on every rank."""
        self.worker.close()
        if self._store is not None and self._world_size > 1:
            rendezvous.store_barrier(self._store, "hook-close/%d" % self.options.job_id,
                                     self._world_size)
        if self._owner is not None:
            self.final_stats = self._owner.close()
            self._owner = None


def atp_allreduce_hook(state, bucket):
    """DDP comm hook: the bucket's average over the job, through ATP."""
    tensor = bucket.buffer()
    future = torch.futures.Future()
    handle = state.worker.push_pull(tensor, None, core.Reduction.AVERAGE)

    def done(error):
        if error is None:
            future.set_result(tensor)
        else:
            future.set_exception(RuntimeError("atp: bucket %d: %s" % (bucket.index(), error)))
    handle.on_done(done)
    return future
