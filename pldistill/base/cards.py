"""Model cards: a README.md in every model the pipeline saves, saying what it is and how it was made.

The card has Hugging Face's YAML front matter (library, base model, tags), so the folder can be pushed
to a hub as it is, and a table of facts a reader needs to trust or reproduce it.
"""

from __future__ import annotations

import yaml

from pldistill import __version__


def card(title: str, kind: str, base: str, facts: dict[str, object], summary: str = "") -> str:
    """A saved model's README.md. ``kind``: bi (a SentenceTransformer) or cross (a CrossEncoder)."""
    return render({"title": title, "kind": kind, "base": base, "facts": facts, "summary": summary})


def fit_facts(summary: dict, sp) -> dict:
    """The training facts every card shows: settings and the checkpoint kept (``summary``: FitResult.summary())."""
    kept = "the best dev score; step 0 is the start" if getattr(sp, "select", "dev") == "dev" else "the end of training"
    facts = {"epochs": sp.epochs, "batch size": sp.batch_size, "learning rate": sp.lr,
             "max length (training)": sp.max_length,
             "kept checkpoint": f"step {summary['best_step']} of {summary['steps']} ({kept})",
             "dev Spearman x100 (selection)": summary["best_dev"]}
    if "precision" in summary:
        facts["mixed precision"] = summary["precision"]
    if getattr(sp, "accumulate", 1) > 1:
        facts["gradient accumulation"] = f"{sp.accumulate} micro-batches a step"
    if so := summary.get("seed_optimisation"):
        facts["seed optimisation"] = (f"{so['seeds']} seeds from {so['trials'][0]['seed']}, each stopped at "
                                      f"{so['stop']:.0%} of training; seed {so['chosen']} (best dev there) finished")
    if soup := summary.get("soup"):
        devs = ", ".join(f"seed {t['seed']} {t['best_dev']}" for t in soup["trials"])
        facts["model soup"] = (f"{soup['seeds']} seeds trained to the end ({devs} dev), their weights averaged "
                               f"({soup['soup_dev']} dev): kept {soup['kept']}")
    if w := summary.get("wise"):
        facts["weights mixed with the start (WiSE-FT)"] = (
            f"(1 - a) trained + a start, a from 0.1 to 0.9 scored on dev (trained {w['trained_dev']}): "
            + (f"kept a = {w['kept']} ({w['best_dev']} dev)" if w["kept"] else "no mix beat the trained model"))
    return facts


def render(c: dict) -> str:
    load = ("from sentence_transformers import CrossEncoder\nmodel = CrossEncoder(path)\n"
            "scores = model.predict([(sentence1, sentence2)])  # sigmoid: similarity in [0, 1]"
            if c["kind"] == "cross" else
            "from sentence_transformers import SentenceTransformer\nmodel = SentenceTransformer(path)\n"
            "emb = model.encode([sentence1, sentence2])  # cosine of the two: their similarity")
    base = c["base"].removeprefix("bundled:")
    front = {"library_name": "sentence-transformers", "base_model": f"sentence-transformers/{base}"
             if c["base"].startswith("bundled:") else base,
             "tags": ["sentence-transformers", "pldistill", "cross-encoder" if c["kind"] == "cross" else "bi-encoder"]}
    rows = "\n".join(f"| {k} | {v} |" for k, v in c["facts"].items())
    return (f"---\n{yaml.safe_dump(front, sort_keys=False)}---\n\n# {c['title']}\n\n"
            + (f"{c['summary']}\n\n" if c["summary"] else "")
            + f"Made by pldistill {__version__}.\n\n| | |\n|---|---|\n{rows}\n\n## Use\n\n```python\n{load}\n```\n")



def teacher_card(dataset: str, members: list[str], candidates: list[dict] | None = None) -> str:
    """The README.md of a teacher folder (pldistill.teach.teachers): its members (and, when it was chosen among
    candidates, each one's dev score) and how to score with it."""
    rows = "\n".join(f"- `member-{i:02d}/`: {m}" for i, m in enumerate(members))
    if candidates:
        rows += "\n\nChosen on dev among these candidates (teacher.candidates), dev Spearman x100:\n\n" + "\n".join(
            f"- {c['kind']}-encoder {c['model']}, {'fine-tuned on gold' if c['finetuned'] else 'as given'}: "
            + (f"{c['dev_spearman']}{' (chosen)' if c['chosen'] else ''}" if "dev_spearman" in c
               else f"skipped ({c['skipped']})") for c in candidates)
    kind = "An ensemble of teachers" if len(members) > 1 else "A teacher"
    return (f"# Teacher\n\n{kind} for {dataset}, made by pldistill {__version__}. Each member's score is put "
            f"on the gold scale by the calibration in `teacher.json` (fitted on dev); the teacher's score is the "
            f"members' mean.\n\n{rows}\n\n## Use\n\n```python\nfrom pldistill.teach.teachers import Teacher\n"
            f"teacher = Teacher.load(path)\nscores = teacher.score(sentences1, sentences2)  # in [0, 1]\n```\n\n"
            f"Each `member-NN/` loads on its own with sentence-transformers (`CrossEncoder` or "
            f"`SentenceTransformer`, as its card says).\n")
