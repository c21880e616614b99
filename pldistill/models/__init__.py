"""Models that score pairs, loaded light (no training code): bi- and cross-encoders (encoders), the DSE model (dse),
the ONNX Runtime and OpenVINO backends (accel) and tokenising ahead (ahead). It may import base and params. Nothing
is imported here."""
