"""What can vary between runs on this machine, for the tests that check a result is the same bits
whatever the CPU path taken: the BLAS kernels and numpy SIMD levels this processor can run, and
thread counts.

A kernel or SIMD level the processor does not have is never forced: OpenBLAS then runs
instructions the CPU lacks and the process dies with SIGILL.  Each variant below is one this
machine reports it can run (``/proc/cpuinfo`` flags for OpenBLAS's kernels, numpy's own
``__cpu_features__`` for its dispatch levels); the others are named with the reason they were
left out, so that a test can say what it did not check here.
"""
from __future__ import annotations

import platform
from functools import lru_cache
from pathlib import Path

# OpenBLAS's x86-64 kernels (OPENBLAS_CORETYPE) and the CPU flags each needs
# (kernel/x86_64/KERNEL.<name> in OpenBLAS: SSE3 for Prescott up to AVX-512 for SkylakeX)
OPENBLAS_X86_KERNELS: dict[str, frozenset[str]] = {
    "Prescott": frozenset({"pni"}),                       # SSE3 ("pni" in /proc/cpuinfo)
    "Nehalem": frozenset({"ssse3", "sse4_2"}),
    "Sandybridge": frozenset({"avx"}),
    "Haswell": frozenset({"avx2", "fma"}),
    "SkylakeX": frozenset({"avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl"}),
}
# numpy's dispatch levels above the x86-64 baseline, highest first (NPY_DISABLE_CPU_FEATURES)
NUMPY_X86_LEVELS = ("X86_V4", "X86_V3")


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The processor's flags as the kernel reports them (empty where there is no /proc/cpuinfo)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def is_x86_64() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def blas_kernels() -> tuple[list[str], dict[str, str]]:
    """The OpenBLAS kernels this processor can run, and those left out with why."""
    if not is_x86_64():
        return [], {name: f"an x86-64 kernel, this is {platform.machine()}" for name in OPENBLAS_X86_KERNELS}
    flags = cpu_flags()
    runnable, left_out = [], {}
    for name, needs in OPENBLAS_X86_KERNELS.items():
        missing = sorted(needs - flags)
        if missing:
            left_out[name] = f"the processor lacks {', '.join(missing)}"
        else:
            runnable.append(name)
    return runnable, left_out


def numpy_levels() -> tuple[list[str], dict[str, str]]:
    """numpy's dispatch levels that are on here (so switching them off changes the path taken), and
    those left out with why."""
    from numpy._core._multiarray_umath import __cpu_features__

    on, left_out = [], {}
    for level in NUMPY_X86_LEVELS:
        if __cpu_features__.get(level):
            on.append(level)
        else:
            left_out[level] = "not on this processor (numpy never takes it here)"
    return on, left_out


def variants() -> tuple[list[dict[str, str]], dict[str, str]]:
    """Environments a fresh interpreter can run under on this machine, each taking another path:
    the default; one BLAS thread; the oldest and the newest OpenBLAS kernel the processor can run,
    on one thread; numpy with every level above its baseline that is on here switched off.  And
    what was left out, with why (the kernels between the two ends run too, but add nothing the
    ends do not: each of the two is another code path from the default's)."""
    kernels, left_blas = blas_kernels()
    levels, left_numpy = numpy_levels()
    out: list[dict[str, str]] = [{}, {"OPENBLAS_NUM_THREADS": "1"}]
    out += [{"OPENBLAS_CORETYPE": name, "OPENBLAS_NUM_THREADS": "1"} for name in dict.fromkeys(kernels[:1] + kernels[-1:])]
    if levels:
        out.append({"NPY_DISABLE_CPU_FEATURES": ",".join(levels)})
    left = {f"OPENBLAS_CORETYPE={k}": v for k, v in left_blas.items()}
    left.update({f"NPY_DISABLE_CPU_FEATURES={k}": v for k, v in left_numpy.items()})
    return out, left


def run_everywhere(code: str) -> list[tuple[dict[str, str], dict, str]]:
    """``code`` in a fresh interpreter under each of :func:`variants`, two at a time: per variant,
    its environment, the path it took (:data:`PATH_PROBE`'s report) and what ``code`` printed."""
    import json
    from concurrent.futures import ThreadPoolExecutor

    from tests.helpers import fresh_python

    envs, _ = variants()

    def one(extra: dict[str, str]) -> tuple[dict[str, str], dict, str]:
        path, _, printed = fresh_python(PATH_PROBE + "\nprint('--8<--')\n" + code, **extra).partition("--8<--")
        return extra, json.loads(path), printed.strip()
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, envs))


def took(extra: dict[str, str], path: dict) -> bool:
    """Whether the interpreter took the path ``extra`` asked for: the OpenBLAS kernel named (or
    its alias: OpenBLAS calls its SSE3 kernel Katmai on x86-64), the numpy levels switched off."""
    aliases = {"Prescott": {"Prescott", "Katmai"}}
    kernel = extra.get("OPENBLAS_CORETYPE")
    if kernel and path["kernel"] is not None and path["kernel"] not in aliases.get(kernel, {kernel}):
        return False
    off = [lvl for lvl in extra.get("NPY_DISABLE_CPU_FEATURES", "").split(",") if lvl]
    return not set(off) & set(path["levels"])


# What a fresh interpreter reports of the path it takes: OpenBLAS's kernel and numpy's levels on.
PATH_PROBE = """
import json
import numpy
from numpy._core._multiarray_umath import __cpu_features__
from threadpoolctl import threadpool_info
blas = [i for i in threadpool_info() if i.get("internal_api") == "openblas"]
print(json.dumps({"kernel": blas[0].get("architecture") if blas else None,
                  "threads": blas[0].get("num_threads") if blas else None,
                  "levels": sorted(k for k in ("X86_V4", "X86_V3") if __cpu_features__.get(k))}))
"""
