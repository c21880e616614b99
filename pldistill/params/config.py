"""One typed configuration, loaded from params.yaml and validated before any heavy work.

Every section is a pydantic model with ``extra="forbid"``: an unknown or misspelt key stops the run
with a message naming the key, and a bad value names the key and what is allowed.

Configuration is plain data at the bottom of the import graph: it imports no registry. The names only a
registry knows (named datasets, sampling strategies, round-trip translation backends) are checked like any other
value, from pldistill.params.names; a recipe's name, from its spec (pldistill.params.recipes.RECIPES). Each registry
holds exactly those (tests/test_recipes.py checks).

The sections live in pldistill.params.data (what every section shares; data, adapt), pldistill.params.sections
(augment, sample, label, evaluate, export), pldistill.params.train (the training sections) and
pldistill.params.recipes (each recipe's own section and its ``RecipeSpec``); import a section from its module. This
module assembles them into ``Params`` (a recipe's section from its spec), checks a run against its recipe's spec (it
names no recipe), and is the one way to load params: ``load_params`` (params.yaml) and ``parse_params`` (a mapping),
each naming a bad key.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field, ValidationError, create_model, field_validator, model_validator

from pldistill.base.errors import ConfigError
from pldistill.params.data import (
    DEMO_SENTENCES,
    AdaptParams,
    DataParams,
    Names,
    _one_of,
    _Section,
    describe,
    read_params,
)
from pldistill.params.defaults import DEFAULTS
from pldistill.params.defaults_data import DEFAULTS as DATA_DEFAULTS
from pldistill.params.names import registered
from pldistill.params.recipes import RECIPES, SPECS, RecipeSpec, named
from pldistill.params.sections import AugmentParams, EvaluateParams, ExportParams, LabelParams, SampleParams
from pldistill.params.train import EmbedParams, SharedStepParams, StaticParams, StepParams, StudentParams, TeacherParams


class _Common(_Section):
    """The sections every recipe shares, before the recipes' own (params.yaml's order)."""

    seed: int = Field(ge=0)
    cycles: int = Field(ge=1)
    recipe: str
    processes: int = Field(ge=1)  # stages gold, teacher, label, distill: processes on torch.distributed
    data: DataParams
    adapt: AdaptParams
    augment: AugmentParams
    sample: SampleParams
    train: SharedStepParams  # inherited by every training section (each a StepParams) that does not hold the key
    teacher: TeacherParams
    label: LabelParams
    student: StudentParams
    embed: EmbedParams
    static: StaticParams


# Each recipe's own section, named and typed by its spec (in SPECS' order), so a recipe's section is a field without
# an edit here
_WithRecipes = create_model("_WithRecipes", __base__=_Common,
                            **{s.section: (s.params, ...) for s in SPECS.values() if s.section is not None})


class Params(_WithRecipes):  # type: ignore[misc,valid-type]  (a base built from SPECS)
    params_yaml: ClassVar[dict] = {**DATA_DEFAULTS, **DEFAULTS}  # params.yaml's order: seed first
    export: ExportParams
    evaluate: EvaluateParams

    _known_recipe = field_validator("recipe")(lambda v: _one_of(v, RECIPES))

    @classmethod
    def _resolved(cls, raw: dict) -> dict:
        train = raw.get("train")
        try:
            SharedStepParams.model_validate(train)
        except ValidationError:
            train = None  # its errors are reported once, at train.<key>, not again in every section inheriting it
        return cls._auto_corpus(cls._auto_strategy(_inherit(raw, train, step_sections(cls))))

    @classmethod
    def _auto_strategy(cls, raw: dict) -> dict:
        # sample.strategy auto: the pairs the user gave (data.unscored) are what the teacher labels (measured on STS-B:
        # the best student of docs/fast-student.md learned them); without any, BM25 pairs of the training sentences
        sample, data = raw["sample"], raw["data"]
        if not isinstance(sample, dict) or not isinstance(data, dict) or sample.get("strategy") != "auto":
            return raw  # (a section that is not a mapping is refused by its own model)
        return {**raw, "sample": {**sample, "strategy": "bm25" if data.get("unscored") is None else "given"}}

    @classmethod
    def _auto_corpus(cls, raw: dict) -> dict:
        # embed.corpus auto: the plain sentences the dataset ships, where it ships some (the demo, read from its own
        # file: data/demo/sentences.txt); else none (docs/fast-student.md: what they add on the demo)
        embed, data = raw.get("embed"), raw.get("data")
        if not isinstance(embed, dict) or not isinstance(data, dict) or embed.get("corpus") != "auto":
            return raw
        own = data.get("dataset") == "demo" and data.get("source") is None
        return {**raw, "embed": {**embed, "corpus": DEMO_SENTENCES if own else None}}

    @model_validator(mode="after")
    def _recipe_rules(self) -> Params:
        self._against(SPECS[self.recipe])  # (an unknown name was refused by the field's validator, before this runs)
        s = self.sample
        if "given" in s.strategy.split("+") and self.data.unscored is None:
            raise ValueError(
                f"sample.strategy {s.strategy} has the teacher label the given pairs of data.unscored, which is "
                "null; set data.unscored to a table of pairs (scores never read) or to rest (the training pairs "
                "data.max_train left out)"
            )
        if s.corpus:
            self._corpus_search()
        return self

    def _corpus_search(self) -> None:
        """sample.corpus needs sentences to add and a strategy that pairs them."""
        s = self.sample
        if self.embed.corpus is None:
            raise ValueError("sample.corpus true pairs the sentences of embed.corpus, which is null here; set "
                             "embed.corpus to a .txt (one sentence a line) or a table with a sentence column")
        if all(part in ("none", "given") for part in s.strategy.split("+")):
            raise ValueError(f"sample.corpus true adds sentences to search, but sample.strategy {s.strategy} searches "
                             "none (given: the pairs the user gave); join a search, e.g. given+bm25 or given+semantic")

    def _against(self, spec: RecipeSpec) -> None:
        """What the recipe allows of the other sections (its spec), then its own rules."""
        r = self.recipe
        if spec.cycles is None and self.cycles != 1:
            runs = "; ".join(f"recipe {s.name}, {s.cycles}" for s in SPECS.values() if s.cycles)
            raise ValueError(f"recipe {r} labels once and trains once, so cycles must be 1; found {self.cycles} "
                             f"(cycles > 1: {runs})")
        if self.student.kind == "static" and not spec.static_student:
            ok = named(lambda s: s.static_student)
            raise ValueError(
                f"student.kind static is a bi-encoder of token vectors, trained by recipe {ok} (stages gold, embed, "
                f"distill); recipe {r} needs a transformer student (its layers, or a cross-encoder side): set "
                f"student.kind to transformer, or recipe to {ok}")
        if self.student.loss != "cosine" and not spec.student_loss:
            raise ValueError(
                f"student.loss {self.student.loss}: recipe {r}'s student learns its own section's loss, so only its "
                f"gold-only baseline would learn this one; it applies to recipe {named(lambda s: s.student_loss)}: "
                f"set student.loss to cosine")
        if self.adapt.dataset is not None and not spec.adapts:
            raise ValueError(
                f"adapt.dataset (domain adaptation) trains an Augmented-SBERT teacher on the source domain; it needs "
                f"recipe {named(lambda s: s.adapts)}, found {r}; set adapt.dataset to null for this recipe")
        if not spec.teacher_members and (self.teacher.members or self.teacher.layers):
            raise ValueError(
                f"recipe {r} uses teacher.model only as a starting point; teacher.members and teacher.layers apply "
                f"to {named(lambda s: s.teacher_members)}: set them to [] and null")
        if self.processes > 1 and spec.not_distributed:
            raise ValueError(
                f"processes: {self.processes} processes run recipes {named(lambda s: not s.not_distributed)} only; "
                f"found recipe {r} ({spec.not_distributed}); set processes to 1")
        spec.rules(self)


def _check_specs() -> None:
    """A recipe's spec as Params can hold it (a programming error, named at import): its section a name no other
    section has, and the keys its ``reads`` name keys of that section."""
    taken = set(_Common.model_fields) | {k for k in Params.__annotations__ if k in Params.model_fields}
    for spec in SPECS.values():
        if spec.section is None:
            if spec.reads:
                raise TypeError(f"recipe {spec.name}: its spec reads keys {dict(spec.reads)} but names no section")
            continue
        if spec.section in taken or spec.params is None:
            raise TypeError(f"recipe {spec.name}: its section {spec.section!r} is another section of params already"
                            if spec.params else f"recipe {spec.name}: its spec names section {spec.section!r} but no "
                            "params model for it")
        taken.add(spec.section)
        bad = [k for keys in spec.reads.values() for k in keys if k not in spec.params.model_fields]
        if bad:
            raise TypeError(f"recipe {spec.name}: its spec's reads name {bad}, which section {spec.section} lacks; "
                            f"its keys: {', '.join(spec.params.model_fields)}")


_check_specs()


def step_sections(model: type[BaseModel], at: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Where the training sections sit: every field of ``model``, section by section, whose type is a StepParams."""
    out = []
    for name, field in model.model_fields.items():
        t = field.annotation
        if isinstance(t, type) and issubclass(t, StepParams):
            out.append((*at, name))
        elif isinstance(t, type) and issubclass(t, BaseModel):
            out += step_sections(t, (*at, name))
    return out


