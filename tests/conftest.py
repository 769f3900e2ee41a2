"""Shared fixtures and helpers for the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from palopt.io import data_dir

ROOT = Path(__file__).resolve().parent.parent
ARTIFACT = data_dir() / "pal-artifact"


@pytest.fixture(scope="session")
def artifact_dir() -> Path:
    """The PAL artifact data: ``$PALOPT_DATA/pal-artifact`` or ../shared/data/pal-artifact."""
    if not ARTIFACT.is_dir():
        pytest.fail(f"shared data missing: {ARTIFACT}")
    return ARTIFACT
