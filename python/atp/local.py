"""The local mode: atp-switchd and atp-ps for one job on this machine.

The topology is the testbed's (docs/testbed.md) reduced to one rack: one
switch process aggregating the job at both levels, one PS behind it, all
links kernel-UDP overlay sockets on 127.0.0.1 (the `udp` variant: no root,
no DPDK, no hugepages). Addresses follow the testbed: worker rank r is
10.<job>.0.<r+1>, the PS 10.<job>.200.1, the group 239.1.0.<job>, the switch
10.255.0.1.

Ports: a block of 32 * (world_size + 1) UDP ports, 16 per socket side (a
side of Q queues binds P..P+Q-1, and switchd wants room for 16), picked at
random in 20000-39999 outside the kernel's ephemeral range and with nothing
bound in it (/proc/net/udp). Two local clusters starting at the same moment
could pick the same block (nothing locks it, unlike scripts/testbed's flock);
the second switchd then fails to bind and start() raises, naming it.

Two layers:
  LocalCluster     starts and stops the two processes itself (the CLI's
                   supervisor, `python -m atp local`);
  local_cluster()  a context manager that runs that supervisor as a child
                   (it dies with its parent: PR_SET_PDEATHSIG) and yields the
                   job's description; leaving it, or the parent dying, tears
                   everything down: processes, sockets, files.
"""
import contextlib
import ctypes
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PORTS_PER_SIDE = 16
SWITCH_ADDRESS = "10.255.0.1"
# The workers' and atp-ps's window slots per queue: JobOptions' default
# (atp::kDefaultSlots; test_local_mode checks they agree). The switch gets an
# aggregator for each slot of each of the 16 queues a job may have, so the
# job never collides with itself there (docs/protocol.md): atp-switchd's
# default count (switch_emulator::kDefaultAggregatorCount).
DEFAULT_SLOTS = 1024
AGGREGATORS = 16 * DEFAULT_SLOTS


def _set_parent_death_signal(sig):
    """preexec_fn: the child gets `sig` when the process that started it dies."""
    def set_it():
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(sig), 0, 0, 0)
    return set_it


def _bound_udp_ports():
    ports = set()
    for path in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    local = line.split()[1]
                    ports.add(int(local.rsplit(":", 1)[1], 16))
        except OSError:
            pass
    return ports


