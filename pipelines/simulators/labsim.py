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

import hashlib
import io
import json
import math
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import pandas as pd

from pipelines.storage.run_records import Environment

REF_GHZ = 2.6

CPU_MODELS: dict[str, dict[str, float]] = {
    # model: nominal clock and instructions-per-clock relative to the E5-2670
    "Xeon E5-2670": {"ghz": 2.6, "ipc": 1.00},
    "Xeon E5-2620": {"ghz": 2.0, "ipc": 0.95},
    "Xeon Gold 6230": {"ghz": 2.1, "ipc": 1.45},
    "Graviton2": {"ghz": 2.5, "ipc": 0.90},
}

# buffer pool / shared buffers default (GB) that each DB version ships with
DB_CACHE_GB: dict[str, float] = {
    "5.1.45": 2.0, "5.5.62": 4.0, "5.7.30": 6.0,  # MySQL (shop)
    "11.9": 1.5, "13.4": 3.0, "15.2": 5.0,        # PostgreSQL (ledger)
}


def cpu_speed(environment: Environment) -> float:
    """Relative speed of one core of the environment's CPU against the 2.6 GHz reference."""
    spec = CPU_MODELS[environment["cpu_model"]]
    return spec["ghz"] * spec["ipc"] / REF_GHZ


# --------------------------------------------------------------------------- queueing


def erlang_c(servers: int, rho: np.ndarray) -> np.ndarray:
    """Probability of waiting in an M/M/c queue (Erlang C) for utilisation ``rho`` < 1.

    Uses the stable Erlang-B recursion ``B_k = a B_{k-1} / (k + a B_{k-1})`` with
    offered load ``a = c·ρ`` and ``C = B_c / (1 - ρ (1 - B_c))``.
    """
    rho = np.clip(np.asarray(rho, dtype=float), 0.0, 0.999)
    a = servers * rho
    b = np.ones_like(a)
    for k in range(1, servers + 1):
        b = a * b / (k + a * b)
    return b / (1.0 - rho * (1.0 - b))


@dataclass(frozen=True)
class Station:
    """Result of pushing an arrival series through one M/M/c station with a fluid backlog."""

    throughput: np.ndarray   # requests/s served
    rho: np.ndarray          # utilisation of the c servers (0..1)
    response_s: np.ndarray   # service + queueing + backlog delay
    queue: np.ndarray        # mean number waiting


def mmc_station(arrivals: np.ndarray, demand_s: np.ndarray | float, servers: float,
                max_rho: float = 0.97) -> Station:
    """Serve ``arrivals`` (req/s, one value per second) at ``servers`` servers of demand ``demand_s``.

    Above ``max_rho`` the excess is kept in a backlog (fluid approximation of an
    overloaded queue) and served later; its waiting time is ``backlog / capacity``.
    """
    demand = np.broadcast_to(np.asarray(demand_s, dtype=float), arrivals.shape)
    c_int = max(1, int(round(servers)))
    capacity = max_rho * servers / np.maximum(demand, 1e-9)
    backlog = 0.0
    served = np.empty_like(arrivals)
    backlogs = np.empty_like(arrivals)
    for t in range(arrivals.size):
        want = arrivals[t] + backlog
        served[t] = min(want, capacity[t])
        backlog = want - served[t]
        backlogs[t] = backlog
    rho = np.minimum(served * demand / servers, max_rho)
    wait_prob = erlang_c(c_int, rho)
    wait = wait_prob * demand / (servers * np.maximum(1.0 - rho, 1e-3))
    response = demand + wait + backlogs / capacity
    queue = served * wait + backlogs
    return Station(served, rho, response, queue)


# --------------------------------------------------------------------------- systems


@dataclass(frozen=True)
class Fault:
    """A regression cause, as a set of mechanism multipliers/additions with a severity."""

    name: str
    severity: float = 1.0


FAULTS: dict[str, str] = {
    "cpu_hot_path": "the application does extra CPU work in a hot path (demand x severity)",
    "memory_bloat": "long-lived objects grow (heap long-lived set x severity, more GC)",
    "extra_db_query": "one more database query per request",
    "missing_index": "one query per request scans a table (CPU and page reads x severity)",
    "blocking_io": "a synchronous, flushed log write per request on the app tier",
    "cache_disabled": "the data cache is off (buffer pool / cache tier bypassed)",
    "cpu_contention": "another process on the app host takes a share of its CPU",
    "load_mismatch": "the load generator offers a different load (rate x severity)",
}

