"""Every loss of the project, one concept per file, each an ``nn.Module`` on sentence-transformers' contract exactly
(pldistill.train.losses.base: ``loss(sentence_features, labels)``, the model it trains held as ``loss.model``): cosine
MSE, CoSENT and soft BCE for pairs; DSE's head and logit term; the embedding step's MSE and cosine matrix;
SimCSE's InfoNCE; the RTT ensemble's MAE + InfoNCE. ``pair.pair_loss`` is the registry a training section's
``loss`` key names. Nothing is imported here: a stage that trains by one loss depends on that loss alone."""
