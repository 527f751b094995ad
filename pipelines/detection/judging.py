"""A detector over a night's targets, the one loop of the stages that judge runs against others.

A stage that judges runs (``detect``, ``control_charts``, ``clusters``) names its
:class:`~pipelines.protocol.Detector`; this calibrates it on every system's history and
judges each target of the system under that calibration (:func:`judge_night`, the stage's
``main``) — a target whose result is stored under the same inputs (``kept``) is not judged again,
here and nowhere else — calibrates every system alone (:func:`calibrate_every_system`, the nightly DAG's
calibration task) or judges the targets of one DAG batch against the stored calibrations
(:func:`batch`, one frame store and one calibration per system for the batch).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

from pipelines import parallel
from pipelines.stats import effects
from pipelines.systems import history
from pipelines.protocol import Detector, SystemHistory
from pipelines.progress import Progress
from pipelines.storage import locks, manifest
from pipelines.storage.run_records import ValidIndex

C = TypeVar("C")
R = TypeVar("R")
#: What a stage says of one judged target in its progress line: (run, (result, kept)) -> text.
Describe = Callable[[str, tuple[R, bool]], str]


def calibrate_every_system(detector: Detector[Any, Any], hist: history.HistoryParams,
                           significance: effects.Significance | None = None) -> list[str]:
    """``detector`` calibrated on every system's history; the systems."""
    index = manifest.read_valid_index()
    systems = history.systems(index)
    for system in systems:
        detector.calibrate(SystemHistory.of(system, index, hist, significance))
    return systems


def judge_night(detector: Detector[C, R], targets: list[str], index: ValidIndex, hist: history.HistoryParams,
                significance: effects.Significance | None, progress: Progress, describe: Describe[R]) -> int:
    """Every system calibrated, then each of its ``targets`` judged on the stage's processes; how many
    results were kept unchanged.  The results stored under the same inputs are kept first; fewer
    targets left than cores (a second night's one new archive) are judged one at a time here, so
    that each target's own work can use every core."""
    kept = 0
    tick = progress.each(describe)
    for system in history.systems(index):
        seen = SystemHistory.of(system, index, hist, significance)
        calibration = detector.calibrate(seen)
        mine = [t for t in targets if index[t]["system"] == system]
        stored = {run_id: detector.kept(run_id, seen, calibration) for run_id in mine}
        for run_id in [r for r in mine if stored[r] is not None]:
            tick(0, run_id, (stored[run_id], True))
        fresh = [r for r in mine if stored[r] is None]
        parallel.map_ordered(lambda run_id: (detector.judge(run_id, seen, calibration), False), fresh,
                             jobs=1 if len(fresh) < parallel.configured_jobs() else None, progress=tick)
        kept += len(mine) - len(fresh)
    return kept


@contextmanager
def batch(detector: Detector[C, R], hist: history.HistoryParams, significance: effects.Significance | None,
          *, lock: str) -> Iterator[Callable[[str], R]]:
    """The per-run work of one nightly DAG task: one shared hold of the data folder (``lock`` names
    it), and per system one frame store and its stored calibration, read once for the batch."""
    index = manifest.read_valid_index()
    shared: dict[str, tuple[SystemHistory, C]] = {}

    def one(run_id: str) -> R:
        system = index[run_id]["system"]
        if system not in shared:
            seen = SystemHistory.of(system, index, hist, significance)
            shared[system] = seen, detector.stored(seen)
        seen, calibration = shared[system]
        stored = detector.kept(run_id, seen, calibration)
        return stored if stored is not None else detector.judge(run_id, seen, calibration)

    with locks.data_lock(lock, shared=True):
        yield one
