"""labsim: a simulated performance-test lab that writes archives in the format of
the data contract §1.

The counters are not random numbers: each one follows from a queueing model of a
multi-tier system under a load generator.

* **Load.** An open arrival process: the offered rate follows the test profile
  (ramp-up, plateau, ramp-down) times a mean-reverting (Ornstein-Uhlenbeck)
  fluctuation; arrivals per second are Poisson.
* **Tiers.** Each tier is an M/M/c station: ``c`` = cores left to the process,
  service demand ``D`` = CPU seconds per request at a reference 2.6 GHz core divided
  by the environment's CPU speed.  Utilisation ``ρ = λD/c``; the waiting time comes
  from Erlang's C formula; above saturation the excess joins a backlog (fluid
  queue) that drains when the load falls.  Response time is the sum over tiers
  (Jain, *The Art of Computer Systems Performance Analysis*, ch. 31-33).
* **Memory and IO.** Heap = base + long-lived objects + in-flight requests
  (Little's law: in-flight = X·R) + a GC saw-tooth whose period is young-gen size /
  allocation rate.  The database reads ``pages × miss ratio`` per query; the
  miss ratio grows as the buffer pool (limited by the DB version's default and by
  RAM) shrinks relative to the hot data set.  When the resident set exceeds the
  host's RAM, hard page faults and disk reads appear.
* **Environments** change the physics, not the output: a slower CPU raises ``D``,
  fewer cores raise ``ρ``, less RAM shrinks the buffer pool and adds paging, a DB
  version brings a different cache default.
* **Regression causes** are mechanisms (``FAULTS``): extra CPU in a hot path, a
  larger long-lived object set, an extra query per request, a missing index (table
  scan), synchronous log writes, a disabled cache, a CPU hog on the host, and a
  mis-configured load generator.  ``regressed_counters`` is *measured*: the same run
  is simulated again without the fault, with the same random streams, and a counter
  is listed when the fault moved its load-phase median by more than
  ``min_effect`` noise standard deviations and ``min_rel_change`` relative change.
* **Messiness** as real collectors have it: per-host sampling periods, clock skew,
  hosts starting and stopping at different times, dropped rows and empty cells,
  ramp-up and ramp-down outside the planned load phase, counters added or removed
  between versions, timestamps in ISO-8601 or epoch seconds.

Everything is deterministic for a seed.  Run ``python -m pipelines.stages.labsim --help``.
"""
from __future__ import annotations

import io
import json
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any, TypedDict, cast

import numpy as np
import pandas as pd

from pipelines.simulators.lab_physics import _noise, make_timeline, noise_cv, simulate_means
from pipelines.simulators.lab_systems import (Fault, LOADGEN_CORES, RunPlan, SEVERITY_RANGE, SYSTEMS, SystemSpec,
                                              Timeline, _rng)
from pipelines.storage.run_records import Environment


# --------------------------------------------------------------------------- one run


INTEGER_KINDS = ("thread_count", "handle_count", "connected_clients")


@dataclass
class SimulatedRun:
    meta: dict[str, Any]
    frames: dict[str, pd.DataFrame]        # host -> counters as written
    means: dict[str, np.ndarray]           # noise-free 1 s physics (for tests)
    noisy: dict[str, np.ndarray]           # 1 s series with measurement noise
    timeline: Timeline


def host_of(spec: SystemSpec, counter: str) -> str:
    """The machine whose collector records ``counter``."""
    comp = counter.split(".", 1)[0]
    owner = {spec.app_proc: spec.app_host, spec.db_proc: spec.db_host,
             "jmeter": spec.loadgen, "locust": spec.loadgen, "app": spec.loadgen}
    if spec.cache_proc and spec.cache_host is not None:
        owner[spec.cache_proc] = spec.cache_host
    return owner.get(comp, comp)


