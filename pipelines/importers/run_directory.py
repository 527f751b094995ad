"""ingest: one test run's collector outputs -> a contract archive.

Usage::

    python -m pipelines.cli.ingest RUN_DIR [--out DIR]

``RUN_DIR`` holds the files a lab's tools wrote (JMeter, Gatling, k6, Locust, sysstat
``sadf``/``pidstat``, Prometheus ``query_range``, Windows PerfMon CSV; recognised by content,
``pipelines/importers/collectors.py``) and a small ``run.yaml`` with what no collector can know::

    system: shop                      # required
    version: "2.4.1"                  # required
    environment: {cpu_model: Xeon E5-2670, cpu_cores: 8, db_version: "5.5"}
    workload: {profile: checkout-steady, load_counter: jmeter.active_users}
    verdict: null                     # pass | fail | null (a target)
    cause: null
    # optional: run_id (default: the directory's name), started_at / duration_s (default:
    # the load generator's span), timezone (for collectors writing local times: pidstat,
    # PerfMon, sadf -j -t, a JTL with a date timeStamp), timestamp_format (that JTL's
    # jmeter.save.saveservice.timestamp_format, when not year-first), hosts ({collector's
    # host name: host}), clock_offset_s ({host: seconds added}), load_generator_host, baseline, regressed_counters

The archive (contract §1) is written as ``<out>/<run_id>.tar.gz``; ``validate``
then judges it like any other. ``pull`` takes such directories as they are (a source
directory holding run directories, or ``{path: RUN_DIR, ingest: true}``): the lab's files are
copied into ``data/raw`` untouched and converted when read, so raw data stays what the tools
wrote. Counter names can be rewritten by the ``ingest.rename`` table of ``params.yaml``.
"""
from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from pipelines import config
from pipelines.importers import collectors, common
from pipelines.storage import archive
from pipelines.storage.archive import excerpt
from pipelines.storage.run_records import RunMeta, Workload

log = logging.getLogger("regresslab.ingest")

RUN_YAML = "run.yaml"
LAB_YAML = "lab.yaml"             # what is constant for a lab, beside its run directories
REQUIRED = ("system", "version")
SKIP = re.compile(r"^(run\.yaml|lab\.yaml|readme.*|license.*|notice.*|\..*)$", re.IGNORECASE)


class IngestError(ValueError):
    """A run directory that cannot become an archive: the message says which file and why."""


# --------------------------------------------------------------------------- pure core


MAX_RUN_YAML_BYTES = 1 << 20       # a run.yaml is a few lines: a megabyte is a thousand times more


def read_run_yaml(text: str, name: str = "run.yaml", *, required: tuple[str, ...] = REQUIRED) -> dict[str, Any]:
    """``run.yaml`` (or a ``lab.yaml``, ``name``) as a dict (safe YAML: no tags, no objects, no
    aliases), with the ``required`` fields.

    An alias repeats what its anchor holds: nested ones make a 587-byte file stand for 140 GB once
    written out as ``run.json`` ("billion laughs"), and a run's own metadata never needs them, so a
    file with any alias is refused before it is built, as is one above ``MAX_RUN_YAML_BYTES``."""
    import yaml

    if len(text) > MAX_RUN_YAML_BYTES:
        raise IngestError(f"{name} is {len(text):,} characters (more than {MAX_RUN_YAML_BYTES:,})")
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise IngestError(f"{name} uses a YAML alias (*{event.anchor}): not allowed in a run's "
                                  "metadata (an alias can stand for unbounded data)")
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise IngestError(f"{name} is not valid YAML: {excerpt(str(exc), 300)}") from exc
    if doc is None and not required:
        doc = {}
    if not isinstance(doc, dict):
        raise IngestError(f"{name} must be a mapping of run.json fields")
    missing = [k for k in required if doc.get(k) in (None, "")]
    if missing:
        raise IngestError(f"{name} lacks {missing}")
    for key in ("hosts", "clock_offset_s", "environment"):
        if key in doc and not isinstance(doc[key], dict):
            raise IngestError(f"{name}: {key} must be a mapping")
    return doc


def _yaml_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return fh.read(MAX_RUN_YAML_BYTES + 1).decode("utf-8", errors="replace")     # never more than the cap


