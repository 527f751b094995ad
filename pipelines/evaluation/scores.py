"""The figures every detector is scored by: counter precision, recall and F, ROC AUC, run accuracy.

Counter-level precision, recall and F as defined in Foo et al. 2015 §IV (seed 003):

* ``P = 1 - m_false / m_total`` (1 when nothing is flagged),
* ``R = (m_total - m_false) / m_expected`` (1 when nothing is expected),
* ``F`` = harmonic mean of P and R,

with ``m_expected`` the run's ``regressed_counters``.  Run-level accuracy counts a run
right when the combiner's verdict (fail = at least one flagged counter) equals the
analyst's.  Unanalysed targets whose truth is known (``evaluate.labels`` files, such as
the simulator's ``target_labels.json``) are scored from their verdict files.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict

import numpy as np
import pandas as pd

from pipelines.verdict.evidence import top_counters
from pipelines.storage.run_records import RunRecord, ValidIndex
from pipelines.detectors.charts.files import ChartResult
from pipelines.storage.stage_files import ClusterResult, VerdictFile

Combiner = Literal["single", "bagging", "stacking"]
COMBINERS: tuple[Combiner, ...] = ("single", "bagging", "stacking")


class ScoreRow(TypedDict):
    """One combiner's judgement of one run scored against its truth (:func:`score_rows`)."""

    run_id: str
    system: str
    source: str
    cause: str
    truth: str
    combiner: str
    flagged: int
    expected: int
    false: int
    precision: float
    recall: float
    f: float
    verdict_correct: bool
    roc_auc: float | None


class CombinerSummary(TypedDict):
    """A combiner's averages over scored runs (:func:`summarize`, ``metrics/`` at rest)."""

    runs: int
    failed_runs: int
    precision: float | None
    recall: float | None
    f: float | None
    normal_runs: int
    normal_runs_with_flags: int
    false_counters_on_normal_runs: int
    run_accuracy: float
    counter_roc_auc: float | None


class RunScoreRow(TypedDict):
    """A detector's verdict on one verified run in leave-one-out, scored (:func:`chart_rows`)."""

    run_id: str
    system: str
    cause: str | None
    truth: str | None
    verdict: str | None
    score: float
    threshold: float
    flagged: int
    precision: float
    recall: float
    f: float
    roc_auc: float | None


class RunsSummary(TypedDict):
    """Run-verdict precision, recall and accuracy with counter F and ROC AUC (:func:`summarize_runs`)."""

    runs: int
    failed_runs: int
    run_precision: float | None
    run_recall: float | None
    run_accuracy: float
    normal_runs_failed: int
    counter_f: float | None
    counter_roc_auc: float | None


def counter_prf(flagged: list[str], expected: list[str]) -> tuple[float, float, float]:
    """Precision, recall and F of one run (Foo et al. 2015 §IV, with their edge cases)."""
    m_total = len(flagged)
    m_false = len(set(flagged) - set(expected))
    m_expected = len(expected)
    p = 1.0 - m_false / m_total if m_total > 0 else 1.0
    r = (m_total - m_false) / m_expected if m_expected > 0 else 1.0
    f = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return p, r, f


def roc_auc(scores: dict[str, float], positives: set[str]) -> float | None:
    """Area under the ROC curve of a counter ranking (Mann-Whitney, ties count half)."""
    pos = [v for c, v in scores.items() if c in positives]
    neg = [v for c, v in scores.items() if c not in positives]
    if not pos or not neg:
        return None
    pos_a, neg_a = np.asarray(pos)[:, None], np.asarray(neg)[None, :]
    return float(((pos_a > neg_a).sum() + 0.5 * (pos_a == neg_a).sum()) / (pos_a.size * neg_a.size))


@dataclass(frozen=True)
class Truth:
    """What an analyst or a label file says of one run: the figures are scored against it."""
    run_id: str
    system: str
    verdict: str
    cause: str
    expected: list[str]

    @classmethod
    def of(cls, run_id: str, system: str, row: RunRecord) -> "Truth":
        """From a verified run's index row or a target's label (``verdict``, ``cause``,
        ``regressed_counters``)."""
        return cls(run_id, system, str(row["verdict"]), row.get("cause") or "none", row.get("regressed_counters") or [])


