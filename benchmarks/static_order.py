"""Can a static student learn word order? Order-aware additions to its table, each learned through stage embed's step
and then stage distill's pair training, against the plain table trained the same way in the same run:

- ``bigrams``: a vector per token bigram seen at least --min-count times in the step's sentences (fastText's
  n-grams), added to the sentence's sum of token vectors;
- ``conv``: a residual convolution over each sentence's token vectors (width 3, --hidden channels, GELU, then back
  to the table's width), summed with them.

Each addition starts at zero, so every variant starts as the plain table and any change is learned. The loops are
the pipeline's recipe written small (AdamW, 10% warm-up then linear decay, the best on dev kept): the step at
static.embed_lr (the addition at --add-lr), batches of 64, one epoch; the pairs (gold and the teacher's silver) at
static.lr, batches of 16, two epochs, cosine MSE. One seed, no soup, no token weights: the plain row is the fair
baseline, not the pipeline's figure. Each row's test is scored again with each pair's words shuffled (the mean of
4 shuffles, as stage evaluate's baseline.order_free): its drop is what the student reads of word order.

Reads one run's outputs (``--rev``: a commit or an experiment's commit, from DVC's cache; without it, the workspace):
models/cut (the start and its PCA directions), data/embed/teacher.parquet (the source model's embeddings of the
step's sentences), data/clean and data/pseudo (the pairs stage distill trained on). Run stage embed with a corpus
(embed.corpus) so the additions see many sentences.

    python benchmarks/static_order.py --rev <commit> --add bigrams conv
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformer

from pldistill.base import schemas
from pldistill.base.metrics import correlation, order_free
from pldistill.base.numeric import l2_normalise
from pldistill.students import embedding
from pldistill.students.cut import STATIC_DIR, start_directions

OUTS = ("models/cut", "data/embed", "data/clean", "data/pseudo")
Ids = list[list[int]]  # token ids, one list per sentence


def fetch(rev: str | None, into: Path) -> Path:
    """The run's outputs: the workspace itself, or ``rev``'s copies from DVC's cache written under ``into``."""
    if rev is None:
        return Path(".")
    from dvc.api import DVCFileSystem

    fs = DVCFileSystem(".", rev=rev)
    for out in OUTS:
        fs.get(out, str(into / out), recursive=True)
    return into


class Student(torch.nn.Module):
    """A static table (vocab, d), plus ``add``: none | bigrams (``bigrams`` maps a token pair to its row) | conv."""

    def __init__(self, table: torch.Tensor, add: str, bigrams: dict[tuple[int, int], int], hidden: int) -> None:
        super().__init__()
        d = table.shape[1]
        self.add, self.bigrams = add, bigrams
        self.table = torch.nn.EmbeddingBag.from_pretrained(table.clone(), freeze=False, mode="sum")
        if add == "bigrams":
            self.pairs = torch.nn.EmbeddingBag(max(len(bigrams), 1), d, mode="sum", sparse=True)
            torch.nn.init.zeros_(self.pairs.weight)
        if add == "conv":
            self.conv = torch.nn.Conv1d(d, hidden, 3, padding=1)
            self.back = torch.nn.Conv1d(hidden, d, 1)
            torch.nn.init.zeros_(self.back.weight)
            torch.nn.init.zeros_(self.back.bias)

    def forward(self, ids: Ids) -> torch.Tensor:  # (batch, d); the cosine ignores the mean's divisor, so a sum
        flat = torch.tensor([t for s in ids for t in s], dtype=torch.long)
        lengths = torch.tensor([len(s) for s in ids])
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
        emb = self.table(flat, offsets)
        if self.add == "bigrams":
            rows = [[self.bigrams[p] for p in itertools.pairwise(s) if p in self.bigrams] for s in ids]
            counts = torch.tensor([len(r) for r in rows])
            starts = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)[:-1]])
            emb = emb + self.pairs(torch.tensor([r for s in rows for r in s], dtype=torch.long), starts)
        if self.add == "conv":
            x = torch.nn.utils.rnn.pad_sequence(torch.split(self.table.weight[flat], lengths.tolist()),
                                                batch_first=True)  # (batch, longest, d)
            mask = (torch.arange(x.shape[1])[None] < lengths[:, None]).unsqueeze(1)  # (batch, 1, longest)
            emb = emb + (self.back(F.gelu(self.conv(x.transpose(1, 2)))) * mask).sum(-1)
        return emb