def run_fields(run_dir: Path, fields: dict[str, Any] | None = None, lab_file: Path | None = None) -> dict[str, Any]:
    """What is known of a run beyond its collector files, most general first: the lab's
    ``lab.yaml`` (``lab_file``, else one beside the run directory or in it: what is constant for a
    lab — system, environment, workload, timezone, hosts), the run's own ``run.yaml``, then
    ``fields`` (``ingest``'s flags).  Each later one wins; ``environment``, ``hosts`` and
    ``clock_offset_s`` are merged key by key.  ``system`` and ``version`` must come from one of them."""
    layers = []
    lab = lab_file or next((c for c in (run_dir / LAB_YAML, run_dir.parent / LAB_YAML) if c.is_file()), None)
    if lab is not None:
        if not Path(lab).is_file():
            raise IngestError(f"lab file {lab} not found")
        layers.append(read_run_yaml(_yaml_file(Path(lab)), Path(lab).name, required=()))
    if (run_dir / RUN_YAML).is_file():
        layers.append(read_run_yaml(_yaml_file(run_dir / RUN_YAML), RUN_YAML, required=()))
    if fields:
        layers.append({k: v for k, v in fields.items() if v not in (None, {}, "")})
    if not layers:
        raise IngestError(f"{run_dir.name}: no {RUN_YAML}, no {LAB_YAML} and no --system/--version "
                          "(system, version, environment, workload, verdict)")
    doc: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if key in ("environment", "hosts", "clock_offset_s") and isinstance(doc.get(key), dict):
                doc[key] = {**doc[key], **value}
            else:
                doc[key] = value
    missing = [k for k in REQUIRED if doc.get(k) in (None, "")]
    if missing:
        raise IngestError(f"{run_dir.name}: {missing} given by none of {LAB_YAML}, {RUN_YAML} or the flags")
    return doc


def rename_hosts(samples: pd.DataFrame, hosts: dict[str, str]) -> pd.DataFrame:
    """Apply ``hosts`` ({collector's host name: host}); a host-level counter (its component is
    the host) follows its host."""
    if not hosts:
        return samples
    hosts = {collectors.host_name(k): collectors.host_name(v) for k, v in hosts.items()}
    comp = samples["counter"].str.split(".", n=1).str[0]
    rest = samples["counter"].str.split(".", n=1).str[1]
    own = comp == samples["host"].map(config.host_component)
    moved = own & samples["host"].isin(list(hosts))
    new_comp = comp.where(~moved, samples["host"].map(hosts).map(config.host_component))
    return samples.assign(host=samples["host"].replace(hosts), counter=new_comp + "." + rest)


def apply_rename(samples: pd.DataFrame, rules: list[dict[str, str]]) -> pd.DataFrame:
    """The ``ingest.rename`` table: regex ``pattern`` -> ``replace`` on full counter names, in order."""
    counter = samples["counter"]
    for rule in rules or []:
        counter = counter.str.replace(rule["pattern"], rule["replace"], regex=True)
    return samples.assign(counter=counter)


