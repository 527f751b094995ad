"""The control charts (Nguyen 2017 ch. 3, 6-7, seed 004): limits and violation ratios
(control_charts), a baseline's minor modes (modes), the calibration on the history's normal runs
(calibration), the records at rest (files), and the detector run over a night (runs:
:class:`~pipelines.detectors.charts.runs.ControlCharts`, which also judges the run against itself)."""
