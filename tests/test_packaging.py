"""Packaging: declared dependencies, `robustlab new --package` (a plugin package whose entry
point robustlab finds once installed), the pytest hint, and importing robustlab where fcntl
does not exist (Windows)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import robustlab

ROOT = Path(robustlab.__file__).resolve().parents[2]
SRC = str(ROOT / "src")


def cli(*args, cwd=None, path=()):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, *map(str, path)])}
    return subprocess.run([sys.executable, "-m", "robustlab.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=300, env=env)


def test_dependencies_are_declared():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = " ".join(project["dependencies"])
    assert "scipy" in deps  # robustlab.stats imports it
    assert "tomli>=1.1; python_version < '3.11'" in project["dependencies"]  # run --config on 3.10
    extras = project["optional-dependencies"]
    assert any(d.startswith("pytest") for d in extras["test"])
    assert any(d.startswith("pyarrow") for d in extras["parquet"])
    assert {"nbclient", "nbformat", "ipykernel"} <= {d.split(">")[0] for d in extras["dev"]}


def _without_fcntl(tmp_path, code: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter where ``import fcntl`` fails, as on Windows."""
    (tmp_path / "fcntl.py").write_text("raise ImportError('No module named fcntl (simulated)')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), SRC])}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_import_without_fcntl(tmp_path):
    r = _without_fcntl(tmp_path, "import fcntl")
    assert r.returncode == 1 and "simulated" in r.stderr  # the simulation works
    r = _without_fcntl(tmp_path, "import robustlab; print(robustlab.run.__name__, robustlab.evaluate.__name__)")
    assert r.returncode == 0 and r.stdout.split() == ["run", "evaluate"], r.stderr


def test_plan_a_run_without_fcntl(tmp_path):
    """Deeper: the CLI and a study's plan (the run lock is needed only to write a run)."""
    r = _without_fcntl(tmp_path, "import robustlab.cli, robustlab.studies.base\n"
                                 "from robustlab.api import prepare_run\nprepare_run('smoke')\nprint('ok')")
    if r.returncode != 0 and "fcntl" in r.stderr:
        pytest.xfail("robustlab.sweep.lock imports fcntl at module level: the portable lock is "
                     "issue 36's change; " + r.stderr.strip().splitlines()[-1])
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_new_prints_the_pytest_hint_only_without_pytest(tmp_path, monkeypatch):
    import importlib.util

    from robustlab import scaffold

    assert scaffold.pytest_hint() is None  # pytest runs this test
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "pytest" else real(n, *a))
    assert "pip install 'robustlab[test]'" in scaffold.pytest_hint()


def test_new_package_installs_as_a_plugin_and_passes_its_tests(tmp_path):
    r = cli("new", "probe-pkg", "--package", "--dir", tmp_path)
    assert r.returncode == 0, r.stderr
    root = tmp_path / "probe-pkg"
    assert {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} == {
        "pyproject.toml", "README.md", "robustlab_probe_pkg/__init__.py", "robustlab_probe_pkg/study.py",
        "tests/test_probe_pkg.py"}
    assert '[project.entry-points."robustlab.studies"]\nprobe-pkg = "robustlab_probe_pkg:STUDY"' in \
        (root / "pyproject.toml").read_text()
    site = tmp_path / "site"  # installed as pip installs it, into a folder of its own
    import importlib.util

    # offline where setuptools is here; else pip builds in an isolated environment (from PyPI)
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", *isolation,
                          "--target", str(site), str(root)], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr
    r = cli("list", path=[site])
    assert any(line.startswith("probe-pkg: ") for line in r.stdout.splitlines()), r.stdout + r.stderr
    r = cli("list", "probe-pkg", path=[site])
    assert "[package robustlab-probe-pkg 0.1.0]" in r.stdout, r.stdout + r.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, str(site)])}
    t = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=root,
                       capture_output=True, text=True, timeout=300, env=env)
    assert t.returncode == 0 and "4 passed" in t.stdout, t.stdout + t.stderr
    # a second time into the same folder: refused, nothing overwritten
    again = cli("new", "probe-pkg", "--package", "--dir", tmp_path)
    assert again.returncode == 2 and "exists" in again.stderr and len(again.stderr.splitlines()) == 1