def host_frames(samples: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Samples -> one wide frame per host (``timestamp`` then a column per counter), timestamps
    strictly increasing; a counter's repeated timestamp keeps its mean."""
    out = {}
    for host, part in samples.groupby("host", sort=True):
        wide = part.pivot_table(index="ts", columns="counter", values="value", aggfunc="mean", dropna=False)
        wide = wide.sort_index()
        wide = wide.reindex(columns=sorted(wide.columns))
        wide.index = pd.Index(np.round(wide.index.to_numpy(float), 3), name="ts")
        wide = wide[~wide.index.duplicated()]
        frame = wide.reset_index().rename(columns={"ts": "timestamp"})
        frame.columns.name = None
        out[str(host)] = frame
    return out


def run_meta(doc: dict[str, Any], *, run_id: str, samples: pd.DataFrame, load_span: tuple[float, float] | None,
             cores: dict[str, float]) -> RunMeta:
    """``run.json`` from ``run.yaml`` and what the files say (start and length of the load,
    each host's CPUs when a collector stated them and the environment did not)."""
    if "run_id" in doc and str(doc["run_id"]) != run_id:
        raise IngestError(f"{RUN_YAML}: run_id {doc['run_id']!r} differs from the directory name {run_id!r}")
    span = load_span or (float(samples["ts"].min()), float(samples["ts"].max()))
    started = doc.get("started_at")
    if started is None:
        started = pd.Timestamp(span[0], unit="s", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ")
    elif not isinstance(started, str):
        started = pd.Timestamp(started).tz_localize("UTC").strftime("%Y-%m-%dT%H:%M:%SZ") \
            if pd.Timestamp(started).tzinfo is None else pd.Timestamp(started).tz_convert("UTC").strftime(
                "%Y-%m-%dT%H:%M:%SZ")
    duration = doc.get("duration_s")
    if duration is None:
        duration = max(1.0, round(span[1] - span[0], 3))
    environment = dict(doc.get("environment") or {})
    for host, n in sorted(cores.items()):
        if not any(k.startswith((f"{host}.", f"{host}_")) for k in environment):
            environment[f"{host}.cpu_cores"] = int(n) if float(n).is_integer() else n
    workload = cast(Workload, doc.get("workload") or {"profile": "unknown", "load_counter": None})
    meta: RunMeta = {"schema_version": 1, "run_id": run_id, "system": str(doc["system"]),
                     "version": str(doc["version"]), "started_at": started, "duration_s": duration,
                     "workload": workload, "environment": environment, "verdict": doc.get("verdict"),
                     "cause": doc.get("cause")}
    for key in ("baseline", "regressed_counters"):
        if key in doc:
            meta[key] = doc[key]
    return meta


# --------------------------------------------------------------------------- I/O shell


def collector_files(run_dir: Path) -> list[Path]:
    """The regular files of a run directory, its sub-directories included, ``run.yaml`` and
    READMEs/licences left out."""
    return sorted(p for p in run_dir.rglob("*") if p.is_file() and not p.is_symlink()
                  and not SKIP.match(p.name))


def read_collector(path: Path, fmt: str, doc: dict[str, Any], params: dict[str, Any],
                   timezone: str | None) -> common.Parsed:
    """One collector file of a known format, its size and lines checked first."""
    common.check_file_size(path, fmt, max_file_bytes=int(params["max_file_bytes"]),
                           max_line_bytes=int(params["max_line_bytes"]),
                           max_whole_bytes=int(params["max_whole_file_bytes"]))
    return collectors.read_file(
        path, fmt, host=doc.get("load_generator_host"), timezone=timezone, timestamp_format=doc.get("timestamp_format"),
        aggregation=common.Aggregation(float(params["interval_s"]), list(params["percentiles"]),
                                       list(params["label_percentiles"]), int(params["max_labels"])))


def fetch_prometheus(server: str, doc: dict[str, Any], params: dict[str, Any],
                     load_span: tuple[float, float] | None) -> common.Parsed:
    """The run's window fetched from a Prometheus server (``prometheus_server``): the window is
    ``started_at`` + ``duration_s`` when the run says so, else the load generator's span."""
    from pipelines.importers import prometheus_server

    prom = params["prometheus"]
    if doc.get("started_at") and doc.get("duration_s"):
        start = pd.Timestamp(str(doc["started_at"])).timestamp()
        span = (start, start + float(doc["duration_s"]))
    elif load_span:
        span = load_span
    else:
        raise IngestError(f"Prometheus at {server}: no window to fetch (give started_at and duration_s, "
                          "or a load generator's file)")
    try:
        return prometheus_server.fetch(server, doc.get("prometheus_queries") or prom["queries"] or None,
                                       start=span[0], end=span[1], step_s=float(prom["step_s"]),
                                       timeout_s=float(prom["timeout_s"]), rate_window=str(prom["rate_window"]),
                                       max_bytes=int(params["max_whole_file_bytes"]))
    except common.FormatError as exc:
        raise IngestError(str(exc)) from exc


def convert_run_dir(run_dir: Path, params: dict[str, Any], fields: dict[str, Any] | None = None,
                    lab_file: Path | None = None) -> tuple[RunMeta, dict[str, pd.DataFrame], list[str]]:
    """A run directory -> (run.json, host frames, what each file gave); ``fields`` and
    ``lab_file`` add to its ``run.yaml`` (:func:`run_fields`)."""
    run_dir = Path(run_dir)
    doc = run_fields(run_dir, fields, lab_file)
    timezone = doc.get("timezone") or params.get("timezone")
    parts, cores, notes, load_span = [], {}, [], None
    seen: dict[tuple[str, str], str] = {}

    def take(rel: str, fmt: str, parsed: common.Parsed) -> None:
        """One source's samples into the run: each counter of a host from one source only."""
        nonlocal load_span
        samples = parsed.samples
        if samples.empty:
            notes.append(f"{rel} ({fmt}): no sample; ignored")
            return
        for key in samples[["host", "counter"]].drop_duplicates().itertuples(index=False):
            if (key.host, key.counter) in seen:
                raise IngestError(f"counter {key.counter} of host {key.host} comes from both {seen[key.host, key.counter]}"
                                  f" and {rel}; keep one, or rename one with ingest.rename")
            seen[key.host, key.counter] = rel
        if parsed.load_generator:
            lo, hi = float(samples["ts"].min()), float(samples["ts"].max())
            first = lo - float(params["interval_s"]) if fmt != "locust" else lo
            load_span = (min(first, load_span[0]), max(hi, load_span[1])) if load_span else (first, hi)
        cores.update(parsed.cores)
        parts.append(samples)
        notes.append(f"{rel} ({fmt}): {samples['counter'].nunique()} counters, "
                     f"{samples.groupby('counter').size().max()} samples{'; ' + '; '.join(parsed.notes) if parsed.notes else ''}")

    for path in collector_files(run_dir):
        rel = path.relative_to(run_dir).as_posix()
        with collectors.plain_file(path, max_bytes=int(params["max_file_bytes"])) as (plain, gz_error):
            if plain is None:                       # a gzip file that does not decompress
                notes.append(f"{rel}: {gz_error}; ignored")
                continue
            fmt = collectors.sniff(plain)
            if fmt is None:
                notes.append(f"{rel}: {collectors.unread_reason(plain)}; ignored")
                continue
            try:
                parsed = read_collector(plain, fmt, doc, params, timezone)
            except common.ForeignFile as exc:               # looked like a collector's, is not: the others still count
                notes.append(f"{rel}: {exc}; ignored")
                continue
            except common.FormatError as exc:
                raise IngestError(f"{rel} ({fmt}): {exc}") from exc
        take(rel, fmt, parsed)
    server = doc.get("prometheus_url") or params["prometheus"]["url"]
    if server:                                  # after the files: the load generator's span is its window
        take(server, "prometheus_server", fetch_prometheus(server, doc, params, load_span))
    if not parts:
        raise IngestError(f"{run_dir.name}: no collector file recognised ({len(notes)} file(s) looked at)")
    samples = pd.concat(parts, ignore_index=True)
    samples = rename_hosts(samples, {str(k): str(v) for k, v in (doc.get("hosts") or {}).items()})
    cores = {collectors.host_name((doc.get("hosts") or {}).get(h, h)): n for h, n in cores.items()}
    for host, offset in (doc.get("clock_offset_s") or {}).items():
        samples.loc[samples["host"] == collectors.host_name(host), "ts"] += float(offset)
    samples = apply_rename(samples, params.get("rename") or [])
    owners = samples.groupby("counter")["host"].nunique()
    shared = owners[owners > 1]
    if len(shared):
        raise IngestError(f"counter(s) {list(shared.index[:5])} recorded on several hosts; counter names are unique "
                          "across a run's hosts (contract §1): map hosts or rename counters")
    meta = run_meta(doc, run_id=run_dir.name, samples=samples, load_span=load_span, cores=cores)
    return meta, host_frames(samples), notes


def archive_members(meta: RunMeta, frames: dict[str, pd.DataFrame]) -> dict[str, bytes]:
    """The contract archive's members: ``run.json`` and ``counters/<host>.csv``."""
    members = {"run.json": (json.dumps(meta, indent=2) + "\n").encode()}
    for host, frame in frames.items():
        # epoch seconds to the millisecond; counters to 10 significant digits (bytes stay exact)
        out = frame.assign(timestamp=frame["timestamp"].map(lambda t: f"{t:.3f}"))
        members[f"counters/{host}.csv"] = out.to_csv(index=False, float_format="%.10g").encode()
    return members


def read_run(path: Path, limits: archive.ArchiveLimits, params: dict[str, Any]) -> archive.RawRun:
    """Any archive as ``archive.read_archive`` reads it; a run directory converted first (what
    ``validate`` calls, so ``pull`` can take a lab's folders as they are)."""
    path = Path(path)
    if not archive.is_run_directory(path):
        return archive.read_archive(path, limits)
    if not archive.RUN_ID_RE.match(path.name):
        raise archive.ArchiveError(f"run directory name {path.name!r} is not a valid run_id")
    try:
        meta, frames, _ = convert_run_dir(path, params)
    except IngestError as exc:
        raise archive.ArchiveError(f"run directory not converted: {exc}") from exc
    members = archive_members(meta, frames)
    return archive.RawRun(run_id=path.name, meta=dict(meta),
                          csv_bytes={name[len("counters/"):-len(".csv")]: data for name, data in members.items()
                                     if name.startswith("counters/")})
