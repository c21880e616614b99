"""pldistill: pseudo-label distillation for sentence-pair models (library behind stages/)."""

__version__ = "0.5.0"
