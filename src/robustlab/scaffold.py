"""`robustlab new NAME`: a study scaffold that runs, and passes its own test, as written.

It writes two files into a folder (default: the current one):

* ``NAME.py`` (``-`` becomes ``_``) — a complete study: a config with two fields, an
  ensemble ``run_points`` (seeds in one batched pass), one claim decided with
  :mod:`robustlab.stats`, one figure, and ``STUDY``. Run it with ``robustlab run NAME.py``.
* ``test_NAME.py`` — pytest tests: the points are reproducible, the claim is reproduced on
  real results and contradicted on tampered ones, and an end-to-end ``robustlab.run``.

The example it holds is small but real: on a linear score ``w·x``, a random perturbation
of size ε moves the score by ``ε‖w‖·E|u₁|`` on average (u uniform on the sphere), about
``√(πd/2)`` times less than the worst-case perturbation (``ε‖w‖``). Replace it with yours.
"""

from __future__ import annotations

import re
import string
from pathlib import Path

from .config import UserError

__all__ = ["write_scaffold", "NAME_RE"]

NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")

STUDY_TEMPLATE = '''"""${name}: how far a random perturbation moves a linear score, against the worst case.

For a linear score f(x) = w·x and a perturbation δ of size ε, the worst case moves the
score by ε‖w‖ (δ along w), while a uniformly random direction u on the unit sphere moves it
by ε‖w‖·|u₁| in law, whose mean is

    E|u₁| = Γ(d/2) / (√π · Γ((d+1)/2))  ≈  √(2/(πd))   (large d).

So random noise is about √(πd/2) times weaker than an adversary in dimension d — the
simplest form of the gap between random and adversarial robustness. The study measures
mean |w·u| / ‖w‖ over ``n_dirs`` random directions, for several seeds (one batched
ensemble) and dimensions, and checks it against the closed form.

Its control is the same rule on other draws: Gaussian directions not normalised to the sphere,
for which mean |w·g| / ‖w‖ is √(2/π) whatever d, so the sphere's closed form must fail there.

Written by `robustlab new ${name}`: replace the config, run_points, claims and figures with
your own; keep the shape (see docs/writing-a-study.md). Run it with
``robustlab run ${module}.py`` and test it with ``pytest test_${module}.py``.
"""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import torch

from robustlab import claims as cl
from robustlab import stats
from robustlab.config import Config, param
from robustlab.report.plots import mean_band, plt, save
from robustlab.studies import Claim, Context, Figure, Preset, Study
from robustlab.utils import make_generator

SOURCE = "closed form: E|u1| for u uniform on the unit sphere of R^d"


@dataclasses.dataclass(frozen=True)
class ${cls}Config(Config):
    study = "${name}"
    dim: int = param(16, "input dimension d", ge=2)
    n_dirs: int = param(4000, "random directions drawn per seed", ge=2)


def expected_abs_coordinate(d: int) -> float:
    """E|u1| for u uniform on the unit sphere of R^d (float64, via log-gamma)."""
    return math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / math.sqrt(math.pi)


def run_points(cfgs: list[${cls}Config], device: str = "cpu") -> list:
    """One group: the same point for len(cfgs) seeds, drawn as one (E, n, d) batch."""
    c0 = cfgs[0]
    d, n = c0.dim, c0.n_dirs
    gens = [make_generator(c.seed, "${name}") for c in cfgs]
    w = torch.stack([torch.randn(d, generator=g, dtype=torch.float64) for g in gens])  # (E, d)
    u = torch.stack([torch.randn(n, d, generator=g, dtype=torch.float64) for g in gens])  # (E, n, d)
    g = u.clone()  # (E, n, d): Gaussian directions, the control's draws (not on the sphere)
    u = u / u.norm(dim=-1, keepdim=True)  # uniform on the unit sphere
    moved = torch.einsum("end,ed->en", u, w).abs()  # (E, n): |w·u|
    ratio = moved.mean(1) / w.norm(dim=1)  # (E,): mean |w·u| / ‖w‖ (the worst case is 1)
    gauss = torch.einsum("end,ed->en", g, w).abs().mean(1) / w.norm(dim=1)  # (E,): √(2/π) in law
    predicted = expected_abs_coordinate(d)
    return [[{"ratio": float(r), "ratio_gauss": float(q), "predicted": predicted, "gap": 1.0 / float(r)}]
            for r, q in zip(ratio, gauss)]


# A Monte Carlo check of a closed form: the relative error must lie inside ±5 %. One seed's
# relative error has sd ≈ 0.76/√n_dirs (|u1|√d is close to |N(0,1)|), ≈ 1.2 % at 4000
# directions, so 4 seeds give a 95 % interval of about ±2 %: enough to decide.
TOLERANCE = 0.05


SPEC = cl.ClaimSpec("random-vs-worst-case", control=cl.ControlSpec(
    "gaussian-directions", "unnormalised Gaussian directions move the score by √(2/π)·‖w‖ on average at "
                           "every d, not by E|u1|·‖w‖: the closed form must fail there"))


def within_closed_form(df: pd.DataFrame) -> stats.Verdict:
    """The claim's rule: at every d, the mean relative error of ``ratio`` against the closed
    form lies inside ±5 % (one value per seed, t interval)."""
    parts = []
    for _, sub in df.groupby("dim"):
        rel = sub["ratio"] / sub["predicted"] - 1.0  # one value per seed
        parts.append(stats.decide(stats.mean_estimate(rel), threshold=(-TOLERANCE, TOLERANCE), side="inside"))
    return stats.combine(parts)


def claims(df: pd.DataFrame, ctx: Context | None) -> list[Claim]:
    # the control: the same rule on the Gaussian draws, put in the column the rule reads
    verdict, control = cl.judge(SPEC, within_closed_form, df, df.assign(ratio=df["ratio_gauss"]))
    per_dim = {int(dim): float((sub["ratio"] / sub["predicted"] - 1.0).mean()) for dim, sub in df.groupby("dim")}
    return [Claim(
        SPEC.id,
        "a random direction moves a linear score by E|u1| = Γ(d/2)/(√π Γ((d+1)/2)) times the "
        "worst case, within 5 % at every d",
        verdict, {"mean_relative_error": per_dim, "tolerance": TOLERANCE}, SOURCE, control=control)]


def figures(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    fig, ax = plt.subplots(figsize=(5, 3.2))
    mean_band(ax, df, "dim", "gap", label="measured ‖w‖ / mean |w·u|")
    dims = sorted(df["dim"].unique())
    ax.plot(dims, [1 / expected_abs_coordinate(int(d)) for d in dims], "k--", label="closed form")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("dimension d")
    ax.set_ylabel("worst case / random")
    ax.legend()
    save(fig, ctx.figdir / "gap.png")
    return [Figure("figures/gap.png", "Random against worst-case perturbations",
                   "How many times more an adversarial direction moves the score than a random "
                   "one; it grows like √(πd/2). Mean over seeds, ±1 std band.")]


STUDY = Study(
    name="${name}",
    title="${name}: random against worst-case perturbations of a linear score",
    source=SOURCE,
    summary="Measures mean |w·u|/‖w‖ over random unit directions u and checks the closed form.",
    config=${cls}Config,
    presets={
        "quick": Preset({}, ({"dim": [4, 16, 64, 256]},), n_seeds=4, description="4 dimensions, 4 seeds"),
        "paper": Preset({"n_dirs": 20000}, ({"dim": [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]},),
                        n_seeds=8, description="10 dimensions, 8 seeds"),
    },
    run_points=run_points,
    claims=claims,
    figures=figures,
    ensemble=True,
    claim_specs=(SPEC,),
    populations={"gaussian-directions": "the same seeds' Gaussian directions before normalisation"},
)
'''

