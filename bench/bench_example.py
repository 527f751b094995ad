"""How long the example's night takes, stage by stage, to the night's report and to the end.

    make run                                                  # once: the example pulled and validated
    python -m bench.bench_example                             # this checkout, compute.jobs as in params.yaml
    python -m bench.bench_example --jobs 1                    # one process per stage
    python -m bench.bench_example --against 743202f           # also that commit's code, then the ratios

Every stage from ``normalize`` to ``evaluate`` runs in its own process (as ``dvc repro`` runs
them) on a copy of this checkout's validated example (``data/interim/valid``), so the code alone
differs between the trees; ``pull`` and ``validate`` are the same for both and are not run.
Printed: each stage's seconds, the seconds to the end of ``report`` (what a release manager waits
for) and to the end of ``evaluate``, and for ``--against`` the ratios; then whether the two trees
wrote the same verdict files and metrics (``--jobs`` changes no result).
"""
from __future__ import annotations

import argparse
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
from pipelines.orchestration import stage_graph  # noqa: E402 -- after the path is set

SHARED = ("data/interim/valid", "data/interim/valid_runs.json", "data/triage", "data/example",
          "data/raw", "reports/commits", "data/processed/commit_clusters.json", "objectives")


def tree_of(code: Path, dest: Path, jobs: int | None) -> Path:
    """A tree with ``code``'s pipelines, dvc.yaml and params.yaml, and this checkout's validated runs."""
    shutil.copytree(code / "pipelines", dest / "pipelines", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(code / "dvc.yaml", dest / "dvc.yaml")
    params = yaml.safe_load((code / "params.yaml").read_text())
    if jobs is not None and "compute" in params:
        params["compute"]["jobs"] = jobs
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for rel in SHARED:
        src = REPO / rel
        if src.is_dir():
            shutil.copytree(src, dest / rel, symlinks=True)
        elif src.exists():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dest / rel)
    return dest


def run(tree: Path, label: str) -> dict[str, float]:
    stages = stage_graph.select("normalize", through="evaluate", path=tree / "dvc.yaml")
    if "objectives" in stage_graph.read_stages(tree / "dvc.yaml"):     # the teams' objectives, judged before the report
        stages = ["objectives", *stages]
    stages = [s for s in stages if s != "commit_changes"]
    env = {**os.environ, "REGRESSLAB_ROOT": str(tree), "PYTHONPATH": str(tree)}
    times: dict[str, float] = {}
    with open(tree / "stages.log", "w") as log:
        for name in stages:
            t0 = time.monotonic()
            subprocess.run([sys.executable, "-m", f"pipelines.stages.{name}"], cwd=tree, env=env, check=True,
                           stdout=log, stderr=subprocess.STDOUT)
            times[name] = time.monotonic() - t0
            print(f"  {label} {name:15s} {times[name]:7.1f} s", flush=True)
    return times


def totals(times: dict[str, float]) -> tuple[float, float]:
    names = list(times)
    return sum(times[n] for n in names[:names.index("report") + 1]), sum(times.values())


def differences(a, b, path: str = "") -> list[str]:
    """The key paths where two JSON documents differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in differences(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [path or "."]


def same_results(a: Path, b: Path) -> dict[str, list[str]]:
    """The verdict files and metrics that differ between two trees, with the fields that differ
    (empty: byte for byte the same)."""
    differ = {}
    for rel in ("reports/runs", "metrics"):
        left, right = a / rel, b / rel
        for name in sorted({p.name for p in left.glob("*.json")} | {p.name for p in right.glob("*.json")}):
            x, y = left / name, right / name
            if x.exists() and y.exists() and filecmp.cmp(x, y, shallow=False):
                continue
            differ[f"{rel}/{name}"] = (differences(json.loads(x.read_text()), json.loads(y.read_text()))
                                       if x.exists() and y.exists() else ["only in one tree"])
    return differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=None, help="compute.jobs for this checkout's tree")
    parser.add_argument("--against", metavar="REV", help="also time this commit's code on the same runs")
    parser.add_argument("--keep", action="store_true", help="keep the trees (printed)")
    args = parser.parse_args()
    if not (REPO / "data/interim/valid_runs.json").exists():
        sys.exit("bench_example: run `make run` first (the example pulled and validated)")
    work = Path(tempfile.mkdtemp(prefix="bench_example_"))
    try:
        trees = {"now": tree_of(REPO, work / "now", args.jobs)}
        if args.against:
            code = work / "code"
            code.mkdir()
            archive = subprocess.run(["git", "-C", str(REPO), "archive", args.against], check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(code)], input=archive, check=True)
            trees[args.against] = tree_of(code, work / "before", None)
        results = {label: run(tree, label) for label, tree in trees.items()}
        for label, times in results.items():
            report, end = totals(times)
            print(f"{label}: to the night's report {report:.1f} s, to the end of evaluate {end:.1f} s")
        if args.against:
            (r0, e0), (r1, e1) = totals(results[args.against]), totals(results["now"])
            print(f"ratios now/{args.against}: to the report {r1 / r0:.2f}, to the end {e1 / e0:.2f}")
            for name in results["now"]:
                if name in results[args.against]:
                    print(f"  {name:15s} {results['now'][name] / results[args.against][name]:.2f}")
            differ = same_results(trees["now"], trees[args.against])
            fields = sorted({re.sub(r"\[\d+\]", "[]", f) for found in differ.values() for f in found})
            print("verdict files and metrics: " + ("identical" if not differ else
                                                    f"{len(differ)} files differ, in the fields {fields[:12]}"))
    finally:
        if args.keep:
            print(f"trees kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
