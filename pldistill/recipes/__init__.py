"""The four methods' training, one module each, behind one interface (``pldistill.recipes.base.Recipe``): what
stages teacher and distill run, through ``registry.get(params.recipe)``. Stages label and evaluate never import
this package: they follow the recipe's spec (pldistill.params.recipes), loading what it names (pldistill.teach.scoring,
pldistill.teach.labelling.label). What each recipe does at each stage:

    stage     augsbert             dse                        trans-encoder              rtt-ensemble
    teacher   members fit on gold  members fit on gold        none (a note)              contrastive sub-models
    label     teacher labels pairs + its logits on gold pairs none (labels in distill)   ensemble embeds sentences
    distill   bi on gold + silver  DSE student (head + enc.)  the cycles                 bi learns the embeddings
    evaluate  Teacher, bi student  Teacher, DSE student       last cycles' cross, bi     the ensemble, bi

It may import every package but ship. Nothing is imported here: a stage that runs one recipe's module depends on
what that module imports.
"""
