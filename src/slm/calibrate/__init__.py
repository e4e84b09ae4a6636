"""Calibration: the release gate between a recall's scores and a published probability
(docs/calibration.md). :mod:`~slm.calibrate.artefact` loads and applies an artefact (numpy
only). Fitting one (labelled recalls, the fit and release gate, metrics, plots) lives
beside the library in :mod:`slm_fit`, which ``import slm`` never loads."""
