"""The transports, capture and metrics from Python: a whole job (a
ParameterServer and two Workers) over an in-process LoopbackWire, no sockets;
a Worker's packet capture read back as pcap; a Worker's Prometheus metrics
scraped over HTTP; DPDK memif options and the errors of a build without
them."""
import glob
import math
import os
import re
import struct
import urllib.request

import numpy as np
import pytest

import atp
from conftest import exact_sum

JOB = 11
PS_IP = "10.11.200.1"
WORKER_IPS = ["10.11.0.1", "10.11.0.2"]
FRAGMENT_VALUES = 62  # ATP-SPEC: int32 values a fragment carries


def _quiet(polling):
    # Idle I/O threads sleep instead of spinning: this machine is shared.
    polling.spin_iterations = 0
    polling.yield_iterations = 0


def _ps_options():
    o = atp.ParameterServerOptions()
    j = atp.ParameterServerJobOptions()
    j.job_id = JOB
    j.layout = atp.RackLayout.uniform(1, len(WORKER_IPS))
    j.delivery = atp.ParameterDelivery.UNICAST  # no switch on the wire to multicast
    j.workers = [atp.DeviceAddress(ip) for ip in WORKER_IPS]
    o.jobs = [j]
    _quiet(o.polling)
    return o


def _worker_options(rank):
    w = atp.WorkerOptions()
    w.job.job_id = JOB
    w.job.layout = atp.RackLayout.uniform(1, len(WORKER_IPS))
    w.rack, w.worker_in_rack = 0, rank
    w.parameter_servers = [atp.DeviceAddress(PS_IP)]
    _quiet(w.polling)
    return w


class LoopbackJob:
    """A ParameterServer and len(WORKER_IPS) Workers on one LoopbackWire;
    `capture` (atp.CaptureOptions or None) goes on worker 0's transport."""

    def __init__(self, capture=None):
        self.wire = atp.LoopbackWire()
        self.ps = atp.ParameterServer(_ps_options(),
                                      atp.TransportOptions.loopback(self.wire, PS_IP))
        self.workers = []
        for rank, ip in enumerate(WORKER_IPS):
            t = atp.TransportOptions.loopback(self.wire, ip)
            if rank == 0 and capture is not None:
                t.capture = capture
            self.workers.append(atp.Worker(_worker_options(rank), t))

    def push_pull(self, inputs):
        outputs = [np.zeros_like(x) for x in inputs]
        for h in [w.push_pull(x, y) for w, x, y in zip(self.workers, inputs, outputs)]:
            h.wait(30)
        return outputs

    def close(self):
        for w in self.workers:
            w.close()
        self.ps.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _inputs(seed, n):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, n).astype(np.float32) for _ in WORKER_IPS]


def test_a_whole_job_over_loopback_gives_exact_sums():
    assert atp.transport_available("loopback")
    with LoopbackJob() as job:
        for seed, n in [(1, 1), (2, 1000), (3, 62 * 300 + 5)]:
            inputs = _inputs(seed, n)
            for out in job.push_pull(inputs):
                np.testing.assert_array_equal(out, exact_sum(inputs))
        assert job.wire.num_endpoints() == 3
        assert job.wire.stats()["unroutable"] == 0
        assert job.ps.stats()["completed"] >= 1 + 17 + 301  # fragments of the three tensors


def test_loopback_refuses_a_missing_wire_and_a_taken_address():
    with pytest.raises(ValueError, match="wire is None"):
        atp.TransportOptions.loopback(None, "10.11.0.1")
    wire = atp.LoopbackWire()
    with atp.Worker(_worker_options(0), atp.TransportOptions.loopback(wire, WORKER_IPS[0])):
        with pytest.raises(KeyError, match="10.11.0.1"):
            atp.Worker(_worker_options(1), atp.TransportOptions.loopback(wire, WORKER_IPS[0]))


def _pcap_records(path):
    """(link type, [frame lengths]) of a classic pcap file, read by hand:
    a 24-byte global header, then 16-byte record headers."""
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack_from("<I", data, 0)[0]
    assert magic in (0xA1B2C3D4, 0xA1B23C4D), hex(magic)  # micro- or nanosecond pcap
    link_type = struct.unpack_from("<I", data, 20)[0]
    lengths, offset = [], 24
    while offset < len(data):
        _, _, captured, original = struct.unpack_from("<IIII", data, offset)
        assert captured == original
        lengths.append(captured)
        offset += 16 + captured
    assert offset == len(data)
    return link_type, lengths


