"""SkipReduce for DDP buckets: each bucket's SkipOptions, per DDP iteration.

    schedule = SkipSchedule(atp.options.SkipReduceOptions(mode="selective", rate=0.5,
                            protected_params=["0.weight"]), world_size, model.named_parameters())
    skip = schedule.for_bucket(bucket)      # in a comm hook: an atp.SkipOptions

The plan itself is libatp's (atp::SkipPolicy::ForTensor, through atp._atp):
tensor = the DDP bucket's index, iteration = the DDP iteration (counted
here: it advances after the bucket whose is_last() is true), so every rank
computes the same skipped slices without talking, and Python agrees with
the C++ ring and ATP's PushPull on every shift. A bucket holding a parameter
named in protected_params, or of at most protect_size elements, is
protected (mode NONE), whatever its index:
DDP rebuilds its buckets after the first iteration, so names are matched
against each bucket's parameters on every call rather than cached.
"""
import atp._atp as core
from atp.options import SkipReduceOptions


def _strip_ddp_prefix(name):
    return name[len("module."):] if name.startswith("module.") else name


class SkipSchedule:
    """The SkipOptions of every bucket collective of a DDP run (one per
    process, used from the hook's calling thread)."""

    def __init__(self, options: SkipReduceOptions, world_size: int, named_parameters=None,
                 field: str = "SkipReduceOptions"):
        options.validate(field)
        self.options = options
        self.world_size = int(world_size)
        self.policy = options.policy()
        self.iteration = 0
        # Totals over the run (elements of gradient): what was skipped.
        self.elements = 0
        self.skipped_elements = 0.0
        self._protected_ptrs = set()
        if options.protected_params:
            if named_parameters is None:
                raise ValueError("%s.protected_params: needs the model's named_parameters "
                                 "(pass model= to the hook state)" % field)
            by_name = {_strip_ddp_prefix(n): p for n, p in named_parameters}
            for name in options.protected_params:
                p = by_name.get(_strip_ddp_prefix(name))
                if p is None:
                    raise ValueError("%s.protected_params: %r is not a parameter of the model "
                                     "(it has: %s)" % (field, name, ", ".join(sorted(by_name))))
                self._protected_ptrs.add(p.data_ptr())

    def protects(self, bucket) -> bool:
        """Whether `bucket` (a torch GradBucket) is protected, by index, by
        size or by a parameter it holds."""
        if bucket.index() in self.options.protected_buckets:
            return True
        if bucket.buffer().numel() <= self.options.protect_size:
            return True
        return any(p.data_ptr() in self._protected_ptrs for p in bucket.parameters())

    def for_bucket(self, bucket):
        """The atp.SkipOptions of `bucket` in the current iteration; advances
        the iteration after the iteration's last bucket."""
        index, iteration = bucket.index(), self.iteration
        if self.protects(bucket):
            skip = core.SkipOptions()
            skip.iteration, skip.tensor = iteration, index
        else:
            skip = self.policy.for_tensor(index, iteration, self.world_size)
        numel = bucket.buffer().numel()
        self.elements += numel
        self.skipped_elements += numel * skip.reduce_scatter_steps / max(1, self.world_size)
        if bucket.is_last():
            self.iteration += 1
        return skip

    def skipped_fraction(self) -> float:
        """The fraction of gradient contributions skipped so far (k/N per
        bucket, weighted by the bucket's size)."""
        return self.skipped_elements / self.elements if self.elements else 0.0
