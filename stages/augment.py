"""augment: clean the gold pairs (normalise text; drop empty, too-short and repeated training pairs) and,
with an RTT backend, paraphrase a corpus by round-trip translation (data/clean/paraphrases.parquet).
Under domain adaptation the source domain's train and dev are cleaned the same way (data/clean/source/)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pldistill.base import cleaning, schemas
from pldistill.base.io import write_note_dir, write_report
from pldistill.data import datasets, rtt
from pldistill.data.datasets import SOURCE_DIR, SPLITS, DataError, check_splits
from pldistill.params.config import Params, load_params
from pldistill.run.runtime import main


def clean_splits(raw: Path, out: Path, params: Params, splits: tuple[str, ...] = SPLITS) -> dict:
    """Clean train (dropping rows, counted by reason); dev and test are normalised but never dropped,
    so their scores stay comparable with published ones."""
    rows_in, rows_out, dropped, frames = {}, {}, {}, {}
    for split in splits:
        df = schemas.read(raw / f"{split}.parquet", schemas.PAIRS)
        rows_in[split] = len(df)
        if split == "train":
            df, counts = cleaning.clean_train(df, params.augment.min_chars, params.augment.unicode_form)
            dropped = dict(counts)
            if df.empty:
                raise DataError(f"{raw / 'train.parquet'}: cleaning dropped every training pair ({dropped}); "
                                f"check the data or lower augment.min_chars")
        else:
            df = cleaning.normalise_pairs(df, params.augment.unicode_form)
        rows_out[split] = len(df)
        frames[split] = df
    # before anything is written: a split cleaning left too small or uniform stops here, not in training
    check_splits(frames, str(raw), f"Cleaning dropped {dropped} from train: lower augment.min_chars, or add pairs")
    for split, df in frames.items():
        schemas.write(out / f"{split}.parquet", df, schemas.PAIRS)
    return {"rows_in": rows_in, "rows_out": rows_out, "dropped": dropped}


def augment(params: Params, raw: Path, out: Path, report: Path) -> dict:
    """Clean the task's pairs (and, under domain adaptation, the source domain's train and dev into
    data/clean/source/); paraphrase the training sentences when an RTT backend is set."""
    result = clean_splits(raw / params.data.name, out, params)
    source = out / SOURCE_DIR
    if params.adapt.data:
        result["adapt"] = clean_splits(raw / SOURCE_DIR / params.adapt.data.name, source, params, ("train", "dev"))
    else:  # always there: later stages list it as a dependency
        write_note_dir(source, "no source domain: adapt.dataset is null, so models learn the task's own gold pairs")
    train = schemas.read(out / "train.parquet", schemas.PAIRS)
    result["unscored"] = clean_given(params, raw / params.data.name, out)
    result["rtt"] = round_trip(params, train, out / schemas.PARAPHRASES_FILE)
    write_report(report, result)
    return result


def clean_given(params: Params, raw: Path, out: Path) -> dict:
    """The given pairs (data.unscored) cleaned like training pairs; gold pairs of any split dropped, counted."""
    file = raw / schemas.UNSCORED_FILE
    absent = params.data.unscored is None and not file.is_file()  # a raw folder made without given pairs
    pairs = datasets.NO_GIVEN if absent else schemas.read(file, schemas.UNSCORED)
    scored = {s: schemas.read(out / f"{s}.parquet", schemas.PAIRS) for s in SPLITS}
    kept, report = datasets.clean_given(pairs, scored, params.augment.min_chars, params.augment.unicode_form)
    datasets.write_given(out / schemas.UNSCORED_FILE, kept)
    return report


def round_trip(params: Params, train: pd.DataFrame, out: Path) -> dict:
    """Clean (and compensate) the corpus, paraphrase it through every pivot language; report counts."""
    rp, form = params.augment.rtt, params.augment.unicode_form
    if rp.backend == "none":
        schemas.write(out, pd.DataFrame(columns=schemas.PARAPHRASES.names), schemas.PARAPHRASES)
        return {"backend": "none"}
    script = rp.script or rtt.script_of(rp.source)
    task = list(dict.fromkeys([*train["sentence1"], *train["sentence2"]]))
    raw = rtt.load_corpus(rp.corpus) if rp.corpus else task
    corpus, dropped = rtt.clean_corpus(raw, script, rp.min_chars, form)
    added = 0
    if rp.corpus and rp.compensate:  # the task's own sentences replace what cleaning took out
        task_clean, _ = rtt.clean_corpus(task, script, rp.min_chars, form)
        corpus, added = rtt.compensate(corpus, task_clean, sum(dropped.values()))
    backend = rtt.BACKENDS[rp.backend](params, script)
    pairs, counts = rtt.paraphrase(corpus, rp.languages, backend, script, rp.min_chars, form)
    counts.update({k: v for k, v in getattr(backend, "counts", {}).items() if v})  # the table's own drops
    schemas.write(out, pairs, schemas.PARAPHRASES)
    return {"backend": rp.backend, "languages": list(rp.languages), "script": script, "corpus_in": len(raw),
            "corpus_dropped": dict(dropped), "compensated": added, "corpus": len(corpus), "paraphrases": len(pairs),
            "by_language": pairs["language"].value_counts().sort_index().to_dict(), "paraphrase_counts": dict(counts)}


if __name__ == "__main__":
    main(augment, ["raw", "out", "report"], load=load_params)
