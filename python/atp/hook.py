"""DDP communication hooks: each gradient bucket through ATP, or through
libatp's ring allreduce over gloo's TCP transport, either with SkipReduce.

    state = atp.hook.AtpHookState.create(atp.AtpOptions())   # after init_process_group
    ddp.register_comm_hook(state, atp.hook.atp_allreduce_hook)

    options = atp.AtpOptions(skip=atp.options.SkipReduceOptions(mode="random", rate=0.25))
    state = atp.hook.RingHookState.create(options, model=ddp)
    ddp.register_comm_hook(state, atp.hook.ring_allreduce_hook)

Each bucket is one Worker.push_pull, in place, with Reduction.AVERAGE (the
job's sum, divided by the world size: what DDP's default allreduce computes).
The hook returns a torch.futures.Future at once; libatp's I/O thread that
finishes the push_pull completes it (Handle.on_done), so buckets overlap with
the rest of the backward pass and no thread waits per bucket.

The process group DDP was given (gloo, say) is not used by the hook; ATP's
job comes from torch's default store (atp.rendezvous).
"""
import concurrent.futures

import torch
import torch.distributed as dist

import atp._atp as core
from atp import rendezvous
from atp.options import AtpOptions
from atp.skip import SkipSchedule
from atp.stats import StepCounters


def atp_push_pull_skips():
    """Whether this build's Worker.push_pull takes skip= (SkipReduce on ATP)."""
    return "skip" in (core.Worker.push_pull.__doc__ or "")


class AtpHookState:
    """The hook's Worker and options (AtpOptions), and its local cluster if
    this rank started one. close() stops both."""

    def __init__(self, worker, options, owner=None, store=None, world_size=1, schedule=None,
                 generation=0):
        self.worker = worker
        self._generation = generation
        self._store, self._world_size = store, world_size
        self.final_stats = {}
        self.options = options
        self._owner = owner
        self.counters = StepCounters(worker.stats)
        # schedule: SkipReduce's plan per bucket (atp.skip), None when
        # options.skip.mode is "none".
        self.schedule = schedule

    @staticmethod
    def create(options, store=None, rank=None, world_size=None, model=None):
        """model: the DDP model (or its module), needed when options.skip
        names protected_params."""
        if store is None:
            store = dist.distributed_c10d._get_default_store()
        rank = dist.get_rank() if rank is None else rank
        world_size = dist.get_world_size() if world_size is None else world_size
        schedule = None
        if options.skip.enabled():
            named = model.named_parameters() if model is not None else None
            schedule = SkipSchedule(options.skip, world_size, named, field="AtpOptions.skip")
            if not atp_push_pull_skips():
                raise ValueError("AtpOptions.skip: this build's Worker.push_pull has no skip= "
                                 "(SkipReduce on ATP, issue 11 part 3); use "
                                 "atp.hook.RingHookState for the ring path")
        generation = rendezvous.next_generation(options.job_id)
        worker_options, transport, owner = rendezvous.resolve(store, rank, world_size, options,
                                                              generation)
        try:
            worker = core.Worker(worker_options, transport)
        except BaseException:
            if owner is not None:
                owner.close()
            raise
        return AtpHookState(worker, options, owner, store, world_size, schedule, generation)

    def _owner_job(self):
        """The local job this rank started (None if it started none)."""
        return self._owner.job if self._owner is not None else None

    def close(self):
        """Stops the Worker; the rank that started the local cluster stops it
        once every rank has closed (a store barrier). Call it on every rank."""
        self.worker.close()
        if self._store is not None and self._world_size > 1:
            rendezvous.store_barrier(self._store, "hook-close/%d/%d" % (self.options.job_id,
                                                                       self._generation),
                                     self._world_size)
        if self._owner is not None:
            self.final_stats = self._owner.close()
            self._owner = None


def atp_allreduce_hook(state, bucket):
    """DDP comm hook: the bucket's average over the job, through ATP. With
    SkipReduce (state.schedule), Worker.push_pull(skip=) leaves out whole
    slices of the bucket's fragments on every worker (their result is zero;
    docs/skipreduce.md)."""
    tensor = bucket.buffer()
    future = torch.futures.Future()
    if state.schedule is not None:
        skip = state.schedule.for_bucket(bucket)
        handle = state.worker.push_pull(tensor, None, core.Reduction.AVERAGE, skip=skip)
    else:
        handle = state.worker.push_pull(tensor, None, core.Reduction.AVERAGE)

    def done(error):
        if error is None:
            future.set_result(tensor)
        else:
            future.set_exception(RuntimeError("atp: bucket %d: %s" % (bucket.index(), error)))
    handle.on_done(done)
    return future


class RingHookState:
    """The ring hook's gloo context (atp.RingContext, libatp's ring allreduce
    over TCP), its SkipReduce schedule (atp.skip.SkipSchedule over
    AtpOptions.skip) and the one thread that runs its collectives in bucket
    order (the hook itself returns at once, so buckets overlap with the
    backward pass). close() on every rank when done."""

    def __init__(self, ring, schedule, options):
        self.ring = ring
        self.schedule = schedule
        self.options = options
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="atp-ring")

    @staticmethod
    def create(options=None, model=None, store=None, rank=None, world_size=None):
        """Connects this rank's ring through torch's store (default: the
        default group's), under "atp/ring/<job_id>/<generation>/" so that
        several states in one job do not meet each other's keys. model: the
        DDP model (or its module), needed when options.skip names
        protected_params."""
        options = options if options is not None else AtpOptions()
        named = model.named_parameters() if model is not None else None
        world_size = dist.get_world_size() if world_size is None else world_size
        schedule = SkipSchedule(options.skip, world_size, named, field="AtpOptions.skip")
        if not core.collectives_available():
            raise RuntimeError("atp: this build has no ring allreduce (gloo was not found at "
                               "configure time: LIBATP_WITH_GLOO)")
        if store is None:
            store = dist.distributed_c10d._get_default_store()
        rank = dist.get_rank() if rank is None else rank
        # Every rank adds 1 per state it creates: states are created in the
        # same order on all ranks, so (count - 1) // world_size agrees.
        generation = (store.add("atp/ring/%d/states" % options.job_id, 1) - 1) // world_size
        ring = core.RingContext.connect(store, rank, world_size, hostname=options.ring_hostname,
                                        timeout=options.timeout_s,
                                        prefix="atp/ring/%d/%d/" % (options.job_id, generation))
        return RingHookState(ring, schedule, options)

    def close(self):
        """Waits for the collectives in flight and stops the thread."""
        self._executor.shutdown(wait=True)


def ring_allreduce_hook(state, bucket):
    """DDP comm hook: the bucket's average through libatp's ring allreduce,
    skipping what state.schedule says for this bucket and iteration."""
    tensor = bucket.buffer()
    index = bucket.index()
    skip = state.schedule.for_bucket(bucket)
    future = torch.futures.Future()

    def run():
        try:
            state.ring.allreduce(tensor, average=True, skip=skip, timeout=state.options.timeout_s)
        except Exception as error:  # the future carries it to DDP's wait
            future.set_exception(RuntimeError("atp ring: bucket %d: %s" % (index, error)))
            return
        future.set_result(tensor)
    state._executor.submit(run)
    return future
