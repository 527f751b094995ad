"""commitsim: the embedded example of a benchmark history per commit, with its change points.

Writes ``data/example_commits/`` (contract §3 rows and the labels) from
``params.yaml: commitsim``; the simulator is :mod:`pipelines.simulators.commitsim`.
"""
from __future__ import annotations

import argparse
import gzip
import io
from pathlib import Path

from pipelines import config
from pipelines.simulators.commitsim import CommitHistory, simulate
from pipelines.storage import atomic


def main(argv: list[str] | None = None) -> None:

    params = config.load_params("commitsim")
    parser = argparse.ArgumentParser(prog="python -m pipelines.stages.commitsim", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(config.COMMIT_EXAMPLE), help="directory for the series and labels")
    args = parser.parse_args(argv)
    frame, truth = simulate(CommitHistory.from_params(params))
    out = Path(args.out)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        gz.write(frame.to_csv(index=False).encode())
    atomic.write_bytes_atomic(out / "benchmarks.csv.gz", buf.getvalue())
    atomic.write_json_atomic(out / "commit_labels.json", truth)
    changed = sum(1 for s in truth["series"].values() if s["change_index"])
    print(f"[commitsim] {len(truth['series'])} benchmarks ({changed} with changes) x {len(truth['commits'])} commits, "
          f"{len(frame):,} measurements -> {out}")


if __name__ == "__main__":
    config.install_error_hook()
    main()

