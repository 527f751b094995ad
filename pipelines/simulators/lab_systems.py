"""The example lab's systems and what a run of one is planned with: the CPU models and database
caches of its environments, the regression causes (``FAULTS``, mechanisms, and the range of their
severity), each system's tiers and demands (``SYSTEMS``), a run's plan and its timeline, and the
random stream of each named part of a run (``_rng``: a seed and names, so that a run simulated again
without its fault draws the same numbers).  The simulation is :mod:`pipelines.simulators.labsim`.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

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
    spec = CPU_MODELS[str(environment["cpu_model"])]
    return spec["ghz"] * spec["ipc"] / REF_GHZ

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

LOADGEN_CORES = 4.0
