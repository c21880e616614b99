"""export: the student (models/bi) in the forms a serving stack loads as they are, each in models/export/<format>
(pldistill.ship.export): ONNX (fp32, graph-optimised; int8), OpenVINO (fp32; int8, calibrated on the training sentences)
for a transformer student; Model2Vec's layout (float32, float16, int8) for a static one.

A format that cannot be made (a package not installed, an operation its exporter cannot take) is recorded with its
cause in models/export/exports.json and the report, and the other formats still run. Stage evaluate scores and times
each, and serves one (models/serve)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np

from pldistill.base import schemas
from pldistill.base.console import detail
from pldistill.base.io import atomic_dir, write_report
from pldistill.params.config import Params, load_params
from pldistill.run.runtime import main
from pldistill.ship import export as ex


def _chosen(params: Params) -> tuple[list[str], dict[str, str]]:
    """The formats to make, and those left out with the reason."""
    kind = params.student.kind
    own = ex.formats_for(kind)
    asked = own if params.export.formats == "auto" else tuple(params.export.formats)
    skipped = {f: f"a format of a {'transformer' if kind == 'static' else 'static'} student; this one is {kind}"
               for f in asked if f not in own}
    if params.export.formats == "auto":  # auto: what the installed packages allow; a format asked for is tried
        skipped |= {f: f"needs {' and '.join(ex.lacking(f))}, not installed: {ex.install_hint(f)}"
                    for f in asked if f in own and ex.lacking(f)}
    return [f for f in asked if f not in skipped], skipped


def calibration(clean: Path, n: int, seed: int) -> list[str]:
    """``n`` distinct training sentences drawn with ``seed`` (openvino-int8's activation ranges come from these)."""
    train = schemas.read(clean / "train.parquet", schemas.PAIRS)
    sentences = sorted(set(train["sentence1"]) | set(train["sentence2"]))
    pick = np.random.default_rng(seed).permutation(len(sentences))[:n]
    return [sentences[i] for i in sorted(pick)]


def export(params: Params, bi: Path, clean: Path, out: Path, report: Path) -> dict:
    """Write models/export/<format> for each format, and models/export/exports.json; return the report."""
    formats, skipped = _chosen(params)
    made: dict[str, dict] = {}
    failed: dict[str, str] = {}
    with atomic_dir(out) as tmp:
        def write(fmt: str, fill) -> None:
            folder = tmp / fmt
            folder.mkdir()
            t0 = time.perf_counter()
            try:
                if lacking := ex.lacking(fmt):
                    raise ex.ExportError(f"needs {' and '.join(lacking)}, not installed: {ex.install_hint(fmt)}")
                fill(folder)
            except Exception as err:  # one format's failure is reported; the others still run
                shutil.rmtree(folder, ignore_errors=True)
                first = str(err).strip().splitlines()[0] if str(err).strip() else ""
                failed[fmt] = f"{type(err).__name__}: {first}"
                print(f"export {fmt}: failed ({failed[fmt]})", flush=True)
                return
            made[fmt] = {"file": ex.FILES[fmt], "bytes": ex.model_bytes(folder, fmt),
                         "seconds": round(time.perf_counter() - t0, 2)}
            detail(f"export {fmt}: {made[fmt]['bytes']:,} bytes in {made[fmt]['seconds']} s")

        try:
            if params.student.kind == "static":
                for fmt in formats:
                    write(fmt, lambda d, fmt=fmt: ex.model2vec_folder(bi, fmt, d))
            elif formats:
                sentences = calibration(clean, params.export.calibration, params.seed)
                ex.transformer_exports(bi, formats, tmp, sentences, write)
        except ex.ExportError as err:  # the student itself cannot be exported (e.g. a DSE head): every format says so
            failed |= {f: f"{type(err).__name__}: {err}" for f in formats if f not in made}
            print(f"export: {err}", flush=True)
        manifest = {"student": params.student.kind,
                    "formats": {f: {k: v for k, v in m.items() if k != "seconds"} for f, m in made.items()},
                    "failed": failed, "skipped": skipped}
        (tmp / ex.MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    result = {**manifest, "formats": made}
    write_report(report, result)
    return result


if __name__ == "__main__":
    main(export, ["bi", "clean", "out", "report"], load=load_params)