def process_cpu_scale(spec: SystemSpec, counter: str, environment: Environment) -> float:
    """The factor from a share of the host (0-100) to 100 per busy core, for a process's CPU
    percentages (contract §1: top, pidstat, PerfMon ``Process(*)\\% Processor Time``);
    1 for every other counter."""
    component, _, name = counter.partition(".")
    host = host_of(spec, counter)
    if component == host or name not in ("cpu_pct", "user_pct", "privileged_pct"):
        return 1.0
    return LOADGEN_CORES if host == spec.loadgen else float(cast(float, environment["cpu_cores"]))


def version_counters_dropped(spec: SystemSpec, version: str) -> set[str]:
    """Counters that a given version's collectors lack (counters come and go between versions)."""
    idx = spec.versions.index(version) if version in spec.versions else len(spec.versions)
    dropped: set[str] = set()
    if idx < 2:   # GC time and worker gauges were instrumented from the third version on
        dropped |= {"tomcat.gc_time_pct", f"{spec.app_proc}.worker_busy"}
    if idx >= 4:  # the load generator's handle counter was removed from its template
        dropped |= {"jmeter.handle_count", "locust.handle_count"}
    return dropped


def simulate_run(plan: RunPlan) -> SimulatedRun:
    """Simulate one run: physics, measurement noise, per-host collection and messiness."""
    spec = SYSTEMS[plan.system]
    tl = make_timeline(spec, plan.seed)
    means = simulate_means(spec, plan, tl)
    n = tl.total
    noisy = {c: v * _noise(plan.seed, c, n, noise_cv(c)) for c, v in means.items()}
    for c in noisy:
        if c.endswith(INTEGER_KINDS):
            noisy[c] = np.round(noisy[c])
        if c.endswith("_pct"):
            noisy[c] = np.clip(noisy[c], 0.0, 100.0)
    if plan.process_cpu == "per_core":
        for c in noisy:
            noisy[c] = noisy[c] * process_cpu_scale(spec, c, plan.environment)
    dropped = version_counters_dropped(spec, plan.version)
    rng = _rng(plan.seed, "collect")
    recording_start = plan.started_at - timedelta(seconds=tl.load_start)
    frames: dict[str, pd.DataFrame] = {}
    by_host: dict[str, list[str]] = {}
    for c in sorted(noisy):
        if c in dropped:
            continue
        by_host.setdefault(host_of(spec, c), []).append(c)
    for host, counters in by_host.items():
        period = int(rng.choice(spec.sampling_periods.get(host, (10,))))
        start = int(rng.integers(0, 25))                       # host starts a little late
        stop = n - int(rng.integers(0, 25))                    # and stops a little early
        skew = float(rng.normal(0.0, 2.5))                     # clock skew, seconds
        edges = np.arange(start, stop - period + 1, period)
        rows = {}
        for c in counters:
            # collectors report the average over their sampling period
            csum = np.concatenate([[0.0], np.cumsum(noisy[c])])
            rows[c] = (csum[edges + period] - csum[edges]) / period
        frame = pd.DataFrame(rows)
        epoch = recording_start.timestamp() + edges + period + skew
        keep = rng.random(len(frame)) > 0.01                   # ~1% of samples lost
        frame = frame[keep].reset_index(drop=True)
        epoch = epoch[keep]
        blanks = rng.random(frame.shape) < 0.003                # and a few empty cells
        frame = frame.mask(blanks)
        frame = frame.round(4)
        if rng.random() < 0.5:
            ts = pd.Series(np.round(epoch, 3))
        else:
            ts = pd.Series(pd.to_datetime(epoch, unit="s", utc=True)).dt.strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")
        frame.insert(0, "timestamp", ts.values)
        frames[host] = frame
    meta = {
        "schema_version": 1,
        "run_id": plan.run_id,
        "system": plan.system,
        "version": plan.version,
        "started_at": plan.started_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "duration_s": tl.duration_s,
        "workload": {"profile": spec.profile, "load_counter": "app.arrival_rate"},
        "environment": dict(plan.environment),
    }
    return SimulatedRun(meta=meta, frames=frames, means=means, noisy=noisy, timeline=tl)


