"""The four methods, one module each, behind one interface (``pldistill.recipes.base.Recipe``).

A stage module reads its inputs, hands them to ``registry.get(params.recipe)`` and writes what it returns;
no stage asks which recipe runs. What each recipe does at each stage:

    stage     augsbert             dse                        trans-encoder              rtt-ensemble
    teacher   members fit on gold  members fit on gold        none (a note)              contrastive sub-models
    label     teacher labels pairs + its logits on gold pairs none (labels in distill)   ensemble embeds sentences
    distill   bi on gold + silver  DSE student (head + enc.)  the cycles                 bi learns the embeddings
    evaluate  Teacher, bi student  Teacher, DSE student       last cycles' cross, bi     the ensemble, bi

The recipes' names live in ``pldistill.names.RECIPES`` (pldistill.validate checks ``recipe`` against them
without importing this package); ``pldistill.recipes.registry.get`` returns a recipe.
"""

from pldistill.names import RECIPES  # noqa: F401  (their one list, at the bottom of the import graph)