TEST_TEMPLATE = '''"""Tests of the ${name} study (written by `robustlab new ${name}`). Run: pytest ${test}"""

from pathlib import Path

import pytest

import robustlab
from robustlab.studies import get_study

HERE = Path(__file__).resolve().parent
STUDY = get_study(str(HERE / "${module}.py"))  # as `robustlab run ${module}.py` loads it


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return robustlab.run(str(HERE / "${module}.py"), out=tmp_path_factory.mktemp("runs") / "quick",
                         quiet=True)


def test_points_are_reproducible_and_seeds_differ():
    cfgs = [STUDY.config(dim=16, n_dirs=500, seed=s) for s in (0, 1)]
    a, b = STUDY.run_points(cfgs, "cpu"), STUDY.run_points(cfgs, "cpu")
    assert a == b
    assert a[0] != a[1]


def test_the_claim_is_reproduced_on_the_quick_run(run):
    assert list(run.claims["verdict"]) == ["reproduced"], run.claims.to_string()
    assert run.report_path.is_file() and len(run.figures) == 1
    assert set(run.results["dim"]) == {4, 16, 64, 256}


def test_the_claim_can_fail(run):
    df = run.results.copy()
    df["ratio"] *= 1.2  # 20 % off the closed form: far outside the 5 % band
    (claim,) = STUDY.claims(df, None)
    assert claim.verdict.verdict == "contradicted"


def test_the_control_fails_on_real_runs_and_can_pass_when_the_effect_is_planted_there(run):
    (claim,) = STUDY.claims(run.results, None)
    assert claim.control.verdict.verdict == "contradicted" and claim.control.working
    # the sphere's law planted in the control's draws (1 % off, well inside the 5 % band)
    df = run.results.assign(ratio_gauss=run.results["ratio"] * 1.01)
    (claim,) = STUDY.claims(df, None)
    assert claim.control.verdict.verdict == "reproduced" and claim.verdict.verdict == "inconclusive"
'''


