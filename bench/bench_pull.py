"""Benchmark of pull on a large store: the first night copies everything, the second (5 new
archives) should read only those.

    python bench/bench_pull.py                   # 10,000 archives of 64 KB in a local directory
    python bench/bench_pull.py --archives 2000 --size 262144

The store is a local directory of ``<run_id>.tar.gz`` files (random bytes: pull copies and hashes,
it does not open them).  Each night runs ``pipelines.storage.sources.pull`` into a fresh
``data/raw`` under a temporary directory; printed: wall time, bytes read from the store, archives
known from the listing alone.  Goal: the second night reads < 1 % of the first's bytes and lists
in < 10 s.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from pipelines.storage import sources  # noqa: E402 -- after the path is set


def night(store: Path, raw: Path, label: str) -> dict:
    t = time.monotonic()
    summary = sources.pull([str(store)], raw, max_archive_bytes=1 << 30)
    wall = time.monotonic() - t
    print(f"[bench] {label}: {wall:6.2f} s, {len(summary['new']):,} new, {summary['listed_known']:,} known from "
          f"the listing, {summary['bytes_read']:,} bytes read")
    return {"wall": wall, **summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--archives", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=65_536, help="bytes per archive")
    parser.add_argument("--new", type=int, default=5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="bench-pull-") as tmp:
        store, raw = Path(tmp) / "store", Path(tmp) / "raw"
        store.mkdir()
        t = time.monotonic()
        for i in range(args.archives):
            (store / f"lab-run-{i:06d}.tar.gz").write_bytes(os.urandom(args.size))
        print(f"[bench] store of {args.archives:,} archives x {args.size:,} bytes written in "
              f"{time.monotonic() - t:.1f} s")
        first = night(store, raw, "first night ")
        for i in range(args.new):
            (store / f"lab-run-new-{i}.tar.gz").write_bytes(os.urandom(args.size))
        second = night(store, raw, "second night")
        share = second["bytes_read"] / max(1, first["bytes_read"])
        print(f"[bench] second night: {share:.3%} of the first's bytes, {second['wall']:.2f} s "
              f"({second['wall'] / first['wall']:.3f} x the first) (goal: < 1 %, < 10 s)")


if __name__ == "__main__":
    main()
