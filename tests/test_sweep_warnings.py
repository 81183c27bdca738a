"""Warnings from the points (assumption checks, evaluation checks) are kept with the points,
shown once each as one readable line, and listed in the report — never printed raw."""

from __future__ import annotations

import dataclasses
import sqlite3
import warnings

from robustlab.attacks.checks import EvaluationWarning, warn_once
from robustlab.data.patches import AssumptionWarning
from robustlab.studies import feature_learning, smoke
from robustlab.studies.base import execute, plan
from robustlab.sweep.runner import SweepOptions, run_group
from robustlab.sweep.store import Store


def test_a_real_assumption_warning_is_kept_with_the_points_not_printed():
    # eps below beta breaks Assumption 2.3; a tiny run of the real study function
    cfg = feature_learning.STUDY.config().replace(eps=0.1, steps=2, n_train=8, n_test=8, probe_every=1,
                                                  eval_every=2, eval_pgd_steps=1, P=8, d=16)
    group = [cfg.replace(seed=0), cfg.replace(seed=1)]
    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")
        entries = run_group(feature_learning.STUDY.run_points, group, "cpu", threads=1)
    assert [e["status"] for e in entries] == ["done", "done"]
    assert not [w for w in escaped if issubclass(w.category, AssumptionWarning)]
    for e in entries:
        assert all(w.startswith("AssumptionWarning: Assumption 2.3") and "\n" not in w for w in e["warnings"])
        assert len([w for w in e["warnings"] if "eps below beta" in w]) == 1


def test_evaluation_warnings_reach_every_group_that_issues_them():
    def fn(cfgs, device):
        warn_once("zero-grad", "all input gradients are exactly zero\n  (check the loss)")
        return [[{"x": 1.0}] for _ in cfgs]

    cfg = smoke.STUDY.config()
    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")
        a = run_group(fn, [cfg.replace(seed=0)], "cpu")
        b = run_group(fn, [cfg.replace(seed=1)], "cpu")
    assert not escaped
    line = "EvaluationWarning: all input gradients are exactly zero (check the loss)"
    assert a[0]["warnings"] == b[0]["warnings"] == [line]
    assert EvaluationWarning.__name__ in line


def _warning_study():
    """The smoke study, whose points at lr 0.5 warn as the assumption checks do."""
    def run_points(cfgs, device):
        if cfgs[0].lr == 0.5:
            warnings.warn("Assumption 2.3 (feature learning, ICLR 2025): eps below beta: eps / max beta = 0.25 < 1",
                          AssumptionWarning, stacklevel=2)
        return smoke.run_points(cfgs, device)

    return dataclasses.replace(smoke.STUDY, run_points=run_points)


def test_a_run_shows_each_warning_once_as_one_line_and_lists_it_in_the_report(tmp_path, capsys):
    study = _warning_study()
    p = plan(study, sets={"epochs": "3"}, grids=["lr=0.1,0.5", "size=4,8"], n_seeds=2)
    out = tmp_path / "run"
    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")
        execute(p, out, SweepOptions(threads=1), progress_label="demo")
    assert not [w for w in escaped if issubclass(w.category, AssumptionWarning)]
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "Assumption 2.3" in ln]
    # two groups (size 4 and 8 at lr 0.5) warned: shown once, one line, no file or source
    assert len(lines) == 1, err
    assert lines[0].startswith("demo: warning: Assumption 2.3 (feature learning, ICLR 2025): eps below beta")
    assert ".py" not in err and "warnings.warn" not in err and "Traceback" not in err
    assert "AssumptionWarning" not in err  # a sentence for a person: the class name stays in the record
    with Store(out / "store.sqlite", readonly=True) as st:
        warned = [r for r in st.done() if r["warnings"]]
    assert sorted((r["params"]["size"], r["params"]["seed"]) for r in warned) == [(4, 0), (4, 1), (8, 0), (8, 1)]
    assert all(r["params"]["lr"] == 0.5 for r in warned)
    html = (out / "report.html").read_text()
    attention = html[html.index("id='attention'"):html.index("</div>", html.index("id='attention'"))]
    assert "eps below beta" in attention and "4 of 8 points" in attention
    # points are labelled by the fields that differ from the base config (lr=0.5, size=8)
    assert "4 of 8 points: seed=0, size=4; seed=1, size=4; seed=0; seed=1" in attention


def test_a_store_from_before_warnings_were_kept_still_reads_and_resumes(tmp_path):
    path = tmp_path / "store.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE points (key TEXT PRIMARY KEY, params TEXT NOT NULL, status TEXT NOT NULL "
                "CHECK (status IN ('done', 'failed')), rows TEXT NOT NULL, reason TEXT, traceback TEXT, "
                "seconds REAL)")
    con.execute("INSERT INTO points VALUES ('a', '{\"seed\": 0}', 'done', '[{\"x\": 1}]', NULL, NULL, 0.1)")
    con.commit()
    con.close()
    with Store(path, readonly=True) as st:
        assert st.done()[0]["warnings"] == [] and st.done()[0]["rows"] == [{"x": 1}]
    with Store(path) as st:  # a resumed run adds the column and records warnings
        st.record([{"key": "b", "params": {"seed": 1}, "status": "done", "rows": [],
                    "warnings": ["AssumptionWarning: x"]}])
        assert [r["warnings"] for r in st.done()] == [[], ["AssumptionWarning: x"]]


def test_the_command_line_shows_other_warnings_as_one_line(capsys, monkeypatch):
    from robustlab import cli

    def cmd_list(args):
        warnings.warn("something to know\n  on two lines", UserWarning, stacklevel=1)
        return 0

    monkeypatch.setattr(cli, "cmd_list", cmd_list)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert cli.main(["list"]) == 0
    err = capsys.readouterr().err
    assert err == "robustlab: warning: Something to know on two lines\n"  # one sentence, no class name
