"""control_charts: every counter of every target charted against its baseline.

The charts, violation ratios and calibration (Nguyen 2017 ch. 3, 6-7, seed 004) are
:mod:`pipelines.detectors.charts`; a system's calibration and a target's charts, stored, are
:mod:`pipelines.calibration.chart_runs`.  This stage calibrates each system on its normal runs and
writes the calibration and each target's charts to ``data/processed/control_charts/``.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from pipelines import config, parallel
from pipelines.calibration import effects, history
from pipelines.calibration.chart_runs import calibrate_system, chart_one
from pipelines.detectors.charts import ControlChartParams
from pipelines.progress import Progress
from pipelines.storage import atomic, locks, manifest, store

log = logging.getLogger("regresslab.control_charts")


@locks.holding("control_charts calibration")
def calibrate_all() -> list[str]:
    """Calibrate every system; the systems (nightly DAG task)."""
    significance = effects.Significance.load()
    return store.calibrate_every_system(
        lambda system, index, frames, params, hist: calibrate_system(system, index, frames, params, hist, significance),
        ControlChartParams.load(), history.HistoryParams.load())


def run_one(run_id: str) -> dict[str, Any]:
    """Chart one target: a batch of one (:func:`batch`)."""
    with batch() as one:
        return one(run_id)


@contextmanager
def batch() -> Iterator[Callable[[str], dict[str, Any]]]:
    """The per-run work of one nightly DAG task (:func:`run_one` is a batch of one): one shared hold of
    the data folder and one frame store per system, so the history's frames are read once for the batch."""
    index = manifest.read_valid_index()
    params, hist = ControlChartParams.load(), history.HistoryParams.load()
    significance = effects.Significance.load()
    frames: dict[str, store.FrameStore] = {}

    def one(run_id: str) -> dict[str, Any]:
        system = index[run_id]["system"]
        if system not in frames:
            frames[system] = store.FrameStore.of_system(system)
        return chart_one(run_id, index, frames[system], params, hist, significance)

    with locks.data_lock("control_charts batch", shared=True):
        yield one


@locks.holding("control_charts")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config.ensure_dirs(config.CONTROL_CHARTS / "calibration", config.CONTROL_CHARTS / "runs")
    params, hist = ControlChartParams.load(), history.HistoryParams.load()
    significance = effects.Significance.load()
    index = manifest.read_valid_index()
    todo = history.targets(index)
    atomic.prune_outputs(config.CONTROL_CHARTS / "calibration", history.systems(index))
    atomic.prune_outputs(config.CONTROL_CHARTS / "runs", todo)
    progress = Progress(log, "control_charts", len(todo))
    for system in history.systems(index):
        frames = store.FrameStore.of_system(system)
        calibrate_system(system, index, frames, params, hist, significance)
        parallel.map_ordered(lambda run_id: chart_one(run_id, index, frames, params, hist, significance),
                             [t for t in todo if index[t]["system"] == system],
                             progress=progress.each(lambda run_id, result: f"{run_id} -> {result['verdict']}, "
                                                                           f"score {result.get('violation_ratio')}"))
    print(f"[control_charts] {len(todo)} target runs charted -> {config.CONTROL_CHARTS / 'runs'}")


if __name__ == "__main__":
    config.install_error_hook()
    main()

