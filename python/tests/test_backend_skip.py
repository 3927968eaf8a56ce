"""SkipReduce in the c10d backend (docs/skipreduce.md, "In the c10d
backend"; issue 11 part 4).

The backend numbers its allreduce calls per process group and uses the
number as the random shift's iteration; warmup_calls, protect_size and
call_cycle with protected_calls decide which calls skip nothing. Here 2 and
4 ranks as processes, one "atp" group per case (each over its own local
switch and PS), twelve allreduce calls of four sizes each: rank r's input
is pattern x 2^r (small integers), every result of every call equals, on
every rank, a reference built from atp.SkipPlan (the dropped slices of
fragments zero, the rest the exact quantized sum or average), all ranks
hold the same bytes, static's shift is 0 on every call, random's moves with
the call number, protected and warm-up calls skip nothing. Bad options are
refused naming the field.
"""
import os
import pickle
import tempfile

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

try:
    from atp import _atp_torch  # noqa: F401
except ImportError as e:  # a build without libtorch-dev
    pytest.skip("atp was built without the torch backend: %s" % e, allow_module_level=True)

import atp
import atp._atp as core
import atp.backend
from atp.options import SkipReduceOptions
from atp.skip import SkipSchedule
from conftest import exact_sum

# --- options -----------------------------------------------------------------


@pytest.mark.parametrize("changes, field", [
    (dict(mode="random", rate=0.5, protected_params=["0.weight"]), "protected_params"),
    (dict(mode="random", rate=0.5, protected_buckets=[0]), "protected_buckets"),
    (dict(mode="random", rate=0.5, warmup_steps=2), "warmup_steps"),
    (dict(mode="selective", rate=0.5), "protected_calls"),
    (dict(mode="random", rate=0.5, protected_calls=[1]), "protected_calls"),
    (dict(mode="random", rate=0.5, call_cycle=4, protected_calls=[4]), "protected_calls"),
    (dict(mode="random", rate=0.5, call_cycle=4, protected_calls=[-1]), "protected_calls"),
    (dict(mode="random", rate=0.5, call_cycle=4), "call_cycle"),
    (dict(mode="random", rate=0.5, call_cycle=-4, protected_calls=[0]), "call_cycle"),
    (dict(mode="random", rate=0.5, protect_size=-1), "protect_size"),
    (dict(mode="random", rate=0.5, protect_size=1.5), "protect_size"),
    (dict(mode="random", rate=0.5, warmup_calls=-1), "warmup_calls"),
    (dict(mode="none", protect_size=10), "protect_size"),
    (dict(mode="random", rate=2.0), "rate"),
])
def test_the_backend_refuses_bad_options_naming_the_field(changes, field):
    with pytest.raises(ValueError, match=r"^AtpOptions\.skip\.%s: " % field):
        atp.backend.register(atp.AtpOptions(skip=SkipReduceOptions(**changes)))


@pytest.mark.parametrize("changes, field", [
    (dict(mode="random", rate=0.5, warmup_calls=2), "warmup_calls"),
    (dict(mode="random", rate=0.5, call_cycle=2, protected_calls=[0]), "call_cycle"),
])
def test_the_hooks_refuse_the_backends_fields(changes, field):
    with pytest.raises(ValueError, match=r"^AtpOptions\.skip\.%s: the DDP hooks" % field):
        SkipSchedule(SkipReduceOptions(**changes), 4, field="AtpOptions.skip")


def test_the_group_refuses_bad_options_before_starting_a_worker():
    """The C++ side checks again (a caller that skips register())."""
    policy = core.SkipPolicy()
    policy.mode, policy.rate = core.SkipMode.RANDOM, 0.5
    with pytest.raises(ValueError, match=r"^AtpOptions\.skip\.protected_calls: 3 is not below"):
        _atp_torch.ProcessGroupATP(dist.HashStore(), 0, 2, core.WorkerOptions(),
                                   core.TransportOptions.loopback(core.LoopbackWire(), "10.0.0.1"),
                                   1.0, skip_policy=policy, call_cycle=2, protected_calls=[3])


# --- the backend's allreduce calls ---------------------------------------------

