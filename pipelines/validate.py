"""validate: check every pulled archive against the data contract with Great Expectations.

Three suites run per archive (``DATA_CONTRACT.md`` §1):

* ``run_meta``: ``run.json`` flattened to one row — required fields, types, the
  run_id rule, a parseable ``started_at``, a plausible ``duration_s``;
* ``host_coverage``: one row per host — minimum samples in the load phase and the
  share of the planned duration its samples cover;
* ``counter_values``: every cell of every counter CSV in long form — parseable,
  strictly increasing timestamps per host, numeric values, percentages within
  their range, non-negative rates, sizes and counts.

Python only derives the columns that the expectations check (a parsed timestamp,
the step between samples, whether a cell parsed as a number); every verdict is
Great Expectations'.  A valid run goes to ``data/interim/valid/<run_id>/`` as one
Parquet file per host; an invalid one is quarantined under
``data/quarantine/<run_id>.json`` with the failed expectations; its archive stays in
``data/raw`` untouched.  GX Data Docs are written to ``reports/validation/``.
Results are cached per (run_id, archive sha256, suite version), so a night with one
new archive validates one archive.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipelines import archive, config
from pipelines.progress import Progress

log = logging.getLogger("regresslab.validate")

SUITE_VERSION = 3   # bump when an expectation changes: every archive is validated again
REQUIRED_FIELDS = ("schema_version", "run_id", "system", "version", "started_at", "duration_s",
                   "workload", "environment", "verdict", "cause")


# --------------------------------------------------------------------------- pure core


def parse_timestamps(raw: pd.Series) -> pd.Series:
    """Epoch seconds (float) from ISO-8601-with-offset strings or epoch numbers; NaN when unparseable."""
    if pd.api.types.is_numeric_dtype(raw):
        return raw.astype(float)
    as_num = pd.to_numeric(raw, errors="coerce")
    if as_num.notna().all():
        return as_num.astype(float)
    parsed = pd.to_datetime(raw, errors="coerce", utc=True, format="ISO8601")
    out = (parsed - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    # an ISO string without an offset is ambiguous: the contract asks for one
    has_offset = raw.astype(str).str.contains(r"(?:Z|[+-]\d\d:?\d\d)$", regex=True)
    return out.where(has_offset)


def parse_started_at(value: Any) -> float | None:
    """Epoch seconds of ``started_at``: an ISO-8601 string with its offset (DATA_CONTRACT §1), never
    a number or a string of digits (``"1790000000"`` is not a date; sorting runs by it broke
    every later stage)."""
    if not isinstance(value, str) or not re.match(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}", value):
        return None
    ts = parse_timestamps(pd.Series([value]))
    return None if pd.isna(ts.iloc[0]) else float(ts.iloc[0])


def meta_frame(meta: dict[str, Any], *, archive_run_id: str, counters: set[str]) -> pd.DataFrame:
    """``run.json`` as one row, with derived columns for the checks that need Python to see types."""
    row: dict[str, Any] = {f: meta.get(f) for f in REQUIRED_FIELDS if f in meta}
    for key in ("workload", "environment", "baseline", "regressed_counters"):
        row.pop(key, None)
    for key in ("run_id", "system", "version", "started_at", "verdict", "cause"):
        if key in row and row[key] is not None and not isinstance(row[key], str):
            row[key] = repr(row[key])           # a non-string becomes a value no regex accepts
    workload = meta.get("workload")
    env = meta.get("environment")
    load_counter = workload.get("load_counter") if isinstance(workload, dict) else None
    row.update({
        "run_id_matches_archive": meta.get("run_id") == archive_run_id,
        # identifiers become file names: the contract's grammar, checked in Python (a regex
        # expectation's "$" would let a trailing newline through)
        "run_id_is_identifier": config.is_identifier(meta.get("run_id")),
        "system_is_identifier": config.is_identifier(meta.get("system")),
        "started_at_epoch": parse_started_at(meta.get("started_at")),
        "duration_is_number": isinstance(meta.get("duration_s"), (int, float))
        and not isinstance(meta.get("duration_s"), bool),
        "workload_is_object": isinstance(workload, dict) and isinstance(workload.get("profile"), str),
        "load_counter_recorded": load_counter is None or load_counter in counters,
        "environment_is_flat_object": isinstance(env, dict)
        and all(isinstance(v, (str, int, float, bool)) or v is None for v in env.values()),
        "baseline_is_list_of_ids": "baseline" not in meta or (
            isinstance(meta["baseline"], list) and all(isinstance(b, str) for b in meta["baseline"])),
        "regressed_is_list_of_counters": "regressed_counters" not in meta or (
            isinstance(meta["regressed_counters"], list)
            and all(isinstance(c, str) for c in meta["regressed_counters"])),
    })
    if not row["duration_is_number"]:
        row["duration_s"] = None
    return pd.DataFrame([row])


def counters_long(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Every cell of every host CSV as one row: host, counter, parsed timestamp, value checks."""
    parts = []
    for host, frame in frames.items():
        if "timestamp" not in frame.columns:
            ts = pd.Series(np.nan, index=frame.index)
            ts_ok = pd.Series(False, index=frame.index)
        else:
            ts = parse_timestamps(frame["timestamp"])
            ts_ok = ts.notna()
        step = ts.diff()
        counter_cols = [c for c in frame.columns if c != "timestamp"]
        if not counter_cols:
            parts.append(pd.DataFrame({"host": [host], "counter": [None], "ts": [np.nan],
                                       "ts_step": [np.nan], "value": [np.nan], "value_is_number": [False],
                                       "counter_name_ok": [False]}))
            continue
        for col in counter_cols:
            raw = frame[col]
            value = pd.to_numeric(raw, errors="coerce")
            present = raw.notna() & (raw.astype(str).str.strip() != "")
            parts.append(pd.DataFrame({
                "host": host, "counter": str(col), "ts": ts.where(ts_ok), "ts_step": step,
                "value": value.astype(float),
                "value_is_number": ~present | value.notna(),
                "value_is_finite": ~np.isinf(value.astype(float)),
            }))
    long = pd.concat(parts, ignore_index=True)
    long["counter_name_ok"] = long["counter"].astype(str).str.fullmatch(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_.%/-]+")
    return long