def score_rows(truth: Truth, flagged_by: dict[str, list[str]], scores: dict[str, float], source: str,
               failed: bool | None = None) -> list[ScoreRow]:
    """One row per combiner; a combiner failed the run when it flagged a counter (or per ``failed``)."""
    rows: list[ScoreRow] = []
    auc = roc_auc(scores, set(truth.expected))
    for combiner, flagged in flagged_by.items():
        p, r, f = counter_prf(flagged, truth.expected)
        rows.append({"run_id": truth.run_id, "system": truth.system, "source": source, "cause": truth.cause,
                     "truth": truth.verdict, "combiner": combiner, "flagged": len(flagged),
                     "expected": len(truth.expected), "false": len(set(flagged) - set(truth.expected)),
                     "precision": p, "recall": r, "f": f,
                     "verdict_correct": ((len(flagged) > 0) if failed is None else failed) == (truth.verdict == "fail"),
                     "roc_auc": auc})
    return rows


def summarize(rows: pd.DataFrame) -> dict[str, CombinerSummary]:
    """Averages per combiner: counter F over failed runs, false counters on normal runs, run accuracy."""
    out: dict[str, CombinerSummary] = {}
    for combiner, g in rows.groupby("combiner"):
        failed = g[g["truth"] == "fail"]
        normal = g[g["truth"] == "pass"]
        out[combiner] = {
            "runs": int(len(g)),
            "failed_runs": int(len(failed)),
            "precision": round(float(failed["precision"].mean()), 4) if len(failed) else None,
            "recall": round(float(failed["recall"].mean()), 4) if len(failed) else None,
            "f": round(float(failed["f"].mean()), 4) if len(failed) else None,
            "normal_runs": int(len(normal)),
            "normal_runs_with_flags": int((normal["flagged"] > 0).sum()),
            "false_counters_on_normal_runs": int(normal["flagged"].sum()),
            "run_accuracy": round(float(g["verdict_correct"].mean()), 4),
            "counter_roc_auc": round(float(failed["roc_auc"].dropna().mean()), 4)
            if failed["roc_auc"].notna().any() else None,
        }
    return out


def chart_rows(charts: dict[str, ChartResult], index: ValidIndex) -> list[RunScoreRow]:
    """:func:`loo_charts` results scored against the truth: one row per run."""
    rows: list[RunScoreRow] = []
    for run_id, result in charts.items():
        expected = index[run_id].get("regressed_counters") or []
        p, r, f = counter_prf(result["flagged_counters"], expected)
        rows.append({"run_id": run_id, "system": index[run_id]["system"], "cause": index[run_id].get("cause"),
                     "truth": index[run_id]["verdict"], "verdict": result["verdict"],
                     "score": result["violation_ratio"], "threshold": result["threshold"],
                     "flagged": len(result["flagged_counters"]), "precision": p, "recall": r, "f": f,
                     "roc_auc": roc_auc(result["counter_scores"], set(expected))})
    return rows


def summarize_runs(rows: pd.DataFrame) -> RunsSummary:
    """Run-verdict precision/recall/accuracy (fail = positive), counter F and ROC AUC on failed runs."""
    fail_t, fail_p = rows["truth"] == "fail", rows["verdict"] == "fail"
    tp = int((fail_t & fail_p).sum())
    failed = rows[fail_t]
    return {"runs": int(len(rows)), "failed_runs": int(fail_t.sum()),
            "run_precision": round(tp / int(fail_p.sum()), 4) if fail_p.any() else None,
            "run_recall": round(tp / int(fail_t.sum()), 4) if fail_t.any() else None,
            "run_accuracy": round(float((fail_t == fail_p).mean()), 4),
            "normal_runs_failed": int((~fail_t & fail_p).sum()),
            "counter_f": round(float(failed["f"].mean()), 4) if len(failed) else None,
            "counter_roc_auc": round(float(failed["roc_auc"].dropna().mean()), 4)
            if failed["roc_auc"].notna().any() else None}


def classifier_rows(truth: Truth, head: VerdictFile, source: str) -> list[ScoreRow]:
    """The cause classifier's own row, when it judged the run (not when it abstained): a failed
    run shows the headline's top counters (the classifier names a cause, not counters)."""
    evidence = head["methods"].get("cause_classifier") or {}
    if evidence.get("verdict") not in ("pass", "fail"):
        return []
    failed = evidence["verdict"] == "fail"
    shown = top_counters(head["counter_scores"]) if failed else []
    return score_rows(truth, {"cause_classifier": shown}, head["counter_scores"], source, failed=failed)


def cluster_rows(clustered: dict[str, ClusterResult], index: ValidIndex) -> list[ScoreRow]:
    """Leave-one-out rows of the clustered regression models (``cluster_models.loo``)."""
    rows = []
    for run_id, res in clustered.items():
        if res.get("verdict") is None:
            continue
        rows += score_rows(Truth.of(run_id, index[run_id]["system"], index[run_id]),
                           {"clustered_regression": res["flagged_counters"]}, res["counter_scores"], "loo",
                           failed=res["verdict"] == "fail")
    return rows

