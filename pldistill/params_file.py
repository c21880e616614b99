"""params.yaml read (a YAML mapping, no key given twice) and its validation errors described (each bad key, what was
found, the nearest valid key), for any model of its sections: pldistill.config's Params, or the few sections a data
stage reads (pldistill.sections). Imports no section type."""

from __future__ import annotations

import difflib
from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError

from pldistill.errors import ConfigError


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
        if e["type"] == "extra_forbidden":
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
