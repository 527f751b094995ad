"""Benchmark of pull on a large store: the first night copies everything, the second (5 new
archives) should read only those.

    python -m bench.bench_pull                   # 10,000 archives of 64 KB in a local directory
    python -m bench.bench_pull --archives 2000 --size 262144
    python -m bench.bench_pull --s3              # the same store in a bucket of moto's S3 server, read by s3fs

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
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from pipelines.storage import sources  # noqa: E402 -- after the path is set


def local_store(path: Path):
    path.mkdir()
    return (lambda name, data: (path / name).write_bytes(data)), path, (lambda: None)


def s3_store():
    """A bucket in moto's S3 server on a local port, read by s3fs as a lab's bucket would be."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://{host}:{port}"})
    client = boto3.client("s3")
    client.create_bucket(Bucket="lab")
    return (lambda name, data: client.put_object(Bucket="lab", Key=f"runs/{name}", Body=data)), "s3://lab/runs", \
        server.stop


def night(store, raw: Path, label: str) -> dict:
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
    parser.add_argument("--s3", action="store_true", help="the store in moto's S3 server (moto[server], s3fs)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="bench-pull-") as tmp:
        raw = Path(tmp) / "raw"
        put, store, stop = s3_store() if args.s3 else local_store(Path(tmp) / "store")
        t = time.monotonic()
        for i in range(args.archives):
            put(f"lab-run-{i:06d}.tar.gz", os.urandom(args.size))
        print(f"[bench] store of {args.archives:,} archives x {args.size:,} bytes written in "
              f"{time.monotonic() - t:.1f} s ({store})")
        first = night(store, raw, "first night ")
        for i in range(args.new):
            put(f"lab-run-new-{i}.tar.gz", os.urandom(args.size))
        second = night(store, raw, "second night")
        stop()
        share = second["bytes_read"] / max(1, first["bytes_read"])
        print(f"[bench] second night: {share:.3%} of the first's bytes, {second['wall']:.2f} s "
              f"({second['wall'] / first['wall']:.3f} x the first) (goal: < 1 %, < 10 s)")


if __name__ == "__main__":
    main()
