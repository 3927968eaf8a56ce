"""How a rank finds its job: torch's store and AtpOptions -> the Worker's
options and transport.

Three sources, in this order:
  1. $ATP_LOCAL_JOB (set by `python -m atp local -- COMMAND`);
  2. the local mode (AtpOptions.is_local()): rank 0 starts atp.local's
     cluster and publishes the job in the store under
     "atp/job/<job_id>/<generation>"; the other ranks read it there
     (store.get blocks until it is set);
  3. a real cluster: AtpOptions.ps_addresses, address, udp_bind, udp_gateway
     (or the ATP_* environment, AtpOptions.from_env).
Rank and world size always come from torch.
"""
import json
import os

import atp._atp as core
from atp import local
from atp.options import AtpOptions

STORE_KEY = "atp/job/%d/%s"

# Per job id: how many hook states this process has created (next_generation).
_generations = {}


def next_generation(job_id):
    """The number of this rank's next hook state of job `job_id`, from 0.
    Every rank of the default group creates its hook states in the same
    order, so the n-th of each rank is the same generation: its keys in the
    store are its own, never a stopped earlier cluster's (a store keeps its
    keys). Not for process groups: a new_group() has only some ranks as
    members, and only they would count it (group_generation)."""
    generation = _generations.get(job_id, 0)
    _generations[job_id] = generation + 1
    return generation


def group_generation(store, job_id, world_size):
    """The generation of a process group's Worker of job `job_id`, the same
    on every member: `store` is the one torch 1.13 hands the backend's
    creator, prefixed by the group's name (a counter every rank advances,
    members or not), so only this group's members count here, once each.
    Torch restarts its names when the default group is destroyed; a group
    created again under the same name, on a store that kept its keys, is
    the next generation. Members reach it only after every member counted
    the one before (init_process_group and new_group end with a store
    barrier), so the n-th world_size counts are generation n. The counter
    and the generation name the group's size: a name torch reuses for a
    group of another size (after the default group was destroyed) counts
    apart, and never reads a job another size published."""
    n = (store.add("atp/job/%d/members/%d" % (job_id, world_size), 1) - 1) // world_size
    return "%d-of-%d" % (n, world_size)


def _job_from_store(store, rank, world_size, options, generation):
    key = STORE_KEY % (options.job_id, generation)
    if rank == 0:
        owner = local.OwnedLocalCluster(world_size, options.job_id, options.io_threads)
        store.set(key, json.dumps(owner.job))
        return owner.job, owner
    return json.loads(store.get(key)), None


def resolve(store, rank, world_size, options, generation=0):
    """Returns (WorkerOptions, TransportOptions, owner); owner, if not None,
    is the local cluster this rank started (atp.local.OwnedLocalCluster:
    close() it when done). generation: next_generation(options.job_id) (a
    hook state) or group_generation(...) (a process group), in the local
    mode the store key's."""
    owner = None
    if os.environ.get("ATP_LOCAL_JOB"):
        job = json.loads(os.environ["ATP_LOCAL_JOB"])
    elif options.is_local():
        job, owner = _job_from_store(store, rank, world_size, options, generation)
    else:
        job = None
    if job is not None:
        if job["world_size"] != world_size:
            raise ValueError("the local job has %d workers, torch's world has %d"
                             % (job["world_size"], world_size))
        w, t = local_worker(job, rank, options)
        return w, t, owner
    for field in ("address", "udp_bind"):
        if not getattr(options, field):
            raise ValueError("AtpOptions.%s: needed on a real cluster (or set ATP_%s)"
                             % (field, field.upper()))
    w, t = _worker(options.job_id, options.racks or [world_size], options.io_threads,
                   options.ps_addresses, options.address, options.udp_bind,
                   options.udp_gateway, rank, world_size, options, _OPTION_FIELDS)
    return w, t, owner


# Where _worker's addresses came from, for its error messages: AtpOptions'
# fields, or a local job's (the dict atp.local publishes).
_OPTION_FIELDS = {"ps": "AtpOptions.ps_addresses", "address": "AtpOptions.address",
                  "bind": "AtpOptions.udp_bind", "gateway": "AtpOptions.udp_gateway"}


