"""Benchmark of the JMeter importer on a large result file: wall time, rows/s and peak memory.

    python bench/bench_ingest.py                 # 5,000,000 rows (< 60 s, < 2 GB)
    python bench/bench_ingest.py --rows 1000000 --keep /tmp/big

A CSV JTL with JMeter's 17 default columns is written first (50 labels, 200 threads, about
1,000 requests/s over the run, 2 % failures; labels quoted, as JMeter does when they hold a
comma). The conversion then runs in a fresh process (``python -m pipelines.cli.ingest`` on a run
directory holding that file), so the peak memory printed is the importer's own: pyarrow's
CSV reader streams the file in blocks and only the columns the counters need are kept.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
HEADER = ("timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,failureMessage,"
          "bytes,sentBytes,grpThreads,allThreads,URL,Latency,IdleTime,Connect\n")


def write_jtl(path: Path, rows: int, *, chunk: int = 500_000, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    labels = np.array([f'"GET /api/item/{i}, page"' if i % 7 == 0 else f"GET /api/item/{i}" for i in range(50)])
    start = 1_790_000_000_000
    with open(path, "w") as fh:
        fh.write(HEADER)
        for lo in range(0, rows, chunk):
            n = min(chunk, rows - lo)
            ts = start + (np.arange(lo, lo + n) * 1.0).astype(np.int64)           # 1,000 requests/s
            elapsed = rng.lognormal(3.5, 0.6, n).astype(np.int64)
            lab = labels[rng.integers(0, 50, n)]
            ok = rng.random(n) > 0.02
            thread = rng.integers(1, 201, n)
            lines = [f"{t},{e},{lb},{200 if s else 500},{'OK' if s else 'Server Error'},Thread Group 1-{th},text,"
                     f"{'true' if s else 'false'},,{1200 + e},310,200,200,http://app/api,{e - 1},0,3\n"
                     for t, e, lb, s, th in zip(ts.tolist(), elapsed.tolist(), lab.tolist(), ok.tolist(),
                                                thread.tolist())]
            fh.writelines(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--keep", type=Path, default=None, help="write the run directory here and keep it")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    run_dir = base / "bench-jmeter-run"
    run_dir.mkdir(parents=True, exist_ok=True)
    jtl = run_dir / "results.jtl"
    t0 = time.monotonic()
    if not jtl.exists():
        write_jtl(jtl, args.rows)
    (run_dir / "run.yaml").write_text("system: bench\nversion: '1'\nworkload: {profile: steady, load_counter: null}\n")
    size_mb = jtl.stat().st_size / 2**20
    print(f"[bench] {args.rows:,} rows, {size_mb:.0f} MB JTL written in {time.monotonic() - t0:.1f} s")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t1 = time.monotonic()
    subprocess.run([sys.executable, "-m", "pipelines.cli.ingest", str(run_dir), "--out", str(base)], check=True,
                   env=env, cwd=REPO, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t1
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"[bench] converted in {wall:.1f} s: {args.rows / wall:,.0f} rows/s, {size_mb / wall:.0f} MB/s, "
          f"peak memory {peak_mb:,.0f} MB (goal: < 60 s and < 2048 MB for 5,000,000 rows)")
    if args.keep is None:
        shutil.rmtree(base)


if __name__ == "__main__":
    main()
