"""The c10d backend "atp": dist.init_process_group("atp") after register().

    import atp.backend
    atp.backend.register(atp.AtpOptions())      # once per process, before init
    dist.init_process_group("atp")              # torchrun / env:// as usual
    model = DistributedDataParallel(model)      # no comm hook needed

The backend (C++, python/torch/process_group_atp.*) does allreduce (SUM, AVG
of float32) through ATP, broadcast through torch's store and barrier through
ATP; other collectives raise NotImplementedError naming them. Its job comes
from the store given to the creator (atp.rendezvous).

SkipReduce (AtpOptions.skip, validated with target="backend"): every
allreduce call of a group gets a number, 0, 1, 2, ... (the same collective
on every rank: ranks issue them in the same order), which is the random
shift's iteration; warmup_calls, protect_size and call_cycle with
protected_calls decide which calls skip nothing (docs/skipreduce.md, "In the
c10d backend"). group.allreduce_calls says how many a group has started.

A group in the local mode has a local cluster, started by its rank 0; it
stops when the group is destroyed (destroy_process_group, once nothing else
holds the group object) or at shutdown(). Destroy a group only after every
rank is done with it (a store barrier, as shutdown() waits for): rank 0's
collective can finish while another rank still needs the switch and the PS.
"""
import atexit
import dataclasses
import datetime
import weakref

import torch.distributed as dist

from atp import rendezvous
from atp.options import AtpOptions
from atp.stats import StepCounters

BACKEND_NAME = "atp"

_options = AtpOptions()
# The local clusters this process started, one weakref.finalize per group
# that owns one: called when the group goes (_close_with_group), by
# shutdown() and at exit, whichever comes first (a finalizer runs once).
_cluster_finalizers = []


def _close_owned():
    while _cluster_finalizers:
        _cluster_finalizers.pop()()


def _close_with_group(pg, owner):
    """Stops `owner` (this rank's local cluster of group `pg`) when `pg` is
    destroyed. Torch 1.13 tells a plugin backend nothing when its group is
    destroyed: destroy_process_group() only drops torch's references to the
    group object. So the cluster goes when the Python object is collected
    (a user's variable or a DDP model keep it alive), without touching other
    groups' clusters. C++ code that still holds the group then has a Worker
    whose switch and PS are gone (its operations fail on their stall
    timeout); and close() stops processes, up to about 10 s, on whichever
    thread drops the last reference (a garbage collection pass included)."""
    _cluster_finalizers[:] = [f for f in _cluster_finalizers if f.alive]
    _cluster_finalizers.append(weakref.finalize(pg, owner.close))


def _create(store, rank, world_size, timeout):
    from atp import _atp_torch  # torch's extension: only when the backend is used
    options = _options
    if isinstance(timeout, datetime.timedelta):
        options = dataclasses.replace(options, timeout_s=timeout.total_seconds())
    timeout_s = options.timeout_s
    skip = options.skip
    policy = skip.policy(target="backend")
    worker_options, transport, owner = rendezvous.resolve(
        store, rank, world_size, options,
        rendezvous.group_generation(store, options.job_id, world_size))
    try:
        pg = _atp_torch.ProcessGroupATP(store, rank, world_size, worker_options, transport,
                                        timeout_s, skip_policy=policy,
                                        protect_size=int(skip.protect_size),
                                        call_cycle=int(skip.call_cycle),
                                        protected_calls=[int(c) for c in skip.protected_calls])
    except BaseException:
        if owner is not None:  # no group will own it
            owner.close()
        raise
    if owner is not None:
        _close_with_group(pg, owner)
    return pg


def register(options=None):
    """Registers "atp" with torch.distributed (idempotent) and sets the
    options every later init_process_group("atp") (or new_group(backend=
    "atp")) uses. Bad SkipReduce options raise ValueError naming
    AtpOptions.skip.<field> here, before any group exists."""
    global _options
    if options is not None:
        options.skip.validate("AtpOptions.skip", target="backend")
        _options = options
    if not hasattr(dist.Backend, BACKEND_NAME.upper()):
        dist.Backend.register_backend(BACKEND_NAME, _create)
        atexit.register(_close_owned)


def counters(group=None):
    """StepCounters over the backend's Worker (default group if None)."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return StepCounters(pg.worker_stats)


def shutdown():
    """Call on every rank: waits for all ranks (a store barrier), destroys the
    process groups, then stops the local clusters this rank started (if any;
    also those of groups still referenced elsewhere)."""
    if dist.is_initialized():
        if dist.get_world_size() > 1:
            rendezvous.store_barrier(dist.distributed_c10d._get_default_store(),
                                     "backend-shutdown/%d" % _options.job_id,
                                     dist.get_world_size())
        dist.destroy_process_group()
    _close_owned()
