"""What several stages read: normalised runs, the load-scaled frame cache, bin edges and saved
cause models.

The science stays in the stage modules and stays pure; this module only finds and reads
what the stages wrote (paths from ``config``, bytes through ``atomic``).  Writers stay
with the stage that owns the output; readers live here so that no stage imports another
stage for its files.  The raw archives' manifest and ``validate``'s index are read by
``manifest`` (``read_manifest``, ``read_valid_index``), so ``pull``, ``validate`` and ``normalize``
depend on no analysis module.
"""
from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from pipelines import config
from pipelines.load_scaling import scale_to_load
from pipelines.storage import atomic
from pipelines.storage.cause_files import CauseModelMeta
from pipelines.storage.run_records import NormalizedInfo
from pipelines.storage.stage_files import EdgesFile

TRUSTED_PREFIXES = ("sklearn.", "numpy.", "builtins.")
DERIVED_BUDGET = 1 << 30          # bytes a FrameStore keeps of what detectors derive from its runs (FrameStore.derived)


def read_optional(path: Path) -> Any | None:
    """A JSON file, or None when it does not exist."""
    return atomic.read_json(path) if path.exists() else None


# --------------------------------------------------------------------------- normalised runs


def run_counters(run_id: str) -> set[str]:
    """The counters a validated run recorded: its host frames' columns, read from their schemas
    alone (``ts``, the time column, is no counter)."""
    import pyarrow.parquet as pq

    folder = config.valid_dir(run_id)
    return {name for path in sorted(folder.glob("*.parquet")) for name in pq.read_schema(path).names
            if name != "ts"}


def read_info(run_id: str) -> NormalizedInfo:
    """What normalisation decided for a run (interval, counters, load fits, cache key)."""
    return atomic.read_json(config.info_path(run_id))


def load_normalized(run_id: str) -> pd.DataFrame:
    return atomic.read_parquet(config.frame_path(run_id))


def reference_load(runs: list[str]) -> float | None:
    """A system's reference load: the median of the training runs' median loads."""
    loads = [float(x) for x in (read_info(r).get("median_load") for r in runs) if x is not None]
    return float(np.median(loads)) if loads else None


def load_scaled(run_id: str, reference: float | None) -> pd.DataFrame:
    """A normalised run with its load-following counters scaled to the reference load (read now;
    :class:`FrameStore` keeps them)."""
    return FrameStore(reference)[run_id]


def read_edges(system: str) -> EdgesFile:
    """A system's bin edges, training runs and reference load (``discretize``'s output)."""
    return atomic.read_json(config.edges_path(system))


