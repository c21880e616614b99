"""params.yaml as typed, checked data (pydantic), at the bottom of the import graph: ``config`` (``Params``, and the
one way to load and parse them), the sections by what reads them (``data``: seed, data, adapt and the file's reading;
``sections``: augment, sample, label, evaluate, export; ``train``: the training sections; ``recipes``: each recipe's
section and spec), the registries' names (``names``) and the defaults generated from params.yaml. It may import
pldistill.base.errors and nothing else of ours; nothing is imported here."""
