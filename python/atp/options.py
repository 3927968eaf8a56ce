"""AtpOptions: the settings of the DDP hook and the c10d backend, in one object.

Every field has a default that works in the local mode; on a real cluster the
job's PS address and each host's transport come from here or from the
environment (ATP_* variables, read by from_env). Add new settings here (and,
for the backend, to ProcessGroupAtpOptions in python/torch/process_group_atp.h).

SkipReduceOptions (AtpOptions.skip) are SkipReduce's settings for the hooks
and the c10d backend (docs/skipreduce.md); atp.skip turns them into each
bucket's plan, the backend into each allreduce call's.
"""
import dataclasses
import math
import numbers
import os
from typing import List, Optional

SKIP_MODES = ("none", "static", "random", "selective")
SKIP_DIVISORS = ("skip", "drop")
SKIP_TARGETS = ("hook", "backend")
# Fields only one target understands: the hooks count DDP iterations and see
# buckets and parameters; the c10d backend counts allreduce calls.
_HOOK_ONLY = ("protected_params", "protected_buckets", "warmup_steps")
_BACKEND_ONLY = ("call_cycle", "protected_calls", "warmup_calls")
SKIP_ATP_VARIANTS = ("fragments", "contributions")


@dataclasses.dataclass
class SkipReduceOptions:
    """SkipReduce for the DDP hooks and the c10d backend: which buckets
    (or allreduce calls) skip what, and when.

    mode: "none" (a plain allreduce); "static" (the same slices every
    iteration); "random" (slice indices shifted by a hash of (seed, DDP
    iteration, bucket index): the same on every rank, new every iteration);
    "selective" (random, and the buckets in protected_params /
    protected_buckets are never skipped: the seed's section 4.4).
    rate: the fraction of the ranks' contributions left out of an unprotected
    bucket, 0..1: k = round(rate x world size) reduce-scatter steps of the
    ring are skipped (at most world size - 1), so the rate a run gets is k/N.
    protected_params: parameter names (as model.named_parameters() gives
    them, with or without DDP's "module." prefix); every bucket holding one
    is never skipped. protected_buckets: DDP bucket indices never skipped.
    Both work with static and random too.
    warmup_steps: DDP iterations 0..warmup_steps-1 skip nothing.
    divisor: "skip" (SkipReduce: a skipped contribution counts as zero, the
    average divides by N) or "drop" (DropReduce: divide by N - k).
    seed: random mode's seed (every rank must pass the same).
    protect_size: tensors (buckets, or the backend's allreduce tensors) of
    at most this many elements are never skipped (the original's
    NCCL_PROTECT_SIZE_0); 0: none. Hooks and backend.

    The c10d backend sees neither buckets nor iterations: it numbers its
    allreduce calls 0, 1, 2, ... per process group, and that number is the
    random shift's iteration (docs/skipreduce.md). Its own fields:
    warmup_calls: calls 0..warmup_calls-1 skip nothing.
    call_cycle, protected_calls: call c is never skipped when c mod
    call_cycle is in protected_calls (e.g. call_cycle = DDP's buckets per
    iteration and protected_calls the bucket positions to protect).
    protected_params, protected_buckets and warmup_steps are the hooks'
    only (validate(target="backend") refuses them); the backend's fields
    are refused by the hooks likewise.
    atp_variant: on the ATP path only (the ring always skips contributions):
    "fragments" (whole fragments left out, both directions lighter) or
    "contributions" (each rank leaves its contribution out of rate of the
    fragments; only the upstream is lighter, and the job's parameter servers
    must run with contribution_skipping, e.g. atp-ps --contribution_skipping).
    """
    mode: str = "none"
    rate: float = 0.0
    protected_params: List[str] = dataclasses.field(default_factory=list)
    protected_buckets: List[int] = dataclasses.field(default_factory=list)
    warmup_steps: int = 0
    divisor: str = "skip"
    seed: int = 0
    protect_size: int = 0
    call_cycle: int = 0
    protected_calls: List[int] = dataclasses.field(default_factory=list)
    warmup_calls: int = 0
    atp_variant: str = "fragments"

    def enabled(self) -> bool:
        return self.mode != "none"

    def validate(self, field: str = "SkipReduceOptions", target: str = "hook") -> None:
        """Raises ValueError naming the offending field. target: "hook"
        (the DDP hooks) or "backend" (the c10d backend): each refuses the
        other's own fields when set."""
        def bad(name, why):
            raise ValueError("%s.%s: %s" % (field, name, why))

        def is_int(v):
            return isinstance(v, numbers.Integral) and not isinstance(v, bool)

        if self.mode not in SKIP_MODES:
            bad("mode", "%r is not one of %s" % (self.mode, ", ".join(SKIP_MODES)))
        if (not isinstance(self.rate, numbers.Real) or isinstance(self.rate, bool)
                or not math.isfinite(self.rate) or not 0.0 <= self.rate <= 1.0):
            bad("rate", "%r is not a number in 0..1" % (self.rate,))
        if self.mode == "none" and self.rate != 0.0:
            bad("rate", "%r with mode 'none' (set a mode to skip)" % (self.rate,))
        if self.mode != "none" and self.rate == 0.0:
            bad("rate", "0 with mode %r skips nothing (give a rate in (0, 1])" % self.mode)
        if (not isinstance(self.protected_params, (list, tuple))
                or not all(isinstance(n, str) and n for n in self.protected_params)):
            bad("protected_params", "%r is not a list of parameter names" % (self.protected_params,))
        if (not isinstance(self.protected_buckets, (list, tuple))
                or not all(is_int(b) and b >= 0 for b in self.protected_buckets)):
            bad("protected_buckets", "%r is not a list of bucket indices (integers >= 0)"
                % (self.protected_buckets,))
        if not is_int(self.warmup_steps) or self.warmup_steps < 0:
            bad("warmup_steps", "%r is not an integer >= 0" % (self.warmup_steps,))
        for name in ("protect_size", "call_cycle", "warmup_calls"):
            value = getattr(self, name)
            if not is_int(value) or not 0 <= value < 2 ** 64:
                bad(name, "%r is not an integer >= 0" % (value,))
        if (not isinstance(self.protected_calls, (list, tuple))
                or not all(is_int(c) and c >= 0 for c in self.protected_calls)):
            bad("protected_calls", "%r is not a list of call indices (integers >= 0)"
                % (self.protected_calls,))
        beyond = [c for c in self.protected_calls if c >= self.call_cycle]
        if beyond:
            bad("protected_calls", "%r not below call_cycle (%d): a call's place in the cycle "
                "is its number mod call_cycle" % (beyond, self.call_cycle))
        if self.call_cycle and not self.protected_calls:
            bad("call_cycle", "%d without protected_calls protects nothing" % self.call_cycle)
        if target not in SKIP_TARGETS:
            raise ValueError("%s: target %r is not one of %s" % (field, target, SKIP_TARGETS))
        others = _BACKEND_ONLY if target == "hook" else _HOOK_ONLY
        for name in others:
            if getattr(self, name):
                bad(name, "the %s does not take it (%s)" % (
                    "DDP hooks" if target == "hook" else "c10d backend",
                    "they count DDP iterations and see buckets: use protected_params, "
                    "protected_buckets, warmup_steps" if target == "hook" else
                    "it counts allreduce calls and sees no buckets or parameter names: use "
                    "call_cycle with protected_calls, protect_size, warmup_calls"))
        if target == "hook":
            protection = ("protected_params", "protected_buckets", "protect_size")
        else:
            protection = ("protected_calls", "protect_size")
        set_protection = [n for n in protection if getattr(self, n)]
        if self.mode == "none" and set_protection:
            bad(set_protection[0], "protection with mode 'none' (nothing is skipped)")
        if self.mode == "selective" and not set_protection:
            bad(protection[0], "mode 'selective' needs protection (%s)" % ", ".join(protection))
        if self.divisor not in SKIP_DIVISORS:
            bad("divisor", "%r is not one of %s" % (self.divisor, ", ".join(SKIP_DIVISORS)))
        if not is_int(self.seed) or not 0 <= self.seed < 2 ** 64:
            bad("seed", "%r is not an integer in 0..2^64-1" % (self.seed,))
        if self.atp_variant not in SKIP_ATP_VARIANTS:
            bad("atp_variant", "%r is not one of %s"
                % (self.atp_variant, ", ".join(SKIP_ATP_VARIANTS)))
        if self.mode == "none" and self.atp_variant != "fragments":
            bad("atp_variant", "%r with mode 'none' (nothing is skipped)" % (self.atp_variant,))

    def policy(self, target: str = "hook"):
        """The atp.SkipPolicy (C++ atp::SkipPolicy) of these options. For
        the hooks: with protected_buckets (protected_params and protect_size
        are resolved per bucket by atp.skip.SkipSchedule). For the backend:
        warmup_iterations = warmup_calls (its iterations are calls);
        protect_size and protected_calls go to the backend beside it."""
        import atp._atp as core
        self.validate(target=target)
        p = core.SkipPolicy()
        p.mode = {"none": core.SkipMode.NONE, "static": core.SkipMode.STATIC,
                  "random": core.SkipMode.RANDOM, "selective": core.SkipMode.RANDOM}[self.mode]
        p.rate = float(self.rate)
        p.divisor = (core.SkipDivisor.ALL_RANKS if self.divisor == "skip"
                     else core.SkipDivisor.CONTRIBUTORS)
        p.seed = int(self.seed)
        if target == "hook":
            p.warmup_iterations = int(self.warmup_steps)
            p.protected_tensors = [int(b) for b in self.protected_buckets]
        else:
            p.warmup_iterations = int(self.warmup_calls)
        p.variant = (core.SkipVariant.CONTRIBUTIONS if self.atp_variant == "contributions"
                     else core.SkipVariant.WHOLE_FRAGMENTS)
        p.validate()
        return p