def range_columns(long: pd.DataFrame, *, pct_suffixes: list[str], nonneg_suffixes: list[str]) -> pd.DataFrame:
    """Add ``pct_value`` / ``nonneg_value``: the value where the counter's unit implies a range."""
    name = long["counter"].astype(str)
    is_pct = name.str.endswith(tuple(pct_suffixes))
    is_nonneg = name.str.endswith(tuple(nonneg_suffixes))
    return long.assign(pct_value=long["value"].where(is_pct), nonneg_value=long["value"].where(is_nonneg))


def host_coverage(frames: dict[str, pd.DataFrame], *, started_at: float | None, duration_s: float | None) -> pd.DataFrame:
    """Per host: samples inside the planned load phase and the share of it their span covers."""
    rows = []
    for host, frame in frames.items():
        ts = parse_timestamps(frame["timestamp"]) if "timestamp" in frame.columns else pd.Series(dtype=float)
        if started_at is None or not duration_s or duration_s <= 0:
            rows.append({"host": host, "load_samples": 0, "coverage": 0.0})
            continue
        end = started_at + duration_s
        inside = ts[(ts >= started_at) & (ts <= end)].dropna()
        if inside.empty:
            rows.append({"host": host, "load_samples": 0, "coverage": 0.0})
            continue
        period = float(np.nanmedian(np.diff(np.sort(inside.values)))) if len(inside) > 1 else 0.0
        # the samples cover from one period before the first to the last (collectors average backwards)
        span = min(inside.max(), end) - max(inside.min() - period, started_at)
        rows.append({"host": host, "load_samples": int(len(inside)), "coverage": float(span / duration_s)})
    return pd.DataFrame(rows)


