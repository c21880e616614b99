"""Batches grouped by length (pldistill.base.batching): the embedding step's sentences, and the teacher's and
student's pairs, cut into batches of similar length, in random order, every row once an epoch."""

import itertools
import random

import pandas as pd
import torch

from pldistill.base.batching import by_length
from pldistill.params.config import parse_params
from pldistill.train.losses.cosine_mse import CosineMSELoss


def test_rows_of_similar_length_share_a_batch_every_row_once_the_short_batch_last():
    rng = random.Random(0)
    lengths = [rng.randint(5, 40) for _ in range(1003)]
    arrange = by_length(lengths, 64, torch.Generator().manual_seed(1))
    order = torch.randperm(1003, generator=torch.Generator().manual_seed(2)).tolist()
    out = arrange(order)
    assert sorted(out) == list(range(1003))
    batches = [out[i : i + 64] for i in range(0, 1003, 64)]
    assert [len(b) for b in batches] == [64] * 15 + [43]
    spans = sorted((min(lengths[j] for j in b), max(lengths[j] for j in b)) for b in batches[:-1])
    assert all(hi <= lo2 for (_, hi), (lo2, _) in itertools.pairwise(spans))  # full batches: no overlap in length
    assert min(lengths[j] for j in batches[-1]) >= max(hi for _, hi in spans)  # the short one: the longest rows
    firsts = [min(lengths[j] for j in b) for b in batches[:-1]]
    assert firsts != sorted(firsts)  # in random order, not a curriculum from short to long
    padded = sum(len(b) * max(lengths[j] for j in b) for b in batches)
    random_padded = sum(len(b) * max(lengths[j] for j in b) for b in (order[i : i + 64] for i in range(0, 1003, 64)))
    assert padded < 0.75 * random_padded and padded / sum(lengths) < 1.1  # random: 1.8x the tokens


def test_the_same_generator_gives_the_same_batches():
    lengths = [i % 17 for i in range(200)]
    order = list(range(200))[::-1]
    a = by_length(lengths, 16, torch.Generator().manual_seed(5))(order)
    b = by_length(lengths, 16, torch.Generator().manual_seed(5))(order)
    c = by_length(lengths, 16, torch.Generator().manual_seed(6))(order)
    assert a == b and a != c


def test_group_by_length_auto_is_on_for_mse_only():
    def grouped(**embed) -> bool:
        return parse_params({"embed": embed}).embed.grouped

    assert grouped() and grouped(loss="mse")
    assert not grouped(loss="sim") and not grouped(loss="mse+sim")  # in-batch cosines: the batch is the lesson
    assert grouped(loss="sim", group_by_length=True) and not grouped(group_by_length=False)


def test_pair_training_groups_by_length_for_the_cosine_loss_of_a_padded_model_only():
    def grouped(padded: bool = True, **student) -> bool:
        return parse_params({"student": {"group_by_length": "auto", **student}}).student.grouped(padded)

    assert grouped() and grouped(loss="cosine")  # MSE of each pair's cosine: a mean over pairs
    assert not grouped(loss="cosent")  # CoSENT orders the scores of a batch's pairs against one another
    assert not grouped(padded=False)  # a static model sums token vectors: no padding to save
    assert grouped(loss="cosent", group_by_length=True) and not grouped(group_by_length=False)
    assert parse_params({}).teacher.grouped() and not parse_params({}).student.grouped()  # the defaults
    teacher = parse_params({"teacher": {"group_by_length": False}}).teacher
    assert not any(c.grouped() for c in teacher.tried)  # the candidates inherit the teacher's setting


def test_a_pair_pads_to_its_longer_sentence_for_a_bi_encoder_and_to_the_pair_for_a_cross_encoder(tiny_model_dir):
    from pldistill.models.encoders import BiEncoder, CrossModel
    from pldistill.train.wrappers import pair_lengths

    s1 = ["a cat", "one two three four five six seven eight", "x"]
    s2 = ["a cat sat on the mat today", "hi", "y z"]
    bi = BiEncoder.load(str(tiny_model_dir), max_length=8)
    own = [len(bi.model.tokenizer(s)["input_ids"]) for s in s1 + s2]
    assert pair_lengths(bi, s1, s2) == [min(8, max(a, b)) for a, b in zip(own[:3], own[3:])] == [8, 8, 4]
    cross = CrossModel.load(str(tiny_model_dir), max_length=12)
    assert pair_lengths(cross, s1, s2) == [len(cross.model.tokenizer(a, b, truncation=True, max_length=12)["input_ids"])
                                           for a, b in zip(s1, s2)]


def test_train_model_feeds_its_loss_batches_of_similar_length(tiny_model_dir, monkeypatch):
    from pldistill.params.train import StudentParams
    from pldistill.train import wrappers

    sizes = [1, 2, 3, 12, 13, 14, 25, 26, 27, 28, 29, 30]
    s1 = [" ".join(["word"] * n) for n in sizes]
    seen: list[list[int]] = []

    class Spying(CosineMSELoss):
        def forward(self, features, target):
            seen.append(sorted((features[0]["attention_mask"].sum(-1) - 2).tolist()))  # words: tokens but CLS, SEP
            return super().forward(features, target)

    monkeypatch.setattr(wrappers, "pair_loss", lambda model, loss: Spying(model.model))
    params = StudentParams(model=str(tiny_model_dir), epochs=2, batch_size=3, lr=1e-3, evals_per_epoch=1,
                           warmup=0.0, patience=None, max_length=64, layers=None, group_by_length="auto")
    dev = parse_params({}).evaluate
    pairs = pd.DataFrame({"sentence1": s1[:4], "sentence2": s1[4:8], "score": [0.1, 0.5, 0.7, 0.9]})
    wrappers.train_model(params, dev, s1, list(s1), [0.5] * 12, pairs, seed=3, desc="t")
    assert len(seen) == 8 and all(b[-1] - b[0] <= 2 for b in seen)  # 4 batches of 3 an epoch: neighbours in length
    assert sorted(n for b in seen[:4] for n in b) == sizes  # every pair once an epoch


def test_the_trainer_cuts_its_batches_from_the_arranged_order_each_epoch():
    """The Trainer's batch sampler (pldistill.train.trainer_parts.batches): a fresh order each epoch, from the Trainer's
    seed and the epoch, grouped by length where lengths are given, the short batch last."""
    from pldistill.train.trainer_parts import batches

    rows = list(range(10))
    lengths = [5, 1, 4, 1, 3, 9, 2, 8, 7, 6]
    sampler = batches(lengths)(rows, batch_size=4, drop_last=False, seed=3)
    epochs = []
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        epochs.append(list(sampler))
    assert len(sampler) == 3
    for epoch in epochs:
        assert [len(b) for b in epoch] == [4, 4, 2] and sorted(r for b in epoch for r in b) == rows
        assert sorted(epoch[2]) == [5, 7]  # the two longest rows (9 and 8 tokens) last
        assert sorted(map(sorted, epoch[:2])) == [[0, 2, 8, 9], [1, 3, 4, 6]]
    again = batches(lengths)(rows, batch_size=4, drop_last=False, seed=3)
    assert list(again) == epochs[0]  # a resumed run cuts the same batches
    plain = batches(None)(rows, batch_size=4, drop_last=False, seed=3)
    first = list(plain)
    plain.set_epoch(1)
    assert sorted(r for b in first for r in b) == rows and [len(b) for b in first] == [4, 4, 2]
    assert list(plain) != first  # each epoch its own order
