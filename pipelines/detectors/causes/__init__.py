"""The cause classifiers (Nguyen 2017 ch. 8, seed 004): features from the control charts' violation
ratios (features), the learners and their leave-one-out (classifiers), training and the models'
versions (training, model_versions), prediction (prediction), and the classifier as a detector
over a night (runs: :class:`~pipelines.detectors.causes.runs.CauseClassifier`)."""
