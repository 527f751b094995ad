"""series_changes: the records the commit-series detectors share, typed.

Each detector of ``commit_series`` (Skia's step fits, seed 001; Mono's intervals, seed 002; PELT
and the level-shift test) finds changes in series of one value per commit; ``commit_series``
gathers them into the night's changes (``commit_changes``' file) and the contract's list (§3).
Skia's interesting clusters and their registry (seed 001's triage) travel beside them.
"""
from __future__ import annotations

from typing import TypedDict

import pandas as pd

#: Why a detector called a change: its figures (levels, test statistics, Mono's intervals and the
#: series' impact factor, Skia's regression factor and cluster size), by name.
Evidence = dict[str, float | str | list[float] | None]


class IndexedChange(TypedDict):
    """A change found in one series of values, at ``index`` (the first value of the new level):
    the relative change of level and the detector's evidence."""

    index: int
    magnitude: float
    evidence: Evidence


class SeriesChange(TypedDict, total=False):
    """A change of a commit series (``<benchmark>|<config>``): the commit it starts at and the one
    before, the relative change of level, the detector that found it and its evidence."""

    series: str
    commit: str
    previous: str
    magnitude: float
    method: str
    evidence: Evidence


class ContractChange(TypedDict):
    """A change as the contract lists it (§3): benchmark and configuration, the commit, regression
    or improvement, the change in %, the detector and its evidence."""

    benchmark: str
    config: str
    commit: str
    direction: str
    magnitude_pct: float
    method: str
    evidence: Evidence


class SkiaCluster(TypedDict):
    """An interesting cluster of one window of commits (Skia, seed 001): its members that stepped
    and the commit each stepped at, its size, the step's commit and index, its regression factor,
    step and fit, the traces nearest its centroid, the threshold it passed and how it was grouped
    (``kmeans`` or ``individual``)."""

    members: list[str]
    member_commits: dict[str, str]
    cluster_size: int
    commit: str
    index: int
    regression_factor: float
    step: float
    fit: float
    nearest: list[str]
    threshold: float
    grouping: str


class ClusterEntry(TypedDict, total=False):
    """An interesting cluster in the registry kept between nights (seed 001's triage): its id, the
    commit, the nearest traces it is recognised by, its size and regression factor, its triage
    status (with who, when and why) and how many nights saw it."""

    id: str
    commit: str
    nearest: list[str]
    size: int
    regression_factor: float
    status: str
    seen: int
    triaged_by: str
    triaged_at: str
    note: str | None


class SeriesDetection(TypedDict):
    """The detectors of a method on one history (``commit_series.detect_all``): the commits in order, the
    series × commits table, each detector's changes (empty when it did not run), Skia's clusters,
    Mono's intervals and summaries per series, the series too irregular to call, the method resolved."""

    commits: list[str]
    table: pd.DataFrame
    skia: list[SeriesChange]
    mono: list[SeriesChange]
    pelt: list[SeriesChange]
    level_shift: list[SeriesChange]
    clusters: list[SkiaCluster]
    intervals: dict[str, pd.DataFrame]
    summaries: dict[str, dict[str, float | str | None]]
    irregular: dict[str, float]
    method: str


class F1Scores(TypedDict, total=False):
    """Change-point scores of one detector against labelled change commits (:func:`f1_scores`), with,
    in :func:`score_against`, its changes per 100 commits and a series, and the method reported."""

    precision: float
    recall: float
    f1: float
    f1_tcpd: float | None
    true_changes: int
    detected: int
    changes_per_100_commits: float
    method: str
