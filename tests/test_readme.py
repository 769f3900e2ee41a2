"""The examples of the README and docs/simulator.md run as written."""

from __future__ import annotations

import json
import re
from pathlib import Path

from palopt.io import instance_from_dict

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def blocks(language: str, text: str = README) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def test_python_example_runs(capsys):
    (code,) = blocks("python")
    exec(compile(code, "README.md", "exec"), {})
    assert "train-1" in capsys.readouterr().out


def test_json_example_is_a_valid_instance():
    (text,) = blocks("json")
    inst = instance_from_dict(json.loads(text))
    assert inst.queue[0].current_gpus == (0, 1)


def test_first_lines_are_the_two_commands():
    first = blocks("bash")[0].strip().splitlines()
    assert first == [
        "pip install -e '.[all]' && palopt solve instances/longhorn-32gpu.json --format table",
        "python -m pytest -q",
    ]


def test_simulator_step_loop_example_runs(artifact_dir, monkeypatch):
    # It named a topology, profile and trace it never made (NameError).
    (code,) = blocks("python", (ROOT / "docs" / "simulator.md").read_text(encoding="utf-8"))
    assert '"../shared/data/pal-artifact"' in code
    code = code.replace('"../shared/data/pal-artifact"', repr(str(artifact_dir)))
    namespace: dict = {}
    exec(compile(code, "docs/simulator.md", "exec"), namespace)
    assert namespace["sim"].finished and len(namespace["result"].rounds) > 0
