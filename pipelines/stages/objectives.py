"""objectives: every run of a system that declares objectives, evaluated against them as Keptn's
quality gates are (docs/methods/objectives.md).

The files are ``objectives/<system>/slo.yaml`` and ``sli.yaml`` (:mod:`pipelines.objectives.files`);
the indicators' values come from each validated run's raw samples in its load phase
(:mod:`pipelines.objectives.indicators`); the evaluation is :mod:`pipelines.objectives.gates`.  A
system's runs are evaluated in the order they started, so that each run's relative criteria
compare with the evaluations before it, from its first run on.  Writes
``data/processed/objectives/<run_id>.json`` for each such run (its indicators' values are kept
there, and read again while the run's archive, its validation and its indicators are unchanged).
Files a night cannot use stop the stage, naming the file and the key (``regresslab check`` says so
before the night).
"""
from __future__ import annotations

import hashlib
import json
import logging
import sys

import pandas as pd

from pipelines import config
from pipelines.objectives.files import Gate, ObjectivesError, read_gates
from pipelines.objectives.gates import Evaluation, evaluate
from pipelines.objectives.indicators import indicator_values
from pipelines.progress import Progress
from pipelines.storage import atomic, locks, manifest
from pipelines.storage.run_records import RunRecord, ValidIndex

log = logging.getLogger("regresslab.objectives")


def values_key(run_id: str, gate: Gate) -> str:
    """What a run's indicator values are made from: its validated archive and the indicators."""
    meta = config.valid_dir(run_id) / "meta.json"
    validation = atomic.read_json(meta).get("_validation_key") if meta.exists() else None
    queries = sorted((i.name, i.aggregate, i.counter) for i in gate.indicators.values())
    return hashlib.sha256(json.dumps([validation, queries]).encode()).hexdigest()


def run_frames(run_id: str, counters: list[str]) -> dict[str, pd.DataFrame]:
    """The run's validated host frames, only the ``ts`` column and the ``counters`` each host has."""
    import pyarrow.parquet as pq

    frames = {}
    for path in sorted(config.valid_dir(run_id).glob("*.parquet")):
        names = set(pq.read_schema(path).names)
        wanted = [c for c in counters if c in names]
        if wanted:
            frames[path.stem] = atomic.read_parquet(path, columns=["ts", *wanted])
    return frames


def run_values(run_id: str, row: RunRecord, gate: Gate) -> dict[str, float | None]:
    """The run's indicator values, read from its earlier evaluation file when made from the same inputs."""
    key = values_key(run_id, gate)
    path = config.evaluation_path(run_id)
    if path.exists():
        kept = atomic.read_json(path)
        if kept.get("values_key") == key:
            return kept["values"]
    start = pd.Timestamp(row["started_at"]).timestamp()
    return indicator_values(run_frames(run_id, gate.counters()), gate.indicators, start=start,
                            duration_s=float(row["duration_s"]))


def system_runs(index: ValidIndex, system: str) -> list[str]:
    """A system's validated runs in the order they started."""
    return sorted((r for r, row in index.items() if row.get("system") == system),
                  key=lambda r: (str(index[r].get("started_at") or ""), r))


def evaluate_system(gate: Gate, index: ValidIndex, advisory: bool, progress: Progress) -> dict[str, Evaluation]:
    """Every run of the gate's system evaluated in order (each against the evaluations before it)
    and written; run -> its evaluation."""
    done: list[tuple[str, Evaluation]] = []
    for run_id in system_runs(index, gate.system):
        values = run_values(run_id, index[run_id], gate)
        evaluation = evaluate(gate, values, list(reversed(done)), advisory=advisory)
        atomic.write_json_atomic(config.evaluation_path(run_id), {
            "run_id": run_id, "system": gate.system, "gate": gate.digest, "values_key": values_key(run_id, gate),
            "values": values, "evaluation": evaluation.to_json()})
        done.append((run_id, evaluation))
        progress.done += 1
        progress.step(progress.done, f"{gate.system}: {evaluation.result}")
    return dict(done)


@locks.holding("objectives")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    params = config.load_params("objectives")
    try:
        gates = read_gates(config.OBJECTIVES_CONFIG, config.is_identifier)
    except ObjectivesError as exc:
        print(f"[objectives] FAILED: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    index = manifest.read_valid_index(every=True)
    config.ensure_dirs(config.OBJECTIVES)
    evaluated: dict[str, Evaluation] = {}
    progress = Progress(log, "objectives", sum(len(system_runs(index, s)) for s in gates), what="runs evaluated",
                        every=50)
    for gate in gates.values():
        evaluated.update(evaluate_system(gate, index, bool(params["advisory"]), progress))
    for stale in config.OBJECTIVES.glob("*.json"):
        if stale.stem not in evaluated:          # a system whose objectives were removed, a run no longer valid
            stale.unlink()
    counts = {r: sum(e.result == r for e in evaluated.values()) for r in ("pass", "warning", "fail")}
    print(f"[objectives] {len(gates)} system(s) with objectives, {len(evaluated)} run(s) evaluated: "
          f"{counts['pass']} pass, {counts['warning']} warning, {counts['fail']} fail")


if __name__ == "__main__":
    config.install_error_hook()
    main()
