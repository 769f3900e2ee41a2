"""What a regular (not editable) install of palopt holds: every package, and the workload models
of ``models/`` as ``palopt.models``."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from palopt.workloads import ARTIFACT_WORKLOADS, load_workloads

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
CONFIG = PYPROJECT["tool"]["setuptools"]


def test_the_version_is_the_one_installed() -> None:
    """palopt.__version__ (shown by --version and in simulation contexts) is pyproject's."""
    import palopt

    assert palopt.__version__ == PYPROJECT["project"]["version"]


def test_every_package_is_listed() -> None:
    # The list replaces setuptools' package discovery; a subpackage missing from it would be
    # missing from every regular install.
    found = {
        ".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "palopt").rglob("__init__.py")
    }
    assert set(CONFIG["packages"]) == found | {"palopt.models"}
    assert CONFIG["package-dir"] == {"palopt.models": "models"}


def test_every_workload_file_is_package_data() -> None:
    patterns = CONFIG["package-data"]["palopt.models"]
    files = {p.name for p in (ROOT / "models").iterdir() if p.suffix not in (".md", ".py", "")}
    assert files, "no workload files in models/"
    assert all(any(Path(f).match(p) for p in patterns) for f in files)


def test_the_artifact_models_come_from_the_package() -> None:
    # Not a path relative to the checkout, which an installed package does not have.
    import palopt.models

    assert ARTIFACT_WORKLOADS.parent == Path(palopt.models.__file__).resolve().parent
    assert ARTIFACT_WORKLOADS.read_bytes() == (ROOT / "models" / "pal-artifact.json").read_bytes()
    assert "resnet50" in load_workloads().models


@pytest.mark.slow
def test_the_wheel_holds_the_packages_and_the_models(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp_path), ROOT],
        check=True,
    )
    (wheel,) = tmp_path.glob("palopt-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "palopt/models/pal-artifact.json" in names
    assert "palopt/models/__init__.py" in names
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "palopt").rglob("*.py")}
    assert modules <= names
