"""params.yaml is the one source of every default: each key the code reads is in it, with its comment; the
parameter models (pldistill/config.py) hold types and checks with the same values; docs/parameters.md is
generated from it."""

from pathlib import Path

import yaml
from pydantic import BaseModel

from pldistill.config import Params
from pldistill.validate import parse_params
from scripts import params_doc

ROOT = Path(__file__).resolve().parents[1]
TEXT = (ROOT / "params.yaml").read_text()
RAW = yaml.safe_load(TEXT)


def _missing_and_extra(section: BaseModel, raw: dict, path: str = "") -> tuple[list[str], list[str]]:
    """The model's keys params.yaml lacks, and params.yaml's keys the model lacks, section by section."""
    missing, extra = [], [f"{path}{k}" for k in raw if k not in type(section).model_fields]
    for name in type(section).model_fields:
        key, value = f"{path}{name}", getattr(section, name)
        if name not in raw:
            missing.append(key)
        elif isinstance(value, BaseModel):
            m, e = _missing_and_extra(value, raw[name] if isinstance(raw[name], dict) else {}, f"{key}.")
            missing, extra = missing + m, extra + e
    return missing, extra


def _drift(code: object, yml: object, path: str = "") -> list[str]:
    if isinstance(code, dict) and isinstance(yml, dict) and set(code) == set(yml):
        return [d for k in code for d in _drift(code[k], yml[k], f"{path}{k}.")]
    return [] if code == yml else [f"{path.rstrip('.')}: code {code!r}, params.yaml {yml!r}"]


def test_every_key_the_code_reads_is_in_params_yaml():
    missing, extra = _missing_and_extra(Params(), RAW)
    assert not missing, f"add to params.yaml, with a comment: {missing}"
    assert not extra, f"params.yaml keys no model has: {extra}"


def test_the_models_defaults_are_params_yaml_s():
    # a model default that differs from params.yaml would be a second, silent source of defaults
    drift = _drift(Params().model_dump(mode="json"), parse_params(RAW).model_dump(mode="json"))
    assert not drift, f"pldistill/config.py and params.yaml disagree: {drift}"


def test_a_section_given_in_part_keeps_its_own_defaults():
    p = parse_params({"trans": {"cross": {"epochs": 2}, "bi": {"lr": 1e-4}}, "student": {"epochs": 3}})
    assert (p.trans.cross.epochs, p.trans.cross.batch_size, p.trans.cross.max_length) == (2, 32, 64)
    assert (p.trans.bi.lr, p.trans.bi.epochs, p.trans.bi.batch_size) == (1e-4, 10, 128)
    assert (p.student.epochs, p.student.lr, p.student.layers, p.student.keep) == (3, 1e-4, "auto", 2)
    assert p.teacher.epochs == RAW["teacher"]["epochs"]


def test_every_key_has_a_comment():
    bare = [k.path for k in params_doc.keys(TEXT) if k.value and not k.comment]
    assert not bare, f"params.yaml keys without a comment: {bare}"
    assert {k.path for k in params_doc.keys(TEXT) if k.value} >= {"seed", "sample.bm25.k1", "trans.bi.epochs"}


def test_the_parameter_reference_is_generated_from_params_yaml():
    doc = (ROOT / "docs" / "parameters.md").read_text()
    assert params_doc.render(doc, TEXT) == doc, "docs/parameters.md is out of date: python scripts/params_doc.py"
    for k in params_doc.keys(TEXT):
        assert f"| `{k.path}` |" in doc, k.path
