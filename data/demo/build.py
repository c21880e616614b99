"""Merge the hand-written parts into pairs.tsv with a split column, and the plain sentences into sentences.txt
(run once; outputs are committed).

Splits are by group, so the variants of one base sentence never straddle train and test:
every 7th group (offset 3) goes to dev, every 7th (offset 5) to test, the rest to train. The parts named
test-*.tsv go to test whole: written later, by other writers, so that the test split has enough pairs for the
student's lead to be told from noise (96 test pairs left a paired-bootstrap interval about +-3.6 wide). A group
of theirs with a sentence sharing NEAR or more of its words with a training sentence is left out (a near copy).
Plain sentences (parts/plain-*.txt, one a line) are kept once each (compared case-, punctuation- and
spacing-insensitively), and one that is also a sentence of pairs.tsv is left out: a dev or test sentence is
never plain text to learn, and a training one is learned from the pairs already. So is one that shares NEAR or more
of its words (word sets' Jaccard) with a dev or test sentence: a near copy of an evaluation sentence.
"""
import csv
import re
from pathlib import Path

here = Path(__file__).parent
NEAR = 0.8
rows, test_only = [], set()
for part in sorted((here / "parts").glob("*.tsv")):
    with part.open(encoding="utf-8") as f:
        part_rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    rows += part_rows
    if part.name.startswith("test-"):
        test_only |= {r["group"] for r in part_rows}
groups = sorted({r["group"] for r in rows} - test_only)
split_of = {g: ("dev" if i % 7 == 3 else "test" if i % 7 == 5 else "train") for i, g in enumerate(groups)}
split_of |= dict.fromkeys(test_only, "test")


def key(s: str) -> str:
    return re.sub(r"\W+", " ", s.lower()).strip()


def near(words: set[str], others: list[set[str]]) -> bool:
    return any(len(words & o) >= NEAR * len(words | o) for o in others)


def words_of(split: str) -> list[set[str]]:
    return [set(key(r[c]).split()) for r in rows if split_of[r["group"]] == split for c in ("sentence1", "sentence2")]


trained = words_of("train")
near_train = {r["group"] for r in rows if r["group"] in test_only
              and any(near(set(key(r[c]).split()), trained) for c in ("sentence1", "sentence2"))}
rows = [r for r in rows if r["group"] not in near_train]
with (here / "pairs.tsv").open("w", encoding="utf-8", newline="") as f:
    w = csv.writer(f, delimiter="\t", quoting=csv.QUOTE_NONE, lineterminator="\n")
    w.writerow(["split", "group", "score", "sentence1", "sentence2"])
    for r in rows:
        w.writerow([split_of[r["group"]], r["group"], r["score"], r["sentence1"], r["sentence2"]])


in_pairs = {key(r[c]) for r in rows for c in ("sentence1", "sentence2")}
held_out = words_of("dev") + words_of("test")


def near_eval(k: str) -> bool:
    return near(set(k.split()), held_out)


seen: set[str] = set()
plain, left_out = [], {"in_pairs": 0, "near_eval": 0, "repeated": 0}
for part in sorted((here / "parts").glob("plain-*.txt")):
    for line in part.read_text(encoding="utf-8").splitlines():
        s = " ".join(line.split())
        if not s:
            continue
        k = key(s)
        why = "in_pairs" if k in in_pairs else "repeated" if k in seen else "near_eval" if near_eval(k) else None
        if why:
            left_out[why] += 1
            continue
        seen.add(k)
        plain.append(s)
(here / "sentences.txt").write_text("\n".join(plain) + "\n", encoding="utf-8")
print(f"{len(rows)} pairs ({len(near_train)} test group(s) left out, near a training sentence: {sorted(near_train)}), "
      f"{len(plain)} plain sentences (left out: {left_out})")
