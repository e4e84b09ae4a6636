"""This release of slm: what a calibration artefact is tied to (docs/calibration.md)."""

from __future__ import annotations

VERSION = "0.5.0"
