"""pldistill: pseudo-label distillation for sentence-pair models (library behind stages/)."""

__version__ = "0.11.0"  # the package version (pyproject reads it); model cards name it
