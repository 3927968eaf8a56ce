"""SkipReduce from Python: atp.SkipOptions / atp.SkipPolicy (bound from
atp/skip_reduce.h) and Worker.push_pull(..., skip=) on a real job of two
workers over a local switch + PS. Every result is compared with a reference
written here from the definition: the op's F fragments cut into N slices (the
first F mod N one longer), slices (shift + i) mod N for i < k zero, the rest
the exact sum."""
import time

import numpy as np
import pytest

import atp
from conftest import exact_sum

FRAGMENT = 62  # float32 values per ATP fragment


def expected(inputs, skip, n, average=False):
    out = exact_sum(inputs)
    fragments = -(-out.size // FRAGMENT)
    shift = 0
    if skip.mode == atp.SkipMode.RANDOM:
        shift = atp.random_shift(skip.seed, skip.iteration, skip.tensor, n)
    dropped = {(shift + i) % n for i in range(skip.reduce_scatter_steps)}
    first = 0
    for s in range(n):
        length = fragments // n + (1 if s < fragments % n else 0)
        if s in dropped:
            out[first * FRAGMENT:(first + length) * FRAGMENT] = 0
        first += length
    if average:
        divisor = n
        if skip.divisor == atp.SkipDivisor.CONTRIBUTORS:
            divisor = n - skip.reduce_scatter_steps
        out = out / np.float32(divisor)
    return out


def run(workers, inputs, skip, reduction=atp.Reduction.SUM):
    outputs = [np.full(x.size, np.nan, np.float32) for x in inputs]
    handles = [w.push_pull(x, o, reduction, skip=skip)
               for w, x, o in zip(workers, inputs, outputs)]
    for h in handles:
        h.wait(timeout=30)
    return outputs


def test_options_and_policy_are_bound():
    s = atp.SkipOptions(mode=atp.SkipMode.STATIC, reduce_scatter_steps=1)
    s.validate(2)
    with pytest.raises(ValueError, match="reduce_scatter_steps"):
        atp.SkipOptions(mode=atp.SkipMode.STATIC, reduce_scatter_steps=2).validate(2)
    p = atp.SkipPolicy(mode=atp.SkipMode.RANDOM, rate=0.5, seed=3, protected_tensors=[0],
                       warmup_iterations=1)
    p.validate()
    assert p.for_tensor(0, 5, 4).mode == atp.SkipMode.NONE      # protected
    assert p.for_tensor(1, 0, 4).mode == atp.SkipMode.NONE      # warm-up
    k = p.for_tensor(1, 5, 4)
    assert (k.mode, k.reduce_scatter_steps, k.iteration, k.tensor) == (atp.SkipMode.RANDOM, 2, 5, 1)
    assert atp.skip_steps_for_rate(0.75, 4) == 3
    assert 0 <= atp.random_shift(1, 2, 3, 8) < 8


def test_static_and_random_skipping_match_the_reference(two_workers):
    rng = np.random.default_rng(4)
    inputs = [rng.uniform(-1, 1, 1000).astype(np.float32) for _ in range(2)]
    before = two_workers[0].stats()["fragments_skipped"]
    skips = [atp.SkipOptions(mode=atp.SkipMode.STATIC, reduce_scatter_steps=1)]
    skips += [atp.SkipOptions(mode=atp.SkipMode.RANDOM, reduce_scatter_steps=1, seed=9,
                              iteration=i, tensor=2) for i in range(4)]
    for skip in skips:
        outputs = run(two_workers, inputs, skip)
        want = expected(inputs, skip, 2)
        np.testing.assert_array_equal(outputs[0], want)
        np.testing.assert_array_equal(outputs[1], want)
    # 17 fragments in two slices of 9 and 8: each op dropped one of them.
    skipped = two_workers[0].stats()["fragments_skipped"] - before
    assert 8 * len(skips) <= skipped <= 9 * len(skips)


def test_drop_reduce_averages_over_the_contributors(two_workers):
    inputs = [np.full(500, 0.5, np.float32), np.full(500, 0.25, np.float32)]
    for divisor in (atp.SkipDivisor.ALL_RANKS, atp.SkipDivisor.CONTRIBUTORS):
        skip = atp.SkipOptions(mode=atp.SkipMode.STATIC, reduce_scatter_steps=1, divisor=divisor)
        outputs = run(two_workers, inputs, skip, atp.Reduction.AVERAGE)
        np.testing.assert_array_equal(outputs[0], expected(inputs, skip, 2, average=True))
        np.testing.assert_array_equal(outputs[1], outputs[0])


def expected_contributions(inputs, skip, n):
    """The contribution variant from its definition: every fragment of slice
    s sums every worker but (s - shift + i) mod n, i < k."""
    fragments = -(-inputs[0].size // FRAGMENT)
    shift = 0
    if skip.mode == atp.SkipMode.RANDOM:
        shift = atp.random_shift(skip.seed, skip.iteration, skip.tensor, n)
    out = np.zeros(inputs[0].size, np.float32)
    first = 0
    for s in range(n):
        length = fragments // n + (1 if s < fragments % n else 0)
        left_out = {(s - shift + i) % n for i in range(skip.reduce_scatter_steps)}
        part = slice(first * FRAGMENT, (first + length) * FRAGMENT)
        out[part] = exact_sum([x[part] for r, x in enumerate(inputs) if r not in left_out])
        first += length
    return out


def test_contribution_skipping_matches_the_reference(two_workers):
    assert atp.SkipOptions().variant == atp.SkipVariant.WHOLE_FRAGMENTS
    policy = atp.SkipReduceOptions(mode="random", rate=0.5, seed=3,
                                   atp_variant="contributions").policy()
    assert policy.for_tensor(1, 2, 2).variant == atp.SkipVariant.CONTRIBUTIONS
    rng = np.random.default_rng(5)
    inputs = [rng.uniform(-1, 1, 1000).astype(np.float32) for _ in range(2)]
    before = two_workers[0].stats()["fragments_not_contributed"]
    skips = [atp.SkipOptions(mode=atp.SkipMode.STATIC, reduce_scatter_steps=1,
                             variant=atp.SkipVariant.CONTRIBUTIONS)]
    skips += [atp.SkipOptions(mode=atp.SkipMode.RANDOM, reduce_scatter_steps=1, seed=9,
                              iteration=i, tensor=2, variant=atp.SkipVariant.CONTRIBUTIONS)
              for i in range(3)]
    for skip in skips:
        outputs = run(two_workers, inputs, skip)
        want = expected_contributions(inputs, skip, 2)
        np.testing.assert_array_equal(outputs[0], want)
        np.testing.assert_array_equal(outputs[1], want)
    # 17 fragments in slices of 9 and 8: worker 0 sat out one slice per op.
    # The I/O threads publish their statistics after the handles finish, so
    # the count may lag the results: poll it until it is in (10 s at most).
    deadline = time.monotonic() + 10
    while True:
        skipped = two_workers[0].stats()["fragments_not_contributed"] - before
        if skipped >= 8 * len(skips) or time.monotonic() > deadline:
            break
        time.sleep(0.001)
    assert 8 * len(skips) <= skipped <= 9 * len(skips)
    with pytest.raises(ValueError, match=r"SkipReduceOptions\.atp_variant"):
        atp.SkipReduceOptions(mode="static", rate=0.5, atp_variant="rows").validate()


def test_bad_skip_is_refused_naming_the_field(two_workers):
    x = np.ones(100, np.float32)
    with pytest.raises(ValueError, match=r"OpOptions\.skip\.reduce_scatter_steps"):
        two_workers[0].push_pull(x, skip=atp.SkipOptions(mode=atp.SkipMode.STATIC,
                                                         reduce_scatter_steps=5))
    with pytest.raises(ValueError, match=r"OpOptions\.skip\.all_gather_steps"):
        two_workers[0].push(3, x, skip=atp.SkipOptions(mode=atp.SkipMode.STATIC,
                                                       all_gather_steps=1))
    with pytest.raises(TypeError):
        two_workers[0].push_pull(x, skip=0.5)
