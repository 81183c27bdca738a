"""Studies from outside the package: study files, plugins (entry points), `robustlab list`,
and their bad input (one line, exit 2, nothing written)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import robustlab
from robustlab.cli import main

SRC = str(Path(robustlab.__file__).resolve().parents[1])

# A small study that needs no data: the sample mean of n Gaussian draws, one point per seed.
STUDY_FILE = '''
import dataclasses
import os

import torch

from robustlab.config import Config, param
from robustlab.studies import Claim, Figure, Preset, Study
from robustlab.utils import make_generator


@dataclasses.dataclass(frozen=True)
class MeanConfig(Config):
    study = "{name}"
    n: int = param(50, "draws", ge=1)
    mu: float = param(0.5, "true mean")


def run_points(cfgs, device="cpu"):
    out = []
    for c in cfgs:
        x = torch.randn(c.n, generator=make_generator(c.seed, "draws"), dtype=torch.float64) + c.mu
        out.append([{{"mean": float(x.mean()), "pid": os.getpid()}}])
    return out


def claims(df, ctx):
    err = float((df["mean"] - df["mu"]).abs().max())
    return [Claim("close", "every sample mean lies within 1 of mu", err < 1.0, {{"max_err": err}},
                  kind="exploratory")]


def figures(df, ctx):
    return []


STUDY = Study(name="{name}", title="Gaussian mean", source="a test", summary="s",
              config=MeanConfig, presets={{"quick": Preset({{}}, ({{"n": [10, 40]}},), n_seeds=2)}},
              run_points=run_points, claims=claims, figures=figures)
'''


def study_file(tmp_path: Path, name: str = "gauss-mean", fname: str = "my_study.py") -> Path:
    path = tmp_path / fname
    path.write_text(STUDY_FILE.format(name=name))
    return path


def cli(*args, cwd=None, env_extra=None):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, *(env_extra or [])])}
    return subprocess.run([sys.executable, "-m", "robustlab.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=300, env=env)


def one_line_error(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("robustlab: error:"), r.stderr
    return lines[0]


def test_file_study_runs_in_worker_processes(tmp_path):
    """Workers import the study file again by path: its points run outside the driver."""
    path = study_file(tmp_path)
    run = robustlab.run(str(path), out=tmp_path / "r", workers=2, quiet=True)
    df = run.results
    assert len(df) == 4 and set(df["n"]) == {10, 40}
    assert os.getpid() not in set(df["pid"])  # every point ran in a worker
    m = run.manifest
    assert m["study"] == "gauss-mean"
    assert m["study_origin"] == {"kind": "file", "path": str(path.resolve())}
    assert m["request"]["study"] == str(path)
    assert run.claim_dicts[0]["passed"]


def test_file_study_cli_with_workers_and_list(tmp_path):
    # the study imports a helper module from its own folder, in the driver and in the workers
    (tmp_path / "mean_helpers.py").write_text("import os\n\ndef where():\n    return os.getpid()\n")
    path = tmp_path / "my_study.py"
    path.write_text(STUDY_FILE.format(name="gauss-mean").replace(
        '"pid": os.getpid()', '"pid": __import__("mean_helpers").where()'))
    assert "mean_helpers" in path.read_text()
    r = cli("run", path, "--workers", "2", "--quiet", "--out", tmp_path / "r")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 4
    # `robustlab report` finds the file again from the manifest
    assert cli("report", tmp_path / "r").returncode == 0
    r = cli("list", path)
    assert r.returncode == 0 and f"[file {path.resolve()}]" in r.stdout and "mu" in r.stdout


BAD_FILES = {
    "no-study": ("x = 1\n", "defines no STUDY"),
    "raises": ("import math\nmath.sqrt(-1)\n", "importing it raised ValueError: math domain error (line 2)"),
    "not-a-study": ("STUDY = 42\n", "STUDY must be a robustlab.studies.Study"),
    "syntax": ("def f(:\n", "importing it raised SyntaxError"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_study_file_one_line_exit_2_nothing_written(tmp_path, capsys, case):
    text, expected = BAD_FILES[case]
    path = tmp_path / f"{case.replace('-', '_')}.py"
    path.write_text(text)
    out = tmp_path / "out"
    code = main(["run", str(path), "--out", str(out)])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("robustlab: error:"), err
    assert str(path) in lines[0] and expected in lines[0], lines[0]
    assert not out.exists()


def test_bad_study_file_through_the_command_line(tmp_path):
    path = tmp_path / "empty.py"
    path.write_text("x = 1\n")
    line = one_line_error(cli("run", path, "--out", tmp_path / "out"))
    assert line == (f"robustlab: error: study={str(path)!r} is not allowed: it defines no STUDY "
                    "(a robustlab.studies.Study at module level)")
    assert not (tmp_path / "out").exists()


def main_error(capsys, *args) -> str:
    """The one error line of an in-process CLI call that must exit 2."""
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("robustlab: error:"), err
    return lines[0]


def test_study_file_clashing_with_builtin(tmp_path, capsys):
    path = study_file(tmp_path, name="smoke")
    out = tmp_path / "out"
    line = main_error(capsys, "run", path, "--out", out)
    assert "'smoke' clashes with a built-in study" in line
    assert not out.exists()


def test_missing_study_file(tmp_path, capsys):
    line = main_error(capsys, "run", tmp_path / "nope.py", "--out", tmp_path / "out")
    assert "no such file" in line and not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------------------
# plugins: an installed distribution with entry points in the group robustlab.studies

def fake_site(tmp_path: Path) -> Path:
    """A folder that importlib.metadata sees as holding an installed distribution
    ``fakeplug`` with three studies: a good one, one that raises on import, one that
    clashes with the built-in ``smoke``."""
    site = tmp_path / "site"
    (site / "fakeplug").mkdir(parents=True)
    (site / "fakeplug" / "__init__.py").write_text("")
    (site / "fakeplug" / "good.py").write_text(STUDY_FILE.format(name="plug-mean"))
    (site / "fakeplug" / "bad.py").write_text("raise RuntimeError('the plugin is broken')\n")
    (site / "fakeplug" / "clash.py").write_text(STUDY_FILE.format(name="smoke"))
    info = site / "fakeplug-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplug\nVersion: 1.2\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""\
        [robustlab.studies]
        plug-mean = fakeplug.good:STUDY
        plug-broken = fakeplug.bad:STUDY
        smoke = fakeplug.clash
        """))
    return site


