"""Pipeline stages: one module per stage, each a function (typed params + paths -> report) and a CLI."""
