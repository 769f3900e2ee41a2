"""Shared fixtures and helpers for the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
ARTIFACT = SHARED / "pal-artifact"


@pytest.fixture(scope="session")
def artifact_dir() -> Path:
    """The PAL artifact data shipped in ../shared/data/pal-artifact."""
    if not ARTIFACT.is_dir():
        pytest.fail(f"shared data missing: {ARTIFACT}")
    return ARTIFACT
