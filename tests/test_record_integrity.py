"""A run directory is a record to trust (issue 36): it never destroys results, never claims
more than it holds, never mixes code, and a hostile or careless input is one line.

The table: every case the audit found, each a command that must answer with exit 2, one line
``robustlab: error: ...``, no traceback, and leave every byte under the test's directory as it
was (the run directories, their results, and the files outside them that a planted link points
at). Rows that must change something (``--strict`` on an incomplete run, ``--allow-mixed-code``)
are tests of their own below. docs/reliability.md lists the table with what each case does now.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from robustlab.cli import main

SMOKE = ["run", "smoke", "--quiet"]

STUDY_FILE = '''"""A study file: the smoke study under its own name."""
import dataclasses

from robustlab.studies.smoke import STUDY as _SMOKE

STUDY = dataclasses.replace(_SMOKE, name="filesmoke")
'''


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Finished runs the rows copy: smoke at seeds 0-1 and 100-101, and a study file's."""
    root = tmp_path_factory.mktemp("runs")
    out = {"smoke": root / "smoke", "smoke100": root / "smoke100", "file": root / "file" / "run"}
    assert main([*SMOKE, "--out", str(out["smoke"])]) == 0
    assert main([*SMOKE, "--seed", "100", "--out", str(out["smoke100"])]) == 0
    (root / "file").mkdir()
    (root / "file" / "filesmoke.py").write_text(STUDY_FILE)
    assert main(["run", str(root / "file" / "filesmoke.py"), "--quiet", "--out", str(out["file"])]) == 0
    return out


