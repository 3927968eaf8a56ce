"""The c10d backend "atp": a small DDP run on two processes (no comm hook)
whose ranks end with identical parameters equal (to float32 rounding of the
quantization) to a single-process full-batch reference, and clear errors for
what it does not do."""
import datetime
import os
import socket
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

try:
    from atp import _atp_torch  # noqa: F401
except ImportError as e:  # a build without libtorch-dev
    pytest.skip("atp was built without the torch backend: %s" % e, allow_module_level=True)

import atp
import atp.backend
from atp import rendezvous

WORLD = 2
STEPS = 3


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g)


def run(rank, d):
    atp.backend.register(atp.AtpOptions())
    dist.init_process_group("atp", init_method="file://" + os.path.join(d, "init"), rank=rank,
                            world_size=WORLD)
    try:
        local = make_model()
        if rank != 0:
            with torch.no_grad():  # DDP's broadcast from rank 0 must overwrite this
                for p in local.parameters():
                    p.add_(1.0)
        model = nn.parallel.DistributedDataParallel(local)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(STEPS):
            opt.zero_grad()
            x, y = batch(rank, step)
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        dist.barrier()
        torch.save([p.detach() for p in model.parameters()], os.path.join(d, "r%d.pt" % rank))

        with pytest.raises(NotImplementedError, match="atp: reduce is not supported"):
            dist.reduce(torch.ones(2), dst=0)
        gathered = [torch.zeros(2), torch.zeros(2)]
        dist.all_gather(gathered, torch.full((2,), float(rank)))
        assert [g.tolist() for g in gathered] == [[0.0, 0.0], [1.0, 1.0]]
        with pytest.raises(NotImplementedError, match="MAX"):
            dist.all_reduce(torch.ones(2), op=dist.ReduceOp.MAX)
        with pytest.raises(RuntimeError, match="float32"):
            dist.all_reduce(torch.ones(2, dtype=torch.float64))
        # gloo sums a list's tensors together (one tensor on several
        # devices); reducing each alone would differ, so it is refused.
        pair = [torch.ones(2), torch.ones(2)]
        with pytest.raises(NotImplementedError, match="list of 2 tensors"):
            dist.distributed_c10d._get_default_group().allreduce(pair)
        assert [p.tolist() for p in pair] == [[1.0, 1.0], [1.0, 1.0]]
        t = torch.full((4,), float(rank + 1))
        dist.all_reduce(t)  # still in step after the refusals
        assert torch.equal(t, torch.full((4,), 3.0))
        b = torch.full((3,), float(rank))
        dist.broadcast(b, src=1)
        assert torch.equal(b, torch.ones(3))
        assert atp.backend.counters().step()["fragments_sent"] >= 0
    finally:
        atp.backend.shutdown()


def test_ddp_over_the_atp_backend():
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(run, args=(d,), nprocs=WORLD, join=True)
        params = [torch.load(os.path.join(d, "r%d.pt" % r)) for r in range(WORLD)]
    for a, b in zip(*params):
        assert torch.equal(a, b)
    model = make_model()  # the reference: the average gradient in float32
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(STEPS):
        opt.zero_grad()
        loss = sum(nn.functional.cross_entropy(model(batch(r, step)[0]), batch(r, step)[1])
                   for r in range(WORLD)) / WORLD
        loss.backward()
        opt.step()
    for a, ref in zip(params[0], model.parameters()):
        torch.testing.assert_close(a, ref.detach(), atol=1e-6, rtol=0)


def local_clusters_here():
    """The local clusters this process started: its `python -m atp local`
    children (the supervisors; each owns an atp-switchd and an atp-ps)."""
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/stat" % pid) as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if parent == os.getpid() and argv[1:4] == [b"-m", b"atp", b"local"]:
            count += 1
    return count


