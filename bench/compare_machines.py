"""Does a labelled set give the same figures on another path through the CPU?  Tried on this one.

    python -m bench.compare_machines smd [--shared ../shared] [--keep]

Runs every stage of ``dvc.yaml``'s order on ``<shared>/data/<set>`` twice, each in its own tree
(``build/<set>-native``, ``build/<set>-emulated``), the second on the path most unlike the default
that this processor can run: numpy with each SIMD level above its baseline that is on here
switched off, the oldest OpenBLAS kernel the CPU has, one BLAS thread
(``tests/machine_variants.py``; numpy and OpenBLAS read these variables when they load, so each
stage is its own process), then compares the metric files.  A kernel or level the processor lacks
is never forced (OpenBLAS would die of SIGILL); what was left out is printed with why.  ``model_version`` (a
hash of the cause models' bytes, whose split thresholds may differ at the last ULP) is left out.
Prints each differing figure and exits 1 when there is one.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
from pipelines.orchestration import stage_graph  # noqa: E402 -- after the path is set

STAGES = stage_graph.stages_from("pull")       # dvc.yaml's stages from pull on (before it: the example's generators)


def emulated() -> tuple[dict[str, str], dict[str, str]]:
    """The other path this machine can take (every variable of ``machine_variants``' variants that
    moves away from the default, merged), and what was left out."""
    from tests import machine_variants

    envs, left_out = machine_variants.variants()
    kernels, _ = machine_variants.blas_kernels()
    merged = {"OPENBLAS_NUM_THREADS": "1"}
    if kernels:
        merged["OPENBLAS_CORETYPE"] = kernels[0]
    for env in envs:
        if "NPY_DISABLE_CPU_FEATURES" in env:
            merged["NPY_DISABLE_CPU_FEATURES"] = env["NPY_DISABLE_CPU_FEATURES"]
    return merged, left_out


def build(tree: Path, data: Path, extra: dict[str, str]) -> float:
    """Every stage on ``data`` in ``tree``; the seconds it took."""
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["pull"]["source"] = str(data / "archives")
    params["evaluate"]["labels"] = [str(data / "target_labels.json")]
    (tree / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REGRESSLAB_ROOT": str(tree), **extra}
    start = time.monotonic()
    for i, stage in enumerate(STAGES, 1):
        subprocess.run([sys.executable, "-m", f"pipelines.stages.{stage}"], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        spent = time.monotonic() - start
        print(f"  {tree.name}: {i}/{len(STAGES)} stages ({stage}), {spent:.0f} s, "
              f"eta {spent / i * (len(STAGES) - i):.0f} s", flush=True)
    return time.monotonic() - start


def without_versions(value):
    if isinstance(value, dict):
        return {k: without_versions(v) for k, v in value.items() if k != "model_version"}
    if isinstance(value, list):
        return [without_versions(v) for v in value]
    return value


def differences(a, b, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in differences(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} | {b!r}"]


def compare(native: Path, emulated: Path) -> list[str]:
    out = []
    for file in sorted((native / "metrics").iterdir()):
        other = emulated / "metrics" / file.name
        if not other.exists():
            out.append(f"{file.name}: only on the native machine")
        elif file.suffix == ".json":
            out += [f"{file.name}{d}" for d in differences(without_versions(json.loads(file.read_text())),
                                                           without_versions(json.loads(other.read_text())))]
        elif file.read_bytes() != other.read_bytes():
            lines = [f"{x} | {y}" for x, y in zip(file.read_text().splitlines(), other.read_text().splitlines()) if x != y]
            out += [f"{file.name}: {line}" for line in lines]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("set", help="a folder of <shared>/data with archives/ and target_labels.json")
    parser.add_argument("--shared", default=str(ROOT.parent / "shared"))
    parser.add_argument("--keep", action="store_true", help="keep both trees under build/")
    args = parser.parse_args()
    data = Path(args.shared).resolve() / "data" / args.set
    native, emulated_tree = ROOT / "build" / f"{args.set}-native", ROOT / "build" / f"{args.set}-emulated"
    t_native = build(native, data, {})
    other, left_out = emulated()
    for name, why in left_out.items():
        print(f"not tried here: {name} ({why})")
    t_emulated = build(emulated_tree, data, other)
    found = compare(native, emulated_tree)
    print(f"{args.set}: native {t_native:.0f} s, emulated ({' '.join(f'{k}={v}' for k, v in other.items())}) "
          f"{t_emulated:.0f} s; {len(found)} differing figure(s) in metrics/")
    for line in found[:50]:
        print("  " + line)
    if not args.keep:
        shutil.rmtree(native, ignore_errors=True)
        shutil.rmtree(emulated_tree, ignore_errors=True)
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
