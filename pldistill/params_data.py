"""The sections of params.yaml that say what data is read (data, adapt), and what every section shares: forbidden
unknown keys, a key left out taking params.yaml's default, a bool refused where a number goes. Stage download loads
these alone (pldistill.sections), so an edit to the other sections' types leaves it cached.

A section model holds types and checks, never a default: params.yaml is the one place a default lives, and
pldistill/defaults_data.py (these sections) and pldistill/defaults.py (the others) are generated from it
(`python scripts/params_doc.py`). A section fills the keys it is not given from ``params_yaml``, its part of them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from pldistill.defaults_data import DEFAULTS

TABLE_SUFFIXES = (".csv", ".tsv", ".jsonl", ".parquet")
PAIR_SPLITS = ("train", "dev", "test")
TASKS = ("regression", "classification")


# The values a registry defines (a pldistill.validate.names() key each): checked only when ``names`` holds them.
Names = dict[str, tuple[str, ...]]


def _registered(kind: str, value: str, info: ValidationInfo) -> str:
    """``value`` must be one of the names the registry ``kind`` holds, when the caller handed them over."""
    allowed = (info.context or {}).get(kind)
    return value if allowed is None else _one_of(value, allowed)


def is_table(dataset: str) -> bool:
    """A ``data.dataset`` that names a table by path (else it names a dataset)."""
    return dataset.lower().endswith(TABLE_SUFFIXES)


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
        if v is None or v == "rest" or v.lower().endswith(TABLE_SUFFIXES):
            return v
        raise ValueError(f"expected rest, null, or a path ending in {', '.join(TABLE_SUFFIXES)}; found {v!r}")

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, v: str, info: ValidationInfo) -> str:
        named = (info.context or {}).get("dataset")
        if named is None or v in named or is_table(v):
            return v
        packed = (" (a compressed table is read as one: name it for what it holds, e.g. pairs.csv)"
                  if v.lower().endswith((".gz", ".bz2", ".xz", ".zip")) else "")
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
