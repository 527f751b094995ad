"""One whole night at scale, stage by stage, then the second night with one new archive.

    python -m bench.bench_night                                   # 100 runs, 2,000 counters, 8 h at 15 s
    python -m bench.bench_night --runs 20 --counters 500 --hours 2   # a smaller night
    python -m bench.bench_night --keep /tmp/night                 # keep the scratch tree; run again: the same
                                                                  # archives are reused, the tree starts empty
    python -m bench.bench_night --keep /tmp/night --next-night    # one more night on the kept tree, with one
                                                                  # more new archive (no first night)

A generated history (``--runs`` passed runs of ``--counters`` counters on 4 hosts, ``--hours``
long, one sample every ``--period`` s) plus ``--targets`` new runs, the last of which has a step
in 5 % of its counters, is written as archives into a scratch source; then every stage of
``dvc.yaml`` from ``pull`` to ``report`` runs in a scratch tree (``python -m pipelines.stages.<stage>``,
as ``dvc repro`` runs them; ``evaluate`` is left out: it is the analysts' leave-one-out, not
part of a night), each in its own process, and the wall time and peak memory (the process's
largest resident set, from ``wait4``) of each stage are printed.  Then one more archive arrives
and the night runs again: the second night's total as a share of the first's.

The stages run a snapshot of ``pipelines/`` copied into the scratch folder when the bench
starts, so that editing the code during a long bench cannot change the stages' input keys
between the two nights (a changed module is a changed key: every result would be computed again).

The counters behave as real ones do (:func:`write_run`): they follow a dozen latent factors of
the run (the load and the system's slow moods) with their own autocorrelated, sometimes
heavy-tailed noise, and latencies time out now and then; so the association rules, the charts
and the clusters find the structure real data has.  Each run has its own seed and start time
(9 hours apart).  Goals (on this 2-core machine, 5 targets): 105 archives, first night within 8
minutes and 5 GiB, the second within 10 % of the first; 300 archives within 15 minutes and 6 GiB.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

REPO = Path(__file__).resolve().parent.parent
from pipelines.orchestration import stage_graph  # noqa: E402 -- after the path is set

STAGES = stage_graph.select("pull", through="report")
KINDS = ("cpu_pct", "io_read_bytes_per_s", "queue_length", "response_time_ms", "heap_mb")


FACTORS = 12                      # latent factors the counters of a run share (the load is the first)


def counter_structure(counters: int) -> dict[str, np.ndarray]:
    """What a counter is, the same in every run (seeded by nothing but the counter count): its kind,
    base level, which latent factors it follows and how much (1-3 of them, sparse), its own noise's
    autocorrelation and size, whether its noise has heavy tails, and whether it is a latency that
    times out now and then."""
    rng = np.random.default_rng(counters)
    loadings = np.zeros((counters, FACTORS))
    for c in range(counters):
        for k in rng.choice(FACTORS, size=int(rng.integers(1, 4)), replace=False):
            loadings[c, k] = rng.uniform(0.05, 0.6) * rng.choice([1, 1, 1, -1])
    kinds = np.array([c % len(KINDS) for c in range(counters)])
    return {"kind": kinds, "base": rng.uniform(20.0, 80.0, counters), "loadings": loadings,
            "phi": rng.uniform(0.3, 0.9, counters), "noise": rng.uniform(0.02, 0.10, counters),
            "heavy": rng.random(counters) < 0.2,
            "timeouts": (kinds == KINDS.index("response_time_ms")) & (rng.random(counters) < 0.5)}


def ar1(rng: np.random.Generator, n: int, phi: np.ndarray, size: int) -> np.ndarray:
    """``size`` AR(1) series of ``n`` steps (marginal sd 1), one per ``phi``: ``n`` x ``size``."""
    out = np.empty((n, size))
    out[0] = rng.normal(0.0, 1.0, size)
    innov = rng.normal(0.0, 1.0, (n, size)) * np.sqrt(1.0 - phi * phi)
    for t in range(1, n):
        out[t] = phi * out[t - 1] + innov[t]
    return out


def write_run(path: Path, *, run_id: str, index: int, counters: int, hours: float, period: float, hosts: int,
              verdict: str | None, shift_share: float = 0.0) -> int:
    """One archive: ``counters`` counters over ``hosts`` hosts that behave as real ones do; returns its
    CSV bytes.  Each counter follows a few of :data:`FACTORS` latent factors of the run (the load
    curve and eleven slow AR(1) moods of the system, φ 0.95-0.995), plus its own AR(1) noise
    (φ 0.3-0.9; Student-t with 3 degrees of freedom for a fifth of them), on a level that differs a
    little from run to run (2 %); half the latencies time out now and then (a few samples 10-300x
    their level, in whichever service, 1-4 bursts a run), as TrainTicket's do (:func:`counter_structure`)."""
    from pipelines.storage import atomic

    rng = np.random.default_rng(1000 + index)
    start = 1_790_000_000.0 + index * 9 * 3600.0
    n = int(hours * 3600 / period)
    t = np.arange(1, n + 1)
    load = 1.0 + 0.3 * np.sin(2 * np.pi * t / max(n / 3, 1)) + rng.normal(0, 0.05, n)
    members = {"run.json": json.dumps({
        "schema_version": 1, "run_id": run_id, "system": "big", "version": str(index),
        "started_at": pd.Timestamp(start, unit="s", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ"),
        "duration_s": hours * 3600, "workload": {"profile": "soak", "load_counter": None},
        "environment": {"cpu_cores": 16}, "verdict": verdict,
        "cause": None if verdict is None else ("none" if verdict == "pass" else "step")}).encode()}
    per_host = counters // hosts
    shape = counter_structure(per_host * hosts)
    factors = np.column_stack([load - 1.0, ar1(rng, n, rng.uniform(0.95, 0.995, FACTORS - 1), FACTORS - 1) * 0.3])
    shifted = set(np.flatnonzero(np.random.default_rng(7).random(counters) < shift_share)) if shift_share else set()
    bursts = [(int(rng.integers(0, max(n - 8, 1))), int(rng.integers(2, 8))) for _ in range(int(rng.integers(1, 5)))]
    size = 0
    for h in range(hosts):
        cols = {"timestamp": np.round(start + period * t + rng.normal(0, 0.5, n), 3)}
        idx = np.arange(h * per_host, (h + 1) * per_host)
        own = ar1(rng, n, shape["phi"][idx], per_host)
        heavy = shape["heavy"][idx]
        if heavy.any():
            own[:, heavy] += 0.5 * rng.standard_t(3, (n, int(heavy.sum())))
        level = shape["base"][idx] * (1.0 + rng.normal(0.0, 0.02, per_host))
        values = level * (1.0 + factors @ shape["loadings"][idx].T + own * shape["noise"][idx])
        for b0, width in bursts:                           # timeouts: a few latencies of the burst, 10-300x
            hit = idx[shape["timeouts"][idx] & (rng.random(per_host) < 0.1)] - h * per_host
            if hit.size:
                values[b0:b0 + width, hit] *= rng.uniform(10.0, 300.0, hit.size)
        for j, c in enumerate(idx):
            kind = KINDS[shape["kind"][c]]
            v = values[:, j]
            if c in shifted:
                v = v.copy()
                v[n // 2:] *= 1.4
            cols[f"node{h:02d}.{kind}_{j:04d}"] = np.round(np.clip(v, 0, 100 if kind == "cpu_pct" else None), 3)
        data = pd.DataFrame(cols).to_csv(index=False).encode()
        members[f"counters/node{h:02d}.csv"] = data
        size += len(data)
    atomic.write_tar_gz_atomic(path, members)
    return size


def snapshot(scratch: Path) -> Path:
    """A copy of the project's ``pipelines`` package, which the stages of the bench run."""
    code = scratch / "code"
    shutil.rmtree(code, ignore_errors=True)
    shutil.copytree(REPO / "pipelines", code / "pipelines", ignore=shutil.ignore_patterns("__pycache__"))
    return code


CODE = REPO


LOG_TIME = re.compile(rb"^(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})[,.](\d+)")


def calibration_seconds(lines: list[bytes], started: float) -> float:
    """How long the stage calibrated: from its start to its last log line about a calibration
    (the calibrations come first in ``detect``, ``control_charts`` and ``clusters``); 0 without one."""
    last = None
    for line in lines:
        m = LOG_TIME.match(line)
        if m and b"calibration" in line:
            last = m
    if last is None:
        return 0.0
    stamp = pd.Timestamp(last.group(1).decode().replace(" ", "T") + "." + last.group(2).decode()[:6])
    return max(0.0, stamp.timestamp() - pd.Timestamp(started, unit="s").timestamp())


def run_stage(stage: str, root: Path) -> tuple[float, float, int, float]:
    """(wall s, peak MB, exit code, calibration s) of ``python -m pipelines.stages.<stage>`` on the tree ``root``."""
    env = {**os.environ, "REGRESSLAB_ROOT": str(root), "PYTHONPATH": str(CODE), "PYTHONWARNINGS": "ignore", "TZ": "UTC"}
    log = (root / "logs").joinpath(f"{stage}.log")
    log.parent.mkdir(exist_ok=True)
    offset = log.stat().st_size if log.exists() else 0
    t0, started = time.monotonic(), time.time()
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", f"pipelines.stages.{stage}"], cwd=CODE, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    with open(log, "rb") as fh:
        fh.seek(offset)
        lines = fh.read().splitlines()
    return time.monotonic() - t0, usage.ru_maxrss / 1024.0, proc.returncode, calibration_seconds(lines, started)


def night(root: Path, label: str) -> float:
    total, peak, calibrating = 0.0, 0.0, 0.0
    print(f"[bench] {label}")
    print("| stage | wall s | peak MB | calibrating s |\n|---|---|---|---|")
    for stage in STAGES:
        wall, mb, code, cal = run_stage(stage, root)
        total, peak, calibrating = total + wall, max(peak, mb), calibrating + min(cal, wall)
        print(f"| {stage} | {wall:.1f} | {mb:,.0f} | {min(cal, wall):.1f} |"
              + ("" if code == 0 else f" exit {code}, see {root}/logs"), flush=True)
        if code != 0:
            break
    print(f"| **total** | **{total:.1f}** | **{peak:,.0f}** | **{calibrating:.1f}** "
          f"({100 * calibrating / max(total, 1e-9):.0f} % calibrating) |", flush=True)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--targets", type=int, default=5)
    parser.add_argument("--counters", type=int, default=2000)
    parser.add_argument("--hours", type=float, default=8.0)
    parser.add_argument("--period", type=float, default=15.0)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--keep", type=Path, default=None, help="build the scratch tree here and keep it")
    parser.add_argument("--next-night", action="store_true",
                        help="with --keep: one more night on the kept tree, with one more new archive")
    args = parser.parse_args()
    if args.next_night:
        return next_night(args)
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="bench-night-"))
    global CODE
    CODE = snapshot(scratch)
    try:
        source, root = scratch / "source", scratch / "tree"
        shutil.rmtree(root, ignore_errors=True)             # every bench starts from an empty tree
        source.mkdir(parents=True, exist_ok=True)
        root.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        size = 0
        names = [(f"big-h{i:03d}", "pass") for i in range(args.runs)]
        names += [(f"big-t{i:03d}", None) for i in range(args.targets)]
        kw = dict(counters=args.counters, hours=args.hours, period=args.period, hosts=args.hosts)
        spec = json.dumps({**kw, "runs": args.runs, "targets": args.targets})
        for later in source.glob("big-t9*.tar.gz"):              # the archives of later nights (--next-night)
            later.unlink()
        if (scratch / "spec.json").exists() and (scratch / "spec.json").read_text() == spec:
            print(f"[bench] {len(names)} archives of {spec} reused from {source} (--keep)")
        else:
            for i, (run_id, verdict) in enumerate(names):
                size += write_run(source / f"{run_id}.tar.gz", run_id=run_id, index=i, verdict=verdict,
                                  shift_share=0.05 if run_id == names[-1][0] else 0.0, **kw)
            (scratch / "spec.json").write_text(spec)
            print(f"[bench] {len(names)} archives ({args.runs} passed, {args.targets} targets) of {args.counters} "
                  f"counters x {args.hours:g} h at {args.period:g} s on {args.hosts} hosts: {size / 2**30:.2f} GiB "
                  f"of CSV, written in {time.monotonic() - t0:.0f} s")
        params = yaml.safe_load((REPO / "params.yaml").read_text())
        params["pull"]["source"] = str(source)
        params["evaluate"]["labels"] = []
        params["commit_changes"]["source"] = None
        params["commit_changes"]["labels"] = None
        (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        first = night(root, "first night")
        (scratch / "first.json").write_text(json.dumps({"first_night_s": first, "spec": spec}))
        write_run(source / "big-t900.tar.gz", run_id="big-t900", index=len(names), verdict=None, **kw)
        second = night(root, "second night (one new archive)")
        print(f"[bench] first night {first:.0f} s ({first / 60:.1f} min); second {second:.0f} s = "
              f"{100 * second / first:.0f} % of the first")
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)


def next_night(args: argparse.Namespace) -> None:
    """One more night on the tree kept by an earlier ``--keep`` bench, with one more new archive,
    run by that bench's code snapshot; its total as a share of that bench's first night."""
    global CODE
    if args.keep is None or not (args.keep / "first.json").exists():
        raise SystemExit("--next-night needs --keep DIR of an earlier bench that ran its first night")
    scratch = args.keep
    CODE, first = scratch / "code", json.loads((scratch / "first.json").read_text())
    kw = json.loads(first["spec"])
    existing = sorted((scratch / "source").glob("big-t9*.tar.gz"))
    run_id = f"big-t{900 + len(existing)}"
    index = kw.pop("runs") + kw.pop("targets") + len(existing)
    write_run(scratch / "source" / f"{run_id}.tar.gz", run_id=run_id, index=index, verdict=None, **kw)
    total = night(scratch / "tree", f"next night (one new archive, {run_id})")
    print(f"[bench] this night {total:.0f} s = {100 * total / first['first_night_s']:.0f} % of the first "
          f"({first['first_night_s']:.0f} s)")


if __name__ == "__main__":
    main()