def test_a_workers_capture_holds_its_frames(tmp_path):
    if not atp.capture_available():
        pytest.skip("this libatp has no libpcap (LIBATP_WITH_PCAP)")
    with pytest.raises(ValueError, match="max_files"):
        atp.CaptureOptions(str(tmp_path), name="w0", max_files=0).validate()
    capture = atp.CaptureOptions(str(tmp_path), name="w0")
    assert capture.enabled and capture.max_files == 4
    with LoopbackJob(capture=capture) as job:
        inputs = _inputs(4, 62 * 40)
        job.push_pull(inputs)
        stats = job.workers[0].stats()
        job.workers[0].close()  # flushes and closes its files
        tx = sorted(glob.glob(os.path.join(tmp_path, "w0-tx-*.pcap")))
        rx = sorted(glob.glob(os.path.join(tmp_path, "w0-rx-*.pcap")))
        assert tx and rx
        frames = {}
        for direction, files in (("tx", tx), ("rx", rx)):
            lengths = []
            for path in files:
                link_type, got = _pcap_records(path)
                assert link_type == 1  # LINKTYPE_ETHERNET
                lengths += got
            assert set(lengths) == {306}  # whole ATP frames (ATP-SPEC section 2)
            frames[direction] = len(lengths)
        # The capture holds every frame counted up to the snapshot, and any
        # that came or went between it and close() (a late status frame from
        # the PS): at least as many, not always exactly.
        assert frames["tx"] >= stats["frames_sent"] >= 40
        assert frames["rx"] >= stats["frames_received"] >= 40


def _scrape(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        return response.read().decode()


def _sample(text, name, job):
    match = re.search(r'^%s\{[^}]*job="%d"[^}]*\} (\S+)$' % (name, job), text, re.M)
    assert match, "no %s in:\n%s" % (name, text[:2000])
    return float(match.group(1))


def test_a_workers_metrics_are_scraped_over_http():
    if not atp.metrics_available():
        pytest.skip("this libatp has no prometheus-cpp (LIBATP_WITH_PROMETHEUS)")
    with LoopbackJob() as job:
        worker = job.workers[0]
        with worker.serve_metrics(port=0, address="127.0.0.1") as metrics:
            assert metrics.port > 0 and not metrics.closed
            assert metrics.url == "http://127.0.0.1:%d/metrics" % metrics.port
            job.push_pull(_inputs(5, 1000))
            stats = worker.stats()
            text = _scrape(metrics.url)
            assert stats["fragments_sent"] == math.ceil(1000 / FRAGMENT_VALUES)
            assert _sample(text, "atp_worker_fragments_sent_total", JOB) == stats["fragments_sent"]
            assert _sample(text, "atp_worker_operations_finished_total", JOB) == 1
        assert metrics.closed
        with pytest.raises(OSError):
            _scrape(metrics.url)
        # A server left open is closed with its Worker (a scrape reads the Worker).
        left_open = job.workers[1].serve_metrics()
        job.workers[1].close()
        assert left_open.closed


def test_dpdk_memif_options_or_a_clear_error():
    if not atp.transport_available("dpdk"):
        with pytest.raises(RuntimeError, match="LIBATP_WITH_DPDK"):
            atp.TransportOptions.dpdk_memif("10.11.0.1", "@atp-test")
        return
    t = atp.TransportOptions.dpdk_memif("10.11.0.1", "@atp-test", role="client", queues=2,
                                         peers=[(PS_IP, 2)])
    assert t.kind == "dpdk"
    t.validate()
    with pytest.raises(ValueError, match="role"):
        atp.TransportOptions.dpdk_memif("10.11.0.1", "@atp-test", role="master")
    with pytest.raises(ValueError, match="socket"):
        atp.TransportOptions.dpdk_memif("10.11.0.1", "/run/a,b.sock")
    # Opening a memif port initialises DPDK's EAL, once per process and with
    # a peer process on the other end of the socket: not in this pytest
    # process. The C++ memif tests (tests/transport) open real ports.