def spearman(model: Student, ids1: Ids, ids2: Ids, gold: np.ndarray) -> float:
    with torch.no_grad():
        return correlation(F.cosine_similarity(model(ids1), model(ids2)).numpy(), gold)["spearman"]


def fit(model: Student, n: int, batch: int, epochs: int, lr: float, add_lr: float,
        loss_of: Callable[[np.ndarray], torch.Tensor], dev: Callable[[], float], evals: int,
        gen: torch.Generator) -> float:
    """``epochs`` over ``n`` rows in shuffled batches, the table at ``lr`` and the addition at ``add_lr``; dev
    ``evals`` times; the best on dev (the start counted) kept."""
    opts = [torch.optim.AdamW(model.table.parameters(), lr=lr)]
    if model.add == "bigrams":
        opts.append(torch.optim.SparseAdam(list(model.pairs.parameters()), lr=add_lr))
    if model.add == "conv":
        opts.append(torch.optim.AdamW([*model.conv.parameters(), *model.back.parameters()], lr=add_lr))
    steps = epochs * -(-n // batch)
    warm = max(1, int(0.1 * steps))
    shape = lambda k: k / warm if k < warm else max(0.0, (steps - k) / max(1, steps - warm))  # noqa: E731
    scheds = [torch.optim.lr_scheduler.LambdaLR(o, shape) for o in opts]
    best, state, step = dev(), {k: v.clone() for k, v in model.state_dict().items()}, 0
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen).numpy()
        for k in range(0, n, batch):
            loss = loss_of(order[k : k + batch])
            for o in opts:
                o.zero_grad()
            loss.backward()
            for o, s in zip(opts, scheds):
                o.step()
                s.step()
            step += 1
            if step % max(1, steps // evals) == 0 or step == steps:
                score = dev()
                if score > best:
                    best, state = score, {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    return best


def frequent_bigrams(ids: Ids, min_count: int) -> dict[tuple[int, int], int]:
    counts = Counter(p for s in ids for p in itertools.pairwise(s))
    return {p: i for i, p in enumerate(sorted(p for p, c in counts.items() if c >= min_count))}


@dataclass
class Data:
    """One run's outputs, tokenised: the start's table, the step's sentences and targets, the pairs, dev and test."""

    table: torch.Tensor  # (vocab, d) the static start
    sentences: Ids  # stage embed's sentences
    target: torch.Tensor  # (n, d) their source-model embeddings in the start's PCA directions, unit length
    pairs: tuple[Ids, Ids, torch.Tensor]  # gold + silver: sentence1, sentence2, score
    held: dict[str, tuple[Ids, Ids, np.ndarray]]  # dev, test
    test: pd.DataFrame  # the test pairs as text, to shuffle their words
    encode: Callable[[Sequence[str]], Ids]


def load(root: Path) -> Data:
    cut = root / "models/cut"
    start = SentenceTransformer(str(cut / STATIC_DIR), device="cpu")[0]
    encode = lambda texts: [e.ids for e in start.tokenizer.encode_batch(list(texts), add_special_tokens=False)]  # noqa: E731
    step = schemas.read(root / "data/embed" / embedding.TEACHER_FILE, schemas.EMBEDDINGS)
    raw = np.stack(step["embedding"].to_numpy()).astype(np.float32)  # (n, the source model's width)
    directions = start_directions(cut)  # the start's PCA directions, as stage embed projects; None: not reduced
    target = l2_normalise(raw if directions is None else raw @ directions.T)
    split = {s: schemas.read(root / f"data/clean/{s}.parquet", schemas.PAIRS) for s in ("train", "dev", "test")}
    silver = [schemas.read(p, schemas.PSEUDO) for p in sorted((root / "data/pseudo").glob("*.parquet"))]
    pairs = pd.concat([split["train"], *silver], ignore_index=True)
    return Data(start.embedding.weight.detach(), encode(step["sentence"]), torch.from_numpy(target),
                (encode(pairs.sentence1), encode(pairs.sentence2), torch.tensor(pairs.score.to_numpy(np.float32))),
                {s: (encode(split[s].sentence1), encode(split[s].sentence2), split[s].score.to_numpy())
                 for s in ("dev", "test")}, split["test"], encode)


def variant(data: Data, add: str, bigrams: dict[tuple[int, int], int], hidden: int, embed_lr: float,
            pair_lr: float, add_lr: float, seed: int) -> dict:
    """One student: the step, then the pairs; its dev and test after each."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)  # the convolution's first layer
    model = Student(data.table, add, bigrams, hidden)
    sentences, target = data.sentences, data.target
    s1, s2, scores = data.pairs

    def dev() -> float:
        return spearman(model, *data.held["dev"])

    def to_target(rows: np.ndarray) -> torch.Tensor:
        return F.mse_loss(F.normalize(model([sentences[j] for j in rows]), dim=-1), target[rows])

    def to_score(rows: np.ndarray) -> torch.Tensor:
        cos = F.cosine_similarity(model([s1[j] for j in rows]), model([s2[j] for j in rows]))
        return F.mse_loss(cos, scores[rows])

    t0 = time.perf_counter()
    embed_dev = fit(model, len(sentences), 64, 1, embed_lr, add_lr, to_target, dev, 2, gen)
    embed_test = spearman(model, *data.held["test"])
    pair_dev = fit(model, len(s1), 16, 2, pair_lr, pair_lr, to_score, dev, 8, gen)

    def score(a: list[str], b: list[str]) -> np.ndarray:
        with torch.no_grad():
            return F.cosine_similarity(model(data.encode(a)), model(data.encode(b))).numpy()

    shuffled = order_free(score, list(data.test.sentence1), list(data.test.sentence2), 4,
                          np.random.default_rng(seed))  # what the student reads of word order: its drop
    return {"add": add, **({"bigrams": len(bigrams)} if add == "bigrams" else {}),
            **({"hidden": hidden} if add == "conv" else {}), "sentences": len(sentences), "pairs": len(s1),
            "embed_dev": embed_dev, "embed_test": embed_test, "dev": pair_dev,
            "test": spearman(model, *data.held["test"]),
            "test_order_free": correlation(shuffled, data.test.score)["spearman"],
            "seconds": round(time.perf_counter() - t0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", help="a commit (an experiment's) whose outputs to read; default: the workspace")
    ap.add_argument("--add", nargs="+", choices=["bigrams", "conv"], default=["bigrams", "conv"])
    ap.add_argument("--min-count", type=int, default=20, help="bigrams: seen at least this often in the sentences")
    ap.add_argument("--hidden", type=int, default=256, help="conv: its channels")
    ap.add_argument("--embed-lr", type=float, default=5e-3, help="the step's rate (static.embed_lr)")
    ap.add_argument("--lr", type=float, default=1e-3, help="the pairs' rate (static.lr), the addition's too")
    ap.add_argument("--add-lr", type=float, default=1e-3, help="the addition's rate in the step")
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = load(fetch(args.rev, Path(tmp)))
    bigrams = frequent_bigrams(data.sentences, args.min_count) if "bigrams" in args.add else {}
    rows = []
    for add in ("none", *args.add):
        rows.append(variant(data, add, bigrams if add == "bigrams" else {}, args.hidden, args.embed_lr, args.lr,
                            args.add_lr, args.seed))
        print(json.dumps(rows[-1]), flush=True)
    plain = rows[0]
    for row in rows[1:]:
        print(f"{row['add']}: test {row['test']:.2f} ({row['test'] - plain['test']:+.2f}), "
              f"dev {row['dev']:.2f} ({row['dev'] - plain['dev']:+.2f}) against the plain table")


if __name__ == "__main__":
    main()
