"""ingest: convert one test run's collector outputs into a contract archive.

``regresslab ingest RUN_DIR --out DIR`` (or ``python -m pipelines.cli.ingest``): the run
directory's files (JMeter, Gatling, k6, Locust, sysstat, pidstat, Prometheus, PerfMon) become
``DIR/<run_id>.tar.gz`` (:mod:`pipelines.importers.run_directory`).  What the files cannot say
comes from the lab's ``lab.yaml`` (beside the run directory, or ``--lab``), the run's
``run.yaml``, and the flags, each later one winning: ``--system``, ``--version``,
``--environment KEY=VALUE`` (repeatable), ``--verdict``, ``--cause``; so a run needs no
hand-written file when the lab file and the flags say it all.
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from pipelines import config
from pipelines.importers.run_directory import IngestError, archive_members, convert_run_dir
from pipelines.storage import atomic

log = logging.getLogger("regresslab.ingest")


def main(argv: list[str] | None = None) -> None:

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    parser = argparse.ArgumentParser(prog="python -m pipelines.cli.ingest", description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, default=Path("."), help="directory for <run_id>.tar.gz")
    parser.add_argument("--lab", type=Path, default=None, help="the lab file (default: lab.yaml beside the run)")
    parser.add_argument("--system")
    parser.add_argument("--version")
    parser.add_argument("--environment", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--verdict", choices=("pass", "fail"))
    parser.add_argument("--cause")
    args = parser.parse_args(argv)
    bad = [e for e in args.environment if "=" not in e or not e.split("=", 1)[0].strip()]
    if bad:
        parser.error(f"--environment takes KEY=VALUE, not {bad[0]!r}")
    fields = {"system": args.system, "version": args.version, "verdict": args.verdict, "cause": args.cause,
              "environment": dict(e.split("=", 1) for e in args.environment)}
    params = config.load_params("ingest")
    t0 = time.monotonic()
    try:
        meta, frames, notes = convert_run_dir(args.run_dir, params, fields, args.lab)
    except IngestError as exc:
        print(f"[ingest] {args.run_dir}: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    if not config.is_identifier(meta["run_id"]):
        print(f"[ingest] run_id {meta['run_id']!r} is not an identifier ([A-Za-z0-9][A-Za-z0-9._-]{{0,127}})",
              file=sys.stderr)
        raise SystemExit(2)
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / f"{meta['run_id']}.tar.gz"
    atomic.write_tar_gz_atomic(target, archive_members(meta, frames))
    for note in notes:
        print(f"[ingest]   {note}")
    counters = sum(f.shape[1] - 1 for f in frames.values())
    print(f"[ingest] {target}: {len(frames)} host(s), {counters} counters, started_at {meta['started_at']}, "
          f"duration {meta['duration_s']} s ({time.monotonic() - t0:.1f} s)")


if __name__ == "__main__":
    config.install_error_hook()
    main()

