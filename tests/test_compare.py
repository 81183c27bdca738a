"""`robustlab compare`: verdicts and effects of two runs side by side; bad input exits 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from robustlab.cli import main
from robustlab.config import UserError
from robustlab.report.compare import compare_dirs, compare_text

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _claim(cid, verdict, effect, interval, threshold=0.0, side="above", **kw):
    return {"id": cid, "statement": f"{cid} holds", "verdict": verdict, "effect": effect, "interval": interval,
            "threshold": threshold, "side": side, "passed": verdict == "reproduced", "evidence": {}, "source": "",
            **kw}


def _run(path: Path, study: str, claims: list[dict], seeds=(0, 1, 2)) -> Path:
    path.mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps({"study": study, "seeds": list(seeds)}))
    (path / "claims.json").write_text(json.dumps(claims))
    return path


def _reproduce(path: Path, runs: dict[str, list[dict]], seed0=0) -> Path:
    path.mkdir(parents=True)
    (path / "reproduce.json").write_text(json.dumps({"studies": list(runs), "preset": "quick", "seed": seed0}))
    for name, claims in runs.items():
        _run(path / name, name, claims, seeds=range(seed0, seed0 + 3))
    return path


A = [_claim("x", "reproduced", 0.5, [0.4, 0.6]), _claim("y", "inconclusive", 0.1, [-0.1, 0.3], seeds_needed=9),
     _claim("z", "reproduced", 1.0, [0.9, 1.1])]


def test_same_verdicts_and_overlapping_effects_are_flagged_same(tmp_path):
    a = _run(tmp_path / "a", "s", A)
    b = _run(tmp_path / "b", "s", [dict(c, effect=c["effect"] + 0.01) for c in A], seeds=(100, 101, 102))
    sa, sb, rows = compare_dirs(a, b)
    assert [r.flags for r in rows] == [[], [], []]
    text = compare_text(sa, sb, rows)
    assert "seeds A 0–2, B 100–102" in text
    assert "differs: seeds: A 0–2 | B 100–102" in text  # the only recorded setting that differs
    assert text.splitlines()[-1] == ("compared 3 claims: 0 verdict changes, 0 with effects outside each other's "
                                     "interval; 1 configuration difference")


def test_verdict_changes_and_effects_apart_are_flagged(tmp_path):
    a = _run(tmp_path / "a", "s", A)
    b_claims = [_claim("x", "reproduced", 0.8, [0.7, 0.9]),  # same verdict, effect outside A's interval
                _claim("y", "reproduced", 0.25, [0.2, 0.3]),  # verdict changed, A's effect outside B's interval
                _claim("w", "contradicted", -1.0, [-1.2, -0.8])]  # z missing, w new
    sa, sb, rows = compare_dirs(a, _run(tmp_path / "b", "s", b_claims))
    flags = {r.claim: r.flags for r in rows}
    assert flags == {"x": ["effects apart"], "y": ["VERDICT CHANGED", "effects apart"], "z": ["VERDICT CHANGED"],
                     "w": ["VERDICT CHANGED"]}
    text = compare_text(sa, sb, rows)
    assert "(missing)" in text and "A: 0.5 [0.4, 0.6] > 0" in text
    assert main(["compare", str(a), str(tmp_path / "b")]) == 0
    assert main(["compare", str(a), str(tmp_path / "b"), "--fail-on-change"]) == 1


def test_reproduce_directories_match_studies_by_name_and_a_run_matches_its_study(tmp_path, capsys):
    ra = _reproduce(tmp_path / "ra", {"s": A, "t": A[:1]})
    rb = _reproduce(tmp_path / "rb", {"t": A[:1], "s": A}, seed0=100)
    _, _, rows = compare_dirs(ra, rb)
    assert [(r.study, r.claim) for r in rows] == [("s", "x"), ("s", "y"), ("s", "z"), ("t", "x")]
    assert main(["compare", str(ra), str(rb), "--fail-on-change"]) == 0
    assert main(["compare", str(ra / "s"), str(rb), "--fail-on-change"]) == 0  # a run against a reproduce dir
    out = capsys.readouterr().out
    assert "t: only in B (not compared)" in out


def test_old_claims_without_verdicts_compare_by_passed(tmp_path):
    old = [{"id": "x", "statement": "s", "passed": True, "evidence": {}}]
    a = _run(tmp_path / "a", "s", old)
    b = _run(tmp_path / "b", "s", [dict(old[0], passed=False)])
    _, _, rows = compare_dirs(a, b)
    assert rows[0].verdict_a == "reproduced" and rows[0].verdict_b == "contradicted" and rows[0].changed


@pytest.mark.parametrize("make, what", [
    (lambda p: p / "nope", "no such directory"),
    (lambda p: (p / "empty").mkdir() or p / "empty", "not a robustlab run directory"),
    (lambda p: _run(p / "other", "other-study", A), "different studies"),
    (lambda p: (p / "f.txt").write_text("x") and p / "f.txt", "not a directory"),
])
def test_bad_input_is_a_user_error(tmp_path, make, what):
    a = _run(tmp_path / "a", "s", A)
    with pytest.raises(UserError, match=what):
        compare_dirs(a, make(tmp_path))


def test_unfinished_run_without_claims_is_a_user_error(tmp_path):
    a = _run(tmp_path / "a", "s", A)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "manifest.json").write_text(json.dumps({"study": "s"}))
    with pytest.raises(UserError, match="no claims.json"):
        compare_dirs(a, tmp_path / "b")


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "robustlab.cli", "compare", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_cli_compare_bad_input_one_line_exit_2(tmp_path):
    a = _run(tmp_path / "a", "s", A)
    other = _run(tmp_path / "o", "other", A)
    (tmp_path / "empty").mkdir()
    for b in (tmp_path / "missing", tmp_path / "empty", other):
        r = _cli(str(a), str(b))
        assert r.returncode == 2, r
        err = r.stderr.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("robustlab: error: "), r.stderr
        assert "Traceback" not in r.stderr and r.stdout == ""


def test_cli_compare_a_run_and_a_rerun_with_other_base_seeds(tmp_path):
    """Two real smoke runs (seconds): same verdicts, exit 0 even with --fail-on-change."""
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["run", "smoke", "--out", str(a), "--quiet"]) == 0
    assert main(["run", "smoke", "--out", str(b), "--quiet", "--seed", "100"]) == 0
    r = _cli(str(a), str(b), "--fail-on-change")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "smoke-accuracy" in r.stdout and "REPRODUCED" in r.stdout
    assert "seeds A 0,1, B 100,101" in r.stdout and "0 verdict changes" in r.stdout


def test_an_interval_edge_one_rounding_step_from_the_effect_is_not_apart():
    """A Wilson bound rounds to 1 − 1e-16 while the accuracy is exactly 1: the same claim in two
    runs must not read "effects apart" (it did, comparing a run with itself)."""
    from robustlab.report.compare import _outside

    assert not _outside(1.0, [0.9449974429864586, 0.9999999999999999])
    assert not _outside(0.0, [1e-17, 0.2])
    assert _outside(1.0, [0.5, 0.99])
    assert _outside(-1.0, [-0.99, 0.5])