# Windows, simulated on this machine for every interpreter the run starts (its spawned workers
# too, through sitecustomize): no fcntl, no os.fork (so no fork server), no os.pidfd_open, and an
# os.kill that refuses signal 0 (on Windows it is CTRL_C_EVENT: it would interrupt, not probe).
# msvcrt, Windows' byte-range lock that sweep.lock takes there, is stood in by a no-op.
_WINDOWS_LIKE = '''
import os, sys
sys.modules["fcntl"] = None  # import fcntl -> ImportError
for _name in ("fork", "forkpty", "pidfd_open"):
    if hasattr(os, _name):
        delattr(os, _name)
_kill = os.kill
def _no_probe(pid, sig):
    if sig == 0:  # the process it "probes" would get Ctrl-C: this one dies instead, loudly
        sys.stderr.write("os.kill(pid, 0) called: CTRL_C_EVENT on Windows\\n")
        os._exit(99)
    return _kill(pid, sig)
os.kill = _no_probe
import subprocess, types  # subprocess tells Windows by msvcrt: imported first, it stays POSIX
sys.modules["msvcrt"] = _msvcrt = types.ModuleType("msvcrt")  # a no-op stand-in for the lock
_msvcrt.LK_UNLCK, _msvcrt.LK_NBLCK, _msvcrt.locking = 0, 2, lambda fd, mode, nbytes: None
'''


def _windows_like(tmp_path, args: list[str], **kw) -> subprocess.CompletedProcess:
    site = tmp_path / "windows-like"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_WINDOWS_LIKE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), SRC])}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=tmp_path, **kw)


def test_every_module_imports_and_a_run_with_workers_completes_without_posix_calls(tmp_path):
    """No fcntl, os.fork, os.pidfd_open (and no os.kill(pid, 0)): every module imports, and
    `robustlab run smoke --workers 2` runs its pool (spawn), the watchdog and the lock."""
    r = _windows_like(tmp_path, ["-c", "import fcntl"], timeout=60)
    assert r.returncode == 1 and "import of fcntl halted" in r.stderr  # the simulation is in force
    every = ("import importlib, os, pkgutil, robustlab\n"
             "assert not hasattr(os, 'fork') and not hasattr(os, 'pidfd_open')\n"
             "names = [m.name for m in pkgutil.walk_packages(robustlab.__path__, 'robustlab.')]\n"
             "for n in names:\n    importlib.import_module(n)\n"
             "print(len(names))")
    r = _windows_like(tmp_path, ["-c", every], timeout=300)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[-1]) > 50
    out = tmp_path / "run"
    r = _windows_like(tmp_path, ["-m", "robustlab.cli", "run", "smoke", "--grid", "lr=0.1,0.5", "--seeds", "2",
                                 "--workers", "2", "--quiet", "--out", str(out)], timeout=600)
    assert r.returncode == 0 and "os.kill(pid, 0)" not in r.stderr, r.stdout + r.stderr
    man = robustlab.records.read_json(out / "manifest.json")
    assert man["workers"] == 2 and man["sweep"]["groups"] == 2 and man["sweep"]["failed_now"] == 0
    assert len((out / "results.jsonl").read_text().splitlines()) > 0


# ----------------------------------------------------------------------------------------
# publishing: metadata, README links, the wheel and the tree it leaves

