"""pldistill.verdict: eval.json's gain in words (what `make run` prints after dvc repro)."""

import json
import subprocess
import sys

from pldistill.verdict import verdict


def _result(gold: tuple[float, float, float], teacher: tuple[float, float, float], metric: str = "spearman") -> dict:
    block = lambda lead, low, high: {"test": {metric: lead, "low": low, "high": high}}  # noqa: E731
    return {"gain": {"gold": block(*gold), "teacher": block(*teacher)}}


def test_each_lead_is_called_by_its_interval():
    assert verdict(_result((4.25, 3.11, 5.45), (-1.51, -2.86, -0.35))) == [
        "student against its gold-only baseline: +4.25 test spearman [+3.11, +5.45], ahead, beyond the test pairs' "
        "noise",
        "student against its teacher: -1.51 test spearman [-2.86, -0.35], behind, beyond the test pairs' noise"]
    said = verdict(_result((-0.30, -3.12, 3.19), (0.0, 0.0, 0.0), metric="auc"))
    assert said[0].endswith("-0.30 test auc [-3.12, +3.19], not told apart on these test pairs")
    assert said[1].endswith("not told apart on these test pairs")  # a lead of 0 with no spread: a model against itself


def test_no_gain_no_words(tmp_path):
    assert verdict({"bi": {"test": {"spearman": 80.0}}}) == []  # evaluate.gain_rounds 0
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(_result((1.0, 0.5, 1.5), (-1.0, -2.0, 0.5))))
    done = subprocess.run([sys.executable, "-m", "pldistill.verdict", str(path)], capture_output=True, text=True,
                          check=True)
    assert done.stdout.splitlines() == verdict(_result((1.0, 0.5, 1.5), (-1.0, -2.0, 0.5)))


def test_the_served_export_is_said_with_its_speed_and_interval():
    result = {"bi": {"test": {"spearman": 82.57}},
              "export": {"chosen": "openvino-int8", "openvino-int8": {
                  "test": {"spearman": 82.56}, "speed": 12.26, "speed_low": 12.11, "speed_high": 12.42}}}
    assert verdict(result) == ["served (models/serve): openvino-int8, test spearman 82.56 against the torch "
                               "student's 82.57, 12.26x [12.11, 12.42] the whole start's speed"]
