"""The bottom of the package: errors, atomic files and hashes, the Parquet schemas, text normalisation and word
tokens, what a run prints, seeds, small maths, the store of finished steps and its keys, the bundled models' specs,
the device and bf16, batches by length, metrics, model cards and the import graph. It imports nothing of pldistill
above it. Nothing is imported here."""
