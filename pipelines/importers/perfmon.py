r"""Windows PerfMon CSV (``relog``/``typeperf``): ``\\HOST\Object(instance)\Counter`` columns,
per process (``% Processor Time`` at 100 per core) or host level; local times go to UTC by
the run's ``timezone`` or the header's bias.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from pipelines.config import host_component
from pipelines.importers.common import FormatError, host_name, samples_frame, slug

PDH = re.compile(r"^\(PDH-CSV 4\.0\)(?: \((?P<zone>[^)]*)\)\((?P<bias>-?\d+)\))?\s*$")


PERFMON_COLUMN = re.compile(r"^\\\\(?P<host>[^\\]+)\\(?P<object>[^\\(]+)(?:\((?P<instance>[^)]*)\))?\\(?P<counter>.+)$")


HOST_OBJECTS = {"processor", "memory", "physicaldisk", "logicaldisk", "network interface", "system",
                "paging file", "processor information", "tcpv4", "tcpv6", "cache", "server"}


def read_perfmon(path: Path, *, timezone: str | None) -> tuple[pd.DataFrame, dict[str, float]]:
    """Windows Performance Monitor CSV (``relog -f csv`` / ``typeperf -f CSV``): the first
    header cell ``(PDH-CSV 4.0) (<time zone>)(<bias minutes>)``, then one column per counter
    path ``\\\\HOST\\Object(instance)\\Counter`` (Microsoft's documented layout; no public
    sample with a licence exists, so the test file is written from that documentation).

    Times are local: ``timezone`` (run.yaml) when given, else the header's bias (UTC = local +
    bias).  ``typeperf`` may write the bare ``(PDH-CSV 4.0)`` with no zone: then the run's
    ``timezone`` is needed, and the file is refused without it, saying so.  Blank lines before
    the header are skipped. ``Process(<name>)`` columns become ``<name>.<counter>`` (per-process, 100 per core
    for ``% Processor Time``); host objects (Processor, Memory, PhysicalDisk, …) become
    ``<HOST>.<object>_<instance>_<counter>``. PerfMon's blank cell (``" "``) is a missing sample."""
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise FormatError(f"{path.name}: not a readable PerfMon CSV: {exc}") from exc
    first = frame.columns[0]
    m = PDH.match(first)
    if not m:
        raise FormatError(f"{path.name}: the first header cell is not '(PDH-CSV 4.0)' or "
                          "'(PDH-CSV 4.0) (<zone>)(<bias>)'")
    if m.group("bias") is None and not timezone:
        raise FormatError(f"{path.name}: the header '(PDH-CSV 4.0)' names no time zone (typeperf writes it so): "
                          "set 'timezone' in the run's run.yaml (e.g. timezone: Europe/Berlin), or export "
                          "with relog -f csv, which writes the zone and its bias")
    clock = pd.to_datetime(frame[first], format="%m/%d/%Y %H:%M:%S.%f", errors="coerce")
    if clock.isna().any():
        raise FormatError(f"{path.name}: time {frame[first][clock.isna()].iloc[0]!r} is not 'MM/DD/YYYY HH:MM:SS.fff'")
    if timezone:
        try:
            local = clock.dt.tz_localize(timezone, ambiguous="raise", nonexistent="raise")
        except Exception as exc:  # noqa: BLE001
            raise FormatError(f"{path.name}: local time not unique in {timezone} ({exc})") from exc
        epoch = (local.dt.tz_convert("UTC") - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    else:
        epoch = (clock - pd.Timestamp(0)).dt.total_seconds() + 60.0 * int(m.group("bias"))
    out = []
    for col in frame.columns[1:]:
        cm = PERFMON_COLUMN.match(col)
        if not cm:
            raise FormatError(f"{path.name}: column {col[:80]!r} is not \\\\HOST\\Object(instance)\\Counter")
        host = host_name(cm.group("host"))
        obj, inst, cnt = cm.group("object"), cm.group("instance"), cm.group("counter")
        if obj.lower() == "process" and inst:
            name = f"{slug(inst.split('#')[0] + ('_' + inst.split('#')[1] if '#' in inst else ''), 40)}.{slug(cnt)}"
        else:
            name = f"{host_component(host)}.{slug(obj, 30)}_{slug(inst, 20) + '_' if inst else ''}{slug(cnt)}"
        values = pd.to_numeric(frame[col].str.strip().replace("", np.nan), errors="coerce")
        out.append(pd.DataFrame({"host": host, "counter": name, "ts": epoch.to_numpy(float), "value": values.to_numpy()}))
    return samples_frame(out), {}