SEVERITY_RANGE: dict[str, tuple[float, float]] = {
    "cpu_hot_path": (1.4, 1.8),
    "memory_bloat": (2.0, 3.0),
    "extra_db_query": (1.0, 1.0),
    "missing_index": (6.0, 10.0),
    "blocking_io": (1.0, 1.0),
    "cache_disabled": (1.0, 1.0),
    "cpu_contention": (0.35, 0.5),
    "load_mismatch": (1.45, 1.7),
}


@dataclass(frozen=True)
class SystemSpec:
    """A simulated system: hosts, the process on each, request demands and workload."""

    name: str
    profile: str
    base_rate: float                     # offered requests/s on the plateau
    duration_s: int
    loadgen: str                         # host name of the load generator
    app_host: str
    app_proc: str
    db_host: str
    db_proc: str
    cache_host: str | None = None        # separate cache tier (ledger) or None (shop: DB buffer pool)
    cache_proc: str | None = None
    app_cpu_ms: float = 18.0             # CPU ms per request at the reference core
    app_threads: int = 40
    app_max_threads: int = 200
    app_heap_base_mb: float = 2500.0
    app_long_lived_mb: float = 1500.0
    app_alloc_mb_per_req: float = 0.6
    app_young_mb: float = 256.0
    queries_per_req: float = 3.0
    query_cpu_ms: float = 1.1
    pages_per_query: float = 6.0
    hot_data_gb: float = 5.0
    db_base_mb: float = 900.0
    cache_lookups_per_req: float = 0.0
    cache_hit: float = 0.0
    order_fraction: float = 0.08
    batch_period_s: int = 0              # periodic batch job making counters bimodal (0 = none)
    batch_load: float = 0.0
    fluct_sd: float = 0.06
    sampling_periods: dict[str, tuple[int, ...]] = field(default_factory=dict)
    versions: tuple[str, ...] = ()
    environments: tuple[dict[str, Any], ...] = ()
    new_environment: Environment = field(default_factory=dict)


SYSTEMS: dict[str, SystemSpec] = {
    "shop": SystemSpec(
        name="shop", profile="browse-and-order", base_rate=110.0, duration_s=3600,
        loadgen="lg01", app_host="web01", app_proc="tomcat", db_host="db01", db_proc="mysql",
        sampling_periods={"lg01": (5,), "web01": (5, 10, 15), "db01": (10, 15, 30)},
        versions=("4.2.0", "4.2.1", "4.3.0", "4.3.1", "4.4.0", "4.4.1"),
        environments=(
            {"cpu_model": "Xeon E5-2670", "cpu_cores": 8, "memory_gb": 16, "db_version": "5.1.45",
             "os": "rhel-7.9", "arch": "x86_64"},
            {"cpu_model": "Xeon E5-2620", "cpu_cores": 8, "memory_gb": 16, "db_version": "5.1.45",
             "os": "rhel-7.9", "arch": "x86_64"},
            {"cpu_model": "Xeon E5-2670", "cpu_cores": 8, "memory_gb": 8, "db_version": "5.5.62",
             "os": "rhel-7.9", "arch": "x86_64"},
        ),
        new_environment={"cpu_model": "Xeon Gold 6230", "cpu_cores": 16, "memory_gb": 32,
                         "db_version": "5.7.30", "os": "rhel-8.6", "arch": "x86_64"},
    ),
    "ledger": SystemSpec(
        name="ledger", profile="payments-api-with-batch", base_rate=70.0, duration_s=2700,
        loadgen="lg02", app_host="api01", app_proc="gunicorn", db_host="pg01", db_proc="postgres",
        cache_host="cache01", cache_proc="redis",
        app_cpu_ms=28.0, app_threads=16, app_max_threads=64, app_heap_base_mb=2000.0,
        app_long_lived_mb=1200.0, app_alloc_mb_per_req=0.3, app_young_mb=128.0,
        queries_per_req=2.0, query_cpu_ms=1.6, pages_per_query=5.0, hot_data_gb=4.0,
        db_base_mb=600.0, cache_lookups_per_req=4.0, cache_hit=0.88, order_fraction=0.3,
        batch_period_s=600, batch_load=0.9, fluct_sd=0.05,
        sampling_periods={"lg02": (10,), "api01": (10, 15), "cache01": (15, 30), "pg01": (15, 30)},
        versions=("2024.1", "2024.2", "2024.3", "2024.4", "2025.1", "2025.2"),
        environments=(
            {"cpu_model": "Xeon E5-2670", "cpu_cores": 8, "memory_gb": 16, "db_version": "13.4",
             "os": "ubuntu-20.04", "arch": "x86_64"},
            {"cpu_model": "Xeon E5-2670", "cpu_cores": 4, "memory_gb": 16, "db_version": "13.4",
             "os": "ubuntu-20.04", "arch": "x86_64"},
            {"cpu_model": "Xeon E5-2670", "cpu_cores": 8, "memory_gb": 8, "db_version": "11.9",
             "os": "ubuntu-20.04", "arch": "x86_64"},
        ),
        new_environment={"cpu_model": "Graviton2", "cpu_cores": 8, "memory_gb": 16,
                         "db_version": "15.2", "os": "ubuntu-22.04", "arch": "aarch64"},
    ),
}


