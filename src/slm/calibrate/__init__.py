"""Calibration: the release gate between a recall's scores and a published probability
(docs/calibration.md). :mod:`~slm.calibrate.artefact` loads and applies an artefact (numpy
only); :mod:`~slm.calibrate.fit` fits one from labelled recalls and applies the gate
(scikit-learn, the ``calibrate`` extra); :mod:`~slm.calibrate.metrics` measures;
:mod:`~slm.calibrate.plots` draws (matplotlib)."""
