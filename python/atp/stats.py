"""Per-step ATP counters: how much aggregation happened where.

From a worker's counters (atp.Worker.stats() or the backend's worker_stats()):
a fragment's parameter packet comes back either from the switch's aggregate
or, when the switch had no free aggregator (a collision, the packet then
carries a new index) or a value overflowed int32 (resent as float32 and summed
at the PS), from the parameter server.
"""

FRAGMENT_FLOATS = 62  # floats per ATP fragment (ATP-SPEC)


class StepCounters:
    """Deltas of a worker's counters between two snapshots."""

    KEYS = ("fragments_sent", "parameter_packets", "collisions", "overflow_requests",
            "float_results", "retransmissions", "timeouts")

    def __init__(self, stats_fn):
        self._stats_fn = stats_fn
        self._last = self._snapshot()

    def _snapshot(self):
        s = self._stats_fn()
        return {k: int(s.get(k, 0)) for k in self.KEYS}

    def step(self):
        """The counters since the previous call, with derived fields."""
        now = self._snapshot()
        d = {k: now[k] - self._last[k] for k in self.KEYS}
        self._last = now
        # Results, not requests: overflow_requests counts a repeated request
        # for one fragment again, and can exceed the fragments sent. A result
        # that both collided and overflowed (rare) counts in both terms, so
        # the sum is bounded by the results themselves.
        at_ps = min(d["parameter_packets"], d["collisions"] + d["float_results"])
        d["aggregated_at_ps"] = at_ps
        d["aggregated_in_switch"] = d["parameter_packets"] - at_ps
        d["overflow_fraction"] = (d["float_results"] / d["parameter_packets"]
                                  if d["parameter_packets"] else 0.0)
        return d
