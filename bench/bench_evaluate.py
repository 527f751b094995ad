"""Benchmark of the ``evaluate`` stage (all leave-one-out scoring): wall time and peak memory.

    python -m bench.bench_evaluate                      # this checkout's code, on this checkout's data
    python -m bench.bench_evaluate --code /tmp/old      # another checkout's code (e.g. a git worktree of
                                                        # an older commit), on the same data
    python -m bench.bench_evaluate --root build/smd     # a real set's tree (make real-smd)

Run it after ``make run`` (the example's stages must have run).  Each repeat is a fresh
process (``python -m pipelines.stages.evaluate``), so the peak memory is the stage's own; the first
repeat fills the leave-one-out model cache (``data/cache/loo``), so the figure printed is
the median of the later ones, the cost of a night's ``evaluate`` once the cache is warm.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_once(code: Path, root: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one ``evaluate`` in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(code), "REGRESSLAB_ROOT": str(root)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pipelines.stages.evaluate"], cwd=code, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(peak, before) / 1024.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--code", type=Path, default=REPO, help="checkout whose pipelines/ runs")
    ap.add_argument("--root", type=Path, default=REPO, help="project tree with the data (REGRESSLAB_ROOT)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    times, peaks = [], []
    for i in range(args.repeats):
        wall, peak = run_once(args.code.resolve(), args.root.resolve())
        times.append(wall)
        peaks.append(peak)
        print(f"repeat {i + 1}/{args.repeats}: {wall:.1f} s, peak RSS {peak:.0f} MB", flush=True)
    warm = times[1:] or times
    print(f"evaluate  code={args.code}  root={args.root}")
    print(f"  warm wall time (median of {len(warm)}): {statistics.median(warm):.1f} s; first (cold cache): "
          f"{times[0]:.1f} s; peak RSS {max(peaks):.0f} MB")


if __name__ == "__main__":
    main()
