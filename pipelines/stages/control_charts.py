"""control_charts: every counter of every target charted against its baseline.

The charts, violation ratios and calibration (Nguyen 2017 ch. 3, 6-7, seed 004) are
:mod:`pipelines.detectors.charts.control_charts`; a system's calibration and a target's charts, stored, are
:mod:`pipelines.detectors.charts.runs` (its :class:`~pipelines.detectors.charts.runs.ControlCharts`
detector).  This stage calibrates each system on its normal runs and writes the calibration and each
target's charts to ``data/processed/control_charts/``.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Callable, Iterator

from pipelines import config
from pipelines.stats import effects
from pipelines.systems import history
from pipelines.detectors.charts.runs import ControlCharts
from pipelines.detectors.charts.files import ChartResult
from pipelines.detectors.charts.control_charts import ControlChartParams
from pipelines.detection import judging
from pipelines.progress import Progress
from pipelines.storage import atomic, locks, manifest

log = logging.getLogger("regresslab.control_charts")


@locks.holding("control_charts calibration")
def calibrate_all() -> list[str]:
    """Calibrate every system; the systems (nightly DAG task)."""
    return judging.calibrate_every_system(ControlCharts(ControlChartParams.load()), history.HistoryParams.load(),
                                          effects.Significance.load())


def run_one(run_id: str) -> ChartResult:
    """Chart one target: a batch of one (:func:`batch`)."""
    with batch() as one:
        return one(run_id)


@contextmanager
def batch() -> Iterator[Callable[[str], ChartResult]]:
    """The per-run work of one nightly DAG task (:func:`run_one` is a batch of one): the history's
    frames and each system's calibration read once for the batch (:func:`judging.batch`)."""
    with judging.batch(ControlCharts(ControlChartParams.load()), history.HistoryParams.load(),
                       effects.Significance.load(), lock="control_charts batch") as one:
        yield one


@locks.holding("control_charts")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config.ensure_dirs(config.CONTROL_CHARTS / "calibration", config.CONTROL_CHARTS / "runs")
    index = manifest.read_valid_index()
    todo = history.targets(index)
    atomic.prune_outputs(config.CONTROL_CHARTS / "calibration", history.systems(index))
    atomic.prune_outputs(config.CONTROL_CHARTS / "runs", todo)
    progress = Progress(log, "control_charts", len(todo))

    def charted(run_id: str, out: tuple[ChartResult, bool]) -> str:
        result, kept = out
        return (f"{run_id} -> {result['verdict']}, score {result.get('violation_ratio')}"
                + (" (unchanged, reused)" if kept else ""))
    reused = judging.judge_night(ControlCharts(ControlChartParams.load()), todo, index, history.HistoryParams.load(),
                                 effects.Significance.load(), progress, charted)
    print(f"[control_charts] {len(todo)} target runs charted ({reused} unchanged since the last night, reused) "
          f"-> {config.CONTROL_CHARTS / 'runs'}")


if __name__ == "__main__":
    config.install_error_hook()
    main()
