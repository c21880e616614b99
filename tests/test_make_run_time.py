"""benchmarks/make_run_time.py: a fresh clone's `make run`, timed per stage, its kernels native or held to AVX2."""

import sys

import pytest
import yaml

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from make_run_time import AVX2, set_params, stage_seconds, table  # benchmarks/ is a folder of scripts


def test_a_stage_runs_from_its_line_to_the_next_stages_and_skipped_stages_count_nothing():
    lines = [(0.5, "Stage 'check' didn't change, skipping\n"), (1.0, "Running stage 'download':\n"),
             (1.2, "> python -m stages.download ...\n"), (4.0, "Running stage 'cut':\n"),
             (9.5, "cut [0, 5]: dev 87.62\n"), (14.25, "Running stage 'evaluate':\n")]
    assert stage_seconds(lines, end=20.0) == {"download": 3.0, "cut": 10.2, "evaluate": 5.8}
    assert stage_seconds([(0.0, "nothing ran\n")], end=3.0) == {}


def test_settings_edit_the_clones_params_and_an_unknown_key_is_refused(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("seed: 42\nembed:\n  variants: auto  # a comment\n  lr: 1.0e-3\n")
    set_params(path, ["embed.variants=1", "seed=43"])
    assert yaml.safe_load(path.read_text()) == {"seed": 43, "embed": {"variants": 1, "lr": 1.0e-3}}
    with pytest.raises(SystemExit, match="has no key embed.varients"):
        set_params(path, ["embed.varients=1"])
    with pytest.raises(SystemExit, match="expected KEY=VALUE"):
        set_params(path, ["embed.variants"])


def test_the_table_gives_the_held_runs_ratio_and_the_total():
    results = {"native": (100.0, {"cut": 10.0, "embed": 50.0}, 0),
               "avx2": (150.0, {"cut": 12.0, "embed": 80.0}, 0)}
    rows = table(results).splitlines()
    assert rows[0] == "| stage | native (s) | avx2 (s) | ratio |"
    assert "| embed | 50.0 | 80.0 | 1.60x |" in rows and rows[-1] == "| **make run** | 100.0 | 150.0 | 1.50x |"
    assert not any("both" in row for row in rows)  # every stage ran in both
    results["avx2"][1]["evaluate"] = 30.0  # skipped in the native run: its inputs matched the lock
    rows = table(results).splitlines()
    assert "| evaluate |  | 30.0 |  |" in rows and "| stages run in both | 60.0 | 92.0 | 1.53x |" in rows
    assert set(AVX2) == {"ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA"}