@dataclasses.dataclass
class AtpOptions:
    """The settings of the DDP hooks (atp.hook) and the c10d backend
    (atp.backend): the job (job_id, racks, io_threads, scale), where its
    parameter servers and this host's endpoint are (local, ps_addresses,
    address, udp_bind, udp_gateway; the default is the local mode), timing
    (seconds), polling, SkipReduce (skip) and the ring hook's address.
    from_env() reads the ATP_* variables. docs/pytorch.md, "Options and
    rendezvous"."""
    # The job. job_id 1..255; racks: workers per rack in rack-major rank
    # order (None: one rack of all ranks).
    job_id: int = 1
    racks: Optional[List[int]] = None
    io_threads: int = 1
    scale: float = 1e8  # quantization factor (atp::kDefaultScale)
    # Where the job's parameter server(s) and this host's endpoint are.
    # local=True (the default when ps_addresses is empty): rank 0 starts
    # atp-switchd and atp-ps on this machine (atp.local) and publishes their
    # addresses in torch's store.
    local: Optional[bool] = None
    ps_addresses: List[str] = dataclasses.field(default_factory=list)
    address: str = ""        # this worker's ATP IPv4 (real cluster)
    udp_bind: str = ""       # kernel UDP: IP:PORT of this worker's queue 0
    udp_gateway: str = ""    # kernel UDP overlay: IP:PORT of the ToR switch's socket
    # Timing. rto_floor_s: the retransmission floor. 50 ms dates from when
    # the testbed forced that floor; the engine's timeout now follows the
    # collective round trip (docs/protocol.md) and the tools' floor is 1 ms,
    # so this default is to be re-measured. timeout_s: how long an operation
    # may wait without progress (a rank late to the collective, an
    # unreachable PS) before it fails: the Worker's JobOptions.stall_timeout
    # (the c10d backend takes init_process_group's timeout instead), and
    # the ring hook's wait.
    rto_floor_s: float = 0.05
    timeout_s: float = 300.0
    # Polling of the worker's I/O threads: idle rounds spent spinning, then
    # yielding, before sleeping on the queues' wait fds (0 and 0 here; the
    # C++ PollingOptions default yields 64 rounds).
    spin_iterations: int = 0
    yield_iterations: int = 0
    # SkipReduce in the hooks (atp.hook; docs/skipreduce.md).
    skip: SkipReduceOptions = dataclasses.field(default_factory=SkipReduceOptions)
    # ring_hostname: the address the other ranks reach this one's ring
    # allreduce at (atp.hook.RingHookState; TCP over gloo).
    ring_hostname: str = "127.0.0.1"

    def is_local(self) -> bool:
        return self.local if self.local is not None else not self.ps_addresses

    @staticmethod
    def from_env(**overrides) -> "AtpOptions":
        """Defaults, then ATP_JOB_ID, ATP_PS (comma list), ATP_ADDRESS,
        ATP_UDP_BIND, ATP_UDP_GATEWAY, ATP_IO_THREADS, ATP_RING_HOSTNAME,
        then `overrides`."""
        o = AtpOptions()
        env = os.environ

        def integer(name):
            try:
                return int(env[name])
            except ValueError:
                raise ValueError("%s=%r is not an integer" % (name, env[name])) from None
        if "ATP_JOB_ID" in env:
            o.job_id = integer("ATP_JOB_ID")
        if "ATP_PS" in env:
            o.ps_addresses = [a.strip() for a in env["ATP_PS"].split(",") if a.strip()]
        if "ATP_IO_THREADS" in env:
            o.io_threads = integer("ATP_IO_THREADS")
        o.address = env.get("ATP_ADDRESS", o.address)
        o.udp_bind = env.get("ATP_UDP_BIND", o.udp_bind)
        o.udp_gateway = env.get("ATP_UDP_GATEWAY", o.udp_gateway)
        o.ring_hostname = env.get("ATP_RING_HOSTNAME", o.ring_hostname)
        return dataclasses.replace(o, **overrides)
