"""Fitting, beside the library: what builds a calibration artefact (``slm calibrate``:
labelled recalls, the fit and its release gate, the metrics and plots), imported only when
a fitting command runs. The library keeps what applies an artefact
(:mod:`slm.calibrate.artefact`); ``import slm`` loads nothing from here. The reader's
fitting (:mod:`slm_fit.reader`, with torch) lives here too: the library only runs the
exported file (:mod:`slm.recall.reader`)."""
