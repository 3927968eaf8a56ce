"""atp.stats.StepCounters: per-step deltas and the fields derived from them."""

from atp.stats import StepCounters


class FakeWorker:
    """A worker's stats() dict whose counters the test sets."""

    def __init__(self):
        self.counters = {k: 0 for k in StepCounters.KEYS}

    def stats(self):
        return dict(self.counters)


def test_deltas_between_steps():
    w = FakeWorker()
    c = StepCounters(w.stats)
    w.counters.update(fragments_sent=10, parameter_packets=10, collisions=2)
    first = c.step()
    assert first["fragments_sent"] == 10
    assert first["aggregated_at_ps"] == 2
    assert first["aggregated_in_switch"] == 8
    w.counters.update(fragments_sent=15, parameter_packets=15)
    second = c.step()
    assert second["fragments_sent"] == 5
    assert second["collisions"] == 0
    assert second["aggregated_in_switch"] == 5


def test_repeated_overflow_requests_do_not_inflate_the_float_path():
    # Every fragment overflowed and its PS asked twice: requests exceed the
    # fragments, results do not.
    w = FakeWorker()
    c = StepCounters(w.stats)
    w.counters.update(fragments_sent=10, parameter_packets=10, overflow_requests=20,
                      float_results=10, retransmissions=20)
    d = c.step()
    assert d["overflow_fraction"] == 1.0
    assert d["aggregated_at_ps"] == 10
    assert d["aggregated_in_switch"] == 0


def test_a_result_both_collided_and_overflowed_is_not_counted_beyond_the_results():
    w = FakeWorker()
    c = StepCounters(w.stats)
    w.counters.update(fragments_sent=4, parameter_packets=4, collisions=4, float_results=4)
    d = c.step()
    assert d["aggregated_at_ps"] == 4
    assert d["aggregated_in_switch"] == 0


def test_an_idle_step_divides_by_nothing():
    d = StepCounters(FakeWorker().stats).step()
    assert d["overflow_fraction"] == 0.0
    assert d["aggregated_at_ps"] == 0