def build_suites(*, min_samples_per_host: int, min_coverage: float, max_duration_s: float,
                 pct_range: tuple[float, float], value_mostly: float) -> dict[str, list]:
    """The three expectation suites; each expectation says what it guards."""
    import great_expectations.expectations as gxe

    meta = [gxe.ExpectColumnToExist(column=f) for f in  # schema: every field the contract requires
            ("schema_version", "run_id", "system", "version", "started_at", "duration_s", "verdict", "cause")]
    meta += [
        gxe.ExpectColumnValuesToBeInSet(column="schema_version", value_set=[1]),        # schema version we read
        gxe.ExpectColumnValuesToBeInSet(column="run_id_is_identifier", value_set=[True]),  # safe as a file name
        gxe.ExpectColumnValuesToBeInSet(column="run_id_matches_archive", value_set=[True]),  # id = archive stem
        gxe.ExpectColumnValuesToNotBeNull(column="system"),                              # runs compared per system
        gxe.ExpectColumnValuesToBeInSet(column="system_is_identifier", value_set=[True]),  # safe as a file name
        gxe.ExpectColumnValuesToNotBeNull(column="version"),
        gxe.ExpectColumnValuesToNotBeNull(column="started_at_epoch"),                    # ISO-8601 start, parseable
        gxe.ExpectColumnValuesToBeInSet(column="duration_is_number", value_set=[True]),  # units: seconds, a number
        gxe.ExpectColumnValuesToBeBetween(column="duration_s", min_value=1, max_value=max_duration_s),
        gxe.ExpectColumnValuesToBeInSet(column="workload_is_object", value_set=[True]),  # {"profile", "load_counter"}
        gxe.ExpectColumnValuesToBeInSet(column="load_counter_recorded", value_set=[True]),  # load counter exists
        gxe.ExpectColumnValuesToBeInSet(column="environment_is_flat_object", value_set=[True]),  # flat env map
        gxe.ExpectColumnValuesToBeInSet(column="verdict", value_set=["pass", "fail"]),   # null allowed: a target
        gxe.ExpectColumnValuesToBeInSet(column="baseline_is_list_of_ids", value_set=[True]),
        gxe.ExpectColumnValuesToBeInSet(column="regressed_is_list_of_counters", value_set=[True]),
    ]
    hosts = [
        gxe.ExpectTableRowCountToBeBetween(min_value=1),                                  # at least one machine
        gxe.ExpectColumnValuesToMatchRegex(column="host", regex=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z"),  # file stem
        gxe.ExpectColumnValuesToBeBetween(column="load_samples", min_value=min_samples_per_host),  # completeness
        gxe.ExpectColumnValuesToBeBetween(column="coverage", min_value=min_coverage),    # planned duration covered
    ]
    values = [
        gxe.ExpectColumnValuesToNotBeNull(column="counter"),                               # each CSV has counters
        gxe.ExpectColumnValuesToBeInSet(column="counter_name_ok", value_set=[True]),       # <component>.<counter>
        gxe.ExpectColumnValuesToNotBeNull(column="ts"),                                    # parseable timestamps
        gxe.ExpectColumnValuesToBeBetween(column="ts_step", min_value=0, strict_min=True),  # strictly increasing
        gxe.ExpectColumnValuesToBeInSet(column="value_is_number", value_set=[True]),       # numbers or empty cells
        gxe.ExpectColumnValuesToBeInSet(column="value_is_finite", value_set=[True]),       # inf is no measurement
        gxe.ExpectColumnValuesToBeBetween(column="pct_value", min_value=pct_range[0],      # units: percentages
                                          max_value=pct_range[1], mostly=value_mostly),
        gxe.ExpectColumnValuesToBeBetween(column="nonneg_value", min_value=0,              # rates, sizes, counts
                                          mostly=value_mostly),
    ]
    return {"run_meta": meta, "host_coverage": hosts, "counter_values": values}


def failed_expectations(suite_name: str, result: Any) -> list[dict[str, Any]]:
    """The failed expectations of one GX validation result, in a JSON-ready form."""
    failed = []
    for r in result.results:
        if r.success:
            continue
        cfg = r.expectation_config
        res = r.result or {}
        failed.append({
            "suite": suite_name,
            "expectation": cfg.type,
            "kwargs": {k: v for k, v in cfg.kwargs.items() if k not in ("batch_id",)},
            "unexpected_count": res.get("unexpected_count"),
            "unexpected_percent": res.get("unexpected_percent"),
            "partial_unexpected_list": [str(v) for v in (res.get("partial_unexpected_list") or [])[:10]],
            "observed_value": str(res.get("observed_value")) if "observed_value" in res else None,
            "exception": (r.exception_info or {}).get("exception_message") if isinstance(r.exception_info, dict)
            and r.exception_info.get("raised_exception") else None,
        })
    return failed


def valid_host_frames(frames: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Host frames in the form later stages read: float ``ts`` column plus numeric counters."""
    out = {}
    for host, frame in frames.items():
        numeric = frame.drop(columns=["timestamp"]).apply(pd.to_numeric, errors="coerce").astype(float)
        numeric.insert(0, "ts", parse_timestamps(frame["timestamp"]).values)
        numeric.columns = [str(c) for c in numeric.columns]
        out[host] = numeric.reset_index(drop=True)
    return out


# --------------------------------------------------------------------------- GX runner


class Validator:
    """A GX file context (results kept under ``data/interim/gx``) with the three suites.

    Results are stored as they come; :meth:`build_docs` renders the Data Docs site
    once at the end of the night (rendering after every archive is quadratic).
    """

    def __init__(self, suites: dict[str, list], *, project_dir: Path | None, docs_dir: Path | None):
        logging.getLogger("great_expectations").setLevel(logging.WARNING)
        import great_expectations as gx

        self.gx = gx
        if project_dir is None:
            self.context = gx.get_context(mode="ephemeral")
        else:
            project_dir.mkdir(parents=True, exist_ok=True)
            self.context = gx.get_context(mode="file", project_root_dir=str(project_dir))
        try:
            from great_expectations.data_context.types.base import ProgressBarsConfig

            self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        except Exception:  # progress bars are cosmetic; other GX versions may lack the knob
            pass
        self.docs = docs_dir is not None
        if docs_dir is not None:
            site = {
                "class_name": "SiteBuilder",
                "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                                  "base_directory": str(docs_dir)},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            }
            for name in list(self.context.get_site_names()):
                self.context.delete_data_docs_site(name)
            self.context.add_data_docs_site(site_name="regresslab", site_config=site)
        source = self.context.data_sources.add_or_update_pandas("regresslab")
        self.checkpoints = {}
        for name, expectations in suites.items():
            suite = self.context.suites.add_or_update(gx.ExpectationSuite(name=name, expectations=expectations))
            asset = source.add_dataframe_asset(name)
            batch = asset.add_batch_definition_whole_dataframe("whole")
            vd = self.context.validation_definitions.add_or_update(
                gx.ValidationDefinition(name=name, data=batch, suite=suite))
            self.checkpoints[name] = self.context.checkpoints.add_or_update(gx.Checkpoint(
                name=f"{name}_checkpoint", validation_definitions=[vd], actions=[],
                result_format={"result_format": "SUMMARY", "partial_unexpected_count": 10}))

    def run(self, suite_name: str, frame: pd.DataFrame, run_id: str) -> list[dict[str, Any]]:
        result = self.checkpoints[suite_name].run(
            batch_parameters={"dataframe": frame},
            run_id=self.gx.RunIdentifier(run_name=f"{run_id}"))
        failed = []
        for vr in result.run_results.values():
            failed += failed_expectations(suite_name, vr)
        return failed

    def build_docs(self) -> None:
        if self.docs:
            self.context.build_data_docs(site_names=["regresslab"])


def validate_archive(path: Path, validator: Validator, params: dict[str, Any]) -> tuple[archive.RawRun | None, dict, list]:
    """Validate one archive; return (raw run or None, host frames, failures)."""
    try:
        return check_archive(path, validator, params)
    except archive.ArchiveError as exc:
        return None, {}, [{"suite": "archive", "expectation": "readable_safe_archive", "reason": str(exc)}]
    except (Exception, RecursionError, MemoryError) as exc:      # noqa: BLE001 -- any fault of one archive
        # raw data is immutable: an archive that breaks a reader would break every night; it is
        # quarantined with the fault named, and the night goes on (a fault of ours shows in the log)
        log.exception("could not read or interpret %s", path.name)
        return None, {}, [{"suite": "archive", "expectation": "readable_safe_archive",
                           "reason": f"could not read or interpret the archive: {type(exc).__name__}: "
                                     f"{str(exc)[:300]}"}]


def check_archive(path: Path, validator: Validator, params: dict[str, Any]
                  ) -> tuple[archive.RawRun | None, dict, list]:
    """:func:`validate_archive` without the catch-all: read, parse and run the three suites."""
    expected_id = archive.archive_stem(path) if path.is_file() else path.name
    raw = archive.read_archive(path, params["limits"])
    frames = {h: archive.parse_counter_csv(b, h, params["limits"]) for h, b in sorted(raw.csv_bytes.items())}
    names = [c for f in frames.values() for c in f.columns if c != "timestamp"]
    dupes = sorted({c for c in names if names.count(c) > 1})
    failures: list[dict[str, Any]] = []
    if dupes:
        failures.append({"suite": "archive", "expectation": "unique_counter_names",
                         "reason": f"counter names repeated across hosts: {dupes[:10]}"})
    meta = meta_frame(raw.meta, archive_run_id=expected_id, counters=set(names))
    failures += validator.run("run_meta", meta, expected_id)
    started = meta["started_at_epoch"].iloc[0]
    duration = meta["duration_s"].iloc[0] if meta["duration_is_number"].iloc[0] else None
    cover = host_coverage(frames, started_at=None if pd.isna(started) else float(started),
                          duration_s=None if duration is None or pd.isna(duration) else float(duration))
    failures += validator.run("host_coverage", cover, expected_id)
    long = range_columns(counters_long(frames), pct_suffixes=params["pct_suffixes"],
                         nonneg_suffixes=params["nonneg_suffixes"])
    failures += validator.run("counter_values", long, expected_id)
    return raw, frames, failures


def clean_stale(valid_dir: Path, max_age_s: float = 3600.0) -> None:
    """Remove the temporary run directories (``.<run_id>.*.tmp`` / ``.old``) of a validate that died
    more than ``max_age_s`` ago (a live one renames its own within seconds)."""
    now = time.time()
    for p in list(valid_dir.glob(".*.tmp")) + list(valid_dir.glob(".*.old")):
        if p.is_dir() and now - p.stat().st_mtime > max_age_s:
            shutil.rmtree(p, ignore_errors=True)


def cache_key(sha256: str, params: dict[str, Any]) -> str:
    blob = json.dumps({"sha": sha256, "suite": SUITE_VERSION, "params": params}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    params = config.load_params("validate")
    manifest = archive.read_manifest()
    config.VALID.mkdir(parents=True, exist_ok=True)
    config.QUARANTINE.mkdir(parents=True, exist_ok=True)
    validator = Validator(build_suites(
        min_samples_per_host=params["min_samples_per_host"], min_coverage=params["min_coverage"],
        max_duration_s=params["max_duration_s"], pct_range=tuple(params["pct_range"]),
        value_mostly=params["value_mostly"]), project_dir=config.GX, docs_dir=config.VALIDATION_DOCS)
    clean_stale(config.VALID)
    index: dict[str, Any] = {}
    quarantined: dict[str, Any] = {}
    done = 0
    todo = sorted(manifest.values(), key=lambda e: e.run_id)
    progress = Progress(log, "validate", len(todo), what="archives", every=10)
    for i, entry in enumerate(todo, 1):
        if not config.is_identifier(entry.run_id):    # pulled before the grammar was enforced: no file of it
            quarantined[entry.run_id] = "run_id is not an identifier ([A-Za-z0-9][A-Za-z0-9._-]{0,127}); not analysed"
            log.warning("skipped %r: run_id outside the identifier grammar", entry.run_id[:80])
            continue
        key = cache_key(entry.sha256, params)
        run_dir = config.valid_dir(entry.run_id)
        q_path = config.quarantine_path(entry.run_id)
        marker = run_dir / "meta.json"
        if marker.exists() and archive.read_json(marker).get("_validation_key") == key:
            index[entry.run_id] = _index_row(archive.read_json(marker))
            continue
        if q_path.exists() and archive.read_json(q_path).get("validation_key") == key:
            quarantined[entry.run_id] = archive.read_json(q_path)["reason"]
            continue
        raw, frames, failures = validate_archive(config.RAW / entry.file, validator, params)
        done += 1
        if failures:
            reason = "; ".join(
                f.get("reason") or f"{f['suite']}: {f['expectation']}"
                f"({f['kwargs'].get('column', '')}) unexpected={f.get('unexpected_count')}"
                for f in failures)
            archive.write_json_atomic(q_path, {"run_id": entry.run_id, "archive": f"data/raw/{entry.file}",
                                               "sha256": entry.sha256, "reason": reason,
                                               "failed_expectations": failures, "validation_key": key})
            if run_dir.exists():
                shutil.rmtree(run_dir)
            quarantined[entry.run_id] = reason
            log.warning("quarantined %s: %s", entry.run_id, reason[:300])
        else:
            # a directory of this process's own name, swapped in by renames: a run killed at any
            # point leaves either the old or the new run directory (or none: validated again)
            tmp_dir = Path(tempfile.mkdtemp(prefix=f".{entry.run_id}.", suffix=".tmp", dir=config.VALID))
            for host, frame in valid_host_frames(frames).items():
                archive.write_parquet_atomic(tmp_dir / f"{host}.parquet", frame)
            meta = dict(raw.meta, _validation_key=key, _sha256=entry.sha256, _archive=f"data/raw/{entry.file}",
                        _hosts=sorted(frames))
            archive.write_json_atomic(tmp_dir / "meta.json", meta)
            old = None
            if run_dir.exists():
                old = tmp_dir.with_suffix(".old")
                run_dir.rename(old)
            tmp_dir.rename(run_dir)
            if old is not None:
                shutil.rmtree(old)
            if q_path.exists():
                q_path.unlink()
            index[entry.run_id] = _index_row(meta)
        progress.step(i, f"{done} validated now, {len(quarantined)} quarantined")
    t_docs = time.monotonic()
    validator.build_docs()
    log.info("Data Docs rebuilt in %.1fs", time.monotonic() - t_docs)
    # runs that left the manifest cannot exist (raw is append-only); stale dirs of other keys are replaced above
    archive.write_json_atomic(config.VALID_INDEX, {"valid": index, "quarantined": quarantined})
    print(f"[validate] {len(index)} valid, {len(quarantined)} quarantined "
          f"({done} validated this time); Data Docs: {config.VALIDATION_DOCS / 'index.html'}")


def _index_row(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: meta.get(k) for k in ("system", "version", "started_at", "duration_s", "verdict", "cause",
                                     "environment", "baseline", "workload", "regressed_counters", "_hosts")}


if __name__ == "__main__":
    main()