def run_destroy(rank, d):
    atp.backend.register(atp.AtpOptions())
    dist.init_process_group("atp", init_method="file://" + os.path.join(d, "init"), rank=rank,
                            world_size=WORLD)
    store = dist.distributed_c10d._get_default_store()
    own = 1 if rank == 0 else 0  # rank 0 starts each group's cluster
    try:
        assert local_clusters_here() == own
        for i in range(2):
            g = dist.new_group(backend="atp")
            assert local_clusters_here() == 2 * own
            x = torch.ones(4)
            dist.all_reduce(x, group=g)
            assert x.tolist() == [2.0] * 4
            # Every rank is done with g's cluster before rank 0 stops it.
            rendezvous.store_barrier(store, "test-destroy/%d" % i, WORLD)
            dist.destroy_process_group(g)
            del g
            assert local_clusters_here() == own  # g's gone, the default group's kept
        y = torch.ones(4)
        dist.all_reduce(y)  # the default group still works
        assert y.tolist() == [2.0] * 4
        rendezvous.store_barrier(store, "test-destroy/default", WORLD)
        dist.destroy_process_group()
        assert local_clusters_here() == 0
    finally:
        # No shutdown() barrier: a rank that failed leaves at once, and
        # mp.spawn stops the other.
        if dist.is_initialized():
            dist.destroy_process_group()
        atp.backend.shutdown()


def test_destroying_a_group_stops_its_local_cluster():
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(run_destroy, args=(d,), nprocs=WORLD, join=True)


def run_subgroups(rank, d):
    # Short timeouts: a rank waiting for a job no rank publishes fails in
    # seconds instead of torch's 30 minutes.
    timeout = datetime.timedelta(seconds=20)
    atp.backend.register(atp.AtpOptions())
    dist.init_process_group("gloo", init_method="file://" + os.path.join(d, "init"), rank=rank,
                            world_size=WORLD, timeout=timeout)
    try:
        alone = dist.new_group([0], backend="atp", timeout=timeout)  # rank 1 is no member
        both = dist.new_group([0, 1], backend="atp", timeout=timeout)
        x = torch.full((10,), float(rank + 1))
        dist.all_reduce(x, group=both)
        assert x.tolist() == [3.0] * 10
        if rank == 0:
            y = torch.full((3,), 5.0)
            dist.all_reduce(y, group=alone)
            assert y.tolist() == [5.0] * 3
        rendezvous.store_barrier(dist.distributed_c10d._get_default_store(), "test-subgroups",
                                 WORLD)
    finally:
        dist.destroy_process_group()
        atp.backend.shutdown()


def test_a_group_of_some_ranks_leaves_the_next_group_in_step():
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(run_subgroups, args=(d,), nprocs=WORLD, join=True)


def free_udp_ports(n):
    """n distinct free UDP ports of 127.0.0.1: all bound at once, so the
    kernel cannot hand out one twice (another process may still take one
    after they are closed, before the test binds it)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def run_no_ps(rank, d, bind_port, gateway_port):
    # A real-cluster job whose switch and PS do not exist: nothing answers
    # at the gateway. The Worker gives up after its stall timeout (the
    # group's timeout, 2 s: the least with a 1 s retransmission ceiling).
    atp.backend.register(atp.AtpOptions(ps_addresses=["10.1.200.1"], address="10.1.0.1",
                                        udp_bind="127.0.0.1:%d" % bind_port,
                                        udp_gateway="127.0.0.1:%d" % gateway_port))
    dist.init_process_group("atp", init_method="file://" + os.path.join(d, "init"), rank=rank,
                            world_size=1, timeout=datetime.timedelta(seconds=2))
    try:
        with pytest.raises(RuntimeError, match="parameter server 10.1.200.1 unreachable"):
            dist.all_reduce(torch.ones(10))
    finally:
        dist.destroy_process_group()


def test_an_unreachable_ps_is_named_not_a_bare_timeout():
    # Work.wait() outlasts the stall timeout, so the Worker's error (naming
    # the cause) arrives before torch's "Operation timed out!".
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(run_no_ps, args=(d, *free_udp_ports(2)), nprocs=1, join=True)
