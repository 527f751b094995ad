"""The importers on the real files in ../shared/data/formats.

Every expected count is taken from the file itself by an independent read (the csv module,
line counts), never from the importer's output; a truncated or garbled copy of each file
gives a clear reason.
"""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines import config
from pipelines.importers import collectors, common, jmeter, locust, perfmon, run_directory
from pipelines.validation import checks
from tests.helpers import GatlingBinaryLog

# real files written by the tools, with their licences (copied from ../shared/data/formats; README.md there)
FORMATS = Path(__file__).resolve().parents[1] / "data" / "formats"
PARAMS = config.load_params("ingest")
UNITS = config.load_params("validate")


def run_dir(tmp_path: Path, *files: Path, name: str = "lab-run-1", **yaml_fields) -> Path:
    d = tmp_path / name
    d.mkdir()
    for f in files:
        shutil.copy(f, d / f.name)
    fields = {"system": "demo", "version": "1", **yaml_fields}
    (d / "run.yaml").write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in fields.items()))
    return d


def convert(tmp_path, *files, **fields):
    return run_directory.convert_run_dir(run_dir(tmp_path, *files, **fields), PARAMS)


def series(frames, host, counter):
    f = frames[host]
    return f.set_index("timestamp")[counter]


def jtl_rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("name,host", [("ehrbase-load-test_result_20220425.jtl", "loadgen"),
                                       ("taurus_slow-stdev.jtl", "smehost")])
def test_jmeter_csv_with_either_column_set(tmp_path, name, host):
    path = FORMATS / "jmeter" / name
    assert collectors.sniff(path) == "jmeter_csv"
    rows = jtl_rows(path)
    meta, frames, _ = convert(tmp_path, path)
    assert list(frames) == [host]                       # Hostname column when the writer saved it
    rps = series(frames, host, "jmeter.throughput_rps")
    assert rps.sum() * PARAMS["interval_s"] == pytest.approx(len(rows))   # every request counted once
    # the first interval by hand: requests whose start falls in it
    start = np.array([int(r["timeStamp"]) for r in rows]) / 1000.0
    t0 = np.floor(start.min() / 10) * 10
    first = [float(r["elapsed"]) for r, s in zip(rows, start) if s < t0 + 10]
    assert rps.iloc[0] == pytest.approx(len(first) / 10)
    assert series(frames, host, "jmeter.response_time_ms").iloc[0] == pytest.approx(np.mean(first))
    assert series(frames, host, "jmeter.response_time_p95_ms").iloc[0] == pytest.approx(np.percentile(first, 95))
    failed = sum(r["success"] != "true" for r in rows)
    err = series(frames, host, "jmeter.error_rate_pct")
    assert (err.fillna(0) * rps).sum() / rps.sum() == pytest.approx(100.0 * failed / len(rows))
    # the samples sit at the end of their interval; the load phase spans them
    assert rps.index[0] == t0 + 10 and meta["duration_s"] == pytest.approx(rps.index[-1] - t0)
    labels = {r["label"] for r in rows}
    per_label = [c for c in frames[host].columns if c.endswith("_throughput_rps") and c != "jmeter.throughput_rps"]
    assert len(per_label) == min(len(labels), PARAMS["max_labels"])


@pytest.mark.parametrize("name,top_level,failed", [("taurus_resource_tc.xml.jtl", 5, None),
                                                   ("taurus_many-errors-empty-responses.xml.jtl", 42, 42)])
def test_jmeter_xml_counts_top_level_samples_only(tmp_path, name, top_level, failed):
    path = FORMATS / "jmeter" / name
    assert collectors.sniff(path) == "jmeter_xml"
    text = path.read_text()
    assert text.count("\n<sample ") + text.count("\n<httpSample ") == top_level
    _, frames, _ = convert(tmp_path, path)
    rps = series(frames, "loadgen", "jmeter.throughput_rps")
    assert rps.sum() * PARAMS["interval_s"] == pytest.approx(top_level)
    if failed is not None:
        assert series(frames, "loadgen", "jmeter.error_rate_pct").dropna().eq(100.0).all()


@pytest.mark.parametrize("name", ["taurus_gatling-3-000_v2format_simulation.log",
                                  "taurus_gatling-4-000_v2format_simulation.log",
                                  "taurus_gatling-331-000_simulation.log",
                                  "taurus_gatling-351-000_simulation.log"])
def test_gatling_every_layout(tmp_path, name):
    path = FORMATS / "gatling" / name
    assert collectors.sniff(path) == "gatling"
    lines = path.read_text().splitlines()
    requests = [line for line in lines if line.startswith("REQUEST\t")]
    _, frames, _ = convert(tmp_path, path)
    rps = series(frames, "loadgen", "gatling.throughput_rps")
    assert rps.sum() * PARAMS["interval_s"] == pytest.approx(len(requests))
    ko = sum("\tKO" in line for line in requests)
    err, n = series(frames, "loadgen", "gatling.error_rate_pct").fillna(0), rps * PARAMS["interval_s"]
    assert (err * n).sum() / 100.0 == pytest.approx(ko)
    assert series(frames, "loadgen", "gatling.active_users").max() >= 1


@pytest.mark.parametrize("name", ["taurus_k6_kpi_2021-10.csv", "taurus_k6_kpi_2021-01_k6-old-columns.csv"])
def test_k6_csv_old_and_new_columns(tmp_path, name):
    path = FORMATS / "k6" / name
    assert collectors.sniff(path) == "k6_csv"
    rows = [r for r in jtl_rows(path) if r["metric_name"] == "http_req_duration"]
    # a failed request: expected_response false (new) or status 0 / >= 400 (old columns)
    bad = sum((r.get("expected_response") or "").lower() == "false" if r.get("expected_response")
              else not (0 < float(r["status"] or 0) < 400) for r in rows)
    _, frames, _ = convert(tmp_path, path)
    rps = series(frames, "loadgen", "k6.throughput_rps")
    n = rps * PARAMS["interval_s"]
    assert n.sum() == pytest.approx(len(rows))
    assert (series(frames, "loadgen", "k6.error_rate_pct").fillna(0) * n).sum() / 100 == pytest.approx(bad)
    assert "k6.active_users" in frames["loadgen"].columns


