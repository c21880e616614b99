"""Speed ratios (pldistill.ship.speed): models timed in short turns against a reference; a fast model's pass repeated
until the clock can measure it; a competing process's added time does not move the figure."""

import numpy as np
import pytest
import torch

from pldistill.ship import speed


class Clock:
    t = 0.0

    def __call__(self) -> float:
        return self.t


class Costs:
    """A scorer whose every pass over the pairs moves the fake clock by ``cost`` seconds."""

    def __init__(self, clock: Clock, cost: float):
        self.clock, self.cost, self.calls = clock, cost, 0

    def score(self, s1, s2, batch_size, bf16, progress=False):
        self.clock.t += self.cost
        self.calls += 1


@pytest.mark.parametrize("min_seconds, passes", [(0.0, 1), (0.5, 32)])
def test_a_fast_model_is_timed_over_enough_passes_and_its_ratio_is_the_cost_ratio(monkeypatch, min_seconds, passes):
    clock = Clock()
    monkeypatch.setattr(speed.time, "perf_counter", clock)
    ref, fast, slow = Costs(clock, 0.25), Costs(clock, 1 / 64), Costs(clock, 0.5)  # exact in binary
    out = speed.ratios(ref, {"fast": fast, "slow": slow}, ["a"] * 8, ["b"] * 8, 4, False, rounds=3,
                       min_seconds=min_seconds, chunk=4)
    assert out["fast"]["speed"] == pytest.approx(16.0) and out["slow"]["speed"] == pytest.approx(0.5)
    assert (out["fast"]["speed_low"], out["fast"]["speed_high"]) == (16.0, 16.0)  # no noise, no width
    assert out["fast"]["passes"] == passes and out["slow"]["passes"] == 1
    assert out["fast"]["turns"] == 3 * 2  # 3 rounds of 2 chunks of 4 pairs
    assert fast.calls == 1 + 3 * 2 * passes  # one warm-up pass, then each turn's
    assert out["fast"]["pairs_per_s"] == pytest.approx(8 / (2 / 64))


class Loaded(Costs):
    """A scorer on a machine another process shares: a turn takes its cost, plus, at random, as much again or more
    (noise only ever adds time)."""

    def __init__(self, clock: Clock, cost: float, rng: np.random.Generator):
        super().__init__(clock, cost)
        self.rng = rng

    def score(self, s1, s2, batch_size, bf16, progress=False):
        self.clock.t += self.cost * (1 + (self.rng.random() < 0.5) * self.rng.uniform(0.5, 2.0))
        self.calls += 1


def test_a_competing_process_slows_turns_at_random_and_the_speed_holds_with_an_interval_around_it(monkeypatch):
    clock, rng = Clock(), np.random.default_rng(0)
    monkeypatch.setattr(speed.time, "perf_counter", clock)
    ref, fast = Loaded(clock, 0.25, rng), Loaded(clock, 0.25 / 6, rng)
    out = speed.ratios(ref, {"fast": fast}, ["a"] * 512, ["b"] * 512, 64, False, rounds=5, chunk=64)["fast"]
    assert out["speed"] == pytest.approx(6.0, rel=0.02)  # a median of the per-turn ratios would wander
    assert out["speed_low"] <= out["speed"] <= out["speed_high"]
    assert out["speed_high"] - out["speed_low"] < 1.0


def test_a_model_may_be_timed_at_its_own_batch_size(monkeypatch):
    clock, sizes = Clock(), []

    class Batched(Costs):
        def score(self, s1, s2, batch_size, bf16, progress=False):
            sizes.append((self.cost, batch_size))
            super().score(s1, s2, batch_size, bf16)

    ref, fast = Batched(clock, 0.25), Batched(clock, 1 / 64)
    monkeypatch.setattr(speed.time, "perf_counter", clock)
    out = speed.ratios(ref, {"fast": fast}, ["a"] * 8, ["b"] * 8, 4, False, rounds=1, batch_sizes={"fast": 1024})
    assert {b for c, b in sizes if c == 0.25} == {4} and {b for c, b in sizes if c == 1 / 64} == {1024}
    assert (out["fast"]["batch_size"], out["fast"]["reference_batch_size"]) == (1024, 4)


