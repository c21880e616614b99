"""DSE student (pldistill/models/dse.py) and its loss: pooling, the head, save/load, cached scoring."""

import math

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

from pldistill.models.dse import DSE, Head, pool
from pldistill.train.losses.dse import DSELoss
from pldistill.train.losses.dse import dse as dse_loss


def test_dse_loss_mixes_teacher_and_gold_by_alpha():
    s = torch.tensor([0.0, 2.0])
    t = torch.tensor([1.0, 1.0])
    gold = torch.tensor([0.8, float("nan")])  # the second pair is silver: no gold label
    got = dse_loss(s, t, gold, alpha=0.25, task="regression")
    first = 0.25 * 1.0 + 0.75 * (0.0 - math.log(0.8 / 0.2)) ** 2  # gold on the logit scale
    assert got.item() == pytest.approx((first + 1.0) / 2)
    got = dse_loss(s, t, torch.tensor([1.0, float("nan")]), alpha=0.5, task="classification")
    assert got.item() == pytest.approx((0.5 * 1.0 + 0.5 * math.log(2) + 1.0) / 2)
    assert dse_loss(s, t, gold, alpha=1.0, task="regression").item() == pytest.approx(1.0)


def test_last4_pooling_leaves_out_cls_and_concatenates_layers():
    torch.manual_seed(0)
    hidden = [torch.randn(2, 4, 3) for _ in range(7)]  # embeddings + 6 layers
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    out = pool(hidden, mask, "last4", cls_first=True)
    assert out.shape == (2, 12)
    torch.testing.assert_close(out[0, :3], hidden[3][0, 1:3].mean(0))  # tokens 1-2: no [CLS], no padding
    torch.testing.assert_close(out[1, 9:], hidden[6][1, 1:].mean(0))
    torch.testing.assert_close(pool(hidden, mask, "cls", True), hidden[6][:, 0])
    torch.testing.assert_close(pool(hidden, mask, "mean", True)[0], hidden[6][0, :3].mean(0))


def test_head_is_order_aware_and_has_no_bias():
    torch.manual_seed(0)
    head = Head(dim=5, hidden=7)
    u, v = torch.randn(3, 5), torch.randn(3, 5)
    assert head(u, v).shape == (3,) and not torch.allclose(head(u, v), head(v, u))
    assert all("bias" not in name for name, _ in head.named_parameters())


def test_student_saves_loads_with_its_head_and_scores_from_cached_embeddings(tiny_model_dir, tmp_path):
    torch.manual_seed(0)
    dse = DSE.create(str(tiny_model_dir), "last4", hidden=16, max_length=32)
    s1, s2 = ["a cat sat on the mat", "rain today"], ["the cat sat", "music is loud tonight"]
    before = dse.logits(s1, s2, bf16=False)
    dse.save(tmp_path / "dse")
    again = DSE.load(tmp_path / "dse")
    assert again.max_length == 32  # scored as it was trained
    np.testing.assert_allclose(again.logits(s1, s2, bf16=False), before, rtol=1e-5, atol=1e-6)
    assert again.pooling == "last4" and again.head.dim == 2 * 32  # the tiny model has only 2 layers

    # One query against cached candidates equals scoring the pairs one by one.
    cands = ["the cat sat", "music is loud tonight", "a dog ran", "bread and butter"]
    emb = again.encode(cands, bf16=False)
    query = again.encode(["a cat sat on the mat"], bf16=False)[0]
    np.testing.assert_allclose(again.score_cached(query, emb, chunk=3),
                               again.logits(["a cat sat on the mat"] * 4, cands, bf16=False), rtol=1e-5, atol=1e-6)
    SentenceTransformer(str(tmp_path / "dse"), device="cpu").encode(["the contract: plain ST loads it"])
    with pytest.raises(FileNotFoundError, match="not a DSE student"):
        DSE.load(tiny_model_dir)


def test_dse_loss_trains_the_head_and_encoder_together(tiny_model_dir):
    torch.manual_seed(0)
    dse = DSE.create(str(tiny_model_dir), "mean", hidden=8, max_length=16)
    fn = DSELoss(dse.st, dse.head, dse.pooling, alpha=0.5, task="regression")
    target = torch.tensor([[2.0, 0.9], [-2.0, float("nan")]])
    loss = fn([dse.st.preprocess(["a cat", "a dog"]), dse.st.preprocess(["the cat", "rain"])], target)
    loss.backward()
    grads = [(n.split(".")[0], p.grad) for n, p in dse.module.named_parameters() if p.grad is not None]
    assert all(torch.isfinite(g).all() for _, g in grads)  # the NaN gold of a silver pair never leaks in
    assert {part for part, g in grads if g.any()} == {"encoder", "head"}


def test_student_fits_the_teacher_logits(tiny_model_dir):
    """A few optimiser steps on eight pairs cut the DSE loss by more than half (the head and encoder learn)."""
    torch.manual_seed(0)
    dse = DSE.create(str(tiny_model_dir), "last4", hidden=16, max_length=16)
    s1 = [f"the cat number {i}" for i in range(8)]
    s2 = [f"a {'cat' if i % 2 else 'dog'} story {i}" for i in range(8)]
    target = torch.tensor([[3.0 if i % 2 else -3.0, float("nan")] for i in range(8)])
    fn = DSELoss(dse.st, dse.head, dse.pooling, alpha=0.5, task="regression")
    features = [dse.st.preprocess(s1), dse.st.preprocess(s2)]  # what the Trainer's collator hands the loss
    opt = torch.optim.AdamW(dse.module.parameters(), lr=3e-3)
    dse.module.train()
    losses_seen = []
    for _ in range(40):
        loss = fn(features, target)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses_seen.append(loss.item())
    assert losses_seen[-1] < 0.5 * losses_seen[0]


def test_a_tokenizer_without_cls_pools_every_token(tiny_model_dir):
    dse = DSE.create(str(tiny_model_dir), "last4", hidden=8, max_length=16)
    with_cls = dse.encode(["a cat sat"], bf16=False)
    dse.st.tokenizer.cls_token = None  # as for a tokenizer that has none (e.g. sentencepiece models)
    assert dse.st.tokenizer.cls_token_id is None
    without = dse.encode(["a cat sat"], bf16=False)
    assert np.isfinite(without).all() and not np.allclose(with_cls, without)  # position 0 now counts
