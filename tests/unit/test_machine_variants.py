"""The variants the CPU-path tests run are those this processor can run, whatever it is."""
from __future__ import annotations

from tests import machine_variants

AVX2_ONLY = frozenset("fpu sse sse2 pni ssse3 sse4_1 sse4_2 avx avx2 fma".split())      # an EPYC of 2019
AVX512 = AVX2_ONLY | {"avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl"}


def test_a_processor_without_avx512_never_gets_the_avx512_kernel(monkeypatch):
    monkeypatch.setattr(machine_variants, "is_x86_64", lambda: True)
    monkeypatch.setattr(machine_variants, "cpu_flags", lambda: AVX2_ONLY)
    runnable, left_out = machine_variants.blas_kernels()
    assert runnable == ["Prescott", "Nehalem", "Sandybridge", "Haswell"]
    assert set(left_out) == {"SkylakeX"} and "avx512bw" in left_out["SkylakeX"]
    envs, left = machine_variants.variants()
    assert all(env.get("OPENBLAS_CORETYPE") != "SkylakeX" for env in envs)
    assert {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_NUM_THREADS": "1"} in envs     # the newest it has
    assert {"OPENBLAS_CORETYPE": "Prescott", "OPENBLAS_NUM_THREADS": "1"} in envs    # the oldest
    assert "OPENBLAS_CORETYPE=SkylakeX" in left


def test_with_avx512_every_kernel_runs_and_another_architecture_runs_none(monkeypatch):
    monkeypatch.setattr(machine_variants, "is_x86_64", lambda: True)
    monkeypatch.setattr(machine_variants, "cpu_flags", lambda: AVX512)
    assert machine_variants.blas_kernels() == (list(machine_variants.OPENBLAS_X86_KERNELS), {})
    monkeypatch.setattr(machine_variants, "is_x86_64", lambda: False)
    runnable, left_out = machine_variants.blas_kernels()
    assert runnable == [] and set(left_out) == set(machine_variants.OPENBLAS_X86_KERNELS)
    envs, _ = machine_variants.variants()
    assert envs[:2] == [{}, {"OPENBLAS_NUM_THREADS": "1"}]        # what varies on any machine still runs
    assert not any("OPENBLAS_CORETYPE" in env for env in envs)


def test_numpy_levels_switched_off_are_only_those_on(monkeypatch):
    import numpy._core._multiarray_umath as umath

    monkeypatch.setattr(umath, "__cpu_features__", {"X86_V3": True, "X86_V4": False})
    assert machine_variants.numpy_levels() == (["X86_V3"], {"X86_V4": "not on this processor (numpy never takes it here)"})
    envs, _ = machine_variants.variants()
    assert {"NPY_DISABLE_CPU_FEATURES": "X86_V3"} in envs and not any("X86_V4" in str(e) for e in envs)


def test_took_tells_a_variant_that_did_not_take_its_path():
    assert machine_variants.took({"OPENBLAS_CORETYPE": "Prescott"}, {"kernel": "Katmai", "levels": []})
    assert not machine_variants.took({"OPENBLAS_CORETYPE": "Haswell"}, {"kernel": "Prescott", "levels": []})
    assert not machine_variants.took({"NPY_DISABLE_CPU_FEATURES": "X86_V4"}, {"kernel": None, "levels": ["X86_V4"]})
