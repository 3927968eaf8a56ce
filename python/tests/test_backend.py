"""The c10d backend "atp": a small DDP run on two processes (no comm hook)
whose ranks end with identical parameters equal (to float32 rounding of the
quantization) to a single-process full-batch reference, and clear errors for
what it does not do."""
import os
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
