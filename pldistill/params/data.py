"""The sections of params.yaml that say what data is read (data, adapt), what every section shares (forbidden
unknown keys, a key left out taking params.yaml's default, a bool refused where a number goes), and the file itself:
read (a YAML mapping, no key given twice), its validation errors described (each bad key, what was found, the nearest
valid key) for any model of its sections. Stage download loads seed, data and adapt alone (DataSections), so an edit
to the other sections' types leaves it cached.

A section model holds types and checks, never a default: params.yaml is the one place a default lives, and
pldistill/params/defaults_data.py (these sections) and pldistill/params/defaults.py (the others) are generated from it
(`python scripts/params_doc.py`). A section fills the keys it is not given from ``params_yaml``, its part of them."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import ClassVar, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from pldistill.base.errors import ConfigError
from pldistill.params.defaults_data import DEFAULTS
from pldistill.params.names import COMPRESSED_SUFFIXES, TABLE_SUFFIXES, format_suffix, registered

PAIR_SPLITS = ("train", "dev", "test")
TASKS = ("regression", "classification")
RETIRED = {"trainer": "every training runs on sentence-transformers' trainers now; delete the key"}  # gone: why


# The values a registry defines (a pldistill.params.names.registered() key each): checked only when ``names``
# holds them.
Names = dict[str, tuple[str, ...]]


def _registered(kind: str, value: str, info: ValidationInfo) -> str:
    """``value`` must be one of the names the registry ``kind`` holds, when the caller handed them over."""
    allowed = (info.context or {}).get(kind)
    return value if allowed is None else _one_of(value, allowed)


def is_table(dataset: str) -> bool:
    """A ``data.dataset`` that names a table by path (else it names a dataset), compressed or not (pairs.csv.gz)."""
    return format_suffix(dataset) in TABLE_SUFFIXES


def _one_of(value: str, allowed: tuple[str, ...]) -> str:
    # Plain str + this check (not Literal) so the message lists the values we accept today.
    if value not in allowed:
        raise ValueError(f"expected one of {', '.join(allowed)}; found {value!r}")
    return value


def _merged(default: dict, given: dict) -> dict:
    """``given`` over ``default``, key by key and section by section."""
    out = dict(default)
    for k, v in given.items():
        out[k] = _merged(default[k], v) if isinstance(v, dict) and isinstance(default.get(k), dict) else v
    return out


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # This section's defaults, as params.yaml holds them (generated: pldistill/defaults*.py), filling the keys it is
    # not given, subsections included. None for a type used at several places (StepParams: trans.cross and trans.bi
    # differ), or a list's item: the section holding it hands its values over whole.
    params_yaml: ClassVar[dict | None] = None

    @model_validator(mode="before")
    @classmethod
    def _defaults_from_params_yaml(cls, raw: object) -> object:
        if not isinstance(raw, dict):
            return raw  # (refused by the model itself)
        return cls._resolved(raw if cls.params_yaml is None else _merged(cls.params_yaml, raw))

    @classmethod
    def _resolved(cls, raw: dict) -> dict:
        """``raw``, every key given or defaulted, with the values that stand for others resolved (none here)."""
        return raw

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, v: object, info: ValidationInfo) -> object:
        # pydantic's lax mode reads true as 1 and false as 0; for a number key that is a typo, not a value
        number = (int, float, int | None, float | None)
        if isinstance(v, bool) and info.field_name and cls.model_fields[info.field_name].annotation in number:
            raise ValueError(f"expected a number; found {v}")
        return v


class SplitParams(_Section):
    dev: float = Field(gt=0, lt=0.5)
    test: float = Field(gt=0, lt=0.5)


# The demo's files (data/demo/README.md): its scored pairs (data.dataset demo) and its plain sentences, which
# embed.corpus auto learns when the demo is read from its own file (data.source null)
DEMO_PAIRS = "data/demo/pairs.tsv"
DEMO_SENTENCES = "data/demo/sentences.txt"


class DataParams(_Section):
    params_yaml = DEFAULTS["data"]
    dataset: str
    source: str | None
    task: str | None
    columns: dict[str, str]
    score_range: tuple[float, float] | None
    split: SplitParams
    max_train: int | None = Field(gt=0)
    max_drop_share: float = Field(ge=0, le=1)  # more rows dropped for one reason stop the run
    split_by: Literal["pair", "sentence"]  # what a table we split keeps on one side
    # pairs without scores for the teacher to label (sample.strategy given): a table path (any score column
    # is never read) | rest: the training pairs max_train left out | null: none
    unscored: str | None

    @field_validator("unscored")
    @classmethod
    def _unscored_source(cls, v: str | None) -> str | None:
        if v is None or v == "rest" or is_table(v):
            return v
        raise ValueError(f"expected rest, null, or a path ending in {', '.join(TABLE_SUFFIXES)} (or .csv.gz and the "
                         f"like); found {v!r}")

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, v: str, info: ValidationInfo) -> str:
        named = (info.context or {}).get("dataset")
        if named is None or v in named or is_table(v):
            return v
        packed = (" (a compressed table is read as one: name what it holds before the compression, e.g. "
                  "pairs.csv.gz)" if v.lower().endswith(COMPRESSED_SUFFIXES) else "")
        raise ValueError(f"expected one of {', '.join(named)} or a path ending in {', '.join(TABLE_SUFFIXES)}; "
                         f"found {v!r}{packed}")

    _known_task = field_validator("task")(lambda v: v if v is None else _one_of(v, TASKS))

    @field_validator("columns")
    @classmethod
    def _known_columns(cls, v: dict[str, str]) -> dict[str, str]:
        allowed = {"sentence1", "sentence2", "score", "split"}
        bad = sorted(set(v) - allowed)
        if bad:
            raise ValueError(
                f"maps our column names to yours; keys must be among {sorted(allowed)}, found {bad}"
            )
        if len(set(v.values())) < len(v):
            raise ValueError(f"maps two of our columns to the same column of yours: {v}")
        return v

    @field_validator("score_range")
    @classmethod
    def _ordered(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        if v is not None and not v[0] < v[1]:
            raise ValueError(f"expected [low, high] with low < high; found {list(v)}")
        return v

    @property
    def name(self) -> str:
        """Folder name under data/raw/: the dataset's name, or a path's file stem."""
        if not is_table(self.dataset):  # a named dataset
            return self.dataset
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(self.dataset).stem) or "table"


class AdaptParams(DataParams):
    """Domain adaptation (recipe augsbert): the source domain's dataset, read like ``data``.

    The teacher (and the source-only baseline, stage gold) learn its gold pairs and are selected on its
    dev set; the teacher labels the target's (``data``) training pairs, scores dropped, and the sampled
    pairs; the student learns those silver labels only. No target label trains or selects a model.
    """

    params_yaml = DEFAULTS["adapt"]
    dataset: str | None  # null: no adaptation

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, v: str | None, info: ValidationInfo) -> str | None:
        return v if v is None else DataParams._known_dataset(v, info)

    @property
    def data(self) -> DataParams | None:
        """The source as a DataParams, or None when there is no adaptation."""
        return None if self.dataset is None else DataParams(**self.model_dump())


# -- params.yaml, the file: read, and its errors described

def _allowed_keys(loc: tuple, model: type[BaseModel]) -> list[str]:
    """The keys allowed beside the last element of ``loc`` (walking the section models from ``model``)."""
    for part in loc[:-1]:
        ann = model.model_fields[part].annotation
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return []
        model = ann
    return list(model.model_fields)


def _keys_named(name: str, model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every dotted key of ``model`` whose last part is ``name`` (a key put in the wrong section)."""
    found = []
    for field, info in model.model_fields.items():
        ann = info.annotation
        if field == name:
            found.append(prefix + field)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            found += _keys_named(name, ann, f"{prefix}{field}.")
    return found


