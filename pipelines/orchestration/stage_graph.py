"""The stages and their order, read from ``dvc.yaml``: the one list of stages.

A stage runs after every stage whose outputs it reads (a ``deps`` path equal to, inside or
around another stage's ``outs``, ``metrics`` or ``plots`` path).  The Makefile's real-set
target, the tests and the benchmarks take their order from here instead of spelling it.

``python -m pipelines.orchestration.stage_graph [FIRST]`` prints the stages in order, from
``FIRST`` and what follows from it when given.
"""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

DVC_YAML = Path(__file__).resolve().parents[2] / "dvc.yaml"


def _paths(entries) -> list[str]:
    out = []
    for entry in entries or []:
        out.append(str(entry if isinstance(entry, str) else next(iter(entry))).rstrip("/"))
    return out


def _touches(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def read_stages(path: Path = DVC_YAML) -> dict[str, dict]:
    """The ``stages`` of ``dvc.yaml``, in the file's order."""
    return yaml.safe_load(Path(path).read_text(encoding="utf-8"))["stages"]


def upstream(stages: dict[str, dict]) -> dict[str, set[str]]:
    """Stage -> the stages whose outputs it reads."""
    made = {name: _paths(s.get("outs")) + _paths(s.get("metrics")) + _paths(s.get("plots"))
            for name, s in stages.items()}
    return {name: {other for other, outs in made.items() if other != name
                   and any(_touches(d, o) for d in _paths(s.get("deps")) for o in outs)}
            for name, s in stages.items()}


def stage_order(path: Path = DVC_YAML) -> list[str]:
    """Every stage after the stages it reads from; ties in ``dvc.yaml``'s order."""
    stages = read_stages(path)
    before = upstream(stages)
    order: list[str] = []
    while len(order) < len(stages):
        ready = [s for s in stages if s not in order and before[s] <= set(order)]
        if not ready:
            raise ValueError(f"dvc.yaml: the stages {sorted(set(stages) - set(order))} read each other's outputs")
        order.append(ready[0])
    return order


def stages_from(first: str, path: Path = DVC_YAML) -> list[str]:
    """``first`` and every stage that reads, directly or not, what it writes, in order."""
    stages = read_stages(path)
    if first not in stages:
        raise ValueError(f"dvc.yaml has no stage {first!r}")
    before = upstream(stages)
    chain = {first}
    for name in stage_order(path):
        if before[name] & chain:
            chain.add(name)
    return [s for s in stage_order(path) if s in chain]


def select(first: str = "pull", *, through: str | None = None, skip: tuple[str, ...] = (),
           also: tuple[str, ...] = (), path: Path = DVC_YAML) -> list[str]:
    """:func:`stages_from` ``first``, up to ``through`` (included), without ``skip``, with the
    unrelated stages ``also`` at their place in :func:`stage_order`."""
    chain = stages_from(first, path)
    if through is not None:
        chain = chain[:chain.index(through) + 1]
    wanted = (set(chain) | set(also)) - set(skip)
    return [s for s in stage_order(path) if s in wanted]


if __name__ == "__main__":
    print(" ".join(stages_from(sys.argv[1]) if len(sys.argv) > 1 else stage_order()))
