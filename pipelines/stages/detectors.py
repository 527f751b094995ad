"""detectors: every registered detector the night computes, on every target run.

A lab adds a detector as one package and one entry of ``report.detectors`` naming its reader
(``result``) and the class that computes it (``detector``, a
:class:`~pipelines.protocol.Detector` whose ``judge`` returns the run's result document:
:class:`~pipelines.detection.registry.DetectorSpec`).  This stage calibrates each such
detector on every system's history and judges each target under it
(:func:`~pipelines.detection.judging.judge_night`, as ``detect``, ``control_charts`` and
``clusters`` do), and writes each result to ``data/processed/detectors/<name>/<run_id>.json``,
which the report reads and its key hashes.  With no such entry it does nothing but say so.
"""
from __future__ import annotations

import logging
import shutil
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator, Mapping

from pipelines import config
from pipelines.detection import judging, registry
from pipelines.progress import Progress
from pipelines.stats import effects
from pipelines.storage import atomic, locks, manifest
from pipelines.systems import history
from pipelines.protocol import SystemHistory

log = logging.getLogger("regresslab.detectors")


class Computed:
    """A registered detector as the night runs it: its own calibration and judgement, each judged
    run's document written to the registry entry's ``file``; a document it keeps (``kept``) is
    kept only while that file is there."""

    def __init__(self, spec: registry.DetectorSpec) -> None:
        assert spec.detector is not None, f"{spec.name} names no detector class"
        self.spec, self.inner = spec, spec.detector()

    @property
    def name(self) -> str:
        return self.spec.name

    def calibrate(self, seen: SystemHistory, /) -> Any:
        return self.inner.calibrate(seen)

    def stored(self, seen: SystemHistory, /) -> Any:
        return self.inner.stored(seen)

    def kept(self, run_id: str, seen: SystemHistory, calibration: Any, /) -> Mapping[str, Any] | None:
        path = self.spec.result_path(run_id)
        doc = self.inner.kept(run_id, seen, calibration)
        return doc if doc is not None and path is not None and path.is_file() else None

    def judge(self, run_id: str, seen: SystemHistory, calibration: Any, /) -> Mapping[str, Any]:
        doc = self.inner.judge(run_id, seen, calibration)
        if not isinstance(doc, Mapping):
            raise TypeError(f"detector {self.name}: judge({run_id!r}) returned {type(doc).__name__}, not a mapping "
                            "(the run's result document)")
        path = self.spec.result_path(run_id)
        assert path is not None
        atomic.write_json_atomic(path, dict(doc))
        return doc


def registered() -> list[Computed]:
    """The registered detectors the night computes (``report.detectors`` naming ``detector``)."""
    return [Computed(spec) for spec in registry.computed(registry.registry(
        config.load_params("report")["detectors"]))]


def run_one(run_id: str) -> dict[str, Mapping[str, Any]]:
    """Every such detector on one target run, each result written: a batch of one (:func:`batch`)."""
    with batch() as one:
        return one(run_id)


@contextmanager
def batch() -> Iterator[Callable[[str], dict[str, Mapping[str, Any]]]]:
    """The per-run work of one nightly DAG task: each detector's calibration per system read once for
    the batch (:func:`judging.batch`); a run's results by detector."""
    detectors = registered()
    hist, significance = history.HistoryParams.load(), effects.Significance.load()
    with ExitStack() as stack:
        ones = {d.name: stack.enter_context(judging.batch(d, hist, significance, lock=f"detectors batch ({d.name})"))
                for d in detectors}
        for d in detectors:
            config.ensure_dirs(registry.own_results(d.name))
        yield lambda run_id: {name: one(run_id) for name, one in ones.items()}


@locks.holding("detectors")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    folder = config.ROOT / registry.OWN_RESULTS
    config.ensure_dirs(folder)
    detectors = registered()
    names = {d.name for d in detectors}
    for stale in sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink() and p.name not in names):
        shutil.rmtree(stale)          # a detector no longer registered: its results are no output of the night
    index = manifest.read_valid_index()
    todo = history.targets(index)
    hist, significance = history.HistoryParams.load(), effects.Significance.load()
    for detector in detectors:
        config.ensure_dirs(registry.own_results(detector.name))
        atomic.prune_outputs(registry.own_results(detector.name), todo)
        progress = Progress(log, f"detectors: {detector.name}", len(todo))

        def judged(run_id: str, out: tuple[Mapping[str, Any], bool]) -> str:
            doc, kept = out
            return f"{run_id} -> p {doc.get('p_value')}" + (" (unchanged, reused)" if kept else "")
        reused = judging.judge_night(detector, todo, index, hist, significance, progress, judged)
        print(f"[detectors] {detector.name}: {len(todo)} target runs judged ({reused} unchanged, reused) "
              f"-> {registry.own_results(detector.name)}")
    if not detectors:
        print("[detectors] no registered detector names a class the night computes (report.detectors: detector)")


if __name__ == "__main__":
    config.install_error_hook()
    main()
