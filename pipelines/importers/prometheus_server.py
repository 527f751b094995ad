"""A run's counters fetched from the Prometheus server a lab already runs (HTTP API
``/api/v1/query_range``, prometheus.io "HTTP API: Range queries", Prometheus 2.x and 3.x).

Given the server's URL, the run's window (``run.yaml``'s ``started_at`` and ``duration_s``, else
the load generator's span) and the queries (:data:`DEFAULT_QUERIES` for node_exporter and
cAdvisor, or a lab's own: ``{name: PromQL}``), each query's range is fetched at ``step_s``, with a
timeout, and read as the file form is (:mod:`pipelines.importers.prometheus`: an object of result
matrices keyed by query name; a ``node_*`` name is a host-level counter).  Rates are taken in
PromQL (``rate(…_total[window])``); a counter a lab's query leaves raw (``…_total``) becomes its
rate on reading.  An unreachable server, a timeout or a refused query is a ``FormatError`` naming
the server and the query.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from pipelines.importers.common import FormatError, Parsed
from pipelines.importers.prometheus import prometheus_samples
from pipelines.safe_text import mask_url

# node_exporter (host level: the names start with node_) and cAdvisor (per container)
DEFAULT_QUERIES = {
    "node_cpu_busy_pct": '100 * (1 - avg by (instance) (rate(node_cpu_seconds_total{mode="idle"}[{window}])))',
    "node_load1": "node_load1",
    "node_memory_available_bytes": "node_memory_MemAvailable_bytes",
    "node_network_receive_bytes_per_s":
        'sum by (instance) (rate(node_network_receive_bytes_total{device!="lo"}[{window}]))',
    "node_network_transmit_bytes_per_s":
        'sum by (instance) (rate(node_network_transmit_bytes_total{device!="lo"}[{window}]))',
    "node_disk_read_bytes_per_s": "sum by (instance) (rate(node_disk_read_bytes_total[{window}]))",
    "node_disk_written_bytes_per_s": "sum by (instance) (rate(node_disk_written_bytes_total[{window}]))",
    "cpu_usage_cores":
        'sum by (instance, container) (rate(container_cpu_usage_seconds_total{container!=""}[{window}]))',
    "memory_working_set_bytes": 'sum by (instance, container) (container_memory_working_set_bytes{container!=""})',
}


def query_range(url: str, query: str, *, start: float, end: float, step_s: float, timeout_s: float,
                max_bytes: int) -> list:
    """One range query's result matrix."""
    params = urllib.parse.urlencode({"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                     "step": f"{step_s:g}"})
    target = f"{url.rstrip('/')}/api/v1/query_range?{params}"
    try:
        with urllib.request.urlopen(target, timeout=timeout_s) as response:     # noqa: S310 -- the lab's own server
            body = response.read(max_bytes + 1)
    except urllib.error.HTTPError as exc:
        detail = exc.read(2000).decode("utf-8", "replace")
        try:
            detail = json.loads(detail).get("error", detail)
        except ValueError:
            pass
        raise FormatError(f"Prometheus at {mask_url(url)} refused the query {query!r}: HTTP {exc.code}: {detail}") from exc
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise FormatError(f"Prometheus at {mask_url(url)} unreachable ({reason}; timeout {timeout_s:g} s): check "
                          "ingest.prometheus.url or the run's prometheus_url") from exc
    if len(body) > max_bytes:
        raise FormatError(f"Prometheus at {mask_url(url)}: the answer to {query!r} is more than {max_bytes:,} bytes "
                          "(a longer step, or a narrower query)")
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise FormatError(f"Prometheus at {mask_url(url)}: the answer to {query!r} is not JSON (a proxy's page?)") from exc
    if not isinstance(doc, dict) or doc.get("status") != "success" or \
            (doc.get("data") or {}).get("resultType") != "matrix":
        raise FormatError(f"Prometheus at {mask_url(url)}: no matrix for {query!r}: {str(doc)[:200]}")
    return doc["data"].get("result") or []


def fetch(url: str, queries: dict[str, str] | None, *, start: float, end: float, step_s: float, timeout_s: float,
          rate_window: str, max_bytes: int) -> Parsed:
    """The run's window of every query, as the samples of one collector file."""
    chosen = queries or DEFAULT_QUERIES
    if end <= start:
        raise FormatError(f"Prometheus at {mask_url(url)}: an empty window ({start} to {end})")
    matrices = {name: query_range(url, query.replace("{window}", rate_window), start=start, end=end, step_s=step_s,
                                  timeout_s=timeout_s, max_bytes=max_bytes) for name, query in chosen.items()}
    empty = [name for name, result in matrices.items() if not result]
    matrices = {name: result for name, result in matrices.items() if result}
    if not matrices:
        raise FormatError(f"Prometheus at {mask_url(url)}: no series for any query in the run's window "
                          f"({', '.join(chosen)}): is it scraping the lab's hosts?")
    samples = prometheus_samples(matrices, Path(f"{mask_url(url)} query_range"), name_hint="prometheus")
    notes = [f"{len(matrices)} of {len(chosen)} queries with series"] + \
        ([f"no series: {', '.join(empty)}"] if empty else [])
    return Parsed("prometheus_server", samples, notes=notes)
