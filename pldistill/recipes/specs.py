"""Every recipe's spec (pldistill.recipes.spec), by name: its params module's ``SPEC``. Light: params modules only,
no recipe's code, so pldistill.config imports it."""

from __future__ import annotations

from collections.abc import Callable

from pldistill.recipes import augsbert_params, dse_params, ensemble_params, trans_params
from pldistill.recipes.spec import RecipeSpec

SPECS: dict[str, RecipeSpec] = {m.SPEC.name: m.SPEC for m in (augsbert_params, dse_params, trans_params,
                                                                ensemble_params)}


def named(test: Callable[[RecipeSpec], object]) -> str:
    """The recipes whose spec passes ``test``, as a message lists them ("augsbert and dse")."""
    return " and ".join(name for name, spec in SPECS.items() if test(spec))
