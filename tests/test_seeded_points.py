"""Seeded points: a study that draws from torch's, numpy's and Python's *global* generators
reruns byte-identically (across worker counts), and `rerun` exits 1 naming the fields when
its results differ from the record."""

import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

import robustlab
from robustlab.sweep.runner import seeded_globals

SRC = str(Path(robustlab.__file__).resolve().parents[1])

# A user study that never touches a generator: nn.Linear's init, torch.randn, np.random and
# random all draw from the process's global state. SHIFT lets a test make a rerun differ.
GLOBAL_STUDY = '''
import dataclasses
import os
import random

import numpy as np
import torch
from torch import nn

from robustlab.config import Config, param
from robustlab.studies import Claim, Preset, Study


@dataclasses.dataclass(frozen=True)
class GlobalConfig(Config):
    study = "globals"
    width: int = param(4, "width", ge=1)


def run_points(cfgs, device="cpu"):
    out = []
    for c in cfgs:
        layer = nn.Linear(3, c.width)
        x = torch.randn(5, 3)
        out.append([{"torch": float(layer(x).sum()), "numpy": float(np.random.rand()),
                     "random": random.random(), "shift": float(os.environ.get("SHIFT", "0"))}])
    return out


STUDY = Study(name="globals", title="globals", source="a test", summary="s", config=GlobalConfig,
              presets={"quick": Preset({}, ({"width": [2, 3, 4]},), n_seeds=3)},
              run_points=run_points,
              claims=lambda df, ctx: [Claim("runs", "it ran", len(df) == 9, {}, kind="self-check")],
              figures=lambda df, ctx: [])
'''


def cli(*args, cwd=None, env=None):
    env = {**os.environ, "PYTHONPATH": SRC, **(env or {})}
    return subprocess.run([sys.executable, "-m", "robustlab.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=300, env=env)


def test_seeded_globals_seeds_and_restores():
    torch.manual_seed(123)
    np.random.seed(123)
    random.seed(123)
    before = (torch.get_rng_state().clone(), np.random.get_state()[1].copy(), random.getstate())
    with seeded_globals(7):
        a = (torch.rand(3), np.random.rand(3), random.random())
    with seeded_globals(7):
        b = (torch.rand(3), np.random.rand(3), random.random())
    with seeded_globals(8):
        c = torch.rand(3)
    assert torch.equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and a[2] == b[2]
    assert not torch.equal(a[0], c)  # another seed, another stream
    assert torch.equal(torch.get_rng_state(), before[0])  # the caller's state is back
    assert np.array_equal(np.random.get_state()[1], before[1]) and random.getstate() == before[2]
    # not the stream of make_generator(seed): a global draw must not equal an explicit one
    from robustlab.utils import make_generator
    with seeded_globals(7):
        assert not torch.equal(torch.rand(3), torch.rand(3, generator=make_generator(7)))


def test_global_generator_study_reruns_byte_identically_across_workers(tmp_path):
    study = tmp_path / "globals_study.py"
    study.write_text(GLOBAL_STUDY)
    torch.rand(7)  # the driver's own state must not matter
    first = robustlab.run(str(study), out=tmp_path / "a", quiet=True)
    df = first.results
    assert df["torch"].nunique() == 9 and df["numpy"].nunique() == 3 and df["random"].nunique() == 3
    for workers in ("1", "2"):
        r = cli("rerun", tmp_path / "a", "--out", tmp_path / f"re{workers}", "--workers", workers, "--quiet")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "byte-identical to the original" in r.stdout
        assert (tmp_path / "a" / "results.jsonl").read_bytes() == \
            (tmp_path / f"re{workers}" / "results.jsonl").read_bytes()


def test_rerun_that_differs_exits_1_and_names_the_fields(tmp_path):
    study = tmp_path / "globals_study.py"
    study.write_text(GLOBAL_STUDY)
    assert cli("run", study, "--out", tmp_path / "a", "--quiet", "--workers", "1").returncode == 0
    r = cli("rerun", tmp_path / "a", "--out", tmp_path / "b", "--quiet", env={"SHIFT": "1"})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "DIFFERS from the original" in r.stdout
    assert "differs: shift: 9 of 9 rows, first row 0: 0.0 vs 1.0" in r.stdout
    assert "torch" not in r.stderr and "shift" in r.stderr.splitlines()[-1]
