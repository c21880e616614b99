"""benchmarks/static_order.py: each order-aware addition starts as the plain table, and once it has learned
anything it tells a sentence from its tokens reversed, which the plain table cannot."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from static_order import Student, fit, frequent_bigrams  # noqa: E402  (benchmarks/ is scripts, not a package)

SENTENCES = [[1, 2, 3], [3, 2, 1], [1, 2], [4]]  # token ids; the second is the first reversed


def table() -> torch.Tensor:
    return torch.randn(8, 6, generator=torch.Generator().manual_seed(0))


def test_frequent_bigrams_counts_adjacent_pairs_only():
    assert frequent_bigrams([[1, 2, 3], [1, 2], [3, 1]], 2) == {(1, 2): 0}
    assert frequent_bigrams([[1, 2, 3], [1, 2], [3, 1]], 1) == {(1, 2): 0, (2, 3): 1, (3, 1): 2}


def test_every_addition_starts_as_the_plain_table():
    plain = Student(table(), "none", {}, 4)(SENTENCES)
    assert torch.allclose(plain[0], plain[1])  # a bag of tokens: order unread
    for add, bigrams in (("bigrams", frequent_bigrams(SENTENCES, 1)), ("conv", {})):
        torch.testing.assert_close(Student(table(), add, bigrams, 4)(SENTENCES), plain)


def test_a_learned_addition_reads_order():
    bigrams = frequent_bigrams(SENTENCES, 1)
    for add in ("bigrams", "conv"):
        model = Student(table(), add, bigrams if add == "bigrams" else {}, 4)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name != "table.weight":
                    p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
        emb = model(SENTENCES)
        assert not torch.allclose(emb[0], emb[1]), add


def test_fit_keeps_the_start_when_dev_never_improves():
    model = Student(table(), "conv", {}, 4)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    target = torch.randn(4, 6)

    def loss(rows):
        return ((model([SENTENCES[i] for i in rows]) - target[rows]) ** 2).mean()

    best = fit(model, 4, 2, 1, 1e-1, 1e-1, loss, lambda: 1.0, 2, torch.Generator().manual_seed(0))
    assert best == 1.0
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