def test_k6_json_from_its_documented_layout(tmp_path):
    """No licensed sample exists (tests/data/formats/README.md): these lines follow k6's documented --out json layout."""
    lines = [{"type": "Metric", "data": {"name": "http_req_duration", "type": "trend"}, "metric": "http_req_duration"}]
    for i, (ms, ok) in enumerate([(120.0, "true"), (80.0, "true"), (300.0, "false")]):
        lines.append({"type": "Point", "metric": "http_req_duration",
                      "data": {"time": f"2026-11-22T10:00:0{i}.5+01:00", "value": ms,
                               "tags": {"name": "home", "status": "200" if ok == "true" else "503",
                                        "expected_response": ok}}})
    lines.append({"type": "Point", "metric": "vus", "data": {"time": "2026-11-22T10:00:01+01:00", "value": 7,
                                                              "tags": {}}})
    path = tmp_path / "k6.json"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    assert collectors.sniff(path) == "k6_json"
    _, frames, _ = run_directory.convert_run_dir(run_dir(tmp_path, path), PARAMS)
    f = frames["loadgen"].set_index("timestamp")
    assert f.index[0] == pd.Timestamp("2026-11-22T09:00:10Z").timestamp()      # +01:00 -> UTC, interval end
    assert f["k6.throughput_rps"].iloc[0] == pytest.approx(0.3)
    assert f["k6.response_time_ms"].iloc[0] == pytest.approx((120 + 80 + 300) / 3)
    assert f["k6.error_rate_pct"].iloc[0] == pytest.approx(100 / 3)
    assert f["k6.active_users"].iloc[0] == 7


def test_locust_stats_history(tmp_path):
    path = FORMATS / "locust" / "bitcoin-api_results_stats_history.csv"
    assert collectors.sniff(path) == "locust"
    for other in ("bitcoin-api_results_stats.csv", "bitcoin-api_results_failures.csv"):
        assert collectors.sniff(FORMATS / "locust" / other) is None        # no time series: not read
    rows = jtl_rows(path)
    _, frames, _ = convert(tmp_path, path)
    users = series(frames, "loadgen", "locust.active_users")
    assert len(users) == len(rows) and users.tolist() == [float(r["User Count"]) for r in rows]
    p95 = series(frames, "loadgen", "locust.response_time_p95_ms")
    assert p95.isna().sum() == sum(r["95%"] == "N/A" for r in rows)          # N/A: a missing sample


@pytest.mark.parametrize("name,counter", [("generated_sadf-d_u-r-q-b-nDEV.csv", "vm.eth0_rxkb_per_s"),
                                          ("generated_sadf-dh_u-r-q-b-w.csv", "vm.cswch_per_s"),
                                          ("generated_sadf-d_P-ALL.csv", "vm.cpu1_user_pct")])
def test_sadf_d_and_dh(tmp_path, name, counter):
    path = FORMATS / "sysstat" / name
    assert collectors.sniff(path) == "sadf"
    first_block = []
    with open(path) as fh:
        header = fh.readline().lstrip("# ").strip().split(";")
        for line in fh:
            if line.startswith("#"):
                break
            first_block.append(dict(zip(header, line.strip().split(";"))))
    whole = [r for r in first_block if r["CPU"] == "-1"]
    _, frames, _ = convert(tmp_path, path)
    user = series(frames, "vm", "vm.cpu_user_pct")
    assert len(user) == len(whole) == 160
    assert user.tolist() == pytest.approx([float(r["%user"]) for r in whole])
    assert user.index[0] == pd.Timestamp(whole[0]["timestamp"].replace(" UTC", "Z")).timestamp()
    assert counter in frames["vm"].columns
    # host-level: the validate units table holds it to 0-100
    assert checks.counter_kind("vm.cpu_user_pct", "vm", units=UNITS["units"],
                                 host_components=UNITS["host_components"]) == "share_pct"


def test_pidstat_needs_a_timezone_and_gives_the_cores(tmp_path):
    path = FORMATS / "sysstat" / "generated_pidstat_h-u-r-d-w.txt"
    assert collectors.sniff(path) == "pidstat"
    with pytest.raises(run_directory.IngestError, match="timezone"):
        convert(tmp_path, path)
    data = [line.split() for line in path.read_text().splitlines()
            if line.strip() and not line.startswith(("#", "Linux", "Average"))]
    meta, frames, _ = run_directory.convert_run_dir(run_dir(tmp_path, path, name="lab-run-2", timezone="UTC"), PARAMS)
    cpu = series(frames, "vm", "python3.cpu_pct")
    assert len(cpu) == len(data) and cpu.tolist() == pytest.approx([float(r[7]) for r in data])
    assert cpu.index[0] == pd.Timestamp(f"2026-11-22T{data[0][0]}Z").timestamp()
    assert meta["environment"]["vm.cpu_cores"] == 2                       # from "(2 CPU)"
    assert checks.counter_kind("python3.cpu_pct", "vm", units=UNITS["units"],
                                 host_components=UNITS["host_components"]) == "process_cpu_pct"


