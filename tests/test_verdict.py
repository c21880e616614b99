"""pldistill.verdict: eval.json's gain in words (what `make run` prints after dvc repro)."""

import json
import subprocess
import sys

from pldistill.verdict import has_remote, next_steps, verdict


def _result(gold: tuple[float, float, float], teacher: tuple[float, float, float], metric: str = "spearman") -> dict:
    block = lambda lead, low, high: {"test": {metric: lead, "low": low, "high": high}}  # noqa: E731
    return {"gain": {"gold": block(*gold), "teacher": block(*teacher)}}


def test_each_lead_is_called_by_its_interval():
    assert verdict(_result((4.25, 3.11, 5.45), (-1.51, -2.86, -0.35))) == [
        "the student against a model trained on the gold pairs alone: +4.25 test spearman [+3.11, +5.45]: better, "
        "beyond the test pairs' noise",
        "the student against its teacher: -1.51 test spearman [-2.86, -0.35]: worse, beyond the test pairs' noise"]
    said = verdict(_result((-0.30, -3.12, 3.19), (0.0, 0.0, 0.0), metric="auc"))
    assert said[0].endswith("-0.30 test auc [-3.12, +3.19]: too close to tell on these test pairs")
    assert said[1].endswith("too close to tell on these test pairs")  # a lead of 0, no spread: a model against itself


def test_no_gain_no_words(tmp_path):
    assert verdict({"bi": {"test": {"spearman": 80.0}}}) == []  # evaluate.gain_rounds 0
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(_result((1.0, 0.5, 1.5), (-1.0, -2.0, 0.5))))
    done = subprocess.run([sys.executable, "-m", "pldistill.verdict", str(path)], capture_output=True, text=True,
                          check=True)
    said = verdict(_result((1.0, 0.5, 1.5), (-1.0, -2.0, 0.5)))
    assert done.stdout.splitlines() == said + next_steps(has_remote())  # the verdict once, then the next commands


def test_it_ends_with_the_next_commands_and_names_dvc_push_only_with_a_remote(tmp_path):
    assert has_remote(tmp_path) is False
    steps = next_steps(False)
    assert steps[0] == "next:" and "python -m pldistill.score models/serve --table" in steps[1]
    assert "models/serve/README.md" in steps[2] and "make exps" in steps[3] and not any("push" in s for s in steps)
    (tmp_path / ".dvc").mkdir()
    (tmp_path / ".dvc" / "config").write_text('[core]\n    autostage = true\n[\'remote "store"\']\n    url = /x\n')
    assert has_remote(tmp_path) and next_steps(True)[-1].endswith("dvc push")


def test_the_served_export_is_said_with_its_speed_and_interval():
    result = {"bi": {"test": {"spearman": 82.57}},
              "export": {"chosen": "openvino-int8", "openvino-int8": {
                  "test": {"spearman": 82.56}, "speed": 12.26, "speed_low": 12.11, "speed_high": 12.42}}}
    assert verdict(result) == ["served (models/serve): openvino-int8, test spearman 82.56 (the torch student: 82.57), "
                               "12.26x as fast [12.11, 12.42] as the whole model it started from"]
