import torch
import torch.nn.functional as F

from pldistill.losses import cosine_mse, soft_bce


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