def test_pidstat_refuses_an_ambiguous_local_time(tmp_path):
    text = (FORMATS / "sysstat" / "generated_pidstat_h-u-r-d-w.txt").read_text()
    # 2026-10-25 02:30 happens twice in Europe/Paris (the clocks go back at 03:00)
    text = text.replace("11/22/26", "10/25/26").replace("10:32:", "02:32:")
    path = tmp_path / "pidstat.txt"
    path.write_text(text)
    with pytest.raises(common.FormatError, match="not unique in Europe/Paris"):
        collectors.read_pidstat(path, timezone="Europe/Paris")


def test_prometheus_full_response_bare_matrix_and_keyed_matrices(tmp_path):
    full = FORMATS / "prometheus" / "generated_query_range_node_cpu_rate_1s.json"
    doc = json.loads(full.read_text())
    n_series, n_points = len(doc["data"]["result"]), len(doc["data"]["result"][0]["values"])
    samples, _ = collectors.read_prometheus(full, name_hint="node_cpu_rate")
    assert samples["counter"].nunique() == n_series and samples.groupby("counter").size().eq(n_points).all()
    assert set(samples["host"]) == {"127.0.0.1"}                           # instance, port dropped
    bare = FORMATS / "prometheus" / "prometheus-api-client_up_201907281200.json"
    series_list = json.loads(bare.read_text())
    samples, _ = collectors.read_prometheus(bare, name_hint="up")
    assert samples["host"].nunique() == len({s["metric"]["instance"].rsplit(":", 1)[0] for s in series_list})
    assert len(samples) == sum(len(s["values"]) for s in series_list)
    keyed = FORMATS / "prometheus" / "kepler-model-server_prom_output_idle.json"
    queries = json.loads(keyed.read_text())
    samples, _ = collectors.read_prometheus(keyed, name_hint="kepler")
    # kepler's raw joule counters become watts: the rate of each series by hand
    assert not samples["counter"].str.contains("joules_total").any()
    watts = samples[samples["counter"].str.contains("kepler_node_package_joules_per_s")]
    assert len(watts)
    raw = next(s for s in queries["kepler_node_package_joules_total"] if s["values"])
    t, x = [float(p[0]) for p in raw["values"]], [float(p[1]) for p in raw["values"]]
    by_hand = [(x[i] - x[i - 1] if x[i] >= x[i - 1] else x[i]) / (t[i] - t[i - 1]) for i in range(1, len(x))]
    series_of = watts.groupby("counter")["value"].apply(lambda v: v.tolist()[1:])
    assert any(got == pytest.approx(by_hand) for got in series_of)
    assert len(samples) <= sum(len(s["values"]) for v in queries.values() for s in v)
    # a run directory of several formats: every counter unique across hosts
    meta, frames, notes = convert(tmp_path, bare)
    names = [c for f in frames.values() for c in f.columns if c != "timestamp"]
    assert len(names) == len(set(names))


PERFMON = ('"(PDH-CSV 4.0) (W. Europe Standard Time)(-60)","\\\\APP01\\Processor(_Total)\\% Processor Time",'
           '"\\\\APP01\\Process(tomcat)\\% Processor Time","\\\\APP01\\Process(tomcat)\\Private Bytes",'
           '"\\\\APP01\\Memory\\Available MBytes"\n'
           '"11/22/2026 10:00:00.000","35.5","380.25","1048576","2048"\n'
           '"11/22/2026 10:00:15.000","41.0"," ","1050000","2040"\n')


def test_perfmon_csv_from_microsofts_documented_layout(tmp_path):
    """No licensed PerfMon sample exists (tests/data/formats/README.md); this file follows Microsoft's
    documented relog/typeperf CSV layout: a PDH-CSV 4.0 header with the zone and its bias in
    minutes (UTC = local + bias), then one \\\\HOST\\Object(instance)\\Counter column each."""
    path = tmp_path / "perfmon.csv"
    path.write_text(PERFMON)
    assert collectors.sniff(path) == "perfmon"
    _, frames, _ = run_directory.convert_run_dir(run_dir(tmp_path, path), PARAMS)
    f = frames["APP01"].set_index("timestamp")
    assert f.index[0] == pd.Timestamp("2026-11-22T09:00:00Z").timestamp()     # 10:00 local, bias -60
    assert f["tomcat.processor_time_pct"].tolist()[0] == 380.25 and np.isnan(f["tomcat.processor_time_pct"].iloc[1])
    assert f["APP01.processor_total_processor_time_pct"].tolist() == [35.5, 41.0]
    assert "APP01.memory_available_mbytes" in f.columns and "tomcat.private_bytes" in f.columns
    kinds = {c: checks.counter_kind(c, "APP01", units=UNITS["units"], host_components=UNITS["host_components"])
             for c in ("tomcat.processor_time_pct", "APP01.processor_total_processor_time_pct")}
    assert kinds == {"tomcat.processor_time_pct": "process_cpu_pct",
                     "APP01.processor_total_processor_time_pct": "share_pct"}


