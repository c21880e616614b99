"""The scoring side of a teacher: a teacher loaded, calibrated and scored (teachers), stage label by the recipe's spec
(labelling), gold against silver and KDE selection (diagnostics), the rtt-ensemble teacher (ensemble), and what
stage evaluate loads by the recipe's spec (scoring). It may import base, params, run, models and data, never train:
stages label and evaluate import no training code. Nothing is imported here."""
