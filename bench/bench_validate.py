"""Benchmark of validating one large archive: a 2,000-counter, 8-hour run.

    python -m bench.bench_validate                      # 2,000 counters x 8 h at 10 s, 4 hosts
    python -m bench.bench_validate --counters 500 --hours 1
    python -m bench.bench_validate --code /tmp/old    # a worktree of another commit, for before/after

The archive is written first (4 hosts of 500 counters, one sample every 10 s over 8 hours:
2,880 rows per host, 5.8 M cells, about 60 MB of CSV); then ``suites.validate_archive`` runs
on it in a fresh process, with the real Great Expectations suites, and the wall time and the
process's peak memory are printed, then the same work again as the stage runs it (in a forked
child held to ``validate.max_memory_mb`` and ``max_seconds``, ``storage.budget``). The checks
work on one row per host and one row per counter (``checks.counter_summary``), not on a long
frame of every cell, which used to be about 30x the CSV's size.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent

CHILD = """
import sys, time, resource, json
from pathlib import Path
from pipelines import config
try:                      # this layout, or an older checkout's flat one
    from pipelines.validation import suites as validate
except ImportError:
    from pipelines import validate
params = config.load_params("validate", Path(sys.argv[2]))
if hasattr(validate, "suites_from_params"):
    suites = validate.suites_from_params(params)
else:   # the code before the counter-level checks (a worktree of c8dbf90): one row per cell
    suites = validate.build_suites(min_samples_per_host=params["min_samples_per_host"], min_coverage=params["min_coverage"],
                                   max_duration_s=params["max_duration_s"], pct_range=tuple(params["pct_range"]),
                                   value_mostly=params["value_mostly"])
v = validate.Validator(suites, project_dir=None, docs_dir=None)
t = time.monotonic()
checked = validate.validate_archive(Path(sys.argv[1]), v, params)
wall = time.monotonic() - t
failures, dropped = checked[2], (checked.dropped if hasattr(checked, "dropped") else [])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024     # validate's, before the parse below
del checked
budgeted = None
try:                      # the same work as the stage does it: in a forked child held to a budget
    from pipelines.storage import atomic, budget
    t = time.monotonic()
    budget.run_within(budget.Budget.from_params(params), "validating the bench archive",
                      lambda: len(validate.validate_archive(Path(sys.argv[1]), v, params)[2]))
    budgeted = time.monotonic() - t
except ImportError:       # an older checkout, before the budget
    pass
parse = None
try:                      # merely reading and parsing the same CSVs (validate within 3x of this)
    try:
        from pipelines.importers import run_directory as ingest
        from pipelines.storage import archive, atomic
    except ImportError:
        from pipelines import archive, ingest
    t = time.monotonic()
    raw = ingest.read_run(Path(sys.argv[1]), params["limits"], config.load_params("ingest", Path(sys.argv[2])))
    frames = {h: archive.parse_counter_csv(b, h, params["limits"]) for h, b in raw.csv_bytes.items()}
    parse = time.monotonic() - t
except Exception:         # an older checkout without these functions
    pass
print(json.dumps({"wall": wall, "budgeted": budgeted, "parse": parse, "failures": len(failures), "dropped": len(dropped),
                  "peak_mb": peak}))
"""


def write_archive(path: Path, *, counters: int, hours: float, hosts: int = 4, period: float = 10.0) -> int:
    from pipelines.storage import atomic

    rng = np.random.default_rng(0)
    start = 1_790_000_000.0
    n = int(hours * 3600 / period)
    ts = start + period * np.arange(1, n + 1)
    members = {"run.json": json.dumps({
        "schema_version": 1, "run_id": path.name.split(".")[0], "system": "big", "version": "1",
        "started_at": pd.Timestamp(start, unit="s", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ"),
        "duration_s": hours * 3600, "workload": {"profile": "soak", "load_counter": None},
        "environment": {"cpu_cores": 16}, "verdict": "pass", "cause": "none"}).encode()}
    per_host = counters // hosts
    kinds = ["cpu_pct", "io_read_bytes_per_s", "queue_length", "response_time_ms", "heap_mb"]
    size = 0
    for h in range(hosts):
        host = f"node{h:02d}"
        cols = {"timestamp": np.round(ts + rng.normal(0, 1.0), 3)}
        for c in range(per_host):
            kind = kinds[c % len(kinds)]
            name = f"{host}.{kind}" if c == 0 else f"proc{c:04d}.{kind}"
            values = rng.uniform(5.0, 90.0, n) if kind == "cpu_pct" else rng.gamma(4.0, 10.0, n)
            cols[name if h == 0 else f"h{h}{name}"] = np.round(values, 3)
        data = pd.DataFrame(cols).to_csv(index=False).encode()
        members[f"counters/{host}.csv"] = data
        size += len(data)
    atomic.write_tar_gz_atomic(path, members)
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counters", type=int, default=2000)
    parser.add_argument("--hours", type=float, default=8.0)
    parser.add_argument("--code", type=Path, default=REPO,
                        help="a checkout whose pipelines/ and params.yaml to run (e.g. a worktree of an older commit)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-validate-") as tmp:
        path = Path(tmp) / "big-run-1.tar.gz"
        t0 = time.monotonic()
        csv_bytes = write_archive(path, counters=args.counters, hours=args.hours)
        print(f"[bench] {args.counters} counters x {args.hours:g} h: {csv_bytes / 2**20:.0f} MB of CSV "
              f"({path.stat().st_size / 2**20:.0f} MB compressed), written in {time.monotonic() - t0:.1f} s")
        out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(args.code / "params.yaml")],
                             capture_output=True, text=True, check=True, cwd=args.code,
                             env={**os.environ, "PYTHONPATH": str(args.code), "REGRESSLAB_ROOT": str(args.code)})
        res = json.loads(out.stdout.strip().splitlines()[-1])
        if res.get("parse"):
            print(f"[bench] reading and parsing the CSVs alone: {res['parse']:.1f} s; validate = "
                  f"{res['wall'] / res['parse']:.1f}x that")
        print(f"[bench] validated in {res['wall']:.1f} s, peak memory {res['peak_mb']:,.0f} MB "
              f"({res['peak_mb'] / (csv_bytes / 2**20):.1f}x the CSV); {res['failures']} failures, "
              f"{res['dropped']} counters dropped  [code: {args.code}]")
        if res.get("budgeted"):
            print(f"[bench] in a forked child held to validate's budget (as the stage runs it): "
                  f"{res['budgeted']:.1f} s ({res['budgeted'] / res['wall']:.2f}x)")


if __name__ == "__main__":
    main()