@pytest.mark.parametrize("source,cut,words", [
    ("jmeter/ehrbase-load-test_result_20220425.jtl", lambda b: b[: len(b) // 2], "JMeter CSV"),
    ("jmeter/taurus_resource_tc.xml.jtl", lambda b: b[: len(b) // 2], "not well-formed"),
    ("gatling/taurus_gatling-351-000_simulation.log", lambda b: b.replace(b"\tOK", b"\t??", 1), "line"),
    ("prometheus/generated_query_range_node_cpu_rate_1s.json", lambda b: b[: len(b) // 2], "truncated"),
    ("sysstat/generated_sadf-d_u-r-q-b-nDEV.csv", lambda b: b[: len(b) // 2 + 7], "fields under a header"),
    ("sysstat/generated_pidstat_h-u-r-d-w.txt", lambda b: b[: b.rfind(b"python3", 0, len(b) // 2) - 20],
     "fields under a header"),                                     # a data row cut short
])
def test_a_truncated_or_garbled_file_gives_a_clear_reason(tmp_path, source, cut, words):
    src = FORMATS / source
    path = tmp_path / src.name
    path.write_bytes(cut(src.read_bytes()))
    with pytest.raises(run_directory.IngestError) as err:
        convert(tmp_path, path, timezone="UTC")
    assert src.name in str(err.value) and words in str(err.value)


def test_run_yaml_is_required_and_checked(tmp_path):
    d = tmp_path / "r1"
    d.mkdir()
    shutil.copy(FORMATS / "k6" / "taurus_k6_kpi_2021-10.csv", d)
    with pytest.raises(run_directory.IngestError, match="no run.yaml"):
        run_directory.convert_run_dir(d, PARAMS)
    (d / "run.yaml").write_text("system: demo\n")
    with pytest.raises(run_directory.IngestError,
                       match="\\['version'\\] given by none of lab.yaml, run.yaml or the flags"):
        run_directory.convert_run_dir(d, PARAMS)
    (d / "run.yaml").write_text("!!python/object/apply:os.system ['true']\n")
    with pytest.raises(run_directory.IngestError, match="not valid YAML"):
        run_directory.convert_run_dir(d, PARAMS)


def test_a_lab_file_and_flags_stand_in_for_run_yaml(tmp_path):
    """lab.yaml beside the run directories holds what is constant for the lab; the flags add the
    run's own fields; run.yaml, when there, sits between them; environment keys merge."""
    lab = tmp_path / "lab"
    d = lab / "night-1"
    d.mkdir(parents=True)
    shutil.copy(FORMATS / "k6" / "taurus_k6_kpi_2021-10.csv", d)
    (lab / "lab.yaml").write_text("system: shop\nenvironment: {cpu_cores: 8, db: pg15}\ntimezone: UTC\n"
                                  "workload: {profile: steady, load_counter: k6.active_users}\n")
    meta, frames, notes = run_directory.convert_run_dir(
        d, PARAMS, {"version": "2.4.1", "environment": {"db": "pg16"}, "verdict": "pass"})
    assert (meta["system"], meta["version"], meta["verdict"]) == ("shop", "2.4.1", "pass")
    assert meta["environment"]["cpu_cores"] == 8 and meta["environment"]["db"] == "pg16"
    assert meta["workload"]["load_counter"] == "k6.active_users"
    assert not any("lab.yaml" in n for n in notes)                  # not taken for a collector file
    (d / "run.yaml").write_text("version: '2.4.0'\nenvironment: {db: pg14}\n")
    meta, _, _ = run_directory.convert_run_dir(d, PARAMS, {"environment": {}})
    assert (meta["version"], meta["environment"]["db"], meta["environment"]["cpu_cores"]) == ("2.4.0", "pg14", 8)
    from pipelines.cli import ingest
    out = tmp_path / "out"
    ingest.main([str(d), "--out", str(out), "--version", "2.5", "--environment", "db=pg17", "--verdict", "fail",
                 "--cause", "slow_query"])
    import tarfile
    with tarfile.open(out / "night-1.tar.gz") as tf:
        run = json.load(tf.extractfile("run.json"))
    assert (run["version"], run["environment"]["db"], run["verdict"], run["cause"]) == ("2.5", "pg17", "fail",
                                                                                          "slow_query")


def test_rename_table_and_host_map(tmp_path):
    params = dict(PARAMS, rename=[{"pattern": r"^k6\.", "replace": "app."}])
    d = run_dir(tmp_path, FORMATS / "k6" / "taurus_k6_kpi_2021-10.csv", hosts={"loadgen": "lg01"})
    _, frames, _ = run_directory.convert_run_dir(d, params)
    assert list(frames) == ["lg01"] and "app.throughput_rps" in frames["lg01"].columns


def test_locust_response_time_is_per_interval_not_cumulative(tmp_path):
    """Locust's ``Total Average Response Time`` is cumulative: 10 requests a second at 100 ms for
    30 s, then at 200 ms: the cumulative average after 40 s is (300 x 100 + 100 x 200) / 400 = 125,
    but the interval's mean is 200 (the change of count x average over the change of count)."""
    header = "Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,95%,Total Request Count,Total Failure Count,Total Average Response Time"
    lines, total, count = [header], 0.0, 0
    for t in range(60):
        ms = 100.0 if t < 30 else 200.0
        total, count = total + 10 * ms, count + 10
        lines.append(f"{1772849600 + t},10,,Aggregated,10.0,0.0,{ms:g},{ms:g},{count},0,{total / count!r}")
    path = tmp_path / "step_stats_history.csv"
    path.write_text("\n".join(lines) + "\n")
    _, frames, _ = convert(tmp_path, path)
    mean = series(frames, "loadgen", "locust.response_time_ms")
    assert mean.iloc[:30].tolist() == pytest.approx([100.0] * 30) and mean.iloc[30:].tolist() == pytest.approx([200.0] * 30)
    assert locust.interval_mean(pd.Series([0.0, 100.0, 125.0, 125.0]), pd.Series([0, 10, 20, 20])).tolist()[1:3] == \
        pytest.approx([100.0, 150.0])                 # (20 x 125 - 10 x 100) / 10; the last: no request, NaN
    assert np.isnan(locust.interval_mean(pd.Series([0.0, 100.0, 125.0, 125.0]), pd.Series([0, 10, 20, 20])).iloc[3])


def test_locust_real_file_per_interval_mean_by_hand(tmp_path):
    path = FORMATS / "locust" / "bitcoin-api_results_stats_history.csv"
    rows = [r for r in jtl_rows(path) if r["Name"] == "Aggregated"]
    _, frames, _ = convert(tmp_path, path)
    mean = series(frames, "loadgen", "locust.response_time_ms")
    expected, prev_sum, prev_n = [], 0.0, 0
    for r in rows:
        n, avg = int(r["Total Request Count"]), float(r["Total Average Response Time"])
        expected.append((n * avg - prev_sum) / (n - prev_n) if n > prev_n else float("nan"))
        prev_sum, prev_n = n * avg, n
    assert len(mean) == len(expected)
    got = np.array(mean.tolist(), dtype=float)
    want = np.array(expected, dtype=float)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.allclose(got[~np.isnan(got)], want[~np.isnan(want)])


def test_perfmon_from_typeperf_with_a_bare_header_and_a_blank_first_line(tmp_path):
    """typeperf may write the bare '(PDH-CSV 4.0)' (no zone, no bias) and a blank line first:
    read with the run's timezone (10:00 in Berlin in November is 09:00 UTC), refused without it,
    with what to set."""
    bare = "\n" + PERFMON.replace("(PDH-CSV 4.0) (W. Europe Standard Time)(-60)", "(PDH-CSV 4.0)", 1)
    path = tmp_path / "typeperf.csv"
    path.write_text(bare)
    assert collectors.sniff(path) == "perfmon"
    (tmp_path / "with").mkdir()
    _, frames, _ = run_directory.convert_run_dir(run_dir(tmp_path / "with", path, timezone="Europe/Berlin"), PARAMS)
    f = frames["APP01"].set_index("timestamp")
    assert f.index[0] == pd.Timestamp("2026-11-22T09:00:00Z").timestamp()
    assert f["APP01.processor_total_processor_time_pct"].tolist() == [35.5, 41.0]
    with pytest.raises(common.FormatError, match="names no time zone .*set 'timezone' in the run's run.yaml"):
        perfmon.read_perfmon(path, timezone=None)


@pytest.mark.parametrize("fmt,scale", [("unix", 1), ("unix_milli", 10**3), ("unix_micro", 10**6),
                                       ("unix_nano", 10**9), ("rfc3339", None)])
def test_k6_csv_in_every_documented_time_format(tmp_path, fmt, scale):
    """The real k6 file rewritten in each ``timeFormat`` k6 documents: the same counters as the
    default (unix seconds)."""
    path = FORMATS / "k6" / "taurus_k6_kpi_2021-10.csv"
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    seconds = frame["timestamp"].astype(int)
    frame["timestamp"] = (seconds.map(lambda s: pd.Timestamp(s, unit="s", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ"))
                          if scale is None else (seconds * scale).astype(str))
    other = tmp_path / f"k6_{fmt}.csv"
    frame.to_csv(other, index=False)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _, want, _ = convert(tmp_path / "a", path)
    _, got, _ = convert(tmp_path / "b", other)
    pd.testing.assert_frame_equal(got["loadgen"], want["loadgen"])


def test_jmeter_csv_with_a_semicolon_delimiter_and_a_multiline_message(tmp_path):
    """The real JTL written with ``default_delimiter=;`` and one failureMessage spread over two
    lines (quoted, as JMeter writes it): the same counters as the original."""
    path = FORMATS / "jmeter" / "ehrbase-load-test_result_20220425.jtl"
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    header = rows[0]
    if "failureMessage" in header:
        rows[1][header.index("failureMessage")] = "first line\nsecond line; with a delimiter"
    other = tmp_path / "semicolon.jtl"
    with open(other, "w", newline="") as fh:
        csv.writer(fh, delimiter=";", quoting=csv.QUOTE_MINIMAL).writerows(rows)
    assert collectors.sniff(other) == "jmeter_csv"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _, want, _ = convert(tmp_path / "a", path)
    _, got, _ = convert(tmp_path / "b", other)
    assert set(got) == set(want)
    for host in want:
        pd.testing.assert_frame_equal(got[host], want[host])


def test_a_raw_prometheus_counter_becomes_its_rate(tmp_path):
    """A counter exported raw (named ..._total): 0, 10, 30, then a restart to 5, then 25, at 10 s
    steps: rates -, 1, 2, 0.5 (5 since the restart), 2 per second; a rate() query (no __name__)
    is taken as it is."""
    doc = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "http_requests_total", "instance": "app01:9100", "job": "shop"},
         "values": [[0, "0"], [10, "10"], [20, "30"], [30, "5"], [40, "25"]]},
        {"metric": {"instance": "app01:9100", "job": "shop"}, "values": [[0, "3"], [10, "4"]]}]}}
    path = tmp_path / "raw.json"
    path.write_text(json.dumps(doc))
    samples, _ = collectors.read_prometheus(path, name_hint="rate_query")
    rate = samples[samples["counter"] == "shop.http_requests_per_s"].sort_values("ts")["value"].tolist()
    assert np.isnan(rate[0]) and rate[1:] == pytest.approx([1.0, 2.0, 0.5, 2.0])
    kept = samples[samples["counter"] == "shop.rate_query"].sort_values("ts")["value"].tolist()
    assert kept == [3.0, 4.0]


def test_a_k6_summary_beside_the_results_is_listed_as_ignored_and_the_run_goes_on(tmp_path):
    """k6's --summary-export (or a handleSummary JSON) in the run folder used to abort the run as a
    broken Prometheus file: it is a foreign file, ignored with its reason, the CSV still read."""
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"root_group": {"name": "", "checks": []}, "options": {},
                                   "state": {"testRunDurationMs": 1000},
                                   "metrics": {"http_req_duration": {"type": "trend", "values": {"avg": 12.5}}}}))
    assert collectors.sniff(summary) == "prometheus"                 # its first bytes look like it
    _, frames, notes = convert(tmp_path, FORMATS / "k6" / "taurus_k6_kpi_2021-10.csv", summary)
    assert "k6.throughput_rps" in frames["loadgen"].columns
    assert any(n.startswith("summary.json: summary.json: a k6 end-of-test summary") and n.endswith("ignored")
               for n in notes)


def test_a_binary_gatling_log_is_read_by_hand(tmp_path):
    """Gatling 3.12 and later write simulation.log in binary: read, with the counters computed by
    hand.  Run start 1,700,000,000,000 ms; two users; interval 10 s: requests at +1 s (100 ms,
    OK), +2 s (300 ms, KO), +3 s (200 ms, OK, a repeated name) in the first interval, +12 s
    (400 ms, OK) in the second; a group record and an error record between them are skipped."""
    t0 = 1_700_000_000_000
    log = GatlingBinaryLog(t0)
    log.user(t0 + 500, True)
    log.user(t0 + 600, True)
    log.request("home", t0 + 1000, t0 + 1100, True)
    log.request("login", t0 + 2000, t0 + 2300, False, "status.find.is(200), but actually found 500")
    log.group("checkout", t0 + 2000, t0 + 2500)
    log.out += bytes([4])
    log.cached("an error message")
    log.out += (2500).to_bytes(4, "big")
    log.request("home", t0 + 3000, t0 + 3200, True)
    log.request("home", t0 + 12000, t0 + 12400, True)
    log.user(t0 + 13000, False)
    path = tmp_path / "simulation.log"
    path.write_bytes(bytes(log.out))
    assert collectors.sniff(path) == "gatling_binary"
    _, frames, notes = convert(tmp_path, path, load_generator_host="gatling-1")
    assert any("4 requests, 2 labels" in n for n in notes)
    f = frames["gatling-1"].set_index("timestamp")
    # interval 10 s: 3 requests in the first (0.3 /s, 1 of 3 failed, mean 200 ms), 1 in the second
    assert f["gatling.throughput_rps"].tolist()[:2] == pytest.approx([0.3, 0.1])
    assert f["gatling.error_rate_pct"].iloc[0] == pytest.approx(100 / 3)
    assert f["gatling.response_time_ms"].tolist()[:2] == pytest.approx([200.0, 400.0])
    assert f["gatling.active_users"].max() == 2


@pytest.mark.parametrize("cut", [7, 40, -3])
def test_a_truncated_binary_gatling_log_says_where(tmp_path, cut):
    t0 = 1_700_000_000_000
    log = GatlingBinaryLog(t0)
    log.request("home", t0 + 1000, t0 + 1100, True)
    path = tmp_path / "simulation.log"
    path.write_bytes(bytes(log.out)[:cut])
    with pytest.raises(common.FormatError, match="simulation.log.*(byte|a binary Gatling log)"):
        collectors.read_file(path, "gatling_binary", host=None, timezone=None, aggregation=common.Aggregation(10, [50], [], 5))


RECORDED = Path(__file__).resolve().parents[1] / "data" / "recorded"


def test_sadf_json_and_epoch_times_give_the_counters_of_sadf_d(tmp_path):
    """sadf -j, sadf -dU and sadf -d of one sysstat data file (recorded with sysstat 12.6.1,
    tests/data/recorded/README.md) give the same counters, times and values; -j also the cores."""
    base = RECORDED / "sysstat"
    assert collectors.sniff(base / "sadf-j_u-PALL-r-q-b-w-nDEV-d.json") == "sadf_json"
    read = {name: collectors.read_file(base / name, fmt, host=None, timezone=None, aggregation=common.Aggregation(10, [50], [], 5))
            for name, fmt in (("sadf-d_u-PALL-r-q-b-w-nDEV-d.csv", "sadf"),
                              ("sadf-dU_u-PALL-r-q-b-w-nDEV-d.csv", "sadf"),
                              ("sadf-j_u-PALL-r-q-b-w-nDEV-d.json", "sadf_json"))}
    key = ["host", "counter", "ts"]
    frames = [p.samples.sort_values(key).reset_index(drop=True) for p in read.values()]
    assert len(frames[0]) > 200
    for other in frames[1:]:
        pd.testing.assert_frame_equal(frames[0], other)
    assert read["sadf-j_u-PALL-r-q-b-w-nDEV-d.json"].cores == {"vm": 2.0}
    # one value by hand: the first kbmemused of the -d file
    with open(base / "sadf-d_u-PALL-r-q-b-w-nDEV-d.csv") as fh:
        lines = fh.read().splitlines()
    at = next(i for i, line in enumerate(lines) if "kbmemused" in line)
    first = dict(zip(lines[at].lstrip("# ").split(";"), lines[at + 1].split(";")))
    row = frames[2][frames[2]["counter"] == "vm.kbmemused"].iloc[0]
    assert row["value"] == float(first["kbmemused"])
    assert row["ts"] == pd.Timestamp(first["timestamp"].replace(" UTC", ""), tz="UTC").timestamp()


def test_sadf_json_local_times_need_the_timezone(tmp_path):
    doc = json.loads((RECORDED / "sysstat" / "sadf-j_u-PALL-r-q-b-w-nDEV-d.json").read_text())
    for stat in doc["sysstat"]["hosts"][0]["statistics"]:
        stat["timestamp"]["utc"] = 0                      # what sadf -j -t writes
    path = tmp_path / "sar.json"
    path.write_text(json.dumps(doc))
    kw = dict(host=None, aggregation=common.Aggregation(10, [50], [], 5))
    with pytest.raises(common.FormatError, match="local times; set `timezone`"):
        collectors.read_file(path, "sadf_json", timezone=None, **kw)
    utc = collectors.read_file(RECORDED / "sysstat" / "sadf-j_u-PALL-r-q-b-w-nDEV-d.json", "sadf_json",
                               timezone=None, **kw).samples
    paris = collectors.read_file(path, "sadf_json", timezone="Europe/Paris", **kw).samples
    assert (utc["ts"] - paris["ts"]).unique().tolist() == [3600.0]     # 25 November: UTC+1


def test_jmeter_transaction_controller_rows_are_not_counted_twice(tmp_path):
    """A Transaction Controller (no parent sample) writes a row of its own after its children,
    responseMessage 'Number of samples in transaction : 2, number of failing samples : 0': two
    requests a transaction, not three; its elapsed (the sum) not in the mean."""
    lines = ["timeStamp,elapsed,label,responseCode,responseMessage,threadName,success,allThreads"]
    for i in range(10):
        t = 1_700_000_000_000 + 1000 * i
        lines += [f"{t},100,login,200,OK,tg 1-1,true,1", f"{t + 100},300,search,200,OK,tg 1-1,true,1",
                  f"{t + 400},400,checkout,200,\"Number of samples in transaction : 2, number of failing samples : 0\","
                  "tg 1-1,true,1"]
    path = tmp_path / "tc.jtl"
    path.write_text("\n".join(lines) + "\n")
    events, _, _ = jmeter.read_jmeter_csv(path)
    assert len(events) == 20 and set(events["label"]) == {"login", "search"}
    assert events["elapsed_ms"].mean() == pytest.approx(200.0)        # (100 + 300) / 2, not (100 + 300 + 400) / 3


@pytest.mark.parametrize("java,python,tz_field", [
    ("yyyy/MM/dd HH:mm:ss.SSS", "%Y/%m/%d %H:%M:%S.%f", {}),                                # recognised alone
    ("dd.MM.yyyy HH:mm:ss.SSS", "%d.%m.%Y %H:%M:%S.%f", {"timestamp_format": "dd.MM.yyyy HH:mm:ss.SSS"})])
def test_jmeter_csv_with_a_date_timestamp_reads_as_its_epoch_twin(tmp_path, java, python, tz_field):
    """jmeter.save.saveservice.timestamp_format set to a date pattern: the real JTL rewritten with
    its timeStamp as Berlin local time gives the counters of the original (epoch ms)."""
    src = FORMATS / "jmeter" / "ehrbase-load-test_result_20220425.jtl"
    rows = jtl_rows(src)
    dated = tmp_path / "src"
    dated.mkdir()
    out = dated / "result.jtl"
    with open(out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            local = pd.Timestamp(int(r["timeStamp"]), unit="ms", tz="UTC").tz_convert("Europe/Berlin")
            w.writerow({**r, "timeStamp": local.strftime(python)[: -3 if python.endswith("%f") else None]})
    for sub in "abc":
        (tmp_path / sub).mkdir()
    _, want, _ = convert(tmp_path / "a", src)
    _, got, _ = convert(tmp_path / "b", out, timezone="Europe/Berlin", **tz_field)
    pd.testing.assert_frame_equal(want["loadgen"], got["loadgen"])
    with pytest.raises(run_directory.IngestError, match="local time.*set `timezone` in run.yaml"):
        convert(tmp_path / "c", out, **tz_field)


def test_a_gzipped_k6_csv_is_read_as_the_plain_one_and_a_bomb_is_refused(tmp_path):
    """k6 --out csv=results.csv.gz: the same counters as the plain file; a broken gzip beside it is
    listed as ignored with its reason; one inflating past max_file_bytes is refused."""
    import gzip

    src = FORMATS / "k6" / "taurus_k6_kpi_2021-10.csv"
    packed = tmp_path / "results.csv.gz"
    packed.write_bytes(gzip.compress(src.read_bytes()))
    broken = tmp_path / "old.csv.gz"
    broken.write_bytes(gzip.compress(bytes(range(256)) * 40)[:200])      # cut inside its data
    for sub in "ab":
        (tmp_path / sub).mkdir()
    _, want, _ = convert(tmp_path / "a", src)
    _, got, notes = convert(tmp_path / "b", packed, broken)
    pd.testing.assert_frame_equal(want["loadgen"], got["loadgen"])
    assert any(n.startswith("results.csv.gz (k6_csv): ") for n in notes)
    assert any(n.startswith("old.csv.gz: a gzip file that does not decompress") and n.endswith("ignored")
               for n in notes)
    bomb = tmp_path / "bomb.csv.gz"
    bomb.write_bytes(gzip.compress(b"metric_name,timestamp,metric_value\n" + b"0" * (8 << 20)))
    d = run_dir(tmp_path, bomb, name="bombed")
    with pytest.raises(common.FormatError, match="decompresses to more than 4,194,304 bytes"):
        run_directory.convert_run_dir(d, {**PARAMS, "max_file_bytes": 4 << 20})


def test_locust_real_run_with_a_step_change_matches_each_requests_truth(tmp_path):
    """A real Locust run with a step change half-way (tests/data/recorded/locust): over every
    10-row span that does not touch the step, the importer's mean response time (its per-row
    means weighted by the requests of each row) is within 1 % of the mean of the requests Locust
    itself reported in that span; the cumulative column, read as is, is far off after the step.

    The truth's spans are the rows' times plus the snapshot's sub-second phase (Locust writes whole
    seconds), found as the phase at which the logged requests per row match the file's counts."""
    base = RECORDED / "locust"
    req = pd.read_csv(base / "requests.csv")
    end = (req["start_time"] + req["response_time_ms"] / 1000.0).to_numpy()
    rows = [r for r in jtl_rows(base / "step_stats_history.csv") if r["Name"] == "Aggregated"]
    t = np.array([float(r["Timestamp"]) for r in rows])
    n = np.array([int(r["Total Request Count"]) for r in rows])
    cumulative = np.array([float(r["Total Average Response Time"]) for r in rows])

    def logged(lo, hi, phase):
        return (end > t[lo] + phase) & (end <= t[hi] + phase)

    phase = min(np.arange(0.0, 1.0, 0.05),
                key=lambda p: sum(abs(int(logged(k - 1, k, p).sum()) - (n[k] - n[k - 1])) for k in range(1, len(t))))
    _, frames, _ = convert(tmp_path, base / "step_stats_history.csv")
    mean = series(frames, "loadgen", "locust.response_time_ms").to_numpy()
    assert len(mean) == len(t)
    step = int(np.argmax(mean > 1.5 * np.nanmedian(mean[: len(mean) // 3])))
    assert 25 <= step <= 35                                    # the server's step at 30 s shows at once
    checked = 0
    for lo in range(1, len(t) - 10, 10):
        hi = lo + 10
        if lo - 1 <= step <= hi + 1:
            continue
        k = np.arange(lo + 1, hi + 1)
        got = np.nansum(mean[k] * (n[k] - n[k - 1])) / (n[hi] - n[lo])
        truth = req["response_time_ms"].to_numpy()[logged(lo, hi, phase)].mean()
        assert got == pytest.approx(truth, rel=0.01)
        checked += 1
        if lo > step:
            assert abs(cumulative[hi] / truth - 1) > 0.2      # what reading the cumulative column gave
    assert checked >= 3


class _Replay:
    """A local HTTP server answering /api/v1/query_range with the recorded responses of a real
    Prometheus (tests/data/recorded/prometheus/query_range.json), by query; an unknown query gets
    Prometheus' own 400 answer for a bad expression."""

    def __init__(self, recorded):
        import urllib.parse

        from tests.helpers import QuietHandler, serve

        self.requests = []
        outer = self

        class Handler(QuietHandler):
            def do_GET(self):
                url = urllib.parse.urlparse(self.path)
                q = dict(urllib.parse.parse_qsl(url.query))
                outer.requests.append((url.path, q))
                doc = recorded["responses"].get(q.get("query"))
                body = json.dumps(doc or {"status": "error", "errorType": "bad_data",
                                          "error": "1:1: parse error: unexpected identifier"}).encode()
                self.send_response(200 if doc else 400)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

        self.server, self.url = serve(Handler)

    def close(self):
        self.server.shutdown()


def test_prometheus_server_as_a_source_from_recorded_real_answers(tmp_path):
    """ingest fetches the run's window from the lab's Prometheus (here its recorded answers,
    replayed): one query_range per default query, with the run's start, end and the step of
    params; each series becomes a host-level counter whose values are the recorded ones."""
    recorded = json.loads((RECORDED / "prometheus" / "query_range.json").read_text())
    replay = _Replay(recorded)
    try:
        start = pd.Timestamp(recorded["start"], unit="s", tz="UTC")
        params = {**PARAMS, "prometheus": {**PARAMS["prometheus"], "step_s": 5, "rate_window": "30s"}}
        d = run_dir(tmp_path, FORMATS / "k6" / "taurus_k6_kpi_2021-10.csv", prometheus_url=replay.url,
                    started_at=start.isoformat(), duration_s=recorded["end"] - recorded["start"])
        _, frames, notes = run_directory.convert_run_dir(d, params)
    finally:
        replay.close()
    assert {p for p, _ in replay.requests} == {"/api/v1/query_range"}
    assert len(replay.requests) == len(recorded["responses"])
    for _, q in replay.requests:
        assert (float(q["start"]), float(q["end"]), q["step"]) == (recorded["start"], recorded["end"], "5")
    assert any("7 of 9 queries with series" in n and "no series: cpu_usage_cores" in n for n in notes)
    host = frames["127.0.0.1"].set_index("timestamp")          # the instance without its port
    load = next(r for q, r in recorded["responses"].items() if q == "node_load1")["data"]["result"][0]["values"]
    assert host["127_0_0_1.node_load1"].dropna().tolist() == [float(v) for _, v in load]
    assert host["127_0_0_1.node_cpu_busy_pct"].dropna().between(0, 100).all()
    # the same counters exported into a file beside the server: from two sources, refused (one only)
    from pipelines.importers import prometheus_server
    names = {q.replace("{window}", "30s"): n for n, q in prometheus_server.DEFAULT_QUERIES.items()}
    exported = tmp_path / "node.json"
    exported.write_text(json.dumps({names[q]: r["data"]["result"] for q, r in recorded["responses"].items()}))
    replay = _Replay(recorded)
    twice = run_dir(tmp_path, FORMATS / "k6" / "taurus_k6_kpi_2021-10.csv", exported, name="twice",
                    prometheus_url=replay.url, started_at=start.isoformat(),
                    duration_s=recorded["end"] - recorded["start"])
    try:
        with pytest.raises(run_directory.IngestError, match="comes from both node.json and http://127.0.0.1"):
            run_directory.convert_run_dir(twice, params)
    finally:
        replay.close()


def test_prometheus_server_unreachable_or_refusing_says_so(tmp_path):
    import socket

    with socket.socket() as s:                      # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    params = {**PARAMS, "prometheus": {**PARAMS["prometheus"], "timeout_s": 2}}
    d = run_dir(tmp_path, FORMATS / "k6" / "taurus_k6_kpi_2021-10.csv", prometheus_url=closed)
    with pytest.raises(run_directory.IngestError, match=f"Prometheus at {closed} unreachable"):
        run_directory.convert_run_dir(d, params)
    replay = _Replay({"responses": {}})
    try:
        d2 = run_dir(tmp_path, FORMATS / "k6" / "taurus_k6_kpi_2021-10.csv", name="r2", prometheus_url=replay.url,
                     prometheus_queries={"node_x": "not a query ("})
        with pytest.raises(run_directory.IngestError, match="refused the query 'not a query \\(': HTTP 400: "
                                                            "1:1: parse error"):
            run_directory.convert_run_dir(d2, params)
    finally:
        replay.close()