class FrameStore:
    """Load-scaled interval frames of a system's runs, each run read from disk once.

    ``store[run_id]`` is the run at the store's reference load (cached);
    :meth:`at` gives it at another reference (the leave-one-out learns the reference again
    without the held-out run), scaled from the cached normalised frame each time, so the
    memory held stays two frames per run whatever the number of references.
    """

    def __init__(self, reference: float | None, derived_budget: int = DERIVED_BUDGET):
        self.reference = reference
        self._normalized: dict[str, tuple[pd.DataFrame, NormalizedInfo]] = {}
        self._scaled: dict[str, pd.DataFrame] = {}
        self._levels: dict[tuple, pd.Series] = {}
        self._derived: OrderedDict[tuple, Any] = OrderedDict()
        self._derived_budget = derived_budget
        self._derived_bytes = 0

    @classmethod
    def of_system(cls, system: str) -> "FrameStore":
        """The store of a system, at the reference load its bin edges were learned at."""
        return cls(read_edges(system)["reference_load"])

    def at(self, run_id: str, reference: float | None) -> pd.DataFrame:
        if reference == self.reference and run_id in self._scaled:
            return self._scaled[run_id]
        if run_id not in self._normalized:
            self._normalized[run_id] = (load_normalized(run_id), read_info(run_id))
        frame, info = self._normalized[run_id]
        scaled = scale_to_load(frame, info.get("load_counter"), info.get("load_fits") or {}, reference)
        if reference == self.reference:
            self._scaled[run_id] = scaled
        return scaled

    def __getitem__(self, run_id: str) -> pd.DataFrame:
        return self.at(run_id, self.reference)

    def derived(self, key: tuple, compute: Callable[[], Any]) -> Any:
        """``compute()``, kept under ``key`` while the kept values' ``nbytes`` stay within the
        store's budget (the least recently used go first): what a detector derives from a run and
        reads again in other models (the clustered models' moments, 32 MB a run at 2,000 counters)."""
        if key in self._derived:
            self._derived.move_to_end(key)
            return self._derived[key]
        value = compute()
        size = int(getattr(value, "nbytes", 0))
        if size <= self._derived_budget:
            self._derived[key] = value
            self._derived_bytes += size
            while self._derived_bytes > self._derived_budget:
                _, gone = self._derived.popitem(last=False)
                self._derived_bytes -= int(getattr(gone, "nbytes", 0))
        return value

    def levels(self, runs: list[str], reference: float | None) -> pd.DataFrame:
        """One row per run: its median of every counter at ``reference`` (kept: a run's levels are
        read once per reference)."""
        for r in runs:
            if (r, reference) not in self._levels:
                self._levels[(r, reference)] = self.at(r, reference).median()
        return pd.DataFrame({r: self._levels[(r, reference)] for r in runs}).T

    def peaks(self, runs: list[str], reference: float | None) -> pd.DataFrame:
        """One row per run: its 95th percentile of every counter's ``|x|`` at ``reference`` (kept, as
        :meth:`levels`)."""
        for r in runs:
            if (r, reference, "peak") not in self._levels:
                self._levels[(r, reference, "peak")] = self.at(r, reference).abs().quantile(0.95)
        return pd.DataFrame({r: self._levels[(r, reference, "peak")] for r in runs}).T

    def columns_at(self, run_id: str, reference: float | None, columns: list[str]) -> pd.DataFrame:
        """The run at ``reference``, ``columns`` only (those it has, each once, in that order), as
        ``self.at(run_id, reference)[columns]``: from the kept frame when the store holds it, else
        read from disk with only those columns and the load counter (each counter is scaled by
        the load alone), and not kept."""
        if run_id in self._normalized:             # every frame the store keeps, scaled or not
            frame = self.at(run_id, reference)
            return frame[[c for c in dict.fromkeys(columns) if c in frame.columns]]
        info = read_info(run_id)
        load = info.get("load_counter")
        read = atomic.read_parquet(config.frame_path(run_id), columns=[*columns, *([load] if load else [])])   # each once
        wanted = [c for c in dict.fromkeys(columns) if c in read.columns]
        return scale_to_load(read, load, info.get("load_fits") or {}, reference)[wanted]

    # the runs' medians and peaks kept between nights (``save_summaries``): a new target's effects
    # are measured against its reference runs' levels, which would read every reference run again
    SUMMARY_KINDS = {"level": (), "peak": ("peak",)}

    def save_summaries(self, path: Path, runs: list[str], key: str) -> int:
        """Write the medians and peaks this store holds of ``runs`` at its reference load to
        ``path`` under ``key`` (an input key of the runs' frames, the reference and the code),
        atomically, with numpy alone (no pickle); how many series."""
        held = [(r, kind, self._levels[(r, self.reference, *suffix)]) for r in runs
                for kind, suffix in self.SUMMARY_KINDS.items() if (r, self.reference, *suffix) in self._levels]
        vocabulary = sorted({str(c) for _, _, s in held for c in s.index})
        position = {c: i for i, c in enumerate(vocabulary)}
        atomic.write_keyed_npz(
            path, key, runs=np.array([r for r, _, _ in held], dtype=str),
            kinds=np.array([k for _, k, _ in held], dtype=str), vocabulary=np.array(vocabulary, dtype=str),
            offsets=np.cumsum([0, *(len(s) for _, _, s in held)]),
            counters=np.array([position[str(c)] for _, _, s in held for c in s.index], dtype=np.int64),
            values=np.concatenate([s.to_numpy(dtype=float) for _, _, s in held]) if held else np.zeros(0))
        return len(held)

    def load_summaries(self, path: Path, key: str) -> int:
        """The series :meth:`save_summaries` wrote, kept as :meth:`levels` and :meth:`peaks` would
        keep them, when written under ``key``; how many (0: none, or another key's).  Read with
        ``allow_pickle=False``; a torn or foreign file is ignored (the levels are computed again)."""
        kept = atomic.read_keyed_npz(path, key, ("runs", "kinds", "vocabulary", "offsets", "counters", "values"))
        if kept is None or not set(map(str, kept["kinds"])) <= set(self.SUMMARY_KINDS):
            return 0
        runs, kinds, vocabulary = kept["runs"], kept["kinds"], kept["vocabulary"].astype(object)
        offsets, counters, values = kept["offsets"], kept["counters"], kept["values"]
        for i, (run_id, kind) in enumerate(zip(runs, kinds)):
            span = slice(offsets[i], offsets[i + 1])
            entry = (str(run_id), self.reference, *self.SUMMARY_KINDS[str(kind)])
            self._levels.setdefault(entry, pd.Series(values[span], index=pd.Index(vocabulary[counters[span]])))
        return len(runs)


# --------------------------------------------------------------------------- cause models


def load_model(path: Path):
    """Load a saved model, trusting only scikit-learn/numpy types (skops; never pickle)."""
    import skops.io as sio

    untrusted = sio.get_untrusted_types(file=path)
    foreign = [t for t in untrusted if not t.startswith(TRUSTED_PREFIXES)]
    if foreign:
        raise ValueError(f"{path}: refusing to load types outside scikit-learn/numpy: {foreign}")
    return sio.load(path, trusted=untrusted)


def latest_model_meta(system: str) -> CauseModelMeta:
    """The metadata of a system's current cause model ({} when it has none)."""
    pointer = read_optional(config.latest_cause_model(system))
    return atomic.read_json(config.cause_models_dir(system) / pointer["meta"]) if pointer else {}


class CauseModels:
    """The current cause model of each system and its metadata, loaded once (None when none yet);
    ``fault_model(system)`` the model of its fault runs alone, when training chose one."""

    def __init__(self):
        self._models: dict[str, tuple | None] = {}
        self._fault_models: dict[str, Any] = {}

    def __getitem__(self, system: str):
        if system not in self._models:
            pointer = read_optional(config.latest_cause_model(system))
            if pointer is None:
                self._models[system] = None
            else:
                directory = config.cause_models_dir(system)
                self._models[system] = (load_model(directory / pointer["model"]),
                                        atomic.read_json(directory / pointer["meta"]))
        return self._models[system]

    def fault_model(self, system: str):
        if system not in self._fault_models:
            loaded = self[system]
            name = loaded[1].get("fault_model_file") if loaded else None
            self._fault_models[system] = load_model(config.cause_models_dir(system) / name) if name else None
        return self._fault_models[system]
