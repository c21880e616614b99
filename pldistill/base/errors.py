"""Every error a stage reports as a clear message (pldistill.run.runtime) instead of a traceback, in one module at the
bottom of the import graph: catching one needs no import of the code that raises it, so a data stage's command
does not depend on the training code. Each module that raises one re-exports it under its old name."""

from __future__ import annotations


class ConfigError(ValueError):
    """params.yaml is missing, unreadable or invalid; the message names the key."""


class DataError(ValueError):
    """A data source cannot be used at all (missing, wrong format, no valid rows)."""


class SchemaError(ValueError):
    """An artifact does not match the schema the next stage expects."""


class WriteError(OSError):
    """A pipeline file could not be written (disk full, read-only file system); nothing was put in its place."""


class ModelError(ValueError):
    """A model spec cannot be resolved or its weights fail a check."""


class RTTError(ValueError):
    """Round-trip translation cannot run as configured; the message names the setting."""


class SelectionError(ValueError):
    """KDE selection cannot run on these scores; the message says why and what to change."""


# what a stage's command line reports as a message and exit status 1 (pldistill.run.runtime)
REPORTED = (ConfigError, DataError, SchemaError, WriteError, ModelError, RTTError, SelectionError)