def _snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` and its bytes' hash (a link as its target: it must not move)."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = "link -> " + os.readlink(p)
        elif p.is_dir():
            out[rel] = "dir"
        elif p.name == ".lock":
            out[rel] = "lock"  # holds the pid of the last writer: a refusal may take the lock
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _copy(run: Path, tmp: Path, name: str = "r") -> Path:
    dst = tmp / name
    shutil.copytree(run, dst)
    return dst


def _edit_manifest(d: Path, change) -> None:
    m = json.loads((d / "manifest.json").read_text())
    m = change(m)
    (d / "manifest.json").write_text(json.dumps(m))


def _drop_points(d: Path, n: int) -> None:
    """Remove ``n`` points from a store (what a truncated or half-restored store looks like)."""
    con = sqlite3.connect(d / "store.sqlite")
    con.execute(f"DELETE FROM points WHERE key IN (SELECT key FROM points LIMIT {n})")
    con.commit()
    con.close()


# --- data lost or clobbered ------------------------------------------------------------------

def _empty_store(runs, tmp):
    d = _copy(runs["smoke"], tmp)
    (d / "store.sqlite").write_bytes(b"")
    return ["report", str(d)]


def _smaller_store(runs, tmp):
    d = _copy(runs["smoke"], tmp)
    _drop_points(d, 1)
    return ["report", str(d)]


def _no_results_store(runs, tmp):
    """Results deleted and the store emptied: claims.json and report.html are the last record."""
    d = _copy(runs["smoke"], tmp)
    (d / "results.jsonl").unlink()
    (d / "store.sqlite").write_bytes(b"")
    return ["report", str(d)]


def _victim(tmp: Path) -> Path:
    v = tmp / "someone-elses-file"
    v.write_text("not robustlab's\n")
    return v


def _lock_link(runs, tmp):
    d = _copy(runs["smoke"], tmp)
    (d / ".lock").unlink()
    (d / ".lock").symlink_to(_victim(tmp))
    return [*SMOKE, "--out", str(d)]


def _lock_link_fresh(runs, tmp):
    d = tmp / "new"
    d.mkdir()
    (d / ".lock").symlink_to(_victim(tmp))
    return [*SMOKE, "--out", str(d)]


def _lock_link_report(runs, tmp):
    d = _copy(runs["smoke"], tmp)
    (d / ".lock").unlink()
    (d / ".lock").symlink_to(_victim(tmp))
    return ["report", str(d)]


def _store_link(runs, tmp):
    d = _copy(runs["smoke"], tmp)
    target = tmp / "elsewhere.sqlite"
    (d / "store.sqlite").rename(target)
    (d / "store.sqlite").symlink_to(target)
    return [*SMOKE, "--out", str(d)]


def _results_link(runs, tmp):
    d = _copy(runs["smoke"], tmp)
    (d / "results.jsonl").unlink()
    (d / "results.jsonl").symlink_to(_victim(tmp))
    return ["report", str(d)]


def _figures_a_file(runs, tmp):
    d = _copy(runs["smoke"], tmp)
    shutil.rmtree(d / "figures")
    (d / "figures").write_text("a file where the figures go")
    return ["report", str(d)]


def _evil_name(name):
    def setup(runs, tmp):
        f = tmp / "evil.py"
        f.write_text(STUDY_FILE.replace('name="filesmoke"', f"name={name!r}"))
        return ["run", str(f), "--quiet"]
    return setup


# --- the record says more than it holds ------------------------------------------------------

def _other_store(runs, tmp, command="report"):
    d = _copy(runs["smoke"], tmp)
    shutil.copyfile(runs["smoke100"] / "store.sqlite", d / "store.sqlite")
    return ["report", str(d)] if command == "report" else [*SMOKE, "--out", str(d)]


def _other_store_legacy(runs, tmp):
    """The same with a store from before stores recorded their run: its points are not the plan's."""
    d = _copy(runs["smoke"], tmp)
    shutil.copyfile(runs["smoke100"] / "store.sqlite", d / "store.sqlite")
    con = sqlite3.connect(d / "store.sqlite")
    con.execute("DROP TABLE meta")
    con.commit()
    con.close()
    return ["report", str(d)]


def _edited_study(runs, tmp):
    d = _copy(runs["smoke"], tmp)
    _edit_manifest(d, lambda m: {**m, "study": "lazy-attack"})
    return ["report", str(d)]


def _edited_study_legacy(runs, tmp):
    """The same with a store from before identities: the manifest's config is not the study's."""
    d = _copy(runs["smoke"], tmp)
    _edit_manifest(d, lambda m: {**m, "study": "lazy-attack"})
    con = sqlite3.connect(d / "store.sqlite")
    con.execute("DROP TABLE meta")
    con.commit()
    con.close()
    return ["report", str(d)]


# --- mixed code ------------------------------------------------------------------------------

def _edited_study_file(runs, tmp):
    d = _copy(runs["file"].parent, tmp, "file")
    (d / "filesmoke.py").write_text(STUDY_FILE + "\n# edited after the run\n")
    _drop_points(d / "run", 1)  # so that the resume has a point to compute
    return ["run", str(d / "filesmoke.py"), "--quiet", "--out", str(d / "run")]


def _other_commit(runs, tmp):
    """A run recorded at another commit with local changes, before points carried their code."""
    d = _copy(runs["smoke"], tmp)

    def change(m):
        m.pop("sittings", None)
        m.pop("code_id", None)
        return {**m, "code": {"git_commit": "0123456789abcdef", "dirty": True}}
    _edit_manifest(d, change)
    con = sqlite3.connect(d / "store.sqlite")
    con.execute("UPDATE points SET code = NULL")
    con.commit()
    con.close()
    return [*SMOKE, "--out", str(d)]


# --- shapes ----------------------------------------------------------------------------------

BAD_MANIFESTS = {
    "[]": [], "null": None, "{}": {},
    "seeds a string": "seeds", "point_keys a number": "point_keys", "grid an object": "grid",
    "threads a string": "threads", "study a number": "study",
}


def _bad_manifest(shape, command):
    def setup(runs, tmp):
        d = _copy(runs["smoke"], tmp)
        if isinstance(BAD_MANIFESTS[shape], str):
            field = BAD_MANIFESTS[shape]
            wrong = {"seeds": "0,1", "point_keys": 7, "grid": {"lr": [0.5]}, "threads": "1", "study": 3}[field]
            _edit_manifest(d, lambda m: {**m, field: wrong})
        else:
            (d / "manifest.json").write_text(json.dumps(BAD_MANIFESTS[shape]))
        if command == "report":
            return ["report", str(d)]
        if command == "rerun":
            return ["rerun", str(d), "--quiet", "--out", str(tmp / "new")]
        if command == "compare":
            return ["compare", str(d), str(runs["smoke"])]
        if command == "reuse":
            return [*SMOKE, "--reuse", str(d), "--out", str(tmp / "new")]
        return [*SMOKE, "--out", str(d)]
    return setup


def _bad_reproduce_json(command):
    def setup(runs, tmp):
        d = tmp / "rep"
        d.mkdir()
        _copy(runs["smoke"], d, "lazy-attack")
        (d / "reproduce.json").write_text("[]")
        if command == "report":
            return ["report", str(d)]
        if command == "compare":
            return ["compare", str(d), str(runs["smoke"])]
        return ["reproduce", "--quiet", "--only", "lazy-attack", "--out", str(d)]
    return setup


def _bad_claims_json(runs, tmp):
    d = _copy(runs["smoke"], tmp)
    (d / "claims.json").write_text(json.dumps({"id": "x"}))
    return ["compare", str(d), str(runs["smoke"])]


# --- limits ----------------------------------------------------------------------------------

def _new(tmp):
    return str(tmp / "new")


ROWS = {
    # data lost or clobbered
    "report from a zero-byte store": _empty_store,
    "report from a store with fewer points": _smaller_store,
    "report from an empty store, results.jsonl gone": _no_results_store,
    ".lock a symlink (run)": _lock_link,
    ".lock a symlink (fresh directory)": _lock_link_fresh,
    ".lock a symlink (report)": _lock_link_report,
    "store.sqlite a symlink": _store_link,
    "results.jsonl a symlink (report)": _results_link,
    "figures/ not writable (report)": _figures_a_file,
    "study named ../../evil": _evil_name("../../evil"),
    "study named a/b": _evil_name("a/b"),
    "study named .hidden": _evil_name(".hidden"),
    # the record says more than it holds
    "another run's store copied in (report)": _other_store,
    "another run's store copied in (resume)": lambda r, t: _other_store(r, t, "run"),
    "another run's old-style store copied in": _other_store_legacy,
    "manifest's study edited": _edited_study,
    "manifest's study edited, old-style store": _edited_study_legacy,
    # mixed code
    "resume after editing the study file": _edited_study_file,
    "resume of a run at another commit (dirty)": _other_commit,
    # shapes
    **{f"manifest {shape} ({cmd})": _bad_manifest(shape, cmd)
       for shape in ("[]", "null", "{}") for cmd in ("report", "rerun", "compare", "run", "reuse")},
    **{f"manifest {shape} ({cmd})": _bad_manifest(shape, cmd)
       for shape in list(BAD_MANIFESTS)[3:] for cmd in ("report", "run")},
    **{f"reproduce.json [] ({cmd})": _bad_reproduce_json(cmd) for cmd in ("report", "compare", "reproduce")},
    "claims.json an object (compare)": _bad_claims_json,
    "study file calls sys.exit(3) at import": lambda r, t: (
        (t / "exits.py").write_text("import sys\nsys.exit(3)\n"), ["run", str(t / "exits.py"), "--quiet"])[1],
    # limits
    "grid of 1e11 points": lambda r, t: [*SMOKE, "--grid", "lr=0.1:1:100000000000", "--out", _new(t)],
    "grid of 1e11 points (--dry-run)": lambda r, t: [*SMOKE, "--grid", "lr=0.1:1:100000000000", "--dry-run",
                                                     "--out", _new(t)],
    "grid over the cap by product": lambda r, t: [*SMOKE, "--grid", "lr=0.1:1:400", "--seeds", "300",
                                                  "--out", _new(t)],
    "grid over a lowered --max-points": lambda r, t: [*SMOKE, "--grid", "lr=0.1,0.2", "--max-points", "3",
                                                      "--out", _new(t)],
    "--max-points 0": lambda r, t: [*SMOKE, "--max-points", "0", "--out", _new(t)],
    "reproduce over --max-points": lambda r, t: ["reproduce", "--quiet", "--only", "lazy-attack",
                                                 "--max-points", "1", "--out", _new(t)],
    "--threads 100000": lambda r, t: [*SMOKE, "--threads", "100000", "--out", _new(t)],
    "--threads 100000 (reproduce)": lambda r, t: ["reproduce", "--threads", "100000", "--out", _new(t)],
    "rerun of a manifest pinning 100000 threads": lambda r, t: (
        _edit_manifest(_copy(r["smoke"], t), lambda m: {**m, "threads": 100000}),
        ["rerun", str(t / "r"), "--quiet", "--out", _new(t)])[1],
    "--set lr twice": lambda r, t: [*SMOKE, "--set", "lr=0.1", "--set", "lr=0.2", "--out", _new(t)],
    "--set seed and --seed": lambda r, t: [*SMOKE, "--set", "seed=5", "--seed", "7", "--out", _new(t)],
    "--seed and --grid seed": lambda r, t: [*SMOKE, "--seed", "3", "--grid", "seed=1,2", "--out", _new(t)],
}


def test_the_table_has_every_case_of_the_audit():
    assert len(ROWS) >= 50, len(ROWS)


@pytest.mark.parametrize("name", list(ROWS))
def test_record_integrity_table(name, tmp_path, capsys, runs):
    argv = ROWS[name](runs, tmp_path)
    capsys.readouterr()
    before = _snapshot(tmp_path)
    code = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (name, code, err)
    assert len(lines) == 1 and lines[0].startswith("robustlab: error: "), (name, err)
    assert "Traceback" not in err
    assert _snapshot(tmp_path) == before, f"{name}: something under the tmp dir was written or changed"
    assert "new" in before or not (tmp_path / "new").exists()


# --- what must change, and how ----------------------------------------------------------------

def _claims(d: Path) -> list[dict]:
    return json.loads((d / "claims.json").read_text())


def test_a_report_on_an_incomplete_run_says_so_and_strict_fails(tmp_path, capsys, runs):
    """A run killed before its last points (here: points dropped from its store, as a SIGKILL
    leaves it): the console, claims.json and the report say done/planned, --strict exits 1."""
    d = _copy(runs["smoke"], tmp_path)
    _drop_points(d, 1)
    (d / "results.jsonl").unlink()  # as a killed run leaves it: the derived files never written
    assert main(["report", str(d)]) == 0
    capsys.readouterr()
    assert main(["report", str(d), "--strict"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["robustlab: --strict: 1 claim computed on an incomplete grid (points 1/2 done, 0 failed, "
                   "1 not run): resume the run to complete it"], err
    claims = _claims(d)
    assert all(c["incomplete"] == {"planned": 2, "done": 1, "failed": 0, "missing": 1} for c in claims)
    assert "points 1/2 done" in (d / "report.html").read_text()


def test_strict_fails_on_a_partly_failed_grid(tmp_path, capsys):
    out = tmp_path / "r"
    code = main([*SMOKE, "--grid", "lr=0.5,0.2", "--set", "fail_on_lr=0.2", "--out", str(out), "--strict"])
    text = capsys.readouterr().out
    assert code == 1
    assert "2/4 points done (2 failed)" in text
    assert all(c["incomplete"]["failed"] == 2 for c in _claims(out))
    assert main([*SMOKE, "--grid", "lr=0.5,0.2", "--set", "fail_on_lr=0.2", "--out", str(out)]) == 0


def test_force_rewrites_from_the_store_as_it_is(tmp_path, capsys, runs):
    d = _copy(runs["smoke"], tmp_path)
    _drop_points(d, 1)
    assert main(["report", str(d)]) == 2
    assert main(["report", str(d), "--force"]) == 0
    assert len((d / "results.jsonl").read_text().splitlines()) < len(
        (runs["smoke"] / "results.jsonl").read_text().splitlines())


def test_allow_mixed_code_continues_records_the_sitting_and_says_which_points(tmp_path, capsys, runs):
    d = _copy(runs["file"].parent, tmp_path, "file")
    (d / "filesmoke.py").write_text(STUDY_FILE + "\n# edited after the run\n")
    _drop_points(d / "run", 1)
    first = json.loads((d / "run" / "manifest.json").read_text())
    argv = ["run", str(d / "filesmoke.py"), "--quiet", "--out", str(d / "run")]
    assert main(argv) == 2
    assert main([*argv, "--allow-mixed-code"]) == 0
    m = json.loads((d / "run" / "manifest.json").read_text())
    assert m["allow_mixed_code"] is True
    assert [s["allow_mixed_code"] for s in m["sittings"]] == [False, True]
    assert m["sittings"][0] == first["sittings"][0] | {"finished": first["sittings"][0]["finished"]}
    assert m["code_id"] == first["code_id"] and m["started"] == first["started"]  # the first never overwritten
    assert len({s["code_id"] for s in m["sittings"]}) == 2
    html = (d / "run" / "report.html").read_text()
    assert "points from 2 versions of the code" in html
    # the same code again resumes without the flag: the mix was accepted once
    assert main(argv) == 0


def test_resume_by_the_same_code_needs_no_flag(tmp_path, runs):
    d = _copy(runs["smoke"], tmp_path)
    _drop_points(d, 1)
    assert main([*SMOKE, "--out", str(d)]) == 0
    m = json.loads((d / "manifest.json").read_text())
    assert len(m["sittings"]) == 2 and m["resumed"] == 1
    # (the same rows; not the same bits: the resumed seed trains alone, not batched with its twin)
    assert len((d / "results.jsonl").read_text().splitlines()) == len(
        (runs["smoke"] / "results.jsonl").read_text().splitlines())


def test_points_carry_the_code_that_computed_them(runs):
    from robustlab import records
    from robustlab.sweep.store import Store

    m = json.loads((runs["file"] / "manifest.json").read_text())
    assert m["sittings"][0]["code"]["study"]["sha256"] == records.file_hash(runs["file"].parent / "filesmoke.py")
    with Store(runs["file"] / "store.sqlite", readonly=True) as st:
        assert st.codes() == {m["code_id"]: 2}


def test_minus_zero_is_zero_in_a_points_hash():
    from robustlab.config import config_hash
    from robustlab.studies.smoke import STUDY

    a, b = STUDY.config(weight_decay=-0.0), STUDY.config(weight_decay=0.0)
    assert config_hash(a.to_dict()) == config_hash(b.to_dict())


def test_a_config_files_set_is_overridden_by_the_command_line_not_repeated(tmp_path, capsys):
    exp = tmp_path / "exp.toml"
    exp.write_text('study = "smoke"\n[set]\nlr = 0.1\n')
    out = tmp_path / "r"
    assert main(["run", "--config", str(exp), "--set", "lr=0.3", "--quiet", "--out", str(out), "--dry-run"]) == 0
    assert main(["run", "--config", str(exp), "--set", "lr=0.3", "--set", "lr=0.2", "--out", str(out)]) == 2


def test_the_lock_survives_its_files_deletion(tmp_path):
    """The lock is on the directory: deleting ``.lock`` mid-run lets no second writer in."""
    from robustlab.sweep import lock

    d = tmp_path / "r"
    d.mkdir()
    code = ("import sys, time\nfrom robustlab.sweep import lock\nwith lock.writer(sys.argv[1]):\n"
            "    print('held', flush=True)\n    time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(d)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        (d / ".lock").unlink()
        assert lock.holder(d) is not None
        with pytest.raises(lock.LockedError):
            with lock.writer(d):
                pass
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 10
    while lock.holder(d) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    with lock.writer(d):
        assert (d / ".lock").read_text().strip() == str(os.getpid())


def test_the_table_as_a_shell_sees_it(tmp_path, runs):
    """A few rows as real subprocesses: the exit code and stderr a shell sees."""
    for name in ("report from a zero-byte store", ".lock a symlink (run)", "--threads 100000"):
        tmp = tmp_path / hashlib.sha256(name.encode()).hexdigest()[:8]
        tmp.mkdir()
        argv = ROWS[name](runs, tmp)
        before = _snapshot(tmp)
        r = subprocess.run([sys.executable, "-m", "robustlab.cli", *argv], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 2, (name, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, (name, r.stderr)
        assert _snapshot(tmp) == before, name


DYING = '''"""A study file whose point at lr=0.2 kills its own process."""
import dataclasses
import os

from robustlab.studies.smoke import STUDY as _SMOKE


def run_points(cfgs, device):
    if any(c.lr == 0.2 for c in cfgs):
        os._exit(7)
    return _SMOKE.run_points(cfgs, device)


STUDY = dataclasses.replace(_SMOKE, name="dying", run_points=run_points)
'''


def test_a_point_that_kills_its_process_with_one_worker_is_one_line_and_resumable(tmp_path):
    """--workers 1 runs the points in a worker process: os._exit in a point is recorded as a
    failed point (after one retry alone), the others finish, the CLI says so in one line and
    exits 2, and the run resumes."""
    f = tmp_path / "dying.py"
    f.write_text(DYING)
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "robustlab.cli", "run", str(f), "--quiet", "--workers", "1",
            "--grid", "lr=0.5,0.2", "--seeds", "1", "--out", str(out)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "killed the process" in r.stderr, r.stderr
    assert "1/2 points done (1 failed)" in r.stdout
    from robustlab.sweep.store import Store

    with Store(out / "store.sqlite", readonly=True) as st:
        assert st.count("done") == 1 and st.failures()[0]["reason"].startswith("WorkerDied")
    f.write_text(DYING.replace("os._exit(7)", "pass"))  # fixed: the failed point alone re-runs
    r = subprocess.run([*argv, "--retry-failed", "--allow-mixed-code"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "2/2 points done (0 failed)" in r.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_report_with_figures_on_a_read_only_mount_leaves_the_report(tmp_path, capsys, runs):
    """The audit's case as it was: figures/ unwritable (root ignores permission bits, so a
    read-only mount): one line, exit 2, and report.html is not replaced by one without figures."""
    d = _copy(runs["smoke"], tmp_path)
    figs = d / "figures"
    saved = {p.name: p.read_bytes() for p in figs.iterdir()}
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(figs)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.decode().strip()[:80]})")
    try:
        for name, data in saved.items():
            (figs / name).write_bytes(data)
        subprocess.run(["mount", "-o", "remount,ro", str(figs)], check=True)
        before = _snapshot(tmp_path)
        capsys.readouterr()
        assert main(["report", str(d)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "figures cannot be written" in err[0] and "left as they are" in err[0], err
        assert _snapshot(tmp_path) == before
    finally:
        subprocess.run(["umount", "-l", str(figs)], capture_output=True)