def _local_job_fields(rank):
    me = "local job.workers[%d]" % rank
    return {"ps": "local job.ps", "address": me + ".address", "bind": me + ".udp_bind",
            "gateway": me + ".udp_gateway"}


def local_worker(job, rank, options=None):
    """(WorkerOptions, TransportOptions) of rank `rank` of a local job (the
    dict atp.local publishes), with the timing and polling of `options`
    (AtpOptions; None: the defaults)."""
    options = options or AtpOptions()
    me = job["workers"][rank]
    return _worker(job["job_id"], [job["world_size"]], job["io_threads"], job["ps"],
                   me["address"], me["udp_bind"], me["udp_gateway"], rank,
                   job["world_size"], options, _local_job_fields(rank))


def _renamed(error, paths):
    """`error` (a ValueError from atp._atp, whose message starts with the
    field path it was raised for) with that path replaced by the one the
    value came from: paths maps the binding's path to ours, e.g.
    {"TransportOptions.kernel_udp.bind": "AtpOptions.udp_bind"}."""
    message = str(error)
    for theirs, ours in paths.items():
        if message.startswith(theirs) and message[len(theirs):len(theirs) + 1] in (":", "[", "."):
            return ValueError(ours + message[len(theirs):])
    return error


def _worker(job_id, racks, io_threads, ps, address, bind, gateway, rank, world_size, options,
            fields):
    if sum(racks) != world_size:
        raise ValueError("AtpOptions.racks: %s has %d workers, torch's world has %d"
                         % (racks, sum(racks), world_size))
    if not isinstance(job_id, int) or isinstance(job_id, bool) or not 1 <= job_id <= 255:
        raise ValueError("AtpOptions.job_id: %r is not an integer in 1..255" % (job_id,))
    w = core.WorkerOptions()
    w.job.job_id = job_id
    w.job.layout = core.RackLayout(racks)
    w.job.io_threads = io_threads
    w.job.scale = options.scale
    w.job.retransmission_floor = options.rto_floor_s
    w.job.initial_retransmission_timeout = max(0.02, options.rto_floor_s)
    # A floor above the default ceiling (1 s) raises the ceiling with it.
    w.job.max_retransmission_timeout = max(w.job.max_retransmission_timeout,
                                           w.job.initial_retransmission_timeout)
    # A rank may reach a collective as late as the caller's timeout allows
    # (a checkpoint, an evaluation): the others wait that long, not the
    # Worker's default 10 s, before failing.
    w.job.stall_timeout = options.timeout_s
    w.rack, w.worker_in_rack = _place(racks, rank)
    servers = []
    for i, a in enumerate(ps):
        try:
            servers.append(core.DeviceAddress(a))
        except ValueError as e:
            raise _renamed(e, {"DeviceAddress.ipv4": "%s[%d]" % (fields["ps"], i)}) from None
    w.parameter_servers = servers
    w.polling.spin_iterations = options.spin_iterations
    w.polling.yield_iterations = options.yield_iterations
    try:
        w.validate()
    except ValueError as e:
        raise _renamed(e, {"WorkerOptions.parameter_servers": fields["ps"]}) from None
    try:
        t = core.TransportOptions.kernel_udp(address=address, bind=bind, queues=io_threads,
                                             gateway=gateway, whole_frame=bool(gateway),
                                             base_port=w.job.base_port)
    except ValueError as e:
        raise _renamed(e, {"TransportOptions.kernel_udp." + name: fields[name]
                           for name in ("address", "bind", "gateway")}) from None
    return w, t


def _place(racks, rank):
    for r, n in enumerate(racks):
        if rank < n:
            return r, rank
        rank -= n
    raise ValueError("rank beyond the layout")


def store_barrier(store, name, world_size):
    """Every rank arrives before any leaves (through the store, not ATP): the
    owner of a local cluster stops it only after every rank is done with it."""
    key = "atp/barrier/" + name
    if store.add(key, 1) == world_size:
        store.set(key + "/all", "1")
    store.wait([key + "/all"])
