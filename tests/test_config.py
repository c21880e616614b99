import pytest

from pldistill.base.errors import ConfigError
from pldistill.params import sections as params_base
from pldistill.params.config import load_params, parse_params
from tests.conftest import ROOT


def test_shipped_params_are_valid():
    p = load_params(ROOT / "params.yaml")
    assert p.recipe == "augsbert" and p.cycles == 1 and p.sample.strategy == "bm25"
    assert p.data.name == "demo"


def test_unknown_key_is_named_with_the_closest_and_the_allowed_ones():
    with pytest.raises(ConfigError, match=r"sample\.topk: unknown key \(did you mean sample\.top_k\?\); allowed "
                                          r"here: strategy, top_k"):
        parse_params({"sample": {"topk": 3}})
    with pytest.raises(ConfigError, match=r"cylces: unknown key \(did you mean cycles\?\); allowed here: seed, cycles"):
        parse_params({"cylces": 2})
    with pytest.raises(ConfigError, match=r"student\.lrr: unknown key \(did you mean student\.lr\?\)"):
        parse_params({"student": {"lrr": 1e-4}})
    # a key put in the wrong section: the sections that have it
    wrong_section = r"- top_k: unknown key \(did you mean sample\.top_k or rounds\.top_k\?\); allowed here: seed"
    with pytest.raises(ConfigError, match=wrong_section):
        parse_params({"top_k": 3})
    with pytest.raises(ConfigError, match=r"- xyz: unknown key; allowed here: seed"):  # nothing close: no guess
        parse_params({"xyz": 3})


