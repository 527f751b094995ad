"""Changes per commit in a benchmark's history (data contract §3): a series and its method
(series), PELT (change_points, ruptures), the level-shift test (level_shifts), Skia's clusters
(skia) and Mono's commit effects (mono), and the change records (changes); docs/methods/commit-series.md."""
