"""run_records: the valid-run index, typed — one row per validated run, the contract's run metadata.

``validate`` writes the index (``data/interim/valid_runs.json``: run id -> row), and every later
stage starts from it (``manifest.read_valid_index``).  A row is the archive's ``run.json``
(contract §1) as validated, with what validation learned of the run: the hosts it read and the
counters it dropped, each with its reason.  The index stays JSON at rest and is read as plain
dicts; these types say what the rows hold, for readers and for type checkers.
"""
from __future__ import annotations

from typing import TypedDict

#: An environment value: the contract's flat map of component to value (``"Xeon E5-2670"``, ``8``).
EnvironmentValue = str | int | float | bool | None
#: A run's environment (contract §1): component -> value; keys may differ between runs.
Environment = dict[str, EnvironmentValue]


class Workload(TypedDict, total=False):
    """The workload of a run: its profile and the counter that measures the offered load, if any."""

    profile: str
    load_counter: str | None


class DroppedCounter(TypedDict, total=False):
    """A counter validation left out of a run: which host, which checks, and why in a sentence."""

    host: str
    counter: str
    checks: list[str]
    reason: str


class RunMeta(TypedDict, total=False):
    """A run's ``run.json`` as regresslab writes it (contract §1: what ``regresslab ingest`` puts in
    the archive it builds); ``baseline`` and ``regressed_counters`` only when the run states them."""

    schema_version: int
    run_id: str
    system: str
    version: str
    started_at: str
    duration_s: float
    workload: Workload
    environment: Environment
    verdict: str | None
    cause: str | None
    baseline: list[str]
    regressed_counters: list[str]


class NormalizedInfo(TypedDict, total=False):
    """What normalisation decided for a run (``data/interim/normalized/<run_id>.json``): the interval
    and how many, each host's sampling period, the counters, the load counter, its fits and its
    median (load scaling), the empty intervals per counter, and the run, its system and input key."""

    interval_s: float
    n_intervals: int
    sampling_periods: dict[str, float]
    counters: list[str]
    load_counter: str | None
    load_fits: dict[str, list[float]]
    median_load: float | None
    empty_intervals: dict[str, int]
    key: str
    run_id: str
    system: str


class RunRecord(TypedDict, total=False):
    """One validated run (contract §1 ``run.json``, as ``validate`` indexes it).

    ``verdict`` and ``cause`` are the analyst's (null for a target not yet analysed);
    ``regressed_counters`` the counters verified to show a regression; ``_hosts`` the hosts
    read, ``_dropped_counters`` the counters left out with their reason, ``_triage`` an analyst's
    decision over the archive's (who, when, the note, the verdict and cause it replaced),
    ``_set_aside`` the earlier copies of the archive kept aside when this one was taken (the
    manifest's ``set_aside``: where, hash, how and why)."""

    system: str
    version: str
    started_at: str
    duration_s: float
    verdict: str | None
    cause: str | None
    environment: Environment
    baseline: list[str] | None
    workload: Workload
    regressed_counters: list[str]
    _hosts: list[str]
    _dropped_counters: list[DroppedCounter]
    _triage: dict[str, str | None]
    _set_aside: list[dict[str, str | int]]


#: The valid-run index: run id -> its row.
ValidIndex = dict[str, RunRecord]
