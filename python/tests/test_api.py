"""atp._atp: options and their errors, argument errors, and a real job of two
workers (in this process) over a local switch + PS: exact sums, zero copy,
handles, push/pull/discard, stats."""
import errno
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

import atp
from conftest import exact_sum


def test_validate_names_the_field():
    w = atp.WorkerOptions()
    w.job.job_id = 1
    w.job.layout = atp.RackLayout.uniform(1, 2)
    w.parameter_servers = [atp.DeviceAddress("10.1.200.1")]
    w.validate()  # valid: job.slots is 1024 by default
    assert w.job.slots == atp.ParameterServerOptions().slots == 1024, \
        "a default worker and a default PS agree on slots"
    w.job.slots = 300  # docs/pytorch.md shows this message
    with pytest.raises(ValueError, match=r"^WorkerOptions\.job\.slots: 300 is not a power of two "
                                         r"in 1\.\.65536$"):
        w.validate()
    ps = atp.ParameterServerOptions()
    with pytest.raises(ValueError, match=r"^ParameterServerOptions\.jobs"):
        ps.validate()
    with pytest.raises(ValueError):
        atp.DeviceAddress("10.1.300.1")
    with pytest.raises(ValueError, match="IP:PORT"):
        atp.TransportOptions.kernel_udp(address="10.1.0.1", bind="127.0.0.1")


OPTIONS_CLASSES = ["RackLayout", "SchedulerOptions", "JobOptions", "PollingOptions",
                   "WorkerOptions", "ParameterServerJobOptions", "ParameterServerOptions",
                   "SkipPolicy", "CaptureOptions", "AtpOptions", "SkipReduceOptions"]


@pytest.mark.parametrize("name", OPTIONS_CLASSES)
def test_options_have_a_docstring_and_a_repr_of_their_fields(name):
    cls = getattr(atp, name)
    # pybind11 leaves a class without one None; a dataclass gets its signature.
    assert cls.__doc__ and not cls.__doc__.startswith(name + "("), cls.__doc__
    text = repr(cls())
    assert text.startswith(name + "(") and text.endswith(")") and " object at " not in text, text


def test_an_options_repr_shows_nested_fields_as_python_reads_them():
    w = atp.WorkerOptions()
    w.job.job_id = 1
    w.job.layout = atp.RackLayout.uniform(1, 2)
    w.job.stall_timeout = float("inf")
    w.parameter_servers = [atp.DeviceAddress("10.1.200.1")]
    text = repr(w)
    assert text.startswith("WorkerOptions(job=JobOptions(job_id=1, layout=RackLayout("
                           "workers_per_rack=[2]), io_threads=1, "), text
    for part in ("congestion_control=CongestionControl.AIMD", "retransmission_floor=0.001",
                 "stall_timeout=inf", "rack=0, worker_in_rack=0",
                 "parameter_servers=[DeviceAddress('10.1.200.1', '02:00:0a:01:c8:01')]",
                 "polling=PollingOptions(spin_iterations=0, yield_iterations=64, "
                 "min_sleep=2e-05, max_sleep=0.001, cpus=[])", "max_burst=32)"):
        assert part in text, (part, text)
    ps = atp.ParameterServerOptions()
    j = atp.ParameterServerJobOptions()
    j.job_id = 3
    j.delivery = atp.ParameterDelivery.MULTICAST
    ps.jobs = [j]
    assert repr(ps).startswith("ParameterServerOptions(jobs=[ParameterServerJobOptions("
                               "job_id=3, layout=RackLayout(workers_per_rack=[]), "
                               "delivery=ParameterDelivery.MULTICAST, "), repr(ps)
    assert "orphan_timeout=2.0, waiting_report_interval=1.0)" in repr(ps)


