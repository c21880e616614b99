"""pldistill.base.console: what a run prints (issue 77): one line a stage from its report, details and reports on
request, a hint once, bars only on a terminal."""

import json
import subprocess
import sys

from pldistill.base import console
from tests.conftest import ROOT


def test_each_stage_says_what_it_chose_and_its_figure_in_one_line():
    reports = {name: json.loads((ROOT / "metrics" / f"{name}.json").read_text()) for name in console.LINES
               if name != "evaluate"} | {"evaluate": json.loads((ROOT / "metrics" / "eval.json").read_text())}
    for name, report in reports.items():
        said = console.line(name, report, 12.4, f"metrics/{name}.json")
        assert said.startswith(f"{name}: ") and said.endswith(" (12 s)") and "\n" not in said, said
        assert "done; report in" not in said and len(said) <= 120, said  # every default stage has its own words
    cut = console.line("cut", {"layers": [0, 5], "of": 6, "cuts": 15, "chosen_by": "dev", "dev": 87.62,
                               "whole_dev": 94.66})
    assert cut == "cut: layers [0, 5] of 6, the best of 15 cuts on dev: 87.62 untrained (the whole model 94.66)"
    # a report of a shape the line does not know (another recipe's) still gets a line, naming the report
    assert console.line("distill", {"recipe": "dse"}, None, "metrics/distill.json") == (
        "distill: done; report in metrics/distill.json")


def test_details_only_on_request_and_a_hint_once(capsys, monkeypatch):
    monkeypatch.setattr(console, "_HINTED", set())
    monkeypatch.delenv(console.REPORTS_ENV, raising=False)
    console.detail("cut [0, 1]: dev 82.34")
    for _ in range(3):
        console.hint("bundled:all-mpnet-base-v2", "teacher: candidates with MPNet skipped")
    assert capsys.readouterr().out == "teacher: candidates with MPNet skipped\n"
    monkeypatch.setenv(console.REPORTS_ENV, "1")
    console.detail("cut [0, 1]: dev 82.34")
    assert capsys.readouterr().out == "cut [0, 1]: dev 82.34\n"
    for off in ("0", "", "false"):
        monkeypatch.setenv(console.REPORTS_ENV, off)
        assert not console.reports()


def test_off_a_terminal_a_bar_is_made_whole_but_drawn_nowhere():
    code = ("import sys; from pldistill.base import console; console.bars_on_terminal_only()\n"
            "from tqdm.auto import tqdm\n"
            "bar = tqdm(total=3, desc='train', disable=False)\n"
            "bar.update(3); bar.close(); print(bar.desc)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout == "train\n" and done.stderr == ""  # a pipe, not a terminal: no bar, its desc still there
