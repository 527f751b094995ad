"""Which runs are history (models, training set) and which are targets.

A *target* is a validated run whose ``verdict`` is null (not analysed yet).  Its
history is the passed verified runs of the same system that started before it, the
newest ``window`` of them (METHODS.md §B: sliding window of prior runs), unless the run
names its own ``baseline``.  Analysts remove a run from the repository by listing it in
``params.yaml: history.exclude``.
"""
from __future__ import annotations

from typing import Any


def passed_runs(index: dict[str, dict[str, Any]], system: str, *, exclude: set[str] = frozenset(),
                before: str | None = None, window: int | None = None) -> list[str]:
    """Passed verified runs of ``system``, oldest first, optionally before a time and windowed."""
    runs = [(row["started_at"], rid) for rid, row in index.items()
            if row.get("system") == system and row.get("verdict") == "pass" and rid not in exclude
            and (before is None or row["started_at"] < before)]
    runs.sort()
    ids = [rid for _, rid in runs]
    return ids[-window:] if window else ids


def targets(index: dict[str, dict[str, Any]]) -> list[str]:
    """Runs nobody has analysed yet (``verdict`` null), oldest first."""
    return [rid for rid, row in sorted(index.items(), key=lambda kv: (kv[1]["started_at"], kv[0]))
            if row.get("verdict") is None]


def baseline_for(run_id: str, index: dict[str, dict[str, Any]], *, window: int,
                 exclude: set[str] = frozenset()) -> list[str]:
    """The prior passed runs a target is compared with (its own ``baseline`` when given)."""
    row = index[run_id]
    named = row.get("baseline")
    if named:
        return [b for b in named if b in index and index[b].get("system") == row["system"] and b not in exclude]
    return passed_runs(index, row["system"], exclude=exclude | {run_id}, before=row["started_at"], window=window)


def systems(index: dict[str, dict[str, Any]]) -> list[str]:
    return sorted({row["system"] for row in index.values()})
