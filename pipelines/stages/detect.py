"""detect: the association-rule ensembles on every target run.

The ensembles (Foo et al. 2015 phases 3-6, seed 003) are
:mod:`pipelines.detectors.rules.ensemble`; a system's stacking calibration and a target's
detection, stored, are :mod:`pipelines.detectors.rules.runs` (its
:class:`~pipelines.detectors.rules.runs.AssociationRules` detector).  This stage calibrates
stacking on each system's normal runs, then analyses every target and writes
``data/processed/detections/<run_id>.json`` with stacking's p-value against the null of the
run's situation.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Callable, Iterator

from pipelines import config
from pipelines.stats import effects
from pipelines.systems import history
from pipelines.detectors.rules.runs import AssociationRules
from pipelines.detection import judging
from pipelines.progress import Progress
from pipelines.storage import atomic, locks, manifest
from pipelines.storage.stage_files import RuleDetection

log = logging.getLogger("regresslab.detect")


@locks.holding("detect calibration")
def calibrate_all() -> list[str]:
    """Calibrate stacking for every system; the systems (nightly DAG task)."""
    return judging.calibrate_every_system(AssociationRules.load(), history.HistoryParams.load(),
                                          effects.Significance.load())


def run_one(run_id: str) -> RuleDetection:
    """Detect on one target run and write its result: a batch of one (:func:`batch`).  A result
    computed under the same input key (``memo``: the run, its baseline, the lab's verified runs, the
    bins, the calibration, the params and the code) is kept as it is."""
    with batch() as one:
        return one(run_id)


@contextmanager
def batch() -> Iterator[Callable[[str], RuleDetection]]:
    """:func:`run_one` for the runs of one nightly DAG task: one shared hold of the data folder
    and, per system, its stored calibration and the history's rule models and binned runs, loaded
    once for the batch, not once per run (:func:`judging.batch`)."""
    with judging.batch(AssociationRules.load(), history.HistoryParams.load(), effects.Significance.load(),
                       lock="detect batch") as one:
        yield one


@locks.holding("detect")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config.ensure_dirs(config.DETECTIONS, config.SINGLE_MODELS, config.STACKING_CALIBRATION)
    index = manifest.read_valid_index()
    todo = history.targets(index)
    atomic.prune_outputs(config.STACKING_CALIBRATION, history.systems(index))
    atomic.prune_outputs(config.DETECTIONS, todo)
    progress = Progress(log, "detect", len(todo))

    def detected(run_id: str, out: tuple[RuleDetection, bool]) -> str:
        doc, kept = out
        return (f"{run_id} -> {doc['verdict']}, {len(doc['flagged_counters'])} flagged"
                + (" (unchanged, reused)" if kept else ""))
    reused = judging.judge_night(AssociationRules.load(), todo, index, history.HistoryParams.load(),
                                 effects.Significance.load(), progress, detected)
    print(f"[detect] {len(todo)} target runs analysed ({reused} unchanged since the last night, reused) "
          f"-> {config.DETECTIONS}")


if __name__ == "__main__":
    config.install_error_hook()
    main()
