"""Each hostile input of the tests' corpus, read and validated alone, with its time and peak memory.

    python -m bench.bench_hostile                 # every archive and run directory of tests/hostile_corpus.py
    python -m bench.bench_hostile --code DIR      # another checkout's code on the same inputs

Every input runs in a fresh process (``validate_archive`` with the real suites, ``params.yaml``'s
limits), under a 4 GB address-space cap as the review that found them used; the bench prints,
per input, the wall time, the peak resident memory and the start of the quarantine reason (or
what killed the process).  Goal: each quarantined or refused in under 5 s and 1 GB.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from tests.hostile_corpus import write_corpus  # noqa: E402 -- after the path is set

CHILD = """
import json, resource, sys, time
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, resource.RLIM_INFINITY))
from pipelines import config
from pipelines.validation import suites
params = config.load_params("validate", Path(sys.argv[2]))
params["ingest"] = config.load_params("ingest", Path(sys.argv[2]))
v = suites.Validator(suites.suites_from_params(params), project_dir=None, docs_dir=None)
t = time.monotonic()
checked = suites.validate_archive(Path(sys.argv[1]), v, params)
wall = time.monotonic() - t
reason = "; ".join(str(f.get("reason") or f.get("expectation")) for f in checked.failures)
print(json.dumps({"wall": wall, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "reason": reason[:160]}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--code", default=str(REPO), help="the checkout whose code validates")
    args = parser.parse_args()
    code = Path(args.code)
    with tempfile.TemporaryDirectory() as tmp:
        expected = write_corpus(Path(tmp))
        print(f"{'input':<22} {'wall s':>7} {'peak MB':>8}  reason")
        for path in sorted(Path(tmp).iterdir()):
            t0 = time.monotonic()
            done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(code / "params.yaml")], cwd=code,
                                  env={"PYTHONPATH": str(code), "PATH": str(Path(sys.executable).parent)},
                                  capture_output=True, text=True, timeout=3600)
            if done.returncode:
                print(f"{path.name:<22} {time.monotonic() - t0:7.1f} {'':>8}  process died: "
                      f"{done.stderr.strip().splitlines()[-1][:120] if done.stderr.strip() else done.returncode}")
                continue
            out = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{path.name:<22} {out['wall']:7.2f} {out['peak_mb']:8.0f}  {out['reason'][:100]}")
        print(f"{len(expected)} inputs")


if __name__ == "__main__":
    main()