def test_models_are_timed_with_the_tokenizers_default_parallelism_and_the_stage_setting_comes_back(monkeypatch):
    seen = []

    class Watch(Costs):
        def score(self, s1, s2, batch_size, bf16, progress=False):
            seen.append(speed.os.environ.get("TOKENIZERS_PARALLELISM"))
            super().score(s1, s2, batch_size, bf16)

    clock = Clock()
    monkeypatch.setattr(speed.time, "perf_counter", clock)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")  # as pldistill.run.runtime sets it for a stage
    speed.ratios(Watch(clock, 0.25), {"m": Watch(clock, 0.5)}, ["a"], ["b"], 4, False, rounds=2)
    assert set(seen) == {"true"} and speed.os.environ["TOKENIZERS_PARALLELISM"] == "false"


def test_with_one_thread_each_model_runs_on_one_core_and_the_threads_come_back(monkeypatch):
    seen = []

    class Watch(Costs):
        def score(self, s1, s2, batch_size, bf16, progress=False):
            seen.append((torch.get_num_threads(), speed.os.environ.get("TOKENIZERS_PARALLELISM")))
            super().score(s1, s2, batch_size, bf16)

    clock, before = Clock(), torch.get_num_threads()
    monkeypatch.setattr(speed.time, "perf_counter", clock)
    speed.ratios(Watch(clock, 0.25), {"m": Watch(clock, 0.5)}, ["a"], ["b"], 4, False, rounds=2, n_threads=1)
    assert set(seen) == {(1, "false")} and torch.get_num_threads() == before


class Keyed(Costs):
    """A scorer that says what its cost depends on."""

    def __init__(self, clock: Clock, cost: float, key: str | None):
        super().__init__(clock, cost)
        self.key = key

    def cost_key(self):
        return self.key


def test_models_with_the_same_cost_key_are_timed_once_and_the_references_twin_is_1(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(speed.time, "perf_counter", clock)
    ref, teacher = Keyed(clock, 0.25, "whole"), Keyed(clock, 0.25, "whole")  # the reference, fine-tuned
    student, gold, start = Keyed(clock, 1 / 16, "cut"), Keyed(clock, 1 / 16, "cut"), Keyed(clock, 1 / 16, "cut")
    other = Keyed(clock, 1 / 16, None)  # no key: always timed
    out = speed.ratios(ref, {"bi": student, "gold": gold, "start": start, "cross": teacher, "other": other},
                       ["a"] * 8, ["b"] * 8, 4, False, rounds=3)
    assert (gold.calls, start.calls, teacher.calls) == (0, 0, 0) and student.calls == other.calls == 4  # 1 + 3 turns
    assert {n: (o["speed"], o.get("timed_as")) for n, o in out.items()} == {
        "bi": (4.0, None), "gold": (4.0, "bi"), "start": (4.0, "bi"), "cross": (1.0, "reference"),
        "other": (4.0, None)}
    assert out["gold"]["pairs_per_s"] == out["bi"]["pairs_per_s"] and out["cross"]["speed_low"] == 1.0
    # the same key at another batch size is another cost
    assert speed.twins({"a": student, "b": gold}, {"a": 4, "b": 8}) == {}


def test_a_cut_and_its_trained_self_share_a_cost_key_and_other_shapes_do_not(tiny_model_dir):
    from pldistill.models.encoders import BiEncoder

    cut = BiEncoder.load(str(tiny_model_dir), 32, layers=[1])
    trained = BiEncoder.load(str(tiny_model_dir), 32, layers=[0])
    with torch.no_grad():
        next(trained.module.parameters()).add_(1.0)  # other weights, the same shapes
    whole, longer = BiEncoder.load(str(tiny_model_dir), 32), BiEncoder.load(str(tiny_model_dir), 64, layers=[1])
    assert cut.cost_key() == trained.cost_key()
    assert len({cut.cost_key(), whole.cost_key(), longer.cost_key()}) == 3
    cut.use_backend("auto")  # torch until a call big enough to choose
    trained.use_backend("auto")
    assert cut.cost_key() == trained.cost_key()
    cut.use_backend("onnx")
    assert cut.cost_key() is None  # chosen per model at its first big call: timed

    from pldistill.teach.teachers import Calibration, Member, Teacher

    def member(model):
        return Member("member-00", "bi", str(tiny_model_dir), False, model, Calibration("linear", (1.1, -0.2)))

    assert Teacher([member(whole)]).cost_key() == BiEncoder.load(str(tiny_model_dir), 32).cost_key()
    assert Teacher([member(whole), member(trained)]).cost_key() is None  # several members: timed
