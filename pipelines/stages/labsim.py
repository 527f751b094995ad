"""labsim: the embedded example, a simulated lab written as contract archives.

Writes ``data/example/<run_id>.tar.gz`` and ``target_labels.json`` (the truth of the
targets) from ``params.yaml: labsim``, deterministic for its seed; the simulator is
:mod:`pipelines.simulators.labsim`.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pipelines import config
from pipelines.simulators.labsim import build_lab
from pipelines.storage import archive


def main(argv: list[str] | None = None) -> None:

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
    labels: dict[str, Any] = {}
    written = 0
    for run_id, members, truth in build_lab(
            seed=args.seed, systems=args.systems, history_causes=args.history_causes,
            target_causes=args.target_causes, n_normal=args.n_normal, n_per_cause=args.n_per_cause,
            n_targets_normal=args.n_targets_normal, start=args.start,
            min_effect=params["min_effect"], min_rel_change=params["min_rel_change"],
            progress=True, process_cpu=args.process_cpu):
        archive.write_tar_gz_atomic(out / f"{run_id}.tar.gz", members)
        written += 1
        if not run_id.split("-")[-1].startswith("r"):
            labels[run_id] = truth
    # the truth of the unanalysed targets, in the layout of shared/data/smd/target_labels.json
    archive.write_json_atomic(out / "target_labels.json", labels)
    print(f"[labsim] wrote {written} archives ({len(labels)} unanalysed targets) to {out}")


if __name__ == "__main__":
    main()

