"""Classification metrics: partial AUC, the dev-chosen threshold, F1 / accuracy, against brute force; the paired
bootstrap of one model's lead over another."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from pldistill.base import metrics
from pldistill.base.metrics import best_threshold, classification, correlation, paired_gain, partial_auc


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


def _scored(n: int, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    gold = rng.uniform(0, 1, n)
    return gold, gold + rng.normal(0, noise, n)


def test_paired_gain_is_the_lead_with_an_interval_around_it():
    gold, a = _scored(400, 0.2, 1)
    b = gold + np.random.default_rng(2).normal(0, 0.4, 400)  # a noisier model
    gain = paired_gain(a, b, gold, "regression", 500, np.random.default_rng(3))
    lead = correlation(a, gold)["spearman"] - correlation(b, gold)["spearman"]
    assert gain["spearman"] == pytest.approx(lead, abs=0.01) and 0 < gain["low"] < gain["spearman"] < gain["high"]
    # the same generator state gives the same interval; a model against itself leads by 0, with no spread
    assert paired_gain(a, b, gold, "regression", 500, np.random.default_rng(3)) == gain
    assert paired_gain(a, a, gold, "regression", 50, np.random.default_rng(3)) == {"spearman": 0.0, "low": 0.0,
                                                                                  "high": 0.0}
    swapped = paired_gain(b, a, gold, "regression", 500, np.random.default_rng(3))
    assert swapped == {"spearman": -gain["spearman"], "low": -gain["high"], "high": -gain["low"]}


def test_paired_gain_is_narrower_than_the_two_scores_own_spread():
    """Two close models on 96 pairs: each score alone swings by several points over resamples, their lead by
    far less, since both are scored on the same resampled pairs (why eval.json's gain can call a small lead)."""
    gold, a = _scored(96, 0.15, 4)
    b = a + np.random.default_rng(5).normal(0, 0.03, 96)  # nearly a's predictions
    rng = np.random.default_rng(6)
    own = [correlation(a[i], gold[i])["spearman"] for i in rng.integers(0, 96, (300, 96))]
    gain = paired_gain(a, b, gold, "regression", 300, np.random.default_rng(6))
    assert gain["high"] - gain["low"] < (np.percentile(own, 97.5) - np.percentile(own, 2.5)) / 3


def test_paired_gain_of_a_classifier_is_in_auc():
    rng = np.random.default_rng(7)
    gold = rng.integers(0, 2, 300)
    a, b = gold + rng.normal(0, 0.5, 300), gold + rng.normal(0, 2.0, 300)
    gain = paired_gain(a, b, gold, "classification", 200, np.random.default_rng(8))
    lead = 100 * (roc_auc_score(gold, a) - roc_auc_score(gold, b))
    assert set(gain) == {"auc", "low", "high"} and gain["auc"] == pytest.approx(lead, abs=0.02) and gain["low"] > 0


def test_the_vectorised_metrics_are_scipy_s_and_sklearn_s():
    from scipy.stats import spearmanr

    from pldistill.base.metrics import _auc_rows, _spearman_rows
    rng = np.random.default_rng(9)
    gold = np.round(rng.uniform(0, 5, (20, 60)))  # ties, as gold scores have
    pred = np.round(gold + rng.normal(0, 1.5, (20, 60)), 1)
    expected = [100 * spearmanr(p, g).statistic for p, g in zip(pred, gold)]
    assert _spearman_rows(pred, gold) == pytest.approx(expected, abs=1e-9)
    labels = (gold > 2).astype(float)
    assert _auc_rows(pred, labels) == pytest.approx([100 * roc_auc_score(g, p) for p, g in zip(pred, labels)])
    assert _spearman_rows(np.ones((1, 5)), gold[:1, :5])[0] == 0 and _auc_rows(pred[:1], np.zeros((1, 60)))[0] == 0


def test_order_free_keeps_each_bag_of_words_and_only_an_order_sensitive_score_moves():
    rng = np.random.default_rng(0)
    s1, s2 = ["the dog bit the man", "a b c d"], ["the man bit the dog", "d c b a"]
    shuffled = metrics.shuffled_words(s1, rng)
    assert [sorted(x.split()) for x in shuffled] == [sorted(x.split()) for x in s1] and shuffled != s1

    def bag(a, b):  # a score of the bags of words alone: shuffles cannot move it
        return np.array([len(set(x.split()) & set(y.split())) for x, y in zip(a, b)], float)

    def first_word(a, b):  # 1 when both sentences start with the same word: an order-sensitive score
        return np.array([float(x.split()[0] == y.split()[0]) for x, y in zip(a, b)])

    np.testing.assert_array_equal(metrics.order_free(bag, s1, s2, 3, rng), bag(s1, s2))
    free = metrics.order_free(first_word, s1, s2, 200, np.random.default_rng(1))
    assert list(first_word(s1, s2)) == [1.0, 0.0]
    # shuffled, they share their first word by chance: (2/5)^2 + 3 (1/5)^2 = 0.28 (the same five words); 4 words: 1/4
    np.testing.assert_allclose(free, [0.28, 0.25], atol=0.08)
    again = metrics.order_free(first_word, s1, s2, 200, np.random.default_rng(1))
    np.testing.assert_array_equal(again, free)  # the same generator, the same shuffles
