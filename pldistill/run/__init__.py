"""How a stage command runs: the stage command line (runtime), its entry under torchrun (launch), the first check of
the Python (environment), the warm interpreter's side (handover) and torch.distributed's ranks. It may import base
and params. Nothing is imported here."""
