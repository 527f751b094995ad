"""Our commit-series detectors (Skia, Mono, PELT and the ``mono+pelt`` combination:
``pipelines/commit_series/series.py``) side by side with the
peers on the same labelled series: Apache Otava (E-Divisive with Hunter's windows, PyPI
``apache-otava``), MongoDB's ``signal-processing-algorithms`` (E-Divisive with permutation
tests) and the detector that reports no change at all.

    python -m bench.compare_commit_detectors [--seeds 1 2 3] [--margin 5] [--django PATH]

The peers pin numpy versions that conflict with this project's (Otava pins numpy 2.2.0), so each
is installed in its own virtual environment under ``--venvs`` (created on first use, from
PyPI) and run there by a small script that reads the series from a JSON file and writes the
change points it finds.  Every detector sees the same per-commit values (the median of a
commit's measurements; Mono also uses the measurements themselves, which is its method).

Labelled sets: ``pipelines.simulators.commitsim`` histories (the example's parameters, one per seed), with
changes of 4-25 % in groups of benchmarks, bimodal runs, outliers and auto-correlation.  A
detection counts within ``--margin`` commits of a labelled change.  Printed per detector: pooled
precision, recall and F1, the F1 of change-point benchmarks (the series start counted in both
sets, per series, averaged: van den Burg & Williams 2020), wall time, and F1 and time as ratios
to Otava's.  On ``--django`` (Django's benchmark history, no change labelled) it prints how many
changes each detector raises per 100 commits of one series: a false-alarm rate, if nothing
changed.  ``commitsim.realistic`` histories (one value per commit: quiet, autocorrelated,
drifting, outlying, heavy-tailed and seasonal series with no change; steps; changes of spread)
give a table per class, each row beside the no-change detector.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
import venv
from pathlib import Path

import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]

from pipelines.commit_series import series as commit_series
from pipelines.commit_series import skia
from pipelines.simulators import commitsim

PEERS = {
    "otava": {"package": "apache-otava==0.8.0", "script": """
import json, sys, time
from otava.analysis import compute_change_points
series = json.load(open(sys.argv[1]))
t0 = time.perf_counter()
out = {}
for name, values in series.items():
    cps, _ = compute_change_points(values, window_len=50, max_pvalue=0.001)
    out[name] = sorted(int(cp.index) for cp in cps)
json.dump({"changes": out, "seconds": time.perf_counter() - t0}, open(sys.argv[2], "w"))
"""},
    "mongodb_spa": {"package": "signal-processing-algorithms==2.1.6", "script": """
import json, sys, time
import numpy as np
from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive
series = json.load(open(sys.argv[1]))
t0 = time.perf_counter()
out = {}
for name, values in series.items():
    out[name] = sorted(int(i) for i in e_divisive(np.asarray(values, dtype=float), pvalue=0.01, permutations=100))