# --------------------------------------------------------------------------- one run


@dataclass(frozen=True)
class RunPlan:
    """Everything that defines one simulated run; two plans differing only in ``fault`` share noise."""

    run_id: str
    system: str
    version: str
    environment: Environment
    started_at: datetime
    seed: int
    fault: Fault | None = None
    rate_factor: float = 1.0             # the run's offered load relative to the system's base rate
    process_cpu: str = "share"           # "per_core": process CPU % as top/pidstat/PerfMon write it (100 per core)


@dataclass(frozen=True)
class Timeline:
    pre_s: int
    ramp_up_s: int
    duration_s: int
    ramp_down_s: int
    post_s: int

    @property
    def total(self) -> int:
        return self.pre_s + self.ramp_up_s + self.duration_s + self.ramp_down_s + self.post_s

    @property
    def load_start(self) -> int:
        return self.pre_s + self.ramp_up_s


def _rng(seed: int, *names: str) -> np.random.Generator:
    """Independent, reproducible random stream per (seed, name...)."""
    digest = hashlib.sha256(("/".join([str(seed), *names])).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def make_timeline(spec: SystemSpec, seed: int) -> Timeline:
    rng = _rng(seed, "timeline")
    return Timeline(pre_s=int(rng.integers(30, 90)), ramp_up_s=int(rng.integers(120, 300)),
                    duration_s=spec.duration_s, ramp_down_s=int(rng.integers(60, 150)),
                    post_s=int(rng.integers(30, 90)))


def offered_load(spec: SystemSpec, tl: Timeline, seed: int, rate: float) -> np.ndarray:
    """Offered arrivals per second: profile × OU fluctuation, then Poisson counts."""
    rng = _rng(seed, "load")
    t = np.arange(tl.total, dtype=float)
    shape = np.zeros_like(t)
    up0, up1 = tl.pre_s, tl.load_start
    dn0 = tl.load_start + tl.duration_s
    dn1 = dn0 + tl.ramp_down_s
    shape[(t >= up0) & (t < up1)] = (t[(t >= up0) & (t < up1)] - up0) / max(1, up1 - up0)
    shape[(t >= up1) & (t < dn0)] = 1.0
    shape[(t >= dn0) & (t < dn1)] = 1.0 - (t[(t >= dn0) & (t < dn1)] - dn0) / max(1, dn1 - dn0)
    # Ornstein-Uhlenbeck fluctuation (time constant 120 s) of the plateau level
    tau, sd = 120.0, spec.fluct_sd
    noise = rng.normal(size=t.size)
    ou = np.empty_like(t)
    x = 0.0
    a = math.exp(-1.0 / tau)
    b = sd * math.sqrt(1 - a * a)
    for i in range(t.size):
        x = a * x + b * noise[i]
        ou[i] = x
    lam = rate * shape * np.maximum(0.2, 1.0 + ou)
    return rng.poisson(lam).astype(float)


def _noise(seed: int, counter: str, n: int, cv: float) -> np.ndarray:
    """Multiplicative measurement noise for one counter, identical with and without a fault.

    The exponential is taken in long double and rounded to float64: numpy's float64 ``exp`` is
    the AVX-512 one on a machine that has it and another elsewhere, one ULP apart now and then,
    which flipped the fourth decimal of some written values, so the example's archives (and
    ``dvc.lock``) differed between machines.  The long double ``exp`` has one implementation."""
    return np.exp(_rng(seed, "noise", counter).normal(0.0, cv, size=n).astype(np.longdouble)).astype(np.float64)


def _gc_sawtooth(alloc_mb_s: np.ndarray, young_mb: float) -> np.ndarray:
    """Young-generation occupancy: fills at the allocation rate, emptied by each minor GC."""
    filled = np.cumsum(alloc_mb_s)
    return np.mod(filled, young_mb)


@dataclass
class Physics:
    """The queueing state of one run, second by second: what every counter is computed from."""
    env: Environment
    fault: str | None
    sev: float
    speed: float
    cores: float
    mem_mb: float
    t: np.ndarray
    in_load: np.ndarray
    arrivals: np.ndarray
    app: Station
    app_cpu_total: float
    gc_cpu_s: float
    long_lived: float
    contention: float
    x: np.ndarray                        # requests/s served
    cache: Station | None = None
    cache_ops: np.ndarray | None = None
    cache_disabled: bool = False
    lookups: float = 0.0
    q: float = 0.0                       # queries per request
    pool_gb: float = 0.0
    miss: float = 0.0
    db: Station | None = None
    db_cpu_per_req: float = 0.0
    pages_per_req: float = 0.0
    reads_per_req: float = 0.0
    db_response: np.ndarray | None = None
    log_kb_per_req: float = 0.0
    log_ops_per_req: float = 0.0
    resp_f: np.ndarray | None = None
    inflight: np.ndarray | None = None
    busy_threads: np.ndarray | None = None
    app_queue: np.ndarray | None = None


def app_tier(spec: SystemSpec, plan: RunPlan, tl: Timeline) -> Physics:
    """The offered load and the application tier: an M/M/c station of the app's CPU demand."""
    env = plan.environment
    fault = plan.fault.name if plan.fault else None
    sev = plan.fault.severity if plan.fault else 1.0
    speed = cpu_speed(env)
    cores = float(env["cpu_cores"])
    n = tl.total
    rate = spec.base_rate * plan.rate_factor * (sev if fault == "load_mismatch" else 1.0)
    arrivals = offered_load(spec, tl, plan.seed, rate)
    t = np.arange(n)
    in_load = (t >= tl.pre_s) & (t < tl.load_start + tl.duration_s + tl.ramp_down_s)
    app_cpu_s = spec.app_cpu_ms / 1000.0 / speed * (sev if fault == "cpu_hot_path" else 1.0)
    long_lived = spec.app_long_lived_mb * (sev if fault == "memory_bloat" else 1.0)
    # GC work grows with the live set it has to trace (old-gen marking)
    gc_cpu_s = 0.08 * app_cpu_s * (long_lived / spec.app_long_lived_mb)
    app_cpu_total = app_cpu_s + gc_cpu_s
    contention = sev if fault == "cpu_contention" else 0.0
    app = mmc_station(arrivals, app_cpu_total, cores * (1.0 - contention))
    return Physics(env=env, fault=fault, sev=sev, speed=speed, cores=cores, mem_mb=float(env["memory_gb"]) * 1024.0,
                   t=t, in_load=in_load, arrivals=arrivals, app=app, app_cpu_total=app_cpu_total,
                   gc_cpu_s=gc_cpu_s, long_lived=long_lived, contention=contention, x=app.throughput)


def cache_tier(spec: SystemSpec, ph: Physics) -> None:
    """The cache tier (ledger's Redis) or none (shop): its lookups, and the queries per request
    its misses add."""
    ph.cache_disabled = ph.fault == "cache_disabled"
    ph.lookups = spec.cache_lookups_per_req
    if spec.cache_host:
        hit = 0.0 if ph.cache_disabled else spec.cache_hit
        ph.cache_ops = ph.x * ph.lookups * (0.0 if ph.cache_disabled else 1.0)
        ph.cache = mmc_station(ph.cache_ops, 0.00012 / ph.speed, 1.0)       # redis: single-threaded
        extra_queries = ph.lookups * (1.0 - hit)
    else:
        ph.cache_ops = np.zeros(len(ph.t))
        extra_queries = 0.0
    ph.q = spec.queries_per_req + extra_queries + (1.0 if ph.fault == "extra_db_query" else 0.0)


def db_tier(spec: SystemSpec, ph: Physics) -> None:
    """The database: its buffer pool's miss ratio, CPU per request, disk reads and response."""
    env, sev, scan = ph.env, ph.sev, ph.fault == "missing_index"
    ph.pool_gb = min(DB_CACHE_GB[str(env["db_version"])], 0.45 * env["memory_gb"])
    if ph.cache_disabled and not spec.cache_host:
        ph.pool_gb = 0.05                      # query cache and buffer pool effectively off
    ph.miss = float(np.clip(0.02 * (spec.hot_data_gb / ph.pool_gb) ** 1.5, 0.002, 1.0))
    query_cpu = spec.query_cpu_ms / 1000.0 / ph.speed
    ph.db_cpu_per_req = ph.q * query_cpu + (query_cpu * (sev - 1.0) if scan else 0.0)
    if ph.cache_disabled and not spec.cache_host:
        ph.db_cpu_per_req *= 1.35              # parsing and planning each query again
    ph.pages_per_req = ph.q * spec.pages_per_query + (spec.pages_per_query * (sev * 4 - 1) if scan else 0.0)
    ph.reads_per_req = ph.pages_per_req * ph.miss
    ph.db = mmc_station(ph.x, ph.db_cpu_per_req, ph.cores)
    disk_service_s = 0.00025                   # SSD read
    disk_rho = np.minimum(ph.x * ph.reads_per_req * disk_service_s / 4.0, 0.95)   # 4 parallel channels
    disk_wait = ph.reads_per_req * disk_service_s / np.maximum(1 - disk_rho, 0.05)
    ph.db_response = ph.db.response_s + disk_wait + ph.q * 0.0003                   # network round trips


def response_times(spec: SystemSpec, ph: Physics) -> None:
    """Synchronous log writes, the end-to-end response time, and Little's law for what is in flight."""
    blocking = ph.fault == "blocking_io"
    ph.log_kb_per_req = 1.5 + (3.0 if blocking else 0.0)
    ph.log_ops_per_req = (1.0 if blocking else 0.0)
    fsync_s = 0.004 if blocking else 0.0
    app_disk_rho = np.minimum(ph.x * ph.log_ops_per_req * fsync_s, 0.95)
    io_wait = fsync_s / np.maximum(1 - app_disk_rho, 0.05)
    response = ph.app.response_s + ph.db_response + io_wait
    if ph.cache is not None:
        response = response + ph.lookups * (ph.cache.response_s + 0.0002)
    response = np.where(ph.x > 0, response, np.nan)
    ph.resp_f = np.nan_to_num(response, nan=float(np.nanmedian(response)) if np.isfinite(response).any() else 0.0)
    ph.inflight = ph.x * ph.resp_f                                          # Little's law
    ph.busy_threads = np.minimum(ph.inflight, spec.app_max_threads)
    ph.app_queue = np.maximum(ph.inflight - spec.app_max_threads, 0.0) + ph.app.queue


def app_counters(spec: SystemSpec, ph: Physics, tl: Timeline) -> dict[str, np.ndarray]:
    """The application process (Tomcat or gunicorn)."""
    ap, x, q, cores, t = spec.app_proc, ph.x, ph.q, ph.cores, ph.t
    out: dict[str, np.ndarray] = {}
    user = 100.0 * x * ph.app_cpu_total / cores * 0.88
    sys_calls = x * (q * 2 + ph.log_ops_per_req + ph.lookups) * 20e-6 + x * ph.log_ops_per_req * 150e-6
    priv = 100.0 * (x * ph.app_cpu_total * 0.12 + sys_calls) / cores
    out[f"{ap}.user_pct"] = user
    out[f"{ap}.privileged_pct"] = priv
    out[f"{ap}.cpu_pct"] = user + priv
    heap = (spec.app_heap_base_mb + ph.long_lived + ph.inflight * 2.0
            + _gc_sawtooth(x * spec.app_alloc_mb_per_req, spec.app_young_mb))
    if ph.fault == "memory_bloat":
        # the bloated cache fills as the run goes (objects are kept, never freed)
        heap = heap + ph.long_lived * 0.3 * np.clip((t - tl.pre_s) / max(1, tl.duration_s), 0, 1)
    app_threads = spec.app_threads + np.ceil(ph.busy_threads)
    out[f"{ap}.private_bytes"] = heap * 2**20
    out[f"{ap}.thread_count"] = app_threads
    out[f"{ap}.handle_count"] = 180 + 1.6 * ph.inflight + q * 4
    out[f"{ap}.io_read_bytes_per_s"] = 2_000 + x * 0.0
    out[f"{ap}.io_read_ops_per_s"] = 0.5 + x * 0.0
    out[f"{ap}.io_write_bytes_per_s"] = x * ph.log_kb_per_req * 1024
    out[f"{ap}.io_write_ops_per_s"] = x * (ph.log_kb_per_req / 64.0 + ph.log_ops_per_req)
    out[f"{ap}.context_switches_per_s"] = (150 + x * (2 + 2 * q + 2 * ph.lookups + 2 * ph.log_ops_per_req)
                                           + app_threads * 2)
    if ap == "tomcat":
        out["tomcat.busy_threads"] = ph.busy_threads
        out["tomcat.queue_length"] = ph.app_queue
        out["tomcat.gc_time_pct"] = 100.0 * x * ph.gc_cpu_s / np.maximum(x * ph.app_cpu_total, 1e-9) * (x > 0)
    else:
        out[f"{ap}.worker_busy"] = ph.busy_threads
        out[f"{ap}.queue_length"] = ph.app_queue
    return out


def db_counters(spec: SystemSpec, ph: Physics, tl: Timeline) -> dict[str, np.ndarray]:
    """The database process (MySQL or PostgreSQL)."""
    dp, x, q, cores, t = spec.db_proc, ph.x, ph.q, ph.cores, ph.t
    out: dict[str, np.ndarray] = {}
    db_user = 100.0 * x * ph.db_cpu_per_req / cores * 0.75
    db_priv = 100.0 * (x * ph.db_cpu_per_req * 0.25 + x * ph.reads_per_req * 15e-6 + x * q * 20e-6) / cores
    out[f"{dp}.user_pct"] = db_user
    out[f"{dp}.privileged_pct"] = db_priv
    out[f"{dp}.cpu_pct"] = db_user + db_priv
    db_mem = spec.db_base_mb + ph.pool_gb * 1024.0 * (0.6 + 0.4 * np.clip((t - tl.pre_s) / 900.0, 0, 1))
    out[f"{dp}.private_bytes"] = db_mem * 2**20
    db_conns = 10 + np.minimum(x * ph.db_response * 1.5, 150)
    out[f"{dp}.thread_count"] = 30 + db_conns
    out[f"{dp}.handle_count"] = 400 + db_conns * 3
    out[f"{dp}.io_read_bytes_per_s"] = x * ph.reads_per_req * 16_384
    out[f"{dp}.io_read_ops_per_s"] = x * ph.reads_per_req
    writes_per_req = spec.order_fraction * 3.0
    out[f"{dp}.io_write_bytes_per_s"] = x * writes_per_req * 8_192
    out[f"{dp}.io_write_ops_per_s"] = x * writes_per_req
    out[f"{dp}.context_switches_per_s"] = 300 + x * q * 3 + x * ph.reads_per_req * 1.0
    if dp == "mysql":
        out["mysql.transactions_per_s"] = x * q
        out["mysql.buffer_pool_hit_pct"] = 100.0 * (1.0 - ph.miss) * (x > 0) + 0.0
        out["mysql.queue_length"] = ph.db.queue
        out["mysql.rows_read_per_s"] = x * ph.pages_per_req * 40
    else:
        out["postgres.transactions_per_s"] = x * q
        out["postgres.cache_hit_pct"] = 100.0 * (1.0 - ph.miss) * (x > 0)
        out["postgres.rows_fetched_per_s"] = x * ph.pages_per_req * 30
    return out


def cache_counters(spec: SystemSpec, ph: Physics) -> dict[str, np.ndarray]:
    """The cache process (ledger's Redis); nothing without one."""
    if not (spec.cache_host and ph.cache is not None):
        return {}
    cp, x, t, ops = spec.cache_proc, ph.x, ph.t, ph.cache_ops
    out: dict[str, np.ndarray] = {}
    cu = 100.0 * ops * 0.00012 / ph.speed / ph.cores
    out[f"{cp}.user_pct"] = cu * 0.7
    out[f"{cp}.privileged_pct"] = cu * 0.3 + 100.0 * ops * 8e-6 / ph.cores
    out[f"{cp}.cpu_pct"] = out[f"{cp}.user_pct"] + out[f"{cp}.privileged_pct"]
    out[f"{cp}.private_bytes"] = (300.0 + 1200.0 * (0.0 if ph.cache_disabled else 1.0)) * 2**20 + 0 * t
    out[f"{cp}.thread_count"] = 6 + 0 * t
    out[f"{cp}.handle_count"] = 40 + np.minimum(x * 0.2, 200)
    out[f"{cp}.io_read_bytes_per_s"] = 0 * t + 100.0
    out[f"{cp}.io_read_ops_per_s"] = 0 * t + 0.1
    out[f"{cp}.io_write_bytes_per_s"] = ops * 12.0 + 800     # append-only file
    out[f"{cp}.io_write_ops_per_s"] = 1.0 + ops * 0.0
    out[f"{cp}.context_switches_per_s"] = 50 + ops * 0.5
    out["redis.ops_per_s"] = ops
    out["redis.hit_pct"] = 100.0 * (0.0 if ph.cache_disabled else spec.cache_hit) * (x > 0)
    out["redis.connected_clients"] = 5 + np.minimum(ph.inflight, spec.app_max_threads)
    return out


def loadgen_counters(spec: SystemSpec, ph: Physics) -> dict[str, np.ndarray]:
    """The load generator's process and what it measures of the application (``app.*``)."""
    lp, x, t, arrivals, resp_f = ("jmeter" if spec.loadgen == "lg01" else "locust"), ph.x, ph.t, ph.arrivals, ph.resp_f
    out: dict[str, np.ndarray] = {}
    lg_cpu = 100.0 * arrivals * 0.0015 / LOADGEN_CORES
    out[f"{lp}.user_pct"] = lg_cpu * 0.8
    out[f"{lp}.privileged_pct"] = lg_cpu * 0.2
    out[f"{lp}.cpu_pct"] = lg_cpu
    users = arrivals * (resp_f + 1.0)            # virtual users: response + 1 s think time
    out[f"{lp}.private_bytes"] = (600.0 + users * 0.8) * 2**20
    out[f"{lp}.thread_count"] = 30 + users
    out[f"{lp}.handle_count"] = 200 + users * 2
    out[f"{lp}.io_read_bytes_per_s"] = 500.0 + 0 * t
    out[f"{lp}.io_read_ops_per_s"] = 0.2 + 0 * t
    out[f"{lp}.io_write_bytes_per_s"] = arrivals * 120.0          # result log
    out[f"{lp}.io_write_ops_per_s"] = arrivals / 50.0
    out[f"{lp}.context_switches_per_s"] = 80 + arrivals * 4
    out["app.arrival_rate"] = arrivals
    out["app.throughput_rps"] = x
    out["app.response_time_ms"] = 1000.0 * resp_f * (x > 0)
    service = ph.app_cpu_total + ph.db_cpu_per_req
    out["app.response_time_p95_ms"] = 1000.0 * (1.6 * service + 3.0 * np.maximum(resp_f - service, 0)) * (x > 0)
    out["app.orders_per_min"] = x * spec.order_fraction * 60.0
    out["app.active_users"] = users
    return out


def batch_job(spec: SystemSpec, ph: Physics, tl: Timeline, out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Ledger's periodic batch job: a second mode of the database's counters (the new values)."""
    if not spec.batch_period_s:
        return {}
    dp, cores = spec.db_proc, ph.cores
    phase = np.mod(ph.t - tl.pre_s, spec.batch_period_s)
    batch = ((phase < spec.batch_period_s * 0.15) & ph.in_load).astype(float) * spec.batch_load
    return {f"{dp}.cpu_pct": out[f"{dp}.cpu_pct"] + 100.0 * batch / cores * 2.0,
            f"{dp}.user_pct": out[f"{dp}.user_pct"] + 100.0 * batch / cores * 2.0,
            f"{dp}.io_read_bytes_per_s": out[f"{dp}.io_read_bytes_per_s"] + batch * 40e6,
            f"{dp}.io_read_ops_per_s": out[f"{dp}.io_read_ops_per_s"] + batch * 2500}


def host_counters(spec: SystemSpec, ph: Physics, out: dict[str, np.ndarray]) -> None:
    """Per host, in place: each process's working set and paging under memory pressure, then
    the host's CPU, available memory, disk queue and network."""
    lp = "jmeter" if spec.loadgen == "lg01" else "locust"
    hosts = {spec.app_host: [spec.app_proc], spec.db_host: [spec.db_proc], spec.loadgen: [lp]}
    if spec.cache_host:
        hosts[spec.cache_host] = [spec.cache_proc]
    for host, procs in hosts.items():
        host_mem = ph.mem_mb if host != spec.loadgen else 8192.0
        used = sum(out[f"{p}.private_bytes"] for p in procs) / 2**20 + 1200.0   # + OS
        pressure = np.maximum(used - 0.9 * host_mem, 0.0) / host_mem            # share of RAM missing
        for p in procs:
            priv_b = out[f"{p}.private_bytes"]
            share = priv_b / np.maximum(used * 2**20, 1)
            out[f"{p}.working_set_bytes"] = np.minimum(priv_b * 0.93, share * 0.9 * host_mem * 2**20)
            rate_p = out[f"{p}.context_switches_per_s"]
            hard = pressure * 4000.0 * (1 + rate_p / 1000.0)
            out[f"{p}.page_faults_per_s"] = 20 + rate_p * 0.4 + hard
            out[f"{p}.io_read_bytes_per_s"] = out[f"{p}.io_read_bytes_per_s"] + hard * 4096
            out[f"{p}.io_read_ops_per_s"] = out[f"{p}.io_read_ops_per_s"] + hard
        proc_cpu = sum(out[f"{p}.cpu_pct"] for p in procs)
        hog = 100.0 * ph.contention if host == spec.app_host else 0.0
        out[f"{host}.cpu_pct"] = np.minimum(proc_cpu + 1.5 + hog * ph.in_load, 100.0)
        out[f"{host}.mem_available_mb"] = np.maximum(host_mem - used, 50.0)
        io_ops = sum(out[f"{p}.io_read_ops_per_s"] + out[f"{p}.io_write_ops_per_s"] for p in procs)
        out[f"{host}.disk_queue_length"] = io_ops * 0.0003 / np.maximum(1 - np.minimum(io_ops * 0.0003, 0.9), 0.1)
        net = {spec.loadgen: 6_000.0, spec.app_host: 9_000.0 + 400.0 * ph.q,
               spec.db_host: 2_000.0 * ph.q}.get(host, 300.0 * ph.lookups)
        out[f"{host}.net_bytes_per_s"] = 500.0 + ph.x * net


def simulate_means(spec: SystemSpec, plan: RunPlan, tl: Timeline) -> dict[str, np.ndarray]:
    """Noise-free 1-second series of every counter of the run (the physics): the tiers' queues,
    then the counters of each process and host."""
    ph = app_tier(spec, plan, tl)
    cache_tier(spec, ph)
    db_tier(spec, ph)
    response_times(spec, ph)
    out = {**app_counters(spec, ph, tl), **db_counters(spec, ph, tl), **cache_counters(spec, ph),
           **loadgen_counters(spec, ph)}
    out.update(batch_job(spec, ph, tl, out))
    host_counters(spec, ph, out)
    return out


NOISE_CV = {"pct": 0.05, "bytes_per_s": 0.08, "ops_per_s": 0.08, "_bytes": 0.01, "count": 0.02,
            "per_s": 0.06, "_ms": 0.07, "queue_length": 0.15, "rate": 0.03, "rps": 0.03,
            "users": 0.03, "_mb": 0.01, "hit_pct": 0.003, "per_min": 0.04, "busy": 0.08,
            "clients": 0.05}


def noise_cv(counter: str) -> float:
    """Coefficient of variation of the collector's measurement noise, by counter kind."""
    name = counter.split(".", 1)[1]
    for key in ("hit_pct", "queue_length", "bytes_per_s", "ops_per_s", "per_min", "per_s",
                "_bytes", "count", "pct", "_ms", "rate", "rps", "users", "_mb", "busy", "clients"):
        if key in name:
            return NOISE_CV[key]
    return 0.05


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
    if spec.cache_proc:
        owner[spec.cache_proc] = spec.cache_host
    return owner.get(comp, comp)


LOADGEN_CORES = 4.0


def process_cpu_scale(spec: SystemSpec, counter: str, environment: Environment) -> float:
    """The factor from a share of the host (0-100) to 100 per busy core, for a process's CPU
    percentages (contract §1: top, pidstat, PerfMon ``Process(*)\\% Processor Time``);
    1 for every other counter."""
    component, _, name = counter.partition(".")
    host = host_of(spec, counter)
    if component == host or name not in ("cpu_pct", "user_pct", "privileged_pct"):
        return 1.0
    return LOADGEN_CORES if host == spec.loadgen else float(environment["cpu_cores"])


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


def plan_lab(*, seed: int, systems: list[str], history_causes: list[str], target_causes: list[str],
             n_normal: int, n_per_cause: int, n_targets_normal: int, start: str) -> list[dict[str, Any]]:
    """The run schedule of an example lab: verified history then unanalysed targets, per system.

    Returns dicts with the plan and what the analyst knows (verdict, cause) so the
    caller can simulate and label them.
    """
    rng = _rng(seed, "plan")
    day0 = datetime.fromisoformat(start).replace(tzinfo=timezone.utc)
    schedule: list[dict[str, Any]] = []
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


def simulate_entry(entry: dict[str, Any], *, min_effect: float, min_rel_change: float,
                   process_cpu: str = "share") -> tuple[str, dict[str, bytes], dict[str, Any]]:
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
    truth = {"verdict": "pass" if fault is None else "fail", "cause": entry["cause"],
             "regressed_counters": regressed,
             "severity": fault.severity if fault else None,
             "new_environment": entry["environment"] == SYSTEMS[entry["system"]].new_environment}
    if entry["verified"]:
        run.meta.update({"verdict": truth["verdict"], "cause": truth["cause"],
                         "regressed_counters": regressed})
    else:
        run.meta.update({"verdict": None, "cause": None})
    return run_id, run_to_archive_members(run), truth
