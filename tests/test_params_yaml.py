"""params.yaml is the one source of every default: each key the code reads is in it, with its comment; the
parameter models (pldistill/params/config.py and the modules it assembles) hold types and checks, no default, and fill a
key left out from pldistill/defaults*.py, which are generated from params.yaml like docs/parameters.md."""

import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from pldistill.params.config import Params, parse_params, step_sections
from pldistill.params.data import DataParams, DataSections
from pldistill.params.train import EmbedParams, SharedStepParams, StepParams
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
            if not (isinstance(section, StepParams) and name in SharedStepParams.model_fields):  # section train's
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


def test_a_training_section_holds_a_train_key_only_to_override_it():
    """Section train's keys are written once: a training section holds one only where its value must differ (the
    ensemble's InfoNCE needs whole batches, so its sections keep accumulate at 1 whatever train says)."""
    held = {}
    for path in step_sections(Params):
        section = RAW
        for part in path:
            section = section[part]
        held[".".join(path)] = sorted(set(section) & set(SharedStepParams.model_fields))
    assert held.pop("ensemble.sub") == held.pop("ensemble.distill") == ["accumulate"]
    assert held and not any(held.values()), held
    assert set(RAW["train"]) == set(SharedStepParams.model_fields)


def test_params_built_from_nothing_are_params_yaml_s():
    drift = _drift(Params().model_dump(mode="json"), parse_params(RAW).model_dump(mode="json"))
    assert not drift, f"the generated defaults and params.yaml disagree: {drift}"


def test_the_defaults_modules_are_generated_from_params_yaml():
    doc = (ROOT / "docs" / "parameters.md").read_text()
    for path, text in params_doc.generated(TEXT, doc).items():
        assert path.read_text() == text, f"{path.relative_to(ROOT)} is out of date: python scripts/params_doc.py"
    assert set(params_doc.DATA_SECTIONS) == set(DataSections.model_fields)  # what stage download reads


def _models(model: type[BaseModel], seen: set) -> set:
    """``model`` and every section model under it, list items included."""
    seen.add(model)
    for info in model.model_fields.values():
        for t in (info.annotation, *typing.get_args(info.annotation)):
            if isinstance(t, type) and issubclass(t, BaseModel) and t not in seen:
                _models(t, seen)
    return seen


def test_no_section_model_holds_a_default():
    # a default written in a model would be a second source beside params.yaml. A list item's keys are the one
    # exception: params.yaml's lists are empty, so their defaults cannot live there (its comment names them)
    held = sorted(f"{m.__name__}.{name}" for m in _models(Params, set()) for name, info in m.model_fields.items()
                  if not info.is_required())
    assert held == ["MutualModel.cross"], held


def test_a_section_built_alone_takes_params_yaml_s_defaults():
    assert DataParams(dataset="stsb").split.dev == RAW["data"]["split"]["dev"]
    assert EmbedParams(epochs=1).batch_size == RAW["embed"]["batch_size"]
    with pytest.raises(ValidationError, match="batch_size"):  # a type at several places (trans.cross, trans.bi)
        StepParams(epochs=1)  # has no defaults of its own: its section hands its values over whole


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
