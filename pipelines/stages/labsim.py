"""labsim: the embedded example, a simulated lab written as contract archives.

Writes ``data/example/<run_id>.tar.gz`` and ``target_labels.json`` (the truth of the
targets) from ``params.yaml: labsim``, deterministic for its seed; the simulator is
:mod:`pipelines.simulators.labsim`.  The runs are simulated on ``compute.jobs`` processes
(each run draws from streams of its own seed, so the archives do not depend on the processes).
"""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipelines import config, parallel
from pipelines.progress import Progress
from pipelines.simulators.labsim import RunTruth, ScheduledRun, plan_lab, simulate_entry
from pipelines.storage import atomic

log = logging.getLogger("regresslab.labsim")


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    params = config.load_params("labsim")
    parser = argparse.ArgumentParser(prog="python -m pipelines.stages.labsim", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(config.EXAMPLE), help="directory for the archives")
    parser.add_argument("--seed", type=int, default=params["seed"])
    parser.add_argument("--systems", nargs="+", default=params["systems"])
    parser.add_argument("--n-normal", type=int, default=params["n_normal"])
    parser.add_argument("--n-per-cause", type=int, default=params["n_per_cause"])
    parser.add_argument("--history-causes", nargs="+", default=params["history_causes"])
    parser.add_argument("--target-causes", nargs="+", default=params["target_causes"])
    parser.add_argument("--n-targets-normal", type=int, default=params["n_targets_normal"])
    parser.add_argument("--start", default=params["start"])
    parser.add_argument("--process-cpu", choices=["share", "per_core"], default=params.get("process_cpu", "share"),
                        help="process CPU %%: a share of the host (0-100) or 100 per busy core (top, pidstat)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    schedule = plan_lab(seed=args.seed, systems=args.systems, history_causes=args.history_causes,
                        target_causes=args.target_causes, n_normal=args.n_normal, n_per_cause=args.n_per_cause,
                        n_targets_normal=args.n_targets_normal, start=args.start)

    def write(entry: ScheduledRun) -> tuple[str, RunTruth]:
        run_id, members, truth = simulate_entry(entry, min_effect=params["min_effect"],
                                                min_rel_change=params["min_rel_change"], process_cpu=args.process_cpu)
        atomic.write_tar_gz_atomic(out / f"{run_id}.tar.gz", members)
        return run_id, truth

    prog = Progress(log, "labsim", len(schedule))
    written = parallel.map_ordered(write, schedule, progress=prog.each(
        lambda entry, result: f"{result[0]} cause={entry['cause']} regressed={len(result[1]['regressed_counters'])}"))
    labels = {run_id: truth for run_id, truth in written if not run_id.split("-")[-1].startswith("r")}
    # the truth of the unanalysed targets, in the layout of shared/data/smd/target_labels.json
    atomic.write_json_atomic(out / "target_labels.json", labels)
    print(f"[labsim] wrote {len(written)} archives ({len(labels)} unanalysed targets) to {out}")


if __name__ == "__main__":
    config.install_error_hook()
    main()

