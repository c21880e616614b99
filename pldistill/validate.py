"""params.yaml checked whole before a stage starts: pldistill.config's types and rules, plus the names the
registries hold (recipes, named datasets, sampling strategies, round-trip translation backends), read from
pldistill.names, so checking params imports none of the code behind them.

config imports no registry; this module hands it the names, so a bad name is reported like any other bad
value: its key, what is allowed, what was found. Stage command lines (pldistill.runtime) load params
through here.
"""

from __future__ import annotations

from pathlib import Path

from pldistill import config
from pldistill import names as registered
from pldistill.config import ConfigError, Params

__all__ = ["ConfigError", "Params", "load_params", "names", "parse_params"]


def names() -> config.Names:
    """Each registry's names, keyed as config's validators ask for them."""
    return registered.registered()


def parse_params(raw: dict, path: Path | str = "params.yaml") -> Params:
    """``raw`` validated, names included; ConfigError naming every bad key."""
    return config.parse_params(raw, path, names())


def load_params(path: Path | str = "params.yaml") -> Params:
    """params.yaml validated, names included."""
    return config.load_params(path, names())