PACKAGE_PYPROJECT = """[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "robustlab-${name}"
version = "0.1.0"
description = "A robustlab study: ${name}."
requires-python = ">=3.10"
dependencies = ["robustlab"]

[project.optional-dependencies]
test = ["pytest>=7"]

# What makes `robustlab list` and `robustlab run ${name}` find the study once installed.
[project.entry-points."robustlab.studies"]
${name} = "${package}:STUDY"

[tool.setuptools]
packages = ["${package}"]
"""

PACKAGE_INIT = '''"""The robustlab study ${name} (entry point ``${package}:STUDY``)."""

from .study import STUDY

__all__ = ["STUDY"]
'''

PACKAGE_README = """# robustlab-${name}

A robustlab study, packaged as a plugin (written by `robustlab new ${name} --package`).

```bash
pip install -e '.[test]'        # registers the entry point robustlab.studies: ${name}
robustlab list                  # ... ${name}: ...  [package robustlab-${name} 0.1.0]
robustlab run ${name} --workers 2
pytest tests                    # the study's own tests
```

Edit `${package}/study.py`: the config, `run_points`, the claims and the figures.
"""

# The scaffold's tests, finding the study through its entry point (so: once installed).
PACKAGE_TEST = TEST_TEMPLATE.replace(
    'HERE = Path(__file__).resolve().parent\nSTUDY = get_study(str(HERE / "${module}.py"))'
    '  # as `robustlab run ${module}.py` loads it',
    'STUDY = get_study("${name}")  # through the entry point, as `robustlab run ${name}` finds it',
).replace('robustlab.run(str(HERE / "${module}.py"), out=', 'robustlab.run("${name}", out=',
          ).replace("from pathlib import Path\n\n", "")


def _names(name: str) -> dict[str, str]:
    """Checked ``name`` and the identifiers derived from it (``UserError`` when refused)."""
    from .studies import REGISTRY

    if not NAME_RE.match(name):
        raise UserError(f"name={name!r} is not allowed: lower-case letters, digits, '-' and '_', "
                        "starting with a letter")
    if name in REGISTRY:
        raise UserError(f"name={name!r} is not allowed: it is a built-in study; choose another name")
    module = name.replace("-", "_")
    return {"name": name, "module": module, "cls": "".join(p.capitalize() for p in module.split("_")),
            "package": f"robustlab_{module}"}


def _write_all(name: str, files: dict[Path, str]) -> list[Path]:
    """Write every file, or none: an existing one is refused before anything is written."""
    from . import records

    for path in files:
        if path.exists():
            raise UserError(f"name={name!r} is not allowed: {path} exists (nothing was written)")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        records.atomic_write_text(path, text)
    return list(files)


def write_scaffold(name: str, folder: str | Path = ".") -> list[Path]:
    """Write ``NAME.py`` and ``test_NAME.py`` into ``folder``; returns their paths."""
    v = _names(name)
    folder = Path(folder)
    study_path, test_path = folder / f"{v['module']}.py", folder / f"test_{v['module']}.py"
    v["test"] = test_path.name
    return _write_all(name, {study_path: string.Template(STUDY_TEMPLATE).substitute(v),
                             test_path: string.Template(TEST_TEMPLATE).substitute(v)})


def write_package(name: str, folder: str | Path = ".") -> list[Path]:
    """Write a plugin package ``folder/NAME/``: ``pyproject.toml`` declaring the entry point
    ``robustlab.studies: NAME = robustlab_MODULE:STUDY`` (and a ``test`` extra), the package
    ``robustlab_MODULE/`` (``study.py``, the scaffold's study, and ``__init__.py``), its tests in
    ``tests/`` (they find the study by name, so they need the package installed) and a README.
    ``pip install -e folder/NAME`` makes ``robustlab run NAME`` find it."""
    v = _names(name)
    root = Path(folder) / name
    if root.exists() and any(root.iterdir()):
        raise UserError(f"name={name!r} is not allowed: {root} exists and is not empty (nothing was written)")
    test_path = root / "tests" / f"test_{v['module']}.py"
    v["test"] = f"tests/{test_path.name}"
    pkg = root / v["package"]
    texts = {root / "pyproject.toml": PACKAGE_PYPROJECT, root / "README.md": PACKAGE_README,
             pkg / "__init__.py": PACKAGE_INIT, pkg / "study.py": STUDY_TEMPLATE, test_path: PACKAGE_TEST}
    return _write_all(name, {p: string.Template(t).substitute(v) for p, t in texts.items()})


def pytest_hint() -> str | None:
    """A line on how to get pytest where it is missing (``pip install -e .`` does not bring
    it), or None where it is installed."""
    import importlib.util

    if importlib.util.find_spec("pytest") is not None:
        return None
    return ("note: pytest is not installed here; to run the study's tests: "
            "pip install 'robustlab[test]' (or pip install pytest)")
