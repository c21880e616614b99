"""Classification metrics: partial AUC, the dev-chosen threshold, F1 / accuracy, against brute force."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from pldistill.metrics import best_threshold, classification, partial_auc


def test_partial_auc_limits_and_full_range():
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, 500)
    pred = gold + rng.normal(0, 1, 500)
    assert partial_auc(pred, gold, 1.0) == pytest.approx(roc_auc_score(gold, pred))  # up to fpr 1: plain AUC
    assert partial_auc(gold.astype(float), gold, 0.05) == pytest.approx(1.0)  # a perfect ranking
    assert partial_auc(-gold.astype(float), gold, 0.05) == pytest.approx(0.0)  # every negative first
    assert partial_auc(np.zeros(500), gold, 0.05) == pytest.approx(0.025)  # no ranking: the diagonal, 0.05 / 2


def test_partial_auc_interpolates_at_the_cut():
    # ROC points (0, 0.5), (0.5, 0.5), (0.5, 1), (1, 1): up to fpr 0.05 the curve is tpr 0.5 flat
    gold = np.array([1, 0, 1, 0])
    pred = np.array([4.0, 3.0, 2.9, 1.0])
    assert partial_auc(pred, gold, 0.05) == pytest.approx(0.5)


def test_best_threshold_maximises_f1_by_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(300):
        n = int(rng.integers(2, 25))
        gold, pred = rng.integers(0, 2, n), np.round(rng.random(n), 1)  # ties on purpose

        def f1(t, pred=pred, gold=gold):
            hard = pred >= t
            denom = hard.sum() + gold.sum()
            return 2 * (hard & (gold == 1)).sum() / denom if denom else 0.0

        t = best_threshold(pred, gold)
        assert t in pred and f1(t) == pytest.approx(max(f1(x) for x in np.unique(pred)))


def test_classification_at_a_threshold():
    gold = [1, 1, 0, 0, 1]
    pred = [0.9, 0.4, 0.6, 0.1, 0.8]
    m = classification(pred, gold, threshold=0.5)  # predicted 1, 0, 1, 0, 1: tp 2, fp 1, fn 1
    assert m["f1"] == pytest.approx(round(2 * 2 / (3 + 3) * 100, 2)) and m["accuracy"] == 60.0
    assert m["auc"] == pytest.approx(round(roc_auc_score(gold, pred) * 100, 2))
    assert set(m) == {"auc", "auc@0.05", "f1", "accuracy"}
    majority = classification([1.0] * 5, gold, 0.5)
    assert majority["auc"] == 50.0 and majority["accuracy"] == 60.0 and majority["f1"] == 75.0
