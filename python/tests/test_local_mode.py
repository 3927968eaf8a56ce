"""The local mode leaves nothing behind: no process, no bound UDP port, no
file, whether its block ends normally, its owner is SIGKILLed, the CLI's
command fails, or a rank of a torchrun job dies."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from atp import local

DEADLINE_S = 30


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0): count it as gone once it has exited.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def ports_of(job):
    sides = [job["ps_udp_bind"], job["ps_udp_gateway"]]
    for w in job["workers"]:
        sides += [w["udp_bind"], w["udp_gateway"]]
    return {int(s.rsplit(":", 1)[1]) for s in sides}


def assert_nothing_left(job):
    """Polls (bounded) until every trace of the job is gone, then asserts."""
    info = job["local"]
    pids = info["pids"] + [info["supervisor_pid"]]
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if (not any(alive(p) for p in pids) and not os.path.exists(info["dir"])
                and not (ports_of(job) & local._bound_udp_ports())):
            return
        time.sleep(0.05)  # polling for other processes' exit, with a deadline
    assert [p for p in pids if alive(p)] == []
    assert not os.path.exists(info["dir"])
    assert not (ports_of(job) & local._bound_udp_ports())


def test_context_manager_tears_down():
    with local.local_cluster(2) as handle:
        job = handle.job
        assert all(alive(p) for p in job["local"]["pids"])
        switch_and_ps = {int(s.rsplit(":", 1)[1]) for s in
                         [job["ps_udp_bind"], job["ps_udp_gateway"]] +
                         [w["udp_gateway"] for w in job["workers"]]}
        assert switch_and_ps <= local._bound_udp_ports()
    assert_nothing_left(job)
    assert "switch" in handle.final_stats and "ps" in handle.final_stats


def test_owner_killed_tears_down():
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "job.json")
        code = textwrap.dedent("""
            import json, sys, time
            from atp import local
            with local.local_cluster(2) as h:
                open(sys.argv[1], "w").write(json.dumps(h.job))
                sys.stdin.read()
        """)
        owner = subprocess.Popen([sys.executable, "-c", code, out], stdin=subprocess.PIPE)
        deadline = time.monotonic() + DEADLINE_S
        while not os.path.exists(out) and time.monotonic() < deadline and owner.poll() is None:
            time.sleep(0.05)  # polling for the child's file, with a deadline
        with open(out) as f:
            job = json.load(f)
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    assert_nothing_left(job)


@pytest.mark.parametrize("print_job", [False, True])
def test_cli_runs_the_command_and_passes_its_status(print_job):
    code = ("import json, os, sys; j = json.loads(os.environ['ATP_LOCAL_JOB']); "
            "print('inside', json.dumps(j)); sys.exit(3)")
    flags = ["--print_job"] if print_job else []
    r = subprocess.run([sys.executable, "-m", "atp", "local", "--world_size=1"] + flags +
                       ["--", sys.executable, "-c", code],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, r.stderr
    lines = r.stdout.splitlines()
    # With a COMMAND the job is printed only with --print_job (docs/pytorch.md).
    assert len(lines) == (3 if print_job else 2), lines
    inside, final = lines[-2], lines[-1]
    assert inside.startswith("inside ")
    job = json.loads(inside[len("inside "):])
    assert job["world_size"] == 1
    if print_job:
        assert json.loads(lines[0]) == job
    assert json.loads(final)["final_stats"].keys() == {"switch", "ps"}
    assert_nothing_left(job)


def test_cli_reports_a_command_killed_by_a_signal_as_a_shell_does():
    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    r = subprocess.run([sys.executable, "-m", "atp", "local", "--world_size=1", "--",
                        sys.executable, "-c", code],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 128 + 9, r.stderr  # not 256 - 9


@pytest.mark.parametrize("flags, named", [
    (["--world_size=40"], "--world_size"),
    (["--world_size=2", "--job=0"], "--job: 0"),
    (["--world_size=2", "--ready_timeout_s=-5"], "--ready_timeout_s"),
    (["--world_size=2", "--ready_timeout_s=0"], "--ready_timeout_s"),
    (["--world_size=2", "--ready_timeout_s=nan"], "--ready_timeout_s"),
])
def test_cli_refuses_bad_flags(flags, named):
    r = subprocess.run([sys.executable, "-m", "atp", "local"] + flags + ["--", "true"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and named in r.stderr, (r.returncode, r.stderr)


def run_cli(args, env=None):
    return subprocess.run([sys.executable, "-m", "atp", "local", "--world_size=1"] + args,
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, **(env or {})))


def not_executable_file(directory):
    path = os.path.join(directory, "not-executable")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n")
    return path


@pytest.mark.parametrize("exists, status, why", [
    (False, 127, "No such file or directory"),
    (True, 126, "Permission denied"),
])
def test_cli_names_a_command_it_cannot_start(exists, status, why):
    # One line naming COMMAND, no traceback; the shell's statuses (127, 126),
    # as env(1) and timeout(1) give; the cluster is still torn down.
    with tempfile.TemporaryDirectory() as d:
        command = not_executable_file(d) if exists else os.path.join(d, "no-such-command")
        r = run_cli(["--print_job", "--", command, "--flag"])
    assert r.returncode == status, (r.returncode, r.stderr)
    assert r.stderr == "python -m atp local: cannot run %s: %s\n" % (command, why)
    job = json.loads(r.stdout.splitlines()[0])
    assert json.loads(r.stdout.splitlines()[-1])["final_stats"].keys() == {"switch", "ps"}
    assert_nothing_left(job)


@pytest.mark.parametrize("variable", ["ATP_SWITCHD", "ATP_PS"])
@pytest.mark.parametrize("exists", [False, True])
def test_cli_names_the_variable_of_a_binary_it_cannot_run(variable, exists):
    # Refused before anything starts, like a bad flag (status 2), naming the
    # variable: not a traceback of the spawn that would fail.
    with tempfile.TemporaryDirectory() as d:
        path = not_executable_file(d) if exists else os.path.join(d, "nonexistent")
        r = run_cli(["--", "true"], env={variable: path})
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.startswith("python -m atp local: $%s=%s is not an executable file"
                               % (variable, path)), r.stderr
    assert len(r.stderr.splitlines()) == 1 and r.stdout == "", (r.stdout, r.stderr)


def test_cli_reports_a_daemon_that_does_not_start():
    r = run_cli(["--", "true"], env={"ATP_SWITCHD": shutil.which("false")})
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stderr.startswith("python -m atp local: switch exited with 1 before it was "
                               "ready"), r.stderr
    assert "Traceback" not in r.stderr


RANK_DIES = textwrap.dedent("""
    import json, os, sys
    import torch, torch.distributed as dist, torch.nn as nn
    import atp
    from atp import hook
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    state = hook.AtpHookState.create(atp.AtpOptions())
    if rank == 0:
        open(sys.argv[1], "w").write(json.dumps(state._owner_job()))
    model = nn.parallel.DistributedDataParallel(nn.Linear(8, 2))
    model.register_comm_hook(state, hook.atp_allreduce_hook)
    for step in range(3):
        if rank == 1 and step == 1:
            os._exit(7)                      # this rank dies mid-training
        model(torch.ones(4, 8)).sum().backward()
""")


def test_a_rank_dying_under_torchrun_leaves_nothing():
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "train.py")
        with open(script, "w") as f:
            f.write(RANK_DIES)
        out = os.path.join(d, "job.json")
        # --redirects=1 --tee=1: torch 1.13's torchrun on Python 3.11 fails
        # with its default (Std.from_str("0") is None there; docs/pytorch.md).
        r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                            "--redirects=1", "--tee=1", "--master_port=%d" % free_port(),
                            "--monitor_interval=0.1", script, out],
                           capture_output=True, text=True, timeout=90)
        assert r.returncode != 0
        with open(out) as f:
            job = json.load(f)
    assert_nothing_left(job)


def test_the_switch_has_an_aggregator_for_every_slot_of_every_queue():
    import atp
    assert local.DEFAULT_SLOTS == atp.JobOptions().slots == atp.ParameterServerOptions().slots
    for q in (1, 4, 16):
        job = local.job_description(2, 1, q, 20000)
        assert "aggregators: %d\n" % (16 * local.DEFAULT_SLOTS) in local.switch_yaml(job), q
