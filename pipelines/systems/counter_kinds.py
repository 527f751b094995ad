"""counter_kinds: a counter's component and kind, from its name alone.

Counters are named ``<component>.<metric>`` (contract §1: ``cartservice.cpu_usage_m``,
``procstat.cpu11_user_pct``).  Two counters are of one *kind* when they measure the same thing
in different components or instances: the name without the component prefix, every run of
digits folded to ``N``.  A fault in one service then looks the same whichever service it hits:
the cause classifiers fold their features by kind (``cause_features.kind_features``), and a
cause's signature on a system is the kinds its verified faults named
(``verdict.cause_signatures``).
"""
from __future__ import annotations

import re


def counter_kind(counter: str) -> tuple[str, str]:
    """``(component, kind)`` of a counter: the component is the name up to its first dot (``""``
    without one), the kind the rest with every run of digits folded to ``N``."""
    component, dot, name = counter.partition(".")
    if not dot or not name:
        component, name = "", counter
    return component, re.sub(r"\d+", "N", name)


def counter_metric(counter: str) -> str:
    """The metric a counter measures, whichever component: its name without the component prefix
    (``cartservice.cpu_usage_m`` -> ``cpu_usage_m``; no digit folded, so ``server.m01`` and
    ``server.m02`` stay two metrics); the whole name without a prefix."""
    _, dot, name = counter.partition(".")
    return name if dot and name else counter
