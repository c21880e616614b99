"""The sections of params.yaml stage download reads (seed, data, adapt), loaded alone: its command then imports
none of the other sections' types (the training ones), so an edit to them leaves it cached. Stage check validates
the file whole first (download depends on its report), so a misspelt key anywhere still stops `dvc repro` before
any work; here the sections read are validated as pldistill.config validates them."""

from __future__ import annotations

from pathlib import Path

from pydantic import ConfigDict, Field, ValidationError

from pldistill.defaults_data import DEFAULTS
from pldistill.errors import ConfigError
from pldistill.names import registered
from pldistill.params_data import AdaptParams, DataParams, _Section
from pldistill.params_file import describe, read_params


class DataSections(_Section):
    """seed, data and adapt, as pldistill.config.Params holds them; the other sections are not read."""

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
