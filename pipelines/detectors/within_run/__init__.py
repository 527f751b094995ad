"""The run against itself: a window of the run against the rest of it, calibrated on the normal
runs' same contrasts (windows; docs/methods/within-run.md); computed by the control charts' stage."""
