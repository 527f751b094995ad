"""The release view: which build can ship.  Each run's verdict file read as a release manager reads
it, then the runs of one build (a system's version, or the build the archive names) rolled into one
row: **Hold**, **Needs a look** or **Ship**, with one line of reason (docs/operations/release.md).

* A run **holds** its build when it failed for certain: its objectives failed (the team's own
  bounds), or the detectors failed it on a history that can weigh them.
* A run **needs a look** when its verdict is uncertain: not judged (``no_baseline``), judged against
  itself alone because its history is too small, or of a lab the history has no verified run of,
  whichever way it went; and when its objectives warn.  It is not counted as a regression.
* Otherwise it **ships**.

A build takes its worst run's status and reason.  Pure: verdict documents in, rows out; the pages
are views of the verdict files, which this module never changes.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pipelines.reporting.summary import objectives_text

Status = Literal["hold", "look", "ship"]
RANK: dict[str, int] = {"hold": 0, "look": 1, "ship": 2}
LABEL: dict[str, str] = {"hold": "Hold", "look": "Needs a look", "ship": "Ship"}


@dataclass(frozen=True)
class RunStatus:
    """One run as the release view reads it: its status, the reason in one line, and whether its
    verdict is certain."""

    run_id: str
    status: Status
    reason: str
    certain: bool
    score: float = 0.0

    @classmethod
    def of_row(cls, run_id: str, row: Mapping[str, Any]) -> "RunStatus":
        """A run's status as its night-index row keeps it (``pages.index_row``)."""
        return cls(run_id, row["status"], row.get("reason") or "", bool(row.get("certain")),
                   float(row.get("score") or 0))


@dataclass(frozen=True)
class Build:
    """One row of the release view: a system's build, its status and reason (its worst run's), the
    runs behind it (worst first) and whether any of them is of tonight."""

    system: str
    build: str
    status: Status
    reason: str
    runs: tuple[RunStatus, ...]
    tonight: bool
    started: str = ""
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return LABEL[self.status]


def uncertainty(doc: Mapping[str, Any]) -> str | None:
    """Why the detectors' verdict on a run is uncertain, in words; None when it is not."""
    details = doc.get("details") or {}
    trust = details.get("trust") or {}
    basis = trust.get("basis")
    if doc.get("verdict") == "no_baseline" or (details.get("decision") or {}).get("statistical_verdict") == "no_baseline":
        return "not judged: " + str(details.get("no_baseline") or "nothing in the history to compare it with")
    if basis == "small_history":
        return "judged against itself only: " + str(trust.get("short") or "too few runs of this lab")
    if basis == "new_lab" or doc.get("baseline_status") == "insufficient":
        return "a new lab: the history has no verified run of it"
    if basis == "silent_null":
        return "judged against itself only: no verified fault in the history to weigh the detectors"
    return None


def run_status(doc: Mapping[str, Any]) -> RunStatus:
    """A run's status and reason (module docstring), its score to order the runs of one status."""
    return replace(_status(doc), score=float(doc.get("score") or 0.0))


def _status(doc: Mapping[str, Any]) -> RunStatus:
    run_id = str(doc.get("run_id"))
    decision = (doc.get("details") or {}).get("decision") or {}
    gate = doc.get("objectives")
    by_objectives = str(decision.get("decided_by", "")).startswith("objectives")
    if gate is not None and doc.get("verdict") == "fail" and by_objectives:
        return RunStatus(run_id, "hold", "objective failed: " + objectives_text(gate, ("fail",)), True)
    why = uncertainty(doc)
    top = str(doc.get("top_change") or "")
    if doc.get("verdict") == "fail" and why is None:
        return RunStatus(run_id, "hold", "regressed: " + (top or ", ".join((doc.get("flagged_counters") or [])[:2])
                                                         or "the detectors' combined evidence"), True)
    if why is not None:
        lead = f"uncertain failure ({top}): " if doc.get("verdict") == "fail" and top else \
            "uncertain failure: " if doc.get("verdict") == "fail" else ""
        return RunStatus(run_id, "look", lead + why, False)
    if gate is not None and gate["result"] == "warning":
        return RunStatus(run_id, "look", "objectives warn: " + objectives_text(gate, ("fail", "warning")), True)
    passed = gate is not None and gate["result"] == "pass"
    return RunStatus(run_id, "ship", "no regression found" + (" and objectives pass" if passed else ""), True)


def build_of(meta: Mapping[str, Any]) -> str:
    """A run's build: the one its archive names, else its version ("" when it names neither)."""
    return str(meta.get("build") or meta.get("version") or "")


def builds(runs: Mapping[str, tuple[str, RunStatus]], meta: Mapping[str, Mapping[str, Any]],
           tonight: Iterable[str]) -> list[Build]:
    """The release view's rows: ``runs`` (run -> its system and :class:`RunStatus`) grouped by system
    and build (``meta``: run -> its run.json as validated; the archive's ``build`` when it names one,
    else its ``version``); tonight's builds first, then newest first; ``tonight``: the night's own runs."""
    tonight = set(tonight)
    groups: dict[tuple[str, str], list[str]] = {}
    for run_id, (system, _) in runs.items():
        build = build_of(meta.get(run_id) or {}) or "unknown build"
        groups.setdefault((system, build), []).append(run_id)
    out = []
    for (system, build), members in groups.items():
        statuses = sorted((runs[r][1] for r in members), key=lambda s: (RANK[s.status], -s.score, s.run_id))
        worst = statuses[0]
        counts = {k: sum(s.status == k for s in statuses) for k in RANK}
        started = max(str((meta.get(r) or {}).get("started_at") or "") for r in members)
        out.append(Build(system, build, worst.status, f"{worst.run_id}: {worst.reason}", tuple(statuses),
                         any(r in tonight for r in members), started, counts))
    return sorted(out, key=lambda b: (b.tonight, b.started, b.system, b.build), reverse=True)


# the kinds of counter a user feels, each a pattern on the counter's name, in the order a page shows them
USER_FACING = (("response time", r"response|latency"), ("throughput", r"throughput|_rps$"), ("errors", r"error"))


def key_indicators(doc: Mapping[str, Any], meta: Mapping[str, Any], counters: Iterable[str], *,
                   per_kind: int = 2, most: int = 6) -> list[str]:
    """The counters a release manager reads first on every run: those the system's objectives name
    and the workload's load counter; when no objective names one, the user-facing kinds too (response
    time, throughput, errors: ``per_kind`` of each, the application's own first).  At most ``most``."""
    import re

    have = list(counters)
    named = [o["counter"] for o in (doc.get("objectives") or {}).get("objectives") or [] if o.get("counter")]
    load = (meta.get("workload") or {}).get("load_counter")
    out = list(dict.fromkeys(named + ([load] if load and load in have else [])))
    if not named:
        for _, pattern in USER_FACING:
            found = sorted((c for c in have if re.search(pattern, c) and c not in out),
                           key=lambda c: (not c.startswith("app."), len(c), c))
            out += found[:per_kind]
    return out[:most]
