"""Builders of good and bad archives for the tests, and a fresh Python to run code in."""
from __future__ import annotations

import contextlib
import http.server
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

START = 1_790_000_000.0          # epoch seconds of the load start

# how long a test's pull waits for its archives to hold still: the lab's files are written whole
# before the night starts, so only the waiting is shortened (tests/pipeline/test_arriving.py tests it)
QUICK_SETTLE_S = 0.2


def good_meta(run_id: str = "sys-run-1", **over) -> dict:
    meta = {"schema_version": 1, "run_id": run_id, "system": "sys", "version": "1.0",
            "started_at": pd.Timestamp(START, unit="s", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ"),
            "duration_s": 600, "workload": {"profile": "steady", "load_counter": "app.arrival_rate"},
            "environment": {"cpu_model": "x", "cpu_cores": 4, "memory_gb": 8}, "verdict": "pass", "cause": "none"}
    meta.update(over)
    return meta


def good_frames(period: float = 10.0, n_pre: int = 3, seed: int = 0) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    ts = START - n_pre * period + period * np.arange(int(600 / period) + 2 * n_pre)
    web = pd.DataFrame({"timestamp": ts, "web.cpu_pct": rng.uniform(20, 40, ts.size),
                        "web.io_write_bytes_per_s": rng.uniform(1e3, 2e3, ts.size)})
    lg = pd.DataFrame({"timestamp": pd.to_datetime(ts + 1.5, unit="s", utc=True).strftime("%Y-%m-%dT%H:%M:%S+00:00"),
                       "app.arrival_rate": rng.uniform(90, 110, ts.size),
                       "app.response_time_ms": rng.uniform(20, 30, ts.size)})
    return {"web01": web, "lg01": lg}


def members(meta: dict, frames: dict[str, pd.DataFrame]) -> dict[str, bytes]:
    out = {"run.json": json.dumps(meta).encode()}
    for host, f in frames.items():
        out[f"counters/{host}.csv"] = f.to_csv(index=False).encode()
    return out


def write_tgz(path: Path, files: dict[str, bytes], *, extra: list[tarfile.TarInfo] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        for info in extra or []:
            tf.addfile(info)
    return path


def write_zip(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


@contextlib.contextmanager
def every_stage_on(tree: Path, lab: Path, *, jobs: int | None = None, **train_causes):
    """``tree`` with params.yaml pointed at ``lab`` (its archives and target labels), every
    analysis stage's main() run in DVC order with the pipeline rooted there; yields while the
    root is still set, and restores it afterwards.  ``train_causes`` overrides that params block
    (one feature design unless it says otherwise: ``conftest.ONE_DESIGN``),
    ``jobs`` sets ``compute.jobs``."""
    import yaml

    params = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    params["pull"].update(source=str(lab), settle_s=QUICK_SETTLE_S)
    params["evaluate"]["labels"] = [str(lab / "target_labels.json")]
    from tests.conftest import ONE_DESIGN

    params["train_causes"].update({"feature_designs": ONE_DESIGN, **train_causes})
    params["compute"]["jobs"] = jobs
    (tree / "params.yaml").write_text(yaml.safe_dump(params))
    with rooted_at(tree):
        run_stages("pull")
        yield tree


@contextlib.contextmanager
def rooted_at(tree: Path):
    """The pipeline rooted at ``tree`` while the block runs (``config.use_root``, and
    ``REGRESSLAB_ROOT`` for the processes it starts); the previous root restored afterwards."""
    import pytest

    from pipelines import config

    old = config.ROOT
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REGRESSLAB_ROOT", str(tree))
        config.use_root(tree)
        try:
            yield tree
        finally:
            config.use_root(old)


def run_stages(first: str | set[str] = "pull", **select) -> list[str]:
    """``main()`` of each stage of ``dvc.yaml`` from ``first`` on, in the graph's order
    (``stage_graph.select``: ``through``, ``skip``, ``also``), or of the stages of a set
    ``first`` in that order; the stages run."""
    import importlib

    from pipelines.orchestration import stage_graph

    names = stage_graph.select(first, **select) if isinstance(first, str) else \
        [s for s in stage_graph.stage_order() if s in set(first)]
    for name in names:
        importlib.import_module(f"pipelines.stages.{name}").main()
    return names


def stages_in_a_process(env: dict[str, str], stages: list[str], cwd: Path | None = None) -> None:
    """Each stage's ``main()`` in the graph's order, in one new Python process (what each stage
    imports is paid once, not once a stage), in the tree ``env`` names (``REGRESSLAB_ROOT``): the
    reference nights the Airflow and Celery nights are compared with.  ``dvc repro`` itself, a
    process per stage, is run by the tests of the DVC checkout and of the installed wheel.  ``cwd``:
    the folder the process runs in (the code of a project's copy found there first)."""
    code = "import sys\nfrom tests.helpers import run_stages\nrun_stages(set(sys.argv[1:]))\n"
    done = subprocess.run([sys.executable, "-c", code, *stages], env=env, capture_output=True, text=True, timeout=900,
                          cwd=cwd)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """A request handler of a test's local HTTP server: no access log on stderr."""

    def log_message(self, *args):
        pass


def serve(handler: type[http.server.BaseHTTPRequestHandler]) -> tuple[http.server.ThreadingHTTPServer, str]:
    """A real HTTP server on a free local port answering with ``handler``, in a daemon thread:
    (the server, its base URL).  ``server.shutdown(); server.server_close()`` stops it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def fresh_python(code: str, **env: str) -> str:
    """What ``code`` prints in a new interpreter with this repository importable and ``env`` set
    (numpy and OpenBLAS read their CPU and kernel variables only when they load)."""
    root = str(Path(__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": root, **env},
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


class GatlingBinaryLog:
    """A binary simulation.log as Gatling 3.12+ writes it, record by record (the layout Gatling's
    own LogFileReader reads: big-endian ints, strings as length + bytes + coder, repeated strings
    as a negative index, times in ms from the run's start)."""

    def __init__(self, start_ms, scenarios=("shop",), version="3.13.1"):
        self.out, self.start, self.cache = bytearray(b"\x00"), start_ms, {}
        for text in (version, "computerdatabase.BasicSimulation"):
            self.string(text)
        self.out += start_ms.to_bytes(8, "big")
        self.string("")                                  # no run description
        self.out += len(scenarios).to_bytes(4, "big")
        for sc in scenarios:
            self.string(sc)
        self.out += (0).to_bytes(4, "big")               # no assertion

    def string(self, text):
        raw = text.encode("latin-1")
        self.out += len(raw).to_bytes(4, "big") + (raw + b"\x00" if raw else b"")

    def cached(self, text):
        if text in self.cache:
            self.out += (-self.cache[text]).to_bytes(4, "big", signed=True)
        else:
            self.cache[text] = len(self.cache) + 1
            self.out += self.cache[text].to_bytes(4, "big")
            self.string(text)

    def user(self, at_ms, start):
        self.out += bytes([2]) + (0).to_bytes(4, "big") + bytes([start]) + (at_ms - self.start).to_bytes(4, "big")

    def request(self, name, begin_ms, end_ms, ok, message=""):
        self.out += bytes([1]) + (0).to_bytes(4, "big")
        self.cached(name)
        self.out += (begin_ms - self.start).to_bytes(4, "big") + (end_ms - self.start).to_bytes(4, "big")
        self.out += bytes([1 if ok else 0])
        self.cached(message)

    def group(self, name, begin_ms, end_ms):
        self.out += bytes([3]) + (1).to_bytes(4, "big")
        self.cached(name)
        self.out += b"".join((v - self.start).to_bytes(4, "big") for v in (begin_ms, end_ms)) + (5).to_bytes(4, "big")
        self.out += bytes([1])


def wheel_venv(installed: Path, folder: Path) -> tuple[Path, dict[str, str]]:
    """A venv in ``folder`` holding the wheel ``installed`` was built from (conftest ``installed``),
    its dependencies the test environment's on a .pth line (a directory added so does not run that
    environment's .pth files: this checkout's editable install stays out); its ``bin`` and the
    environment of a shell that finds it first (no ``REGRESSLAB_ROOT``, no ``PYTHONPATH``)."""
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    (site,) = (folder / "lib").glob("python3*/site-packages")
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (wheel,) = (installed.parent / "dist").glob("regresslab-*.whl")
    subprocess.run([str(Path(sys.executable).parent / "uv"), "pip", "install", "--quiet", "--no-deps",
                    "--python", str(folder / "bin" / "python"), str(wheel)], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k not in ("REGRESSLAB_ROOT", "PYTHONPATH")}
    env.update(PATH=f"{folder / 'bin'}:{Path(sys.executable).parent}:{env['PATH']}")
    where = subprocess.run([str(folder / "bin" / "python"), "-c", "import pipelines; print(pipelines.__file__)"],
                           env=env, cwd=folder, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(site)), where              # the wheel's package, not this checkout
    return folder / "bin", env