FRAGMENT_FLOATS = 62  # floats per ATP fragment (ATP-SPEC)
CALL_SIZES = (1001, 66, 517, 3) * 3  # uneven fragment slices; tensors with fewer fragments than ranks
PATTERN_PERIOD = 7
CASES = {  # name: (options, reduce op)
    "static": (SkipReduceOptions(mode="static", rate=0.5), "sum"),
    "random": (SkipReduceOptions(mode="random", rate=0.25, seed=11), "sum"),
    "size": (SkipReduceOptions(mode="random", rate=0.5, seed=3, protect_size=100), "sum"),
    "cycle": (SkipReduceOptions(mode="selective", rate=0.5, seed=5, warmup_calls=3, call_cycle=4,
                                protected_calls=[2], divisor="drop"), "avg"),
}


def pattern(n):
    return (np.arange(n) % PATTERN_PERIOD + 1).astype(np.float32)


def run(rank, world, init_file, out_dir):
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
    records = {}
    try:
        for case, (skip, op) in CASES.items():
            atp.backend.register(atp.AtpOptions(skip=skip))
            group = dist.new_group(backend="atp")  # a new group: calls counted from 0
            calls = []
            for n in CALL_SIZES:
                x = pattern(n) * np.float32(2 ** rank)
                t = torch.from_numpy(x.copy())
                dist.all_reduce(t, op=dist.ReduceOp.AVG if op == "avg" else dist.ReduceOp.SUM,
                                group=group)
                calls.append((x, t.numpy().copy()))
            records[case] = {"calls": calls, "counted": group.allreduce_calls}
    finally:
        atp.backend.shutdown()
    with open(os.path.join(out_dir, "rank%d.pkl" % rank), "wb") as f:
        pickle.dump(records, f)


def planned_skip(options, call, n, world):
    """The SkipOptions of call `call` (n floats), from the definition:
    protected by size or by its place in the cycle, else libatp's policy
    with iteration = the call's number (warm-up included)."""
    small = n <= options.protect_size
    in_cycle = options.call_cycle and call % options.call_cycle in options.protected_calls
    if small or in_cycle:
        return core.SkipOptions()
    return options.policy(target="backend").for_tensor(0, call, world)


@pytest.mark.parametrize("world", [2, 4])
def test_backend_results_follow_the_skip_plan_per_call(world):
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(run, args=(world, os.path.join(d, "init"), d), nprocs=world, join=True)
        ranks = []
        for r in range(world):
            with open(os.path.join(d, "rank%d.pkl" % r), "rb") as f:
                ranks.append(pickle.load(f))
    for case, (options, op) in CASES.items():
        shifts, steps = set(), []
        dropped_any = False
        for r in range(world):
            assert ranks[r][case]["counted"] == len(CALL_SIZES)
        for call, n in enumerate(CALL_SIZES):
            inputs = [ranks[r][case]["calls"][call][0] for r in range(world)]
            result = ranks[0][case]["calls"][call][1]
            for r in range(1, world):  # identical bytes on every rank
                np.testing.assert_array_equal(ranks[r][case]["calls"][call][1], result)
            plan = core.SkipPlan.create(planned_skip(options, call, n, world), world)
            expected = exact_sum(inputs)
            if op == "avg":
                expected = expected / np.float32(plan.average_divisor())
            fragments = -(-n // FRAGMENT_FLOATS)
            for j in range(world):
                if plan.slice_dropped(j):
                    begin, size = core.slice_range(fragments, world, j)
                    expected[begin * FRAGMENT_FLOATS:(begin + size) * FRAGMENT_FLOATS] = 0
                    dropped_any = dropped_any or size > 0
            np.testing.assert_array_equal(result, expected,
                                          err_msg="%s, %d ranks, call %d" % (case, world, call))
            shifts.add(plan.shift)
            steps.append(plan.skipped_reduce_scatter_steps)
        assert dropped_any, case
        k = core.skip_steps_for_rate(options.rate, world)
        if case == "static":
            assert shifts == {0} and steps == [k] * len(CALL_SIZES)
        elif case == "random":  # the shift moves with the call number
            assert len(shifts) > 1 and steps == [k] * len(CALL_SIZES)
        elif case == "size":  # 66 and 3 floats are protected, the others skip
            assert steps == [0 if n <= 100 else k for n in CALL_SIZES]
        else:  # warm-up: calls 0..2; call_cycle 4, place 2 (the 517-float calls)
            assert steps == [0 if c < 3 or c % 4 == 2 else k for c in range(len(CALL_SIZES))]
