"""Load scaling (Nguyen 2017 §5.2, seed 004): every counter that follows the load linearly,
fitted ``c = a·l + b`` on its own run (``preparation.intervals.fit_load``, stored with the run by
``normalize``), is moved to one reference load ``L`` of its system, ``c' = c · (a·L + b) / (a·l + b)``,
so that load that fluctuates inside a run and differs between runs does not look like a
regression.  Pure; applied where a run's frame is read at its system's reference load
(``storage.store``), below every stage that reads one.
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def scale_to_load(frame: pd.DataFrame, load_counter: str | None, fits: dict[str, list[float]],
                  reference_load: float | None) -> pd.DataFrame:
    """``c' = c · (a·L + b) / (a·l + b)`` per fitted counter (Nguyen 2017 eq. 5.2).

    Counters whose prediction is not positive at ``L`` or at some interval's load are
    left as they are (a ratio of non-positive predictions means nothing).
    """
    if not load_counter or load_counter not in frame.columns or reference_load is None or not fits:
        return frame
    load = frame[load_counter].to_numpy(dtype=float)
    scaled: dict[str, np.ndarray] = {}
    for counter, (a, b) in fits.items():
        if counter not in frame.columns:
            continue
        predicted = a * load + b
        at_ref = a * reference_load + b
        if at_ref <= 0 or (predicted[~np.isnan(predicted)] <= 0).any():
            continue
        scaled[counter] = frame[counter].to_numpy(dtype=float) * at_ref / predicted
    out = frame.copy()
    if scaled:              # one assignment of every scaled column, not a column at a time
        out[list(scaled)] = np.column_stack(list(scaled.values()))
    return out
