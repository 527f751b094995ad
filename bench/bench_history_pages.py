"""How long a system's counter-history pages take, and how large they are, at scale.

    python -m bench.bench_history_pages                       # 100 nights x 2,000 counters, synthetic
    python -m bench.bench_history_pages --nights 100 --counters 2000 --intervals 240
    python -m bench.bench_history_pages --root /path/to/a/tree   # an analysed tree as it is

Synthetic: one system, ``--nights`` runs (one a night, the first 80 % verified, the rest
targets with a verdict file), each a normalised frame of ``--intervals`` x ``--counters``; each
target's verdict file flags ``--flagged`` counters and scores 15 more (what its page lists), and
each night has its summary, so the pages written are those the report stage writes for the
last ``report.history_nights`` nights.  Prints the seconds of the first build (every frame
read for its medians), of the next night's (medians reused), the pages written, and the
largest and total page sizes.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd


from pipelines import config  # noqa: E402
from pipelines.systems import history  # noqa: E402
from pipelines.reporting import counter_history  # noqa: E402
from pipelines.storage import atomic, manifest  # noqa: E402


def synthesise(root: Path, nights: int, counters: int, intervals: int, flagged: int, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    (root / "params.yaml").write_text((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    config.use_root(root)
    names = [f"host{i % 8:02d}.counter_{i:04d}_pct" for i in range(counters)]
    levels = rng.uniform(1, 100, counters)
    index = {}
    verified = int(nights * 0.8)
    for n in range(nights):
        run = f"big-2026-{n:04d}"
        day = pd.Timestamp("2026-01-01") + pd.Timedelta(days=n)
        index[run] = {"system": "big", "verdict": ("fail" if n % 9 == 0 else "pass") if n < verified else None,
                      "version": f"1.{n // 10}", "started_at": day.isoformat() + "Z", "environment": {}}
        frame = pd.DataFrame(levels * (1 + 0.002 * n) + rng.normal(0, 1, (intervals, counters)), columns=names)
        atomic.write_parquet_atomic(config.frame_path(run), frame.astype("float32"))
        atomic.write_json_atomic(config.info_path(run), {"key": f"k-{run}"})
        if n >= verified:
            chosen = rng.choice(counters, flagged + 15, replace=False)
            atomic.write_json_atomic(config.run_report_path(run), {
                "run_id": run, "system": "big", "verdict": "fail" if n % 3 == 0 else "pass",
                "flagged_counters": [names[i] for i in chosen[:flagged]],
                "counter_scores": {names[i]: 1.0 for i in chosen},
                "baseline_runs": [{"run_id": f"big-2026-{k:04d}", "weight": 0.05} for k in range(n - 20, n)]})
            atomic.write_json_atomic(config.NIGHTS / f"{day.date()}.json",
                                      {"night": str(day.date()), "runs": {run: {}}})
    atomic.write_json_atomic(config.VALID_INDEX, {"valid": index})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", help="an analysed tree (its reports/systems is rewritten)")
    parser.add_argument("--nights", type=int, default=100)
    parser.add_argument("--counters", type=int, default=2000)
    parser.add_argument("--intervals", type=int, default=240)
    parser.add_argument("--flagged", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        if args.root:
            config.use_root(args.root)
        else:
            t0 = time.monotonic()
            synthesise(Path(tmp), args.nights, args.counters, args.intervals, args.flagged)
            print(f"synthetic tree: {args.nights} runs x {args.counters} counters x {args.intervals} intervals "
                  f"in {time.monotonic() - t0:.1f} s")
        index = manifest.read_valid_index()
        params = config.load_params("report")
        for label in ("first night (every run's medians from its frame)", "next night (medians reused)"):
            t0 = time.monotonic()
            out = counter_history.write_system_pages(index, history.targets(index), params)
            print(f"{label}: {time.monotonic() - t0:.1f} s; " +
                  ", ".join(f"{s}: {v['pages']} pages of {v['counters']} counters over {v['runs']} runs"
                            for s, v in out.items()))
        pages = list((config.REPORTS / "systems").rglob("*.html"))
        sizes = sorted(p.stat().st_size for p in pages)
        print(f"pages: {len(pages)}, largest {sizes[-1] / 1e6:.2f} MB, median {sizes[len(sizes) // 2] / 1e3:.0f} kB, "
              f"total {sum(sizes) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
