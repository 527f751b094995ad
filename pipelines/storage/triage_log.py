"""triage: an analyst confirms or corrects a run's verdict and cause (Nguyen 2017, process steps S4-S5).

Usage::

    python -m pipelines.cli.triage RUN_ID --verdict pass|fail [--cause LABEL] [--counters a.b c.d]
                               [--note TEXT] [--by NAME]
    python -m pipelines.cli.triage RUN_ID --undo [--by NAME]
    python -m pipelines.cli.triage --list            # the runs awaiting a decision, and the decisions made

Each decision is one line appended to ``data/triage/log.jsonl`` (who, when, what, and the
values it replaces); nothing in it is rewritten, and ``--undo`` appends a line that takes back
the run's last decision. Raw archives stay untouched: ``validate`` reads the log after the
archives and the log wins (:func:`apply_triage`), so a triaged target joins the history. The
log is a dependency of the ``validate`` stage: the next ``dvc repro`` (or night) re-mines,
re-charts, re-features and retrains what it must, and the nightly DAG's
``regresslab://history/verified-runs`` asset fires, which retrains the cause models. A cause
label the models have never seen becomes a new class at that retrain.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict, cast

from pipelines import config
from pipelines.storage import manifest
from pipelines.storage.run_records import RunRecord, ValidIndex

VERDICTS = ("pass", "fail")


class Replaced(TypedDict):
    """What a triage decision replaces: the run's verdict, cause and regressed counters before it."""

    verdict: str | None
    cause: str | None
    regressed_counters: list[str]


class TriageRecord(TypedDict, total=False):
    """One line of the triage log: a decision (``action`` ``decide``: the run's verdict, cause and
    regressed counters, a note, and the values it replaces, ``previous``) or an ``undo`` of the
    run's last one; who and when."""

    action: str
    run_id: str
    verdict: str
    cause: str
    regressed_counters: list[str]
    note: str
    by: str
    at: str
    previous: Replaced


# --------------------------------------------------------------------------- pure core


def decision(run_id: str, *, verdict: str, cause: str | None, counters: list[str] | None, note: str | None,
             by: str, at: str, previous: Replaced) -> TriageRecord:
    """One log line: the decision and what it replaces. A passed run's cause is ``none``; a
    failed run with no cause given keeps ``unknown`` (it still joins the history as failed)."""
    if verdict not in VERDICTS:
        raise ValueError(f"--verdict must be pass or fail, not {verdict!r}")
    config.identifier(run_id, "run_id")
    if cause is not None and not config.is_identifier(cause):
        raise ValueError(f"cause {cause!r} is not a label ([A-Za-z0-9][A-Za-z0-9._-]{{0,127}})")
    return {"action": "decide", "run_id": run_id, "verdict": verdict,
            "cause": "none" if verdict == "pass" else (cause or "unknown"),
            "regressed_counters": list(counters or []) if verdict == "fail" else [],
            "note": note or "", "by": by, "at": at, "previous": previous}


def undo(run_id: str, *, by: str, at: str) -> TriageRecord:
    return {"action": "undo", "run_id": config.identifier(run_id, "run_id"), "by": by, "at": at}


def triage_state(records: list[TriageRecord]) -> dict[str, TriageRecord]:
    """The decision in force per run, replaying the log: a decision stacks on the run's earlier
    ones, an undo takes back its last; a run with none left is as its archive says."""
    stacks: dict[Any, list[TriageRecord]] = {}          # by run_id (a record may lack one: kept apart)
    for rec in records:
        run = rec.get("run_id")
        if rec.get("action") == "decide":
            stacks.setdefault(run, []).append(rec)
        elif rec.get("action") == "undo" and stacks.get(run):
            stacks[run].pop()
    return {run: stack[-1] for run, stack in stacks.items() if stack}


def apply_triage(index: ValidIndex, state: dict[str, TriageRecord]) -> ValidIndex:
    """The valid-run index with the analysts' decisions over the archives' verdicts (the log
    wins); each triaged row says so in ``_triage``. Decisions about runs not in the index
    (quarantined, or not pulled yet) wait."""
    out: dict[str, RunRecord] = {}
    for run_id, row in index.items():
        dec = state.get(run_id)
        if dec is None:
            out[run_id] = row
            continue
        out[run_id] = cast(RunRecord, dict(row, verdict=dec["verdict"], cause=dec["cause"],
                           regressed_counters=dec["regressed_counters"] or row.get("regressed_counters") or [],
                           _triage={k: dec[k] for k in ("by", "at", "note", "verdict", "cause")}
                           | {"archive_verdict": row.get("verdict"), "archive_cause": row.get("cause")}))
    return out


# --------------------------------------------------------------------------- I/O shell


def read_log(path: Path | None = None) -> list[TriageRecord]:
    """Every line of the triage log (a torn last line, from an interrupted append, is skipped)."""
    path = path or config.TRIAGE_LOG
    if not path.exists():
        return []
    records: list[TriageRecord] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict):
                records.append(cast(TriageRecord, rec))
    return records


def append(record: TriageRecord, path: Path | None = None) -> None:
    """One line, written and synced at once (the log is append-only; ``manifest.append_json_line``)."""
    manifest.append_json_line(path or config.TRIAGE_LOG, record)