def test_plugins_listed_broken_one_is_one_line(tmp_path):
    site = str(fake_site(tmp_path))
    r = cli("list", env_extra=[site])
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "plug-mean: Gaussian mean" in out and "[package fakeplug 1.2]" in out
    assert "smoke: Smoke" in out and "lazy-attack:" in out  # the built-ins are still there
    broken = [ln for ln in out.splitlines() if "BROKEN" in ln]
    assert len(broken) == 2
    assert any(ln.startswith("plug-broken: BROKEN") and "plug-broken = fakeplug.bad:STUDY" in ln
               and "RuntimeError: the plugin is broken" in ln for ln in broken), broken
    assert any(ln.startswith("smoke: BROKEN") and "clashes with a built-in" in ln for ln in broken), broken


def test_plugin_runs_and_broken_plugin_is_one_line_error(tmp_path):
    site = str(fake_site(tmp_path))
    r = cli("run", "plug-mean", "--quiet", "--out", tmp_path / "ok", env_extra=[site])
    assert r.returncode == 0, r.stderr
    m = json.loads((tmp_path / "ok" / "manifest.json").read_text())
    assert m["study_origin"]["kind"] == "package" and m["study_origin"]["package"] == "fakeplug"
    assert "study from</td><td>package fakeplug 1.2 (entry point plug-mean = fakeplug.good:STUDY)" in \
        (tmp_path / "ok" / "report.html").read_text()
    line = one_line_error(cli("run", "plug-broken", "--out", tmp_path / "bad", env_extra=[site]))
    assert "plug-broken = fakeplug.bad:STUDY" in line and "the plugin is broken" in line
    assert not (tmp_path / "bad").exists()
    # a plugin named like a built-in never replaces it
    r = cli("run", "smoke", "--quiet", "--out", tmp_path / "smoke", env_extra=[site])
    assert r.returncode == 0
    assert json.loads((tmp_path / "smoke" / "manifest.json").read_text())["study_origin"] == {"kind": "built-in"}
