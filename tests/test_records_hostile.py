"""Records that cannot lie (issue 56): no write through a link or into the record, no exit 0
without results, every reader fails in one line, every reader knows what is complete.

One table per class of case (links, exit codes, non-finite values, damaged readers,
completeness, API errors). docs/reliability.md lists every case with its command, exit code
and one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from robustlab import records
from robustlab.cli import main

SMOKE = ["run", "smoke", "--quiet", "--set", "epochs=4"]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    """A finished smoke run (4 points: 2 learning rates x 2 seeds)."""
    out = tmp_path_factory.mktemp("runs") / "smoke"
    assert main([*SMOKE, "--grid", "lr=0.2,0.5", "--out", str(out)]) == 0
    return out


def _copy(run: Path, tmp: Path, name: str = "r") -> Path:
    dst = tmp / name
    shutil.copytree(run, dst)
    return dst


def _snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` and its bytes' hash (a link as its target)."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = "link -> " + os.readlink(p)
        elif p.is_dir():
            out[rel] = "dir"
        elif p.name == ".lock":
            out[rel] = "lock"
        elif p.is_fifo():
            out[rel] = "fifo"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# --- links and writes into the record ---------------------------------------------------------

def _victim(tmp: Path) -> Path:
    v = tmp / "victim.txt"
    v.write_text("the user's own file\n")
    return v


def _hardlink(src: Path, dst: Path) -> None:
    dst.unlink(missing_ok=True)
    os.link(src, dst)


LINK_ROWS = {
    "export --out RUN/store.sqlite --force": lambda r, t: ["export", str(_copy(r, t)), "--out",
                                                           str(t / "r" / "store.sqlite"), "--force"],
    "export --out RUN/results.jsonl --force": lambda r, t: ["export", str(_copy(r, t)), "--out",
                                                            str(t / "r" / "results.jsonl"), "--force"],
    "export --out RUN/figures/x.csv": lambda r, t: ["export", str(_copy(r, t)), "--out",
                                                    str(t / "r" / "figures" / "x.csv")],
    "export --out RUN/new.csv": lambda r, t: ["export", str(_copy(r, t)), "--out", str(t / "r" / "new.csv")],
    "export --out OTHER-RUN/results.jsonl": lambda r, t: (
        _copy(r, t, "other"), ["export", str(_copy(r, t)), "--out", str(t / "other" / "results.jsonl"), "--force"])[1],
    ".lock a hard link to a user's file (report)": lambda r, t: (
        _copy(r, t), _hardlink(_victim(t), t / "r" / ".lock"), ["report", str(t / "r")])[2],
    ".lock a hard link to a user's file (run)": lambda r, t: (
        _copy(r, t), _hardlink(_victim(t), t / "r" / ".lock"),
        [*SMOKE, "--grid", "lr=0.2,0.5", "--out", str(t / "r")])[2],
    "store.sqlite a hard link (run resumes into it)": lambda r, t: (
        _copy(r, t), shutil.copyfile(t / "r" / "store.sqlite", t / "mine.sqlite"),
        (t / "r" / "store.sqlite").unlink(), os.link(t / "mine.sqlite", t / "r" / "store.sqlite"),
        [*SMOKE, "--grid", "lr=0.2,0.5", "--out", str(t / "r")])[4],
}


@pytest.mark.parametrize("name", list(LINK_ROWS))
def test_no_write_through_a_link_or_into_the_record(name, tmp_path, capsys, smoke):
    argv = LINK_ROWS[name](smoke, tmp_path)
    capsys.readouterr()
    before = _snapshot(tmp_path)
    code = main(argv)
    line = _one_line(capsys.readouterr().err)
    assert code == 2, (name, code, line)
    assert line.startswith("robustlab: error: ")
    assert _snapshot(tmp_path) == before, f"{name}: something was written or changed"


def test_export_temporaries_are_unpredictable_and_never_followed(tmp_path, smoke):
    victim = _victim(tmp_path)
    out = tmp_path / "out" / "smoke.csv"
    out.parent.mkdir()
    # the names an export used to write first, planted as links to the user's file
    for name in (".smoke.csv.tmp", ".smoke.claims.csv.tmp"):
        os.symlink(victim, out.parent / name)
    os.symlink(victim, out)  # the output itself a link: replaced (with --force), never written through
    assert main(["export", str(smoke), "--out", str(out), "--force"]) == 0
    assert victim.read_text() == "the user's own file\n"
    assert not out.is_symlink() and "lr" in out.read_text().splitlines()[0]
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(
        [".smoke.csv.tmp", ".smoke.claims.csv.tmp", "smoke.csv", "smoke.claims.csv"])


def test_safe_temp_never_opens_a_planted_name(tmp_path, monkeypatch):
    victim = _victim(tmp_path)
    names = iter(["aaaa", "aaaa", "bbbb"])
    monkeypatch.setattr(records.secrets, "token_hex", lambda n: next(names))
    os.symlink(victim, tmp_path / ".f.aaaa.tmp")
    fd, tmp = records.safe_temp(tmp_path / "f")  # the planted name is skipped, not followed
    os.close(fd)
    assert tmp.name == ".f.bbbb.tmp" and victim.read_text() == "the user's own file\n"


def test_a_figure_written_over_a_planted_link_replaces_the_link(tmp_path):
    from robustlab.report.plots import plt, save

    victim = _victim(tmp_path)
    os.symlink(victim, tmp_path / "fig.png")
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    save(fig, tmp_path / "fig.png")
    assert victim.read_text() == "the user's own file\n"
    assert not (tmp_path / "fig.png").is_symlink() and (tmp_path / "fig.png").read_bytes()[:4] == b"\x89PNG"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_the_lock_never_writes_into_an_existing_file(tmp_path):
    from robustlab.sweep import lock

    (tmp_path / ".lock").write_text("12345\n")
    inode = (tmp_path / ".lock").stat().st_ino
    with lock.writer(tmp_path):
        assert (tmp_path / ".lock").read_text() == f"{os.getpid()}\n"
    assert (tmp_path / ".lock").stat().st_ino != inode  # a new file renamed into place


# --- exit codes: no exit 0 without results, study code that raises or exits --------------------

PLUGIN = '''"""A study file whose functions misbehave (issue 56)."""
import dataclasses
import math
import sys

import numpy as np
import torch

from robustlab.studies.smoke import STUDY as _SMOKE, claims as _claims, figures as _figures


def deep(n):
    v = 1.0
    for _ in range(n):
        v = [v]
    return v


def run_points(cfgs, device):
    return [{POINT} for c in cfgs]


def claims(df, ctx):
    {CLAIMS}
    return _claims(df, ctx)


def figures(df, ctx):
    {FIGURES}
    return _figures(df, ctx)


STUDY = dataclasses.replace(_SMOKE, name="hostile", run_points=run_points, claims=claims, figures=figures)
'''

GOOD_POINT = '[{"epoch": 1, "loss": 1.0 + c.lr, "test_acc": 0.5 + c.lr / 10}]'


def _plugin(tmp: Path, point: str = GOOD_POINT, claims: str = "pass", figures: str = "pass") -> Path:
    path = tmp / "hostile.py"
    path.write_text(PLUGIN.replace("{POINT}", point).replace("{CLAIMS}", claims).replace("{FIGURES}", figures))
    return path


FAILING_POINTS = {
    "a point raises": "(_ for _ in ()).throw(RuntimeError('boom'))",
    "a point calls sys.exit(0)": "sys.exit(0)",
    "a point raises KeyboardInterrupt": "(_ for _ in ()).throw(KeyboardInterrupt())",
    "a point returns None": "None",
    "a point returns a set": "{1, 2}",
    "a point returns 10**5000": '[{"loss": 10**5000}]',
    "a point nests 200 deep": '[{"loss": deep(200)}]',
    "NaN in a torch scalar": '[{"loss": torch.tensor(float("nan"))}]',
    "NaN in a numpy array": '[{"loss": np.array([1.0, float("nan")])}]',
    "NaN in a nested dict": '[{"loss": {"a": {"b": [1.0, math.inf]}}}]',
    "a bare float NaN": '[{"loss": float("nan")}]',
}


@pytest.mark.parametrize("name", list(FAILING_POINTS))
def test_a_run_with_no_point_done_exits_nonzero_in_one_line(name, tmp_path, capsys):
    study = _plugin(tmp_path, point=FAILING_POINTS[name])
    out = tmp_path / "run"
    code = main(["run", str(study), "--quiet", "--out", str(out)])
    captured = capsys.readouterr()
    line = _one_line(captured.err)
    assert code == 1, (name, code, captured.err)
    assert "no point produced results" in line, line
    from robustlab.sweep.store import Store

    with Store(out / "store.sqlite", readonly=True) as st:
        assert st.count("done") == 0 and st.count("failed") == st.count() > 0
    # report and report --strict say the same
    assert main(["report", str(out)]) == 1 and "no point produced results" in _one_line(capsys.readouterr().err)


STUDY_CODE_FAILS = {
    "claims() calls sys.exit(0)": ({"claims": "sys.exit(0)"}, "claims() failed (SystemExit(0))"),
    "claims() raises KeyboardInterrupt": ({"claims": "raise KeyboardInterrupt"}, "claims() failed (KeyboardInterrupt())"),
    "claims() raises": ({"claims": "raise ValueError('bad')"}, "claims() failed (ValueError('bad'))"),
    "figures() calls sys.exit(3)": ({"figures": "sys.exit(3)"}, "figures could not be drawn: SystemExit(3)"),
    "evidence holds a set": ({"claims": "c = _claims(df, ctx); c[0].evidence['bad'] = {1, 2}; return c"},
                             "cannot be written as JSON"),
    "evidence holds 10**5000": ({"claims": "c = _claims(df, ctx); c[0].evidence['bad'] = 10**5000; return c"},
                                "cannot be written as JSON"),
    "evidence nested 100 deep": ({"claims": "c = _claims(df, ctx); c[0].evidence['bad'] = deep(100); return c"},
                                 "cannot be read back from claims.json (nested deeper than 64 levels)"),
}


@pytest.mark.parametrize("name", list(STUDY_CODE_FAILS))
def test_study_code_that_raises_or_exits_is_a_failure_in_one_line(name, tmp_path, capsys):
    kw, expected = STUDY_CODE_FAILS[name]
    study = _plugin(tmp_path, **kw)
    out = tmp_path / "run"
    code = main(["run", str(study), "--quiet", "--out", str(out)])
    captured = capsys.readouterr()
    line = _one_line(captured.err)
    assert code == 1 and expected in line, (name, code, captured.err)
    # the records are kept: claims.json (with the claims-error claim), results.jsonl, the report
    assert (out / "results.jsonl").stat().st_size > 0 and (out / "report.html").exists()
    claims = json.loads((out / "claims.json").read_text())
    if "claims" in kw:
        assert [c["id"] for c in claims] == ["claims-error"]
    for argv in (["report", str(out)], ["report", str(out), "--strict"]):
        assert main(argv) == 1
        assert expected in _one_line(capsys.readouterr().err)


# --- damaged readers: one line naming the file, never a crash or a hang -----------------------

def _edit_json(path: Path, change) -> None:
    path.write_text(change(json.loads(path.read_text())))


def _deep(n: int) -> str:
    return "[" * n + "]" * n


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


READER_ROWS = {
    "manifest.json nested 100000 deep (report)": lambda r, t: (
        (_copy(r, t) / "manifest.json").write_text(_deep(100000)), ["report", str(t / "r")])[1],
    "manifest.json with lr=NaN (report)": lambda r, t: (
        _edit_json(_copy(r, t) / "manifest.json", lambda m: json.dumps(m).replace('"lr": 0.5', '"lr": NaN', 1)),
        ["report", str(t / "r")])[1],
    "manifest.json with lr=1e999 (rerun)": lambda r, t: (
        _edit_json(_copy(r, t) / "manifest.json", lambda m: json.dumps(m).replace('"lr": 0.5', '"lr": 1e999', 1)),
        ["rerun", str(t / "r"), "--quiet", "--out", str(t / "new")])[1],
    "manifest.json seeds hold a 5000-digit integer (report)": lambda r, t: (
        _edit_json(_copy(r, t) / "manifest.json", lambda m: json.dumps({**m, "seeds": [0]}).replace(
            '"seeds": [0]', '"seeds": [' + "9" * 5000 + "]")), ["report", str(t / "r")])[1],
    "manifest.json a named pipe (report)": lambda r, t: (_fifo(_copy(r, t) / "manifest.json"), ["report", str(t / "r")])[1],
    "store.sqlite a named pipe (report)": lambda r, t: (_fifo(_copy(r, t) / "store.sqlite"), ["report", str(t / "r")])[1],
    "claims.json nested 100000 deep (compare)": lambda r, t: (
        (_copy(r, t) / "claims.json").write_text(_deep(100000)), ["compare", str(t / "r"), str(r)])[1],
    "claims.json evidence nested 100 deep (compare)": lambda r, t: (
        _edit_json(_copy(r, t) / "claims.json", lambda c: json.dumps([{**c[0], "evidence": {"x": json.loads(_deep(100))}}])),
        ["compare", str(t / "r"), str(r)])[1],
    "claims.json effect a string (compare)": lambda r, t: (
        _edit_json(_copy(r, t) / "claims.json", lambda c: json.dumps([{**c[0], "effect": "big"}])),
        ["compare", str(t / "r"), str(r)])[1],
    "claims.json kind null (compare)": lambda r, t: (
        _edit_json(_copy(r, t) / "claims.json", lambda c: json.dumps([{**c[0], "kind": None}])),
        ["compare", str(t / "r"), str(r)])[1],
    "claims.json a named pipe (compare)": lambda r, t: (_fifo(_copy(r, t) / "claims.json"), ["compare", str(t / "r"), str(r)])[1],
    "claims.json a named pipe (export)": lambda r, t: (_fifo(_copy(r, t) / "claims.json"),
                                                       ["export", str(t / "r"), "--out", str(t / "x.csv")])[1],
    "results.jsonl with a garbage line (rerun)": lambda r, t: (
        (_copy(r, t) / "results.jsonl").write_text((r / "results.jsonl").read_text() + "garbage{\n"),
        ["rerun", str(t / "r"), "--quiet", "--out", str(t / "new")])[1],
    "results.jsonl a named pipe (rerun)": lambda r, t: (
        _fifo(_copy(r, t) / "results.jsonl"), ["rerun", str(t / "r"), "--quiet", "--out", str(t / "new")])[1],
}


@pytest.fixture
def alarm():
    """Fail a test that blocks (a reader opening a named pipe) instead of hanging the suite."""
    import signal

    def hung(signum, frame):
        raise TimeoutError("a reader blocked")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(120)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("name", list(READER_ROWS))
def test_a_damaged_record_is_one_line_naming_it(name, tmp_path, capsys, smoke, alarm):
    argv = READER_ROWS[name](smoke, tmp_path)
    capsys.readouterr()
    before = _snapshot(tmp_path)
    code = main(argv)
    line = _one_line(capsys.readouterr().err)
    assert code == 2, (name, code, line)
    assert line.startswith("robustlab: error: ") and str(tmp_path / "r") in line, line
    assert _snapshot(tmp_path) == before, f"{name}: something was written or changed"


def test_report_rebuilds_results_with_a_garbage_line_from_the_store(tmp_path, capsys, smoke):
    run = _copy(smoke, tmp_path)
    (run / "results.jsonl").write_text((smoke / "results.jsonl").read_text() + "garbage{\n")
    assert main(["report", str(run)]) == 0
    assert (run / "results.jsonl").read_bytes() == (smoke / "results.jsonl").read_bytes()
    # and a rerun of the repaired run compares as it should
    assert main(["rerun", str(run), "--quiet", "--out", str(tmp_path / "new")]) == 0
    assert "byte-identical" in capsys.readouterr().out


def test_runs_and_load_never_block_on_a_named_pipe(tmp_path, smoke, alarm):
    import robustlab

    for name in ("manifest.json", "claims.json"):
        _fifo(_copy(smoke, tmp_path, name) / name)
    _fifo(_copy(smoke, tmp_path, "store") / "store.sqlite")
    df = robustlab.runs(tmp_path)
    # the runs whose manifest or store is a pipe are not readable as runs: skipped, without waiting
    assert sorted(Path(p).name for p in df["path"]) == ["claims.json"]
    with pytest.raises(robustlab.UserError, match="manifest.json is damaged"):
        robustlab.load(tmp_path / "manifest.json")
    with pytest.raises(robustlab.UserError, match="store.sqlite is not allowed: it is not a regular file"):
        robustlab.load(tmp_path / "store")


# --- completeness and provenance, to every reader ----------------------------------------------

@pytest.fixture(scope="module")
def partial(tmp_path_factory) -> Path:
    """A run with 2 of its 4 points failed (lr=0.2 raises)."""
    out = tmp_path_factory.mktemp("runs") / "partial"
    assert main([*SMOKE, "--grid", "lr=0.2,0.5", "--set", "fail_on_lr=0.2", "--out", str(out)]) == 0
    return out


def test_compare_says_a_run_is_partial(partial, smoke, capsys):
    assert main(["compare", str(partial), str(smoke)]) == 0
    out = capsys.readouterr().out
    assert "PARTIAL: A holds points 2/4 done, 2 failed" in out
    assert out.strip().splitlines()[-1].endswith("PARTIAL runs: A (smoke)")
    assert main(["compare", str(smoke), str(smoke)]) == 0 and "PARTIAL" not in capsys.readouterr().out


def test_export_carries_a_complete_column(partial, smoke, tmp_path):
    import pandas as pd

    for run, complete in ((partial, False), (smoke, True)):
        out = tmp_path / f"{run.name}.csv"
        assert main(["export", str(run), "--out", str(out)]) == 0
        for f in (out, out.with_name(f"{run.name}.claims.csv")):
            assert set(pd.read_csv(f)["complete"]) == {complete}, f


def test_load_flags_a_partial_run_and_refuses_an_emptied_store(partial, smoke, tmp_path):
    import sqlite3

    import robustlab
    from robustlab.studies.base import PartialRunWarning

    with pytest.warns(PartialRunWarning, match="points 2/4 done, 2 failed"):
        df = robustlab.load(partial)
    assert df.attrs["complete"] is False and df.attrs["completeness"]["failed"] == 2
    assert robustlab.load(smoke).attrs["complete"] is True
    run = _copy(smoke, tmp_path)
    with sqlite3.connect(run / "store.sqlite") as db:
        db.execute("DELETE FROM points")
    with pytest.raises(robustlab.UserError, match="holds 0 result rows and results.jsonl 16"):
        robustlab.load(run)


def test_runs_flags_partial_runs_and_never_counts_a_claim_of_kind_null(partial, smoke, tmp_path):
    import robustlab

    _copy(partial, tmp_path, "partial")
    _copy(smoke, tmp_path, "smoke")
    nulled = _copy(smoke, tmp_path, "nulled")
    _edit_json(nulled / "claims.json", lambda c: json.dumps([{**d, "kind": None, "verdict": "reproduced"} for d in c]))
    df = robustlab.runs(tmp_path)
    by = {Path(p).name: row for p, row in zip(df["path"], df.to_dict("records"))}
    assert by["partial"]["complete"] is False and by["partial"]["points_done"] == 2
    assert by["smoke"]["complete"] is True and by["smoke"]["points_done"] == 4
    assert "nulled" not in by  # its claims.json is damaged: no claim of it is counted


def test_a_value_edited_in_the_store_is_reported_not_republished(smoke, tmp_path, capsys):
    import sqlite3

    import robustlab

    run = _copy(smoke, tmp_path)
    with sqlite3.connect(run / "store.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM points WHERE checksum IS NULL").fetchone() == (0,)
        key, rows = db.execute("SELECT key, rows FROM points LIMIT 1").fetchone()
        db.execute("UPDATE points SET rows=? WHERE key=?", (rows.replace('"loss": ', '"loss": 1', 1), key))
    before = _snapshot(tmp_path)
    assert main(["report", str(run)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "do not match the checksum written when they finished" in line and key in line
    assert _snapshot(tmp_path) == before
    with pytest.raises(robustlab.UserError, match="checksum"):
        robustlab.load(run)
    # the same edit with the checksum recomputed still differs from results.jsonl
    from robustlab.sweep.store import checksum

    with sqlite3.connect(run / "store.sqlite") as db:
        p, s, r = db.execute("SELECT params, status, rows FROM points WHERE key=?", (key,)).fetchone()
        db.execute("UPDATE points SET checksum=? WHERE key=?", (checksum(key, p, s, r), key))
    assert main(["report", str(run)]) == 2
    assert "differ from the rows results.jsonl holds" in _one_line(capsys.readouterr().err)


# --- the Python API: every bad argument is a UserError ------------------------------------------

def _api_cases(run_dir: Path, tmp: Path) -> dict:
    import math

    import torch

    import robustlab

    (tmp / "afile.txt").write_text("x")
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 3))
    x, y = torch.rand(8, 4), torch.randint(0, 3, (8,))

    class NaNModel(torch.nn.Module):
        def forward(self, x):
            return torch.full((x.shape[0], 3), float("nan"))

    R, E = robustlab.run, robustlab.evaluate
    return {
        "run(None)": lambda: R(None), "run(123)": lambda: R(123), "run('')": lambda: R(""),
        "run(seeds='2')": lambda: R("smoke", seeds="2"), "run(seed=-1)": lambda: R("smoke", seed=-1),
        "run(seed=1.5)": lambda: R("smoke", seed=1.5), "run(set=[1])": lambda: R("smoke", set=[1]),
        "run(grid='lr=1')": lambda: R("smoke", grid="lr=1"), "run(grid=[1])": lambda: R("smoke", grid=[1]),
        "run(out=5)": lambda: R("smoke", out=5), "run(workers='2')": lambda: R("smoke", workers="2"),
        "run(workers=0)": lambda: R("smoke", workers=0), "run(threads=1.5)": lambda: R("smoke", threads=1.5),
        "run(threads=None)": lambda: R("smoke", threads=None), "run(device=None)": lambda: R("smoke", device=None),
        "run(backend=None)": lambda: R("smoke", backend=None), "run(preset=None)": lambda: R("smoke", preset=None),
        "run(reuse='dir')": lambda: R("smoke", reuse="dir"), "run(reuse=[None])": lambda: R("smoke", reuse=[None]),
        "run(quiet='yes')": lambda: R("smoke", quiet="yes"), "run(data_dir=5)": lambda: R("smoke", data_dir=5),
        "run(ray_address=5)": lambda: R("smoke", ray_address=5),
        "load(None)": lambda: robustlab.load(None), "load(missing)": lambda: robustlab.load(tmp / "missing"),
        "load(a file)": lambda: robustlab.load(tmp / "afile.txt"), "load(123)": lambda: robustlab.load(123),
        "load(no run)": lambda: robustlab.load(tmp),
        "runs(None)": lambda: robustlab.runs(None), "runs(5)": lambda: robustlab.runs(5),
        "compare(None, None)": lambda: robustlab.compare(None, None), "compare(run, 5)": lambda: robustlab.compare(run_dir, 5),
        "rerun(None)": lambda: robustlab.rerun(None), "rerun(run, workers=0)": lambda: robustlab.rerun(run_dir, workers=0),
        "rerun(run, out=5)": lambda: robustlab.rerun(run_dir, out=5),
        "rerun(run, options=5)": lambda: robustlab.rerun(run_dir, options=5),
        "evaluate(attacks=5)": lambda: E(model, x, y, eps=0.1, attacks=5),
        "evaluate(bounds='x')": lambda: E(model, x, y, eps=0.1, attacks="fgsm", bounds="x"),
        "evaluate(bounds=(1, 0))": lambda: E(model, x, y, eps=0.1, attacks="fgsm", bounds=(1, 0)),
        "evaluate(batch_size=None)": lambda: E(model, x, y, eps=0.1, attacks="fgsm", batch_size=None),
        "evaluate(seed='x')": lambda: E(model, x, y, eps=0.1, attacks="fgsm", seed="x"),
        "evaluate(eps=nan)": lambda: E(model, x, y, eps=math.nan, attacks="fgsm"),
        "evaluate(a model whose outputs are NaN)": lambda: E(NaNModel(), x, y, eps=0.1, attacks="fgsm"),
    }


def test_every_bad_api_argument_is_a_user_error(smoke, tmp_path):
    import robustlab

    raw = {}
    for name, call in _api_cases(smoke, tmp_path).items():
        try:
            call()
            raw[name] = "no error"
        except robustlab.UserError as exc:
            assert "\n" not in str(exc), (name, str(exc))
        except BaseException as exc:  # noqa: BLE001 - what the test looks for
            raw[name] = f"{type(exc).__name__}: {exc}"
    assert raw == {}
    with pytest.raises(robustlab.UserError, match="outputs are not finite"):
        _api_cases(smoke, tmp_path)["evaluate(a model whose outputs are NaN)"]()


def test_a_real_ctrl_c_in_study_code_stops_the_run_and_is_no_failure(tmp_path):
    """KeyboardInterrupt raised by a study is its failure; a real SIGINT while a point runs in
    this process still stops the run (exit 130), records nothing as failed, and resumes to the
    same results.jsonl as an uninterrupted run."""
    import signal
    import subprocess
    import sys
    import time

    from test_sweep_kill import ARGS, N_POINTS, _recorded

    from robustlab.sweep.store import Store

    out, clean = tmp_path / "interrupted", tmp_path / "clean"
    code = f"import sys; from robustlab.cli import main; sys.exit(main({[*ARGS, '--out', str(out)]!r}))"
    proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "OMP_NUM_THREADS": "1"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    try:
        while _recorded(out / "store.sqlite") < 4:
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "sweep too slow"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    with Store(out / "store.sqlite", readonly=True) as st:
        assert st.count("failed") == 0 and 4 <= st.count("done") < N_POINTS
    assert main([*ARGS, "--out", str(out)]) == 0
    assert main([*ARGS, "--out", str(clean)]) == 0
    assert (out / "results.jsonl").read_bytes() == (clean / "results.jsonl").read_bytes()
