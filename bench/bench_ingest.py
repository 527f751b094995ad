"""Benchmark of the importers: the JMeter importer on a large result file (wall time, rows/s and
peak memory), then every other reader's rows/s.

    python -m bench.bench_ingest                 # 5,000,000 rows (< 60 s, < 2 GB), then the others
    python -m bench.bench_ingest --rows 1000000 --keep /tmp/big
    python -m bench.bench_ingest --rows 0 --format-rows 200000     # the other readers only

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


def _records(fmt: str, n: int) -> bytes:
    """``n`` requests (load generators) or samples (system collectors) in ``fmt``'s layout."""
    import gzip
    import json

    from tests.helpers import GatlingBinaryLog

    t0 = 1_790_000_000_000
    if fmt == "jmeter_csv, date timeStamp":
        return ("timeStamp,elapsed,label,responseCode,success\n" + "".join(
            f"{time.strftime('%Y/%m/%d %H:%M:%S', time.gmtime(t0 // 1000 + i // 1000))}.{i % 1000:03d},"
            f"{20 + i % 50},GET /item/{i % 50},200,true\n" for i in range(n))).encode()
    if fmt.startswith("k6_csv"):
        text = ("metric_name,timestamp,metric_value,expected_response,name\n" + "".join(
            f"http_req_duration,{t0 // 1000 + i // 1000},{20 + i % 50}.5,true,item{i % 50}\n" for i in range(n)))
        return gzip.compress(text.encode(), 1) if fmt.endswith("gz") else text.encode()
    if fmt == "gatling":
        head = "RUN\tsim\tsim-1\t1790000000000\t \t3.9.5\n"
        return (head + "".join(f"REQUEST\t\titem{i % 50}\t{t0 + i}\t{t0 + i + 20 + i % 50}\tOK\t \n"
                               for i in range(n))).encode()
    if fmt == "gatling_binary":
        log = GatlingBinaryLog(t0)
        for i in range(n):
            log.request(f"item{i % 50}", t0 + i, t0 + i + 20 + i % 50, True)
        return bytes(log.out)
    if fmt == "sadf":
        return ("# hostname;interval;timestamp;CPU;%user;%system;%idle\n" + "".join(
            f"vm;1;{t0 // 1000 + i};-1;{i % 90}.0;1.0;{9 + i % 9}.0\n" for i in range(n))).encode()
    if fmt == "sadf_json":
        stats = [{"timestamp": {"date": time.strftime("%Y-%m-%d", time.gmtime(t0 // 1000 + i)),
                                "time": time.strftime("%H:%M:%S", time.gmtime(t0 // 1000 + i)), "utc": 1,
                                "interval": 1},
                  "cpu-load": [{"cpu": "all", "user": i % 90, "system": 1.0, "idle": 9.0}]} for i in range(n)]
        return json.dumps({"sysstat": {"hosts": [{"nodename": "vm", "number-of-cpus": 2,
                                                  "statistics": stats}]}}).encode()
    raise ValueError(fmt)


FORMATS = {"jmeter_csv, date timeStamp": "jmeter_csv", "k6_csv": "k6_csv", "k6_csv.gz": "k6_csv",
           "gatling": "gatling", "gatling_binary": "gatling_binary", "sadf": "sadf", "sadf_json": "sadf_json"}


def other_formats(rows: int, base: Path) -> None:
    """Each reader on ``rows`` generated records, in this process: rows/s (reading and aggregating)."""
    from pipelines.importers import collectors, common

    for label, fmt in FORMATS.items():
        suffix = ".gz" if "gz" in label else ""
        path = base / ("simulation.log" if fmt.startswith("gatling") else f"bench.{fmt}{suffix}")
        path.write_bytes(_records(label, rows))
        t = time.monotonic()
        with collectors.plain_file(path, max_bytes=1 << 34) as (plain, _):
            assert collectors.sniff(plain) == fmt, (label, collectors.sniff(plain))
            collectors.read_file(plain, fmt, host=None, timezone="UTC", aggregation=common.Aggregation(10.0, [50, 95], [95], 50))
        wall = time.monotonic() - t
        print(f"[bench] {label:28s} {rows:,} rows in {wall:5.2f} s: {rows / wall:>10,.0f} rows/s "
              f"({path.stat().st_size / 2**20:.0f} MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--keep", type=Path, default=None, help="write the run directory here and keep it")
    parser.add_argument("--format-rows", type=int, default=500_000, help="rows of each other format (0: none)")
    args = parser.parse_args()
    if args.rows == 0:
        with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
            other_formats(args.format_rows, Path(tmp))
        return
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
    if args.format_rows:
        other_formats(args.format_rows, base)
    if args.keep is None:
        shutil.rmtree(base)


if __name__ == "__main__":
    main()
