#!/usr/bin/env python3
"""The README's picture: test score against speed, drawn as an SVG from the pipeline's own plot data
(metrics/plots/speed/*.csv, the points `dvc plots show` draws) and the speed intervals of metrics/eval.json.

One panel a `--panel "TITLE=REV[,REV...]"`: REV is `.` (the working tree), a commit, or a DVC experiment's name
(`dvc exp show` lists them); a panel's revisions are drawn together (a transformer and a static student, say).

    python scripts/quality_speed.py --panel "demo=." --out docs/quality-speed.svg
    python scripts/quality_speed.py --panel "demo=HEAD" --panel "STS-B, seed 42=serve-s42,serve-static-s42"
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PLOTS = "metrics/plots/speed"
# each plot file: the eval.json block with its speed interval, and its colour
SERIES = {"teacher": (("teacher", "cross"), "#222222"), "start": (("baseline.start",), "#9a9a9a"),
          "gold-only": (("baseline.gold",), "#d9822b"), "student": (("bi",), "#2b6cd9")}
EXPORT = "#2e9e5b"


@dataclass
class Point:
    label: str
    speed: float
    low: float
    high: float
    test: float
    colour: str
    filled: bool = True
    named: bool = True


def show(rev: str, path: str) -> str:
    if rev == ".":
        return (ROOT / path).read_text()
    refs = subprocess.run(["git", "for-each-ref", "--format=%(refname)", "refs/exps"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.split()
    ref = next((r for r in refs if r.endswith("/" + rev)), rev)  # an experiment's name, or a commit
    done = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{rev}: no {path} there ({done.stderr.strip()}); expected `.`, a commit or an experiment")
    return done.stdout


def block(result: dict, dotted: str) -> dict | None:
    node = result
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def points(rev: str) -> list[Point]:
    """One revision's points: its plot files' (speed, test), with eval.json's interval for each."""
    result = json.loads(show(rev, "metrics/eval.json"))
    static = yaml.safe_load(show(rev, "params.yaml")).get("student", {}).get("kind") == "static"
    out = []
    for name, (blocks, colour) in SERIES.items():
        for row in csv.DictReader(io.StringIO(show(rev, f"{PLOTS}/{name}.csv"))):
            b = next((block(result, k) for k in blocks if block(result, k)), {}) or {}
            speed = float(row["speed"])
            label = f"static {name}" if static and name != "teacher" else name
            out.append(Point(label, speed, b.get("speed_low", speed), b.get("speed_high", speed),
                             float(row["test"]), colour))
    chosen = block(result, "export.chosen")
    for row in csv.DictReader(io.StringIO(show(rev, f"{PLOTS}/exports.csv"))):
        b = block(result, f"export.{row['format']}") or {}
        speed, served = float(row["speed"]), row["format"] == chosen
        out.append(Point(f"served {row['format']}" if served else row["format"], speed, b.get("speed_low", speed),
                         b.get("speed_high", speed), float(row["test"]), EXPORT, served, served))
    return out


def panel(title: str, pts: list[Point], x0: float, w: float = 440, h: float = 300) -> list[str]:
    """An SVG group: log-speed axis, test axis, each point with its speed interval, the named ones labelled."""
    left, top, pw, ph = x0 + 52, 34, w - 70, h - 80
    lo, hi = 0.8, max(p.high for p in pts) * 1.3
    tmin = math.floor(min(p.test for p in pts) - 1)
    tmax = math.ceil(max(p.test for p in pts) + 1)

    def x(s: float) -> float:
        return left + pw * (math.log10(s) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    def y(t: float) -> float:
        return top + ph * (tmax - t) / (tmax - tmin)

    g = [f'<text x="{x0 + w / 2:.0f}" y="18" text-anchor="middle" font-weight="bold">{title}</text>',
         f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#bbb"/>']
    for s in (1, 2, 5, 10, 20, 50, 100, 200, 500):
        if lo <= s <= hi:
            g.append(f'<line x1="{x(s):.1f}" y1="{top}" x2="{x(s):.1f}" y2="{top + ph}" stroke="#eee"/>')
            g.append(f'<text x="{x(s):.1f}" y="{top + ph + 14}" text-anchor="middle">{s}x</text>')
    step = 2 if tmax - tmin <= 12 else 5
    for t in range(tmin + (-tmin) % step, tmax + 1, step):
        g.append(f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{t}</text>')
    g.append(f'<text x="{left + pw / 2:.0f}" y="{top + ph + 30}" text-anchor="middle">'
             "speed against the whole MiniLM (log), 95% interval</text>")
    g.append(f'<text transform="translate({x0 + 14},{top + ph / 2:.0f}) rotate(-90)" text-anchor="middle">'
             "test Spearman x100</text>")
    marks = [(x(p.speed), y(p.test)) for p in pts]
    boxes: list[tuple[float, float, float, float]] = []  # labels placed: (x0, y0, x1, y1)

    def free(box: tuple[float, float, float, float]) -> bool:
        x_0, y_0, x_1, y_1 = box
        inside = left <= x_0 and x_1 <= left + pw and top <= y_0 and y_1 <= top + ph
        clear = not any(x_0 - 5 <= mx <= x_1 + 5 and y_0 - 5 <= my <= y_1 + 5 for mx, my in marks)
        return inside and clear and not any(x_0 < b[2] and b[0] < x_1 and y_0 < b[3] and b[1] < y_1 for b in boxes)

    for p in sorted(pts, key=lambda p: (p.named, -p.test)):
        px, py = x(p.speed), y(p.test)
        g.append(f'<line x1="{x(p.low):.1f}" y1="{py:.1f}" x2="{x(p.high):.1f}" y2="{py:.1f}" stroke="{p.colour}"/>')
        fill = p.colour if p.filled else "white"
        g.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="{fill}" stroke="{p.colour}"/>')
        if not p.named:
            continue
        text = f"{p.label} {p.test:.2f}"
        tw = 6.2 * len(text)  # about, at 11 px
        # right of the point, left of it, then below and above, further each time: the first place that is free
        spots = [(x(p.high) + 6, py + 4), (x(p.low) - 6 - tw, py + 4)]
        spots += [(px - tw / 2 + dx, py + dy) for dy in (17, -9, 29, -21, 41) for dx in (0, tw / 2, -tw / 2)]
        at = next(((sx, sy) for sx, sy in spots if free((sx, sy - 10, sx + tw, sy + 2))), spots[0])
        boxes.append((at[0], at[1] - 10, at[0] + tw, at[1] + 2))
        g.append(f'<text x="{at[0]:.1f}" y="{at[1]:.1f}" fill="{p.colour}">{text}</text>')
    return g


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--panel", action="append", required=True, metavar="TITLE=REV[,REV...]")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "quality-speed.svg")
    args = ap.parse_args()
    width, body = 0.0, []
    for spec in args.panel:
        title, sep, revs = spec.rpartition("=")
        if not sep or not title:
            raise SystemExit(f"--panel {spec!r}: expected TITLE=REV[,REV...], e.g. 'demo=.'")
        pts = {(p.label, p.speed, p.test): p for rev in revs.split(",") for p in points(rev)}  # one teacher
        body += panel(title, list(pts.values()), width)
        width += 440
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="300" '
           f'font-family="sans-serif" font-size="11">\n<rect width="100%" height="100%" fill="white"/>\n'
           + "\n".join(body) + "\n</svg>\n")
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(svg)
    tmp.replace(args.out)
    print(f"{args.out}: {len(args.panel)} panel(s)")


if __name__ == "__main__":
    main()
