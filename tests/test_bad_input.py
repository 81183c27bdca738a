"""The bad-input table: every mistake a user (or their machine) can make with the CLI gives
one line ``robustlab: error: ...``, exit code 2, no traceback, nothing written and nothing
lost. Each row runs in-process (fast); a few run as real subprocesses too, so the exit code
and stderr are the ones a shell sees.

Rows that set up a directory first (a finished run, a damaged store, a read-only mount) are
checked byte for byte: the whole tree under ``tmp_path`` is the same after the command.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from robustlab.cli import main

SMOKE = ["run", "smoke", "--quiet"]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """One finished smoke run, copied by the rows that need a run directory."""
    out = tmp_path_factory.mktemp("finished") / "run"
    assert main([*SMOKE, "--out", str(out)]) == 0
    return out


def _snapshot(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = "link"
        elif p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _mount_tmpfs(path: Path, size: str, *, readonly_after: bool = False, setup=None) -> None:
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.decode().strip()[:80]})")
    if setup:
        setup(path)
    if readonly_after:
        subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


# --- row set-ups: each returns the argv (paths under tmp) --------------------------------

def _copy_run(run: Path, tmp: Path, name: str = "r") -> Path:
    dst = tmp / name
    shutil.copytree(run, dst)
    return dst


def _text_store(run, tmp):
    d = _copy_run(run, tmp)
    (d / "store.sqlite").write_text("this is not a database\n")
    return [*SMOKE, "--out", str(d)]


def _page_store(run, tmp):
    d = _copy_run(run, tmp)
    with open(d / "store.sqlite", "r+b") as fh:  # the second page: a b-tree page of the table
        fh.seek(4096)
        fh.write(b"\x5a" * 64)
    return [*SMOKE, "--out", str(d)]


def _record_store(run, tmp):
    d = _copy_run(run, tmp)
    data = (d / "store.sqlite").read_bytes()
    i = data.find(b'"loss"')  # inside a stored row's JSON: the page structure stays valid
    assert i > 0
    with open(d / "store.sqlite", "r+b") as fh:
        fh.seek(i)
        fh.write(b"\x5a" * 6)
    return [*SMOKE, "--out", str(d)]


def _bad_manifest(run, tmp):
    d = _copy_run(run, tmp)
    (d / "manifest.json").write_text("{not json")
    return [*SMOKE, "--out", str(d)]


def _binary_manifest(run, tmp):
    d = _copy_run(run, tmp)
    (d / "manifest.json").write_bytes(b"\xff\xfe\x00garbage")
    return [*SMOKE, "--out", str(d)]


def _report_bad_manifest(run, tmp):
    d = _copy_run(run, tmp)
    (d / "manifest.json").write_text("[1, 2")
    return ["report", str(d)]


def _report_text_store(run, tmp):
    d = _copy_run(run, tmp)
    (d / "store.sqlite").write_text("x" * 5000)
    return ["report", str(d)]


def _other_study(run, tmp):
    d = _copy_run(run, tmp)
    return ["run", "lazy-attack", "--quiet", "--out", str(d)]


def _other_grid(run, tmp):
    d = _copy_run(run, tmp)
    return [*SMOKE, "--grid", "lr=0.05,0.07", "--out", str(d)]


def _other_threads(run, tmp):
    d = _copy_run(run, tmp)
    return [*SMOKE, "--threads", "2", "--out", str(d)]


def _not_a_run_dir(run, tmp):
    d = tmp / "stuff"
    d.mkdir()
    (d / "notes.txt").write_text("mine")
    return [*SMOKE, "--out", str(d)]


def _out_under_file(run, tmp):
    (tmp / "afile").write_text("x")
    return [*SMOKE, "--out", str(tmp / "afile" / "run")]


def _resume_nothing(run, tmp):
    return [*SMOKE, "--resume", "--out", str(tmp / "none")]


def _data_dir_empty(run, tmp):
    (tmp / "data").mkdir()
    return ["run", "lazy-attack", "--quiet", "--data-dir", str(tmp / "data"), "--set", "dataset=mnist",
            "--out", str(tmp / "run")]


def _data_dir_partial(run, tmp):
    raw = tmp / "data" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    (raw / "train-images-idx3-ubyte").write_bytes(b"\x00" * 16)
    return ["run", "width-depth-init", "--quiet", "--data-dir", str(tmp / "data"), "--set", "dataset=mnist",
            "--out", str(tmp / "run")]


def _data_dir_missing(run, tmp):
    return ["run", "lazy-attack", "--quiet", "--data-dir", str(tmp / "nope"), "--out", str(tmp / "run")]


def _data_dir_smoke(run, tmp):
    (tmp / "data").mkdir()
    return [*SMOKE, "--data-dir", str(tmp / "data"), "--out", str(tmp / "run")]


def _report_missing(run, tmp):
    return ["report", str(tmp / "missing")]


def _report_not_run(run, tmp):
    (tmp / "plain").mkdir()
    (tmp / "plain" / "a.txt").write_text("a")
    return ["report", str(tmp / "plain")]


def _reproduce_bad_meta(run, tmp):
    d = tmp / "rep"
    d.mkdir()
    (d / "reproduce.json").write_text("{")
    return ["reproduce", "--quiet", "--only", "lazy-attack", "--out", str(d)]


def _reproduce_damaged_study(run, tmp):
    """A reproduce directory whose second study's store is damaged: refused before the
    first study (or reproduce.json) is touched."""
    d = tmp / "rep"
    d.mkdir()
    _copy_run(run, d, "lazy-attack")
    (d / "lazy-attack" / "store.sqlite").write_text("garbage")
    return ["reproduce", "--quiet", "--only", "lazy-attack", "--out", str(d)]


ROWS = {
    # command line and config values
    "unknown study": lambda r, t: ["run", "nosuchstudy", "--out", str(t / "run")],
    "no study": lambda r, t: ["run", "--out", str(t / "run")],
    "unknown option": lambda r, t: [*SMOKE, "--bogus", "--out", str(t / "run")],
    "unknown preset (smoke)": lambda r, t: [*SMOKE, "--preset", "huge", "--out", str(t / "run")],
    "unknown preset (feature-learning)": lambda r, t: ["run", "feature-learning", "--preset", "huge", "--out", str(t / "run")],
    "unknown preset (lazy-attack)": lambda r, t: ["run", "lazy-attack", "--preset", "huge", "--out", str(t / "run")],
    "unknown preset (lazy-adversarial)": lambda r, t: ["run", "lazy-adversarial", "--preset", "x", "--out", str(t / "run")],
    "unknown preset (width-depth-init)": lambda r, t: ["run", "width-depth-init", "--preset", "x", "--out", str(t / "run")],
    "unknown key": lambda r, t: [*SMOKE, "--set", "bogus=1", "--out", str(t / "run")],
    "negative lr": lambda r, t: [*SMOKE, "--set", "lr=-1", "--out", str(t / "run")],
    "lr not a number": lambda r, t: [*SMOKE, "--set", "lr=abc", "--out", str(t / "run")],
    "lr inf": lambda r, t: [*SMOKE, "--set", "lr=inf", "--out", str(t / "run")],
    "lr nan": lambda r, t: [*SMOKE, "--set", "lr=nan", "--out", str(t / "run")],
    "inf in a grid": lambda r, t: [*SMOKE, "--grid", "lr=0.1,inf", "--out", str(t / "run")],
    "set without =": lambda r, t: [*SMOKE, "--set", "lr", "--out", str(t / "run")],
    "set and grid": lambda r, t: [*SMOKE, "--grid", "lr=0.1,0.2", "--set", "lr=0.3", "--out", str(t / "run")],
    "empty grid axis": lambda r, t: [*SMOKE, "--grid", "lr=", "--out", str(t / "run")],
    "duplicate grid axis": lambda r, t: [*SMOKE, "--grid", "lr=0.1", "--grid", "lr=0.2", "--out", str(t / "run")],
    "bad grid range": lambda r, t: [*SMOKE, "--grid", "lr=1:2", "--out", str(t / "run")],
    "unknown grid key": lambda r, t: [*SMOKE, "--grid", "bogus=1,2", "--out", str(t / "run")],
    "negative width": lambda r, t: ["run", "width-depth-init", "--set", "width=-3", "--out", str(t / "run")],
    "negative size (lazy)": lambda r, t: ["run", "lazy-attack", "--set", "size=-5", "--out", str(t / "run")],
    "zero epochs (lazy)": lambda r, t: ["run", "lazy-attack", "--set", "epochs=0", "--out", str(t / "run")],
    "integer field given 2.5": lambda r, t: ["run", "lazy-attack", "--set", "m=2.5", "--out", str(t / "run")],
    "negative seed": lambda r, t: [*SMOKE, "--seed", "-1", "--out", str(t / "run")],
    "zero seeds": lambda r, t: [*SMOKE, "--seeds", "0", "--out", str(t / "run")],
    "zero workers": lambda r, t: [*SMOKE, "--workers", "0", "--out", str(t / "run")],
    "zero threads": lambda r, t: [*SMOKE, "--threads", "0", "--out", str(t / "run")],
    "unknown backend": lambda r, t: [*SMOKE, "--backend", "slurm", "--out", str(t / "run")],
    "unknown device": lambda r, t: [*SMOKE, "--device", "tpu", "--out", str(t / "run")],
    "ray address without ray": lambda r, t: [*SMOKE, "--ray-address", "127.0.0.1:1", "--out", str(t / "run")],
    "reproduce unknown study": lambda r, t: ["reproduce", "--only", "nope", "--out", str(t / "run")],
    "reproduce empty --only": lambda r, t: ["reproduce", "--only", ",", "--out", str(t / "run")],
    "reproduce study twice": lambda r, t: ["reproduce", "--only", "lazy-attack,lazy-attack", "--out", str(t / "run")],
    "reproduce unknown preset": lambda r, t: ["reproduce", "--preset", "huge", "--out", str(t / "run")],
    # paths
    "out under /proc": lambda r, t: [*SMOKE, "--out", "/proc/robustlab-test/run"],
    "out under a file": _out_under_file,
    "out: a directory that is not a run": _not_a_run_dir,
    "resume without a run": _resume_nothing,
    "data-dir missing": _data_dir_missing,
    "data-dir without the dataset files": _data_dir_empty,
    "data-dir with some files missing": _data_dir_partial,
    "data-dir for a study that reads none": _data_dir_smoke,
    "report: missing directory": _report_missing,
    "report: not a run directory": _report_not_run,
    # run directories
    "run dir of another study": _other_study,
    "run dir of another grid": _other_grid,
    "run dir started with other threads": _other_threads,
    "store replaced by text": _text_store,
    "store page overwritten": _page_store,
    "store record overwritten": _record_store,
    "manifest not JSON": _bad_manifest,
    "manifest not text": _binary_manifest,
    "report: manifest not JSON": _report_bad_manifest,
    "report: store not a database": _report_text_store,
    "reproduce.json not JSON": _reproduce_bad_meta,
    "reproduce: a study's store damaged": _reproduce_damaged_study,
}


@pytest.mark.parametrize("name", list(ROWS))
def test_bad_input_table(name, tmp_path, capsys, finished_run):
    argv = ROWS[name](finished_run, tmp_path)
    capsys.readouterr()
    before = _snapshot(tmp_path)
    code = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (name, code, err)
    assert len(lines) == 1 and lines[0].startswith("robustlab: error: "), (name, err)
    assert "Traceback" not in err
    assert _snapshot(tmp_path) == before, f"{name}: something under the tmp dir was written or changed"


def test_table_has_at_least_35_rows():
    assert len(ROWS) + len(MOUNT_ROWS) >= 35


# --- rows that need a mount: a read-only run directory, a full disk ----------------------

def _readonly_run(run, tmp):
    mnt = tmp / "ro"
    _mount_tmpfs(mnt, "4m", readonly_after=True, setup=lambda m: shutil.copytree(run, m / "r"))
    return [*SMOKE, "--out", str(mnt / "r")], mnt


def _readonly_report(run, tmp):
    mnt = tmp / "ro"
    _mount_tmpfs(mnt, "4m", readonly_after=True, setup=lambda m: shutil.copytree(run, m / "r"))
    return ["report", str(mnt / "r")], mnt


def _readonly_fresh(run, tmp):
    mnt = tmp / "ro"
    _mount_tmpfs(mnt, "64k", readonly_after=True)
    return [*SMOKE, "--out", str(mnt / "new")], mnt


def _full_disk(run, tmp):
    mnt = tmp / "full"
    _mount_tmpfs(mnt, "24k")  # room for the manifest, not for the store's pages
    return [*SMOKE, "--out", str(mnt / "r")], mnt


MOUNT_ROWS = {
    "read-only run directory": _readonly_run,
    "read-only run directory (report)": _readonly_report,
    "out on a read-only file system": _readonly_fresh,
    "full disk": _full_disk,
}


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
@pytest.mark.parametrize("name", list(MOUNT_ROWS))
def test_bad_machine_table(name, tmp_path, capsys, finished_run):
    argv, mnt = MOUNT_ROWS[name](finished_run, tmp_path)
    try:
        before = _snapshot(mnt)
        capsys.readouterr()
        code = main(argv)
        err = capsys.readouterr().err
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2, (name, code, err)
        assert len(lines) == 1 and lines[0].startswith("robustlab: error: "), (name, err)
        assert "Traceback" not in err
        after = _snapshot(mnt)
        if name == "full disk":
            assert after == {} or "r/store.sqlite" not in after or after == before, after
            assert not (mnt / "r").exists(), "a fresh run that could not store a point leaves no directory"
        else:
            assert after == before
    finally:
        _umount(mnt)


def test_failing_write_in_process(tmp_path, capsys, monkeypatch):
    """A disk that fills up while the records are written (simulated without a mount): one
    line, exit 2, and the fresh directory is gone rather than half-written."""
    from robustlab import records

    real = records.atomic_write_bytes

    def full(path, data):
        if Path(path).name == "manifest.json":
            raise OSError(28, "No space left on device", str(path))
        return real(path, data)

    monkeypatch.setattr(records, "atomic_write_bytes", full)
    out = tmp_path / "run"
    code = main([*SMOKE, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "No space left" in err, err
    assert not out.exists()


# --- the same, as a shell sees it -----------------------------------------------------------

@pytest.mark.parametrize("name", ["lr inf", "set and grid", "store replaced by text", "manifest not JSON",
                                  "out under /proc"])
def test_bad_input_subprocess(name, tmp_path, finished_run):
    argv = ROWS[name](finished_run, tmp_path)
    before = _snapshot(tmp_path)
    r = subprocess.run([sys.executable, "-m", "robustlab.cli", *argv], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    assert _snapshot(tmp_path) == before


def test_damaged_results_claims_and_figures_are_rebuilt_from_the_store(tmp_path, finished_run):
    """results.jsonl, claims.json and figures are derived: a damaged or missing one is rebuilt
    by re-running into the directory (nothing re-computed) — the store is the source of truth."""
    d = _copy_run(finished_run, tmp_path)
    want = {n: (finished_run / n).read_bytes() for n in ("results.jsonl", "claims.json")}
    (d / "results.jsonl").write_text("junk\n")
    (d / "claims.json").write_text("[")
    shutil.rmtree(d / "figures")
    assert main([*SMOKE, "--out", str(d)]) == 0
    for n, data in want.items():
        assert (d / n).read_bytes() == data, n
    assert (d / "figures" / "loss.png").exists()
    # nothing re-computed: the manifest keeps the sweep record of the run that did the work
    assert json.loads((d / "manifest.json").read_text())["sweep"] == \
        json.loads((finished_run / "manifest.json").read_text())["sweep"]
