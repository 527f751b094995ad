"""The clustered regression models (Shang et al. 2015, seed 000): counters clustered, each cluster
predicting its members, a run's excess prediction error (models), and the detector run over a
night (runs: :class:`~pipelines.detectors.clusters.runs.ClusterModels`)."""
