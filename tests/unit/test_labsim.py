"""The simulator's physics: queueing laws, environments and fault mechanisms."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import numpy as np
import pytest

from pipelines.simulators import lab_physics, lab_systems, labsim
from pipelines.simulators.lab_systems import SYSTEMS, Fault, RunPlan
from pipelines.simulators.labsim import regressed_counters, simulate_run

SHOP = SYSTEMS["shop"]
E1, E2, E3 = SHOP.environments          # reference CPU / slower CPU / half the memory
T0 = datetime(2026, 9, 1, tzinfo=timezone.utc)


def plan(env=E1, fault=None, rate=1.0, seed=5, version="4.3.1", system="shop"):
    return RunPlan("t", system, version, env, T0, seed=seed, fault=fault, rate_factor=rate)


def load_median(run, counter):
    tl = run.timeline
    return float(np.median(run.means[counter][tl.load_start:tl.load_start + tl.duration_s]))


@pytest.mark.parametrize("servers,rho,expected", [
    (1, 0.5, 0.5),            # M/M/1: P(wait) = rho
    (1, 0.8, 0.8),
    (2, 0.5, 1 / 3),          # a=1: B2 = 0.5/2.5 = 0.2; C = 0.2 / (1 - 0.5*0.8) = 1/3
    (3, 0.0, 0.0),
])
def test_erlang_c_matches_hand_computed_values(servers, rho, expected):
    assert lab_physics.erlang_c(servers, np.array([rho]))[0] == pytest.approx(expected, abs=1e-9)


def test_utilisation_law_cpu_follows_throughput_times_demand():
    # U = X * D / c ; D = 18 ms at the reference core plus 8 % GC work, c = 8 cores
    run = simulate_run(plan())
    x = load_median(run, "app.throughput_rps")
    expected = 100 * x * (0.018 * 1.08) / 8
    assert load_median(run, "tomcat.cpu_pct") == pytest.approx(expected, rel=0.03)


def test_utilisation_rises_with_load():
    low, high = simulate_run(plan(rate=0.7)), simulate_run(plan(rate=1.3))
    ratio = load_median(high, "tomcat.cpu_pct") / load_median(low, "tomcat.cpu_pct")
    assert ratio == pytest.approx(1.3 / 0.7, rel=0.05)
    assert load_median(high, "app.response_time_ms") > load_median(low, "app.response_time_ms")


def test_utilisation_falls_with_more_cores():
    eight, sixteen = simulate_run(plan()), simulate_run(plan(env=dict(E1, cpu_cores=16)))
    assert load_median(sixteen, "tomcat.cpu_pct") == pytest.approx(load_median(eight, "tomcat.cpu_pct") / 2, rel=0.03)
    assert load_median(sixteen, "app.response_time_ms") <= load_median(eight, "app.response_time_ms")


def test_slower_cpu_raises_utilisation_and_response_time():
    fast, slow = simulate_run(plan(env=E1)), simulate_run(plan(env=E2))
    speed = 2.0 * 0.95 / 2.6           # E5-2620 against the 2.6 GHz reference
    assert load_median(slow, "tomcat.cpu_pct") == pytest.approx(load_median(fast, "tomcat.cpu_pct") / speed, rel=0.03)
    assert load_median(slow, "app.response_time_ms") > 1.2 * load_median(fast, "app.response_time_ms")


def test_littles_law_busy_threads():
    run = simulate_run(plan(rate=1.2))
    x = run.means["app.throughput_rps"]
    r = run.means["app.response_time_ms"] / 1000
    busy = run.means["tomcat.busy_threads"]
    tl = run.timeline
    sl = slice(tl.load_start, tl.load_start + tl.duration_s)
    np.testing.assert_allclose(busy[sl], (x * r)[sl], rtol=1e-6)


def test_less_memory_pages_when_the_heap_grows():
    fault = Fault("memory_bloat", 2.5)
    big = simulate_run(plan(env=E1, fault=fault))
    big_clean = simulate_run(plan(env=E1))
    small = simulate_run(plan(env=dict(E1, memory_gb=8), fault=fault))
    # 16 GB hold the bloated heap: no hard faults beyond the soft faults of a clean run
    assert load_median(big, "tomcat.page_faults_per_s") == pytest.approx(
        load_median(big_clean, "tomcat.page_faults_per_s"), rel=0.01)
    # 8 GB do not: hard faults and the disk reads that serve them appear
    assert load_median(small, "tomcat.page_faults_per_s") > 2 * load_median(big, "tomcat.page_faults_per_s")
    assert load_median(small, "tomcat.io_read_bytes_per_s") > 10 * load_median(big, "tomcat.io_read_bytes_per_s")
    assert load_median(small, "web01.mem_available_mb") < load_median(big, "web01.mem_available_mb")


def test_smaller_buffer_pool_means_more_disk_reads():
    # db 5.1.45 ships a 2 GB pool, 5.5.62 a 4 GB one: the same queries miss less with the larger pool
    old, new = simulate_run(plan(env=E1)), simulate_run(plan(env=dict(E1, db_version="5.5.62")))
    assert load_median(old, "mysql.io_read_ops_per_s") > 2 * load_median(new, "mysql.io_read_ops_per_s")
    assert load_median(old, "mysql.buffer_pool_hit_pct") < load_median(new, "mysql.buffer_pool_hit_pct")


MECHANISMS = {
    # cause: (counters the mechanism must move, related-looking counters it must leave alone)
    "cpu_hot_path": ({"tomcat.cpu_pct", "tomcat.user_pct", "web01.cpu_pct", "app.response_time_ms"},
                     {"mysql.cpu_pct", "mysql.io_read_ops_per_s", "mysql.transactions_per_s",
                      "tomcat.private_bytes", "tomcat.io_write_ops_per_s", "app.throughput_rps"}),
    "memory_bloat": ({"tomcat.private_bytes", "tomcat.working_set_bytes", "tomcat.gc_time_pct"},
                     {"mysql.cpu_pct", "mysql.transactions_per_s", "app.throughput_rps",
                      "tomcat.io_write_ops_per_s"}),
    "extra_db_query": ({"mysql.transactions_per_s", "mysql.cpu_pct", "mysql.io_read_ops_per_s"},
                       {"tomcat.private_bytes", "tomcat.io_write_bytes_per_s", "app.throughput_rps",
                        "tomcat.user_pct"}),
    "missing_index": ({"mysql.cpu_pct", "mysql.rows_read_per_s", "mysql.io_read_bytes_per_s",
                       "app.response_time_ms"},
                      {"mysql.transactions_per_s", "tomcat.cpu_pct", "app.throughput_rps"}),
    "blocking_io": ({"tomcat.io_write_ops_per_s", "tomcat.io_write_bytes_per_s", "app.response_time_ms"},
                    {"tomcat.user_pct", "mysql.cpu_pct", "mysql.transactions_per_s"}),
    "cache_disabled": ({"mysql.buffer_pool_hit_pct", "mysql.io_read_ops_per_s", "mysql.cpu_pct"},
                       {"tomcat.cpu_pct", "tomcat.private_bytes", "app.throughput_rps"}),
    "cpu_contention": ({"web01.cpu_pct", "app.response_time_ms"},
                       {"tomcat.cpu_pct", "tomcat.user_pct", "mysql.cpu_pct", "app.throughput_rps"}),
    "load_mismatch": ({"app.arrival_rate", "app.throughput_rps", "tomcat.cpu_pct", "mysql.transactions_per_s"},
                      {"mysql.buffer_pool_hit_pct", "tomcat.gc_time_pct"}),
}


@pytest.mark.parametrize("cause", sorted(MECHANISMS))
def test_each_cause_moves_what_its_mechanism_implies(cause):
    lo, hi = lab_systems.SEVERITY_RANGE[cause]
    faulty_plan = plan(env=E2, fault=Fault(cause, (lo + hi) / 2))
    faulty, clean = simulate_run(faulty_plan), simulate_run(replace(faulty_plan, fault=None))
    moved = set(regressed_counters(faulty, clean))
    must, must_not = MECHANISMS[cause]
    assert must <= moved, f"{cause} did not move {must - moved}"
    assert not (must_not & moved), f"{cause} moved unrelated {must_not & moved}"


def test_the_same_seed_gives_the_same_archive_and_another_seed_does_not():
    a, b, c = simulate_run(plan(seed=3)), simulate_run(plan(seed=3)), simulate_run(plan(seed=4))
    for host in a.frames:
        assert a.frames[host].equals(b.frames[host])
    assert not a.frames["web01"].equals(c.frames["web01"])


NOISE_PROBE = """
import hashlib, sys
from pipelines.simulators import lab_physics
values = [lab_physics._noise(seed, f"c{seed}", 5000, cv) for seed, cv in ((1, 0.05), (2, 0.3), (3, 1.0))]
print(hashlib.sha256(b"".join(v.tobytes() for v in values)).hexdigest())
"""


def test_the_noise_is_the_same_bits_on_every_path_this_machine_takes():
    """numpy's float64 exp is the AVX-512 one where the CPU has it: the example's archives then
    differed between machines (a fourth decimal now and then).  The noise is drawn in long double,
    so numpy's SIMD levels do not reach it: each level this processor has is switched off in a
    process of its own (numpy reads the variable when it loads), beside one BLAS thread and the
    runnable OpenBLAS kernels; a level the processor lacks is not emulated (nothing to switch off)
    and is named as left out."""
    import warnings

    from tests import machine_variants

    ran = machine_variants.run_everywhere(NOISE_PROBE)
    for extra, path, _ in ran:
        assert machine_variants.took(extra, path), (extra, path)
    assert len({printed for _, _, printed in ran}) == 1
    z = lab_systems._rng(2, "noise", "c2").normal(0.0, 0.3, size=5000)           # the same draws, by hand
    np.testing.assert_allclose(lab_physics._noise(2, "c2", 5000, 0.3), np.exp(z), rtol=4e-16, atol=0)
    _, left_out = machine_variants.variants()
    if left_out:
        warnings.warn("not run on this processor: " + "; ".join(f"{k} ({why})" for k, why in left_out.items()),
                      stacklevel=1)


def test_fault_and_twin_share_their_noise():
    fault = plan(fault=Fault("blocking_io"))
    faulty, clean = simulate_run(fault), simulate_run(replace(fault, fault=None))
    # the database never sees the log writes: its counters are identical sample for sample
    np.testing.assert_array_equal(faulty.noisy["mysql.transactions_per_s"], clean.noisy["mysql.transactions_per_s"])


def test_collection_is_messy_like_real_collectors():
    run = simulate_run(plan(seed=9))
    frames = run.frames
    assert set(frames) == {"lg01", "web01", "db01"}
    assert sum(len(f.columns) - 1 for f in frames.values()) >= 60
    starts = {h: f["timestamp"].iloc[0] for h, f in frames.items()}
    assert len({str(s) for s in starts.values()}) == 3                 # hosts start apart
    from pipelines.validation.checks import parse_timestamps
    periods = {h: float(np.median(np.diff(parse_timestamps(f["timestamp"])))) for h, f in frames.items()}
    for h, p in periods.items():                                       # each host its own period
        assert min(abs(p - allowed) for allowed in SHOP.sampling_periods[h]) < 0.5
    drawn = {simulate_run(plan(seed=s)).frames["db01"].shape[0] for s in range(1, 6)}
    assert len(drawn) > 1                                              # the period is drawn per run
    lengths = {h: len(f) for h, f in frames.items()}
    tl = run.timeline
    for h, f in frames.items():
        expected = (tl.total - 50) / periods[h]
        assert lengths[h] < tl.total / periods[h]                      # some samples are lost
        assert lengths[h] > 0.9 * expected
    assert run.meta["duration_s"] == tl.duration_s
    # ramp-up and ramp-down are recorded outside the planned load phase
    t_epoch = parse_timestamps(frames["lg01"]["timestamp"])
    start = datetime.fromisoformat(run.meta["started_at"].replace("Z", "+00:00")).timestamp()
    assert (t_epoch < start).sum() > 10 and (t_epoch > start + tl.duration_s).sum() > 5


def test_counters_come_and_go_between_versions():
    early = simulate_run(plan(version="4.2.0"))
    late = simulate_run(plan(version="4.4.1"))
    assert "tomcat.gc_time_pct" not in early.frames["web01"].columns
    assert "tomcat.gc_time_pct" in late.frames["web01"].columns
    assert "jmeter.handle_count" in early.frames["lg01"].columns
    assert "jmeter.handle_count" not in late.frames["lg01"].columns


def test_second_system_is_a_different_topology():
    run = simulate_run(plan(system="ledger", env=SYSTEMS["ledger"].environments[0], version="2024.3"))
    assert set(run.frames) == {"lg02", "api01", "cache01", "pg01"}
    assert "redis.hit_pct" in run.frames["cache01"].columns
    assert sum(len(f.columns) - 1 for f in run.frames.values()) >= 60


def test_batch_job_makes_database_cpu_bimodal():
    run = simulate_run(plan(system="ledger", env=SYSTEMS["ledger"].environments[0], version="2024.3"))
    tl = run.timeline
    cpu = run.means["postgres.cpu_pct"][tl.load_start:tl.load_start + tl.duration_s]
    low, high = np.percentile(cpu, 25), np.percentile(cpu, 95)
    assert high > 3 * low


def test_lab_plan_has_enough_runs_per_cause_and_targets(tiny_lab):
    schedule = labsim.plan_lab(seed=7, systems=["shop", "ledger"],
                               history_causes=["cpu_hot_path", "memory_bloat", "extra_db_query",
                                               "missing_index", "blocking_io", "cache_disabled"],
                               target_causes=["cpu_contention", "load_mismatch"], n_normal=12, n_per_cause=6,
                               n_targets_normal=2, start="2026-09-01")
    for system in ("shop", "ledger"):
        hist = [e for e in schedule if e["system"] == system and e["verified"]]
        assert sum(e["cause"] == "none" for e in hist) == 12
        for cause in ("cpu_hot_path", "cache_disabled"):
            runs = [e for e in hist if e["cause"] == cause]
            assert len(runs) == 6
            assert len({str(sorted(e["environment"].items())) for e in runs}) == 3   # every environment
        targets = [e for e in schedule if e["system"] == system and not e["verified"]]
        assert any(e["environment"] == SYSTEMS[system].new_environment for e in targets)
        assert {e["cause"] for e in targets} == {"none", "cpu_contention", "load_mismatch"}