def _inherit(raw: dict, train: object, sections: list[tuple[str, ...]]) -> dict:
    """``raw`` with each training section given every key of section ``train`` it does not hold itself."""
    if not isinstance(train, dict):
        return raw
    out = dict(raw)
    for path in sections:
        parent = out
        for part in path[:-1]:
            if not isinstance(parent.get(part), dict):
                break
            child = parent[part] = dict(parent[part])  # copied: the caller's mapping stays as given
            parent = child
        else:
            if isinstance(parent.get(path[-1]), dict):
                parent[path[-1]] = {**train, **parent[path[-1]]}
    return out


def parse_params(raw: dict, path: Path | str = "params.yaml", names: Names | None = None) -> Params:
    """Validate a params mapping; raise ConfigError naming every bad key. ``names``: the registries' names
    (default: every registry's, pldistill.params.names.registered()); a key whose registry is not among them is
    checked for its type only (``recipe`` is always checked, against pldistill.params.recipes.RECIPES)."""
    try:
        return Params.model_validate(raw, context=registered() if names is None else names)
    except ValidationError as err:
        raise ConfigError(describe(err, Path(path), Params)) from None


def load_params(path: Path | str = "params.yaml", names: Names | None = None) -> Params:
    """params.yaml, validated (``names``: as parse_params). Every stage command loads its params here."""
    return parse_params(read_params(path), path, names)
