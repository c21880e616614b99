"""benchmarks/fast_student.py's params: --fp32 turns off every encoding key whose default is bf16 auto (rows made
on a CPU with native bf16 units then encode, label and score dev as rows made on one without), and only those;
an OUT folder refuses a run that encodes otherwise than the runs that made it; the mutual row's member."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from fast_student import params_for  # benchmarks/ is a folder of scripts, not a package

ENCODING = ("augment.rtt", "sample.semantic", "label", "evaluate")


def bf16(p, dotted: str):
    section = p
    for key in dotted.split("."):
        section = getattr(section, key)
    return section.bf16


def test_fp32_turns_off_every_encoding_bf16_auto():
    default = params_for("Stsbenchmark.tar.gz", "trans-encoder", 43, None)
    fp32 = params_for("Stsbenchmark.tar.gz", "trans-encoder", 43, None, fp32=True)
    assert {k: bf16(default, k) for k in ENCODING} == dict.fromkeys(ENCODING, "auto")
    assert {k: bf16(fp32, k) for k in ENCODING} == dict.fromkeys(ENCODING, False)
    # training keys were fp32 already; nothing else changes
    assert fp32.model_copy(update={k.split(".")[0]: getattr(default, k.split(".")[0]) for k in ENCODING}) == default


def test_mutual_row_adds_the_whole_minilm_as_a_member_and_keeps_the_rest():
    plain = params_for("Stsbenchmark.tar.gz", "trans-encoder", 42, None)
    mutual = params_for("Stsbenchmark.tar.gz", "trans-encoder-mutual", 42, None)
    assert not plain.trans.mutual
    assert [(m.bi, m.cross) for m in mutual.trans.mutual] == [("bundled:all-MiniLM-L6-v2", None)]
    assert mutual.student.layers == (0, 2, 4)  # the row's student is still the cut one
    assert mutual.model_copy(update={"trans": plain.trans}) == plain


def test_an_out_folder_keeps_one_encoding(tmp_path):
    from fast_student import same_encoding

    assert same_encoding(tmp_path, fp32=True, native=True) == "fp32"
    assert same_encoding(tmp_path, fp32=False, native=False) == "fp32"  # no bf16 units: fp32 either way
    with pytest.raises(SystemExit, match="made encoding in fp32; this run encodes in bf16 auto"):
        same_encoding(tmp_path, fp32=False, native=True)  # its folders would be reused as if encoded alike
    assert same_encoding(tmp_path / "other", fp32=False, native=True) == "bf16 auto"
