"""pldistill.base.device: bf16 "auto" is on only where bf16 runs natively and measures faster, and decides alike in
every stage on one machine."""

import json

import pytest

from pldistill.base import device


@pytest.fixture
def cpu_with_bf16_units(monkeypatch, tmp_path):
    """A CPU whose flags claim native bf16, a fresh store, and a counted probe of the speedup given."""
    monkeypatch.setenv("PLDISTILL_STORE", str(tmp_path))
    monkeypatch.setattr(device.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(device, "native_bf16", lambda: True)
    calls = []

    def probe(speedup):
        monkeypatch.setattr(device, "bf16_speedup", lambda: calls.append(speedup) or speedup)
        device.bf16_auto.cache_clear()

    yield probe, calls, tmp_path / "bf16-auto.json"
    device.bf16_auto.cache_clear()


def test_bf16_units_that_measure_slower_stay_off_and_the_decision_is_kept(cpu_with_bf16_units, capsys, monkeypatch):
    monkeypatch.setenv("PLDISTILL_REPORTS", "1")  # the decision is a detail line
    probe, calls, kept = cpu_with_bf16_units
    probe(0.5)  # the Intel Xeon with avx512_bf16 and no AMX: bf16 at half fp32's speed
    assert device.bf16_auto() is False
    assert "bf16 auto: off" in capsys.readouterr().out
    assert [d["on"] for d in json.loads(kept.read_text())["decisions"]] == [False]
    probe(3.0)  # a later stage on the same machine times it faster: the kept decision stands, unprobed
    assert device.bf16_auto() is False
    assert calls == [0.5]


@pytest.mark.parametrize(("speedup", "on"), [(1.19, False), (device.BF16_MARGIN, True), (2.4, True)])
def test_bf16_auto_needs_the_margin(cpu_with_bf16_units, speedup, on):
    probe, _, _ = cpu_with_bf16_units
    probe(speedup)
    assert device.bf16_auto() is on


def test_a_decision_for_another_machine_or_torch_is_not_reused(cpu_with_bf16_units):
    probe, calls, kept = cpu_with_bf16_units
    kept.write_text(json.dumps({"key": {"cpu": "another", "torch": "0", "threads": 1}, "on": True}))
    probe(0.5)
    assert device.bf16_auto() is False and calls == [0.5]
    assert [d["key"]["cpu"] for d in json.loads(kept.read_text())["decisions"]] == ["another", device.cpu_flags()]


def test_each_thread_count_keeps_its_own_decision(cpu_with_bf16_units, monkeypatch):
    """A test at one thread decides for one thread; the pipeline's decision at two threads stands beside it."""
    probe, calls, kept = cpu_with_bf16_units
    monkeypatch.setattr(device.torch, "get_num_threads", lambda: 2)
    probe(0.5)
    assert device.bf16_auto() is False
    monkeypatch.setattr(device.torch, "get_num_threads", lambda: 1)
    probe(3.0)
    assert device.bf16_auto() is True
    monkeypatch.setattr(device.torch, "get_num_threads", lambda: 2)
    probe(3.0)
    assert device.bf16_auto() is False and calls == [0.5, 3.0]
    assert len(json.loads(kept.read_text())["decisions"]) == 2


def test_no_bf16_units_means_off_without_a_probe(monkeypatch):
    monkeypatch.setattr(device.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(device, "native_bf16", lambda: False)
    monkeypatch.setattr(device, "bf16_speedup", lambda: pytest.fail("probed a CPU without bf16 units"))
    device.bf16_auto.cache_clear()
    try:
        assert device.bf16_auto() is False
    finally:
        device.bf16_auto.cache_clear()


def test_the_probe_times_a_real_matmul():
    assert device.bf16_speedup(rounds=1, calls=1) > 0


def test_the_benchmark_runs_on_a_tiny_model_and_reads_either_kind_of_file(tiny_model_dir, tmp_path, monkeypatch,
                                                                          capsys):
    import sys

    import pandas as pd

    from tests.conftest import ROOT

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bf16_auto  # benchmarks/ is a folder of scripts, not a package

    pd.DataFrame({"sentence": ["a cat sits", "two dogs run", "a cat sits"]}).to_parquet(tmp_path / "emb.parquet")
    pd.DataFrame({"sentence1": ["x y", "p q"], "sentence2": ["x z", "x y"], "score": [1.0, 2.0]}).to_parquet(
        tmp_path / "pairs.parquet")
    assert bf16_auto.sentences(tmp_path / "emb.parquet", 10) == ["a cat sits", "two dogs run"]
    assert bf16_auto.sentences(tmp_path / "pairs.parquet", 10) == ["x y", "p q", "x z"]
    pd.DataFrame({"text": ["a"]}).to_parquet(tmp_path / "bad.parquet")
    with pytest.raises(SystemExit, match="bad.parquet: expected a column sentence"):
        bf16_auto.sentences(tmp_path / "bad.parquet", 10)
    monkeypatch.setattr(sys, "argv", ["bf16_auto.py", "--sentences", str(tmp_path / "emb.parquet"), "--model",
                                      str(tiny_model_dir), "--rounds", "1", "--batch-size", "2"])
    monkeypatch.setattr(bf16_auto, "bf16_speedup", lambda: 0.5)
    bf16_auto.main()
    out = capsys.readouterr().out
    assert "probe: bf16 matmul at 0.50x" in out and '"bf16_speedup_encode"' in out
