"""Pipeline stages: one module per stage, each a function (typed params + paths -> report) and a CLI.

Importing this package comes first when a stage runs (`python -m stages.<name>`): it checks that this Python has
the project's packages and, under `make run`, hands the command to the warm interpreter (pldistill.run.environment)."""

from pldistill.run.environment import prepare

prepare()