def _closest(loc: tuple, model: type[BaseModel]) -> str:
    """' (did you mean <key>?)' for an unknown key: the nearest spelling here (difflib), else the same name in
    other sections; '' when nothing is close."""
    prefix = "".join(f"{p}." for p in loc[:-1])
    near = difflib.get_close_matches(str(loc[-1]), _allowed_keys(loc, model), n=1)
    if near:
        return f" (did you mean {prefix}{near[0]}?)"
    elsewhere = _keys_named(str(loc[-1]), model)
    more = ", or another" if len(elsewhere) > 3 else ""
    return f" (did you mean {' or '.join(elsewhere[:3])}{more}?)" if elsewhere else ""


def describe(err: ValidationError, path: Path, model: type[BaseModel]) -> str:
    """Every problem of ``err`` (``model`` validated from ``path``): its key, what was found, the nearest key."""
    lines = [f"{path}: {err.error_count()} problem(s) in params"]
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        if (gone := e["type"] == "extra_forbidden" and RETIRED.get(str(e["loc"][-1]))):
            lines.append(f"  - {key}: no longer a key: {gone}")
        elif e["type"] == "extra_forbidden":
            allowed = ", ".join(_allowed_keys(e["loc"], model))
            lines.append(f"  - {key}: unknown key{_closest(e['loc'], model)}; allowed here: {allowed}")
        else:
            msg = e["msg"].removeprefix("Value error, ")
            found = "" if "found" in msg else f" (found {e.get('input')!r})"
            lines.append(f"  - {key}: {msg}{found}")
    return "\n".join(lines)


class _UniqueKeys(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one mapping (plain YAML keeps the last, silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice (first on line {seen[key] + 1}); keep one",
                    key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def read_params(path: Path | str = "params.yaml") -> dict:
    """params.yaml as a mapping, unvalidated; ConfigError when it is missing or not a YAML mapping."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: params file not found (run from the project root)")
    try:
        raw = yaml.load(path.read_text(), Loader=_UniqueKeys)  # a SafeLoader: no arbitrary objects
        if raw is None:
            raise ConfigError(f"{path}: empty (no keys at all); expected the project's params: restore them "
                              f"with git checkout {path.name}")
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of keys at the top level, found {type(raw).__name__}")
    return raw


# -- the sections stage download reads, loaded alone (stage check validates the file whole first, so a
# misspelt key anywhere still stops `dvc repro` before any work)

class DataSections(_Section):
    """seed, data and adapt, as pldistill.params.config.Params holds them; the other sections are not read."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    params_yaml = DEFAULTS
    seed: int = Field(ge=0)
    data: DataParams
    adapt: AdaptParams


def load_data_sections(path: Path | str = "params.yaml") -> DataSections:
    """seed, data and adapt of params.yaml, validated with the registries' names; ConfigError naming every bad key."""
    raw = read_params(path)
    try:
        return DataSections.model_validate(raw, context=registered())
    except ValidationError as err:
        raise ConfigError(describe(err, Path(path), DataSections)) from None
