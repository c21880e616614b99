"""Training: sentence-transformers' trainers with our extensions (training, trainer_parts), seed optimisation, soups
and WiSE-FT (wrappers), checkpoints named by a fingerprint (resume), DVCLive curves (tracking), what a training
stage adds (stage_training), and every loss (losses). It may import base, params, run and models. Nothing is imported
here."""