def test_a_key_given_twice_or_an_empty_file_is_refused(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("sample:\n  top_k: 3\n  strategy: bm25\n  top_k: 5\n")
    with pytest.raises(ConfigError, match=r"params\.yaml: not valid YAML: key 'top_k' is given twice \(first on "
                                          r"line 2\); keep one"):
        load_params(path)
    path.write_text("# all commented out\n")
    with pytest.raises(ConfigError, match=r"params\.yaml: empty \(no keys at all\)"):
        load_params(path)


def test_values_checked_before_any_work():
    cases = {
        "label.bf16: Input should be 'auto', True or False": {"label": {"bf16": "yes"}},
        "seed: Input should be greater than or equal to 0": {"seed": -1},
        "data.task: expected one of regression, classification; found 'binary'": {"data": {"task": "binary"}},
        "teacher.model: expected bundled:<name>": {"teacher": {"model": "bundled:nope"}},
        "data.columns: maps two of our columns to the same column":
            {"data": {"columns": {"sentence1": "q", "sentence2": "q"}}},
    }
    for message, raw in cases.items():
        with pytest.raises(ConfigError) as err:
            parse_params(raw)
        assert message in str(err.value)
        assert "(found" not in str(err.value) or "found '" not in str(err.value).split("(found")[0]


def test_bad_value_names_key_and_allowed_values():
    with pytest.raises(ConfigError, match=r"sample\.strategy: expected one of none, random, kde, bm25, semantic, "
                                          r"given, bm25\+semantic, or several of them .*; found 'bm52'"):
        parse_params({"sample": {"strategy": "bm52"}})
    with pytest.raises(ConfigError, match=r"data\.dataset: expected one of demo, stsb, sickr, mrpc, qqp or a path"):
        parse_params({"data": {"dataset": "imagenet"}})
    with pytest.raises(ConfigError, match=r"teacher\.lr"):
        parse_params({"teacher": {"lr": -1}})


def test_cycles_beyond_one_are_for_augsbert_and_trans_encoder():
    assert parse_params({"cycles": 5}).cycles == 5  # augsbert: the student mines new pairs each later cycle
    for recipe in ("dse", "rtt-ensemble"):
        with pytest.raises(ConfigError, match=f"recipe {recipe} labels once and trains once, so cycles must be 1"):
            parse_params({"recipe": recipe, "cycles": 5})


def test_path_dataset_name_and_columns():
    p = parse_params({"data": {"dataset": "some/dir/My Pairs.csv", "columns": {"sentence1": "q1"}}})
    assert p.data.name == "My_Pairs"
    with pytest.raises(ConfigError, match="data.columns"):
        parse_params({"data": {"columns": {"text": "q1"}}})


def test_unreadable_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_params(tmp_path / "nope.yaml")
    bad = tmp_path / "params.yaml"
    bad.write_text("seed: [1\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_params(bad)
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_params(bad)


def test_extra_evaluation_sets_are_checked():
    ok = parse_params({"evaluate": {"extra": [{"name": "sick", "data": {"dataset": "sickr"}}]}})
    assert ok.evaluate.extra[0].data.dataset == "sickr"
    with pytest.raises(ConfigError, match="evaluate.extra: .*expected distinct names"):
        parse_params({"evaluate": {"extra": [{"name": "a", "data": {"dataset": "stsb"}}] * 2}})
    with pytest.raises(ConfigError, match="evaluate.extra.0.data.dataset: expected one of"):
        parse_params({"evaluate": {"extra": [{"name": "a", "data": {"dataset": "glue"}}]}})
    with pytest.raises(ConfigError, match="evaluate.extra.0.name: expected letters"):
        parse_params({"evaluate": {"extra": [{"name": "a b", "data": {"dataset": "stsb"}}]}})


def test_inference_batch_auto_is_larger_on_a_gpu(monkeypatch):
    import torch

    p = parse_params({"label": {"batch_size": "auto"}})  # also the default
    assert p.label.batch_size == p.evaluate.batch_size == 64  # no CUDA GPU in the tests
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(params_base, "GPU_NODES", (__file__,))  # a GPU's device node: torch is asked
    p = parse_params({})
    assert p.label.batch_size == p.evaluate.batch_size == 512
    assert parse_params({"label": {"batch_size": 32}}).label.batch_size == 32  # a number is kept on any device
    with pytest.raises(ConfigError, match=r"label\.batch_size: expected a whole number of items, or auto.*'big'"):
        parse_params({"label": {"batch_size": "big"}})


def test_every_training_section_inherits_train_and_overrides_a_key_by_holding_it():
    p = parse_params({"train": {"optimizer": "adamw-fused", "bf16": "auto"}, "student": {"optimizer": "adamw"}})
    sections = [p.teacher, *p.teacher.candidates, p.embed, p.trans.cross, p.trans.bi, p.dse, p.ensemble.sub,
                p.ensemble.distill]
    assert {s.optimizer for s in sections} == {"adamw-fused"} and {s.bf16 for s in sections} == {"auto"}
    assert p.student.optimizer == "adamw" and p.student.bf16 == "auto"  # its own key; the rest from train
    # a teacher's own key reaches the candidates that inherit from it, and nothing else
    q = parse_params({"teacher": {"select": "last"}})
    assert {c.select for c in (q.teacher, *q.teacher.candidates)} == {"last"}
    assert q.train.select == q.student.select == q.trans.bi.select == "dev"
    # params.yaml's ensemble sections hold accumulate 1: InfoNCE needs whole batches, whatever train says
    r = parse_params({"train": {"accumulate": 2}})
    assert r.student.accumulate == r.trans.cross.accumulate == 2 and r.ensemble.sub.accumulate == 1


def test_a_bad_train_key_is_named_once_and_a_section_s_own_clash_at_the_section():
    with pytest.raises(ConfigError) as err:
        parse_params({"train": {"optimizer": "sgd"}})
    assert "1 problem(s)" in str(err.value) and "train.optimizer: Input should be 'adamw' or 'adamw-fused'" in str(
        err.value)
    with pytest.raises(ConfigError, match=r"1 problem\(s\)[\s\S]*- dse: bf16 auto and precision bf16 disagree"):
        parse_params({"train": {"precision": "bf16"}, "dse": {"bf16": "auto"}})  # train alone agrees with itself


def test_embed_corpus_auto_learns_the_demos_own_sentences_only():
    """embed.corpus auto: the plain sentences the demo ships, read from its own file; any other data, none."""
    assert parse_params({}).embed.corpus == "data/demo/sentences.txt"
    assert (ROOT / parse_params({}).embed.corpus).is_file()
    assert parse_params({"data": {"dataset": "stsb"}}).embed.corpus is None
    assert parse_params({"data": {"source": "my/pairs.tsv"}}).embed.corpus is None  # another file read as the demo
    assert parse_params({"data": {"dataset": "stsb"}, "embed": {"corpus": "c.txt"}}).embed.corpus == "c.txt"
    assert parse_params({"embed": {"corpus": None}}).embed.corpus is None
    with pytest.raises(ConfigError, match=r"embed\.corpus: .*expected auto, null, a \.txt"):
        parse_params({"embed": {"corpus": "sentences.doc"}})