def test_import_atp_loads_its_modules_on_first_use_and_not_torch():
    # docs/pytorch.md uses atp.hook, atp.backend and atp.stats after a bare
    # `import atp`; that import itself must not load torch.
    code = ("import sys, atp\n"
            "assert 'torch' not in sys.modules\n"
            "assert atp.stats.StepCounters and atp.local.LocalCluster\n"
            "assert 'torch' not in sys.modules\n"
            "assert atp.hook.AtpHookState and atp.backend.register\n"
            "assert 'torch' in sys.modules\n"
            "assert not hasattr(atp, 'no_such_module')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_durations_are_seconds():
    j = atp.JobOptions()
    j.retransmission_floor = 0.05
    assert j.retransmission_floor == pytest.approx(0.05)
    assert atp.ParameterServerOptions().orphan_timeout == pytest.approx(2.0)


def test_transports_of_this_build():
    assert atp.transport_available("kernel_udp")
    with pytest.raises(ValueError):
        atp.transport_available("carrier_pigeon")


def test_embedded_ps_refuses_garbage():
    o = atp.ParameterServerOptions()
    j = atp.ParameterServerJobOptions()
    j.job_id = 1
    j.layout = atp.RackLayout.uniform(1, 2)
    j.workers = [atp.DeviceAddress("10.1.0.1"), atp.DeviceAddress("10.1.0.2")]
    o.jobs = [j]
    ps = atp.EmbeddedParameterServer(o, atp.DeviceAddress("10.1.200.1"))
    sent = []
    assert ps.handle_frame(b"\x00" * 10, sent.append) != "ok"
    assert sent == []
    assert ps.stats()["frames_received"] >= 0


def test_list_fields_of_objects_read_as_copies():
    # An element read from a list field outlives a reassignment of the field:
    # it is a copy, not a reference into the field's (since freed) storage.
    o = atp.ParameterServerOptions()
    a = atp.ParameterServerJobOptions()
    a.job_id = 3
    o.jobs = [a]
    j0 = o.jobs[0]
    o.jobs = [atp.ParameterServerJobOptions() for _ in range(50)]  # frees the old storage
    assert j0.job_id == 3
    j0.job_id = 7
    assert [j.job_id for j in o.jobs] == [0] * 50
    # Changing an element read from the list changes the copy only; assigning
    # the list back changes the field.
    jobs = o.jobs
    jobs[0].job_id = 9
    assert o.jobs[0].job_id == 0
    o.jobs[0].job_id = 9
    assert o.jobs[0].job_id == 0
    o.jobs = jobs
    assert o.jobs[0].job_id == 9
    # The copy is deep: the element's own fields are its own too.
    jobs[0].layout = atp.RackLayout([5] * 4)
    assert o.jobs[0].layout.workers_per_rack == []

    w = atp.WorkerOptions()
    w.parameter_servers = [atp.DeviceAddress("10.1.200.%d" % i) for i in range(1, 5)]
    kept = w.parameter_servers
    w.parameter_servers = []
    assert [p.ipv4 for p in kept] == ["10.1.200.%d" % i for i in range(1, 5)]
    assert w.parameter_servers == []

    j = atp.ParameterServerJobOptions()
    j.workers = [atp.DeviceAddress("10.1.0.1")]
    first = j.workers[0]
    j.workers = [atp.DeviceAddress("10.1.0.%d" % i) for i in range(2, 40)]
    assert first.ipv4 == "10.1.0.1"
    assert len(j.workers) == 38 and j.workers[0].ipv4 == "10.1.0.2"


def test_push_pull_gives_the_exact_sum_in_place_and_zero_copy(two_workers):
    rng = np.random.default_rng(1)
    inputs = [rng.uniform(-1, 1, 5000).astype(np.float32) for _ in range(2)]
    expected = exact_sum(inputs)
    buffers = [x.copy() for x in inputs]
    handles = [w.push_pull(b) for w, b in zip(two_workers, buffers)]
    for h in handles:
        h.wait(timeout=30)
        assert h.done()
    np.testing.assert_array_equal(buffers[0], expected)   # written in place: no copy
    np.testing.assert_array_equal(buffers[1], expected)


def test_torch_tensors_average_and_on_done(two_workers):
    g = torch.Generator().manual_seed(2)
    inputs = [torch.rand(3000, generator=g) - 0.5 for _ in range(2)]
    expected = exact_sum([t.numpy() for t in inputs]) / np.float32(2)
    outputs = [torch.empty(3000) for _ in range(2)]
    seen = [threading.Event(), threading.Event()]
    errors = []
    for i, (w, x, out) in enumerate(zip(two_workers, inputs, outputs)):
        h = w.push_pull(x, out, atp.Reduction.AVERAGE)
        h.on_done(lambda err, i=i: (errors.append(err), seen[i].set()))
    for e in seen:
        assert e.wait(30)
    assert errors == [None, None]
    np.testing.assert_array_equal(outputs[0].numpy(), expected)
    np.testing.assert_array_equal(outputs[1].numpy(), expected)


def test_push_pull_discard(two_workers):
    x = [np.full(100, 0.25, np.float32), np.full(100, 0.5, np.float32)]
    for w, v in zip(two_workers, x):
        w.push(7, v)
    out = np.zeros(100, np.float32)
    two_workers[0].pull(7, out).wait(30)
    np.testing.assert_array_equal(out, np.full(100, 0.75, np.float32))
    two_workers[1].discard(7)
    with pytest.raises(KeyError):
        two_workers[1].discard(7)
    stats = two_workers[0].stats()
    assert stats["operations_finished"] >= 1 and isinstance(stats["queues"], list)


def test_bad_arrays_are_refused_clearly(two_workers):
    w = two_workers[0]
    with pytest.raises(TypeError, match="float32"):
        w.push_pull(np.zeros(10, np.float64))
    with pytest.raises(TypeError, match="float32"):
        w.push_pull(torch.zeros(10, dtype=torch.float64))
    with pytest.raises(ValueError, match="non-contiguous"):
        w.push_pull(np.zeros((10, 10), np.float32)[:, 0])
    with pytest.raises(ValueError, match="non-contiguous"):
        w.push_pull(torch.zeros(10, 10).t())
    readonly = np.zeros(10, np.float32)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        w.push_pull(readonly)
    with pytest.raises(TypeError, match="list"):
        w.push_pull([1.0, 2.0])
    with pytest.raises(ValueError, match="input has 10 values, output 11"):
        w.push_pull(np.zeros(10, np.float32), np.zeros(11, np.float32))
    with pytest.raises(ValueError, match="resolve_neg"):
        w.push_pull(torch.zeros(10)._neg_view())


def test_a_tensor_subclass_is_a_tensor(two_workers):
    class Tagged(torch.Tensor):
        pass
    x = [torch.full((100,), 0.25).as_subclass(Tagged), torch.full((100,), 0.5).as_subclass(Tagged)]
    out = [torch.empty(100).as_subclass(Tagged) for _ in range(2)]
    handles = [w.push_pull(a, o) for w, a, o in zip(two_workers, x, out)]
    for h in handles:
        h.wait(30)
    for o in out:
        assert torch.equal(o.as_subclass(torch.Tensor), torch.full((100,), 0.75))


def test_wait_times_out_while_the_peer_is_missing(two_workers):
    x = np.ones(62, np.float32)
    h = two_workers[0].push_pull(x)
    with pytest.raises(TimeoutError):
        h.wait(timeout=0.01)
    two_workers[1].push_pull(np.ones(62, np.float32)).wait(30)
    h.wait(30)
    np.testing.assert_array_equal(x, np.full(62, 2.0, np.float32))


def _unicast_job_on(base):
    """The PS and two workers of job 9 on kernel UDP, on the port block at
    `base`: (ps, workers). Raises OSError (EADDRINUSE) if a port is taken;
    whatever it opened is closed by then."""
    ps_ip, workers_ip = "10.9.200.1", ["10.9.0.1", "10.9.0.2"]
    o = atp.ParameterServerOptions()
    j = atp.ParameterServerJobOptions()
    j.job_id = 9
    j.layout = atp.RackLayout.uniform(1, 2)
    j.delivery = atp.ParameterDelivery.UNICAST
    j.workers = [atp.DeviceAddress(ip) for ip in workers_ip]
    o.jobs = [j]
    o.polling.spin_iterations = 0
    o.polling.yield_iterations = 0
    peers = [(ip, "127.0.0.1:%d" % (base + 16 * (r + 1))) for r, ip in enumerate(workers_ip)]
    ps = atp.ParameterServer(o, atp.TransportOptions.kernel_udp(
        address=ps_ip, bind="127.0.0.1:%d" % base, peers=peers))
    workers = []
    try:
        for r, ip in enumerate(workers_ip):
            w = atp.WorkerOptions()
            w.job.job_id = 9
            w.job.layout = atp.RackLayout.uniform(1, 2)
            w.rack, w.worker_in_rack = 0, r
            w.parameter_servers = [atp.DeviceAddress(ps_ip)]
            w.polling.spin_iterations = 0
            w.polling.yield_iterations = 0
            workers.append(atp.Worker(w, atp.TransportOptions.kernel_udp(
                address=ip, bind=peers[r][1], peers=[(ps_ip, "127.0.0.1:%d" % base)])))
    except OSError:
        for w in workers:
            w.close()
        ps.close()
        raise
    return ps, workers


def _one_worker_options():
    w = atp.WorkerOptions()
    w.job.job_id = 1
    w.job.layout = atp.RackLayout.uniform(1, 1)
    w.parameter_servers = [atp.DeviceAddress("10.1.200.1")]
    return w


def test_a_bind_that_fails_raises_oserror_naming_the_address():
    # The OS's errno, as OSError: not absl's folding of it (EADDRNOTAVAIL is
    # ALREADY_EXISTS, which surfaced as a KeyError).
    foreign = "192.0.2.1:30001"  # TEST-NET-1: no host has it
    with pytest.raises(OSError) as e:
        atp.Worker(_one_worker_options(),
                   atp.TransportOptions.kernel_udp(address="10.1.0.1", bind=foreign))
    assert e.value.errno == errno.EADDRNOTAVAIL and foreign in str(e.value), e.value
    assert not isinstance(e.value, KeyError)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        busy = "127.0.0.1:%d" % taken.getsockname()[1]
        with pytest.raises(OSError) as e:
            atp.Worker(_one_worker_options(),
                       atp.TransportOptions.kernel_udp(address="10.1.0.1", bind=busy))
        assert e.value.errno == errno.EADDRINUSE and busy in str(e.value), e.value
        ps = atp.ParameterServerOptions()
        j = atp.ParameterServerJobOptions()
        j.job_id = 1
        j.layout = atp.RackLayout.uniform(1, 1)
        j.workers = [atp.DeviceAddress("10.1.0.1")]
        ps.jobs = [j]
        with pytest.raises(OSError) as e:
            atp.ParameterServer(ps, atp.TransportOptions.kernel_udp(address="10.1.200.1",
                                                                    bind=busy))
        assert e.value.errno == errno.EADDRINUSE and busy in str(e.value), e.value


def test_parameter_server_aggregates_without_a_switch():
    """atp.ParameterServer on kernel UDP, two workers talking to it directly
    (unicast delivery, no switch): the PS does the whole sum."""
    import random
    from atp import local
    # The block is free when picked, but another test running beside this one
    # may bind a port of it before we do: then the next block (seeded, so a
    # run picks the same ones).
    rng = random.Random(5)
    for attempt in range(5):
        try:
            ps, workers = _unicast_job_on(local._pick_port_block(48, rng))
            break
        except OSError as e:
            if e.errno != errno.EADDRINUSE or attempt == 4:
                raise
    with ps:
        inputs = [np.linspace(-1, 1, 1000, dtype=np.float32) * (r + 1) for r in range(2)]
        outputs = [np.zeros(1000, np.float32) for _ in range(2)]
        try:
            for h in [w.push_pull(x, y) for w, x, y in zip(workers, inputs, outputs)]:
                h.wait(30)
        finally:
            for w in workers:
                w.close()
        np.testing.assert_array_equal(outputs[0], exact_sum(inputs))
        np.testing.assert_array_equal(outputs[1], exact_sum(inputs))
        assert ps.stats()["completed"] >= 17  # ceil(1000 / 62) fragments


def test_wait_releases_the_gil(two_workers):
    """A thread blocked in wait() lets this thread run Python and start the
    peer's operation that finishes it (a held GIL would deadlock here)."""
    x = [np.ones(620, np.float32), np.ones(620, np.float32)]
    h = two_workers[0].push_pull(x[0])
    waiter = threading.Thread(target=h.wait, kwargs={"timeout": 30})
    waiter.start()
    two_workers[1].push_pull(x[1]).wait(30)
    waiter.join(30)
    assert not waiter.is_alive() and h.done()
    np.testing.assert_array_equal(x[0], np.full(620, 2.0, np.float32))


def test_a_rank_may_be_as_late_as_the_callers_timeout():
    """The Worker of a hook or backend waits for a late rank as long as the
    caller's timeout, not JobOptions' 10 s stall default."""
    from atp import rendezvous
    options = atp.AtpOptions(local=False, ps_addresses=["10.1.200.1"], address="10.1.0.1",
                             udp_bind="127.0.0.1:30001", timeout_s=1800.0)
    w, _, owner = rendezvous.resolve(None, 0, 2, options)
    assert owner is None
    assert w.job.stall_timeout == 1800.0


def test_layout_and_shift_refuse_what_is_out_of_range():
    layout = atp.RackLayout([2, 2])
    assert layout.rank_of(1, 1) == 3
    for rack, worker in ((5, 0), (100000000, 0), (-1, 0), (0, 2)):
        with pytest.raises(IndexError, match="no worker"):
            layout.rank_of(rack, worker)
    for racks, workers in ((1, 258), (2, -254), (0, 2), (33, 1)):
        with pytest.raises(ValueError, match="RackLayout.uniform"):
            atp.RackLayout.uniform(racks, workers)
    with pytest.raises(ValueError, match="ranks"):
        atp.random_shift(1, 2, 3, 0)
    assert 0 <= atp.random_shift(1, 2, 3, 5) < 5


def test_close_inside_an_on_done_callback_is_refused(two_workers):
    """The callback runs on the I/O thread that closing would wait for: a
    RuntimeError, not a hang; the Worker stays usable."""
    errors = []
    called = threading.Event()

    def done(_):
        try:
            two_workers[0].close()
        except RuntimeError as e:
            errors.append(str(e))
        called.set()
    x = [np.full(62, 1.0, np.float32), np.full(62, 2.0, np.float32)]
    first = two_workers[0].push_pull(x[0])
    first.on_done(done)  # before worker 1 contributes: it runs on an I/O thread
    handles = [first, two_workers[1].push_pull(x[1])]
    for h in handles:
        h.wait(30)
    # Wait callers are woken before the callbacks run: wait for the callback.
    assert called.wait(30)
    assert len(errors) == 1 and "on_done callback" in errors[0]
    assert not two_workers[0].closed


def test_atp_options_are_refused_naming_the_field():
    from atp import rendezvous
    real = dict(local=False, ps_addresses=["10.1.200.1"], address="10.1.0.1",
                udp_bind="127.0.0.1:30001")
    with pytest.raises(ValueError, match="AtpOptions.job_id"):
        rendezvous.resolve(None, 0, 2, atp.AtpOptions(job_id=300, **real))
    # A retransmission floor above the default 1 s ceiling is usable.
    w, _, _ = rendezvous.resolve(None, 0, 2, atp.AtpOptions(rto_floor_s=2.0, **real))
    assert w.job.retransmission_floor == 2.0 and w.job.max_retransmission_timeout >= 2.0


@pytest.mark.parametrize("make, message", [
    (lambda: atp.DeviceAddress("x"), r'^DeviceAddress\.ipv4: IPv4 address "x"'),
    (lambda: atp.DeviceAddress("10.1.0.1", "zz"), r'^DeviceAddress\.mac: MAC address "zz"'),
    (lambda: atp.TransportOptions.kernel_udp(address="x", bind="127.0.0.1:1"),
     r'^TransportOptions\.kernel_udp\.address: IPv4 address "x"'),
    (lambda: atp.TransportOptions.kernel_udp(address="10.1.0.1", bind="x"),
     r'^TransportOptions\.kernel_udp\.bind: "x" is not IP:PORT$'),
    (lambda: atp.TransportOptions.kernel_udp(address="10.1.0.1", bind="127.0.0.1:70000"),
     r'^TransportOptions\.kernel_udp\.bind: "127\.0\.0\.1:70000": the port is not 0\.\.65535$'),
    (lambda: atp.TransportOptions.kernel_udp(address="10.1.0.1", bind="127.0.0.1:1",
                                             gateway="x"),
     r'^TransportOptions\.kernel_udp\.gateway: "x" is not IP:PORT$'),
    (lambda: atp.TransportOptions.kernel_udp(address="10.1.0.1", bind="127.0.0.1:1",
                                             peers=[("10.1.0.2", "127.0.0.1:2"),
                                                    ("y", "127.0.0.1:3")]),
     r'^TransportOptions\.kernel_udp\.peers\[1\]: IPv4 address "y"'),
    (lambda: atp.TransportOptions.loopback(atp.LoopbackWire(), "x"),
     r'^TransportOptions\.loopback\.address: IPv4 address "x"'),
])
def test_address_errors_name_the_field(make, message):
    # As Validate()'s messages do: the path of the option the value was for.
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("field, value, message", [
    ("ps_addresses", ["10.1.200.1", "x"], r'^AtpOptions\.ps_addresses\[1\]: IPv4 address "x"'),
    ("ps_addresses", [], r"^AtpOptions\.ps_addresses: "),
    ("address", "x", r'^AtpOptions\.address: IPv4 address "x"'),
    ("udp_bind", "x", r'^AtpOptions\.udp_bind: "x" is not IP:PORT$'),
    ("udp_gateway", "127.0.0.1", r'^AtpOptions\.udp_gateway: "127\.0\.0\.1" is not IP:PORT$'),
])
def test_atp_options_address_errors_name_the_field(field, value, message):
    from atp import rendezvous
    real = dict(local=False, ps_addresses=["10.1.200.1"], address="10.1.0.1",
                udp_bind="127.0.0.1:30001")
    real[field] = value
    with pytest.raises(ValueError, match=message):
        rendezvous.resolve(None, 0, 2, atp.AtpOptions(**real))


def test_atp_options_from_the_environment(monkeypatch):
    monkeypatch.setenv("ATP_PS", " 10.1.200.1, 10.1.200.2 ,")
    assert atp.AtpOptions.from_env().ps_addresses == ["10.1.200.1", "10.1.200.2"]
    monkeypatch.setenv("ATP_JOB_ID", "abc")
    with pytest.raises(ValueError, match="ATP_JOB_ID"):
        atp.AtpOptions.from_env()


def test_transport_options_refuse_values_that_would_overflow():
    with pytest.raises(ValueError, match="65535"):
        atp.TransportOptions.kernel_udp(address="10.1.0.1", bind="127.0.0.1:30001", queues=2,
                                        peers=[("10.1.200.1", "127.0.0.1:65535")])
    if atp.transport_available("dpdk"):
        for bad in (float("inf"), float("nan"), 1e30, -1.0):
            with pytest.raises(ValueError, match="link_timeout"):
                atp.TransportOptions.dpdk_memif("10.1.0.1", "@x", link_timeout=bad)
