"""The examples of the README and docs/simulator.md run as written."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from palopt.cli import main
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


def test_cluster_files_example_runs(artifact_dir, tmp_path, monkeypatch, capsys):
    # The chain from a cluster's files to a placement, run command by command from the project
    # root, with runs/ in a temporary folder and the queue the text describes.
    (code,) = [b for b in blocks("bash") if "palopt instance build" in b]
    code = code.replace("../shared/data/pal-artifact", str(artifact_dir))
    code = code.replace("runs/", f"{tmp_path}/")
    queue = [
        {"id": "train-1", "num_gpus": 8, "class": "resnet"},
        {"id": "train-2", "num_gpus": 2, "class": "resnet"},
        {"id": "train-3", "num_gpus": 1, "class": "resnet"},
    ]
    (tmp_path / "queue.json").write_text(json.dumps(queue))
    monkeypatch.chdir(ROOT)
    commands = [shlex.split(line) for line in code.replace("\\\n", " ").splitlines()]
    assert commands[0] == ["mkdir", "-p", "runs"]
    for argv in commands[1:]:
        assert argv[0] == "palopt"
        assert main(argv[1:]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    # every job placed; the 8-GPU job on all GPUs of one server
    assert re.search(r"^train-1\tstart\t(\S+)\t\1=0,1,2,3,4,5,6,7$", out, flags=re.M)
    assert re.search(r"^train-3\tstart\t", out, flags=re.M)
