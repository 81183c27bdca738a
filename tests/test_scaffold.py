"""`robustlab new NAME`: the scaffold runs through `robustlab run` and passes its own test."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import robustlab

SRC = str(Path(robustlab.__file__).resolve().parents[1])
ENV = {**os.environ, "PYTHONPATH": SRC}


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "robustlab.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=300, env=ENV)


def test_scaffold_passes_its_test_and_runs(tmp_path):
    r = cli("new", "my-probe", "--dir", tmp_path / "work")
    assert r.returncode == 0, r.stderr
    study, test = tmp_path / "work" / "my_probe.py", tmp_path / "work" / "test_my_probe.py"
    assert study.is_file() and test.is_file()
    # its own test, as generated, in a fresh pytest
    t = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test.name],
                       cwd=study.parent, capture_output=True, text=True, timeout=300, env=ENV)
    assert t.returncode == 0, t.stdout + t.stderr
    assert "4 passed" in t.stdout
    # and through the command line, like any study
    r = cli("run", study, "--out", tmp_path / "run", "--quiet")
    assert r.returncode == 0, r.stderr
    claims = json.loads((tmp_path / "run" / "claims.json").read_text())
    assert [c["verdict"] for c in claims] == ["reproduced"]
    assert claims[0]["interval"][0] > -0.05 and claims[0]["interval"][1] < 0.05
    assert (tmp_path / "run" / "figures" / "gap.png").is_file()


@pytest.mark.parametrize("name, expected", [
    ("smoke", "it is a built-in study"),
    ("Bad Name", "lower-case letters"),
    ("1abc", "lower-case letters"),
])
def test_bad_names_one_line_exit_2_nothing_written(tmp_path, name, expected):
    r = cli("new", name, "--dir", tmp_path / "w")
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("robustlab: error:") and expected in lines[0], r.stderr
    assert not (tmp_path / "w").exists()


def test_existing_files_are_never_overwritten(tmp_path):
    (tmp_path / "test_mine.py").write_text("# mine\n")
    r = cli("new", "mine", "--dir", tmp_path)
    assert r.returncode == 2 and "exists" in r.stderr
    assert not (tmp_path / "mine.py").exists() and (tmp_path / "test_mine.py").read_text() == "# mine\n"
