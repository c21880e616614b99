"""embed: embedding distillation (pldistill.students.embedding). The teacher (or the bi-encoder embed.teacher names)
embeds the sentences once (data/embed/teacher.parquet, a versioned artifact), and the student (student.model,
student.layers) learns those embeddings for embed.epochs; stage distill then starts from models/embed. With
embed.epochs 0, or a recipe that distils in its own way (trans-encoder, rtt-ensemble), it writes notes and the
student starts from student.model."""

from __future__ import annotations

import time
from pathlib import Path

from pldistill.base import cards, schemas
from pldistill.base.device import peak_rss_mb
from pldistill.base.io import write_csv_rows, write_note_dir, write_report
from pldistill.base.metrics import split_scores
from pldistill.base.seeding import seed_all
from pldistill.data.datasets import gold_dir
from pldistill.models.encoders import BiEncoder
from pldistill.params.config import Params, load_params
from pldistill.params.recipes import SPECS
from pldistill.run.runtime import main
from pldistill.students import embedding
from pldistill.students.cut import resolve, start_directions
from pldistill.teach.teachers import Teacher
from pldistill.train.stage_training import TRAINING

PROJECTED = {"none": "", "pca": " (teacher projected by PCA)",
             "start": " (teacher projected by the static start's PCA directions)"}


def skipped(params: Params) -> str | None:
    """Why stage embed does nothing in this run, or None."""
    if params.embed.epochs == 0:
        return "embedding distillation is off (embed.epochs 0): the student starts from student.model"
    if not SPECS[params.recipe].embed_start:
        starts = [name for name, spec in SPECS.items() if spec.embed_start]
        return (f"recipe {params.recipe} does not start its student from stage embed (its own distillation runs in "
                f"stage distill); embedding distillation applies to {' and '.join(starts)}")
    if embed_teacher(params) is None and all(m.kind == "cross" for m in params.teacher.ensemble):
        return ("every teacher member is a cross-encoder, which scores pairs and embeds no sentence, so there are no "
                "embeddings to learn: the student starts from student.model (name a bi-encoder in embed.teacher, "
                "e.g. the student's own whole model, or add one to teacher.members, or set embed.epochs to 0 to say "
                "so)")
    return None


def embed_teacher(params: Params) -> str | None:
    """embed.teacher resolved: ``auto`` is a cut student's own whole model (student.model: the space it was cut
    from, learned fastest; docs/fast-student.md), a static student's transformer (static.model), and otherwise the
    stage teacher's bi-encoders (None)."""
    spec = params.embed.teacher
    if spec == "auto" and params.student.kind == "static":
        # resolved (pldistill.students.cut.resolve): the transformer the static start came from
        return params.static.model
    if spec == "auto":
        return params.student.model if params.student.layers is not None else None
    return spec


def _embedder(params: Params, teacher: Path) -> tuple[list[BiEncoder], str, str]:
    """Whose embeddings the student learns: the stage teacher's bi-encoder members, or embed.teacher. Returns the
    models, the key their embeddings are stored under (kind, spec and weights' hash) and a line for the card."""
    spec = embed_teacher(params)
    if spec is None:
        tutor = Teacher.load(teacher, params.teacher.max_length)
        return embedding.bi_members(tutor), tutor.labeller(teacher), " + ".join(m.describe for m in tutor.members)
    tp = params.teacher  # its length and remote-code switch: a teacher's, as the stage teacher's members (auto, the
    # student's own model: the student's switch)
    own = params.embed.teacher == "auto"
    model = BiEncoder.load(spec, tp.max_length, params.student.trust_remote_code if own else tp.trust_remote_code)
    how = ("the model the static start was distilled from" if params.student.kind == "static" else
           "the student's whole model") if own else "embed.teacher"
    return [model], embedding.bi_key(spec, spec), f"bi-encoder {spec} ({how})"


def embed(params: Params, clean: Path, teacher: Path, out: Path, model: Path, report: Path, curve: Path,
          cut: Path | None = None) -> dict:
    """Write the teacher's embeddings (``out``) and the student that learned them (``model``); return the report."""
    params = resolve(params, cut, trains="embed")  # student.layers auto: the layers stage cut chose
    why = skipped(params)
    if why:
        print(f"embed: {why}")
        for d in (out, model):
            write_note_dir(d, why)
        write_csv_rows(curve, ["step", "epoch", "dev_spearman"], [])
        result = {"epochs": params.embed.epochs, "skipped": why}
        write_report(report, result)
        return result
    ep, sp, ev = params.embed, params.student, params.evaluate
    rng, gen = seed_all(params.seed)
    sentences, counts = embedding.gather(ep, clean, params.augment.unicode_form, params.augment.min_chars, rng)
    members, key, described = _embedder(params, teacher)
    t0 = time.perf_counter()
    raw = embedding.teacher_embeddings(members, key, sentences, params.label.batch_size, params.label.bf16)
    encode_seconds = time.perf_counter() - t0
    encode_rss = peak_rss_mb()  # the peak so far: reading, the teacher loaded and encoding (or its store read)
    del members  # the teacher's weights are not needed while the student trains (MPNet: about 420 MB)
    embedding.write_embeddings(out / embedding.TEACHER_FILE, sentences, raw)
    student = BiEncoder.load(sp.model, sp.max_length, sp.trust_remote_code, sp.layers)
    width = int(raw.shape[1])
    dev = schemas.read(gold_dir(params, clean) / "dev.parquet", schemas.PAIRS)
    scored = {s: schemas.read(clean / f"{s}.parquet", schemas.PAIRS) for s in ("dev", "test")}
    start = split_scores(student, scored, ev)
    # a static start reduced by PCA, learning its own transformer: the targets take the start's directions
    directions = start_directions(cut) if sp.kind == "static" and ep.teacher == "auto" else None
    target, projection = embedding.targets(raw, student.dim, ep, directions)
    del raw  # a projected target is a new matrix: the teacher's own (n, width) is not held beside it
    res = embedding.learn(student, sentences, target, dev, ep, ev, gen)
    embedding.write_meta(out / "meta.json", {"teacher": key, "width": width,
                                             "sentences": counts, "projection": projection})
    loss = {"mse": "MSE to the teacher's embeddings", "sim": "MSE of the in-batch cosine matrices",
            "mse+sim": f"MSE to the teacher's embeddings + {ep.sim_weight:g} x MSE of the in-batch cosine matrices"}
    student.save(model, cards.card("Embedding-distilled student", "bi", sp.model, {
        "dataset": params.data.name, "sentences": len(sentences),
        "teacher": described,
        "loss": loss[ep.loss] + PROJECTED[projection],
        **cards.fit_facts(res.summary(), ep), "seed": params.seed},
        "A bi-encoder that learned its teacher's sentence embeddings; stage distill trains it on pairs next."))
    res.write_curve(curve)
    result = {"epochs": ep.epochs, "sentences": len(sentences), "corpus": ep.corpus, "by_source": counts,
              "teacher_width": width,
              "projection": projection, "loss": ep.loss, "encode_seconds": round(encode_seconds, 1),
              "start": start, "after": split_scores(student, scored, ev), **res.summary(),
              "encode_peak_rss_mb": encode_rss,
              "peak_rss_mb": peak_rss_mb()}  # of the process so far: the corpus read, embedded and learned
    write_report(report, result)
    return result


if __name__ == "__main__":
    main(embed, ["clean", "teacher", "out", "model", "report", "curve", "cut"], kind=TRAINING,
         load=load_params)