def regressed_counters(faulty: SimulatedRun, clean: SimulatedRun, *, min_effect: float = 3.0,
                       min_rel_change: float = 0.05) -> list[str]:
    """Counters the fault moved, measured against the fault-free twin (same load, same noise).

    Over the load phase, in 60 s windows (the resolution an analyst looks at), a counter
    is listed when

    * the median relative change of its noise-free value is at least ``min_rel_change``
      (the mechanism moved it by a practically relevant amount), and
    * the change of its measured 60 s medians exceeds ``min_effect`` standard errors of
      the collector's noise on a 60 s median (``1.25 · cv · level / sqrt(60)``), so a
      move that the measurement itself cannot resolve is not listed.

    Load fluctuation is shared by both runs and cancels out.  Counters the run does not
    record are not listed.
    """
    tl = clean.timeline
    sl = slice(tl.load_start, tl.load_start + tl.duration_s)
    recorded = {c for f in faulty.frames.values() for c in f.columns if c != "timestamp"}
    k = 60
    moved = []
    for c in sorted(recorded):
        m = (tl.duration_s) // k

        def windows(series: np.ndarray) -> np.ndarray:
            return np.median(series[sl][: m * k].reshape(m, k), axis=1)

        clean_mean, fault_mean = windows(clean.means[c]), windows(faulty.means[c])
        level = np.abs(clean_mean)
        rel = np.median(np.abs(fault_mean - clean_mean) / np.maximum(level, 1e-12))
        noisy_delta = abs(np.median(windows(faulty.noisy[c])) - np.median(windows(clean.noisy[c])))
        resolution = 1.25 * noise_cv(c) * max(float(np.median(level)), 1e-12) / np.sqrt(k)
        if rel >= min_rel_change and noisy_delta > min_effect * resolution:
            moved.append(c)
    return moved


# --------------------------------------------------------------------------- example lab


def run_to_archive_members(run: SimulatedRun) -> dict[str, bytes]:
    members = {"run.json": (json.dumps(run.meta, indent=2) + "\n").encode()}
    for host, frame in run.frames.items():
        buf = io.StringIO()
        frame.to_csv(buf, index=False)
        members[f"counters/{host}.csv"] = buf.getvalue().encode()
    return members


class ScheduledRun(TypedDict, total=False):
    """One run of an example lab's schedule (:func:`plan_lab`): its system, cause (``none``: normal),
    environment and version, whether an analyst verified it, its day, and, once placed, its seed and
    start."""

    system: str
    cause: str
    environment: Environment
    version: str
    verified: bool
    day: int
    seed: int
    started_at: datetime


class RunTruth(TypedDict):
    """What the simulator knows of a run (the labels a test or an evaluation reads): its verdict and
    cause, the counters its fault moved enough to matter, the fault's severity, and whether its
    environment is the system's new one."""

    verdict: str
    cause: str
    regressed_counters: list[str]
    severity: float | None
    new_environment: bool


