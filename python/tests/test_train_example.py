"""examples/pytorch/train.py's --compare summary: the comparison with gloo
appears only when gloo ran (--backends without gloo printed `vs gloo nanx`)."""
import importlib.util
import os

import pytest

TRAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                     "pytorch", "train.py")


@pytest.fixture(scope="module")
def train():
    spec = importlib.util.spec_from_file_location("train_example", TRAIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def result(backend, step_time_s, accuracy=95.0):
    atp_totals = {} if backend == "gloo" else {
        "aggregated_in_switch": 40, "aggregated_at_ps": 2, "retransmissions": 0,
        "overflow_fraction": 0.0}
    return {"backend": backend, "world_size": 2, "accuracy": accuracy,
            "losses": [2.0 - 0.1 * i for i in range(20)], "step_time_s": step_time_s,
            "atp_totals": atp_totals, "skip": "none", "skip_rate": 0.0,
            "ranks_identical": True}


def test_without_gloo_there_is_no_comparison(train, capsys):
    assert train.summarize([result("atp-hook", 0.004), result("atp", 0.003)])
    out = capsys.readouterr().out
    assert "gloo" not in out and "nan" not in out and "dloss" not in out, out
    assert "atp-hook" in out and "loss fell, ranks bit-identical: yes" in out, out


def test_with_gloo_each_run_is_compared_with_it(train, capsys):
    assert train.summarize([result("gloo", 0.002), result("atp-hook", 0.003)])
    out = capsys.readouterr().out
    assert "vs gloo" in out and "max dloss" in out and "1.50x" in out, out
    assert "nan" not in out, out
    assert "within 0.5 points of gloo's: yes" in out, out
    # Unskipped accuracy 2 points below gloo's fails the comparison.
    assert not train.summarize([result("gloo", 0.002), result("atp", 0.003, accuracy=93.0)])
