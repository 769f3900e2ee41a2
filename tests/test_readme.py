"""The README's examples run as written."""

from __future__ import annotations

import json
import re
from pathlib import Path

from palopt.io import instance_from_dict

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


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