def _pick_port_block(size, rng):
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            eph_lo, eph_hi = (int(x) for x in f.read().split())
    except OSError:
        eph_lo, eph_hi = 32768, 60999
    block = 64 * ((size + 63) // 64)
    bound = _bound_udp_ports()
    for _ in range(300):
        base = 20000 + block * rng.randrange((40000 - 20000) // block)
        if base + block > 40000:
            continue
        if base + block - 1 >= eph_lo and base <= eph_hi:
            continue
        if not any(p in bound for p in range(base, base + block)):
            return base
    raise RuntimeError("atp.local: no free block of %d UDP ports in 20000-39999" % block)


def job_description(world_size, job_id, io_threads, base):
    """The job as the workers need it: per rank its address and sockets."""
    ps_slot = 2 * world_size
    return {
        "job_id": job_id,
        "world_size": world_size,
        "io_threads": io_threads,
        "ps": ["10.%d.200.1" % job_id],
        "group": "239.1.0.%d" % job_id,
        "port_base": base,
        "workers": [{
            "address": "10.%d.0.%d" % (job_id, r + 1),
            "udp_bind": "127.0.0.1:%d" % (base + PORTS_PER_SIDE * (2 * r + 1)),
            "udp_gateway": "127.0.0.1:%d" % (base + PORTS_PER_SIDE * (2 * r)),
        } for r in range(world_size)],
        "ps_udp_bind": "127.0.0.1:%d" % (base + PORTS_PER_SIDE * (ps_slot + 1)),
        "ps_udp_gateway": "127.0.0.1:%d" % (base + PORTS_PER_SIDE * ps_slot),
    }


def switch_yaml(job):
    q = job["io_threads"]
    lines = ["name: atplocal", "address: %s" % SWITCH_ADDRESS, "aggregators: %d" % AGGREGATORS,
             "orphan_timeout_ms: 100", "ports:"]
    for r, w in enumerate(job["workers"]):
        lines.append('  - {name: w%d, type: kernel_udp, bind: "%s", peer: "%s", queues: %d}'
                     % (r, w["udp_gateway"], w["udp_bind"], q))
    lines.append('  - {name: ps, type: kernel_udp, bind: "%s", peer: "%s", queues: %d}'
                 % (job["ps_udp_gateway"], job["ps_udp_bind"], q))
    lines.append("routes:")
    for r, w in enumerate(job["workers"]):
        lines.append("  - {prefix: %s/32, port: w%d}" % (w["address"], r))
    lines.append("  - {prefix: %s/32, port: ps}" % job["ps"][0])
    ports = ", ".join("w%d" % r for r in range(job["world_size"]))
    lines.append("multicast: [{group: %s, ports: [%s]}]" % (job["group"], ports))
    lines.append("jobs: [{id: %d, level: both, group: %s}]" % (job["job_id"], job["group"]))
    return "\n".join(lines) + "\n"


def find_binary(name):
    """atp-switchd / atp-ps: $ATP_SWITCHD / $ATP_PS, then the build tree or
    prefix this package came from (atp/_paths.py), then PATH. A variable
    that is set must name an executable file (or a command on PATH):
    FileNotFoundError names the variable otherwise, instead of a later
    spawn failing with only the path."""
    env = {"atp-switchd": "ATP_SWITCHD", "atp-ps": "ATP_PS"}[name]
    if os.environ.get(env):
        found = shutil.which(os.environ[env])
        if found is None:
            raise FileNotFoundError("atp.local: $%s=%s is not an executable file (it names the "
                                    "%s to run)" % (env, os.environ[env], name))
        return found
    try:
        from atp import _paths
        path = _paths.SWITCHD if name == "atp-switchd" else _paths.PS
        if os.path.exists(path):
            return path
    except ImportError:
        pass
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError("atp.local: %s not found (set $%s, build it, or put it on PATH)"
                            % (name, env))


class LocalCluster:
    """atp-switchd + atp-ps for one job; start() waits until both are ready."""

    def __init__(self, world_size, job_id=1, io_threads=1, ready_timeout_s=30.0, seed=None):
        if not 1 <= world_size <= 32:
            raise ValueError("world_size: %d is not in 1..32 (one rack)" % world_size)
        if not 1 <= job_id <= 255:
            raise ValueError("job_id: %d is not in 1..255" % job_id)
        if not 1 <= io_threads <= 16:
            raise ValueError("io_threads: %d is not in 1..16" % io_threads)
        if not (math.isfinite(ready_timeout_s) and ready_timeout_s > 0):
            raise ValueError("ready_timeout_s: %s is not a positive number of seconds"
                             % ready_timeout_s)
        self.world_size, self.job_id, self.io_threads = world_size, job_id, io_threads
        self.ready_timeout_s = ready_timeout_s
        self._rng = random.Random(seed)
        self.dir = None
        self.job = None
        self._procs = {}

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="atp-local-")
        try:
            self.job = job_description(self.world_size, self.job_id, self.io_threads,
                                       _pick_port_block(PORTS_PER_SIDE * 2 * (self.world_size + 1),
                                                        self._rng))
            config = os.path.join(self.dir, "switch.yaml")
            with open(config, "w") as f:
                f.write(switch_yaml(self.job))
            # Both daemons sleep on their sockets between frames instead of
            # spinning first: they share the machine with the training
            # processes, whose cores a spinning daemon would take; a frame's
            # arrival wakes them (poll on the socket).
            self._spawn("switch", [find_binary("atp-switchd"), "--config=" + config,
                                   "--stats_json=" + os.path.join(self.dir, "switch.json"),
                                   "--spin_iterations=0", "--yield_iterations=0"])
            self._wait_ready("switch", "atplocal: running")
            self._spawn("ps", [find_binary("atp-ps"), "--transport=kernel_udp",
                               "--udp_bind=" + self.job["ps_udp_bind"],
                               "--udp_gateway=" + self.job["ps_udp_gateway"],
                               "--job=%d" % self.job_id, "--racks=1",
                               "--workers_per_rack=%d" % self.world_size,
                               "--io_threads=%d" % self.io_threads,
                               # The job's only PS, on this machine: accept
                               # SkipReduce's contribution variant too.
                               "--contribution_skipping",
                               "--spin_iterations=0", "--yield_iterations=0",
                               "--stats_json=" + os.path.join(self.dir, "ps.json")])
            self._wait_ready("ps", "atp-ps: ready")
            # What a test needs to check that nothing is left behind.
            self.job["local"] = {"dir": self.dir, "supervisor_pid": os.getpid(),
                                 "pids": [p.pid for p in self._procs.values()]}
        except BaseException:
            self.stop()
            raise
        return self.job

    def _spawn(self, name, argv):
        log = open(os.path.join(self.dir, name + ".log"), "wb")
        self._procs[name] = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=_set_parent_death_signal(signal.SIGKILL))
        log.close()

    def _log(self, name):
        try:
            with open(os.path.join(self.dir, name + ".log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def _wait_ready(self, name, line):
        deadline = time.monotonic() + self.ready_timeout_s
        proc = self._procs[name]
        delay = 0.005
        while True:
            if line in self._log(name):
                return
            if proc.poll() is not None:
                raise RuntimeError("atp.local: %s exited with %d before it was ready:\n%s"
                                   % (name, proc.returncode, self._log(name)[-2000:]))
            if time.monotonic() > deadline:
                raise TimeoutError("atp.local: %s not ready after %.0f s:\n%s"
                                   % (name, self.ready_timeout_s, self._log(name)[-2000:]))
            time.sleep(delay)  # polling a log file for the readiness line
            delay = min(delay * 2, 0.1)

    def stop(self):
        """SIGTERM both (they write their stats JSON), SIGKILL after 10 s;
        returns {'switch': {...}, 'ps': {...}} (what they wrote) and removes
        the directory. Idempotent."""
        stats = {}
        for proc in self._procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self._procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for name in self._procs:
            try:
                with open(os.path.join(self.dir, name + ".json")) as f:
                    stats[name] = json.load(f)
            except (OSError, ValueError):
                pass
        self._procs = {}
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        return stats

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()


class LocalJob:
    """What local_cluster() yields: the job description and, after the block,
    the switch's and the PS's final counters (`final_stats`)."""

    def __init__(self, job):
        self.job = job
        self.final_stats = {}


@contextlib.contextmanager
def local_cluster(world_size, job_id=1, io_threads=1, ready_timeout_s=30.0):
    """Runs `python -m atp local` as a supervisor child and yields a LocalJob.

    The supervisor owns atp-switchd and atp-ps; it stops them when this block
    ends, when it reads EOF on its stdin (this process closed it or died) or
    on SIGTERM (sent by the kernel if this process dies: PR_SET_PDEATHSIG)."""
    argv = [sys.executable, "-m", "atp", "local", "--world_size=%d" % world_size,
            "--job=%d" % job_id, "--io_threads=%d" % io_threads,
            "--ready_timeout_s=%g" % ready_timeout_s, "--print_job"]
    env = dict(os.environ)
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = package_parent + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                            preexec_fn=_set_parent_death_signal(signal.SIGTERM))
    handle = None
    try:
        line = proc.stdout.readline()
        if not line:
            proc.wait()
            raise RuntimeError("atp.local: the supervisor exited with %s before the job was "
                               "ready (its error is above)" % proc.returncode)
        handle = LocalJob(json.loads(line))
        yield handle
    finally:
        if proc.poll() is None:
            proc.stdin.close()  # EOF: tear down
        rest = proc.stdout.read()
        proc.wait()
        for extra in rest.decode(errors="replace").splitlines():
            if handle is not None and extra.startswith('{"final_stats"'):
                handle.final_stats = json.loads(extra)["final_stats"]


def print_cli_error(error):
    """One line (and a daemon's log tail, if the error carries it) on
    stderr, without a traceback: what the CLI says about a failure."""
    message = str(error)
    if message.startswith("atp.local: "):
        message = message[len("atp.local: "):]
    print("python -m atp local: %s" % message, file=sys.stderr, flush=True)


def _run_command(command, job):
    """Runs COMMAND with ATP_LOCAL_JOB set and returns its exit status; a
    COMMAND that cannot be started gets one line naming it and the shell's
    statuses (127: not found, 126: found but not executable), as env(1) and
    timeout(1) do: the status is otherwise the command's own, so 2 (bad
    flags) would be ambiguous here."""
    env = dict(os.environ, ATP_LOCAL_JOB=json.dumps(job))
    try:
        # The command dies with the supervisor too (SIGTERM), as the
        # switch and the PS do.
        status = subprocess.call(command, env=env,
                                 preexec_fn=_set_parent_death_signal(signal.SIGTERM))
        # Killed by signal N: the shell's 128 + N (sys.exit(-N) would exit 256 - N).
        return 128 - status if status < 0 else status
    except OSError as e:
        print("python -m atp local: cannot run %s: %s" % (command[0], e.strerror or e),
              file=sys.stderr, flush=True)
        return 127 if isinstance(e, FileNotFoundError) else 126


def supervise(args):
    """`python -m atp local`: start, then run `command` if given (with
    ATP_LOCAL_JOB set; the job is printed first, as a JSON line, only with
    --print_job) or print the job and wait for EOF on stdin / SIGTERM /
    SIGINT, then stop and print the final counters (JSON line)."""
    stop_now = []

    def on_signal(signum, _frame):
        stop_now.append(signum)
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    cluster = LocalCluster(args.world_size, args.job, args.io_threads, args.ready_timeout_s)
    status = 0
    try:
        try:
            job = cluster.start()
        except (OSError, RuntimeError) as e:  # a daemon that did not start or get ready
            print_cli_error(e)
            return 1
        if args.print_job or not args.command:
            print(json.dumps(job), flush=True)
        if args.command:
            status = _run_command(args.command, job)
        else:
            sys.stdin.read()  # until EOF
    except KeyboardInterrupt:
        status = 128 + (stop_now[0] if stop_now else signal.SIGINT)
    finally:
        # Tearing down is not interrupted. The owner's death closes stdin and
        # sends SIGTERM (the parent-death signal) at the same instant, so the
        # handler may still run (raising) at the first statements here, after
        # read() saw EOF: catch that and try again until both are ignored.
        while True:
            try:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                break
            except KeyboardInterrupt:
                status = 128 + (stop_now[0] if stop_now else signal.SIGINT)
        stats = cluster.stop()
        try:
            print(json.dumps({"final_stats": stats}), flush=True)
        except BrokenPipeError:  # the reader (our parent) is gone
            pass
    return status


class OwnedLocalCluster:
    """local_cluster() held open by an object (for the hook and the backend,
    whose lifetime is not a `with` block): .job now, .close() later (returns
    the final counters; idempotent)."""

    def __init__(self, world_size, job_id=1, io_threads=1):
        self._context = local_cluster(world_size, job_id, io_threads)
        self.handle = self._context.__enter__()
        self.job = self.handle.job

    def close(self):
        if self._context is not None:
            context, self._context = self._context, None
            context.__exit__(None, None, None)
        return self.handle.final_stats
