"""Property-based fuzzing of every collector reader.  A real file of each format (or one built
from the tool's documented layout where no licensed sample exists), truncated, with lines
reordered, fields mistyped or bytes flipped: the reader either reads it or raises the one
``FormatError`` (which names the file and the place); nothing else escapes to abort an ingest,
and recognising a file by content never raises.  Derandomised, so CI sees the same cases."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.importers import collectors, common
from tests.helpers import GatlingBinaryLog

SETTINGS = settings(derandomize=True, max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
DATA = Path(__file__).resolve().parents[1] / "data"
FORMATS, RECORDED = DATA / "formats", DATA / "recorded"
MISTYPED = ["", "abc", "-1", "1e400", "NaN", "\x00", "99999999999999999999999", "true", "2026-13-45 25:61:61"]


def _head(path: Path, lines: int) -> bytes:
    return b"".join(path.read_bytes().splitlines(keepends=True)[:lines])


def _k6_json() -> bytes:
    points = [{"type": "Metric", "metric": "http_req_duration", "data": {"name": "http_req_duration"}}]
    for i in range(6):
        points.append({"type": "Point", "metric": "http_req_duration",
                       "data": {"time": f"2026-11-22T10:00:0{i}Z", "value": 100.0 + i,
                                "tags": {"name": "home", "status": "200", "expected_response": "true"}}})
        points.append({"type": "Point", "metric": "vus", "data": {"time": f"2026-11-22T10:00:0{i}Z", "value": 3}})
    return "".join(json.dumps(p) + "\n" for p in points).encode()


def _gatling_binary() -> bytes:
    t0 = 1_700_000_000_000
    log = GatlingBinaryLog(t0)
    log.user(t0 + 10, True)
    for i in range(5):
        log.request("home" if i % 2 else "login", t0 + 1000 * i, t0 + 1000 * i + 120, i != 3, "" if i != 3 else "500")
    log.user(t0 + 6000, False)
    return bytes(log.out)


PERFMON = (b'"(PDH-CSV 4.0)","\\\\APP01\\Processor(_Total)\\% Processor Time","\\\\APP01\\Memory\\Available MBytes"\n'
           b'"11/22/2026 10:00:00.000","35.5","2048"\n"11/22/2026 10:00:15.000","41.0","2040"\n'
           b'"11/22/2026 10:00:30.000","38.0","2030"\n')

SEEDS = {
    "jmeter_csv": lambda: _head(FORMATS / "jmeter" / "taurus_slow-stdev.jtl", 30),
    "jmeter_xml": lambda: _head(FORMATS / "jmeter" / "taurus_resource_tc.xml.jtl", 4) + b"</testResults>\n",
    "gatling": lambda: _head(FORMATS / "gatling" / "taurus_gatling-331-000_simulation.log", 30),
    "gatling_binary": _gatling_binary,
    "k6_csv": lambda: _head(FORMATS / "k6" / "taurus_k6_kpi_2021-10.csv", 30),
    "k6_json": _k6_json,
    "locust": lambda: _head(FORMATS / "locust" / "bitcoin-api_results_stats_history.csv", 30),
    "sadf": lambda: _head(FORMATS / "sysstat" / "generated_sadf-dh_u-r-q-b-w.csv", 12),
    "sadf_json": lambda: (RECORDED / "sysstat" / "sadf-j_u-PALL-r-q-b-w-nDEV-d.json").read_bytes(),
    "pidstat": lambda: _head(FORMATS / "sysstat" / "generated_pidstat_h-u-r-d-w.txt", 20),
    "prometheus": lambda: (FORMATS / "prometheus" / "generated_query_range_cpu_by_mode_5s.json").read_bytes(),
    "perfmon": lambda: PERFMON,
}


@st.composite
def mutated(draw, seed: bytes) -> bytes:
    """One of: a cut, two lines swapped, one field of a line mistyped, a few bytes flipped."""
    kind = draw(st.sampled_from(["cut", "swap", "mistype", "flip"]))
    if kind == "cut":
        return seed[:draw(st.integers(0, len(seed)))]
    lines = seed.splitlines(keepends=True)
    if kind == "swap" and len(lines) > 1:
        i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
        return b"".join(lines)
    if kind == "mistype" and lines:
        i = draw(st.integers(0, len(lines) - 1))
        text = lines[i].decode("utf-8", "replace")
        sep = next((d for d in (";", "\t", ",", " ") if d in text), None)
        if sep is not None:
            cells = text.split(sep)
            cells[draw(st.integers(0, len(cells) - 1))] = draw(st.sampled_from(MISTYPED))
            lines[i] = sep.join(cells).encode()
        return b"".join(lines)
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        if data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data)


@pytest.mark.parametrize("fmt", sorted(SEEDS))
def test_the_seed_reads(tmp_path, fmt):
    """Each seed is a good file of its format: recognised as such and read (so the mutations below
    start from something the reader accepts)."""
    path = tmp_path / ("simulation.log" if fmt.startswith("gatling") else f"file.{fmt}")
    path.write_bytes(SEEDS[fmt]())
    assert collectors.sniff(path) == fmt
    parsed = _read(path, fmt)
    assert len(parsed.samples) > 0


def _read(path: Path, fmt: str):
    return collectors.read_file(path, fmt, host=None, timezone="UTC",
                                aggregation=common.Aggregation(10.0, [50, 95], [95], 5))


@pytest.mark.parametrize("fmt", sorted(SEEDS))
def test_a_damaged_file_is_read_or_refused_with_a_format_error(tmp_path_factory, fmt):
    seed = SEEDS[fmt]()

    @SETTINGS
    @given(mutated(seed))
    def check(data):
        path = tmp_path_factory.mktemp(fmt) / ("simulation.log" if fmt.startswith("gatling") else f"file.{fmt}")
        path.write_bytes(data)
        collectors.sniff(path)                  # never raises, whatever the bytes
        try:
            _read(path, fmt)
        except common.FormatError as exc:
            assert str(exc).strip()

    check()
