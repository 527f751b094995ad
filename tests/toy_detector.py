"""A detector of another kind, whole in one file, as a lab would add one to regresslab: it computes
its own result of each target run (the night's ``detectors`` stage calls :class:`Spectral`) and
reads it back as the :class:`~pipelines.protocol.DetectorResult` the verdict weighs
(:func:`result`).  Registered by one entry of params.yaml's ``report.detectors``::

    {name: spectral, result: 'tests.toy_detector:result', detector: 'tests.toy_detector:Spectral'}

whose results the stage writes to ``data/processed/detectors/spectral/<run_id>.json`` and the edge
reads into ``files.docs["spectral"]``.

What it judges: each counter's dominant frequency (the largest peak of the spectrum of its
intervals, the mean taken out, in cycles per interval); a run's score is its counters' largest
shift of that peak from the normal runs' median peak, and its p-value that score's rank among the
normal runs' own scores (each against the others).  Its file: ``{"p_value", "flagged_counters",
"peak_shift", "history_normals", "history_faults"}``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pipelines.protocol import DetectorResult, RunFiles, SystemHistory


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


def peaks(frame: Any) -> dict[str, float]:
    """Each numeric counter's dominant frequency in cycles per interval (0 for a constant counter)."""
    out = {}
    for counter in frame.columns:
        values = np.asarray(frame[counter], dtype=float)
        values = values[np.isfinite(values)]
        if len(values) < 4:
            continue
        power = np.abs(np.fft.rfft(values - values.mean()))[1:]
        out[str(counter)] = float((1 + int(np.argmax(power))) / len(values)) if power.max() > 0 else 0.0
    return out


@dataclass(frozen=True)
class Calibration:
    """The normal runs' peaks, and the verified fault runs' (the record)."""

    normals: dict[str, dict[str, float]]
    faults: dict[str, dict[str, float]]


class Spectral:
    """The toy as a :class:`~pipelines.protocol.Detector`: calibrated on the system's verified runs
    (nothing stored: it is quick), it judges a target's peaks against the normal runs'."""

    name = "spectral"

    def calibrate(self, history: SystemHistory, /) -> Calibration:
        verdicts = history.hist.verdicts(history.index, history.system)
        normals = {r: peaks(history.frames[r]) for r, v in verdicts.items() if v == "pass"}
        faults = {r: peaks(history.frames[r]) for r, v in verdicts.items() if v == "fail"}
        return Calibration(normals, faults)

    def stored(self, history: SystemHistory, /) -> Calibration:
        return self.calibrate(history)

    def kept(self, run_id: str, history: SystemHistory, calibration: Calibration, /) -> dict[str, Any] | None:
        return None

    def judge(self, run_id: str, history: SystemHistory, calibration: Calibration, /) -> dict[str, Any]:
        return judged(peaks(history.frames[run_id]), calibration)

    def held_out(self, run_id: str, history: SystemHistory, /) -> dict[str, Any]:
        """A verified run of the history judged by a calibration without it (leave-one-out)."""
        full = self.calibrate(history)
        without = Calibration({r: p for r, p in full.normals.items() if r != run_id},
                              {r: p for r, p in full.faults.items() if r != run_id})
        return judged(full.normals[run_id] if run_id in full.normals else full.faults[run_id], without)


def shift(run: dict[str, float], normals: list[dict[str, float]]) -> tuple[float, list[str]]:
    """The run's largest peak shift from the normal runs' median peaks, and the counters shifted by it."""
    shifts = {c: abs(f - float(np.median([n[c] for n in normals if c in n])))
              for c, f in run.items() if any(c in n for n in normals)}
    top = max(shifts.values(), default=0.0)
    return top, sorted(c for c, s in shifts.items() if top > 0 and s == top)


def pvalue(score: float, null: list[float]) -> float | None:
    """The score's rank among the null's, (1 + #null at least as large) / (n + 1); None without a null."""
    return None if not null else (1 + sum(s >= score for s in null)) / (len(null) + 1)


def judged(run: dict[str, float], calibration: Calibration) -> dict[str, Any]:
    """The file of a run judged against the calibration's normal runs, with the record."""
    normals = calibration.normals

    def loo_score(r: str) -> float:
        return shift(normals[r], [p for q, p in normals.items() if q != r])[0]

    null = {r: loo_score(r) for r in normals} if len(normals) > 1 else {}
    score, flagged = shift(run, list(normals.values())) if normals else (0.0, [])
    p = pvalue(score, list(null.values()))
    history_normals = {r: pvalue(s, [t for q, t in null.items() if q != r]) for r, s in null.items()}
    history_faults = {r: pvalue(shift(f, list(normals.values()))[0], list(null.values()))
                      for r, f in calibration.faults.items()} if null else {}
    return {"p_value": p, "flagged_counters": flagged if p is not None else [], "peak_shift": score,
            "history_normals": {r: v for r, v in history_normals.items() if v is not None},
            "history_faults": history_faults}
