"""The association rules (Foo et al. 2015, seed 003): one rule model per prior run (mining),
bagged and stacked by environment similarity (ensemble), a run's verdict against the history's
normal runs (verdict), a target analysed against its baseline (detection), and the detector run
over a night (runs: :class:`~pipelines.detectors.rules.runs.AssociationRules`)."""
