"""``robustlab run --reuse DIR``: a run takes an earlier run's finished points whose configs
are exactly its own, computes only the rest, and ends with the same records as a run that
computed everything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robustlab import records
from robustlab.cli import main
from robustlab.sweep.store import Store, checksum

GRID = ["--seeds", "2", "--quiet"]


def _run(out, *args):
    return main(["run", "smoke", "--out", str(out), *GRID, *args])


def _table(out):
    with Store(out / "store.sqlite", readonly=True) as s:
        return s.table()


def test_reuse_runs_only_the_new_points_and_gives_the_same_records(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    assert _run(a, "--grid", "lr=0.05,0.1") == 0
    assert _run(b, "--grid", "lr=0.05,0.1,0.2", "--reuse", str(a)) == 0
    m = json.loads((b / "manifest.json").read_text())
    assert m["sweep"]["ran"] == 2 and m["sweep"]["skipped"] == 4  # lr 0.2 x 2 seeds ran
    (src,) = m["reused"]
    assert src["from"] == str(a.resolve()) and src["points"] == 4 and src["device"] == "cpu"
    assert src["code"] == json.loads((a / "manifest.json").read_text())["code"]
    # the same records as a run that computed all six points itself
    assert _run(c, "--grid", "lr=0.05,0.1,0.2") == 0
    assert _table(b) == _table(c)
    assert set(_table(a)) < set(_table(b))
    # a resume with the same --reuse takes nothing new and keeps the record of what it took
    assert _run(b, "--grid", "lr=0.05,0.1,0.2", "--reuse", str(a)) == 0
    m2 = json.loads((b / "manifest.json").read_text())
    assert m2["reused"] == m["reused"] and m2["resumed"] == 1 and m2["sweep"] == m["sweep"]  # nothing ran: kept


def test_reuse_replaces_a_failed_point_and_takes_only_matching_configs(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert _run(a, "--grid", "lr=0.05,0.1") == 0
    assert _run(b, "--grid", "lr=0.1,0.3", "--set", "epochs=12") == 0  # other configs: nothing matches
    done = {k: (p, s, r) for k, p, s, r, _ in _table(b)}
    # mark one of b's points failed, as a crashed group would leave it
    key = next(iter(done))
    with Store(b / "store.sqlite") as s:
        p = s.conn.execute("SELECT params FROM points WHERE key=?", (key,)).fetchone()[0]
        s.conn.execute("UPDATE points SET status='failed', rows='[]', reason='boom', checksum=? WHERE key=?",
                       (checksum(key, p, "failed", "[]"), key))
    (b / "results.jsonl").unlink()  # (a crashed run never wrote that point's rows there)
    before = json.loads((b / "manifest.json").read_text())
    assert _run(b, "--grid", "lr=0.1,0.3", "--set", "epochs=12", "--reuse", str(a)) == 0
    m = json.loads((b / "manifest.json").read_text())
    assert "reused" not in m  # a's points have epochs at the default: none is b's
    assert m["sweep"] == before["sweep"]  # nothing ran (the failed point is not retried without --retry-failed)
    assert _run(b, "--grid", "lr=0.1,0.3", "--set", "epochs=12", "--retry-failed") == 0
    assert {k: (p, s, r) for k, p, s, r, _ in _table(b)} == done


def test_reuse_takes_a_finished_point_over_a_failed_one(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert _run(a, "--grid", "lr=0.05,0.1") == 0
    assert _run(b, "--grid", "lr=0.05,0.1") == 0
    want = _table(b)
    with Store(b / "store.sqlite") as s:
        s.conn.execute("UPDATE points SET status='failed', rows='[]', reason='boom'")
    assert _run(b, "--grid", "lr=0.05,0.1", "--reuse", str(a)) == 0
    assert _table(b) == want
    assert json.loads((b / "manifest.json").read_text())["reused"][0]["points"] == 4


@pytest.mark.parametrize("case", ["missing", "not-a-run", "other-study", "threads", "itself"])
def test_reuse_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, case):
    a, b = tmp_path / "a", tmp_path / "b"
    assert _run(a, "--grid", "lr=0.05") == 0
    capsys.readouterr()
    src, extra, out = a, [], b
    if case == "missing":
        src = tmp_path / "nope"
    elif case == "not-a-run":
        src = tmp_path / "plain"
        src.mkdir()
        (src / "notes.txt").write_text("x")
    elif case == "other-study":
        m = records.read_json(a / "manifest.json")
        records.write_json(a / "manifest.json", {**m, "study": "width-depth-init"})
    elif case == "threads":
        extra = ["--threads", "2"]
    elif case == "itself":
        out = a
    rc = main(["run", "smoke", "--out", str(out), *GRID, "--grid", "lr=0.05", "--reuse", str(src), *extra])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("robustlab: error: --reuse ") and "\n" not in err
    assert "Traceback" not in err
    if case != "itself":
        assert not b.exists()


def test_dry_run_checks_reuse_too(tmp_path, capsys):
    rc = main(["run", "smoke", "--out", str(tmp_path / "b"), *GRID, "--reuse", str(tmp_path / "nope"), "--dry-run"])
    assert rc == 2 and capsys.readouterr().err.startswith("robustlab: error: --reuse ")
    assert not (tmp_path / "b").exists()


def test_reuse_only_reads_its_source(tmp_path, monkeypatch):
    """Nothing is written into a source, not even a write probe: it may sit on a read-only disk."""
    from robustlab import records as rec

    a, b = tmp_path / "a", tmp_path / "b"
    assert _run(a, "--grid", "lr=0.05") == 0
    probed = []
    real = rec.check_writable
    monkeypatch.setattr(rec, "check_writable", lambda path, **kw: (probed.append(Path(path).resolve()), real(path, **kw))[1])
    assert _run(b, "--grid", "lr=0.05,0.1", "--reuse", str(a)) == 0
    assert a.resolve() not in probed and b.resolve() in probed
    assert json.loads((b / "manifest.json").read_text())["reused"][0]["points"] == 2


def test_dry_run_estimates_only_the_points_left(tmp_path, capsys):
    """--dry-run counts out what --reuse would take and what --out holds already (a resume):
    the sampled groups and the estimate are the rest's, nothing is written."""
    a, b = tmp_path / "a", tmp_path / "b"
    assert _run(a, "--grid", "lr=0.05,0.1") == 0
    capsys.readouterr()
    before = _table(a)

    def dry(out, *args) -> list[str]:
        assert _run(out, *args, "--dry-run") == 0
        rows = capsys.readouterr()
        line = next(ln for ln in rows.out.splitlines() if ln.startswith("smoke"))
        return line.split() + [rows.err]

    row = dry(b, "--grid", "lr=0.05,0.1,0.2", "--reuse", str(a))
    assert row[1:4] == ["2", "1", "1"]  # 2 points to run (lr 0.2 x 2 seeds), 1 group, sampled
    assert "4 of 6 points are finished already" in row[-1]
    assert not b.exists()
    row = dry(b, "--grid", "lr=0.05,0.1,0.2")  # nothing to take: all six
    assert row[1] == "6" and "finished already" not in row[-1]
    row = dry(a, "--grid", "lr=0.05,0.1")  # --out holds the whole run: nothing left
    assert row[1:4] == ["0", "0", "0"] and "4 of 4 points are finished already" in row[-1]
    assert _table(a) == before