def _project() -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_metadata_license_classifiers_urls():
    project = _project()["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]  # SPDX (PEP 639)
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "robustlab's authors" in text
    assert "Typing :: Typed" in project["classifiers"]
    assert not any(c.startswith("License ::") for c in project["classifiers"])  # the SPDX string says it
    urls = project["urls"]
    assert {"Homepage", "Repository", "Documentation", "Issues", "Changelog"} <= set(urls)
    assert all(u.startswith(urls["Repository"]) for u in urls.values())
    assert (ROOT / "src" / "robustlab" / "py.typed").is_file()


def test_readme_links_and_figure_are_absolute_and_point_at_files_that_exist():
    """PyPI shows the README without the repository beside it: every link and image is an
    absolute address under the Repository URL of pyproject.toml, naming a file of this tree."""
    import re

    repo = _project()["project"]["urls"]["Repository"]
    raw = repo.replace("https://github.com/", "https://raw.githubusercontent.com/") + "/main/"
    blob = repo + "/blob/main/"
    targets = re.findall(r"\]\(([^)\s]+)\)", (ROOT / "README.md").read_text())
    assert targets
    for t in targets:
        assert t.startswith(("https://", "http://", "#")), f"relative link in README.md: {t}"
        for base in (raw, blob):
            if t.startswith(base):
                assert (ROOT / t[len(base):]).is_file(), t
    assert any(t.startswith(raw) and t.endswith(".png") for t in targets)  # the figure


# import name -> distribution, where they differ
_DIST = {"sklearn": "scikit-learn", "yaml": "pyyaml", "PIL": "pillow"}


def _third_party_imports() -> set[str]:
    import ast

    stdlib = set(sys.stdlib_module_names)
    found = set()
    for path in (ROOT / "src" / "robustlab").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            for n in names:
                top = n.split(".")[0]
                if top not in stdlib and top not in ("robustlab", "IPython"):  # IPython: asked only inside a kernel
                    found.add(_DIST.get(top, top))
    return found


def test_every_imported_package_is_declared():
    import re

    project = _project()["project"]
    declared = {re.split(r"[<>=;\[ ]", d)[0].lower() for d in project["dependencies"]}
    declared |= {re.split(r"[<>=;\[ ]", d)[0].lower() for ds in project["optional-dependencies"].values() for d in ds}
    missing = {m for m in _third_party_imports() if m.lower() not in declared}
    assert not missing, f"imported by robustlab but not declared in pyproject.toml: {sorted(missing)}"
    assert "cycler" in {re.split(r"[<>=;\[ ]", d)[0] for d in project["dependencies"]}


def test_library_code_logs_instead_of_printing():
    """print() only where output is the point: the CLI, the progress display and the end-of-
    command summary of reproduce/report/replicate (what the CLI shows); diagnostics go through logging."""
    import ast

    allowed = {"cli.py": None, "sweep/progress.py": None, "studies/reproduce.py": {"_say", "_reproduce_locked", "rebuild", "_exit_code"},
               "studies/replicate.py": {"replicate"}}  # reproduce --replicate's summary
    found = []
    for path in (ROOT / "src" / "robustlab").rglob("*.py"):
        rel = path.relative_to(ROOT / "src" / "robustlab").as_posix()
        tree = ast.parse(path.read_text())
        for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)] + [tree]:
            body = fn.body if fn is not tree else [n for n in tree.body if not isinstance(n, ast.FunctionDef | ast.ClassDef)]
            for node in (x for b in body for x in ast.walk(b)):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                    where = getattr(fn, "name", "<module>")
                    if rel in allowed and (allowed[rel] is None or where in allowed[rel]):
                        continue
                    found.append(f"{rel}:{node.lineno} in {where}")
    assert not found, found


def test_pip_wheel_leaves_no_litter_and_ships_license_and_py_typed(tmp_path):
    """``pip wheel .`` on a copy of the tree (offline: this environment's setuptools): the
    wheel holds py.typed, the license and the metadata; the tree keeps no build/ or egg-info."""
    import shutil
    import zipfile
    from importlib import metadata

    try:  # offline, so the build uses this environment's setuptools: it must read PEP 639 licenses
        if int(metadata.version("setuptools").split(".")[0]) < 77:
            pytest.skip("setuptools < 77 here (the isolated build pip would do fetches a newer one)")
    except metadata.PackageNotFoundError:
        pytest.skip("no setuptools in this environment")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True)
    if files.returncode != 0:
        pytest.skip("not a git checkout")
    tree = tmp_path / "tree"
    for rel in files.stdout.splitlines():
        if (ROOT / rel).is_file():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, tree / rel)
    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                        "-w", str(dist), str(tree)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert not (tree / "build").exists() and not list(tree.rglob("*.egg-info")), sorted(
        p.relative_to(tree).as_posix() for p in tree.rglob("*") if "build" in p.name or "egg-info" in p.name)
    (wheel,) = dist.glob("robustlab-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "robustlab/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: MIT" in meta and "Classifier: Typing :: Typed" in meta
    assert "Project-URL: Repository, https://github.com/" in meta and "Requires-Dist: cycler" in meta
    assert "](https://raw.githubusercontent.com/" in meta  # the README, as PyPI shows it