def plan_lab(*, seed: int, systems: list[str], history_causes: list[str], target_causes: list[str],
             n_normal: int, n_per_cause: int, n_targets_normal: int, start: str) -> list[ScheduledRun]:
    """The run schedule of an example lab: verified history then unanalysed targets, per system.

    Returns dicts with the plan and what the analyst knows (verdict, cause) so the
    caller can simulate and label them.
    """
    rng = _rng(seed, "plan")
    day0 = datetime.fromisoformat(start).replace(tzinfo=timezone.utc)
    schedule: list[ScheduledRun] = []
    for s_idx, system in enumerate(systems):
        spec = SYSTEMS[system]
        kinds = ["none"] * n_normal + [c for c in history_causes for _ in range(n_per_cause)]
        order = rng.permutation(len(kinds))
        history = [kinds[i] for i in order]
        # environments cycle so that every cause and the normal runs meet every environment
        env_counter: dict[str, int] = {}
        for i, cause in enumerate(history):
            k = env_counter.get(cause, 0)
            env_counter[cause] = k + 1
            env = spec.environments[k % len(spec.environments)]
            version = spec.versions[min(len(spec.versions) - 2, i * (len(spec.versions) - 1) // len(history))]
            schedule.append({"system": system, "cause": cause, "environment": env, "version": version,
                             "verified": True, "day": i})
        targets = [("none", False)] * n_targets_normal + [("none", True)]
        targets += [(c, j % 2 == 1) for j, c in enumerate(target_causes)]
        for j, (cause, new_env) in enumerate(targets):
            env = spec.new_environment if new_env else spec.environments[j % len(spec.environments)]
            schedule.append({"system": system, "cause": cause, "environment": env,
                             "version": spec.versions[-1], "verified": False,
                             "day": len(history) + j})
        for entry in schedule:
            if entry["system"] == system:
                entry["seed"] = int(_rng(seed, system, str(entry["day"])).integers(2**31))
                entry["started_at"] = day0 + timedelta(days=entry["day"], hours=1 + s_idx)
    return schedule


@dataclass(frozen=True)
class LabPlan:
    """The runs of an example lab (:func:`plan_lab`'s arguments)."""
    seed: int
    systems: list[str]
    history_causes: list[str]
    target_causes: list[str]
    n_normal: int
    n_per_cause: int
    n_targets_normal: int
    start: str


def build_lab(plan: LabPlan, *, min_effect: float, min_rel_change: float, progress: bool = False,
              process_cpu: str = "share"):
    """Simulate a whole lab; yield ``(run_id, archive members, truth)`` per run."""
    schedule = plan_lab(**asdict(plan))
    for i, entry in enumerate(schedule):
        run_id, members, truth = simulate_entry(entry, min_effect=min_effect, min_rel_change=min_rel_change,
                                                process_cpu=process_cpu)
        if progress:
            print(f"[labsim] {i + 1}/{len(schedule)} {run_id} cause={entry['cause']} "
                  f"regressed={len(truth['regressed_counters'])}", flush=True)
        yield run_id, members, truth


def simulate_entry(entry: ScheduledRun, *, min_effect: float, min_rel_change: float,
                   process_cpu: str = "share") -> tuple[str, dict[str, bytes], RunTruth]:
    """One run of :func:`plan_lab`'s schedule: ``(run_id, archive members, truth)``.  Each run draws
    from its own streams (its ``seed``), so the runs can be simulated in any order or process."""
    prefix = "r" if entry["verified"] else "t"     # the id tells verified from target, never the cause
    run_id = f"{entry['system']}-{entry['started_at']:%Y-%m-%d}-{prefix}{entry['day']:03d}"
    rate_factor = float(_rng(entry["seed"], "rate").uniform(0.96, 1.04))
    fault = None
    if entry["cause"] != "none":
        lo, hi = SEVERITY_RANGE[entry["cause"]]
        sev = float(_rng(entry["seed"], "severity").uniform(lo, hi))
        if entry["cause"] == "load_mismatch" and _rng(entry["seed"], "dir").random() < 0.5:
            sev = 1.0 / sev
        fault = Fault(entry["cause"], sev)
    plan = RunPlan(run_id=run_id, system=entry["system"], version=entry["version"],
                   environment=entry["environment"], started_at=entry["started_at"],
                   seed=entry["seed"], fault=fault, rate_factor=rate_factor, process_cpu=process_cpu)
    run = simulate_run(plan)
    regressed: list[str] = []
    if fault is not None:
        clean = simulate_run(replace(plan, fault=None))
        regressed = regressed_counters(run, clean, min_effect=min_effect,
                                       min_rel_change=min_rel_change)
    truth: RunTruth = {"verdict": "pass" if fault is None else "fail", "cause": entry["cause"],
             "regressed_counters": regressed,
             "severity": fault.severity if fault else None,
             "new_environment": entry["environment"] == SYSTEMS[entry["system"]].new_environment}
    if entry["verified"]:
        run.meta.update({"verdict": truth["verdict"], "cause": truth["cause"],
                         "regressed_counters": regressed})
    else:
        run.meta.update({"verdict": None, "cause": None})
    return run_id, run_to_archive_members(run), truth
