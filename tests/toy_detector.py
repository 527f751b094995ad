"""A detector of another kind, whole in one file, as a lab would add one to regresslab: it reads its
own stored result of a run (a JSON file per run, written by its own stage) and returns the
:class:`~pipelines.protocol.DetectorResult` the verdict weighs.  Registered by one entry of
params.yaml's ``report.detectors``: ``{name: spectral, result: 'tests.toy_detector:result',
file: 'data/processed/spectral/{run_id}.json'}``; the edge reads that file into
``files.docs["spectral"]``.

Its file: ``{"p_value", "flagged_counters", "peak_shift", "history_normals", "history_faults"}``.
"""
from __future__ import annotations

from pipelines.protocol import DetectorResult, RunFiles

FILE = "data/processed/spectral/{run_id}.json"


def result(files: RunFiles) -> DetectorResult | None:
    """The spectral detector's result of one run, from its stored file; None when it wrote none."""
    doc = files.docs.get("spectral")
    if doc is None:
        return None
    p = doc.get("p_value")
    verdict = None if p is None else ("fail" if p <= files.false_alarm_rate else "pass")
    page = {"spectral": {"verdict": verdict, "p_value": p, "flagged_counters": doc["flagged_counters"],
                         "summary": f"largest shift of a counter's spectral peak {doc['peak_shift']:.2f} Hz"}}
    return DetectorResult(judged=p is not None, verdict=verdict, p_value=p, flagged_counters=doc["flagged_counters"],
                          history_normals=doc["history_normals"], history_faults=doc["history_faults"],
                          page=page if p is not None else {}, title="spectral peaks", null_kind="same_lab",
                          null_runs=len(doc["history_normals"]))
