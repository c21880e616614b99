import pytest
import torch
import torch.nn.functional as F

from pldistill.losses.cosent import cosent
from pldistill.losses.cosine_mse import cosine_mse
from pldistill.losses.ensemble import embedding_distill, embedding_mae
from pldistill.losses.info_nce import info_nce
from pldistill.losses.soft_bce import soft_bce


def test_cosine_mse_is_zero_at_target_and_positive_elsewhere():
    g = torch.Generator().manual_seed(0)
    u, v = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    cos = F.cosine_similarity(u, v)
    assert cosine_mse(u, v, cos).item() < 1e-12
    assert torch.isclose(cosine_mse(u, v, cos + 0.5), torch.tensor(0.25))


def test_soft_bce_matches_formula_and_is_minimal_at_target():
    logits = torch.tensor([-2.0, 0.0, 3.0])
    target = torch.tensor([0.1, 0.5, 0.9])
    p = torch.sigmoid(logits)
    manual = -(target * p.log() + (1 - target) * (1 - p).log()).mean()
    assert torch.isclose(soft_bce(logits, target), manual)
    at_target = soft_bce(torch.logit(target), target)
    assert at_target < soft_bce(logits, target)


def test_info_nce_is_low_when_each_row_matches_its_partner_only():
    torch.manual_seed(0)
    a = torch.nn.functional.normalize(torch.randn(8, 16), dim=-1)
    matched = info_nce(a, a, temperature=0.05)
    shuffled = info_nce(a, a.roll(1, dims=0), temperature=0.05)
    assert matched.item() < 0.1 < shuffled.item()
    # Temperature 1 on identical rows: cross-entropy of softmax over cosines, computed by hand for row 0.
    sims = a @ a.T
    expected = -torch.log_softmax(sims, dim=1).diag().mean()
    assert info_nce(a, a, 1.0).item() == pytest.approx(expected.item(), rel=1e-5)


def test_embedding_mae_is_the_mean_distance():
    s = torch.zeros(2, 3)
    t = torch.tensor([[3.0, 4.0, 0.0], [0.0, 0.0, 1.0]])
    assert embedding_mae(s, t).item() == pytest.approx((5.0 + 1.0) / 2)


def test_embedding_distill_mixes_mae_and_infonce_of_the_normalised_student():
    g = torch.Generator().manual_seed(0)
    student, teacher = torch.randn(6, 8, generator=g) * 3, F.normalize(torch.randn(6, 8, generator=g), dim=-1)
    s = F.normalize(student, dim=-1)
    want = 0.9 * embedding_mae(s, teacher) + 0.1 * info_nce(s, teacher, 0.3)
    assert torch.isclose(embedding_distill(student, teacher, 0.1, 0.3), want)
    assert embedding_distill(teacher * 5, teacher, 0.0, 0.3).item() < 1e-6  # the norm does not count


def test_cosent_is_log_one_plus_the_sum_over_misordered_pairs():
    # three pairs at cos 0.9, 0.5, 0.1 (u_i against v = e0): targets put pair 1 above 0 above 2
    u = torch.tensor([[0.9, 0.19 ** 0.5], [0.5, 0.75 ** 0.5], [0.1, 0.99 ** 0.5]])
    v = torch.tensor([[1.0, 0.0]] * 3)
    cos = torch.tensor([0.9, 0.5, 0.1])
    target = torch.tensor([0.6, 0.8, 0.2])
    # ordered (i above j): (1, 0), (1, 2), (0, 2); each adds exp(20 (cos_j - cos_i))
    want = torch.log(1 + sum(torch.exp(20 * (cos[j] - cos[i])) for i, j in [(1, 0), (1, 2), (0, 2)]))
    assert torch.isclose(cosent(u, v, target), want, rtol=1e-4)
    # only the targets' order counts; ties add nothing
    assert torch.isclose(cosent(u, v, target ** 3 * 5), want, rtol=1e-4)
    assert cosent(u, v, torch.ones(3)).item() == 0.0
    # rightly ordered by a wide margin: near zero
    assert cosent(u, v, torch.tensor([0.9, 0.5, 0.1])).item() < 1e-3
