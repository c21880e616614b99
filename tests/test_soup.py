"""Weight averages (pldistill.soup): a model soup, the average of several seeds' runs, and WiSE-FT, a trained model
mixed with its start; each kept only where it beats what it averages on dev."""

import types

import pytest
import torch

from pldistill.models.encoders import BiEncoder
from pldistill.params.config import parse_params
from pldistill.train.training import FitResult
from pldistill.train.wrappers import WISE_GRID, average, interpolate, mix_with_start, train_model
from pldistill.train.wrappers import soup as fit_soup
from tests.conftest import make_pairs


def test_average_is_the_mean_of_float_weights_and_keeps_integer_buffers():
    a = {"w": torch.tensor([1.0, 2.0]), "ids": torch.tensor([0, 1])}
    b = {"w": torch.tensor([3.0, 6.0]), "ids": torch.tensor([0, 1])}
    out = average([a, b])
    assert torch.equal(out["w"], torch.tensor([2.0, 4.0])) and torch.equal(out["ids"], a["ids"])
    assert out["ids"].dtype == torch.int64


def _fake_start(weights: dict[int, float], devs: dict[int, float], soup_dev: float):
    """Runs whose module is one weight; the dev scorer reads the soup's score off the averaged weight."""
    def start(seed):
        module = torch.nn.Linear(1, 1, bias=False)
        with torch.no_grad():
            module.weight.fill_(weights[seed])
        res = FitResult(best_dev=devs[seed], best_step=1, steps=2, seconds=0.0)
        return module, types.SimpleNamespace(module=module, finish=lambda: res, dev_score=lambda: soup_dev)
    return start


@pytest.mark.parametrize("soup_dev, kept, weight", [(90.0, "soup", 2.0), (80.0, "seed 2", 3.0)])
def test_the_soup_is_kept_only_where_it_beats_the_best_seed_on_dev(soup_dev, kept, weight):
    start = _fake_start({1: 1.0, 2: 3.0}, {1: 70.0, 2: 85.0}, soup_dev)
    module, res = fit_soup(start, [1, 2])
    assert res.soup["kept"] == kept and res.soup["soup_dev"] == soup_dev
    assert [t["best_dev"] for t in res.soup["trials"]] == [70.0, 85.0]
    assert res.best_dev == max(soup_dev, 85.0)
    assert module.weight.item() == weight  # the last run's module holds what was kept
    with pytest.raises(ValueError, match="two seeds or more"):
        fit_soup(start, [1])


def test_train_model_soup_averages_the_seeds_it_would_train_alone(tiny_model_dir):
    def params(**student):
        return parse_params({"student": {"model": str(tiny_model_dir), "layers": None, "max_length": 32, "lr": 2e-3,
                                         "batch_size": 8, "epochs": 1, "evals_per_epoch": 1, **student},
                             "evaluate": {"bf16": False}})
    train, dev = make_pairs(32), make_pairs(24, offset=100)

    def run(seed, **student):
        p = params(**student)
        return train_model(p.student, p.evaluate, list(train["sentence1"]), list(train["sentence2"]),
                           list(train["score"]), dev, seed, "test")

    (a, ra), (b, rb) = run(7), run(8)
    soup, res = run(7, seeds=2, soup=True)
    assert [t["best_dev"] for t in res.soup["trials"]] == [ra.best_dev, rb.best_dev]
    want = (average([a.module.state_dict(), b.module.state_dict()]) if res.soup["kept"] == "soup" else
            (a if ra.best_dev >= rb.best_dev else b).module.state_dict())
    for k, v in soup.module.state_dict().items():
        assert torch.equal(v, want[k]), k
    assert isinstance(soup, BiEncoder) and "soup" in res.summary()
    with pytest.raises(Exception, match="soup averages the runs of several seeds; found seeds 1"):
        params(soup=True)


def test_interpolate_mixes_float_weights_and_keeps_integer_buffers():
    trained = {"w": torch.tensor([1.0, 2.0]), "ids": torch.tensor([0, 1])}
    start = {"w": torch.tensor([3.0, 6.0]), "ids": torch.tensor([5, 5])}
    out = interpolate(trained, start, 0.25)
    assert torch.allclose(out["w"], torch.tensor([1.5, 3.0])) and torch.equal(out["ids"], trained["ids"])


def _one_weight(value: float) -> torch.nn.Linear:
    module = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        module.weight.fill_(value)
    return module


@pytest.mark.parametrize("peak, kept", [(0.7, 0.3), (0.2, 0.8), (1.0, 0.0), (1.3, 0.0)])
def test_wise_keeps_the_mix_dev_scores_best_and_the_trained_model_on_a_tie_or_a_loss(peak, kept):
    module = _one_weight(1.0)  # trained 1.0, start 0.0: a mix with share a is the weight 1 - a
    start = {"weight": torch.zeros(1, 1)}

    def dev():  # dev peaks where the weight is `peak`
        return round(100 - 10 * (module.weight.item() - peak) ** 2, 4)

    out = mix_with_start(module, start, dev, trained_dev=dev())
    assert out["kept"] == pytest.approx(kept) and list(out["dev"]) == [f"{a:.1f}" for a in WISE_GRID]
    assert module.weight.item() == pytest.approx(1 - kept)
    assert out["best_dev"] == max([out["trained_dev"], *out["dev"].values()])
    if not kept:
        assert module.weight.item() == 1.0  # the trained weights themselves, not a mix at a = 0


def test_wise_refuses_a_start_of_another_shape_naming_the_weights():
    with pytest.raises(ValueError, match="differ in name: \\['other', 'weight'\\]"):
        mix_with_start(_one_weight(1.0), {"other": torch.zeros(1)}, lambda: 0.0, 0.0)


def test_train_model_wise_is_the_trained_model_mixed_with_its_start_at_the_share_dev_chose(tiny_model_dir):
    # a rate that overshoots, and the last step kept: here a mix with the start scores best on dev (a = 0.8)
    p = parse_params({"student": {"model": str(tiny_model_dir), "layers": None, "max_length": 32, "lr": 1e-1,
                                  "select": "last", "batch_size": 8, "epochs": 2, "evals_per_epoch": 1,
                                  "group_by_length": False},  # (the order this overshoot was found with)
                      "evaluate": {"bf16": False}})
    train, dev = make_pairs(32), make_pairs(24, offset=100)

    def run(**kw):
        return train_model(p.student, p.evaluate, list(train["sentence1"]), list(train["sentence2"]),
                           list(train["score"]), dev, 7, "test", **kw)

    (plain, rp), (mixed, rw) = run(), run(wise=True)
    assert rw.wise["kept"] > 0, rw.wise
    start = BiEncoder.load(str(tiny_model_dir), 32).module.state_dict()
    want = interpolate(plain.module.state_dict(), start, rw.wise["kept"])
    for k, v in mixed.module.state_dict().items():
        assert torch.equal(v, want[k]), k
    assert rw.wise["trained_dev"] == rp.best_dev and rw.best_dev == max(rp.best_dev, *rw.wise["dev"].values())
    assert rw.summary()["wise"] == rw.wise and "wise" not in rp.summary()
    with pytest.raises(ValueError, match="WiSE mixes a bi-encoder"):
        run(wise=True, kind="cross")
