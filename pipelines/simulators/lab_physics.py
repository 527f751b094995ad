"""The physics of one simulated run (:mod:`pipelines.simulators.labsim`): the offered load, each tier
an M/M/c station (Erlang's C formula, a fluid backlog above saturation; Jain, *The Art of Computer
Systems Performance Analysis*, ch. 31-33), memory and IO from Little's law and the buffer pool, the
mean of every counter of every host over the run's timeline, and the noise each counter kind is
measured with.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pipelines.simulators.lab_systems import DB_CACHE_GB, LOADGEN_CORES, RunPlan, SystemSpec, Timeline, _rng, cpu_speed
from pipelines.storage.run_records import Environment, EnvironmentValue


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

def number(value: EnvironmentValue) -> float:
    """A numeric environment value of the simulated lab (its own: never text)."""
    assert isinstance(value, (int, float)), f"the simulated lab's environment holds a number here, not {value!r}"
    return float(value)


def _empty() -> np.ndarray:
    return np.zeros(0)


@dataclass
class Physics:
    """The queueing state of one run, second by second: what every counter is computed from.  Each
    tier's function fills its fields in turn (:func:`app_tier` first); an array not filled yet is
    empty."""
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
    cache_ops: np.ndarray = field(default_factory=_empty)
    cache_disabled: bool = False
    lookups: float = 0.0
    q: float = 0.0                       # queries per request
    pool_gb: float = 0.0
    miss: float = 0.0
    db: Station = field(default_factory=lambda: Station(_empty(), _empty(), _empty(), _empty()))
    db_cpu_per_req: float = 0.0
    pages_per_req: float = 0.0
    reads_per_req: float = 0.0
    db_response: np.ndarray = field(default_factory=_empty)
    log_kb_per_req: float = 0.0
    log_ops_per_req: float = 0.0
    resp_f: np.ndarray = field(default_factory=_empty)
    inflight: np.ndarray = field(default_factory=_empty)
    busy_threads: np.ndarray = field(default_factory=_empty)
    app_queue: np.ndarray = field(default_factory=_empty)

def app_tier(spec: SystemSpec, plan: RunPlan, tl: Timeline) -> Physics:
    """The offered load and the application tier: an M/M/c station of the app's CPU demand."""
    env = plan.environment
    fault = plan.fault.name if plan.fault else None
    sev = plan.fault.severity if plan.fault else 1.0
    speed = cpu_speed(env)
    cores = number(env["cpu_cores"])
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
    return Physics(env=env, fault=fault, sev=sev, speed=speed, cores=cores, mem_mb=number(env["memory_gb"]) * 1024.0,
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
    ph.pool_gb = min(DB_CACHE_GB[str(env["db_version"])], 0.45 * number(env["memory_gb"]))
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
    if spec.cache_host and spec.cache_proc:
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
