"""Prometheus range queries: a ``query_range`` response, a bare ``result`` matrix, or an object
of such matrices keyed by query.  The host is the ``instance`` label without its port;
``node_*`` metrics are host level, the others take the ``container`` or ``job`` label as their
component.

A counter exported raw (its series still named ``…_total``, ``…_count``, ``…_sum`` or
``…_bucket``: ``rate()`` and the other functions drop ``__name__``) only ever grows since its
process started; it becomes its per-second rate, as PromQL's ``rate`` would give it
(prometheus.io, "Metric types: Counter"; a drop is a restart: the increase is then the new
value), and its name says so (``_total`` → ``_per_s``).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from pipelines.config import host_component
from pipelines.importers.common import FormatError, ForeignFile, host_name, samples_frame, slug


def matrices_of(doc, path: Path, name_hint: str) -> list[tuple[str, list]]:
    """(query name, result matrix) of each matrix a document holds."""
    if isinstance(doc, dict) and "data" in doc:
        if doc.get("status") != "success":
            raise FormatError(f"{path.name}: a query_range response with status {doc.get('status')!r}: "
                              f"{doc.get('error', '')}")
        data = doc["data"]
        if data.get("resultType") != "matrix":
            raise FormatError(f"{path.name}: resultType {data.get('resultType')!r}, not a matrix (use query_range)")
        return [(name_hint, data.get("result") or [])]
    if isinstance(doc, list):
        return [(name_hint, doc)]
    if isinstance(doc, dict) and all(isinstance(v, list) for v in doc.values()):
        return [(str(k), v) for k, v in doc.items()]
    if isinstance(doc, dict) and "metrics" in doc and ("root_group" in doc or "state" in doc):
        raise ForeignFile(f"{path.name}: a k6 end-of-test summary (--summary-export or handleSummary): totals, "
                          "no time series; k6's time series come from --out csv=… or --out json=…")
    raise ForeignFile(f"{path.name}: JSON, but neither a Prometheus query_range response nor a result matrix")


CUMULATIVE = ("_total", "_count", "_sum", "_bucket")


def counter_rate(ts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The per-second rate of a cumulative counter between consecutive samples: ``Δvalue / Δt``,
    or ``value / Δt`` after a reset (the counter dropped: its process restarted); the first sample
    has none (NaN)."""
    out = np.full(len(values), np.nan)
    if len(values) < 2:
        return out
    dv, dt = np.diff(values), np.diff(ts)
    increase = np.where(dv < 0, values[1:], dv)
    with np.errstate(invalid="ignore", divide="ignore"):
        out[1:] = np.where(dt > 0, increase / np.where(dt > 0, dt, 1.0), np.nan)
    return out


def series_samples(s: dict, query: str, varying: list[str], path: Path, drop_port: bool) -> pd.DataFrame:
    """One series' samples: its host (``instance`` without its port), its component (the host for
    ``node_*`` metrics, else its ``container``, ``job`` or ``name``), its counter (``__name__`` or
    the query's name, and the labels that tell the series apart)."""
    if not isinstance(s, dict) or "values" not in s:
        raise FormatError(f"{path.name}: a series without 'values' (a vector, not a matrix?)")
    metric = s.get("metric") or {}
    instance = str(metric.get("instance", "prometheus"))
    host = host_name(instance.rsplit(":", 1)[0] if drop_port and ":" in instance else instance)
    base = metric.get("__name__") or query
    node = str(base).startswith("node_")
    component = host_component(host) if node else slug(metric.get("container") or metric.get("job") or
                                                       metric.get("name") or host, 40)
    extra = "_".join(f"{slug(k, 20)}_{slug(metric[k], 30)}" for k in varying
                     if k in metric and k not in ("container", "job", "name"))
    raw = str(metric.get("__name__") or "")
    cumulative = raw.endswith(CUMULATIVE)
    name = (raw[: -len("_total")] + "_per_s" if raw.endswith("_total") else raw + "_per_s") if cumulative else base
    counter = slug(name, 60) + (f"_{extra}" if extra else "")
    try:
        vals = np.asarray(s["values"], dtype=object)
        ts = vals[:, 0].astype(float)
        v = pd.to_numeric(pd.Series(vals[:, 1]), errors="coerce").to_numpy(float)
    except (IndexError, ValueError, TypeError) as exc:
        raise FormatError(f"{path.name}: values are not [timestamp, \"value\"] pairs ({exc})") from exc
    if cumulative:
        order = np.argsort(ts, kind="stable")
        ts, v = ts[order], counter_rate(ts[order], v[order])
    return pd.DataFrame({"host": host, "counter": f"{component}.{counter}", "ts": ts, "value": v})


def read_prometheus(path: Path, *, name_hint: str, drop_port: bool = True) -> tuple[pd.DataFrame, dict[str, float]]:
    """Prometheus range data: a full ``/api/v1/query_range`` response, a bare ``result`` matrix
    (a list of ``{"metric", "values"}``), or an object of such matrices keyed by query
    (:func:`series_samples` names each series)."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{path.name}: not JSON ({exc.msg} at line {exc.lineno}); a truncated file?") from exc
    return prometheus_samples(doc, path, name_hint=name_hint, drop_port=drop_port), {}


def prometheus_samples(doc, path: Path, *, name_hint: str, drop_port: bool = True) -> pd.DataFrame:
    """The samples of a parsed Prometheus document (:func:`read_prometheus`; ``path`` names it in
    messages)."""
    out = []
    for query, series_list in matrices_of(doc, path, name_hint):
        labels = [s.get("metric") or {} for s in series_list if isinstance(s, dict)]
        varying = sorted({k for lab in labels for k in lab
                          if k not in ("__name__", "instance") and len({str(x.get(k)) for x in labels}) > 1})
        out += [series_samples(s, query, varying, path, drop_port) for s in series_list]
    if not out:
        raise FormatError(f"{path.name}: an empty result")
    samples = samples_frame(out)
    # a job's series on several instances (``up`` of every target): the component names the host too,
    # since counter names are unique across a run's hosts (contract §1)
    owners = samples.groupby("counter")["host"].nunique()
    own = np.array([c.startswith(host_component(h) + ".") for h, c in zip(samples["host"], samples["counter"])],
                   dtype=bool)
    shared = samples["counter"].isin(owners[owners > 1].index).to_numpy() & ~own
    samples.loc[shared, "counter"] = samples.loc[shared, "host"].map(host_component) + "_" + \
        samples.loc[shared, "counter"]
    # one series per (host, counter): labels no series differs by are dropped, so two left are the same
    return samples.groupby(["host", "counter", "ts"], as_index=False)["value"].sum(min_count=1)
