import numpy as np
import pytest
from scipy.integrate import trapezoid

from pldistill.teach.diagnostics import SelectionError, histogram, kde_select, keep_probability, report


def test_kl_is_near_zero_for_the_same_distribution_and_large_for_a_skewed_one():
    rng = np.random.default_rng(0)
    gold = rng.beta(2, 2, 2000)
    same, _ = report(gold, rng.beta(2, 2, 5000))
    skewed, _ = report(gold, rng.beta(1, 12, 5000))  # random sampling: almost all dissimilar pairs
    assert same["kl_gold_silver"] < 0.02
    assert skewed["kl_gold_silver"] > 1.0
    assert same["js_gold_silver"] < 0.01 < skewed["js_gold_silver"] <= np.log(2)


def test_js_stays_finite_where_kl_explodes():
    rng = np.random.default_rng(5)
    gold = rng.uniform(0, 1, 2000)
    squeezed, _ = report(gold, rng.uniform(0.3, 0.4, 2000))  # a teacher that never leaves [0.3, 0.4]
    assert squeezed["kl_gold_silver"] > 5  # the floor under silver's missing tails dominates
    assert 0.3 < squeezed["js_gold_silver"] < np.log(2)


def test_report_counts_and_density_rows():
    gold, silver = np.array([0.0, 0.05, 0.5, 1.0]), np.array([0.1, 0.2, 0.95])
    summary, rows = report(gold, silver)
    assert summary["silver_pairs"] == 3
    assert summary["histogram"]["gold"] == [2, 0, 0, 0, 0, 1, 0, 0, 0, 1]
    assert summary["histogram"]["silver"] == [0, 1, 1, 0, 0, 0, 0, 0, 0, 1]
    assert len(rows) == 101 and rows[0][0] == 0.0 and rows[-1][0] == 1.0
    integral = trapezoid([r[1] for r in rows], dx=0.01)
    assert 0.5 < integral <= 1.0  # a KDE of 4 points leaks much of its mass past [0, 1]


def test_report_without_silver_has_no_kl():
    summary, rows = report(np.array([0.1, 0.9]), np.array([]))
    assert summary["kl_gold_silver"] is None and summary["silver_pairs"] == 0
    assert all(r[2] == 0 for r in rows)


def test_keep_probability_follows_q_of_s():
    rng = np.random.default_rng(1)
    gold = rng.uniform(0, 1, 4000)
    silver = np.concatenate([rng.uniform(0, 0.5, 9000), rng.uniform(0.5, 1, 1000)])  # 9x denser below 0.5
    q = keep_probability(gold, silver)
    assert np.all((q >= 0) & (q <= 1))
    assert np.median(q[silver > 0.6]) == pytest.approx(1.0)  # gold denser there: keep everything
    assert np.median(q[(silver > 0.05) & (silver < 0.45)]) == pytest.approx(1 / 1.8, rel=0.1)  # 1.0 / 1.8


def test_kde_selection_brings_silver_closer_to_gold():
    rng = np.random.default_rng(2)
    gold = rng.beta(2, 2, 1500)
    # The kept density is min(F_gold, F_silver) renormalised, so a pool covering gold's support (here
    # uniform) comes out close to gold; one with thin tails (below) improves, but only so far.
    pool = rng.uniform(0, 1, 10000)  # (30,000 drew the same conclusions in three times as long)
    keep = kde_select(gold, pool, "regression", rng)
    before = report(gold, pool)[0]["kl_gold_silver"]
    after = report(gold, pool[keep])[0]["kl_gold_silver"]
    assert 0 < keep.sum() < len(pool)
    assert after < 0.03 and after < before / 3, (before, after)
    pool = rng.beta(1, 6, 10000)  # random pairs: almost nothing above 0.5, and selection cannot create it
    keep = kde_select(gold, pool, "regression", rng)
    before, after = report(gold, pool)[0]["kl_gold_silver"], report(gold, pool[keep])[0]["kl_gold_silver"]
    assert after < 0.8 * before, (before, after)


def test_kde_on_scores_that_cannot_be_smoothed_says_what_to_change():
    with pytest.raises(SelectionError,
                       match=r"pool scores cannot be smoothed \(3 score\(s\), 1 distinct.*teacher.epochs"):
        keep_probability(np.linspace(0, 1, 20), np.full(3, 0.5))


def test_kde_selection_handles_a_teacher_squeezed_into_a_sliver():
    gold = np.linspace(0, 1, 50)
    pool = 0.494 + 1e-5 * np.random.default_rng(3).standard_normal(400)  # a barely trained teacher
    q = keep_probability(gold, pool)
    assert q.max() < 0.01  # silver is thousands of times denser there than gold


def test_kde_for_classification_keeps_positives_and_the_gold_ratio_of_negatives():
    rng = np.random.default_rng(4)
    gold = np.array([1.0] * 30 + [0.0] * 60)  # 1 positive : 2 negatives
    pool = np.concatenate([np.full(100, 0.9), np.full(5000, 0.1)])
    keep = kde_select(gold, pool, "classification", rng)
    assert keep[:100].all() and keep[100:].sum() == 200


def test_histogram_includes_one_in_the_last_bin():
    assert histogram(np.array([1.0, 0.0, 0.999]))[-1] == 2