json.dump({"changes": out, "seconds": time.perf_counter() - t0}, open(sys.argv[2], "w"))
"""},
}


def peer_python(name: str, root: Path) -> Path:
    """The peer's own virtual environment (created and filled from PyPI on first use)."""
    env = root / name
    python = env / "bin" / "python"
    if not python.exists():
        print(f"[bench] installing {PEERS[name]['package']} into {env} ...", flush=True)
        venv.create(env, with_pip=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", PEERS[name]["package"]], check=True)
    return python


def run_peer(name: str, traces: dict[str, list[float]], root: Path) -> tuple[dict[str, list[int]], float]:
    with tempfile.TemporaryDirectory() as tmp:
        src, out, script = Path(tmp) / "series.json", Path(tmp) / "out.json", Path(tmp) / "run.py"
        src.write_text(json.dumps(traces))
        script.write_text(PEERS[name]["script"])
        subprocess.run([str(peer_python(name, root)), str(script), str(src), str(out)], check=True)
        result = json.loads(out.read_text())
    return {k: list(v) for k, v in result["changes"].items()}, float(result["seconds"])


OURS = ("skia", "mono", "pelt", "mono+pelt", "level_shift")


def add_peers(found: dict, seconds: dict, frame: pd.DataFrame, commits: list[str], root: Path, *,
              no_change: bool = True) -> int:
    """The peers' changes (and the no-change detector's) beside ours, on the same per-commit
    values; the number of series."""
    table = commit_series.trace_matrix(commit_series.check_frame(frame), commits)
    traces = {s: [float(x) for x in table.loc[s]] for s in table.index}
    for name in PEERS:
        found[name], seconds[name] = run_peer(name, traces, root)
    if no_change:
        found["no_change"], seconds["no_change"] = {}, 0.0
    return len(traces)


def ours(frame: pd.DataFrame, params: dict, groupings: list[str] | None = None
         ) -> tuple[dict[str, dict[str, list[int]]], dict[str, float], list[str]]:
    """Each of our methods' change indices per series (``commit_series.detect_all`` with that
    ``method``), and its time; with ``groupings``, Skia once per grouping (``skia (kmeans)``, ...)."""
    frame = commit_series.check_frame(frame)
    commits = commit_series.commit_order(frame)
    pos = {c: i for i, c in enumerate(commits)}
    found, seconds = {}, {}
    runs = [(m, params) for m in OURS if m != "skia" or not groupings]
    runs += [(f"skia ({g})", {**params, "skia": {**params["skia"], "grouping": g}}) for g in groupings or []]
    for name, p in runs:
        t0 = time.perf_counter()
        result = commit_series.detect_all(frame, {**p, "method": name.split(" ")[0]})
        seconds[name] = time.perf_counter() - t0
        by_series: dict[str, list[int]] = {}
        for ch in commit_series.all_changes(result):
            by_series.setdefault(ch["series"], []).append(pos[ch["commit"]])
        found[name] = by_series
    return found, seconds, commits


def realistic_table(seeds: list[int], params: dict, margin: int, root: Path, n_commits: int) -> None:
    """F1 (series start counted) per class of ``commitsim.realistic`` and per detector, beside
    the no-change detector: a row that does not beat it says so."""
    scores: dict[str, dict[str, list[float]]] = {}
    seconds: dict[str, float] = {}
    for seed in seeds:
        frame, truth = commitsim.realistic(seed=seed, n_commits=n_commits)
        found, secs, commits = ours(frame, params)
        n_series = add_peers(found, secs, frame, commits, root)
        for name, det in found.items():
            seconds[name] = seconds.get(name, 0.0) + secs[name]
            for cls in commitsim.CLASSES:
                labels = {s: v["change_index"] for s, v in truth["series"].items() if v["class"] == cls}
                m = commit_series.f1_scores({s: det.get(s, []) for s in labels}, labels, margin=margin)
                scores.setdefault(name, {}).setdefault(cls, []).append(m["f1_tcpd"])
        print(f"[bench] realistic seed {seed}: {n_series} series x {len(commits)} commits", flush=True)
    mean = {n: {c: sum(v) / len(v) for c, v in per.items()} for n, per in scores.items()}
    base = mean["no_change"]
    print(f"\nOne value per commit ({len(seeds)} seeds x {len(commitsim.CLASSES)} classes x 6 series, "
          f"{n_commits} commits): F1, series start counted")
    print("| detector | " + " | ".join(commitsim.CLASSES) + " | mean | seconds | below no-change on |")
    print("|---|" + "---|" * (len(commitsim.CLASSES) + 3))
    for name, per in mean.items():
        worse = [c for c in commitsim.CLASSES if per[c] < base[c] - 1e-9]
        print(f"| {name} | " + " | ".join(f"{per[c]:.3f}" for c in commitsim.CLASSES) +
              f" | {sum(per.values()) / len(per):.3f} | {seconds[name]:.1f} | {', '.join(worse) or '-'} |")


def simulated(seed: int, sim: dict, labels: bool = False):
    """The example's commit history (``commitsim`` params) for one seed; with ``labels``, its truth too."""
    frame, truth = commitsim.simulate(commitsim.CommitHistory.from_params(sim, seed=seed))
    return (frame, truth) if labels else frame


def ruptures_pelt_table(frames: list[tuple[str, pd.DataFrame]], params: dict) -> None:
    """PELT's search hand-written (``change_points.segment``) and ``ruptures.Pelt(model="normal")``
    on the same cleaned series: the change points each finds and the time."""
    import numpy as np
    import ruptures

    from pipelines.commit_series import change_points

    def search(z, *, penalty, min_segment, var_floor=1e-2):
        size = max(2, min_segment)
        if z.size < 2 * size:
            return []
        algo = ruptures.Pelt(model="normal", min_size=size, jump=1).fit(z.reshape(-1, 1))
        return [int(b) for b in algo.predict(pen=penalty * np.log(z.size)) if b < z.size]

    pp = change_points.pelt_params(params["pelt"])
    tables = []
    for _, frame in frames:
        frame = commit_series.check_frame(frame)
        tables.append(commit_series.trace_matrix(frame, commit_series.commit_order(frame)))
    hand = change_points.segment
    print("\n| search | change points (" + "; ".join(n for n, _ in frames) + ") | seconds |\n|---|---|---|")
    for name, fn in (("hand-written", hand), (f"ruptures {ruptures.__version__} Pelt(model=normal)", search)):
        change_points.segment = fn
        try:
            t0 = time.perf_counter()
            counts = [len(change_points.pelt_changes(t, **pp)) for t in tables]
            print(f"| {name} | {', '.join(map(str, counts))} | {time.perf_counter() - t0:.1f} |", flush=True)
        finally:
            change_points.segment = hand


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[11, 12, 13])
    parser.add_argument("--margin", type=int, default=5)
    parser.add_argument("--venvs", default=str(REPO / "build" / "peer_venvs"))
    parser.add_argument("--django", default=str(REPO.parent / "shared" / "data" / "django_asv" / "django_asv_py312.csv.gz"))
    parser.add_argument("--django-series", type=int, default=12, help="series of the Django history to run (0: all)")
    parser.add_argument("--skia-groupings", nargs="*", default=None, choices=list(skia.GROUPINGS),
                        help="run Skia once per grouping (default: once, with params.yaml's)")
    parser.add_argument("--realistic-seeds", type=int, nargs="*", default=[1, 2, 3],
                        help="seeds of commitsim.realistic, one value per commit (none: skip)")
    parser.add_argument("--realistic-commits", type=int, default=400)
    parser.add_argument("--ruptures-pelt", action="store_true",
                        help="only: PELT's hand-written search against ruptures' on the example histories and Django")
    args = parser.parse_args()
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    sim, cparams = params["commitsim"], params["commit_changes"]
    root = Path(args.venvs)
    if args.ruptures_pelt:
        frames = [(f"seed {seed}", simulated(seed, sim)) for seed in args.seeds]
        if Path(args.django).exists():
            frames.append(("Django", pd.read_csv(args.django, dtype={"commit": str})))
        ruptures_pelt_table(frames, cparams)
        return
    totals: dict[str, dict] = {}
    for seed in args.seeds:
        frame, truth = simulated(seed, sim, labels=True)
        found, seconds, commits = ours(frame, cparams, args.skia_groupings)
        pos = {c: i for i, c in enumerate(commits)}
        labels = {s: [pos[c] for c in v["change_commits"]] for s, v in truth["series"].items()}
        n_series = add_peers(found, seconds, frame, commits, root)
        for name, det in found.items():
            m = commit_series.f1_scores(det, labels, margin=args.margin)
            agg = totals.setdefault(name, {"tp": 0, "fp": 0, "fn": 0, "f1_tcpd": [], "seconds": 0.0})
            tp = round(m["recall"] * m["true_changes"])
            agg["tp"] += tp
            agg["fp"] += m["detected"] - tp
            agg["fn"] += m["true_changes"] - tp
            agg["f1_tcpd"].append(m["f1_tcpd"])
            agg["seconds"] += seconds[name]
        print(f"[bench] seed {seed}: {n_series} series x {len(commits)} commits, "
              f"{sum(len(v) for v in labels.values())} labelled changes", flush=True)
    print("\n| detector | precision | recall | F1 | F1 (start counted) | seconds | F1 / Otava's | time / Otava's |")
    print("|---|---|---|---|---|---|---|---|")
    rows = {}
    for name, a in totals.items():
        p = a["tp"] / (a["tp"] + a["fp"]) if a["tp"] + a["fp"] else 1.0
        r = a["tp"] / (a["tp"] + a["fn"]) if a["tp"] + a["fn"] else 1.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        rows[name] = (p, r, f1, sum(a["f1_tcpd"]) / len(a["f1_tcpd"]), a["seconds"])
    base = rows["otava"]
    for name, (p, r, f1, tc, s) in rows.items():
        print(f"| {name} | {p:.3f} | {r:.3f} | {f1:.3f} | {tc:.3f} | {s:.1f} | "
              f"{f1 / base[2] if base[2] else float('nan'):.2f} | {s / base[4] if base[4] else float('nan'):.2f} |")
    if args.realistic_seeds:
        realistic_table(args.realistic_seeds, cparams, args.margin, root, args.realistic_commits)
    if args.django and Path(args.django).exists():
        frame = commit_series.check_frame(pd.read_csv(args.django, dtype={"commit": str}))
        if args.django_series:
            keep = sorted(frame["benchmark"].unique())[: args.django_series]
            frame = frame[frame["benchmark"].isin(keep)]
        found, seconds, commits = ours(frame, cparams, args.skia_groupings)
        n_series = add_peers(found, seconds, frame, commits, root, no_change=False)
        print(f"\nDjango ({n_series} series x {len(commits)} commits, no change labelled): changes per 100 commits "
              f"of one series")
        print("| detector | changes | per 100 commits per series | seconds |")
        print("|---|---|---|---|")
        for name, det in found.items():
            n = sum(len(v) for v in det.values())
            print(f"| {name} | {n} | {100 * n / len(commits) / n_series:.2f} | {seconds[name]:.1f} |")


if __name__ == "__main__":
    main()
